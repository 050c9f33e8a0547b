#!/usr/bin/env bash
# Smoke test of the frozen binary, headless: `vramplan --self-test` must print exactly one
# "self-test ok: ..." line and nothing else. Anything more on stdout, anything at all on
# stderr (Qt warnings, tracebacks, library-loading noise), a non-zero exit, a missing
# report or a blank screenshot fails it.
#
#   packaging/smoke_test.sh [BINARY] [OUT_DIR]
#
# BINARY defaults to this OS's one-folder build under dist/; OUT_DIR (default
# build/smoke) receives the screenshot, the report and the captured output.
set -uo pipefail
cd "$(dirname "$0")/.."

binary=${1:-}
if [[ -z "$binary" ]]; then
  case "$(uname -s)" in
    Darwin) binary="dist/VRAM Planner.app/Contents/MacOS/vramplan" ;;
    MINGW* | MSYS* | CYGWIN*) binary="dist/vramplan/vramplan.exe" ;;
    *) binary="dist/vramplan/vramplan" ;;
  esac
fi
out=${2:-build/smoke}
if [[ ! -x "$binary" ]]; then
  echo "smoke: no binary at '$binary' (run 'make dist' first)" >&2
  exit 1
fi
mkdir -p "$out"
rm -f "$out/selftest.png" "$out/report.txt" "$out/stdout.txt" "$out/stderr.txt"

# Headless everywhere; no user settings read or written (the self-test uses a temp folder).
export QT_QPA_PLATFORM=offscreen
started=$(date +%s)
"$binary" --self-test --out "$out/selftest.png" --report "$out/report.txt" \
  >"$out/stdout.txt" 2>"$out/stderr.txt"
status=$?
elapsed=$(($(date +%s) - started))

failed=0
complain() {
  echo "smoke: FAIL: $*" >&2
  failed=1
}
# Windowed Windows builds have no stdout: the report file carries the line there.
report=$(cat "$out/report.txt" 2>/dev/null || true)
stdout=$(cat "$out/stdout.txt")
[[ $status -eq 0 ]] || complain "exit status $status"
[[ ! -s "$out/stderr.txt" ]] || complain "unexpected output on stderr"
[[ "$report" == "self-test ok: "* && "$report" != *$'\n'* ]] || complain "report is not one 'self-test ok' line"
if [[ -n "$stdout" && "$stdout" != "$report" ]]; then
  complain "stdout holds more than the report line"
fi
[[ -s "$out/selftest.png" ]] || complain "no screenshot written"

if [[ $failed -ne 0 ]]; then
  for stream in stdout stderr; do
    echo "---- $stream ----" >&2
    head -c 4000 "$out/$stream.txt" >&2
  done
  echo "---- report ----" >&2
  echo "$report" >&2
  exit 1
fi
echo "smoke: ok in ${elapsed} s: $binary"
echo "$report"

#!/usr/bin/env bash
# The cases whose fake-CUDA numbers most need a real GPU to confirm them, in one short run:
# DoRA (a known real/fake gap on CPU, NOTES.md), fused vs foreach AdamW, GradScaler, an MoE
# through grouped_mm, two serving cases, and one rank's ring-attention kernels for torchtitan's
# context-parallel rows (tools/measure/ring_step_check.py, issue 24). Needs a CUDA build of torch 2.13.0 with
# transformers 5.24.0 and peft 0.21.2 (not this repo's CPU pin). Writes to $OUT (default
# /tmp/measured-gpu) and prints, per training case, the card's allocated and reserved peaks beside
# the estimate's and the committed fake-CUDA peak (tools/measure/gpu_report.py); per serving case,
# the card's peak beside the fake-CUDA one.
#
# `gpu_check.sh time` runs only the two timing checks of issue 24 (docs/TRAINING_TIME.md, "A matmul's compute and
# its traffic" and "Which backend PyTorch's SDPA runs"): small cuBLAS matmuls against the app's sum and max, and
# SDPA's backends on the card; any CUDA build of torch, no transformers or peft (tools/measure/README.md, "Timing
# checks on a lent card"). `memory` runs only the cases above; no argument runs both, memory first.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/measured-gpu}"
PY="${PY:-python}"
PART="${1:-all}"
case "$PART" in
  all | memory | time) ;;
  *) echo "gpu_check.sh: the part must be all, memory or time, not '$PART'" >&2; exit 2 ;;
esac

# Issue 24's time questions: each tool first prints its expected seconds on the card (its kernels or calls x the app's
# predicted time: expected_seconds in gemm_timing.py and sdpa_timing.py) and stops starting new ones past its budget;
# together under 5 minutes on one H100 (about 10 s of matmuls and 80 s of SDPA predicted, plus torch's start).
# The JSON lines go to $OUT/time (stdout is dropped: the files hold it), the report to the terminal and report.txt.
time_checks() {
  mkdir -p "$OUT/time"
  # One tool failing leaves the other to run; the report reads what either wrote (a stopped run's .partial too).
  $PY -m tools.measure.gemm_timing --out "$OUT/time/gemm.jsonl" --budget-s 90 >/dev/null || echo "gemm_timing failed" >&2
  $PY -m tools.measure.sdpa_timing --out "$OUT/time/sdpa.jsonl" --budget-s 180 >/dev/null || echo "sdpa_timing failed" >&2
  $PY -m tools.measure.time_report "$OUT/time" | tee "$OUT/time/report.txt"
}
if [ "$PART" = time ]; then
  time_checks
  exit 0
fi
$PY -m tools.measure benchmarks/accuracy/cases.json --backend cuda --out "$OUT/accuracy" \
  --only llama32-1b-dora-r16-trainerbf16-adamw-sdpa-b4-s2048 \
  --only llama32-1b-lora-r16-trainerbf16-adamw-sdpa-b4-s2048 \
  --only qwen25-05b-full-fp32-adamw-sdpa-b2-s512 \
  --only qwen25-05b-full-fp32-adamw-fused-sdpa-b2-s512 \
  --only qwen25-05b-full-fp16amp-adamw-sdpa-b4-s1024 \
  --only qwen15moe-a27b-lora-r16-qkvo-trainerbf16-adamw-sdpa-b2-s2048
$PY -m tools.measure benchmarks/serving/cases.json --backend cuda --out "$OUT/serving" \
  --only hf-llama32-1b-b4-s8192 --only hf-mistral-7b-b2-s8192
# Allocated and reserved peaks against the estimate's (and the fake-CUDA twin), per case.
CARD="$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits 2>/dev/null | head -1 || true)"
CARD_ARGS=()
if [ -n "$CARD" ]; then
  CARD_ARGS=(--gpu-name "${CARD%%,*}" --gpu-memory-mib "$(echo "${CARD##*,}" | tr -d ' ')")
fi
$PY -m tools.measure.gpu_report "$OUT/accuracy" "${CARD_ARGS[@]}"
$PY - "$OUT" <<'PYEOF'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for kind, key in (("serving", "peak_bytes"),):
    for f in sorted((out / kind).glob("*.json")):
        gpu = json.loads(f.read_text())
        fake = json.loads((pathlib.Path("benchmarks") / kind / "measured" / f.name).read_text())
        d = (gpu[key] - fake[key]) / fake[key] * 100
        extra = (gpu[key] - fake[key]) / 2**20
        # A card's peak holds the generating thread's cuBLAS workspace, which fake tensors do not:
        # 32 MiB on sm90, 8.125 MiB elsewhere (core.runtime.cublas_workspace; the estimate counts it
        # in generate's overhead, not in peak_bytes).
        print(f"{f.stem}: gpu {gpu[key]:,} fake {fake[key]:,} ({d:+.2f} %, {extra:+.1f} MiB; "
              "one cuBLAS workspace expected: 32 MiB on sm90, 8.125 MiB elsewhere)")
PYEOF
# Issue 24's context-parallel rows (docs/TRAINING_TIME.md): one rank's ring-attention kernels and
# merges at CP 1 / 2 / 4 / 8 with Llama 3.1 8B's shapes, eager and with the merge compiled, beside
# the step seconds the model and the published rows give attention (about 1 minute on an H100).
$PY -m tools.measure.ring_step_check --compile --out "$OUT/ring"
if [ "$PART" = all ]; then
  time_checks
fi

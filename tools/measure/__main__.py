"""CLI: python -m tools.measure CASES.json [--only ID ...] [--out DIR] [--backend auto|fake-cuda|cuda|cpu].

torch is imported only after the backend is chosen: fake-cuda must preload its native shim first.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

from . import fake_cuda

REPO = Path(__file__).resolve().parents[2]


def _choose_backend(requested: str) -> str:
    if requested == "fake-cuda":
        fake_cuda.preload()
        return "fake-cuda"
    if requested in ("cuda", "cpu", "fake-cpu"):
        return requested
    # auto: a CPU-only build gets fake-cuda; a CUDA build with a GPU gets cuda.
    if fake_cuda.is_cpu_only_build():
        fake_cuda.preload()
        return "fake-cuda"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    raise SystemExit("CUDA build of torch but no GPU visible: use --backend cpu, or a CPU-only torch for fake-cuda")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.measure", description=__doc__)
    ap.add_argument("cases", type=Path, help="cases JSON (format vramplan-accuracy-cases)")
    ap.add_argument("--only", action="append", default=[], help="case id to run (repeatable)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "accuracy" / "measured")
    ap.add_argument("--backend", default="auto", choices=["auto", "fake-cuda", "cuda", "cpu", "fake-cpu"])
    ap.add_argument("--skip-existing", action="store_true", help="skip cases whose output file exists")
    args = ap.parse_args(argv)

    backend = _choose_backend(args.backend)

    from . import runner  # imports torch

    doc = json.loads(args.cases.read_text())
    if doc.get("format") != "vramplan-accuracy-cases":
        raise SystemExit(f"{args.cases}: not a vramplan-accuracy-cases file")
    cases = doc["cases"]
    if args.only:
        known = {c["id"] for c in cases}
        missing = [i for i in args.only if i not in known]
        if missing:
            raise SystemExit(f"unknown case id(s): {', '.join(missing)}")
        cases = [c for c in cases if c["id"] in args.only]
    configs = runner.load_model_configs()
    print(f"backend={backend} cases={len(cases)} out={args.out}", flush=True)
    failures = 0
    t_all = time.perf_counter()
    for case in cases:
        out_path = args.out / f"{case['id']}.json"
        if args.skip_existing and out_path.exists():
            print(f"skip {case['id']} (exists)", flush=True)
            continue
        if case["model"] not in configs:
            print(f"FAIL {case['id']}: model {case['model']!r} not in models.json", flush=True)
            failures += 1
            continue
        try:
            res, diag = runner.measure_case(case, configs[case["model"]], backend)
        except Exception:  # noqa: BLE001 - report and go on with the next case
            failures += 1
            print(f"FAIL {case['id']}:\n{traceback.format_exc()}", flush=True)
            continue
        runner.write_atomic(out_path, res)
        bd = " ".join(f"{k}={v / 2**30:.2f}" for k, v in res["breakdown_at_peak"].items() if v)
        print(
            f"ok   {case['id']}: peak {res['peak_allocated_bytes'] / 2**30:.3f} GiB "
            f"(step {res['peak_step']} {res['peak_phase']}) [{bd}] "
            f"sdpa={diag['sdpa_kernels']} masked={diag['sdpa_masked_calls']} {res['wall_seconds']}s",
            flush=True,
        )
    print(f"done in {time.perf_counter() - t_all:.1f}s, {failures} failure(s)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

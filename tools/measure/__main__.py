"""CLI: python -m tools.measure CASES.json [--only ID ...] [--out DIR] [--backend auto|fake-cuda|cuda|cpu].

CASES.json is an accuracy, serving or parallel (one DDP / FSDP2 rank) cases file.

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
DEFAULT_OUT = REPO / "benchmarks" / "accuracy" / "measured"


def _case_config(case: dict, catalogue: dict) -> dict:
    """The HF config a case names: `config` (a config.json path relative to the repo, for
    architectures the catalogue lacks) or `model` (an id in resources/models.json)."""
    if case.get("config"):
        path = (REPO / case["config"]).resolve()
        if REPO not in path.parents or not path.is_file():
            raise ValueError(f"config {case['config']!r}: no such file inside the repository")
        return json.loads(path.read_text())
    if case["model"] not in catalogue:
        raise ValueError(f"model {case['model']!r} not in models.json (give 'config' for others)")
    return catalogue[case["model"]]


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
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--backend", default="auto", choices=["auto", "fake-cuda", "cuda", "cpu", "fake-cpu"])
    ap.add_argument("--skip-existing", action="store_true", help="skip cases whose output file exists")
    args = ap.parse_args(argv)

    backend = _choose_backend(args.backend)

    from . import runner  # imports torch

    doc = json.loads(args.cases.read_text())
    if doc.get("format") == "vramplan-accuracy-cases":
        measure = runner.measure_case
    elif doc.get("format") == "vramplan-serving-cases":
        measure = runner.measure_serving_case
        if args.out == DEFAULT_OUT:
            args.out = REPO / "benchmarks" / "serving" / "measured"
    elif doc.get("format") == "vramplan-parallel-cases":
        from . import parallel  # imports torch.distributed

        measure = parallel.measure_parallel_case
        if args.out == DEFAULT_OUT:
            args.out = REPO / "benchmarks" / "parallel" / "measured"
    else:
        raise SystemExit(
            f"{args.cases}: not a vramplan-accuracy-cases, vramplan-serving-cases or vramplan-parallel-cases file"
        )
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
        try:
            config = _case_config(case, configs)
        except ValueError as exc:
            print(f"FAIL {case['id']}: {exc}", flush=True)
            failures += 1
            continue
        try:
            res, diag = measure(case, config, backend)
        except Exception:
            failures += 1
            print(f"FAIL {case['id']}:\n{traceback.format_exc()}", flush=True)
            continue
        runner.write_atomic(out_path, res)
        peak = res.get("peak_allocated_bytes", res.get("peak_bytes", 0))
        bd_doc = res.get("breakdown_at_peak") or res.get("breakdown") or {}
        bd = " ".join(f"{k}={v / 2**30:.2f}" for k, v in bd_doc.items() if v)
        print(
            f"ok   {case['id']}: peak {peak / 2**30:.3f} GiB "
            f"(step {res.get('peak_step', 1)} {res['peak_phase']}) [{bd}] "
            f"sdpa={diag['sdpa_kernels']} masked={diag['sdpa_masked_calls']} {res['wall_seconds']}s",
            flush=True,
        )
    print(f"done in {time.perf_counter() - t_all:.1f}s, {failures} failure(s)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Small matmuls on a card: does a kernel take compute + traffic (the app's sum) or the larger of the two?

The open question of docs/TRAINING_TIME.md, "A matmul's compute and its traffic" (branch h84roof, issue 24): the time
model (core.training.speed ``_matmul`` / ``step_work``) times each pass of each linear as
``gemm:<family>/<kind>`` × its padded FLOPs (whole tiles and waves, core.training.gemm_shape) at the dtype's peak
*plus* ``gemm_bytes`` × its operand bytes ((m·k + k·n) in the operand dtype + m·n in 2 bytes) at the bandwidth. At
256-2,048 rows × 4,096² the two terms are of one size and the sum and the roofline's max(compute, traffic) differ
most; the corpus did not settle it (that section's tables: no rule won on every table). This script times the
kernels themselves.

The sweep (``shapes()``): nn.Linear's three passes (forward x·Wᵀ, input gradient dy·W, weight gradient dyᵀ·x, each
with the operand layouts autograd hands cuBLAS) of a 4,096 × 4,096 weight at 256-2,048 rows and, as anchors where
compute rules, 4,096-16,384 rows, in bf16 and fp16 (``torch.matmul``) and, on a card with fp8 tensor cores, fp8
(``torch._scaled_mm`` with per-tensor scales, e4m3 activations and weights, e5m2 gradients as torchao's float8
training casts grad_output, pytorch/ao torchao/float8/float8_linear.py ``NoopFwToFloat8E5M2Bw*``: the tensorwise
recipe, the app's ``fp8-tensorwise``); and LoRA's two matmuls (rank 8-64 × 4,096) at 256-8,192 rows in bf16.
Each kernel: operands of random values, warm-up, then N runs each after a write of 256 MiB (past any card's L2, so
no run reads the last one's operands from it), CUDA events around the kernel alone; the median is reported.

One JSON line per kernel (``--out`` writes them to a file too): the card, its compute capability, torch, CUDA,
cuBLAS(Lt), the shape and pass, the card's median / min / max milliseconds and the app's prediction for the same
kernel (its two terms before and after the shipped coefficients, their sum and their max: the app's own functions,
core.training.speed._matmul and core.training.efficiency.coefficient). Then the verdict of
``tools/measure/time_report.py`` (sum fits / max fits). ``--dry-run`` needs no torch and no GPU: the same lines
without times, and the run's expected seconds.

    python -m tools.measure.gemm_timing --out $OUT/time/gemm.jsonl           # on the card (~1 minute on an H100)
    python -m tools.measure.gemm_timing --dry-run [--gpu h100-sxm]           # anywhere
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from core.catalogue import GpuSpec, find_gpu, generation
from core.errors import PlanFileError
from core.files.gpu_match import match_catalogue
from core.training import efficiency
from core.training import speed as training_speed
from tools.measure import time_report

TOOL: Final = time_report.GEMM_TOOL
HIDDEN: Final = 4096  # Llama-2 7B / Llama 3.1 8B's width, the TE GEMM guide's (core.training.efficiency._GUIDE_HIDDEN)
SMALL_ROWS: Final = (256, 512, 1024, 2048)  # the rows the question is about (docs/TRAINING_TIME.md, h84roof)
ANCHOR_ROWS: Final = (4096, 8192, 16384)  # compute-bound: they pin the compute coefficient of each fit
LORA_RANKS: Final = (8, 16, 32, 64)
LORA_ROWS: Final = (256, 1024, 2048, 8192)
PASSES: Final = ("forward", "dgrad", "wgrad")
DTYPES: Final = ("bf16", "fp16", "fp8")
WARMUP: Final = 10
REPS: Final = 50
FLUSH_BYTES: Final = 256 * 2**20  # over every catalogue card's L2 (H100 50 MB, H200 60 MB, B200 126 MB)
# Host time per timed run beside the kernels: two event records, the flush's launch and the matmul's (a few µs each
# on a CUDA 12/13 driver; 20 µs is an upper bound for the budget, not a measurement).
LAUNCH_S: Final = 20e-6
SETUP_S: Final = 0.05  # per kernel: operands drawn and cast, the first call's cuBLAS heuristics


@dataclass(frozen=True)
class Shape:
    """One kernel: a pass of the (m × k) · (k × n) matmul of a linear with a k-wide input and n outputs."""

    case: str  # "dense" or "lora"
    dtype: str  # "bf16" | "fp16" | "fp8"
    pass_: str  # "forward" | "dgrad" | "wgrad"
    m: int
    k: int
    n: int

    @property
    def output(self) -> tuple[int, int]:
        return {"forward": (self.m, self.n), "dgrad": (self.m, self.k), "wgrad": (self.n, self.k)}[self.pass_]


def shapes(fp8: bool = True) -> list[Shape]:
    """The sweep: the dense 4,096² linear's passes at every row count in each dtype (fp8 where the card has it), and
    LoRA's A (4,096 → r) and B (r → 4,096) in bf16."""
    out = []
    for dtype in DTYPES if fp8 else DTYPES[:2]:
        for m in (*SMALL_ROWS, *ANCHOR_ROWS):
            out += [Shape("dense", dtype, p, m, HIDDEN, HIDDEN) for p in PASSES]
    for r in LORA_RANKS:
        for m in LORA_ROWS:
            for k, n in ((HIDDEN, r), (r, HIDDEN)):
                out += [Shape("lora", "bf16", p, m, k, n) for p in PASSES]
    return out


@dataclass(frozen=True)
class Prediction:
    compute_s: float  # padded FLOPs at the peak, before the coefficient
    bytes_s: float  # operand bytes at the bandwidth, before the coefficient
    k_compute: float
    k_bytes: float
    feature: str

    @property
    def sum_s(self) -> float:
        return self.k_compute * self.compute_s + self.k_bytes * self.bytes_s

    @property
    def max_s(self) -> float:
        return max(self.k_compute * self.compute_s, self.k_bytes * self.bytes_s)


def predict(shape: Shape, gpu: GpuSpec) -> Prediction:
    """The app's time for this one kernel: core.training.speed._matmul counts the pass (its padded FLOPs and operand
    bytes), and step_work's rates and coefficients time it (a LoRA adapter's matmul at the plan's 16-bit rate)."""
    tally = training_speed._Tally()
    passes = (float(shape.pass_ == "forward"), float(shape.pass_ == "dgrad"), float(shape.pass_ == "wgrad"))
    fp8 = shape.dtype == "fp8"
    training_speed._matmul(tally, shape.m, shape.k, shape.n, passes, fp8, gpu.sm_count, 0.0)
    peak = gpu.peak_tflops(shape.dtype)
    bandwidth = training_speed._bandwidth(gpu, gpu.peak_tflops("bf16"))
    feature = f"gemm:{generation(gpu.id)}/{'fp8-tensorwise' if fp8 else '16-bit'}"
    return Prediction(
        tally.padded / (peak * 1e12) if peak else math.inf,
        tally.bytes / bandwidth,
        efficiency.coefficient(feature),
        efficiency.coefficient("gemm_bytes"),
        feature,
    )


def expected_seconds(sweep: list[Shape], gpu: GpuSpec, warmup: int = WARMUP, reps: int = REPS) -> float:
    """What the run should take: each kernel's warm-up and timed runs at the app's predicted time (the sum, the
    slower rule), each timed run after the flush (its bytes at the bandwidth) and with LAUNCH_S of host time, and
    SETUP_S a kernel."""
    flush = FLUSH_BYTES / training_speed._bandwidth(gpu, gpu.peak_tflops("bf16"))
    total = 0.0
    for shape in sweep:
        kernel = predict(shape, gpu).sum_s
        total += SETUP_S + warmup * (kernel + LAUNCH_S) + reps * (kernel + flush + LAUNCH_S)
    return total


def record(shape: Shape, gpu: GpuSpec, header: dict[str, Any], times_ms: list[float] | None) -> dict[str, Any]:
    """One JSON line: the kernel, the card's times (None in a dry run) and the app's prediction."""
    p = predict(shape, gpu)
    flops = 2.0 * shape.m * shape.k * shape.n
    median = statistics.median(times_ms) if times_ms else None
    return {
        "tool": TOOL,
        **header,
        "case": shape.case,
        "dtype": shape.dtype,
        "pass": shape.pass_,
        "m": shape.m,
        "k": shape.k,
        "n": shape.n,
        "flops": flops,
        "median_ms": median,
        "min_ms": min(times_ms) if times_ms else None,
        "max_ms": max(times_ms) if times_ms else None,
        "reps": len(times_ms) if times_ms else 0,
        "tflops": flops / median / 1e9 if median else None,
        "predicted": {
            "feature": p.feature,
            "compute_at_peak_ms": p.compute_s * 1e3,
            "bytes_at_bandwidth_ms": p.bytes_s * 1e3,
            "k_compute": p.k_compute,
            "k_bytes": p.k_bytes,
            "sum_ms": p.sum_s * 1e3,
            "max_ms": p.max_s * 1e3,
        },
    }


# ---- on the card (torch is imported only here) ----------------------------------------------------------------


def _cublas_versions() -> dict[str, Any]:
    """cuBLASLt's version as the process loaded it (cublasLtGetVersion of the library in /proc/self/maps), and the
    nvidia-cublas wheel's, where there is one."""
    out: dict[str, Any] = {"cublaslt": None, "cublas_wheel": None}
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "libcublasLt" in line}
        for path in sorted(paths):
            lib = ctypes.CDLL(path)
            lib.cublasLtGetVersion.restype = ctypes.c_size_t
            out["cublaslt"] = int(lib.cublasLtGetVersion())
            break
    except (OSError, AttributeError):
        pass
    from importlib import metadata

    for name in ("nvidia-cublas", "nvidia-cublas-cu13", "nvidia-cublas-cu12"):
        try:
            out["cublas_wheel"] = metadata.version(name)
            break
        except metadata.PackageNotFoundError:
            continue
    return out


class NoCuda(Exception):
    """No torch, or no CUDA device for it: a timed run cannot start (the message is one line)."""


def cuda_torch() -> Any:
    """torch, with a CUDA device to time on."""
    try:
        import torch
    except ImportError:
        raise NoCuda("a timed run needs torch with CUDA (python3 on a lent card); --dry-run needs neither") from None
    if not torch.cuda.is_available():
        raise NoCuda(f"torch {torch.__version__} sees no CUDA device; --dry-run needs none")
    return torch


class Card:
    """The GPU the run times on, its catalogue entry and the run's versions."""

    def __init__(self, torch: Any, flush_bytes: int = FLUSH_BYTES) -> None:
        props = torch.cuda.get_device_properties(0)
        self.torch = torch
        self.name = torch.cuda.get_device_name(0)
        self.capability = list(torch.cuda.get_device_capability(0))
        self.spec = match_catalogue(self.name, "nvidia", props.total_memory)
        self.has_fp8 = hasattr(torch, "_scaled_mm") and tuple(self.capability) >= (8, 9)
        self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda") if flush_bytes else None

    def header(self) -> dict[str, Any]:
        t = self.torch
        one = t.ones(16, 16, dtype=t.bfloat16, device="cuda")
        t.matmul(one, one)  # loads cuBLAS(Lt), whose version _cublas_versions reads from the process
        t.cuda.synchronize()
        return {
            "card": self.name,
            "catalogue": self.spec.id if self.spec else None,
            "capability": self.capability,
            "torch": t.__version__,
            "cuda": t.version.cuda,
            **_cublas_versions(),
        }

    def time(self, fn: Any, warmup: int, reps: int) -> list[float]:
        """Milliseconds of ``fn`` alone, ``reps`` times after ``warmup`` calls, L2 flushed before each."""
        torch = self.torch
        for _ in range(warmup):
            fn()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for start, end in zip(starts, ends, strict=True):
            if self.flush is not None:
                self.flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)]


def kernel_call(torch: Any, shape: Shape) -> Any:
    """The pass as autograd runs it for ``y = x·Wᵀ`` (W n × k): forward x·Wᵀ, input gradient dy·W, weight gradient
    dyᵀ·x; fp8 through torch._scaled_mm (A row-major, B column-major, per-tensor scales, bf16 out)."""
    m, k, n = shape.m, shape.k, shape.n
    if shape.dtype == "fp8":
        one = torch.ones((), dtype=torch.float32, device="cuda")
        e4m3, e5m2 = torch.float8_e4m3fn, torch.float8_e5m2

        def draw(rows: int, cols: int, dtype: Any) -> Any:
            return torch.randn(rows, cols, device="cuda").to(dtype)

        def col_major(t: Any) -> Any:
            return t.t().contiguous().t()

        if shape.pass_ == "forward":
            a, b = draw(m, k, e4m3), col_major(draw(n, k, e4m3).t())
        elif shape.pass_ == "dgrad":
            a, b = draw(m, n, e5m2), col_major(draw(n, k, e4m3))
        else:
            a, b = draw(m, n, e5m2).t().contiguous(), col_major(draw(m, k, e4m3))
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[shape.dtype]
    x = torch.randn(m, k, dtype=dtype, device="cuda")
    w = torch.randn(n, k, dtype=dtype, device="cuda")
    dy = torch.randn(m, n, dtype=dtype, device="cuda")
    a, b = {"forward": (x, w.t()), "dgrad": (dy, w), "wgrad": (dy.t(), x)}[shape.pass_]
    return lambda: torch.matmul(a, b)


# ---- running ----------------------------------------------------------------------------------------------------


class Output:
    """JSON lines to stdout and, with a path, to a file written beside it and moved into place at the end (a file
    already there is replaced only when it is one of this tool's)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.partial = None if path is None else path.with_name(path.name + ".partial")
        self.started = False  # the partial file is made at the first line: a run that never starts leaves none
        if path is not None and path.exists() and not _ours(path):
            raise PlanFileError(str(path), "exists and is not a timing file of tools/measure: not overwritten")

    def write(self, line: dict[str, Any]) -> None:
        text = json.dumps(line)
        print(text, flush=True)
        if self.partial is not None:
            if not self.started:
                self.partial.parent.mkdir(parents=True, exist_ok=True)
            with self.partial.open("a" if self.started else "w", encoding="utf-8") as f:
                f.write(text + "\n")
            self.started = True

    def close(self) -> None:
        if self.partial is not None and self.path is not None and self.started:
            os.replace(self.partial, self.path)


def _ours(path: Path) -> bool:
    try:
        first = path.read_text(encoding="utf-8").splitlines()[:1]
        return not first or json.loads(first[0]).get("tool") in (time_report.GEMM_TOOL, time_report.SDPA_TOOL)
    except (OSError, ValueError, AttributeError):
        return False


def sweep_lines(args: argparse.Namespace, out: Output) -> Iterator[dict[str, Any]]:
    """Times the sweep (dry run: predicts it), writing and yielding each line."""
    if args.dry_run:
        gpu = find_gpu(args.gpu)
        sweep = shapes(fp8=bool(gpu.tflops_dense.get("fp8")))
        print(
            f"# {len(sweep)} kernels, expected {expected_seconds(sweep, gpu, args.warmup, args.reps):.0f} s "
            f"on {gpu.name}",
            file=sys.stderr,
        )
        for shape in sweep:
            line = record(shape, gpu, {"card": None, "catalogue": gpu.id, "dry_run": True}, None)
            out.write(line)
            yield line
        return
    torch = cuda_torch()
    card = Card(torch)
    gpu = card.spec or find_gpu(args.gpu)
    sweep = shapes(fp8=card.has_fp8)
    expected = expected_seconds(sweep, gpu, args.warmup, args.reps)
    print(
        f"# {card.name} (catalogue: {gpu.id}): {len(sweep)} kernels, expected {expected:.0f} s, budget "
        f"{args.budget_s:.0f} s",
        file=sys.stderr,
    )
    header, began = card.header(), time.monotonic()
    for shape in sweep:
        if time.monotonic() - began > args.budget_s:
            print(f"# budget spent: {shape} and the rest skipped", file=sys.stderr)
            break
        try:
            times = card.time(kernel_call(torch, shape), args.warmup, args.reps)
        except (RuntimeError, TypeError) as error:  # a dtype or layout this torch / card refuses
            line = {**record(shape, gpu, header, None), "refused": str(error).splitlines()[0][:200]}
        else:
            line = record(shape, gpu, header, times)
        out.write(line)
        yield line


def tool_parser(module: str, doc: str, budget_s: float) -> argparse.ArgumentParser:
    """The options both timing tools take."""
    parser = argparse.ArgumentParser(prog=f"python -m tools.measure.{module}", description=doc.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="no torch, no GPU: the sweep and its predictions")
    parser.add_argument("--gpu", default="h100-sxm", help="catalogue card for a dry run (or a card not in it)")
    parser.add_argument("--out", type=Path, help="also write the JSON lines here")
    parser.add_argument("--budget-s", type=float, default=budget_s, help="start nothing new after this many seconds")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser("gemm_timing", __doc__ or "", 120.0)
    parser.add_argument("--warmup", type=int, default=WARMUP)
    parser.add_argument("--reps", type=int, default=REPS)
    args = parser.parse_args(argv)
    return run_tool(
        "gemm_timing", args, sweep_lines, lambda lines: time_report.render_gemm(time_report.gemm_kernels(lines), False)
    )


def run_tool(
    name: str,
    args: argparse.Namespace,
    sweep: Callable[[argparse.Namespace, Output], Iterator[dict[str, Any]]],
    summary: Callable[[list[dict[str, Any]]], str],
) -> int:
    """Runs a timing tool's sweep into its output; bad input (an unknown --gpu, a foreign --out, no CUDA) is one line
    and exit status 2. The summary (verdicts) is printed last, on stderr."""
    try:
        find_gpu(args.gpu)
        out = Output(args.out)
        lines = list(sweep(args, out))
        out.close()
    except (ValueError, NoCuda) as error:  # core.errors.PlanError and PlanFileError are ValueErrors
        print(f"{name}: {error}", file=sys.stderr)
        return 2
    print(summary(lines), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

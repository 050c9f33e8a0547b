"""Which backend PyTorch's SDPA picks on a card, and how fast each backend is, beside the app's prediction.

The open question of docs/TRAINING_TIME.md, "Which backend PyTorch's SDPA runs, by release and card" (branch h84sdpa,
issue 24): on Hopper the app times an SDPA plan at ``attention:hopper/flash`` (SDPA's flash backend, as fitted), while
PyTorch's dispatcher puts cuDNN's fused attention first on sm_90 from 2.10 with a runtime cuDNN past 9.15.0
(``check_prefer_cudnn_attention``, aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, as that section quotes it).
This script asks the dispatcher (``torch._fused_sdp_choice``, the call F.scaled_dot_product_attention makes) and times
the default call and each of flash, memory-efficient and cuDNN forced alone (``torch.nn.attention.sdpa_kernel``).

The calls are the ones transformers' sdpa path makes in a causal training step (transformers
integrations/sdpa_attention.py: q, k, v transposed views of the (B, S, heads, D) projections): without a padding mask
``is_causal=True`` and grouped-query k / v at their own heads with ``enable_gqa``; with one (padded samples in the
batch) a 4-D boolean mask (causal and the keys' padding; the even rows' last eighth padded), ``is_causal=False`` and k /
v repeated to every head (repeat_kv). Models: Llama 3.2 1B (head dim 64, 32 / 8 heads) and Llama 3.1 8B (head dim
128, 32 / 8 heads), bf16, lengths 2k to 32k (doubling), batch 1 / 8 (a padded 8 × 32k, 8 GiB of mask, left out).
Forward and backward (``torch.autograd.grad``, no accumulation) are timed apart with CUDA events, median of N.

Beside each case: the app's kernel for the same plan (core.training.attention.sdpa_kernel / sdpa_runs_cudnn; the plan
has no padding-mask input, so a masked case shows the mask-free plan's), its forward + backward seconds for one layer
(core.training.speed.step_work's ``attention:`` feature ÷ the layers, × its coefficient), the same at cuDNN's
``attention:<family>/fused`` coefficient, and the FLOPs-at-peak seconds the coefficients multiply.

    python -m tools.measure.sdpa_timing --out $OUT/time/sdpa.jsonl    # on the card (~2 minutes on an H100)
    python -m tools.measure.sdpa_timing --dry-run [--gpu h100-sxm --torch 2.14+]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from core.catalogue import GpuSpec, find_gpu, generation
from core.files.measurement import torch_release
from core.inputs import TorchVersion
from core.params import param_counts
from core.plan import Attention
from core.presets import plan_for_model
from core.training import efficiency
from core.training.attention import sdpa_kernel, sdpa_runs_cudnn
from core.training.speed import FUSED_BACKWARD_OVER_COUNTED, step_work
from tools.measure import time_report
from tools.measure.gemm_timing import Card, Output, cuda_torch, run_tool, tool_parser

TOOL: Final = time_report.SDPA_TOOL
MODELS: Final = ("llama-3.2-1b", "llama-3.1-8b")  # head dim 64 and 128, 32 query / 8 key-value heads each
LENGTHS: Final = (2048, 4096, 8192, 16384, 32768)
BATCHES: Final = (1, 8)
MAX_MASK_BYTES: Final = 2**31  # a padded case's B·S² boolean mask past this (8 × 32k: 8 GiB) is left out
BACKENDS: Final = ("default", "flash", "efficient", "cudnn")
_SDP_NAMES: Final = {"FLASH_ATTENTION": "flash", "EFFICIENT_ATTENTION": "efficient", "CUDNN_ATTENTION": "cudnn",
                     "MATH": "math", "OVERRIDEABLE": "overrideable", "ERROR": "none"}  # fmt: skip
WARMUP: Final = 2
TARGET_S: Final = 0.25  # timed seconds aimed at per backend: reps = TARGET_S / the predicted call, within the bounds
MIN_REPS, MAX_REPS = 3, 20
# For the budget only (not a measurement): the memory-efficient kernel is taken as twice the flash backend's time, and
# each case's setup (inputs, the mask, the profiled call) as 0.3 s.
EFFICIENT_OVER_FLASH: Final = 2.0
SETUP_S: Final = 0.3
ENV: Final = ("TORCH_CUDNN_SDPA_PREFERRED", "TORCH_CUDNN_SDPA_DEPRIORITIZED", "TORCH_CUDNN_SDPA_ENABLED")


@dataclass(frozen=True)
class Case:
    model: str
    batch: int
    seq_len: int
    mask: bool

    @property
    def label(self) -> str:
        return f"{self.model} B{self.batch} S{self.seq_len} {'padded' if self.mask else 'causal'}"


def cases() -> list[Case]:
    out = []
    for model in MODELS:
        for mask in (False, True):
            for s in LENGTHS:
                out += [Case(model, b, s, mask) for b in BATCHES if not mask or b * s * s <= MAX_MASK_BYTES]
    return out


@dataclass(frozen=True)
class Prediction:
    kernel: str  # core.training.attention.sdpa_kernel of the (mask-free) plan
    runs_cudnn: bool
    feature: str  # the step's attention feature
    at_peak_s: float  # one layer's forward + backward attention FLOPs (padded) at the peak
    k_app: float
    k_cudnn: float

    @property
    def app_s(self) -> float:
        return self.k_app * self.at_peak_s

    @property
    def cudnn_s(self) -> float:
        return self.k_cudnn * self.at_peak_s


def predict(case: Case, gpu: GpuSpec, release: TorchVersion) -> Prediction:
    """The app's kernel and one layer's attention seconds for the case's plan: bf16 autocast (the model's default
    preset), SDPA, no checkpointing, one micro-batch of the case's shape on ``gpu`` with PyTorch ``release``."""
    plan = plan_for_model(case.model).with_workload(micro_batch=case.batch, seq_len=case.seq_len, grad_accum=1)
    plan = plan.with_changes(attention=Attention.SDPA, checkpointing=False)
    plan = plan.with_hardware(gpu=gpu.id, torch_version=release)
    work = step_work(plan, param_counts(plan), gpu)
    feature = next(name for name in work.features if name.startswith("attention:"))
    return Prediction(
        sdpa_kernel(plan).value,
        sdpa_runs_cudnn(plan, gpu.id),
        feature,
        work.features[feature] / plan.model.num_layers,
        efficiency.coefficient(feature),
        efficiency.coefficient(f"attention:{generation(gpu.id)}/fused"),
    )


def reps_for(seconds: float) -> int:
    return max(MIN_REPS, min(MAX_REPS, math.ceil(TARGET_S / seconds) if seconds > 0 else MAX_REPS))


def expected_seconds(sweep: list[Case], gpu: GpuSpec, release: TorchVersion) -> float:
    """The run's seconds: per case SETUP_S, and per backend its warm-up and timed calls at the app's time (cuDNN at its
    coefficient, memory-efficient at EFFICIENT_OVER_FLASH × flash's)."""
    total = 0.0
    for case in sweep:
        p = predict(case, gpu, release)
        calls = WARMUP + reps_for(p.app_s)
        total += SETUP_S + calls * (2 * p.app_s + p.cudnn_s + EFFICIENT_OVER_FLASH * p.app_s)
    return total


def record(case: Case, gpu: GpuSpec, release: TorchVersion, header: dict[str, Any]) -> dict[str, Any]:
    """A case's JSON line without its measurements (a dry run's whole line)."""
    model = plan_for_model(case.model).model
    p = predict(case, gpu, release)
    return {
        "tool": TOOL,
        **header,
        "label": case.label,
        "model": case.model,
        "head_dim": model.head_dim,
        "heads": model.num_heads,
        "kv_heads": model.num_kv_heads,
        "batch": case.batch,
        "seq_len": case.seq_len,
        "mask": case.mask,
        "is_causal": not case.mask,
        "enable_gqa": not case.mask,
        "chosen": None,
        "kernels": None,
        "backends": {},
        "predicted": {
            "torch_range": release.value,
            "app_kernel": p.kernel,
            "app_runs_cudnn": p.runs_cudnn,
            "app_feature": p.feature,
            "at_peak_ms": p.at_peak_s * 1e3,
            "k_app": p.k_app,
            "k_cudnn": p.k_cudnn,
            "app_ms": p.app_s * 1e3,
            "cudnn_ms": p.cudnn_s * 1e3,
            "forward_share": 1 / (1 + 2 * FUSED_BACKWARD_OVER_COUNTED),
        },
    }


# ---- on the card (torch is imported only here) ----------------------------------------------------------------


class Inputs:
    """q, k, v (and the mask) of a case as transformers hands them to SDPA, with a gradient for the backward."""

    def __init__(self, torch: Any, case: Case) -> None:
        model = plan_for_model(case.model).model
        b, s, h, d = case.batch, case.seq_len, model.num_heads, model.head_dim
        opts: dict[str, Any] = {"device": "cuda", "dtype": torch.bfloat16, "requires_grad": True}
        kv = h if case.mask else model.num_kv_heads  # repeat_kv'd (contiguous) with a mask, else their own heads
        self.leaves = [torch.randn(b, s, h, d, **opts)]
        if case.mask:
            self.leaves += [torch.randn(b, kv, s, d, **opts), torch.randn(b, kv, s, d, **opts)]
            self.q, self.k, self.v = self.leaves[0].transpose(1, 2), self.leaves[1], self.leaves[2]
            valid = torch.full((b,), s, device="cuda")
            valid[::2] = s - s // 8  # the even rows' last eighth padded (right padding: no row attends to nothing)
            keys = torch.arange(s, device="cuda")[None, :] < valid[:, None]
            causal = torch.ones(s, s, dtype=torch.bool, device="cuda").tril()
            self.mask = causal[None, None] & keys[:, None, None, :]
        else:
            self.leaves += [torch.randn(b, s, kv, d, **opts), torch.randn(b, s, kv, d, **opts)]
            self.q, self.k, self.v = (t.transpose(1, 2) for t in self.leaves)
            self.mask = None
        self.case = case
        self.grad = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)

    def call(self, torch: Any) -> Any:
        return torch.nn.functional.scaled_dot_product_attention(
            self.q, self.k, self.v, attn_mask=self.mask, is_causal=not self.case.mask, enable_gqa=not self.case.mask
        )

    def chosen(self, torch: Any) -> str:
        from torch.nn.attention import SDPBackend

        value = torch._fused_sdp_choice(
            self.q, self.k, self.v, self.mask, 0.0, not self.case.mask, scale=None, enable_gqa=not self.case.mask
        )
        names = {int(b): _SDP_NAMES.get(n, n.lower()) for n, b in SDPBackend.__members__.items()}
        return names.get(int(value), str(value))


def _kernel_names(torch: Any, inputs: Inputs) -> list[str] | None:
    """The CUDA kernels the default forward launched (attention-looking names), from one profiled call."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            inputs.call(torch)
            torch.cuda.synchronize()
        names = [e.key for e in prof.key_averages()]
    except (RuntimeError, AssertionError):
        return None
    skip = ("elementwise", "fill", "copy", "memset", "memcpy", "reduce", "Memset", "Memcpy", "aten::")
    runtime = [n for n in names if n.startswith("cuda") and not n.startswith("cudnn")]  # cudaLaunchKernel and kin
    return [n[:100] for n in names if n not in runtime and not any(word in n for word in skip)][:4]


def time_backend(torch: Any, inputs: Inputs, backend: str, reps: int) -> dict[str, Any]:
    """Forward and backward milliseconds (medians) of the call on ``backend`` ("default": the dispatcher's pick), or
    why it was refused."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    forced = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
              "cudnn": SDPBackend.CUDNN_ATTENTION}  # fmt: skip
    context = sdpa_kernel([forced[backend]]) if backend in forced else _Nothing()

    def once() -> tuple[Any, Any, Any]:
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        marks[0].record()
        out = inputs.call(torch)
        marks[1].record()
        torch.autograd.grad(out, inputs.leaves, inputs.grad)
        marks[2].record()
        return marks[0], marks[1], marks[2]

    try:
        with warnings.catch_warnings(record=True) as said, context:
            warnings.simplefilter("always")
            for _ in range(WARMUP):
                once()
            marks = [once() for _ in range(reps)]
            torch.cuda.synchronize()
    except RuntimeError as error:  # no kernel for these inputs (the warnings say why), or out of memory
        torch.cuda.empty_cache()
        why = [str(w.message).splitlines()[0] for w in said][:4] or [str(error).splitlines()[0]]
        return {"refused": " | ".join(why)[:300]}
    forward = [a.elapsed_time(b) for a, b, _ in marks]
    backward = [b.elapsed_time(c) for _, b, c in marks]
    return {"forward_ms": statistics.median(forward), "backward_ms": statistics.median(backward), "reps": reps,
            "spread_ms": max(f + g for f, g in zip(forward, backward, strict=True))
            - min(f + g for f, g in zip(forward, backward, strict=True))}  # fmt: skip


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _header(card: Card, torch: Any) -> dict[str, Any]:
    return {
        **card.header(),
        "cudnn": torch.backends.cudnn.version(),
        "env": {name: os.environ.get(name) for name in ENV},
    }


def sweep_lines(args: argparse.Namespace, out: Output) -> Iterator[dict[str, Any]]:
    if args.dry_run:
        gpu, release = find_gpu(args.gpu), TorchVersion(args.torch)
        sweep = cases()
        print(f"# {len(sweep)} cases, expected {expected_seconds(sweep, gpu, release):.0f} s on {gpu.name}",
              file=sys.stderr)  # fmt: skip
        for case in sweep:
            line = {**record(case, gpu, release, {"card": None, "catalogue": gpu.id}), "dry_run": True}
            out.write(line)
            yield line
        return
    torch = cuda_torch()
    card = Card(torch, flush_bytes=0)  # no L2 flush: each call reads and writes far more than the L2 holds
    gpu = card.spec or find_gpu(args.gpu)
    release = torch_release({"versions": {"torch": torch.__version__}})
    sweep, header, began = cases(), _header(card, torch), time.monotonic()
    print(f"# {card.name} ({gpu.id}, planned as PyTorch {release.value}): {len(sweep)} cases, expected "
          f"{expected_seconds(sweep, gpu, release):.0f} s, budget {args.budget_s:.0f} s", file=sys.stderr)  # fmt: skip
    for case in sweep:
        if time.monotonic() - began > args.budget_s:
            print(f"# budget spent: {case.label} and the rest skipped", file=sys.stderr)
            break
        line = record(case, gpu, release, header)
        try:
            inputs = Inputs(torch, case)
        except RuntimeError as error:  # out of memory
            line["refused"] = str(error).splitlines()[0][:200]
        else:
            line["chosen"] = inputs.chosen(torch)
            line["kernels"] = _kernel_names(torch, inputs)
            reps = reps_for(line["predicted"]["app_ms"] / 1e3)
            line["backends"] = {name: time_backend(torch, inputs, name, reps) for name in BACKENDS}
            del inputs
            torch.cuda.empty_cache()
        out.write(line)
        yield line


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser("sdpa_timing", __doc__ or "", 180.0)
    parser.add_argument("--torch", default=TorchVersion.V2_14.value, help="the PyTorch range a dry run plans")
    args = parser.parse_args(argv)
    if args.torch not in {v.value for v in TorchVersion}:
        print(f"sdpa_timing: --torch must be one of {', '.join(v.value for v in TorchVersion)}", file=sys.stderr)
        return 2
    return run_tool(
        "sdpa_timing", args, sweep_lines, lambda lines: time_report.render_sdpa(time_report.sdpa_records(lines))
    )


if __name__ == "__main__":
    sys.exit(main())

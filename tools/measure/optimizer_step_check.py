"""The state and the step's temporaries of torch's Adagrad / RMSprop, bitsandbytes' RMSprop and AdEMAMix, and the
weight-decay gradient copy of torch's Adam (L2) and SGD, measured on small CPU tensors with the libraries' own
optimizers (core.training.optimizer: ONE_BUFFER_TORCH, ONE_BUFFER_TEMPORARIES, RMSPROP_BNB_FAMILY,
ADEMAMIX_FAMILY, _weight_decay_temporary).

State: one step over float32 (torch) or bf16 (bitsandbytes) parameters of the shapes below, the bytes of every state
tensor summed per parameter (optimizer_state_check.state_bytes), set beside the planner's rule. Step peak: a second
step run under LiveBytes (a TorchDispatchMode that counts every storage an op makes and frees it when it dies), so
the state exists already and only the step's own tensors count; the peak is shown in units of the largest tensor
(for-loop) or of all the parameters (foreach).

    /tmp/torchenv/bin/python tools/measure/optimizer_step_check.py   # torch 2.13.0 CPU, bitsandbytes 0.50.2

Measured: every tensor's state equals the rule to the byte (RMSprop with momentum and centered: square_avg,
momentum_buffer, grad_avg, 12 B), but for the 8-bit optimizers' embedding, which carries the optimizer's shared qmaps
(256 float32 each, 1,024 B for RMSprop8bit, 2,048 for AdEMAMix8bit's two; the planner leaves them out). Step peaks:
Adagrad foreach 2.000 × the parameters (weight decay 0.1: 2.000), for-loop 1.256 × the largest (2.000), fused 0;
RMSprop foreach 1.000 (2.000), for-loop 1.256 (2.000); Adam foreach 1.000 with and without an L2 decay, for-loop
2.000 and 3.000 with it; AdamW's decoupled decay 1.000 / 2.000 as without; SGD foreach 0, 1.000 with a decay (with
momentum too), for-loop 0 and 1.000 × the largest. schedulefree 1.4.1: AdamWScheduleFree and RAdamScheduleFree 8 B an
element (z, exp_avg_sq), SGDScheduleFree 4 B, to the byte; AdamW's foreach step 1.000 × the parameters, RAdam's 0 at
its second step (no denominator before rho_t > 4), SGD's 0.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_bytes import LiveBytes
from optimizer_state_check import state_bytes

SHAPES = {"embed": (1000, 256), "q_proj": (256, 256), "gate_proj": (688, 256), "small": (60, 50), "norm": (256,)}
Make = Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]


def _params(dtype: torch.dtype) -> list[torch.nn.Parameter]:
    torch.manual_seed(0)
    out = []
    for shape in SHAPES.values():
        p = torch.nn.Parameter(torch.randn(shape, dtype=dtype))
        p.grad = torch.randn_like(p)
        out.append(p)
    return out


def _state(name: str, make: Make, dtype: torch.dtype, rule: Callable[[int], float]) -> None:
    optimizer = make(_params(dtype))
    optimizer.step()
    measured = state_bytes(optimizer)
    rows = []
    for i, (tensor, shape) in enumerate(SHAPES.items()):
        n = math.prod(shape)
        rows.append(f"{tensor} {measured.get(i, 0):,}/{rule(n):,.0f}")
    print(f"state {name}: measured/rule B  " + ", ".join(rows))


def _peak(name: str, make: Make) -> None:
    params = _params(torch.float32)
    optimizer = make(params)
    optimizer.step()  # the state exists from here on
    live = LiveBytes()
    for p in params:  # what exists before the step: in-place ops return these storages, which are not allocations
        for t in [p, p.grad, *(v for v in optimizer.state[p].values() if isinstance(v, torch.Tensor))]:
            if t is not None:
                live.seen[t.untyped_storage().data_ptr()] = 0
    with live:
        optimizer.step()
    total = sum(p.numel() * 4 for p in params)
    big = max(p.numel() * 4 for p in params)
    print(f"step {name}: peak {live.peak:,} B = {live.peak / total:.3f} × all params = {live.peak / big:.3f} × largest")


def eight_bit(k: int, n: int) -> float:
    return k * 4.0 * n if n < 4096 else k * (n + math.ceil(n / 256) * 4.0)


def main() -> None:
    import bitsandbytes as bnb

    print(f"torch {torch.__version__}, bitsandbytes {bnb.__version__}")
    optim = torch.optim
    _state("torch Adagrad (float32)", optim.Adagrad, torch.float32, lambda n: 4.0 * n)
    _state("torch RMSprop (float32)", optim.RMSprop, torch.float32, lambda n: 4.0 * n)
    _state(
        "torch RMSprop momentum=0.9 centered",
        lambda ps: optim.RMSprop(ps, momentum=0.9, centered=True),
        torch.float32,
        lambda n: 12.0 * n,
    )
    _state("bnb RMSprop 32-bit (bf16 params)", bnb.optim.RMSprop, torch.bfloat16, lambda n: 4.0 * n)
    _state("bnb RMSprop8bit (bf16 params)", bnb.optim.RMSprop8bit, torch.bfloat16, lambda n: eight_bit(1, n))
    _state("bnb AdEMAMix 32-bit (bf16 params)", bnb.optim.AdEMAMix, torch.bfloat16, lambda n: 12.0 * n)
    _state("bnb AdEMAMix8bit (bf16 params)", bnb.optim.AdEMAMix8bit, torch.bfloat16, lambda n: eight_bit(3, n))
    for impl in ("foreach", "forloop", "fused"):
        kw = {"foreach": impl == "foreach"} if impl != "fused" else {"fused": True}
        _peak(f"Adagrad {impl}", lambda ps, kw=kw: optim.Adagrad(ps, **kw))
        _peak(f"Adagrad {impl} wd=0.1", lambda ps, kw=kw: optim.Adagrad(ps, weight_decay=0.1, **kw))
    for impl in ("foreach", "forloop"):
        kw = {"foreach": impl == "foreach"}
        _peak(f"RMSprop {impl}", lambda ps, kw=kw: optim.RMSprop(ps, **kw))
        _peak(f"RMSprop {impl} wd=0.1", lambda ps, kw=kw: optim.RMSprop(ps, weight_decay=0.1, **kw))
        _peak(f"Adam {impl}", lambda ps, kw=kw: optim.Adam(ps, **kw))
        _peak(f"Adam {impl} wd=0.1 (L2)", lambda ps, kw=kw: optim.Adam(ps, weight_decay=0.1, **kw))
        _peak(f"AdamW {impl} wd=0.1", lambda ps, kw=kw: optim.AdamW(ps, weight_decay=0.1, **kw))
        _peak(f"SGD {impl}", lambda ps, kw=kw: optim.SGD(ps, lr=0.1, **kw))
        _peak(f"SGD {impl} wd=0.1", lambda ps, kw=kw: optim.SGD(ps, lr=0.1, weight_decay=0.1, **kw))
        _peak(
            f"SGD momentum {impl} wd=0.1", lambda ps, kw=kw: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1, **kw)
        )


def schedule_free() -> None:
    """schedulefree's AdamW / RAdam / SGD (train() called first, as transformers does): z (+ exp_avg_sq) per tensor,
    and the foreach step's denominator list (RAdam's only once rho_t > 4, after the second step measured here: 0)."""
    import schedulefree

    def trained(cls: Callable[..., torch.optim.Optimizer]) -> Make:
        def make(ps: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
            optimizer = cls(ps, lr=0.01)
            optimizer.train()  # type: ignore[attr-defined]
            return optimizer

        return make

    for name, cls, k in (
        ("AdamWScheduleFree", schedulefree.AdamWScheduleFree, 2),
        ("RAdamScheduleFree", schedulefree.RAdamScheduleFree, 2),
        ("SGDScheduleFree", schedulefree.SGDScheduleFree, 1),
    ):
        _state(f"schedulefree {name} (float32)", trained(cls), torch.float32, lambda n, k=k: k * 4.0 * n)
        _peak(f"schedulefree {name} foreach", trained(cls))


if __name__ == "__main__":
    main()
    schedule_free()

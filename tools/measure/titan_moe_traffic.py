"""Bytes torchtitan's token-choice MoE layer moves around its grouped matmuls, measured on small CPU tensors with
the layer's own source: what core.training.speed.TITAN_SCATTER_* counts (docs/TRAINING_TIME.md, branch h92moet).

The two copies titan_moe_check.py loads (its ``load`` and ``build``, the same files in the same folder: prime-rl
8718eb14's scatter-add layer with torchtitan a1fdd7e's expert_parallel, and torchtitan d021aa9c's bmm layer), run
eager in bf16 forward and backward under kernel_count's dispatch mode. Each op's bytes: its distinct tensor arguments
read, its outputs and mutated arguments written, each tensor at the bytes it spans (an expanded index is its
storage, not its numel), fills read nothing, allocations are not ops. Printed per op in rows of the N·k routed
copies (N·k × d bf16), the matmuls apart, at a width where the experts' SwiGLU and the router are a few per cent of a
row; eager, so the scores' float32 product is three ops (compiled, one pass).

    (the files as titan_moe_check.py's docstring fetches them, into DIR)
    .venv-measure/bin/python tools/measure/titan_moe_traffic.py DIR    # torch 2.13.0 CPU
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import titan_moe_check
from kernel_count import _NO_KERNEL, Count, _device_op
from titan_moe_check import build, load

# Wide tokens and narrow experts, so that the experts' SwiGLU (FFN wide) and the router (E wide) are a few per cent of
# a d-wide row and what is left is the layer's token movement; build() reads these module settings.
N, D, FFN, E, K = 512, 512, 16, 16, 4
titan_moe_check.N, titan_moe_check.D, titan_moe_check.FFN = N, D, FFN
titan_moe_check.E, titan_moe_check.K = E, K

_ALLOCATIONS = {"new_empty.default", "new_empty_strided.default"}  # no kernel, as kernel_count's plain empties
_FILLS = {"new_zeros.default", "zeros_like.default", "ones_like.default", "full_like.default"}  # write, read nothing
_MATMULS = ("_grouped_mm.", "mm.", "addmm.", "bmm.")


def _walk(x: Any, into: dict[int, int]) -> None:
    if isinstance(x, torch.Tensor):
        if x.dim() > 0:
            into[id(x)] = min(x.numel() * x.element_size(), x.untyped_storage().nbytes())
    elif isinstance(x, (list, tuple)):
        for y in x:
            _walk(y, into)


class Spans(Count):
    """Bytes per op, each tensor at its span."""

    def __init__(self) -> None:
        super().__init__()
        self.per_op: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = str(func.overloadpacket.__name__) + "." + func._overloadname
        if func.is_view or name in _NO_KERNEL | _ALLOCATIONS or not _device_op(args, kwargs):
            return out
        read: dict[int, int] = {}
        if name not in _FILLS:
            _walk((args, kwargs), read)
        written: dict[int, int] = {}
        _walk(out, written)
        for i, arg in enumerate(func._schema.arguments):
            if arg.alias_info is not None and arg.alias_info.is_write:
                _walk(args[i] if i < len(args) else kwargs.get(arg.name), written)
        self.per_op[name] += sum(read.values()) + sum(written.values())
        return out


def main() -> None:
    prime, titan = load(Path(sys.argv[1]))
    copy_row = N * K * D * 2
    print(f"torch {torch.__version__}; N {N}, d {D}, k {K}: rows of N·k copies ({copy_row:,} B); N is {1 / K:g} row")
    layers = (("prime-rl 8718eb14 (torchtitan-scatter)", prime), ("torchtitan d021aa9c (torchtitan-bmm)", titan))
    for label, module in layers:
        layer = build(module, shared=0)
        x = torch.randn(1, N, D, dtype=torch.bfloat16, requires_grad=True)
        with Spans() as fwd:
            y = layer(x)
        with Spans() as bwd:
            y.backward(torch.ones_like(y))
        print(label)
        for phase, ops in (("forward", fwd), ("backward", bwd)):
            rest = sum(v for n, v in ops.per_op.items() if not n.startswith(_MATMULS))
            listed = ", ".join(
                f"{n.split('.')[0]} {v / copy_row:.2f}" for n, v in ops.per_op.most_common() if v >= 0.1 * copy_row
            )
            print(f"  {phase}: {rest / copy_row:.2f} copy rows around the matmuls; {listed}")


if __name__ == "__main__":
    main()

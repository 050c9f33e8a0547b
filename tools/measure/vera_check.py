"""What PEFT's VeRA keeps for the backward, measured on small CPU tensors with PEFT's own layers
(docs/REAL_GPU_MEMORY.md, "PEFT's VeRA"; core.training.activations, core.params.vera_tensors).

A frozen bf16 q_proj (d -> d) and v_proj (d -> kv) read one bf16 input that needs a gradient (the hidden states
of a block whose upstream adapters train), wrapped by ``peft.get_peft_model`` with VeraConfig
(autocast_adapter_dtype=True, as the method comparison runs: float32 lambdas and float32 shared vera_A / vera_B).
``torch.autograd.graph.saved_tensors_hooks`` lists what autograd saves (storages by data pointer, parameters and
buffers apart); ``LiveBytes`` (tools/measure/live_bytes.py) counts the bytes the forward leaves alive.

Expected from the source read at huggingface/peft 51c2ff66 (vera/layer.py ``Linear.forward``:
``x = _cast_input_dtype(x, lambda_d.dtype)``; ``lambda_b * F.linear(lambda_d * F.linear(x, A_sliced), B_sliced)``),
per target: x's float32 copy (N x in), which F.linear would save only for the frozen A's gradient, and so should
not; A @ x (N x r) saved for lambda_d's gradient; B @ (lambda_d * A @ x) (N x out) saved for lambda_b's gradient.
Measured (torch 2.13.0 CPU, peft 0.18.0): exactly that, 172,032 B; no copy of x. Under bf16 autocast (run second):
the two products in bf16, and the bf16 casts of the sliced vera_A / vera_B each F.linear makes (buffers need no
gradient, so autocast does not cache them) and keeps for its input's gradient: 99,328 B. The lambdas are only
multiplied: never cast. vera_A, vera_B, lambda_d, lambda_b are float32 on the bf16 base (cast_adapter_dtype).
PEFT 0.18.0 (pip) runs the same forward lines as 51c2ff66 (``x.to(lambda_d.dtype)`` for ``_cast_input_dtype``,
the same cast; no quantization clone, which is None for a bf16 base).

    /tmp/torchenv/bin/python tools/measure/vera_check.py    # torch 2.13.0 CPU + peft 0.18.0
"""

from __future__ import annotations

import torch
from live_bytes import LiveBytes  # tools/measure/live_bytes.py: these checks run as scripts from this folder
from peft import VeraConfig, get_peft_model
from torch import nn

D, KV, N, R = 256, 64, 128, 8


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q_proj = nn.Linear(D, D, bias=False, dtype=torch.bfloat16)
        self.v_proj = nn.Linear(D, KV, bias=False, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.q_proj(x), self.v_proj(x)


def _expected(autocast: bool) -> int:
    """The planner's rule (core.training.activations._vera): per target A @ x (N x r) and B @ (.) (N x out),
    float32 without autocast; under bf16 autocast both products are bf16 and each F.linear keeps its fresh bf16
    cast of the frozen slice it reads (A: r x in, B: out x r), for its input's gradient."""
    b = 2 if autocast else 4
    slices = R * ((D + D) + (D + KV)) * 2 if autocast else 0
    return 2 * N * R * b + N * (D + KV) * b + slices


def measure(autocast: bool = False) -> None:
    torch.manual_seed(0)
    model = get_peft_model(Tiny(), VeraConfig(r=R, target_modules=["q_proj", "v_proj"]))
    model.train()
    owned = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    dtypes = sorted(
        {f"{n.split('.')[-2]}:{t.dtype}" for n, t in model.named_buffers()}
        | {f"{n.split('.')[-2]}:{t.dtype}" for n, t in model.named_parameters() if t.requires_grad}
    )
    x = torch.randn(N, D, dtype=torch.bfloat16, requires_grad=True)
    saved: dict[int, tuple[tuple[int, ...], torch.dtype, int]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        if s.data_ptr() not in owned and s.data_ptr() != x.untyped_storage().data_ptr():
            saved[s.data_ptr()] = (tuple(t.shape), t.dtype, s.nbytes())
        return t

    mode = LiveBytes()
    mode.seen.update(dict.fromkeys(owned | {x.untyped_storage().data_ptr()}, 0))
    cast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), mode, cast:
        q, v = model(x)
    outputs = q.untyped_storage().nbytes() + v.untyped_storage().nbytes()
    kept = mode.live - outputs
    listed = sum(n for _, _, n in saved.values())
    print(f"vera{' (bf16 autocast)' if autocast else ''}: outputs {q.dtype}; tensors {', '.join(dtypes)}")
    print(f"    live after the forward beyond the outputs {kept:,} B; saved storages {listed:,} B")
    for shape, dtype, nbytes in sorted(saved.values(), key=lambda e: -e[2]):
        print(f"    saved {dtype!s:15} {shape!s:14} {nbytes:>9,} B")
    print(f"    the planner's rule: {_expected(autocast):,} B")
    (q.float().sum() + v.float().sum()).backward()


if __name__ == "__main__":
    print(f"torch {torch.__version__}; N = {N}, d = {D}, kv = {KV}, r = {R}")
    for autocast in (False, True):
        measure(autocast)

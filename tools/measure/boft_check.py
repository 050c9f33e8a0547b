"""What PEFT's BOFT keeps for the backward, measured on small CPU tensors with PEFT's own layer
(docs/REAL_GPU_MEMORY.md, "PEFT's BOFT"; core.training.activations._boft, core.params.boft_tensor_sizes). Branch
h80boft.

A frozen bf16 q_proj (d -> d) and v_proj (d -> kv) read one bf16 input that needs a gradient (lycoris_check.py's Tiny),
wrapped by ``peft.get_peft_model`` with BOFTConfig (autocast_adapter_dtype=True: float32 boft_R / boft_s on the bf16
base, as the method comparison runs), one butterfly factor, PEFT's torch.block_diag path (the fbd_cuda extension needs
nvcc and ninja; where it does not build PEFT takes this path: layer.py ``get_fbd_cuda``, ``update_layer``).

Expected from the source read at huggingface/peft 51c2ff66 src/peft/tuners/boft/layer.py (PEFT 0.21.2's BOFT forward
is the same lines; it only adds a grouped-Conv2d refusal), ``Linear.forward`` per target: ``torch.eye(in)`` in the
input's dtype, kept by ``butterfly_oft_mat @ boft_rotation``; ``boft_P.to(x)``, the float32 (1, in, in) buffer's copy
in the input's dtype, kept by both bmms; the rotation (in x in), kept by ``x @ boft_rotation``; the frozen base's
output (N x out), kept by ``result * boft_scale``; ``cayley_batch``'s linalg.solve keeps its A, LU and Q (in / b
blocks of b x b, float32) and int32 pivots (in); the float32 scale (out) and the ones it multiplied (out, the input's
dtype). x itself (the input, read as is) is not counted here. The same under bf16 autocast (every operand is bf16
already). Measured at blocks of 8 and 4: 921,472 B and 896,896 B (921,472 B under autocast), the rule to the byte;
trained 4,416 and 2,368 elements.

    .venv-measure/bin/python tools/measure/boft_check.py    # torch 2.13.0 CPU, peft 0.21.2 (tools/measure/setup_env.sh)
"""

from __future__ import annotations

import peft.tuners.boft.layer as boft_layer
import torch
from lycoris_check import KV, D, N, Tiny, traced_forward  # the two bf16 projections and input of the other checks
from peft import BOFTConfig, get_peft_model

# PEFT's cached answer of a failed extension build: its torch.block_diag path, without trying nvcc on a CPU machine.
boft_layer._FBD_CUDA = False


def _expected(block: int) -> int:
    """core.training.activations._boft for the two targets (both read D features; outputs D and KV), bf16 input."""
    x, a = 2, 4
    squares = 2 * 3 * D * D * x  # the identity, boft_P's copy and the rotation, per target
    outputs = N * (D + KV) * x  # the frozen base's outputs
    solve = 2 * (3 * block * a + 4) * D  # A, LU, Q (D/b blocks of b x b, float32) and the int32 pivots (D)
    scales = (D + KV) * (a + x)  # the float32 scale and the ones it multiplied
    return squares + outputs + solve + scales


def measure(block: int, autocast: bool = False) -> None:
    torch.manual_seed(0)
    model = get_peft_model(Tiny(), BOFTConfig(boft_block_size=block, target_modules=["q_proj", "v_proj"]))
    model.train()
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    buffers = sum(b.untyped_storage().nbytes() for b in model.buffers())
    q, v, mode, saved = traced_forward(model, autocast)
    outputs = q.untyped_storage().nbytes() + v.untyped_storage().nbytes()
    kept = mode.live - outputs
    listed = sum(n for _, _, n in saved.values())
    print(
        f"boft blocks of {block}{' (bf16 autocast)' if autocast else ''}: live after the forward beyond the outputs "
        f"{kept:,} B; saved storages {listed:,} B; the planner's rule {_expected(block):,} B"
    )
    for shape, dtype, nbytes in sorted(saved.values(), key=lambda e: -e[2]):
        print(f"    saved {dtype!s:15} {shape!s:16} {nbytes:>9,} B")
    print(f"    trained elements {trained:,}; boft_P buffers {buffers:,} B (float32, on the host in the comparison)")


if __name__ == "__main__":
    print(f"torch {torch.__version__}; N = {N}, d = {D}, kv = {KV}")
    for block in (8, 4):
        measure(block)
    measure(8, autocast=True)

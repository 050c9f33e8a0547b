"""Whether the installed PyTorch's memory-efficient SDPA op takes grouped-query k / v, on meta tensors.

The planner's rule (core.training.attention.efficient_takes_gqa): through 2.13 an ``enable_gqa`` call that the
flash kernel cannot take (float32 inputs, heads wider than 256) runs SDPA's math kernel; from 2.14 the CUDA
memory-efficient kernel takes it (pytorch/pytorch PR 191085). The CUDA choice itself (sdp_utils.cpp) cannot run
without a GPU, but the op's own contract shows the change: this calls
``aten._scaled_dot_product_efficient_attention`` with 8 query heads over 2 key / value heads on meta tensors and
runs its backward. torch 2.13.0's meta backward returns the k / v gradients at the query heads and autograd refuses
them ("returned an invalid gradient at index 1"); 2.14.1's returns them at the k / v heads.

    python tools/measure/release_check.py

Measured (docs/REAL_GPU_MEMORY.md "PyTorch 2.14 and 2.15, PEFT 0.19-0.21"): torch 2.13.0+cpu refuses the
backward for float32 and bfloat16; torch 2.14.1+cu130 (no GPU needed) returns q / k / v gradients of
(2, 8, 64, 64), (2, 2, 64, 64), (2, 2, 64, 64), the log-sum-exp (2, 8, 64) in both.
"""

from __future__ import annotations

import torch

BATCH, Q_HEADS, KV_HEADS, SEQ, HEAD_DIM = 2, 8, 2, 64, 64


def check(dtype: torch.dtype) -> str:
    """One forward and backward of the efficient op on grouped-query meta tensors: what came back, or the refusal."""

    def meta(heads: int) -> torch.Tensor:
        return torch.empty(BATCH, heads, SEQ, HEAD_DIM, device="meta", dtype=dtype, requires_grad=True)

    q, k, v = meta(Q_HEADS), meta(KV_HEADS), meta(KV_HEADS)
    try:
        out, lse, *_ = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, True)
        out.sum().backward()
    except RuntimeError as exc:
        return f"refused: {str(exc).splitlines()[0][:120]}"
    grads = [tuple(t.grad.shape) for t in (q, k, v) if t.grad is not None]
    return f"out {tuple(out.shape)}, log-sum-exp {tuple(lse.shape)}, grads q/k/v {grads}"


def main() -> None:
    print(f"torch {torch.__version__}")
    for dtype in (torch.float32, torch.bfloat16):
        print(f"{dtype!s:15} {check(dtype)}")


if __name__ == "__main__":
    main()

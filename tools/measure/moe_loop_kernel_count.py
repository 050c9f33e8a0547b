"""Count the ATen ops transformers 4.x's MoE block issues per expert in a training micro-batch, on CPU.

transformers 4.53-4.57 (``training_transformers`` 4.49-4.57 in the plan) builds Qwen3-MoE's routed experts as a
ModuleList of nn.Linear MLPs and loops over the experts some token routes to in Python
(``Qwen3MoeSparseMoeBlock.forward``: ``expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()``,
``for expert_idx in expert_hit``): each pass of the loop issues its own chain of ops, forward and backward. This runs
the block (tiny dimensions: the count does not depend on them) under kernel_count's ``Count`` dispatch mode at two
expert counts with every expert hit, and prints the ops of the forward, the backward and the recompute under full
activation checkpointing (non-reentrant ``torch.utils.checkpoint``, the backward's extra over a plain one), split
into a fixed part and a part per expert hit (the difference of the two counts ÷ the difference of the experts).

Needs torch and transformers 4.57 (tools/measure/setup_env.sh, then ``pip install transformers==4.57.1``):
    .venv-measure/bin/python tools/measure/moe_loop_kernel_count.py
Its output is quoted in docs/TRAINING_TIME.md ("transformers 4.x's expert loop").
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_count import Count

TOKENS = 256  # every expert is hit at this many tokens (checked below)


def _block(experts: int) -> torch.nn.Module:
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    cfg = Qwen3MoeConfig(
        hidden_size=64, moe_intermediate_size=32, num_experts=experts, num_experts_per_tok=2, norm_topk_prob=True
    )
    return Qwen3MoeSparseMoeBlock(cfg).to(torch.bfloat16)


def _count(experts: int, ckpt: bool) -> tuple[int, int]:
    torch.manual_seed(0)
    block = _block(experts)
    x = torch.randn(1, TOKENS, 64, dtype=torch.bfloat16, requires_grad=True)

    def run(h: torch.Tensor) -> torch.Tensor:
        out = block(h)
        return out[0] if isinstance(out, tuple) else out

    with torch.no_grad():
        logits = block.gate(x.view(-1, 64))
        hit = torch.topk(logits, 2, dim=-1).indices.unique().numel()
    assert hit == experts, f"{hit} of {experts} experts hit"
    with Count() as fwd:
        y = checkpoint(run, x, use_reentrant=False) if ckpt else run(x)
    with Count() as bwd:
        y.backward(torch.ones_like(y))
    return fwd.total, bwd.total


def main() -> None:
    import transformers

    print("torch", torch.__version__, "transformers", transformers.__version__)
    low, high = 8, 16
    rows = {}
    for experts in (low, high):
        forward, backward = _count(experts, ckpt=False)
        _, backward_ckpt = _count(experts, ckpt=True)
        rows[experts] = (forward, backward, backward_ckpt - backward)
        print(f"E={experts}: forward {forward}, backward {backward}, recompute {backward_ckpt - backward}")
    for i, name in enumerate(("forward", "backward", "recompute")):
        per = (rows[high][i] - rows[low][i]) / (high - low)
        fixed = rows[low][i] - per * low
        print(f"{name}: {per:g} ops per expert hit + {fixed:g} fixed")


if __name__ == "__main__":
    main()

"""Count the ATen ops an eager training micro-batch issues per transformer block, on CPU.

Runs one transformers ``LlamaDecoderLayer`` (tiny dimensions: the count does not depend on them)
under a ``TorchDispatchMode`` that sees every op below autograd, i.e. every op the device would
run, and counts those that launch work: views and aliases (``OpOverload.is_view``) and empty
allocations launch no kernel and are left out. Per method (full, PEFT LoRA on q/v or every linear)
and attention implementation (SDPA, eager): the forward, the backward, and the recompute under
full activation checkpointing (``torch.utils.checkpoint``, non-reentrant) as the difference of the
backward with and without it. Also AdamW's step per parameter tensor for torch's for-loop,
foreach and fused implementations.

Needs torch, transformers and peft (not the planner's environment):
    /tmp/torchenv/bin/python tools/measure/kernel_count.py
Its output is quoted in core/training/speed.py (EAGER_BLOCK_KERNELS) and docs/TRAINING_TIME.md.
"""

from __future__ import annotations

import collections
import sys
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint

_NO_KERNEL = {"empty.memory_format", "empty_strided.default", "empty_like.default", "detach.default"}


class Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = str(func.overloadpacket.__name__) + "." + func._overloadname
        if not func.is_view and name not in _NO_KERNEL:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.ops.values())


def _layer(attn: str, lora: str) -> tuple[torch.nn.Module, Any]:
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    cfg = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=1,
        vocab_size=32,
    )
    cfg._attn_implementation = attn
    layer: torch.nn.Module = LlamaDecoderLayer(cfg, 0).to(torch.bfloat16)
    rope = LlamaRotaryEmbedding(cfg)
    if lora == "frozen":
        layer.requires_grad_(False)
    elif lora:
        from peft import LoraConfig, get_peft_model

        targets = (
            ["q_proj", "v_proj"]
            if lora == "qv"
            else ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        )
        layer = get_peft_model(layer, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, target_modules=targets))
        layer.train()
    return layer, rope


def _block(attn: str, lora: str, ckpt: bool) -> tuple[int, int]:
    """(forward ops, backward ops) of one block for a batch of 2 × 16 tokens."""
    layer, rope = _layer(attn, lora)
    x = torch.randn(2, 16, 64, dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(16).unsqueeze(0)
    cos, sin = rope(x, pos)
    cos, sin = cos.detach(), sin.detach()
    mask = None
    if attn == "eager":
        mask = torch.full((16, 16), float("-inf"), dtype=torch.bfloat16).triu(1)[None, None].expand(2, 1, 16, 16)

    def run(h: torch.Tensor) -> torch.Tensor:
        out = layer(h, attention_mask=mask, position_ids=pos, position_embeddings=(cos, sin))
        return out[0] if isinstance(out, tuple) else out

    with Count() as fwd:
        y = checkpoint(run, x, use_reentrant=False) if ckpt else run(x)
    g = torch.ones_like(y)
    with Count() as bwd:
        y.backward(g)
    return fwd.total, bwd.total


def _decode(attn: str) -> int:
    """Ops of one block in a Hugging Face generate decode step: one new token against a 16-token
    cache, no grad (what core.serving.fit's HF_HOST_LAYER times per layer)."""
    from transformers import DynamicCache

    layer, rope = _layer(attn, "")
    layer.eval()
    cache = DynamicCache()
    with torch.no_grad():
        for start, n in ((0, 16), (16, 1)):
            x = torch.randn(1, n, 64, dtype=torch.bfloat16)
            pos = torch.arange(start, start + n).unsqueeze(0)
            cos, sin = rope(x, pos)
            with Count() as c:
                layer(
                    x,
                    attention_mask=None,
                    position_ids=pos,
                    past_key_values=cache,
                    use_cache=True,
                    cache_position=pos[0],
                    position_embeddings=(cos, sin),
                )
    return c.total


def _adamw(impl: str, tensors: int) -> int:
    params = [torch.nn.Parameter(torch.randn(8, 8)) for _ in range(tensors)]
    for p in params:
        p.grad = torch.randn_like(p)
    kw = {"foreach": impl == "foreach", "fused": impl == "fused"}
    opt = torch.optim.AdamW(params, lr=1e-3, **kw)  # type: ignore[arg-type]
    opt.step()  # the first step builds the state
    with Count() as c:
        opt.step()
    return c.total


def main() -> int:
    print(f"torch {torch.__version__}", end="")
    try:
        import peft
        import transformers

        print(f", transformers {transformers.__version__}, peft {peft.__version__}")
    except ImportError:
        print()
    print("per block, one micro-batch: forward | backward | recompute (checkpointed backward - plain)")
    for attn in ("sdpa", "eager"):
        for lora in ("", "frozen", "qv", "all"):
            f, b = _block(attn, lora, False)
            fc, bc = _block(attn, lora, True)
            label = {"": "full", "frozen": "frozen", "qv": "LoRA q,v", "all": "LoRA all-linear"}[lora]
            print(
                f"  {attn:5s} {label:16s} forward {f:4d}  backward {b:4d}  recompute {bc - b:4d}  "
                f"(checkpointed forward {fc})  total plain {f + b}, checkpointed {fc + bc}"
            )
    print(f"decode step, one block, no grad: sdpa {_decode('sdpa')}")
    print("AdamW step, ops for n parameter tensors (n = 1, 10, 100):")
    for impl in ("for-loop", "foreach", "fused"):
        print(f"  {impl:8s} " + "  ".join(str(_adamw(impl, n)) for n in (1, 10, 100)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

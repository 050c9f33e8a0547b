"""Count the ATen ops an eager training micro-batch issues per transformer block, on CPU.

Runs one transformers ``LlamaDecoderLayer`` (tiny dimensions: the count does not depend on them)
under a ``TorchDispatchMode`` that sees every op below autograd, i.e. every op the device would
run, and counts those that launch work: views and aliases (``OpOverload.is_view``) and empty
allocations launch no kernel and are left out. Per method (full, PEFT LoRA on q/v or every linear)
and attention implementation (SDPA, eager): the forward, the backward, and the recompute under
full activation checkpointing (``torch.utils.checkpoint``, non-reentrant) as the difference of the
backward with and without it. Also AdamW's step per parameter tensor for torch's for-loop,
foreach and fused implementations.

The optimizer step over a tiny Llama's parameter list (``--step``; the counts depend on how many
tensors there are, not on their size): per optimizer and implementation the ops the step issues
and the bytes they read and write per trainable element (each op's distinct tensor inputs read,
its outputs written; in-place outputs are writes of the tensor read), with the Trainer's extras
before it — clip_grad_norm_ (foreach norms, their stack and norm, the clip coefficient, the
foreach multiply), a GradScaler's unscale and inf check — each counted apart; and the ops of the
whole causal LM outside its blocks (embedding, final norm, head, loss: forward and backward) as
the model's count less its blocks'.

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


def _walk(x: Any, into: dict[int, int]) -> None:
    """The bulk tensors in ``x`` (nested lists), by identity: 0-d scalars (steps, lr, the clip
    coefficient) move no bulk data."""
    if isinstance(x, torch.Tensor):
        if x.dim() > 0:
            into[id(x)] = x.numel() * x.element_size()
    elif isinstance(x, (list, tuple)):
        for y in x:
            _walk(y, into)


def _bytes(func: Any, args: Any, kwargs: Any, out: Any) -> int:
    """Bytes an op reads (its distinct tensor inputs, a tensor passed twice read once) and writes:
    its outputs, and the arguments its schema marks as mutated (``Tensor(a!)``: in-place and foreach
    ``_`` ops return nothing or self)."""
    read: dict[int, int] = {}
    _walk((args, kwargs), read)
    written: dict[int, int] = {}
    _walk(out, written)
    scaled = kwargs.get("grad_scale") is not None
    for i, arg in enumerate(func._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            if arg.name == "grads" and not scaled:
                continue  # _fused_adamw_ / _fused_sgd_ unscale the gradients in place only with a grad_scale
            value = args[i] if i < len(args) else kwargs.get(arg.name)
            _walk(value, written)
    return sum(read.values()) + sum(written.values())


def _device_op(args: Any, kwargs: Any) -> bool:
    """An op over bulk tensors: one that launches device work on a GPU. The for-loop and foreach
    optimizers keep their step counters on the CPU (torch/optim/adam.py ``_init_group``), so their
    increments and ``_get_value`` reads are host work alone."""
    bulk: dict[int, int] = {}
    _walk((args, kwargs), bulk)
    return bool(bulk)


class Traffic(Count):
    """Count the ops over bulk tensors, and the bytes they read and write."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0
        self.device: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = super().__torch_dispatch__(func, types, args, kwargs)
        name = str(func.overloadpacket.__name__) + "." + func._overloadname
        kwargs = kwargs or {}
        if not func.is_view and name not in _NO_KERNEL and _device_op(args, kwargs):
            self.device[name] += 1
            self.bytes += _bytes(func, args, kwargs, out)
        return out


def _tiny_llama(layers: int = 2) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=layers,
        vocab_size=96,
    )
    cfg._attn_implementation = "sdpa"
    model: torch.nn.Module = LlamaForCausalLM(cfg)
    return model


def _optimizer(name: str, impl: str, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    kw: dict[str, Any] = {"foreach": impl == "foreach", "fused": impl == "fused"} if impl else {}
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0, **kw)  # Trainer's weight_decay 0.0
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **kw)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, **kw)
    if name == "adafactor":
        return torch.optim.Adafactor(params, lr=1e-2, foreach=impl == "foreach")
    raise ValueError(name)


def _step(name: str, impl: str) -> tuple[int, float, int, float, int, float]:
    """(device ops, bytes per element) of the optimizer step, of clip_grad_norm_ and of a GradScaler's
    unscale_ over a tiny Llama's parameters (float32: bytes per element ÷ 4 is passes over them)."""
    model = _tiny_llama()
    params = [p for p in model.parameters() if p.requires_grad]
    elements = sum(p.numel() for p in params)
    for p in params:
        p.grad = torch.randn_like(p)
    opt = _optimizer(name, impl, params)
    opt.step()  # the first step builds the state
    with Traffic() as step:
        opt.step()
    with Traffic() as clip:
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
    with Traffic() as unscale:  # GradScaler.unscale_: one fused non-finite check and unscale per device and dtype
        found = torch.zeros(1)
        torch._amp_foreach_non_finite_check_and_unscale_([p.grad for p in params], found, torch.ones(1))
    if "-v" in sys.argv:
        print(f"    {name} {impl}: {dict(step.device)}; clip {dict(clip.device)}")
    return (
        sum(step.device.values()),
        step.bytes / elements,
        sum(clip.device.values()),
        clip.bytes / elements,
        sum(unscale.device.values()),
        unscale.bytes / elements,
    )


def _outside_blocks(trains: bool) -> tuple[int, int]:
    """(forward, backward) ops of a causal LM outside its blocks: embedding, final norm, head and
    Hugging Face's loss (the logits upcast to float32 inside), as the 2-block model's less 2 blocks';
    ``trains``: the embedding, norm and head train (full fine-tuning), else they are frozen (an
    adapter's base) and the backward only carries the gradient through the head to the blocks."""
    model = _tiny_llama().to(torch.bfloat16)
    if not trains:
        model.model.embed_tokens.requires_grad_(False)
        model.model.norm.requires_grad_(False)
        model.lm_head.requires_grad_(False)
    ids = torch.randint(0, 96, (2, 16))
    with Count() as fwd:
        loss = model(input_ids=ids, labels=ids).loss
    with Count() as bwd:
        loss.backward()
    block_f, block_b = _block("sdpa", "", False)
    # The model's forward also builds the rotary cos / sin once and its causal mask (SDPA: none when
    # the batch has no padding): counted here with the outside ops.
    return fwd.total - 2 * block_f, bwd.total - 2 * block_b


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
    if "--step" in sys.argv:
        tensors = sum(1 for _ in _tiny_llama().parameters())
        print(f"optimizer step over a 2-block Llama's {tensors} tensors: device ops, bytes per float32 element")
        for name, impls in (
            ("adamw", ("forloop", "foreach", "fused")),
            ("sgd-momentum", ("forloop", "foreach", "fused")),
            ("sgd", ("forloop", "foreach", "fused")),
            ("adafactor", ("forloop", "foreach")),
        ):
            for impl in impls:
                ops, per, clip_ops, clip_per, unscale_ops, unscale_per = _step(name, impl)
                print(
                    f"  {name:12s} {impl:8s} step {ops:4d} ops {per:6.2f} B  "
                    f"clip {clip_ops} ops {clip_per:.2f} B  unscale {unscale_ops} ops {unscale_per:.2f} B"
                )
        for trains in (True, False):
            f, b = _outside_blocks(trains)
            print(
                f"outside the blocks (embedding, final norm, head, loss), one micro-batch, "
                f"{'trained' if trains else 'frozen'}: forward {f}, backward {b}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

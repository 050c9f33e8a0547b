"""lit-gpt's fused q|k|v output kept whole by SDPA, measured on small CPU tensors (docs/REAL_GPU_MEMORY.md,
"lit-gpt's fused q|k|v view, settled"; core.training.activations._attention).

Transcribes lit-gpt 8641822's ``CausalSelfAttention.forward`` (lit_gpt/model.py: ``qkv.view(B, T, G, q_per_kv + 2,
hs).permute(0, 2, 3, 1, 4).split((q_per_kv, 1, 1), dim=2)``, ``expand`` where ``n_query_groups != 1``, ``reshape(B,
-1, T, hs)``, partial ``apply_rope`` and ``torch.cat``, ``F.scaled_dot_product_attention(..., is_causal=True)``,
``y.transpose(1, 2).reshape(B, T, C)``) and its ``LoRAQKVLinear.forward`` (lit_gpt/lora.py: ``pretrained =
self.linear(x)``; ``F.linear(self.lora_dropout(x), self.lora_A)``; ``conv1d`` with lora_B; ``zero_pad``; ``pretrained
+ lora``), q and v adapted as finetune/lora.py sets them (r 8, dropout 0.05). litgpt 5895df1 and 00af8b0 run the same
lines for multi-head attention (they ``expand`` for every ``n_query_groups != n_head`` in training).

Part 1 (bf16 LoRA): ``torch.autograd.graph.saved_tensors_hooks`` records every tensor autograd saves; the report lists
the storages by ``untyped_storage().data_ptr()``, marks the fused q|k|v output's storage, and gives the bytes per token
kept beyond q and k after RoPE and v of its own size.

Part 2 (QLoRA, bitsandbytes 0.41.1): a stand-in for ``MatMul4Bit`` (bitsandbytes/autograd/_functions.py at 0.41.1:
``ctx.tensors = (A, B)`` when ``any(ctx.needs_input_grad[:2])``, nothing through ``save_for_backward``) as the base
q|k|v, MLP and proj layers; a TorchDispatchMode counts the live bytes of every storage made in the forward (weakref
finalizers give them back), so a reference on ``ctx`` counts as autograd's saved tensors do. It reports whether the
kept 4-bit input is the storage of a tensor autograd saves anyway (the LoRA branch's input, the norm's).

    .venv-measure/bin/python tools/measure/litgpt_qkv_check.py      # tools/measure/setup_env.sh: torch 2.13.0 CPU
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from live_bytes import LiveBytes  # tools/measure/live_bytes.py: these checks run as scripts from this folder
from torch import nn

DT = torch.bfloat16
B, T = 2, 64


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """lit-gpt 8641822 lit_gpt/model.py ``apply_rope``."""
    head_size = x.size(-1)
    x1 = x[..., : head_size // 2]
    x2 = x[..., head_size // 2 :]
    rotated = torch.cat((-x2, x1), dim=-1)
    roped = (x * cos) + (rotated * sin)
    return roped.type_as(x)


class MatMul4BitStandIn(torch.autograd.Function):
    """bitsandbytes 0.41.1 ``MatMul4Bit.forward``: the output is ``linear(A, dequantize(B).to(A.dtype).t())``;
    ``ctx.tensors = (A, B)`` if ``any(ctx.needs_input_grad[:2])`` else ``(None, None)`` (a bf16 weight stands in)."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        out = F.linear(a, w)
        ctx.tensors = (a, w) if any(ctx.needs_input_grad[:2]) else (None, None)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None]:
        _, w = ctx.tensors
        return grad @ w, None


class Base(nn.Module):
    """A frozen base linear: nn.Linear (bf16 LoRA) or the 4-bit stand-in (QLoRA)."""

    def __init__(self, n_in: int, n_out: int, four_bit: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in, dtype=DT) * 0.02, requires_grad=False)
        self.four_bit = four_bit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return MatMul4BitStandIn.apply(x, self.weight) if self.four_bit else F.linear(x, self.weight)


class LoRAQKV(nn.Module):
    """lit-gpt 8641822 ``LoRAQKVLinear`` with ``enable_lora = (True, False, True)``."""

    def __init__(self, d: int, q: int, kv: int, four_bit: bool, r: int = 8) -> None:
        super().__init__()
        self.linear = Base(d, q + 2 * kv, four_bit)
        self.q, self.kv, self.r = q, kv, r
        self.lora_A = nn.Parameter(torch.randn(2 * r, d, dtype=DT) * 0.02)
        self.lora_B = nn.Parameter(torch.randn(q + kv, r, dtype=DT) * 0.02)
        self.drop = nn.Dropout(0.05)
        self.lora_ind = list(range(q)) + list(range(q + kv, q + 2 * kv))

    def zero_pad(self, x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(0, 1)
        out_features = self.q + 2 * self.kv
        result = x.new_zeros((*x.shape[:-1], out_features)).view(-1, out_features)
        result = result.index_copy(1, torch.tensor(self.lora_ind), x.reshape(-1, self.q + self.kv))
        return result.view((*x.shape[:-1], out_features)).transpose(0, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pretrained = self.linear(x)
        after_a = F.linear(self.drop(x), self.lora_A)
        a_t, w = after_a.transpose(-2, -1), self.lora_B.unsqueeze(-1)
        if self.q == self.kv:  # LoRAQKVLinear.conv1d: n_head == n_query_groups
            after_b = F.conv1d(a_t, w, groups=2)
        else:
            parts = zip(a_t.chunk(2, dim=1), w.split((self.q, self.kv)), strict=True)
            after_b = torch.cat([F.conv1d(a, b) for a, b in parts], dim=1)
        after_b = after_b.transpose(-2, -1)
        return pretrained + self.zero_pad(after_b) * 2.0


class Attention(nn.Module):
    """lit-gpt 8641822 ``CausalSelfAttention.forward`` (no KV cache, no mask)."""

    def __init__(self, d: int, heads: int, groups: int, four_bit: bool) -> None:
        super().__init__()
        self.heads, self.groups, self.hs = heads, groups, d // heads
        self.rope_n_elem = self.hs // 4  # StableLM-alpha's rotary_percentage 0.25
        self.attn = LoRAQKV(d, d, groups * self.hs, four_bit)
        self.proj = Base(d, d, four_bit)
        self.qkv: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        qkv = self.attn(x)
        self.qkv = qkv
        q_per_kv = self.heads // self.groups
        qkv = qkv.view(b, t, self.groups, q_per_kv + 2, self.hs).permute(0, 2, 3, 1, 4)
        q, k, v = qkv.split((q_per_kv, 1, 1), dim=2)
        if self.groups != 1:
            k = k.expand(b, self.groups, q_per_kv, t, self.hs)
            v = v.expand(b, self.groups, q_per_kv, t, self.hs)
        q = q.reshape(b, -1, t, self.hs)
        k = k.reshape(b, -1, t, self.hs)
        v = v.reshape(b, -1, t, self.hs)
        n = self.rope_n_elem
        q = torch.cat((apply_rope(q[..., :n], cos, sin), q[..., n:]), dim=-1)
        k = torch.cat((apply_rope(k[..., :n], cos, sin), k[..., n:]), dim=-1)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, scale=1.0 / math.sqrt(self.hs), is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """lit-gpt 8641822 ``Block.forward`` with two LayerNorms, parallel residual (StableLM-alpha) and GptNeoxMLP."""

    def __init__(self, d: int, heads: int, groups: int, four_bit: bool) -> None:
        super().__init__()
        self.norm_1 = nn.LayerNorm(d, dtype=DT).requires_grad_(False)
        self.norm_2 = nn.LayerNorm(d, dtype=DT).requires_grad_(False)
        self.attn = Attention(d, heads, groups, four_bit)
        self.fc = Base(d, 4 * d, four_bit)
        self.mlp_proj = Base(4 * d, d, four_bit)
        self.x_normed: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        n1 = self.norm_1(x)
        self.x_normed = n1
        h = self.attn(n1, cos, sin)
        return self.mlp_proj(F.gelu(self.fc(self.norm_2(x)))) + h + x


def rope_cache(n_elem: int) -> tuple[torch.Tensor, torch.Tensor]:
    theta = 1.0 / (10000 ** (torch.arange(0, n_elem, 2).float() / n_elem))
    idx = torch.outer(torch.arange(T).float(), theta).repeat(1, 2)
    return torch.cos(idx).to(DT), torch.sin(idx).to(DT)


def saved_storages(block: Block, x: torch.Tensor) -> tuple[dict[int, tuple[int, str]], torch.Tensor]:
    """Run the block's forward under saved_tensors_hooks; storages keyed by data_ptr: (nbytes, shapes)."""
    kept: dict[int, tuple[int, str]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        old = kept.get(s.data_ptr(), (0, ""))[1]
        kept[s.data_ptr()] = (s.nbytes(), (old + " " if old else "") + "x".join(map(str, t.shape)))
        return t

    cos, sin = rope_cache(block.attn.rope_n_elem)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = block(x, cos, sin)
    return kept, out


def part1(heads: int, groups: int, d: int = 256) -> None:
    torch.manual_seed(0)
    block = Block(d, heads, groups, four_bit=False)
    x = torch.randn(B, T, d, dtype=DT, requires_grad=True)  # a later layer's input: it needs a gradient
    kept, out = saved_storages(block, x)
    qkv = block.attn.qkv
    assert qkv is not None
    ptr, n = qkv.untyped_storage().data_ptr(), B * T
    hs = d // heads
    q_b, kv_b = d * 2, groups * hs * 2  # bytes a token: q, and k or v, in bf16
    name = "MHA" if heads == groups else f"GQA ({heads} heads, {groups} groups)"
    print(f"== part 1, {name}: d {d}, {B}x{T} tokens; fused q|k|v output {qkv.untyped_storage().nbytes() // n} B/token")
    params = {q.untyped_storage().data_ptr() for q in block.parameters()}
    for p, (nbytes, shapes) in sorted(kept.items(), key=lambda kv: -kv[1][0]):
        if p in params:  # the frozen weights F.linear keeps for the input's gradient
            continue
        mark = "  <- the fused q|k|v output" if p == ptr else ""
        print(f"  kept storage {nbytes / n:7.1f} B/token  tensors {shapes}{mark}")
    pinned = ptr in kept
    v_bytes = kept[ptr][0] / n if pinned else 0
    print(f"  q|k|v storage kept whole: {pinned}; that storage {v_bytes:.0f} B/token")
    if pinned:
        print(f"  beyond q, k, v of their own size: {(q_b + 2 * kv_b) - kv_b} B/token = (q + kv) x 2 bytes")
    out.sum().backward()


def live_after_forward(four_bit: bool, d: int, heads: int) -> tuple[float, Block, dict[int, tuple[int, str]]]:
    """Bytes a token of the storages made in the forward and alive after it (the output dropped)."""
    torch.manual_seed(0)
    block = Block(d, heads, heads, four_bit)
    x = torch.randn(B, T, d, dtype=DT, requires_grad=True)
    cos, sin = rope_cache(block.attn.rope_n_elem)
    hooked, _ = saved_storages(block, x)
    mode = LiveBytes()
    with mode:
        out = block(x, cos, sin)
    block.attn.qkv = None
    live = (mode.live - out.untyped_storage().nbytes()) / (B * T)
    block.keep = out  # type: ignore[assignment]  # the graph stays alive through the output
    return live, block, hooked


def part2(d: int = 256, heads: int = 8) -> None:
    n = B * T
    bf16, _, _ = live_after_forward(False, d, heads)
    nf4, block, hooked = live_after_forward(True, d, heads)
    x_normed = block.x_normed
    assert x_normed is not None
    block.x_normed = None
    nptr = x_normed.untyped_storage().data_ptr()
    print(f"== part 2, MHA d {d}, the same block with MatMul4Bit's stand-in as every base layer (live after forward)")
    print(
        f"  live storages made in the forward: bf16 base {bf16:.0f} B/token, 4-bit stand-in {nf4:.0f} B/token, "
        f"difference {nf4 - bf16:.0f} B/token"
    )
    print(
        f"  legacy terms (q/k/v input d, MLP input d, down_proj input 4d, x 2 B): {(d + d + 4 * d) * 2} B/token; "
        f"o_proj input d x 2 = {d * 2} B/token more if it were not the SDPA output's storage"
    )
    print(
        f"  norm_1 output (the 4-bit q|k|v input, {x_normed.untyped_storage().nbytes() // n} B/token) "
        f"saved by autograd as well: {nptr in hooked}"
    )


if __name__ == "__main__":
    print("torch", torch.__version__)
    part1(heads=8, groups=8)
    part1(heads=8, groups=2)
    part2()

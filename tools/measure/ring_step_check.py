"""One rank's ring-attention kernels, timed on one GPU, as torchtitan's Dec-2024 context-parallel rows ran them.

The device check that issue 24's context-parallel rows wait for (docs/TRAINING_TIME.md,
"Context parallel ..." and "What still misses"): torchtitan's Table 2 (pytorch/torchtitan@820504e
benchmarks/llama3_h100_202412_torchtitan.md; Llama 3.1 8B, 8 H100, FSDP + CP, full activation
checkpointing, local batch 1) publishes 3,890 / 2,540 / 1,071 / 548 tokens/s per GPU at CP 1 / 2 /
4 / 8, i.e. 8.42 / 12.90 / 30.60 / 59.80 s per step with the same 32,768 local tokens on every rank.
The model (leave one source out, benchmarks/realgpu/throughput.py) times the attention kernels
and the ring's merges of those steps at 4.17 / 8.89 / 17.82 / 35.69 s and everything else at
3.05 / 3.13 / 3.14 / 3.15 s; the published steps leave 5.37 / 9.77 / 27.46 / 56.65 s for them.
This script measures what one rank's attention really costs per layer at each degree, with no
collectives (one GPU), so that the gap can be split into kernels, the ring's eager merges and what
neither explains (communication, memory pressure). Every ring step has the same shapes at every
degree (c = 16,384), so one GPU can settle the level, not the jump between CP 2 and CP 4.

What it runs is the per-rank op sequence of torch.distributed.tensor.experimental._attention
(pytorch/pytorch@0123248a484ffe531edb5098b986c1bac08cd296; the Dec-2024 defaults are the same:
``_ContextParallelOptions(convert_to_f32=True, enable_load_balance=True, rotate_method=ALL_GATHER)``,
torchtitan 9dec370 ``set_rotate_method("allgather")``, and the collective counts of the Dec-2024
test, test/distributed/tensor/test_attention.py at 01df9461: forward one ``all_gather_into_tensor``
per layer, backward one all-gather and CP ``all_to_all_single``):

- ``_templated_ring_attention``: at step 0 the local Q (both round-robin chunks, 2c = L rows)
  against the local K/V, causal; at step i > 0 the K/V of rank (rank − i) mod CP from the gathered
  buffer, non-causal, either all of Q against the first half of K/V (``i <= rank``) or the second
  half of Q against all of K/V (``partial``); every step but the last concatenates K and V for the
  rotater (computed in eager even though the all-gather rotater ignores it after the first);
  ``_SDPAMerger`` casts each block's output and log-sum-exp to float32 and merges them
  (``out - sigmoid(block_lse - lse) * (out - block_out)``, ``lse - logsigmoid(lse - block_lse)``,
  ``_partial_update``'s chunk and cat);
- ``_templated_ring_attention_backward``: float32 dQ/dK/dV buffers, per step one flash backward
  call on the same shapes (for ``partial`` steps the second half of out, dout and lse, the lse
  made contiguous), dK/dV taken from the buffer the previous rank sent (simulated here by this
  rank's own: the same bytes), ``_partial_update`` or ``+=``, the float32 dK/dV concatenated and
  sent on, dQ accumulated; at the end dQ and dK/dV cast back to 16 bits.

The kernels are ``aten._scaled_dot_product_flash_attention`` and its backward: under CP torchtitan
9dec370 restricts SDPA to ``sdpa_kernel([FLASH_ATTENTION, EFFICIENT_ATTENTION])``
(torchtitan/utils.py ``get_train_context``), and flash takes bf16 at head dim 128. Llama 3.1 8B
repeats its 8 K/V heads to the 32 query heads before SDPA (torchtitan ``repeat_kv``), so every
call is B 1 × H 32 × D 128.

Printed per degree and rank (the first and the last rank; the last merges whole outputs at every
step and paces the backward's per-step all-to-all): forward and backward milliseconds per layer,
the flash kernels alone, their TFLOP/s on FlashAttention's own count (forward 4·B·H·D per score
pair, causal pairs L²/2; backward 2.5 × the forward), and the step seconds the rank's attention
implies under full checkpointing (32 layers × (2 forwards + 1 backward)) beside the model's and
the published residual. ``--compile`` also times the merge under torch.compile (torchtitan
compiles each TransformerBlock with ``fullgraph=True``, so its Inductor may have fused the merges
the eager count charges); ``--fill-gib`` holds that much memory first (the published rows ran at
84 of 96 GiB).

The Dec-2024 rows ran torch 1963fc8 (2024-12-23); a newer torch vendors a newer FlashAttention-2,
so run it on that build (a 2.6 nightly of that date) to reproduce their kernels, and on the
current one to see what moved.

    python -m tools.measure.ring_step_check --out /tmp/ring            # CP 1, 2, 4, 8
    python -m tools.measure.ring_step_check --cp 8 --compile --fill-gib 60
"""

from __future__ import annotations

import argparse
import json
import pathlib
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

aten = torch.ops.aten

# Llama 3.1 8B under torchtitan's Table 2 (see the module docstring).
LAYERS = 32
HEADS = 32
HEAD_DIM = 128
LOCAL_TOKENS = 32768
# The published step seconds (tokens/s per GPU → 32,768 / value) and what the model times as the
# attention kernels plus the ring's merges of them (benchmarks/realgpu/throughput.py, torchtitan
# left out, at the commit that added this script: attention:hopper/flash + ring_merge) and as the
# rest; the published residual = published − the model's rest.
PUBLISHED_STEP_S = {1: 32768 / 3890, 2: 32768 / 2540, 4: 32768 / 1071, 8: 32768 / 548}
MODEL_ATTENTION_S = {1: 4.17, 2: 8.35 + 0.54, 4: 16.69 + 1.13, 8: 33.38 + 2.31}
MODEL_OTHER_S = {1: 3.05, 2: 3.13, 4: 3.14, 8: 3.15}


def _merge(
    out: torch.Tensor, lse: torch.Tensor, block_out: torch.Tensor, block_lse: torch.Tensor, partial: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """_SDPAMerger.step + _merge_one (convert_to_f32=True), seq dim 2, ROUND_ROBIN_CYCLE 2."""
    block_out = block_out.to(torch.float32)
    block_lse = block_lse.to(torch.float32).unsqueeze(dim=-1)
    old_lse = lse.chunk(2, dim=2)[1] if partial else lse
    old_out = out.chunk(2, dim=2)[1] if partial else out
    new_out = old_out - F.sigmoid(block_lse - old_lse) * (old_out - block_out)
    new_lse = old_lse - F.logsigmoid(old_lse - block_lse)
    if partial:
        out = torch.cat([out.chunk(2, dim=2)[0], new_out], dim=2)
        lse = torch.cat([lse.chunk(2, dim=2)[0], new_lse], dim=2)
        return out, lse
    return new_out, new_lse


def _half_add(original: torch.Tensor, new: torch.Tensor, idx: int) -> torch.Tensor:
    """_partial_update(original, new, dim=2, n_chunks=2, idx, add=True)."""
    chunks = list(original.chunk(2, dim=2))
    chunks[idx] += new
    return torch.cat(chunks, dim=2)


def _step_inputs(i: int, rank: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[Any, ...]:
    """(q, k, v, is_causal, partial) of ring step ``i`` with load balancing on."""
    if i == 0:
        return q, k, v, True, False
    if i <= rank:
        return q, k.chunk(2, dim=2)[0], v.chunk(2, dim=2)[0], False, False
    return q.chunk(2, dim=2)[1], k, v, False, True


class Rank:
    def __init__(self, cp: int, rank: int, merge: Callable[..., Any]) -> None:
        shape = (1, HEADS, LOCAL_TOKENS, HEAD_DIM)
        opts: dict[str, Any] = {"device": "cuda", "dtype": torch.bfloat16}
        self.cp, self.rank, self.merge = cp, rank, merge

        def local() -> torch.Tensor:  # torchtitan's xq / xk / xv: (B, S, H, D) transposed to (B, H, S, D)
            return torch.randn(1, LOCAL_TOKENS, HEADS, HEAD_DIM, **opts).transpose(1, 2)

        self.q, self.k, self.v = local(), local(), local()
        # The all-gathered K/V buffer: one contiguous (K, V) per CP rank.
        self.gathered = [(torch.randn(*shape, **opts), torch.randn(*shape, **opts)) for _ in range(cp)]
        self.kernel_ms = 0.0

    def _kv(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if i == 0:  # the local K/V, made contiguous by the ring (a copy of the transposed view)
            return self.k.contiguous(), self.v.contiguous()
        return self.gathered[(self.rank - i) % self.cp]

    def forward(self, time_kernels: bool = False) -> tuple[torch.Tensor, torch.Tensor, list[Any]]:
        out: torch.Tensor | None = None
        lse: torch.Tensor | None = None
        rest: list[Any] = []
        for i in range(self.cp):
            key, value = self._kv(i)
            if i < self.cp - 1:
                torch.cat([key.flatten(), value.flatten()])  # the rotater's send buffer
            q, k, v, causal, partial = _step_inputs(i, self.rank, self.q, key, value)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            block_out, block_lse, *rest = aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False)
            end.record()
            if time_kernels:
                end.synchronize()
                self.kernel_ms += start.elapsed_time(end)
            if self.cp == 1:  # no context parallel: torchtitan calls SDPA itself, no ring, no merger
                return block_out, block_lse, rest
            if out is None or lse is None:
                out, lse = block_out.to(torch.float32), block_lse.to(torch.float32).unsqueeze(-1)
            else:
                out, lse = self.merge(out, lse, block_out, block_lse, partial)
        assert out is not None and lse is not None
        return out.to(torch.bfloat16), lse.squeeze(-1), rest

    def backward(self, out: torch.Tensor, lse: torch.Tensor, rest: list[Any], time_kernels: bool = False) -> None:
        dout = torch.randn_like(out)
        grad_q = torch.zeros_like(self.q, dtype=torch.float32)
        grad_k = torch.zeros_like(self.k, dtype=torch.float32)
        grad_v = torch.zeros_like(self.v, dtype=torch.float32)
        sent: torch.Tensor | None = None
        for i in range(self.cp):
            key, value = self._kv(i)
            if i != self.cp - 1:
                torch.cat([key.flatten(), value.flatten()])
            q, k, v, causal, partial = _step_inputs(i, self.rank, self.q, key, value)
            o, d, s = (out, dout, lse)
            if partial:
                o, d, s = out.chunk(2, dim=2)[1], dout.chunk(2, dim=2)[1], lse.chunk(2, dim=2)[1].contiguous()
            cum_q, cum_k, _, _, seed, offset = rest[:6]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            gq, gk, gv = aten._scaled_dot_product_flash_attention_backward(
                d, q, k, v, o, s, cum_q, cum_k, q.size(2), k.size(2), 0.0, causal, seed, offset
            )
            end.record()
            if time_kernels:
                end.synchronize()
                self.kernel_ms += start.elapsed_time(end)
            if self.cp == 1:  # the plain SDPA backward
                return
            if i == 0:
                grad_k += gk
                grad_v += gv
            else:
                assert sent is not None  # the previous rank's float32 dK/dV: the same bytes as ours
                grad_k = sent[: grad_k.numel()].reshape(grad_k.shape)
                grad_v = sent[grad_k.numel() :].reshape(grad_v.shape)
                if i <= self.rank:
                    grad_k, grad_v = _half_add(grad_k, gk, 0), _half_add(grad_v, gv, 0)
                else:
                    grad_k += gk
                    grad_v += gv
            sent = torch.cat([grad_k.flatten(), grad_v.flatten()])
            if i <= self.rank:
                grad_q += gq
            else:
                grad_q = _half_add(grad_q, gq, 1)
        assert sent is not None
        grad_q.to(torch.bfloat16)
        sent.to(torch.bfloat16)


def _flops(cp: int) -> tuple[float, float]:
    """FlashAttention's count for one layer's ring call on a rank: forward, backward."""
    pairs = LOCAL_TOKENS * LOCAL_TOKENS / 2 * cp  # step 0 causal L²/2, each further step (L/2)·L
    forward = 4.0 * HEADS * HEAD_DIM * pairs
    return forward, 2.5 * forward


def _time(fn: Callable[[], Any], reps: int) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


def measure(cp: int, rank: int, merge: Callable[..., Any], reps: int) -> dict[str, float]:
    r = Rank(cp, rank, merge)
    forward_ms = _time(lambda: r.forward(), reps)
    out, lse, rest = r.forward()
    backward_ms = _time(lambda: r.backward(out, lse, rest), reps)
    r.kernel_ms = 0.0
    r.forward(time_kernels=True)
    forward_kernel_ms = r.kernel_ms
    r.kernel_ms = 0.0
    r.backward(out, lse, rest, time_kernels=True)
    backward_kernel_ms = r.kernel_ms
    f_flops, b_flops = _flops(cp)
    step_s = LAYERS * (2 * forward_ms + backward_ms) / 1000  # full checkpointing: forward twice
    return {
        "cp": cp,
        "rank": rank,
        "forward_ms": forward_ms,
        "backward_ms": backward_ms,
        "forward_kernel_ms": forward_kernel_ms,
        "backward_kernel_ms": backward_kernel_ms,
        "forward_kernel_tflops": f_flops / forward_kernel_ms / 1e9,
        "backward_kernel_tflops": b_flops / backward_kernel_ms / 1e9,
        "attention_step_s": step_s,
        "model_attention_step_s": MODEL_ATTENTION_S[cp],
        "published_attention_residual_s": PUBLISHED_STEP_S[cp] - MODEL_OTHER_S[cp],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cp", type=int, action="append", help="degrees (default 1 2 4 8)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--compile", action="store_true", help="also time the merge under torch.compile")
    parser.add_argument("--fill-gib", type=float, default=0.0, help="hold this much memory first")
    parser.add_argument("--out", type=pathlib.Path, default=None)
    args = parser.parse_args(argv)
    torch.backends.cuda.enable_flash_sdp(True)
    filler = torch.empty(int(args.fill_gib * 2**30), dtype=torch.uint8, device="cuda") if args.fill_gib else None
    merges: dict[str, Callable[..., Any]] = {"eager": _merge}
    if args.compile:
        merges["compiled"] = torch.compile(_merge, dynamic=False)
    rows = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, filler {args.fill_gib} GiB")
    for cp in args.cp or [1, 2, 4, 8]:
        for rank in sorted({0, cp - 1}):
            for name, merge in merges.items():
                row = {**measure(cp, rank, merge, args.reps), "merge": name}
                rows.append(row)
                print(
                    f"CP {cp} rank {rank} {name:8s} fwd {row['forward_ms']:8.1f} ms "
                    f"(kernels {row['forward_kernel_ms']:8.1f}, {row['forward_kernel_tflops']:5.0f} TFLOP/s)  "
                    f"bwd {row['backward_ms']:8.1f} ms (kernels {row['backward_kernel_ms']:8.1f}, "
                    f"{row['backward_kernel_tflops']:5.0f} TFLOP/s)  attention per step "
                    f"{row['attention_step_s']:6.2f} s"
                    f" (model {row['model_attention_step_s']:.2f}, published residual "
                    f"{row['published_attention_residual_s']:.2f})"
                )
            torch.cuda.empty_cache()
    del filler
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "ring_step_check.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

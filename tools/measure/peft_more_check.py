"""What PEFT's FourierFT and RoAd keep for the backward, and the high points of their forward and backward, measured
on small CPU tensors with PEFT's own layers (docs/REAL_GPU_MEMORY.md, "PEFT's FourierFT and RoAd";
core.training.activations._fourierft and _road, core.params.fourierft_tensor_sizes and road_tensor_sizes). Branch
h76peft.

A frozen bf16 q_proj (d -> d) and v_proj (d -> kv) read one bf16 input that needs a gradient, wrapped by
``peft.get_peft_model`` (autocast_adapter_dtype=True: float32 adapters on the bf16 base, as the method comparison runs),
as tools/measure/lycoris_check.py does for LoHa, LoKr, VeRA, OFT, AdaLoRA and MiSS.

Expected from the source read at huggingface/peft 51c2ff66 (PEFT 0.18.0's forward lines are the same; only
update_layer's signature differs):

FourierFT (fourierft/layer.py ``get_delta_weight``: a float32 (out, in) zeros, the spectrum scattered into it,
``torch.fft.ifft2(dense).real * scaling``; ``FourierFTLinear.forward``: ``x = x.to(delta_w.dtype)``, ``result +
F.linear(x, delta_w)``), per target: the float32 copy of the input (N x in) and the float32 delta (out x in), both kept
by F.linear; the scatter keeps its int64 indices (2 x n, moved to the device each forward), the FFT nothing.

RoAd (road/layer.py ``Linear.forward``: ``result = _cast_input_dtype(base_layer(x), road_theta.dtype)``;
``_apply_road``: ``x * first_col + rotate_half_x * second_col``), per target: the float32 base output (N x out) and
its rotated-half copy (N x out, a fresh stack), kept by the two multiplies with their columns (6 out-long float32
vectors a target for road_1, 4 for road_2, 6 for road_4 over more than one group); the frozen base keeps no copy of
x.

VB-LoRA (branch h78peft; vblora/layer.py ``_get_low_rank_matrix``: topk, softmax, ``vector_bank[indices]``, the
weighted sum; ``Linear.forward``: ``x.to(bank dtype)``, ``F.linear(F.linear(x, A), B)``), per target: the float32 input
copy (N x in), x·Aᵀ (N x r), A (r x in) and B (out x r, a transposed copy), the gathered vectors (k x r·(in + out)),
the int64 top-k indices and the softmax weights (k x r·(in + out) / L each). Bank of 32 vectors of 64, r 4, top 2.

RandLoRA (randlora/layer.py ``UniqueBaseGrad``, ``get_scaled_bases``, ``Linear.forward``), r 32: per target the
scaled basis (r·bases x min(in, out), float32); where in <= out (q_proj) the float32 input copy, where out < in
(v_proj) the first matmul's output (N x r·bases). The shared randlora_A / randlora_B are float32 buffers.

SHiRA (shira/layer.py ``Linear.forward``: a deepcopy of the bf16 weight, the sparse delta added, ``F.linear(x,
new_weight)``), r 4: per target the bf16 new weight (out x in) and the sparse tensor's int64 indices and float32
values (2 x r·(in + out) x 8 + r·(in + out) x 4); x itself (the input) is kept too, not counted here. LiveBytes and
the saved-tensors hook see a sparse tensor's indices and values (``SparseLiveBytes``, ``_sparse_hooks``).

    /tmp/torchenv/bin/python tools/measure/peft_more_check.py    # torch 2.13.0 CPU + peft 0.18.0
"""

from __future__ import annotations

import weakref
from typing import Any

import lycoris_check
import torch
from live_bytes import LiveBytes
from lycoris_check import KV, D, N, Tiny, traced_forward  # the two bf16 projections and input of the other checks
from peft import FourierFTConfig, RandLoraConfig, RoadConfig, ShiraConfig, VBLoRAConfig, get_peft_model
from torch.utils._pytree import tree_leaves

N_FREQ = 100  # FourierFT: trained spectrum entries per target
GROUP = 64  # RoAd's group_size (RoadConfig's default); both outputs (256, 64) divide by it
R_VB, VECTORS, LENGTH, TOPK = 4, 32, 64, 2  # VB-LoRA: rank, bank of 32 vectors of 64 (both widths divide), top 2
R_RAND = 32  # RandLoRA: q_proj 256 / 32 = 8 bases, v_proj 64 / 32 = 2
R_SHIRA = 4  # SHiRA: 4 x (in + out) trained entries a target


def _parts(t: torch.Tensor) -> list[torch.Tensor]:
    """A sparse COO tensor's two storages (indices, values), where LiveBytes and the hook read one; else ``t``."""
    return [t._indices(), t._values()] if t.is_sparse else [t]


class SparseLiveBytes(LiveBytes):
    """LiveBytes that counts a sparse COO output by its indices' and values' storages (SHiRA's delta weight)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                for part in _parts(t):
                    storage = part.untyped_storage()
                    key = storage.data_ptr()
                    if key and key not in self.seen:
                        self.seen[key] = storage.nbytes()
                        self.live += storage.nbytes()
                        weakref.finalize(storage, self._free, key, storage.nbytes())
        if self.live > self.peak:
            self.peak, self.at = self.live, str(func)
        self.log.append((str(func), self.live))
        return out


def _config(kind: str) -> Any:
    targets = ["q_proj", "v_proj"]
    if kind == "fourierft":
        return FourierFTConfig(n_frequency=N_FREQ, scaling=300.0, target_modules=targets)
    if kind == "vblora":
        return VBLoRAConfig(r=R_VB, num_vectors=VECTORS, vector_length=LENGTH, topk=TOPK, target_modules=targets)
    if kind == "randlora":
        return RandLoraConfig(r=R_RAND, target_modules=targets)
    if kind == "shira":
        return ShiraConfig(r=R_SHIRA, target_modules=targets)
    return RoadConfig(variant=kind.replace("road", "road_"), group_size=GROUP, target_modules=targets)


def _expected(kind: str) -> tuple[int, int]:
    """The planner's rule: what the forward keeps (bytes), and the trained elements."""
    if kind == "fourierft":  # each target's float32 input copy and delta weight; 2 x n int64 indices
        return 2 * N * D * 4 + (D * D + KV * D) * 4 + 2 * 2 * N_FREQ * 8, 2 * N_FREQ
    sides = (D + D) + (D + KV)  # in + out summed over q_proj and v_proj
    if kind == "vblora":  # core.training.activations._vblora, and the two input copies
        slots = R_VB * sides // LENGTH
        kept = 2 * N * D * 4 + 2 * N * R_VB * 4 + R_VB * sides * 4 + TOPK * R_VB * sides * 4 + TOPK * slots * (8 + 4)
        logits = R_VB * VECTORS * sides // LENGTH
        return kept, logits + VECTORS * LENGTH
    if kind == "randlora":  # core.training.activations._randlora: q_proj keeps its input copy, v_proj its middle
        q_bases, v_bases = D // R_RAND, KV // R_RAND
        basis = R_RAND * q_bases * D + R_RAND * v_bases * KV
        return N * D * 4 + basis * 4 + N * R_RAND * v_bases * 4, (R_RAND + D) * q_bases + (R_RAND + KV) * v_bases
    if kind == "shira":  # core.training.activations._shira: the bf16 new weights, the sparse indices and values
        return (D * D + KV * D) * 2 + R_SHIRA * sides * (16 + 4), R_SHIRA * sides
    per = {"road1": 0.5, "road2": 1, "road4": 2}[kind]  # road_theta and road_alpha: out/2, out or 2·out each
    # Out-long float32 columns a target: road_1 repeats its out/2 angles and scales first (6 kept); road_4's scale
    # halves are strided slices copied by flatten where the output spans more than one group (6), a view of the
    # parameter where it is one group (4: v_proj's 64 here); road_2 keeps cos, sin and the two products (4).
    columns = sum((6 if kind == "road1" or (kind == "road4" and out > GROUP) else 4) * out for out in (D, KV))
    return N * (D + KV) * 4 * 2 + columns * 4, int(2 * per * (D + KV))


def measure(kind: str) -> None:
    torch.manual_seed(0)
    model = get_peft_model(Tiny(), _config(kind))
    model.train()
    lycoris_check.LiveBytes = SparseLiveBytes if kind == "shira" else LiveBytes
    pack = torch.autograd.graph.saved_tensors_hooks
    if kind == "shira":  # the hook sees the sparse delta: list its indices and values (traced_forward's pack)
        torch.autograd.graph.saved_tensors_hooks = _sparse_hooks(pack)  # type: ignore[misc]
    try:
        q, v, mode, saved = traced_forward(model)
    finally:
        torch.autograd.graph.saved_tensors_hooks = pack  # type: ignore[misc]
    outputs = q.untyped_storage().nbytes() + v.untyped_storage().nbytes()
    kept = mode.live - outputs
    forward_high = mode.peak - outputs
    listed = sum(n for _, _, n in saved.values())
    with mode:
        before = mode.live
        mode.peak = before
        (q.float().sum() + v.float().sum()).backward()
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    rule, rule_trained = _expected(kind)
    print(f"{kind}: live after the forward beyond the outputs {kept:,} B (forward high {forward_high:,} B); "
          f"saved storages {listed:,} B")  # fmt: skip
    for shape, dtype, nbytes in sorted(saved.values(), key=lambda e: -e[2]):
        print(f"    saved {dtype!s:15} {shape!s:14} {nbytes:>9,} B")
    rise = mode.peak - before
    print(f"    the planner's rule: {rule:,} B kept, {rule_trained:,} trained; measured trained {trained:,}; "
          f"the backward's high point above its start: {rise:,} B ({mode.at})")  # fmt: skip


def _sparse_hooks(hooks: Any) -> Any:
    """saved_tensors_hooks whose pack hook is called on a sparse tensor's indices and values, not on it."""

    def make(pack: Any, unpack: Any) -> Any:
        def each(t: torch.Tensor) -> torch.Tensor:
            for part in _parts(t):
                pack(part)
            return t

        return hooks(each, unpack)

    return make


if __name__ == "__main__":
    print(f"torch {torch.__version__}; N = {N}, d = {D}, kv = {KV}")
    for name in ("fourierft", "road1", "road2", "road4", "vblora", "randlora", "shira"):
        measure(name)

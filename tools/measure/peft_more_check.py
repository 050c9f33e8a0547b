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

    /tmp/torchenv/bin/python tools/measure/peft_more_check.py    # torch 2.13.0 CPU + peft 0.18.0
"""

from __future__ import annotations

from typing import Any

import torch
from lycoris_check import KV, D, N, Tiny, traced_forward  # the two bf16 projections and input of the other checks
from peft import FourierFTConfig, RoadConfig, get_peft_model

N_FREQ = 100  # FourierFT: trained spectrum entries per target
GROUP = 64  # RoAd's group_size (RoadConfig's default); both outputs (256, 64) divide by it


def _config(kind: str) -> Any:
    targets = ["q_proj", "v_proj"]
    if kind == "fourierft":
        return FourierFTConfig(n_frequency=N_FREQ, scaling=300.0, target_modules=targets)
    return RoadConfig(variant=kind.replace("road", "road_"), group_size=GROUP, target_modules=targets)


def _expected(kind: str) -> tuple[int, int]:
    """The planner's rule: what the forward keeps (bytes), and the trained elements."""
    if kind == "fourierft":  # each target's float32 input copy and delta weight; 2 x n int64 indices
        return 2 * N * D * 4 + (D * D + KV * D) * 4 + 2 * 2 * N_FREQ * 8, 2 * N_FREQ
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
    q, v, mode, saved = traced_forward(model)
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


if __name__ == "__main__":
    print(f"torch {torch.__version__}; N = {N}, d = {D}, kv = {KV}")
    for name in ("fourierft", "road1", "road2", "road4"):
        measure(name)

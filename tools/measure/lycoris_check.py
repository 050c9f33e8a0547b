"""What PEFT's LoHa, LoKr, VeRA, OFT, AdaLoRA and MiSS keep for the backward, measured on small CPU tensors with PEFT's
own layers (docs/REAL_GPU_MEMORY.md, "PEFT's LoHa and LoKr", "PEFT's VeRA" and "PEFT's OFT"; core.training.activations.
_lycoris, _vera, _oft and _miss, core.params.lycoris_matrix_tensors, vera_tensors, oft_tensor_sizes, miss_tensor_sizes).

A frozen bf16 q_proj (d -> d) and v_proj (d -> kv) read one bf16 input that needs a gradient (the hidden states
of a block whose upstream adapters train), wrapped by ``peft.get_peft_model`` with LoHaConfig / LoKrConfig
(autocast_adapter_dtype=True: float32 factors on the bf16 base, as the method comparison runs) and, for
reference, LoraConfig. ``torch.autograd.graph.saved_tensors_hooks`` lists what autograd saves (storages by data
pointer, parameters apart); ``LiveBytes`` (tools/measure/live_bytes.py) counts the bytes the forward leaves alive
and the backward's high point above them.

Expected from the source read at huggingface/peft 51c2ff66 (``Linear._get_delta_activations``: delta =
get_delta_weight, ``_cast_input_dtype(x, delta.dtype)``, ``F.linear(x, delta)``; ``HadaWeight``; ``make_kron``),
per target: the float32 delta (out x in), the float32 copy of the input (N x in), and for LoKr with a factored
w2 the product w2 (b x d). Under bf16 autocast (run second): 16-bit deltas, no input copy for LoHa (HadaWeight's
autocast matmuls give a bf16 delta), a 16-bit copy per target for LoKr (kron with the float32 w1 is float32).
PEFT 0.18.0 (pip) runs the same forward lines as 51c2ff66 (only update_layer's signature differs).

VeRA (vera/layer.py ``Linear.forward``: ``x = _cast_input_dtype(x, lambda_d.dtype)``; ``lambda_b *
F.linear(lambda_d * F.linear(x, A_sliced), B_sliced)``), per target: A @ x (N x r) for lambda_d's gradient and
B @ (lambda_d * A @ x) (N x out) for lambda_b's, and no copy of x (read only by matmuls of frozen weights).
Under bf16 autocast both products are bf16 and each F.linear keeps its fresh bf16 cast of the frozen slice it
reads (buffers need no gradient, so autocast does not cache them); the lambdas are only multiplied, never cast.
Measured: 172,032 B, and 99,328 B under autocast, at r 8.

LoRA-FA (peft/optimizers/lorafa.py ``create_lorafa_optimizer``: ``requires_grad_(False)`` on every lora_A, B trained
by the projected AdamW), at r 4: lora_A's matmul keeps no input (no dA; dx needs only A), so the float32 input copy
LoRA keeps (N x in per target) goes and only lora_A's output (N x r, for dB) stays. Measured: 4,096 B against LoRA's
266,240 B; under bf16 autocast 2,048 B beside the adapters' 16-bit casts (6,656 B, as LoRA's) against 133,120 B.

OFT (oft/layer.py ``Linear.forward``: ``x = _cast_input_dtype(x, oft_R.weight.dtype)``, ``oft_R(x)``: the
einsum of x (N, r, b) with R (r, b, b) built by ``_cayley_batch``; then the frozen base linear), at r 8 (blocks of
32) and Neumann terms 5 (OFTConfig's default), 3 and 7 ("oft-3", "oft-7"): per target the input copy (N x in, float32;
bf16 under autocast) and (bmms + 1) r x b x b float32 blocks (Q and its powers kept by the bmms, R by the einsum;
bmms = max(2, terms - 2)), or under autocast (2 bmms + 1) bf16 blocks (each bmm's two fresh casts, R's cast).
Measured: 524,288 B (5 terms), 458,752 B (3), 655,360 B (7); under autocast 360,448 B, 294,912 B, 491,520 B.
Its trained weight (r, b(b-1)/2) and int64 ``rows`` / ``cols`` buffers (b(b-1)/2 each) are printed too.

AdaLoRA (branch h54ada; adalora/layer.py ``SVDLinear.forward``: ``x = _cast_input_dtype(x, lora_A.dtype)``;
``(dropout(x) @ (lora_A * lora_E).T @ lora_B.T) * scaling / (ranknum + 1e-5)``), per target: the float32 copy of
x (N x in), (A * E).T (r x in), x @ (A * E).T (N x r), ranknum + 1e-5 (one float32). Under bf16 autocast: the
bf16 casts of x and (A * E).T, the N x r product in bf16, and the bf16 cast of lora_B.T (a view, no leaf: not in
the autocast cache) kept by the second matmul. Then ``update_and_allocate`` (layer.py ``RankAllocator.update_ipt``)
after the backward: ipt, exp_avg_ipt, exp_avg_unc, a float32 zeros_like of each trained tensor (lora_A, lora_E,
lora_B), kept. PEFT 0.18.0's SVDLinear.forward and RankAllocator.update_ipt are 51c2ff66's line for line (only
update_layer's signature and meta-device handling differ). Measured at r 4: 274,440 B, 139,784 B under autocast,
and 40,032 B (12 B per trained element) kept by the RankAllocator. With a lora_dropout of 0.1 (run last): the
dropped copy and the mask in place of the input copy, 536,584 B: CPU's dropout keeps a float32 mask where CUDA's
native_dropout keeps a bool one (the planner's 1 B, LoRA's rule), 2 x N x in x 3 B = 196,608 B more.

MiSS (branch h58peft; miss/layer.py ``MissLinear.forward``, init_weights true: ``x = _cast_input_dtype(x, miss.dtype)``;
``result + torch.sum(x.reshape(..., in // r, r), dim=-2) @ miss``), at r 16: per target the block sum (N x r, float32)
kept by the matmul, nothing else (the cast and the sum keep nothing; the frozen base keeps no copy of x). Under bf16
autocast the sum's bf16 cast and the autocast cache's bf16 miss_block (r x out), which the planner counts with the
weights. Measured: 16,384 B; under autocast 18,432 B (2 x 128 x 16 x 2 + 16 x (256 + 64) x 2). Trained: 5,120 elements
(16 x (256 + 64)).

    /tmp/torchenv/bin/python tools/measure/lycoris_check.py    # torch 2.13.0 CPU + peft 0.18.0
"""

from __future__ import annotations

from typing import Any

import torch
from live_bytes import LiveBytes  # tools/measure/live_bytes.py: these checks run as scripts from this folder
from peft import AdaLoraConfig, LoHaConfig, LoKrConfig, LoraConfig, MissConfig, OFTConfig, VeraConfig, get_peft_model
from peft.optimizers import create_lorafa_optimizer
from peft.tuners.lora import torchao as peft_lora_torchao
from torch import nn

# PEFT 0.18.0's LoRA dispatch_torchao imports torchao.quantization.LinearActivationQuantizedTensor, which the torchao
# 0.18.0 beside it (for the low-bit optimizers) no longer has; these linears hold no torchao weights, so that one
# dispatcher is told torchao is absent and PEFT's plain Linear wraps them, as it would without torchao.
peft_lora_torchao.is_torchao_available = lambda: False

D, KV, N, R = 256, 64, 128, 4
R_VERA = 8  # VeRA's two products are N x r and N x out: a rank of its own, as the VeRA run was measured
R_OFT = 8  # OFT: 8 blocks of D / 8 = 32 on both targets (each reads D features)
R_MISS = 16  # MiSS: miss_block (r, out); the input summed over its in / r blocks of r


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q_proj = nn.Linear(D, D, bias=False, dtype=torch.bfloat16)
        self.v_proj = nn.Linear(D, KV, bias=False, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.q_proj(x), self.v_proj(x)


def _config(kind: str) -> Any:
    targets = ["q_proj", "v_proj"]
    if kind == "loha":
        return LoHaConfig(r=R, alpha=2 * R, target_modules=targets)
    if kind == "lokr":
        return LoKrConfig(r=R, alpha=2 * R, target_modules=targets, decompose_factor=4)
    if kind == "vera":
        return VeraConfig(r=R_VERA, target_modules=targets)
    if kind.startswith("oft"):  # "oft" (5 Neumann terms), "oft-3", "oft-7"
        terms = int(kind[4:] or 5)
        return OFTConfig(
            r=R_OFT, oft_block_size=0, target_modules=targets, use_cayley_neumann=True, num_cayley_neumann_terms=terms
        )
    if kind == "miss":  # MissConfig's default init_weights True: miss_block (r, out), the input summed in blocks
        return MissConfig(r=R_MISS, target_modules=targets)
    if kind.startswith("adalora"):  # init_r R; the schedule only sets when the RankAllocator masks
        dropout = 0.1 if kind.endswith("dropout") else 0.0
        return AdaLoraConfig(init_r=R, target_r=2, total_step=10, tfinal=2, lora_alpha=2 * R, lora_dropout=dropout,
                             target_modules=targets)  # fmt: skip
    return LoraConfig(r=R, lora_alpha=2 * R, target_modules=targets)


def _expected(kind: str, autocast: bool) -> int:
    """The planner's rule (core.training.activations._lycoris and the adapter input copies): float32 tensors, or
    under autocast the 16-bit casts F.linear (and LoKr's w2_a @ w2_b) make."""
    b = 2 if autocast else 4
    if kind.startswith("oft"):  # core.training.activations._oft and the adapter input copies
        terms = int(kind[4:] or 5)
        bmms = 0 if terms <= 2 else max(2, terms - 2)
        blocks = (2 * bmms + 1) if autocast else (bmms + 1)
        return 2 * N * D * b + blocks * 2 * D * (D // R_OFT) * b
    if kind == "vera":  # core.training.activations._vera: the two products, and under autocast the slices' casts
        slices = R_VERA * ((D + D) + (D + KV)) * 2 if autocast else 0
        return 2 * N * R_VERA * b + N * (D + KV) * b + slices
    if kind == "miss":  # core.training.activations._miss: the (N, r) block sum per target kept by its matmul. The
        # autocast cache's bf16 miss_block (r x out) kept under autocast is counted with the weights (copy_terms).
        return 2 * N * R_MISS * b + (R_MISS * (D + KV) * 2 if autocast else 0)
    if kind == "lora":
        return 2 * N * D * b + 2 * N * R * b  # each adapter's input copy, lora_A's output
    if kind == "lorafa":  # A frozen: no dA, so lora_A's matmul keeps no input; lora_B keeps lora_A's output. Under
        # autocast lora_A's mm keeps its bf16 cast of A (for dx; not the autocast cache's, A needs no grad): the same
        # bytes as LoRA's cached cast, left out of both rules (core.training.storage.copy_terms counts them).
        return 2 * N * R * b
    if kind.startswith("adalora"):  # core.training.activations._adalora beside the input copies (or dropout's)
        copies = 2 * N * D * (b + 1 if kind.endswith("dropout") else b)  # the planner's CUDA bool mask: 1 B
        cast_b = R * (D + KV) * 2 if autocast else 0  # lora_B.T's bf16 cast, kept by the second matmul
        return copies + 2 * N * R * b + R * (D + D) * b + 2 * 4 + cast_b
    # Input copies (none for LoHa under autocast: its delta is already in the input's dtype), both deltas. The
    # autocast cache's 16-bit copies of LoRA's and LoKr's factors (w2_a, w2_b) are not in this rule: the planner
    # counts them with the weights (core.training.storage.copy_terms).
    copies = 0 if kind == "loha" and autocast else 2 * N * D * b
    kept = copies + (D * D + KV * D) * b
    if kind == "lokr":  # factorization(256, 4) = (4, 64), (64, 4)=(4, 16): w2 (b x d) products, r 4 < 32
        kept += (64 * 64 + 16 * 64) * b
    return kept


Saved = dict[int, tuple[tuple[int, ...], torch.dtype, int]]


def traced_forward(model: Any, autocast: bool = False) -> tuple[torch.Tensor, torch.Tensor, LiveBytes, Saved]:
    """``model``'s forward on an (N, D) bf16 input that needs a gradient, under LiveBytes and a saved-tensors hook:
    q, v, the mode (live bytes, peak) and the storages autograd saved (shape, dtype, bytes) beyond the parameters,
    buffers and the input (peft_more_check.py runs FourierFT and RoAd through it too)."""
    # Parameters and buffers (VeRA's shared vera_A / vera_B) exist before the forward: not what it keeps.
    params = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    x = torch.randn(N, D, dtype=torch.bfloat16, requires_grad=True)
    saved: Saved = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        if s.data_ptr() not in params and s.data_ptr() != x.untyped_storage().data_ptr():
            saved[s.data_ptr()] = (tuple(t.shape), t.dtype, s.nbytes())
        return t

    mode = LiveBytes()
    # The parameters' and the input's storages exist before the mode: their views (aten.t of each weight) are
    # not new memory, so the mode is told of them first.
    mode.seen.update(dict.fromkeys(params | {x.untyped_storage().data_ptr()}, 0))
    cast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), mode, cast:
        q, v = model(x)
    return q, v, mode, saved


def measure(kind: str, autocast: bool = False) -> None:
    torch.manual_seed(0)
    model = get_peft_model(Tiny(), _config(kind))
    if kind == "lorafa":  # PEFT's own helper freezes every lora_A (peft/optimizers/lorafa.py)
        create_lorafa_optimizer(model, r=R, lora_alpha=2 * R, lr=1e-3)
    model.train()
    q, v, mode, saved = traced_forward(model, autocast)
    outputs = q.untyped_storage().nbytes() + v.untyped_storage().nbytes()
    kept = mode.live - outputs
    listed = sum(n for _, _, n in saved.values())
    with mode:
        before = mode.live
        mode.peak = before
        (q.float().sum() + v.float().sum()).backward()
    print(
        f"{kind}{' (bf16 autocast)' if autocast else ''}: live after the forward beyond the outputs {kept:,} B; "
        f"saved storages {listed:,} B"
    )
    for shape, dtype, nbytes in sorted(saved.values(), key=lambda e: -e[2]):
        print(f"    saved {dtype!s:15} {shape!s:14} {nbytes:>9,} B")
    rise, rule = mode.peak - before, _expected(kind, autocast)
    print(f"    the planner's rule: {rule:,} B; the backward's high point above its start: {rise:,} B")
    if kind in ("oft", "miss") and not autocast:
        trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
        storages = {b.untyped_storage().data_ptr(): b.untyped_storage().nbytes() for b in model.buffers()}
        index = sum(storages.values())  # rows and cols are views of one triu_indices storage per target
        print(f"    trained elements {trained:,}; int64 index buffers {index:,} B")
    if kind == "adalora-dropout":  # the CPU's float32 dropout mask where CUDA keeps a bool one
        print(f"    with the CPU's float32 mask: {rule + 2 * N * D * 3:,} B")
    if kind.startswith("adalora"):
        _rank_allocator(model, mode)


def _rank_allocator(model: Any, mode: LiveBytes) -> None:
    """What AdaLoRA's RankAllocator keeps after its first update_and_allocate (run.py of the method comparison
    calls it after the optimizer step, before the next zero_grad): three float32 copies of each trained tensor;
    the rule (core.training.optimizer.rank_allocator_terms): 3 x trained elements x 4 B."""
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    with mode:
        before = mode.live
        mode.peak = before
        model.base_model.update_and_allocate(0)
    kept, high = mode.live - before, mode.peak - before
    rule = f"3 x {trained:,} x 4 = {12 * trained:,} B"
    print(f"    RankAllocator: kept {kept:,} B (high point {high:,} B); the rule {rule}")


if __name__ == "__main__":
    print(f"torch {torch.__version__}; N = {N}, d = {D}, kv = {KV}, r = {R}")
    for autocast in (False, True):
        for name in ("loha", "lokr", "vera", "oft", "oft-3", "oft-7", "adalora", "miss", "lora", "lorafa"):
            measure(name, autocast)
    measure("adalora-dropout")

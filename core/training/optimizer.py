"""Optimizer state and the step's temporaries, per optimizer and implementation.

State is allocated like the parameter it belongs to (torch.optim ``_init_group``:
``torch.zeros_like(param)``), so it follows the trainable parameters' dtype; bitsandbytes'
8-bit optimizers quantise it blockwise; Adafactor factors the second moment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from core.breakdown import Term
from core.format import sci
from core.memo import last_answer
from core.model import MLP_TARGETS
from core.params import (
    BLOCK_TENSOR_SIZES,
    ParamCounts,
    flat_trained_sizes,
    galore_shapes,
    galore_state_elements,
    litgpt_adapter_tensors,
    ln_tensor_sizes,
    lokr_factorization,
    lycoris_matrix_tensors,
    muon_elements,
    muon_layers,
    muon_matrices,
    oft_blocks,
    randlora_bases,
    vblora_bank_elements,
)
from core.plan import VBLORA_NUM_VECTORS, VBLORA_VECTOR_LENGTH, Method, Optimizer, OptimizerImpl, Plan, TorchVersion
from core.roles import Dtypes, runs_grad_scaler

# Enum members this module's hot paths compare with, read from their classes once: on Python 3.11 each
# ``Class.MEMBER`` read goes through EnumType.__getattr__'s slot, ~0.15 µs (core.plan's note; h74speed).
_METHOD_DORA: Final = Method.DORA
_METHOD_IA3: Final = Method.IA3
_OPTIMIZER_ADAFACTOR: Final = Optimizer.ADAFACTOR
_OPTIMIZER_ADAGRAD: Final = Optimizer.ADAGRAD
_OPTIMIZER_ADAMW_8BIT: Final = Optimizer.ADAMW_8BIT
_OPTIMIZER_GALORE_ADAMW: Final = Optimizer.GALORE_ADAMW
_OPTIMIZER_IMPL_FOREACH: Final = OptimizerImpl.FOREACH
_OPTIMIZER_IMPL_FORLOOP: Final = OptimizerImpl.FORLOOP
_OPTIMIZER_IMPL_FUSED: Final = OptimizerImpl.FUSED
_OPTIMIZER_LORA_FA: Final = Optimizer.LORA_FA
_OPTIMIZER_MUON: Final = Optimizer.MUON
_OPTIMIZER_PAGED_ADAMW: Final = Optimizer.PAGED_ADAMW
_OPTIMIZER_PAGED_ADAMW_8BIT: Final = Optimizer.PAGED_ADAMW_8BIT
_OPTIMIZER_SGD: Final = Optimizer.SGD
_OPTIMIZER_SGD_MOMENTUM: Final = Optimizer.SGD_MOMENTUM

# 8-bit optimizers (bitsandbytes): blockwise quantisation with blocks of 256 and one
# float32 absmax per block (Dettmers et al. 2022, arXiv:2110.02861). A parameter tensor with
# fewer than min_8bit_size = 4096 elements keeps float32 state instead: bitsandbytes 0.50.1
# bitsandbytes/optim/optimizer.py, Optimizer2State.init_state, lines 502-510 ("if p.numel() <
# config['min_8bit_size']: dtype = torch.float32", then state1 and state2 made with
# get_state_buffer(p, dtype=torch.float32)); unchanged on main at commit 95f9af30. The
# absmax is counted as 4/256 B per element, not per started block (at most 8 B per tensor).
OPT8_BLOCK: Final = 256
OPT8_MIN_SIZE: Final = 4096
OPT8_SMALL_STATE_BYTES: Final = 2 * 4.0  # state1 and state2 in float32

# bitsandbytes' paged optimizers (bitsandbytes 95f9af30 bitsandbytes/optim/optimizer.py get_state_buffer, lines
# 374-390, as in 0.43.3): the state of a tensor of 1e5 elements or more is made by F.get_paged, i.e.
# cudaMallocManaged (functional.py get_paged, lines 91-99; csrc/pythonInterface.cpp cget_managed_ptr), outside
# PyTorch's caching allocator: neither max_memory_allocated nor max_memory_reserved sees it, and the driver pages
# it out to host memory when the card is full, so it never makes the run fail. Smaller tensors' state is an
# ordinary GPU tensor (torch.zeros_like). Only state1 / state2 go through get_state_buffer: at 8 bits the block
# absmax (absmax1, absmax2: ``torch.zeros((blocks,), dtype=torch.float32, device=p.device)``, Optimizer2State.
# init_state lines 524-529, Optimizer1State.init_state line 695) and the optimizer's one shared qmap per moment
# (name2qmap ``.to(p.device)``, 256 float32, left out) are device tensors of every tensor, paged or not. A tensor
# under min_8bit_size (4096 < 1e5) is never paged. tools/measure/paged_state_check.py runs the library's own
# init_state with only get_paged replaced and shows exactly this split.
PAGED_MIN_SIZE: Final = 100_000
PAGED: Final = (
    Optimizer.PAGED_ADAMW,
    Optimizer.PAGED_ADAMW_8BIT,
    Optimizer.PAGED_LION,
    Optimizer.PAGED_LION_8BIT,
    Optimizer.PAGED_ADEMAMIX,
    Optimizer.PAGED_ADEMAMIX_8BIT,
)
PAGED_STATE_BYTES: Final = 2 * 4.0  # state1 and state2 of the 32-bit optimizer, float32
PAGED_8BIT_STATE_BYTES: Final = 2 * 1.0  # PagedAdamW8bit's paged part: uint8 state1 and state2, no absmax

# bitsandbytes' Lion (bitsandbytes 95f9af30 bitsandbytes/optim/lion.py Lion / Lion8bit / PagedLion*, all
# Optimizer1State; optimizer.py Optimizer1State.init_state): one state, ``state1``, float32 at optim_bits=32
# whatever the parameter's dtype, uint8 at 8 bits with ``absmax1`` (one float32 per started block of 256,
# ``torch.zeros`` on the device, never paged); a tensor under min_8bit_size = 4096 elements keeps float32.
LION_FAMILY: Final = (Optimizer.LION, Optimizer.LION_8BIT, Optimizer.PAGED_LION, Optimizer.PAGED_LION_8BIT)
LION_8BIT_FAMILY: Final = (Optimizer.LION_8BIT, Optimizer.PAGED_LION_8BIT)
LION_STATE_BYTES: Final = 4.0

# torchao's low-bit AdamW (pytorch/ao 36027d82 torchao/optim/adam.py ``_AdamBase._new_buffer``): a tensor of
# 4096 elements or more whose size the block divides gets quantised moments (``OptimState*bit.zeros``), any
# other ``torch.zeros_like(p)``, i.e. the parameter's dtype (bitsandbytes keeps float32 there). Per element of a
# quantised moment: codes + one float32 ``scale`` per block (``torch.zeros(n // block_size)``), per tensor a
# float32 ``qmap`` (256 entries at 8 bits, 16 at 4; none for FP8), one caching-allocator block or more each.
# (bytes per element of codes, block size, qmap entries): AdamW8bit uint8 codes, block_size=256
# (subclass_8bit.py); AdamW4bit two 4-bit codes a uint8 (``n_elems // 2``), block_size=128 (subclass_4bit.py);
# AdamWFp8 float8_e4m3fn codes, block_size=256 (subclass_fp8.py).
AO_LOW_BIT: Final = {
    Optimizer.AO_ADAMW_8BIT: (1.0, 256, 256),
    Optimizer.AO_ADAMW_4BIT: (0.5, 128, 16),
    Optimizer.AO_ADAMW_FP8: (1.0, 256, 0),
}
AO_MIN_SIZE: Final = 4096

# AnyPrecisionAdamW (meta-llama/llama-cookbook 0e003351 src/llama_cookbook/policies/anyprecision_optimizer.py):
# ``exp_avg`` in momentum_dtype, ``exp_avg_sq`` in variance_dtype, ``compensation`` in compensation_buffer_dtype
# when use_kahan_summation, each ``torch.zeros_like(p, dtype=...)``; llama-recipes passes bf16 for both moments
# (finetuning.py), the buffer's default is bf16. Bytes per trainable element: moments, Kahan buffer.
ANYPRECISION: Final = {Optimizer.ANYPRECISION_ADAMW: (2 * 2.0, 0.0), Optimizer.ANYPRECISION_ADAMW_KAHAN: (2 * 2.0, 2.0)}
ANYPRECISION_MOMENT_BYTES: Final = 2.0  # bf16

# torch.optim.Muon (torch 2.13.0 torch/optim/_muon.py): ``momentum_buffer = torch.zeros_like(p.grad)`` for each 2-D
# parameter (it refuses any other); its docstring gives biases and embeddings to AdamW: the plan runs Muon on the
# blocks' weight matrices (muon_matrices) and torch.optim.AdamW on the rest. ``_single_tensor_muon`` per matrix:
# ``update = grad.lerp(buf, momentum)`` (nesterov, the default), then ``_zeropower_via_newtonschulz``: a bf16 copy X
# (the update itself when the gradient is bf16), transposed to m <= n, and ns_steps = 5 rounds of
# ``gram = X @ X.T``, ``torch.addmm(gram, gram, gram)``, ``X = torch.addmm(X, gram_update, X)`` (lines 55-66, read
# in the installed 2.13.0: it has no ``use_addmm`` switch, the addmm form always runs; at the second addmm the update,
# X before and after the round, gram and gram_update are alive at once: _muon_temporary).
MUON_NS_STEPS: Final = 5
MUON_X_BYTES: Final = 2.0  # the Newton-Schulz iterate, bf16 (``grad.bfloat16()``)

# bitsandbytes' RMSprop (bitsandbytes 0.50.2 optim/rmsprop.py RMSprop / RMSprop8bit / RMSprop32bit, Optimizer1State):
# one ``state1`` as Lion's (float32 at optim_bits=32; uint8 with ``absmax1`` at 8, float32 under min_8bit_size); it
# refuses centered=True and alpha == 0 (``raise NotImplementedError``), and transformers 5.25 passes no is_paged
# for it (trainer_optimizer.py _get_bitsandbytes_optimizer: ``if "rmsprop" not in optim_name``).
RMSPROP_BNB_FAMILY: Final = (Optimizer.RMSPROP_BNB, Optimizer.RMSPROP_BNB_8BIT)
# One-state bitsandbytes optimizers (Optimizer1State.init_state: state1 and, at 8 bits, absmax1).
ONE_STATE_BNB: Final = LION_FAMILY + RMSPROP_BNB_FAMILY
ONE_STATE_8BIT: Final = (*LION_8BIT_FAMILY, Optimizer.RMSPROP_BNB_8BIT)

# bitsandbytes' AdEMAMix (bitsandbytes 0.50.2 optim/ademamix.py AdEMAMix.init_state, lines 139-173): ``state1 =
# self._get_state_double_buffer(p, dtype)``, a (2, *p.shape) buffer of m1 and m2 (paged when is_paged and p.numel()
# >= 1e5, lines 261-267), ``state2 = self.get_state_buffer(p, dtype)`` for nu; float32 at optim_bits=32, uint8 at 8
# with ``absmax1 = torch.zeros((2, blocks))`` and ``absmax2 = torch.zeros((blocks,))`` (blocks of 256, on the
# device, never paged); a tensor under min_8bit_size = 4096 elements keeps float32: three moments where Adam has two.
ADEMAMIX_FAMILY: Final = (
    Optimizer.ADEMAMIX,
    Optimizer.ADEMAMIX_8BIT,
    Optimizer.PAGED_ADEMAMIX,
    Optimizer.PAGED_ADEMAMIX_8BIT,
)
ADEMAMIX_8BIT_FAMILY: Final = (Optimizer.ADEMAMIX_8BIT, Optimizer.PAGED_ADEMAMIX_8BIT)
ADEMAMIX_MOMENTS: Final = 3

# torch.optim.Adagrad (torch 2.13.0 torch/optim/adagrad.py ``_init_group``: ``state["sum"] = torch.full_like(p,
# initial_accumulator_value)``) and torch.optim.RMSprop (rmsprop.py ``_init_group``: ``square_avg =
# torch.zeros_like(p)``, ``momentum_buffer`` only when momentum > 0, ``grad_avg`` only when centered; transformers'
# rmsprop passes neither): one buffer in the parameter's dtype. Their step's parameter-sized lists at once:
# Adagrad foreach (``_multi_tensor_adagrad`` lines 528-540) ``std = torch._foreach_sqrt(device_state_sums)`` and
# ``numerator = torch._foreach_mul(device_grads, minus_clr)`` (with weight decay the new gradient list
# ``torch._foreach_add(device_grads, device_params, alpha=weight_decay)`` is scaled in place as the numerator:
# two lists either way); its for-loop ``std = state_sum.sqrt() + eps``, two copies of one tensor at the add;
# fused (``torch._fused_adagrad_``, CPU and CUDA) none. RMSprop foreach (``_multi_tensor_rmsprop`` lines 446-450)
# ``avg = torch._foreach_sqrt(grouped_square_avgs)`` then ``_foreach_add_(avg, eps)``: one list, two with weight
# decay (``grouped_grads = torch._foreach_add(grouped_grads, grouped_params, alpha=weight_decay)``, lines 429-432);
# its for-loop ``avg = square_avg.sqrt()`` then ``add_(eps)`` (with weight decay ``grad = grad.add(param, ...)``
# first). No fused RMSprop. In both for-loops the previous tensor's ``std`` / ``avg`` (or new gradient) is still bound
# when the next one forms: counted as two copies of the largest tensor, the bound for equal neighbours (gate_proj and
# up_proj). tools/measure/optimizer_step_check.py on the CPU: Adagrad foreach 2.000 × the parameters with and without
# weight decay, RMSprop foreach 1.000 and 2.000; for-loops 1.256 × the largest tensor (followed by a quarter-size one)
# and 2.000 with weight decay; fused Adagrad 0.
ONE_BUFFER_TORCH: Final = (Optimizer.ADAGRAD, Optimizer.RMSPROP)
# (foreach lists, foreach lists with weight decay, for-loop copies of the largest tensor).
ONE_BUFFER_TEMPORARIES: Final = {Optimizer.ADAGRAD: (2, 2, 2), Optimizer.RMSPROP: (1, 2, 2)}

# facebookresearch schedule_free (schedulefree 1.4.1, the version transformers 5.25 asks for at least 1.4.0):
# adamw_schedulefree.py lines 151-154 ``self.state[p]['z'] = torch.clone(p)``, ``self.state[p]['exp_avg_sq'] =
# torch.zeros_like(p)`` (radam_schedulefree.py lines 167-169 alike; sgd_schedulefree.py line 153 z alone): the
# parameter's dtype. The foreach step (AdamW, and RAdam once rho_t > 4) ``denom = torch._foreach_div(exp_avg_sq,
# bias_correction2)`` then sqrt_ / add_ in place and ``_foreach_div_(grad, denom)``: one list; the for-loop one tensor's
# denom (foreach=False, which transformers never passes: not planned); SGD updates in place.
# train() / eval() (``p.lerp_(end=state['z'], ...)``) swap in place: no memory, a pass over p and z at each switch
# (HF: at training's start and around evaluation), not timed. tools/measure/optimizer_step_check.py measured the
# state to the byte and the foreach peak 1.000 × the parameters (AdamW), 0 (SGD).
# Per optimizer: (state buffers, foreach lists).
SCHEDULE_FREE: Final = {
    Optimizer.SCHEDULE_FREE_ADAMW: (2, 1),
    Optimizer.SCHEDULE_FREE_RADAM: (2, 1),
    Optimizer.SCHEDULE_FREE_SGD: (1, 0),
}

# An L2 weight decay (torch.optim.Adam and SGD with weight_decay > 0, not AdamW's decoupled one) makes a new gradient
# (torch 2.13.0 torch/optim/adam.py ``_multi_tensor_adam`` lines 688-699, ``device_grads = torch._foreach_add(
# device_grads, device_params, alpha=weight_decay)``; ``_single_tensor_adam`` line 428 ``grad = grad.add(param,
# alpha=weight_decay)``; sgd.py ``_multi_tensor_sgd`` lines 424-431 and ``_single_tensor_sgd`` line 355 alike).
# SGD keeps it to the end of the step: one gradient-sized list (foreach) or one copy of the largest tensor
# (for-loop) where it had none. Adam's for-loop keeps it beside its two sqrt(v) copies (three, not two); Adam's
# foreach deletes it (``del device_grads``, line 725) before ``exp_avg_sq_sqrt`` forms: its peak stays one list.
# tools/measure/optimizer_step_check.py (torch 2.13.0 CPU): SGD foreach 0 -> 1.000 × the parameters, SGD for-loop
# 0 -> 1.000 × the largest tensor, Adam for-loop 2.000 -> 3.000 × the largest, Adam foreach 1.000 -> 1.000.
# Older releases' adam.py / sgd.py were not read for it.
L2_DECAY: Final = (Optimizer.ADAM, Optimizer.SGD, Optimizer.SGD_MOMENTUM)

ADAM_FAMILY: Final = (Optimizer.ADAMW, Optimizer.ADAM)
# galore-torch 1.0 galore_projector.py get_orthogonal_matrix: ``matrix = module_params.data.float()`` before
# torch.linalg.svd, so U, S, Vh are float32 whatever the gradient's dtype.
GALORE_SVD_BYTES: Final = 4.0
# The caching allocator's smallest block (c10/cuda/CUDACachingAllocator.cpp kMinBlockSize):
# what a one-element tensor on the GPU occupies.
MIN_BLOCK_BYTES: Final = 512


def adapter_tensor_sizes(plan: Plan, dense: bool = False) -> list[int]:
    """Elements of each tensor one block's adapters train: lora_A (r·in), lora_B (r·out) and
    DoRA's magnitude (out) per adapted matrix, one IA3 vector (in or out) per target, or LoHa's / LoKr's
    factors (core.params.lycoris_matrix_tensors), or VeRA's two vectors (core.params.vera_tensor_sizes), or OFT's
    one (r, b(b−1)/2) weight per target (core.params.oft_tensor_sizes), or MiSS's miss_block (r·out) per target
    (core.params.miss_tensor_sizes), or FourierFT's spectrum (n) per target (core.params.fourierft_tensor_sizes), or
    RoAd's angles and scales (core.params.road_tensor_sizes), or VB-LoRA's two logits tensors per target
    (core.params.vblora_tensor_sizes), RandLoRA's lambda and gamma (core.params.randlora_tensor_sizes), SHiRA's
    r·(in + out) values (core.params.shira_tensor_sizes), BOFT's boft_R and boft_s (core.params.boft_tensor_sizes)."""
    model = plan.model
    own = BLOCK_TENSOR_SIZES.get(plan.method)
    if own is not None:
        return own(plan, dense)
    if plan.method is _METHOD_IA3:
        lora = plan.lora
        return [
            n
            for n, copies, _ in model.ia3_vectors(lora.targets, lora.ia3_feedforward, plan.linear_experts, dense)
            for _ in range(copies)
        ]
    r = plan.lora.rank
    sizes: list[int] = []
    if plan.lycoris:
        for fan_in, fan_out, copies in model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense):
            sizes += lycoris_matrix_tensors(plan, fan_in, fan_out)[0] * copies
        return sizes
    frozen_a = plan.optimizer is _OPTIMIZER_LORA_FA  # LoRA-FA trains lora_B alone (core.params.lora_fa_frozen_elements)
    for fan_in, fan_out, copies in model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense):
        a = [] if frozen_a else [r * fan_in]
        sizes += (a + [r * fan_out] + ([fan_out] if plan.method is _METHOD_DORA else [])) * copies
    return sizes


def head_adapter_tensor_sizes(plan: Plan) -> list[int]:
    """Elements of the adapter tensors trained once for the model (not per block): the output head's lora_A
    (r·d), lora_B (r·V) and DoRA's magnitude (V) when ``lm_head`` is a target (core.model.HEAD_TARGET); VB-LoRA's
    shared vector bank (core.params.vblora_bank_elements, branch h78peft)."""
    bank = vblora_bank_elements(plan)
    if bank:
        return [bank]
    head = plan.model.head_adapter_shape(plan.lora.targets) if plan.lora_adapters else None
    if head is None:
        return []
    fan_in, fan_out = head
    r = plan.lora.rank
    a = [] if plan.optimizer is Optimizer.LORA_FA else [r * fan_in]
    return a + [r * fan_out] + ([fan_out] if plan.method is Method.DORA else [])


@last_answer  # asked two or three times per estimate (step counters, clipping, the step's launches): a pure function
def trainable_tensors(plan: Plan) -> int:  # of the frozen plan (core.memo)
    """How many parameter tensors train (fused Adam keeps one GPU step counter for each)."""
    model = plan.model
    if plan.litgpt_adapter:
        return sum(c for _, c in litgpt_adapter_tensors(plan))
    flat = flat_trained_sizes(plan)  # prompt learning, LN tuning
    if flat is not None:
        return len(flat)
    if plan.adapter_based:
        head = len(head_adapter_tensor_sizes(plan))
        return model.over_blocks(lambda dense: len(adapter_tensor_sizes(plan, dense))) + head
    layers = model.num_layers - (plan.frozen_layers if plan.method is Method.FROZEN else 0)
    outside = model.outside_tensors(embedding=plan.method is Method.FULL)
    return layers * model.layer_tensors() + outside


def small_state_terms(plan: Plan) -> list[Term]:
    """One-element tensors on the GPU, one 512-byte block each: fused Adam's step counters
    (``_init_group``: ``torch.zeros((), device=p.device)`` when fused; foreach and for-loop
    keep them on the CPU) and a GradScaler's scale, growth tracker and found-inf flag
    (torch/amp/grad_scaler.py)."""
    terms = []
    fused_counters = (*ADAM_FAMILY, _OPTIMIZER_ADAGRAD)  # adagrad.py: ``torch.zeros((), device=p.device)`` if fused
    if plan.optimizer in fused_counters and plan.optimizer_impl is _OPTIMIZER_IMPL_FUSED:
        n = trainable_tensors(plan)
        name = "Adagrad" if plan.optimizer is _OPTIMIZER_ADAGRAD else "Adam"
        terms.append(Term(f"fused {name} step counters on the GPU", f"{n} tensors × 512 B", n * MIN_BLOCK_BYTES))
    if runs_grad_scaler(plan):
        terms.append(Term("GradScaler scale, growth tracker, found-inf", "3 × 512 B", 3 * MIN_BLOCK_BYTES))
    return terms


def clip_terms(plan: Plan) -> list[Term]:
    """clip_grad_norm_ before the step (torch/nn/utils/clip_grad.py): ``_get_total_norm`` makes
    one 0-dim norm per gradient tensor with ``torch._foreach_norm`` and stacks them, and
    ``_clip_grads_with_norm_`` scales the gradients in place (``torch._foreach_mul_``): no
    gradient-sized temporary, one 512-byte block per norm."""
    if not plan.grad_clip:
        return []
    n = trainable_tensors(plan)
    return [Term("gradient clipping: one norm per gradient tensor", f"{n:,} × 512 B", n * MIN_BLOCK_BYTES)]


def optimizer_terms(plan: Plan, counts: ParamCounts, dt: Dtypes) -> list[Term]:
    """The state torch.optim / bitsandbytes allocate, in the trainable parameters' dtype
    (``torch.zeros_like(param)`` in adam.py / sgd.py ``_init_group``), and the one-element
    tensors beside it. A new list each call (callers may extend it) of the kept terms."""
    return list(_optimizer_terms(plan, counts, dt))


@last_answer
def _optimizer_terms(plan: Plan, counts: ParamCounts, dt: Dtypes) -> tuple[Term, ...]:
    """optimizer_terms' terms: the memory breakdown and the step's traffic (core.training.speed)
    ask for them with the same plan, counts and dtypes in one estimate (core.memo.last_answer)."""
    return tuple(_state_terms(plan, counts, dt) + small_state_terms(plan) + rank_allocator_terms(plan, counts, dt))


def rank_allocator_terms(plan: Plan, counts: ParamCounts, dt: Dtypes) -> list[Term]:
    """PEFT's AdaLoRA RankAllocator (huggingface/peft 51c2ff66 src/peft/tuners/adalora/layer.py
    ``RankAllocator.update_ipt``): for every trained tensor whose name holds "lora_" (lora_A, lora_E, lora_B)
    ``self.ipt[n]``, ``self.exp_avg_ipt[n]`` and ``self.exp_avg_unc[n]``, each ``torch.zeros_like(p)`` (the
    adapter's dtype), made at the first ``update_and_allocate`` (after the first backward and step) and kept
    in dicts until ``reset_ipt`` at step total_step - tfinal (AdaLoraModel.update_and_allocate); the
    sensitivity |p·grad| replaces ``ipt[n]`` each step. AdaLoraConfig refuses a schedule without steps before
    total_step - tfinal, so they live through at least one whole step: state beside the optimizer's.
    ``mask_to_budget``'s scores (one tensor at a time) and update_ipt's temporaries (at most three of the
    largest tensor, after the backward, with the activations freed) are left out.
    tools/measure/lycoris_check.py: 12 B per trained element at float32, to the byte."""
    if not plan.adalora:
        return []
    t, a = counts.adapter, dt.adapter
    return [Term("AdaLoRA RankAllocator: ipt, exp_avg_ipt, exp_avg_unc", f"3 × T × {a:g} B = 3 × {sci(t)}", 3 * t * a)]


def _state_terms(plan: Plan, counts: ParamCounts, dt: Dtypes) -> list[Term]:
    t = counts.trainable
    b = dt.grad
    opt = plan.optimizer
    if opt in ADAM_FAMILY:
        return [Term("Adam moments m, v", f"2 × T × {b:g} B = 2 × {sci(t)} × {b:g} B", 2 * t * b)]
    if opt is _OPTIMIZER_LORA_FA:  # LoraFAOptimizer: exp_avg_B, exp_avg_sq_B = torch.zeros_like(B), lora_B only
        return [
            Term("LoRA-FA moments of lora_B (exp_avg_B, exp_avg_sq_B)", f"2 × T × {b:g} B = 2 × {sci(t)}", 2 * t * b)
        ]
    if opt is _OPTIMIZER_PAGED_ADAMW:
        small = min(t, small_state_elements(plan, PAGED_MIN_SIZE))
        return [
            Term(
                f"Adam moments of tensors under {PAGED_MIN_SIZE:,} elements (the rest is paged)",
                f"2 × {sci(small)} × 4 B",
                small * PAGED_STATE_BYTES,
            )
        ]
    if opt is _OPTIMIZER_PAGED_ADAMW_8BIT:
        on_gpu = min(t, small_state_elements(plan, PAGED_MIN_SIZE))
        return _eight_bit_state_terms(plan, on_gpu) + _paged_absmax_terms(t - on_gpu, moments=2, name="Adam")
    if opt is _OPTIMIZER_ADAMW_8BIT:
        return _eight_bit_state_terms(plan, t)
    if opt in ONE_STATE_BNB:
        return _lion_state_terms(plan, t)
    if opt in ADEMAMIX_FAMILY:
        return _ademamix_state_terms(plan, t)
    if opt in ONE_BUFFER_TORCH:
        name = "Adagrad sum of squared gradients" if opt is _OPTIMIZER_ADAGRAD else "RMSprop square_avg"
        return [Term(name, f"T × {b:g} B = {sci(t)} × {b:g} B", t * b)]
    if opt in SCHEDULE_FREE:
        k = SCHEDULE_FREE[opt][0]
        name = "schedule-free z and exp_avg_sq" if k == 2 else "schedule-free z"
        return [Term(name, f"{k} × T × {b:g} B = {k} × {sci(t)} × {b:g} B", k * t * b)]
    if opt in AO_LOW_BIT:
        return _ao_state_terms(plan, t, b)
    if opt in ANYPRECISION:
        moments, kahan = ANYPRECISION[opt]
        terms = [Term("AnyPrecisionAdamW moments m, v (bf16)", f"2 × T × 2 B = 2 × {sci(t)} × 2 B", t * moments)]
        if kahan:
            terms.append(Term("Kahan compensation buffer (bf16)", f"T × 2 B = {sci(t)} × 2 B", t * kahan))
        return terms
    if opt is _OPTIMIZER_MUON:
        muon = min(t, muon_elements(plan))
        rest = t - muon
        return [
            Term("Muon momentum (the blocks' matrices)", f"{sci(muon)} × {b:g} B", muon * b),
            Term(
                "AdamW moments of the rest (embedding, head, norms, biases)", f"2 × {sci(rest)} × {b:g} B", 2 * rest * b
            ),
        ]
    if opt is _OPTIMIZER_GALORE_ADAMW:
        return _galore_state_terms(plan, counts, b)
    if opt is _OPTIMIZER_SGD_MOMENTUM:
        return [Term("momentum buffer", f"T × {b:g} B = {sci(t)} × {b:g} B", t * b)]
    if opt is _OPTIMIZER_ADAFACTOR:
        factored = adafactor_state_elements(plan)
        return [Term("factored second moment (rows + columns)", f"{sci(factored)} × 4 B", factored * 4)]
    return []


def _galore_state_terms(plan: Plan, counts: ParamCounts, b: float) -> list[Term]:
    """galore-torch 1.0 galore_torch/adamw.py: a targeted weight's ``exp_avg`` / ``exp_avg_sq`` are
    ``torch.zeros_like(grad)`` of its projected gradient (max(m, n) × r) and its GaLoreProjector keeps
    ``ortho_matrix`` (r × min(m, n)), cast back to the gradient's dtype after the float32 SVD, or at float32 a view
    holding the whole min(m, n)² factor (galore_projector.py get_orthogonal_matrix; core.params.galore_state_elements);
    every other parameter keeps AdamW's two full moments."""
    low, proj = galore_state_elements(plan, b == GALORE_SVD_BYTES)
    targeted = min(counts.trainable, muon_elements(plan))
    rest = counts.trainable - targeted
    r = plan.galore_rank
    return [
        Term(f"GaLore Adam moments on the rank-{r} projections", f"2 × {sci(low)} × {b:g} B", 2 * low * b),
        Term(
            "GaLore projectors (ortho_matrix; at float32 the SVD's whole factor it views)",
            f"{sci(proj)} × {b:g} B",
            proj * b,
        ),
        Term("AdamW moments of the rest (embedding, head, norms, biases)", f"2 × {sci(rest)} × {b:g} B", 2 * rest * b),
    ]


def _eight_bit_state_terms(plan: Plan, trainable: int) -> list[Term]:
    """bitsandbytes' 8-bit Adam: two uint8 moments and their block absmax, except in tensors
    under OPT8_MIN_SIZE elements, whose moments stay float32."""
    per = 2 * (1 + 4 / OPT8_BLOCK)
    # DeepSpeed ZeRO hands the optimizer flat float32 partitions, not the model's tensors
    # (v0.19.6 stage_1_and_2.py: param_group['params'] = [self.single_partition_of_fp32_groups[i]];
    # stage3.py its flat sub-groups of sub_group_size elements): none of them is small.
    deepspeed = plan.parallel.strategy.deepspeed
    small = 0 if deepspeed else min(trainable, small_state_elements(plan))
    if not small:
        return [Term("8-bit Adam moments + block absmax", f"{sci(trainable)} × 2 × (1 + 4/256) B", trainable * per)]
    quantised = trainable - small
    return [
        Term("8-bit Adam moments + block absmax", f"{sci(quantised)} × 2 × (1 + 4/256) B", quantised * per),
        Term(
            f"float32 Adam moments of tensors under {OPT8_MIN_SIZE:,} elements (norms, biases, small adapters)",
            f"{sci(small)} × 2 × 4 B",
            small * OPT8_SMALL_STATE_BYTES,
        ),
    ]


def _lion_state_terms(plan: Plan, trainable: int) -> list[Term]:
    """bitsandbytes' one-state optimizers (Lion, RMSprop): one float32 buffer, or uint8 with a float32 absmax per
    block of 256 (tensors under OPT8_MIN_SIZE float32); the paged ones keep tensors under PAGED_MIN_SIZE elements on
    the GPU (the rest is paged_state_bytes), and the 8-bit absmax of every tensor (``torch.zeros`` on the device)."""
    opt = plan.optimizer
    paged = opt in PAGED
    name, what = ("RMSprop", "square average") if opt in RMSPROP_BNB_FAMILY else ("Lion", "momentum")
    on_gpu = min(trainable, small_state_elements(plan, PAGED_MIN_SIZE)) if paged else trainable
    if opt not in ONE_STATE_8BIT:
        where = f" of tensors under {PAGED_MIN_SIZE:,} elements (the rest is paged)" if paged else ""
        return [Term(f"{name} {what}{where}", f"{sci(on_gpu)} × 4 B", on_gpu * LION_STATE_BYTES)]
    small = 0 if plan.parallel.strategy.deepspeed else min(on_gpu, small_state_elements(plan))
    quantised = on_gpu - small
    terms = [
        Term(
            f"8-bit {name} {what} + block absmax",
            f"{sci(quantised)} × (1 + 4/256) B",
            quantised * (1 + 4 / OPT8_BLOCK),
        )
    ]
    if paged:
        terms += _paged_absmax_terms(max(0, trainable - on_gpu), moments=1, name=name)
    if small:
        terms.append(
            Term(
                f"float32 {name} {what} of tensors under {OPT8_MIN_SIZE:,} elements",
                f"{sci(small)} × 4 B",
                small * 4.0,
            )
        )
    return terms


def _ademamix_state_terms(plan: Plan, trainable: int) -> list[Term]:
    """bitsandbytes' AdEMAMix (ADEMAMIX_FAMILY): three float32 moments (m1, m2 in state1, nu in state2), or three
    uint8 with a float32 absmax per block of 256 each (tensors under OPT8_MIN_SIZE float32); the paged ones keep
    tensors under PAGED_MIN_SIZE elements on the GPU and every tensor's 8-bit absmax (``torch.zeros`` on the device).
    Under DeepSpeed ZeRO every partition is large (as _eight_bit_state_terms)."""
    opt = plan.optimizer
    paged = opt in PAGED
    k = ADEMAMIX_MOMENTS
    on_gpu = min(trainable, small_state_elements(plan, PAGED_MIN_SIZE)) if paged else trainable
    if opt not in ADEMAMIX_8BIT_FAMILY:
        where = f" of tensors under {PAGED_MIN_SIZE:,} elements (the rest is paged)" if paged else ""
        return [Term(f"AdEMAMix m1, m2, nu{where}", f"{k} × {sci(on_gpu)} × 4 B", k * on_gpu * 4.0)]
    small = 0 if plan.parallel.strategy.deepspeed else min(on_gpu, small_state_elements(plan))
    quantised = on_gpu - small
    per = k * (1 + 4 / OPT8_BLOCK)
    terms = [Term("8-bit AdEMAMix m1, m2, nu + block absmax", f"{sci(quantised)} × 3 × (1 + 4/256) B", quantised * per)]
    if paged:
        terms += _paged_absmax_terms(max(0, trainable - on_gpu), moments=k, name="AdEMAMix")
    if small:
        terms.append(
            Term(
                f"float32 AdEMAMix moments of tensors under {OPT8_MIN_SIZE:,} elements",
                f"3 × {sci(small)} × 4 B",
                k * small * 4.0,
            )
        )
    return terms


def _paged_absmax_terms(paged: int, moments: int, name: str) -> list[Term]:
    """The float32 block absmax of the paged tensors' 8-bit moments: a device tensor, not paged (bitsandbytes
    95f9af30 optim/optimizer.py Optimizer2State.init_state lines 524-529, Optimizer1State.init_state line 695:
    ``torch.zeros((blocks,), dtype=torch.float32, device=p.device)``), one per moment, 4 B per block of 256."""
    if paged <= 0:
        return []
    many = f"{moments} × " if moments > 1 else ""
    return [
        Term(
            f"8-bit {name} absmax of the paged tensors",
            f"{sci(paged)} × {many}4/{OPT8_BLOCK} B",
            paged * moments * 4 / OPT8_BLOCK,
        )
    ]


def _ao_state_terms(plan: Plan, trainable: int, b: float) -> list[Term]:
    """torchao's low-bit AdamW (AO_LOW_BIT): two quantised moments with their block scales and qmaps; tensors
    under AO_MIN_SIZE elements or that the block does not divide keep both moments in the parameters' dtype.
    tools/measure/optimizer_state_check.py: every tensor's state to the byte (CPU; the qmap's 64 B at 4 bits is one
    512-byte block on the GPU)."""
    code, block, qmap = AO_LOW_BIT[plan.optimizer]
    small = min(trainable, small_state_elements(plan, AO_MIN_SIZE, block))
    quantised = trainable - small
    per = 2 * (code + 4 / block)
    terms = [
        Term(
            "torchao low-bit Adam moments + block scales",
            f"{sci(quantised)} × 2 × ({code:g} + 4/{block}) B",
            quantised * per,
        )
    ]
    tensors = trainable_tensors(plan) - small_state_tensors(plan, AO_MIN_SIZE, block)
    if qmap and tensors > 0:
        qbytes = max(MIN_BLOCK_BYTES, qmap * 4)
        terms.append(
            Term("torchao qmap per quantised moment", f"2 × {tensors:,} tensors × {qbytes} B", 2 * tensors * qbytes)
        )
    if small:
        terms.append(
            Term(
                f"Adam moments of tensors under {AO_MIN_SIZE:,} elements or not whole blocks",
                f"2 × {sci(small)} × {b:g} B",
                2 * small * b,
            )
        )
    return terms


def tensor_state_bytes(opt: Optimizer, rows: int, cols: int, b: float) -> tuple[float, str]:
    """Bytes of one rows × cols tensor's optimizer state on the GPU (``b`` bytes an element: its dtype), and the
    rule in words: the per-tensor form of the rules above, for a tensor trained beside the plan's own (PEFT's
    modules_to_save copies and token rows, core.training.extra_trained)."""
    n = rows * cols
    eight_bit = 2 * (1 + 4 / OPT8_BLOCK) * n if n >= OPT8_MIN_SIZE else OPT8_SMALL_STATE_BYTES * n
    lion_8bit = (1 + 4 / OPT8_BLOCK) * n if n >= OPT8_MIN_SIZE else LION_STATE_BYTES * n
    paged = n >= PAGED_MIN_SIZE
    if opt in ADAM_FAMILY or opt in (Optimizer.MUON, Optimizer.GALORE_ADAMW):  # their AdamW steps embedding and head
        return 2 * n * b, f"Adam m, v at {b:g} B"
    if opt is Optimizer.ADAMW_8BIT:
        return eight_bit, "8-bit Adam"
    if opt is Optimizer.PAGED_ADAMW:
        return (0.0, "paged") if paged else (PAGED_STATE_BYTES * n, "float32 Adam")
    if opt is Optimizer.PAGED_ADAMW_8BIT:
        return (2 * n * 4 / OPT8_BLOCK, "paged; its absmax") if paged else (eight_bit, "8-bit Adam")
    if opt is Optimizer.LION:
        return LION_STATE_BYTES * n, "Lion momentum"
    if opt is Optimizer.LION_8BIT:
        return lion_8bit, "8-bit Lion"
    if opt is Optimizer.PAGED_LION:
        return (0.0, "paged") if paged else (LION_STATE_BYTES * n, "Lion momentum")
    if opt is Optimizer.PAGED_LION_8BIT:
        return (n * 4 / OPT8_BLOCK, "paged; its absmax") if paged else (lion_8bit, "8-bit Lion")
    if opt is Optimizer.RMSPROP_BNB:
        return LION_STATE_BYTES * n, "RMSprop square average (float32)"
    if opt is Optimizer.RMSPROP_BNB_8BIT:
        return lion_8bit, "8-bit RMSprop"
    if opt in ADEMAMIX_FAMILY:
        return _ademamix_tensor_bytes(opt, n)
    if opt in ONE_BUFFER_TORCH:
        return n * b, f"one buffer at {b:g} B"
    if opt in SCHEDULE_FREE:
        return SCHEDULE_FREE[opt][0] * n * b, f"schedule-free state at {b:g} B"
    if opt in AO_LOW_BIT:
        code, block, qmap = AO_LOW_BIT[opt]
        if n < AO_MIN_SIZE or n % block:
            return 2 * n * b, f"Adam m, v at {b:g} B"
        return 2 * n * (code + 4 / block) + (2 * max(MIN_BLOCK_BYTES, qmap * 4) if qmap else 0), "torchao low-bit"
    if opt in ANYPRECISION:
        moments, kahan = ANYPRECISION[opt]
        return n * (moments + kahan), "AnyPrecisionAdamW bf16"
    if opt is Optimizer.SGD_MOMENTUM:
        return n * b, "momentum"
    if opt is Optimizer.ADAFACTOR:
        return (rows + cols) * 4.0, "Adafactor rows + columns"
    return 0.0, "none"


def _ademamix_tensor_bytes(opt: Optimizer, n: int) -> tuple[float, str]:
    """One tensor's AdEMAMix state (ADEMAMIX_FAMILY): three moments, float32 or 8-bit with block absmax; float32
    under OPT8_MIN_SIZE elements; paged (none on the GPU but the 8-bit absmax) from PAGED_MIN_SIZE elements."""
    k = ADEMAMIX_MOMENTS
    eight = opt in ADEMAMIX_8BIT_FAMILY and n >= OPT8_MIN_SIZE
    if opt in PAGED and n >= PAGED_MIN_SIZE:
        return (k * n * 4 / OPT8_BLOCK, "paged; its absmax") if eight else (0.0, "paged")
    if eight:
        return k * (1 + 4 / OPT8_BLOCK) * n, "8-bit AdEMAMix"
    return k * 4.0 * n, "AdEMAMix m1, m2, nu (float32)"


def paged_state_bytes(plan: Plan, counts: ParamCounts) -> float:
    """The paged optimizers' state in CUDA managed memory (not the caching allocator's)."""
    if plan.optimizer not in PAGED:
        return 0.0
    paged = max(0, counts.trainable - small_state_elements(plan, PAGED_MIN_SIZE))
    per = {
        Optimizer.PAGED_ADAMW: PAGED_STATE_BYTES,
        Optimizer.PAGED_ADAMW_8BIT: PAGED_8BIT_STATE_BYTES,  # its absmax stays on the GPU (_paged_absmax_terms)
        Optimizer.PAGED_LION: LION_STATE_BYTES,
        Optimizer.PAGED_LION_8BIT: 1.0,  # uint8 state1; its absmax stays on the GPU (_paged_absmax_terms)
        Optimizer.PAGED_ADEMAMIX: ADEMAMIX_MOMENTS * 4.0,  # float32 state1 (m1, m2) and state2 (nu)
        Optimizer.PAGED_ADEMAMIX_8BIT: ADEMAMIX_MOMENTS * 1.0,  # uint8 codes; the absmax stays on the GPU
    }[plan.optimizer]
    return paged * per


def small_state_elements(plan: Plan, below: int = OPT8_MIN_SIZE, block: int = 0) -> int:
    """Trainable parameters in tensors of fewer than OPT8_MIN_SIZE elements (bitsandbytes keeps
    their state in float32), from the shapes of the tensors that train: the adapters' lora_A,
    lora_B and DoRA magnitudes, or the blocks' and the outside tensors (norms, biases, small
    projections) of full and frozen-layer training, scaled with a parameter count given
    instead of derived. With ``block``, a tensor whose size it does not divide counts too (torchao's rule)."""
    model = plan.model
    if plan.litgpt_adapter:
        return sum(n * c for n, c in litgpt_adapter_tensors(plan) if _kept(n, below, block))
    flat = flat_trained_sizes(plan)  # prompt learning, LN tuning
    if flat is not None:
        return _small(flat, below, block)
    if plan.adapter_based:
        head = _small(head_adapter_tensor_sizes(plan), below, block)
        return model.over_blocks(lambda dense: _small(adapter_tensor_sizes(plan, dense), below, block)) + head
    layers = model.num_layers - (plan.frozen_layers if plan.method is Method.FROZEN else 0)
    outside = model.outside_tensor_sizes(embedding=plan.method is Method.FULL)
    small = layers * _small(model.layer_tensor_sizes(), below, block) + _small(outside, below, block)
    return round(small * model.params_scale) if model.params_override else small


def _kept(n: int, below: int, block: int = 0) -> bool:
    """Whether a tensor of ``n`` elements keeps unquantised state: under ``below``, or not a multiple of ``block``."""
    return n < below or bool(block and n % block)


def _small(sizes: list[int] | tuple[int, ...], below: int = OPT8_MIN_SIZE, block: int = 0) -> int:
    return sum(n for n in sizes if _kept(n, below, block))


def small_state_tensors(plan: Plan, below: int, block: int = 0) -> int:
    """How many trainable tensors have fewer than ``below`` elements (small_state_elements' tensors, counted)."""
    model = plan.model
    if plan.litgpt_adapter:
        return sum(c for n, c in litgpt_adapter_tensors(plan) if _kept(n, below, block))
    flat = flat_trained_sizes(plan)  # prompt learning, LN tuning
    if flat is not None:
        return sum(1 for n in flat if _kept(n, below, block))
    if plan.adapter_based:
        head = sum(1 for n in head_adapter_tensor_sizes(plan) if _kept(n, below, block))
        return head + model.over_blocks(
            lambda dense: sum(1 for n in adapter_tensor_sizes(plan, dense) if _kept(n, below, block))
        )
    layers = model.num_layers - (plan.frozen_layers if plan.method is Method.FROZEN else 0)
    outside = model.outside_tensor_sizes(embedding=plan.method is Method.FULL)
    return layers * sum(1 for n in model.layer_tensor_sizes() if _kept(n, below, block)) + sum(
        1 for n in outside if _kept(n, below, block)
    )


def adafactor_state_elements(plan: Plan) -> int:
    """Row + column statistics for every trainable matrix (Shazeer & Stern 2018)."""
    model = plan.model
    if plan.litgpt_adapter:  # each prompt (P, d): P + d statistics; each gate (1, 1, H, 1): H + 1; vectors: n
        groups = litgpt_adapter_tensors(plan)
        blocks = max(0, model.num_layers - plan.lora.adapter_start_layer)
        per_prompt = plan.lora.adapter_prompt_length + model.hidden_size + model.num_heads + 1
        return blocks * per_prompt + sum(n * c for n, c in groups[2 if blocks else 0 :])
    if plan.method is Method.LN_TUNING:  # 1-D norm weights (and biases), kept whole
        return sum(ln_tensor_sizes(plan))
    if plan.method is Method.PREFIX_TUNING:  # the (n, L·2·kv) embedding: rows + columns
        return plan.lora.virtual_tokens + model.num_layers * 2 * model.kv_width
    if plan.prompt_learning:  # the (n, d) embedding and (d, d) matrices: rows + columns; a bias is 1-D, kept whole
        d = model.hidden_size
        matrices = (plan.lora.virtual_tokens + d) + (3 * 2 * d if plan.method is Method.P_TUNING else 0)
        return matrices + (3 * d if plan.method is Method.P_TUNING else 0)
    if plan.method is Method.IA3 or plan.method in BLOCK_TENSOR_SIZES or plan.lycoris:
        # the bank (V, L) of VB-LoRA is 2-D, once for the model: rows + columns
        bank = VBLORA_NUM_VECTORS + VBLORA_VECTOR_LENGTH if plan.vblora else 0
        return model.over_blocks(lambda dense: _adafactor_block(plan, dense)) + bank
    if plan.adapter_based:
        targets = plan.lora.targets
        r = plan.lora.rank
        if model.recurrent_mixer:  # a hybrid's layers: its own rule (ModelSpec._hybrid_lora_params), not read here
            shapes = model.linear_shapes()
            blocks = model.num_layers * sum(fi + fo + 2 * r for name, (fi, fo) in shapes.items() if name in targets)
        else:  # lora_A (r, in) and lora_B (out, r) of every matrix PEFT adapts, per kind of block (adapted_matrices);
            # DoRA's magnitude (out) is 1-D, kept whole (torch 2.13.0 torch/optim/_adafactor.py lines 100-111:
            # ``variance`` of the gradient's shape below 2-D)
            magnitude = 1 if plan.method is _METHOD_DORA else 0
            blocks = model.over_blocks(
                lambda dense: sum(
                    ((fi + r) + (r + fo) + magnitude * fo) * c
                    for fi, fo, c in model.adapted_matrices(targets, plan.linear_experts, dense)
                )
            )
        lora_head = model.head_adapter_shape(targets)  # lora_A (r, d) and lora_B (V, r), once; DoRA's magnitude (V)
        dora_head = lora_head[1] if lora_head and plan.method is _METHOD_DORA else 0
        return blocks + ((lora_head[0] + r) + (r + lora_head[1]) + dora_head if lora_head else 0)
    # frozen_layers is kept on a plan that left the frozen-layers method (Plan.with_method).
    layers = model.num_layers - (plan.frozen_layers if plan.method is Method.FROZEN else 0)
    norms = model.norms_per_layer * model.hidden_size
    if model.num_experts > 1 and not model.recurrent_mixer:  # attention, then each kind of block's MLP (a mean)
        attention = sum(fi + fo for name, (fi, fo) in model.linear_shapes().items() if name not in MLP_TARGETS)
        mlp = model.over_blocks(lambda dense: _adafactor_moe_mlp(plan, dense))
        blocks = layers * (attention + norms) + round(mlp * layers / model.num_layers)
    else:
        blocks = layers * (sum(fi + fo for fi, fo in model.linear_shapes().values()) + norms)
    embeds = 0 if plan.method is Method.FROZEN else model.vocab_size + model.hidden_size
    head = 0 if model.tie_embeddings else model.vocab_size + model.hidden_size
    return blocks + embeds + head + model.hidden_size


def _adafactor_moe_mlp(plan: Plan, dense: bool) -> int:
    """Adafactor's row + column statistics of one MoE model block's MLP matrices, full training (torch 2.13.0
    torch/optim/_adafactor.py lines 100-111: per leading index of a 3-D tensor). A dense block (``dense``): its MLP of
    dense_intermediate_size. An MoE block: the routed experts as nn.Linear modules (Plan.linear_experts: gate, up and
    down of each) or as 3-D parameters (E, 2I, d) and (E, d, I) (gpt-oss' 2-D expert biases (E, 2I), (E, d) too),
    the router (E, d), a shared expert and its gate (1, d). Measured: tools/measure/moe_adafactor_state.py,
    tests/data/moe_adafactor/."""
    model = plan.model
    d, ups = model.hidden_size, 2 if model.gated_mlp else 1
    if dense:
        return (ups + 1) * (model.dense_intermediate_size + d)
    i, e, s = model.intermediate_size, model.num_experts, model.shared_expert_size
    if plan.linear_experts:
        experts = e * (ups + 1) * (i + d)
    else:
        experts = e * (ups * i + d) + e * (d + i) + ((e + ups * i) + (e + d) if model.mlp_bias else 0)
    shared = (ups + 1) * (s + d) + (1 + d if model.shared_expert_gate else 0) if s else 0
    return experts + (e + d) + shared


def _adafactor_block(plan: Plan, dense: bool) -> int:
    """Adafactor's statistics for one block's tensors of a PEFT method of its own (IA3, LoHa / LoKr and
    core.params.BLOCK_TENSOR_SIZES'), in a block of the kind ``dense`` (core.model.ModelSpec.adapter_blocks)."""
    matrices = plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense)
    r = plan.lora.rank
    if plan.method is Method.IA3:  # each vector is 2-D, (1, in) or (out, 1): n + 1 statistics
        return sum(n + 1 for n in adapter_tensor_sizes(plan, dense))
    # VeRA's vectors are 1-D (r) and (out), FourierFT's spectrum (n) and RoAd's angles and scales too: Adafactor keeps
    # them whole
    if plan.vera or plan.fourierft or plan.road or plan.shira:  # SHiRA's shira_weight is 1-D (r·(in + out)) too
        return sum(adapter_tensor_sizes(plan, dense))
    if plan.randlora:  # randlora_lambda (r, bases) and randlora_gamma (bases, min): 2-D, rows + columns each
        bases = [(randlora_bases(fi, fo, r), min(fi, fo), c) for fi, fo, c in matrices]
        return sum((r + b + b + low) * c for b, low, c in bases)
    if plan.vblora:
        # vblora_logits_A (r, in/L, V) and vblora_logits_B (out/L, r, V) are 3-D: Adafactor factors the last two
        # dimensions per leading index (torch/optim/_adafactor.py: row and column variances of shape[:-1] and
        # shape[:-2] + shape[-1:]).
        length, vectors = VBLORA_VECTOR_LENGTH, VBLORA_NUM_VECTORS
        return sum((r * (fi // length + vectors) + (fo // length) * (r + vectors)) * c for fi, fo, c in matrices)
    if plan.adalora:  # lora_A (r, in), lora_E (r, 1), lora_B (out, r): all 2-D, rows + columns each
        return sum((fi + r + r + 1 + fo + r) * c for fi, fo, c in matrices)
    if plan.miss:  # each target's miss_block is 2-D (r, out): rows + columns
        return sum((r + fo) * c for _, fo, c in matrices)
    if plan.oft:  # each target's OFTRotationModule.weight is 2-D (r, b(b−1)/2): rows + columns
        oft = [(oft_blocks(plan, fan_in), c) for fan_in, _, c in matrices]
        return sum((n + b * (b - 1) // 2) * c for (n, b), c in oft)
    if plan.boft:  # boft_R (1, in/b, b, b): the last two dimensions per leading index, 2·in; boft_s (out, 1): out + 1
        return sum((2 * fi + fo + 1) * c for fi, fo, c in matrices)
    return sum(_lycoris_statistics(plan, fi, fo) * c for fi, fo, c in matrices)  # LoHa, LoKr


def _lycoris_statistics(plan: Plan, fan_in: int, fan_out: int) -> int:
    """Adafactor's rows + columns over LoHa's / LoKr's matrices on one (out × in) linear (their shapes in
    core.params.lycoris_matrix_tensors): LoHa's (out, r), (r, in) twice; LoKr's w1 (a, c) and w2 (b, d)
    whole, or as (b, r) and (r, d)."""
    r = plan.lora.rank
    if plan.method is Method.LOHA:
        return 2 * ((fan_out + r) + (r + fan_in))
    a, b = lokr_factorization(fan_out, plan.lora.lokr_factor)
    c, d = lokr_factorization(fan_in, plan.lora.lokr_factor)
    return (a + c) + ((b + r) + (r + d) if r < max(b, d) / 2 else b + d)


def largest_trainable_tensor(plan: Plan) -> int:
    """Elements of the largest tensor that trains (the for-loop step works one at a time)."""
    model = plan.model
    if plan.litgpt_adapter:
        return max((n for n, _ in litgpt_adapter_tensors(plan)), default=0)
    flat = flat_trained_sizes(plan)  # prompt learning, LN tuning
    if flat is not None:
        return max(flat)
    if plan.adapter_based:
        blocks = [n for _, dense in model.adapter_blocks() for n in adapter_tensor_sizes(plan, dense)]
        return max(blocks + head_adapter_tensor_sizes(plan), default=0)
    linear = max(fi * fo for fi, fo in model.linear_shapes().values())
    if model.num_experts > 1:  # transformers 5 stores each projection of all experts as one 3-D tensor
        linear = model.num_experts * 2 * model.hidden_size * model.intermediate_size
    head = model.vocab_size * model.hidden_size
    embedding_trains = plan.method is Method.FULL or not model.tie_embeddings
    return max(linear, head if embedding_trains else 0)


def optimizer_step_temporary(
    plan: Plan, counts: ParamCounts, dt: Dtypes, beside: Sequence[tuple[int, float]] = ()
) -> Term | None:
    """What the step allocates beyond the state, per implementation (torch 2.13 adam.py); ``beside`` lists the
    tensors the same optimizer steps outside ``counts.trainable`` (PEFT's modules_to_save copies and trainable
    tokens, core.training.extra_trained), each as (elements, bytes per element):

    - foreach (``_multi_tensor_adam``): ``exp_avg_sq_sqrt = torch._foreach_sqrt(...)`` makes
      one copy of the second moment for every parameter at once (from torch 2.1; under 2.0 a second
      one beside it, :func:`_foreach_adam_lists`);
    - fused (``_fused_adam``): one kernel per tensor list updates in place, no temporary;
    - for-loop (``_single_tensor_adam``): ``(exp_avg_sq.sqrt() / c).add_(eps)`` makes two
      copies of one parameter's moment at a time, the largest parameter's at the peak.

    AnyPrecisionAdamW steps one tensor at a time (_anyprecision_temporary); torchao's low-bit AdamW runs one
    torch.compile'd ``single_param_adam`` per tensor, counted without a temporary (not measured on a GPU).
    SGD's three implementations update in place (``_foreach_add_``, ``_fused_sgd_``) but for an L2 weight decay's
    new gradient (L2_DECAY, _sgd_decay_temporary), which also adds a third copy to Adam's for-loop. Adagrad and
    RMSprop: _one_buffer_temporary.
    bitsandbytes' optimizers (8-bit and paged) update in place in one CUDA kernel per tensor
    (bitsandbytes/optim/optimizer.py update_step: F.optimizer_update_32bit / _8bit_blockwise).
    """
    b = dt.grad
    t = counts.trainable
    if plan.optimizer in ANYPRECISION:
        return _anyprecision_temporary(plan, dt)
    if plan.optimizer is _OPTIMIZER_MUON:
        return _muon_temporary(plan, counts, dt)
    if plan.optimizer is _OPTIMIZER_LORA_FA:
        return _lora_fa_temporary(plan, dt)
    if plan.optimizer is _OPTIMIZER_GALORE_ADAMW:
        return _galore_temporary(plan, dt)
    if plan.optimizer in ONE_BUFFER_TORCH:
        return _one_buffer_temporary(plan, t, b, beside)
    if plan.optimizer in (_OPTIMIZER_SGD, _OPTIMIZER_SGD_MOMENTUM):
        return _sgd_decay_temporary(plan, t, b, beside)
    if plan.optimizer in SCHEDULE_FREE:
        return _schedule_free_temporary(plan, t, b, beside)
    if plan.optimizer not in ADAM_FAMILY:
        return None
    impl = plan.optimizer_impl
    if impl is _OPTIMIZER_IMPL_FOREACH:
        return _foreach_adam_temporary(plan, t, b, beside)
    if impl is _OPTIMIZER_IMPL_FORLOOP:
        big = largest_trainable_tensor(plan)
        big_n, big_b = max([(big, b), *beside], key=lambda nb: nb[0] * nb[1])
        if plan.optimizer in L2_DECAY and plan.weight_decay > 0:
            return Term(
                "for-loop Adam: sqrt(v) and its quotient, largest tensor, and its L2-decayed gradient",
                f"3 × {sci(big_n)} × {big_b:g} B",
                3 * big_n * big_b,
            )
        return Term(
            "for-loop Adam: sqrt(v) and its quotient, largest tensor",
            f"2 × {sci(big_n)} × {big_b:g} B",
            2 * big_n * big_b,
        )
    return None


def _sgd_decay_temporary(plan: Plan, t: int, b: float, beside: Sequence[tuple[int, float]]) -> Term | None:
    """SGD's new gradient under an L2 weight decay (L2_DECAY): one list over every tensor it steps (foreach) or a
    copy of the largest tensor (for-loop); none without weight decay or in the fused kernel."""
    if plan.weight_decay <= 0 or plan.optimizer_impl is OptimizerImpl.FUSED:
        return None
    if plan.optimizer_impl is OptimizerImpl.FORLOOP:
        big_n, big_b = max([(largest_trainable_tensor(plan), b), *beside], key=lambda nb: nb[0] * nb[1])
        return Term(
            "for-loop SGD: the largest tensor's L2-decayed gradient", f"{sci(big_n)} × {big_b:g} B", big_n * big_b
        )
    total = t * b + sum(n * w for n, w in beside)
    return Term("foreach SGD: the L2-decayed gradient list", f"{sci(total / b)} × {b:g} B", total)


# The parameter-sized lists torch's foreach Adam / AdamW step holds at its ``_foreach_addcdiv_``. torch 2.0.x
# (torch/optim/adamw.py ``_multi_tensor_adamw``, and adam.py's ``_multi_tensor_adam`` alike; pytorch/pytorch issue
# 97712 "Foreach optimizers use higher memory due to intermediates"): ``exp_avg_sq_sqrt =
# torch._foreach_sqrt(device_exp_avg_sqs)``, ``torch._foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt)``, then
# ``denom = torch._foreach_add(exp_avg_sq_sqrt, eps)`` out of place: both alive at ``torch._foreach_addcdiv_(
# device_params, device_exp_avgs, denom, step_size)``; amsgrad the same with ``max_exp_avg_sq_sqrt``; capturable
# ``denom = torch._foreach_add(exp_avg_sq_sqrt, eps_over_step_size)``, also two (read in the file index's copy of
# torch 2.0's adamw.py, id 25848975893, a fork that keeps the 2.0 foreach body as it was). From 2.1.0
# (pytorch/pytorch PR 104898 "[foreach][AdamW] Minimize intermediates to save peak memory", merged 2023-07-10; Adam's
# in the same series, all landed by PR 105193, 2023-07-31) ``torch._foreach_add_(exp_avg_sq_sqrt, eps)`` in place and
# ``torch._foreach_addcdiv_(device_params, device_exp_avgs, exp_avg_sq_sqrt, step_size)``: one, to 2.13 (janeyx99 in
# issue 97712, 2023-07-12: "a minimum budget of 1 intermediate ... as we cannot inplace modify saved state").
# The for-loop step (``denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)``, one tensor at a time) and
# the fused kernels (``torch._fused_adam(w)_``, 2.0 on) are the same in every release.
FOREACH_ADAM_LISTS_2_0: Final = 2
FOREACH_ADAM_LISTS: Final = 1


def _foreach_adam_lists(plan: Plan) -> int:
    """Parameter-sized lists the foreach Adam / AdamW step keeps at once under the plan's PyTorch release."""
    if plan.hardware.torch_version is TorchVersion.V2_0:
        return FOREACH_ADAM_LISTS_2_0
    return FOREACH_ADAM_LISTS


def _foreach_adam_temporary(plan: Plan, t: int, b: float, beside: Sequence[tuple[int, float]]) -> Term:
    """The foreach step's lists over the adapters (``t`` elements at ``b`` B) and the tensors ``beside`` them.

    ``_multi_tensor_adam(w)`` steps one (device, dtype) group at a time (``_group_tensors_by_device_and_dtype``) in a
    Python loop, and a group's list stays bound to its name until the next group's replaces it: when the second
    group's ``exp_avg_sq_sqrt`` forms, the first group's is still alive, so the step holds both groups' lists (from
    2.1; at most two dtypes here, float32 adapters and 16-bit copies). Under 2.0 the first group's ``denom`` is
    bound too, then the second's beside it: every group's list and the larger group's second one."""
    groups: dict[float, float] = {b: t * b} if t else {}
    for n, width in beside:
        groups[width] = groups.get(width, 0.0) + n * width
    total = sum(groups.values())
    shown = " + ".join(f"{sci(v / w)} × {w:g} B" for w, v in groups.items()) or "0"
    if _foreach_adam_lists(plan) == FOREACH_ADAM_LISTS_2_0:
        largest = max(groups.values(), default=0.0)
        return Term(
            "foreach Adam sqrt(v) and sqrt(v) + eps temporaries (torch 2.0)",
            f"({shown}) + the largest dtype group's second list",
            total + largest,
        )
    if beside:  # the same label: benchmarks/realgpu/memory.py ``between_steps`` frees the term by it
        return Term("foreach Adam sqrt(v) temporary", f"{shown} (every dtype group)", total)
    return Term("foreach Adam sqrt(v) temporary", f"T × {b:g} B = {sci(t)} × {b:g} B", t * b)


def _one_buffer_temporary(plan: Plan, t: int, b: float, beside: Sequence[tuple[int, float]]) -> Term | None:
    """Adagrad's and RMSprop's step lists (ONE_BUFFER_TEMPORARIES): foreach that many parameter-sized lists over
    every tensor it steps (a weight decay adds RMSprop's new gradient; Adagrad scales its new gradient in place as
    the numerator), the for-loop that many copies of the largest tensor, fused (Adagrad) none."""
    lists, decayed, copies = ONE_BUFFER_TEMPORARIES[plan.optimizer]
    name = OPTIMIZER_NAMES[plan.optimizer]
    if plan.optimizer_impl is OptimizerImpl.FUSED:
        return None
    if plan.optimizer_impl is OptimizerImpl.FORLOOP:
        big_n, big_b = max([(largest_trainable_tensor(plan), b), *beside], key=lambda nb: nb[0] * nb[1])
        k = copies
        return Term(
            f"for-loop {name}: {k} copies of the largest tensor", f"{k} × {sci(big_n)} × {big_b:g} B", k * big_n * big_b
        )
    k = decayed if plan.weight_decay > 0 else lists
    total = t * b + sum(n * w for n, w in beside)
    return Term(
        f"foreach {name}: {k} parameter-sized lists",
        f"{k} × (T × {b:g} B + beside) = {k} × {sci(total / b)} × {b:g} B",
        k * total,
    )


OPTIMIZER_NAMES: Final = {Optimizer.ADAGRAD: "Adagrad", Optimizer.RMSPROP: "RMSprop"}


def _schedule_free_temporary(plan: Plan, t: int, b: float, beside: Sequence[tuple[int, float]]) -> Term | None:
    """schedulefree's step (SCHEDULE_FREE): AdamW's and RAdam's denominator list, foreach as transformers builds them
    (``foreach=hasattr(torch, "_foreach_mul_")``, never passed; the plan's implementation input is torch.optim's and
    not read); SGD none."""
    lists = SCHEDULE_FREE[plan.optimizer][1]
    if not lists:
        return None
    total = t * b + sum(n * w for n, w in beside)
    return Term("foreach schedule-free denominator list", f"{sci(total / b)} × {b:g} B", lists * total)


def _lora_fa_temporary(plan: Plan, dt: Dtypes) -> Term:
    """LoraFAOptimizer.step, one (lora_A, lora_B) pair at a time (huggingface/peft 5d602fdb src/peft/optimizers/
    lorafa.py): ``grad_B = (1 / s²) * (grad_B_orin @ AA_T_inv)`` (under bf16 autocast, cast back to B's gradient
    dtype), then ``denom_B = exp_avg_sq_B.sqrt().add_(eps)``: the projected gradient and the denominator of the
    largest lora_B at once, as the for-loop Adam's two copies; A @ A.T, its pinv and the r × r identity are r² each,
    left out."""
    big, b = largest_trainable_tensor(plan), dt.grad
    return Term(
        "LoRA-FA: projected gradient of B and sqrt(v), largest lora_B", f"2 × {sci(big)} × {b:g} B", 2 * big * b
    )


def _anyprecision_temporary(plan: Plan, dt: Dtypes) -> Term:
    """AnyPrecisionAdamW's for-loop step (ANYPRECISION's source): ``(exp_avg_sq.sqrt() / c).add_(eps)`` makes two
    copies of the largest tensor's variance (bf16) at once and keeps one; with Kahan summation
    ``temp_buffer = p.detach().clone()`` beside it, one copy of the parameter: the larger of the two moments."""
    big = largest_trainable_tensor(plan)
    v = ANYPRECISION_MOMENT_BYTES
    if plan.optimizer is Optimizer.ANYPRECISION_ADAMW_KAHAN and v + dt.param > 2 * v:
        return Term(
            "AnyPrecisionAdamW: its denominator and the Kahan clone of the largest tensor",
            f"{sci(big)} × ({v:g} + {dt.param:g}) B",
            big * (v + dt.param),
        )
    return Term("AnyPrecisionAdamW: sqrt(v) and its quotient, largest tensor", f"2 × {sci(big)} × {v:g} B", 2 * big * v)


def muon_ns_flops(plan: Plan) -> float:
    """The Newton-Schulz iteration's FLOPs in one step over every Muon matrix (m <= n its two sides): per round
    X @ X.T 2·m²·n, gram @ gram 2·m³, gram_update @ X 2·m²·n."""
    per_block = 0.0
    for a, b in muon_matrices(plan):
        m, n = min(a, b), max(a, b)
        per_block += MUON_NS_STEPS * (4.0 * m * m * n + 2.0 * m**3)
    return per_block * muon_layers(plan) * plan.model.params_scale


def _muon_temporary(plan: Plan, counts: ParamCounts, dt: Dtypes) -> Term:
    """One matrix at a time: the update (the gradient's dtype, g B), the bf16 iterate before and after a round and
    the two m x m bf16 products (gram, gram_update) at once: m·n·(g + 4) + 4·m² bytes for the largest; beside it,
    after, the AdamW group's foreach sqrt(v) or for-loop copies (whichever is larger)."""
    g = dt.grad
    m, n = max(
        ((min(a, b), max(a, b)) for a, b in muon_matrices(plan)), key=lambda s: s[0] * s[1] * (g + 4) + 4 * s[0] ** 2
    )
    muon = m * n * (g + 2 * MUON_X_BYTES) + 2 * m * m * MUON_X_BYTES
    rest = max(0, counts.trainable - muon_elements(plan))
    impl = plan.optimizer_impl
    model = plan.model
    head_trains = plan.method is Method.FULL or not model.tie_embeddings  # the rest's largest: the embedding or head
    big = model.vocab_size * model.hidden_size if head_trains else model.hidden_size
    adamw = rest * g if impl is OptimizerImpl.FOREACH else 2 * big * g
    if impl is OptimizerImpl.FUSED:
        adamw = 0.0
    if adamw > muon:
        return Term("AdamW group's step temporaries (after Muon's)", f"{sci(adamw / g)} × {g:g} B", adamw)
    return Term(
        "Muon: the update, two bf16 iterates and two m×m products, largest matrix",
        f"{m:,}×{n:,} × ({g:g} + 2 × 2) B + 2 × {m:,}² × 2 B",
        muon,
    )


def galore_svd_bytes(plan: Plan, g: float) -> tuple[float, tuple[int, int]]:
    """The projector refresh of the largest targeted weight (galore-torch 1.0 galore_projector.py
    get_orthogonal_matrix, every update_proj_gap steps and on the first): ``matrix = grad.float()`` (a float32 copy
    unless the gradient is float32) and ``torch.linalg.svd(matrix, full_matrices=False)``'s U (m × k), S (k) and
    Vh (k × n), k = min(m, n), in float32; then ``U[:, :rank] @ torch.diag(s[:rank])`` (max × r) beside them.
    Beside it the loop's locals from the parameter before (its back-projected update and a projection, at most the
    largest's: tools/measure/galore_step_check.py saw them held). The solver's own workspace (LAPACK on CPU, cuSOLVER
    on CUDA) is not counted. Returns bytes and (big, small)."""
    big, small, r = max(galore_shapes(plan), key=lambda s: s[0] * s[1])
    copy = 0.0 if g == GALORE_SVD_BYTES else big * small * GALORE_SVD_BYTES
    svd = (big * small + small * small + small) * GALORE_SVD_BYTES  # U (or Vh) big × k, the other k × k, S k
    before = (big * small + big * r) * g
    return copy + svd + (big * r + r * r) * GALORE_SVD_BYTES + before, (big, small)


def galore_svd_flops(plan: Plan) -> float:
    """FLOPs of one projector refresh over every targeted weight (big × small): the R-SVD's 6·big·small² + 20·small³
    for Σ, U₁ and V (Golub & Van Loan, Matrix Computations, 4th ed., §8.6.3, Figure 8.6.1)."""
    per_block = sum(6.0 * big * small * small + 20.0 * small**3 for big, small, _ in galore_shapes(plan))
    return per_block * muon_layers(plan) * plan.model.params_scale


def _galore_temporary(plan: Plan, dt: Dtypes) -> Term:
    """galore-torch 1.0 adamw.py steps one parameter at a time. A targeted weight (m × n, P = max(m, n) × r):
    the projected gradient, ``exp_avg_sq.sqrt()`` (``denom``, added to in place) and ``exp_avg / denom`` (P each),
    then ``project_back``: the m × n matmul and its ``* self.scale`` copy alive at once: 3·P + 2·m·n elements in the
    gradient's dtype; a step that refreshes the projector first holds the float32 SVD (galore_svd_bytes). Any other
    parameter: ``denom`` and ``norm_grad`` (2 × its size), the largest of them the embedding or head; an untied head,
    the plain group's last (transformers puts it first), keeps them while the first targeted weight forms its
    projection and denominator (tools/measure/galore_step_check.py: to the byte). The largest."""
    g = dt.grad
    big, small, r = max(galore_shapes(plan), key=lambda s: 3 * s[0] * s[2] + 2 * s[0] * s[1])
    step = (3 * big * r + 2 * big * small) * g
    svd, (sb, ss) = galore_svd_bytes(plan, g)
    model = plan.model
    head_trains = plan.method is Method.FULL or not model.tie_embeddings
    rest = 2 * (model.vocab_size * model.hidden_size if head_trains else model.hidden_size) * g
    if not model.tie_embeddings:  # the head, the plain group's last, held until the first target's P and denom form
        first_big, _, first_r = galore_shapes(plan)[0]
        rest += 2 * first_big * first_r * g
    largest = max(step, svd, rest)
    if largest == rest:
        return Term(
            "GaLore's AdamW on the embedding or head: denom and update", f"2 × {sci(rest / 2 / g)} × {g:g} B", rest
        )
    if largest == svd:
        return Term(
            "GaLore projector refresh: float32 SVD of the largest targeted gradient (U, S, Vh, its copy)",
            f"{sb:,}×{ss:,} at 4 B",
            svd,
        )
    return Term(
        "GaLore step: projected gradient, denom, update (3 × max × r) and the back-projection (2 × m × n)",
        f"(3 × {big:,}×{r} + 2 × {big:,}×{small:,}) × {g:g} B",
        step,
    )

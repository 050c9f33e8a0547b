"""Which attention kernel a training step really runs, and the scratch its backward needs.

The plan names what the user asked for (eager, SDPA, FlashAttention-2); what runs depends
on the model and the dtypes: transformers 5 refuses SDPA for Gemma-2 (its attention
soft-capping, ``Gemma2PreTrainedModel._supports_sdpa = False``) and gpt-oss (attention
sinks) and, when SDPA was not asked for explicitly, falls back to eager; PyTorch's SDPA then picks flash,
memory-efficient or math by the rules of ``sdp_utils.cpp``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from core.catalogue import tcgen05
from core.inputs import explicit_mask, sixteen_bit_inputs, torch_before
from core.memo import last_answer
from core.plan import Attention, Plan, Stack, TorchVersion
from core.runtime import runs_mps

# Enum members this module's hot paths compare with, read from their classes once: on Python 3.11 each
# ``Class.MEMBER`` read goes through EnumType.__getattr__'s slot, ~0.15 µs (core.plan's note; h74speed).
_ATTENTION_EAGER: Final = Attention.EAGER
# The flash-attn package's kernels: FlashAttention-2, FlashAttention 1 / Triton, FlashAttention-3.
_FLASH_ATTN: Final = (Attention.FLASH, Attention.FLASH1, Attention.FLASH3)
_ATTENTION_SDPA: Final = Attention.SDPA


class Kernel(StrEnum):
    EAGER = "eager"  # transformers' eager_attention_forward: scores and probabilities kept
    FLASH = "flash"  # FlashAttention-2 (flash-attn, or SDPA's flash backend); FlashAttention 1 / Triton alike
    EFFICIENT = "efficient"  # SDPA's memory-efficient backend (xformers-style cutlass kernel)
    MATH = "math"  # SDPA's math fallback: plain tensor code


def sdpa_refused(plan: Plan) -> bool:
    """Gemma-2 (soft-capped scores) and gpt-oss (attention sinks) do not support SDPA in
    transformers 5 (``_supports_sdpa = False``)."""
    model = plan.model
    unsupported = (model.family == "gemma2" and model.attn_softcap > 0) or model.family == "gpt_oss"
    return plan.attention is _ATTENTION_SDPA and unsupported


# On an Apple GPU SDPA trains through PyTorch's math attention, which keeps the B·H·S² probabilities
# (the math kernel's terms in core.training.activations). Read in pytorch/pytorch through the file index
# (the repository is past fetch's limit; ids are the index's): scaled_dot_product_attention
# (aten/src/ATen/native/transformers/attention.cpp, a 2.5+ copy, id 48751398506) runs the Metal kernel
# _scaled_dot_product_attention_math_for_mps only when ``!(GradMode::is_enabled() &&
# any_inputs_require_grad)`` and dropout is 0; a training step takes _scaled_dot_product_attention_math
# (matmul(q, kᵀ), softmax, matmul with v, each saved by autograd). Revisions that register an MPS
# _fused_sdp_choice_stub (aten/src/ATen/native/transformers/mps/sdp_utils.cpp, id 55131921878) make its
# flash and memory-efficient kernels forward-only: "Flash SDPA on MPS is forward-only; falling back when
# inputs require grad" — math again. Attention.mm at 00a5f92f: sdpa_general_mps (MPSGraph, also
# materialises attn = empty({B, H, q, k})), sdpa_vector_* and the prefill kernels, none with a backward.
# A plan's "flash" on a Mac cannot run at all (core.mac); it keeps the flash kernel's figures.
@last_answer
def sdpa_kernel(plan: Plan) -> Kernel:
    """The kernel that runs on an A100/H100 (sdp_utils.cpp, priority order flash →
    memory-efficient → math): flash needs 16-bit inputs, no mask and head width ≤ 256 and
    handles grouped-query heads; memory-efficient takes float32 too, and grouped-query heads
    from PyTorch 2.14 (:func:`efficient_takes_gqa`); anything else falls back to math.
    transformers passes grouped-query heads with enable_gqa when no mask is needed, else
    repeats k and v."""
    if plan.attention is _ATTENTION_EAGER or sdpa_refused(plan):
        return Kernel.EAGER
    if plan.attention is _ATTENTION_SDPA and runs_mps(plan.hardware.gpu):
        return Kernel.MATH  # MPS has no fused attention with a backward (see above)
    model = plan.model
    masked = explicit_mask(plan)
    sixteen = sixteen_bit_inputs(plan)
    if plan.attention in _FLASH_ATTN or (sixteen and not masked and model.head_dim <= 256):
        return Kernel.FLASH
    gqa = model.num_kv_heads != model.num_heads and not masked
    if (not gqa or efficient_takes_gqa(plan)) and model.head_dim % (8 if sixteen else 4) == 0:
        return Kernel.EFFICIENT
    return Kernel.MATH


# SDPA's CUDA memory-efficient kernel and grouped-query heads. Through 2.13 its check (sdp_utils.cpp
# ``check_grouped_query_attention`` with supports_gqa false for it) refused k / v with fewer heads than q, so an
# enable_gqa call that flash could not take (float32 inputs, heads wider than 256) ran the math kernel; 2.13.0's
# own efficient backward, handed such shapes, returns k / v gradients at the query heads and autograd refuses
# them (tools/measure/release_check.py). pytorch/pytorch PR 191085 ("[SDPA] Add memory-efficient GQA and vmap
# backward support", 2026-07) taught it grouped-query heads (Hk == Hv, Hq % Hkv == 0, enable_gqa); the 2.14.1
# wheel carries it: mem_eff_attention/kernel_forward.h reads k / v at ``head_id / q_heads_per_kv``,
# kernel_backward.h writes ``grad_key_ptr`` / ``grad_value_ptr`` as [Mk, nHq, K] (every query head's share, no
# atomics) and a second kernel sums each group into the k / v gradients (backward_workspace), and
# torch/_meta_registrations.py's efficient backward returns them at the k / v heads.
def efficient_takes_gqa(plan: Plan) -> bool:
    """Whether the plan's PyTorch runs grouped-query heads on the memory-efficient kernel (2.14 on)."""
    return not torch_before(plan.hardware.torch_version, TorchVersion.V2_14)


# Which fused kernel SDPA's dispatcher picks on a datacenter Blackwell card (sm_100 / sm_103: core.catalogue.tcgen05),
# for time only (docs/TRAINING_TIME.md, "Which backend PyTorch's SDPA runs, by release and card"). Its flash backend is
# PyTorch's vendored FlashAttention-2, Ampere's mma.sync on every card (aten/src/ATen/native/transformers/cuda/
# flash_attn/kernel_traits.h, the SM80_16x8x16 MMA atom flash-attn's own has); sm_100 and sm_120 joined its range in
# pytorch/pytorch PR 145602 (2025-01, so 2.7). cuDNN's fused attention goes first only where
# ``check_prefer_cudnn_attention()`` says so: from 2.10 a runtime cuDNN > 9.15.0 on sm_90 / sm_100 / sm_103
# (pytorch@70d99e99 aten/src/ATen/native/transformers/cuda/sdp_utils.cpp L78-L99, as huggingface/transformers PR
# 48163 quotes it; sm_103 from PR 170800), which the 2.14.1 wheel meets (METADATA: nvidia-cudnn-cu13==9.24.0.43;
# libtorch_cuda.so carries the TORCH_CUDNN_SDPA_DEPRIORITIZED switch). Before: cuDNN last from 2.5.1 (PR 138522),
# and the 2.9 wheels, built against cuDNN 9.8, missed 2.9's compile-time 9.9 gate (PR 162073, issue 165801). The range
# "2.8 - 2.13" also holds 2.11-2.13, whose bundled cuDNN crosses 9.15 by that PR's account (not read here): timed as
# the flash backend, which 2.8-2.10 run. torchtitan puts cuDNN first on such a card whatever the release
# (ScaledDotProductAttention._init_backend, has_cuda_capability(10, 0)); no plan field says torchtitan. cuDNN takes
# grouped-query heads (check_batch_size_and_num_heads_dense<true /*enable_gqa*/, ...>) and refuses head dims over
# 128 there (check_cudnn_tensor_shapes: 128 but on sm_90 with cuDNN >= 9.10, or d_qk 192 / d_v 128 on sm_100), which
# fall to the flash backend. An H100's SDPA stays on flash: the default order there is the same as a B200's, but the
# fitted H100 rows ran older PyTorch or torchtitan's flash-first order, and timing them at cuDNN's rate made the fit
# worse (the doc's table).
CUDNN_SDPA_MAX_HEAD_DIM: Final = 128  # sdp_utils.cpp check_cudnn_tensor_shapes: head_dim_limit = 128 off sm_90


def sdpa_runs_cudnn(plan: Plan, gpu_id: str) -> bool:
    """Whether an SDPA plan on card ``gpu_id`` runs cuDNN's fused attention (a datacenter Blackwell card, PyTorch
    2.14 on, where the flash backend would take the call and cuDNN's head-dim limit allows it)."""
    if plan.attention is not _ATTENTION_SDPA or not tcgen05(gpu_id):
        return False
    if torch_before(plan.hardware.torch_version, TorchVersion.V2_14) or sdpa_kernel(plan) is not Kernel.FLASH:
        return False
    head_dim = plan.model.head_dim
    return head_dim <= CUDNN_SDPA_MAX_HEAD_DIM and head_dim % 8 == 0


# The math kernel's own precision. From PyTorch 2.5 _scaled_dot_product_attention_math upcasts 16-bit q, k and v
# to float32, runs both matmuls and the softmax in float32 and casts the output back (pytorch/pytorch PR 128922,
# "Always use high precision for SDPA math backend", merged 2024-07, first released in 2.5.0; attention.cpp read
# through the file index, a 2.5+ copy, id 40065839: ``query_acc = ... query_.to(at::kFloat)`` unless
# ``allowFP16BF16ReductionMathSDP()``, PR 135964's opt-out, off by default; ``.to(origin_dtype)`` on the result).
# Before (a 2.4-era copy, id 2466291) the kernel worked in the inputs' dtype: 16-bit scaled q, k, v and
# 16-bit probabilities (at::softmax keeps its input's dtype).
def math_kernel_bytes(plan: Plan, compute: float) -> float:
    """Bytes per element of the tensors the math kernel keeps (scaled q, k, repeated v, the
    probabilities) when its inputs are ``compute`` bytes wide."""
    return compute if torch_before(plan.hardware.torch_version, TorchVersion.V2_5_TO_2_7) else max(compute, 4.0)


# The fused scale-mask-softmax kernel Megatron's core attention runs in 16 bits (both Megatron stacks' eager
# paths): Transformer Engine's UnfusedDotProductAttention, what ``--attention-backend unfused`` selects under the
# TE spec, calls TE's FusedScaleMaskSoftmax (NVIDIA/TransformerEngine 4329ff84, the revision NVIDIA/Megatron-LM
# d98e8a64 pins: transformer_engine/pytorch/attention/dot_product_attention/softmax.py ``is_kernel_available``:
# 16-bit input, 16 < sk < 16384, sk % 8 == 0, sq % 4 == 0, b·np % 4 == 0, sq % batch_per_block == 0); the local
# spec's DotProductAttention calls Megatron-Core's own (megatron/core/fusions/fused_softmax.py at d98e8a64:
# 16 < sk <= 4096, sq and sk % 4 == 0, b·np % 4 == 0; ``--no-masked-softmax-fusion`` is off by default,
# megatron/training/arguments.py). Both kernels write the probabilities in the input's 16 bits and save that
# output for their backward (``ctx.save_for_backward(softmax_results, scale_t)``), where the PyTorch fallback
# keeps a float32 softmax (``attention_softmax_in_fp32``). The plan does not say which spec ran, so the bounds
# both kernels accept are the rule: past 4,096 tokens the float32 fallback is assumed (an upper bound under TE).
MEGATRON_FUSED_SOFTMAX_MAX_SEQ = 4096  # Megatron-Core fused_softmax.py is_kernel_available: sk <= 4096


def _softmax_batch_per_block(sk: int) -> int:
    """TE's FusedScaleMaskSoftmax.get_batch_per_block: 128 threads a block, one warp (≤ 32 threads) a row,
    two rows a warp up to 128 keys (softmax.py THREADS_PER_BLOCK / THREADS_PER_WARP at 4329ff84)."""
    pow2 = 1 << (sk - 1).bit_length()
    warp = min(pow2, 32)
    return (128 // warp) * (2 if pow2 <= 128 else 1)


def megatron_fused_softmax(plan: Plan) -> bool:
    """Whether a Megatron plan's eager core attention runs the fused 16-bit softmax kernel (see above)."""
    if plan.stack is not Stack.MEGATRON or plan.attention is not Attention.EAGER or not sixteen_bit_inputs(plan):
        return False
    s, b = plan.workload.seq_len, plan.workload.micro_batch
    heads, tp = plan.model.num_heads, max(1, plan.parallel.tensor_parallel)
    if heads % tp or not 16 < s <= MEGATRON_FUSED_SOFTMAX_MAX_SEQ or s % 8:
        return False
    return (b * heads // tp) % 4 == 0 and s % _softmax_batch_per_block(s) == 0


def kernel_note(plan: Plan) -> str:
    """A sentence for the estimate's notes when the kernel differs from the one asked for."""
    if sdpa_refused(plan):
        why = "attention sinks" if plan.model.family == "gpt_oss" else "soft-capped attention scores"
        return (
            f"{plan.model.name} cannot use SDPA in transformers 5 ({why}): the default load falls back to "
            "eager attention, which keeps the B·H·S² scores; a FlashAttention kernel avoids them."
        )
    return ""


def backward_workspace(plan: Plan, compute_bytes: float) -> float:
    """Scratch the fused attention backward kernels allocate (FlashAttention-2 mha_bwd:
    softmax_d [B,H,⌈S⌉128] and dq_accum [B,⌈S⌉128,H,⌈hd⌉32] in float32, plus k/v gradients
    expanded to every head for grouped-query; the memory-efficient backward: delta
    [B,H,S] float32 and, in 16 bits, a float32 dq accumulator, plus from PyTorch 2.14 the
    same expanded k/v gradients for grouped-query heads, summed per group after the kernel)."""
    model = plan.model
    b, s, h, hd = plan.workload.micro_batch, plan.workload.seq_len, model.num_heads, model.head_dim
    kernel = sdpa_kernel(plan)
    if kernel is Kernel.FLASH:
        s128 = -(-s // 128) * 128
        hd32 = -(-hd // 32) * 32 if hd <= 192 else 256
        total = float(b * h * s128 * 4 + b * s128 * h * hd32 * 4)
        if model.num_kv_heads != h:
            total += 2 * b * s * h * hd * compute_bytes
        return total
    if kernel is Kernel.EFFICIENT:
        total = float(b * h * s * 4 + (b * s * h * hd * 4 if compute_bytes == 2 else 0))
        if model.num_kv_heads != h and not explicit_mask(plan):  # enable_gqa: only 2.14+ reaches here
            total += 2 * b * s * h * hd * compute_bytes
        return total
    return 0.0

"""How long a step's compute takes on a card: the achieved utilisation, modelled.

The step's work on the rank that sets its pace is split into parts, each at the rate the
card offers it (seconds at the datasheet's peak, or at its memory bandwidth):

- the matmuls, at the peak of the dtype they run in (the fp8 rate for float8 linears), and
  the bytes they read and write, at the memory bandwidth, added: a small matmul spends
  proportionally more time moving its operands, which makes the efficiency size-dependent
  (Calculon's ``no_overlap`` processing mode, the one its shipped systems use: Isaev et al.,
  SC'23; the roofline's larger of the two was scored and not adopted, docs/TRAINING_TIME.md
  "A matmul's compute and its traffic");
- attention's scores and values (the causal count a fused kernel runs), at the 16-bit peak:
  float8 recipes leave attention in 16 bits;
- the elementwise work around them (norms, rotary embeddings, activations, residual adds,
  the loss, float8 casts, a quantised base's dequantisation), as the bytes eager PyTorch
  moves for it, at the memory bandwidth;
- the optimizer step, as the bytes it reads and writes, at the memory bandwidth.

Each part's time is multiplied by a coefficient: the card generation's matmul and attention
efficiency (1 ÷ the share of the peak large matmuls reach), and the stack's share of eager
PyTorch's elementwise traffic (torch.compile and Megatron's fused kernels move less). The
coefficients are fitted on published training throughput (benchmarks/realgpu/throughput.py,
scored leave-one-source-out; :mod:`core.training.efficiency` holds them with their fit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from core import roles
from core.catalogue import Generation, GpuSpec, generation, tcgen05
from core.dtypes import ELEMENT_BYTES, MP_BYTES, MX_BLOCK, NF4_BLOCK, Quant
from core.inputs import megatron_dispatcher, megatron_grad_buffer, torch_ring_rotate
from core.memo import fills_fields, last_answer
from core.parallel.layout import (
    Stage,
    capacity_padded,
    expert_load,
    float8_recipe,
    fsdp_no_sync,
    layout,
    megatron_grad_bytes,
    no_sync_grad_bytes,
    received_tokens,
    train_share,
    trainable_layers,
)
from core.params import ParamCounts, muon_elements, muon_layers, muon_matrices
from core.plan import (
    TE_FLOAT8,
    Accounting,
    Attention,
    CheckpointPolicy,
    Float8,
    MoeDispatcher,
    MoeLayer,
    Offload,
    Optimizer,
    OptimizerImpl,
    Plan,
    Stack,
    Strategy,
)
from core.roles import Dtypes, dtypes_for, runs_grad_scaler
from core.runtime import HF_HOST_LAYER_S
from core.training.activations import recomputed_share
from core.training.attention import Kernel, math_kernel_bytes, sdpa_kernel, sdpa_runs_cudnn
from core.training.efficiency import FLASH_SM80, SDPA_CUDNN
from core.training.extra_trained import extra_state_terms, trained_tensors
from core.training.flops import (
    ADAPTER_GEMMS,
    BOFT_ROTATION,
    Gemm,
    attended_keys,
    block_gemms,
    head_trains,
    method_work,
)
from core.training.gemm_shape import shape_efficiency
from core.training.mixer_flops import mixer_flops
from core.training.optimizer import (
    ADEMAMIX_FAMILY,
    ANYPRECISION_MOMENT_BYTES,
    AO_LOW_BIT,
    LION_FAMILY,
    MUON_X_BYTES,
    RMSPROP_BNB_FAMILY,
    galore_svd_flops,
    muon_ns_flops,
    optimizer_terms,
    trainable_tensors,
)

# Enum members this module's hot paths compare with, read from their classes once: on Python 3.11 each
# ``Class.MEMBER`` read goes through EnumType.__getattr__'s slot, ~0.15 µs (core.plan's note; h74speed).
_ACCOUNTING_DETAILED: Final = Accounting.DETAILED
_ATTENTION_EAGER: Final = Attention.EAGER
_ATTENTION_FLASH1: Final = Attention.FLASH1
_ATTENTION_FLASH3: Final = Attention.FLASH3
_CHECKPOINT_POLICY_ATTENTION: Final = CheckpointPolicy.ATTENTION
_CHECKPOINT_POLICY_LAYER: Final = CheckpointPolicy.LAYER
_CHECKPOINT_POLICY_OP: Final = CheckpointPolicy.OP
_FLOAT8_NONE: Final = Float8.NONE
_FLOAT8_ROWWISE: Final = Float8.ROWWISE
_FLOAT8_ROWWISE_GW_HP: Final = Float8.ROWWISE_GW_HP
_FLOAT8_MXFP8: Final = Float8.MXFP8
_FLOAT8_TE_CURRENT: Final = Float8.TE_CURRENT
_GENERATION_HOPPER: Final = Generation.HOPPER
_KERNEL_EFFICIENT: Final = Kernel.EFFICIENT
_KERNEL_FLASH: Final = Kernel.FLASH
_KERNEL_MATH: Final = Kernel.MATH
_MOE_DISPATCHER_ALLGATHER: Final = MoeDispatcher.ALLGATHER
_MOE_DISPATCHER_ALLTOALL: Final = MoeDispatcher.ALLTOALL
_MOE_DISPATCHER_DEEPEP: Final = MoeDispatcher.DEEPEP
_MOE_DISPATCHER_HYBRIDEP: Final = MoeDispatcher.HYBRIDEP
_MOE_LAYER_TITAN_SCATTER: Final = MoeLayer.TORCHTITAN_SCATTER
_OFFLOAD_NONE: Final = Offload.NONE
_OPTIMIZER_GALORE_ADAMW: Final = Optimizer.GALORE_ADAMW
_OPTIMIZER_IMPL_FORLOOP: Final = OptimizerImpl.FORLOOP
_OPTIMIZER_IMPL_FUSED: Final = OptimizerImpl.FUSED
_OPTIMIZER_LORA_FA: Final = Optimizer.LORA_FA
_OPTIMIZER_MUON: Final = Optimizer.MUON
_QUANT_INT8: Final = Quant.INT8
_STACK_COMPILE: Final = Stack.COMPILE
_STACK_EAGER: Final = Stack.EAGER
_STACK_MEGATRON: Final = Stack.MEGATRON
_STRATEGY_DDP: Final = Strategy.DDP
_STRATEGY_ZERO1: Final = Strategy.ZERO1


def gemm_kind(plan: Plan, gpu: GpuSpec) -> str:
    """What the linears' matmuls run as: the float8 recipe on a card with fp8 tensor cores,
    else the 16-bit (or float32) compute dtype; under the Megatron stack on Hopper its 16-bit and
    Transformer Engine fp8 matmuls at the rate TE's GEMM guide measured (efficiency.MEGATRON_HOPPER)."""
    recipe = _FLOAT8_NONE
    if plan.float8 is not _FLOAT8_NONE and gpu.tflops_dense.get("fp8"):
        recipe = float8_recipe(plan.float8, gpu.id)  # NONE: torchao's MX off Blackwell
    if recipe is not _FLOAT8_NONE:
        # TE's two per-tensor recipes run the same fp8 GEMM (a per-tensor scale each operand): they
        # differ in their casts (te_cast_bytes), so current scaling is timed as "fp8-te"; torchao's
        # rowwise_with_gw_hp runs rowwise fp8 GEMMs for the output and input gradient (its 16-bit
        # weight-gradient matmul is tallied apart, _matmuls), so it is timed as "fp8-rowwise".
        kind = f"fp8-{_GEMM_RECIPE.get(recipe, recipe).value}"
    else:
        kind = "fp32" if dtypes_for(plan).compute == 4 else "16-bit"
    return _stack_kind(plan, generation(gpu.id), kind)


# The recipe whose fp8 GEMM a recipe's matmuls run (gemm_kind); the others run their own.
_GEMM_RECIPE: Final = {Float8.TE_CURRENT: Float8.TE, Float8.ROWWISE_GW_HP: Float8.ROWWISE}


def mxfp8_unsupported(plan: Plan, gpu: GpuSpec) -> bool:
    """A plan asking an MXFP8 recipe (Transformer Engine's, torchao's) on a card without MXFP8 GEMMs."""
    return plan.float8 in (Float8.TE_MXFP8, _FLOAT8_MXFP8) and float8_recipe(plan.float8, gpu.id) is not plan.float8


def _stack_kind(plan: Plan, family: Generation, kind: str) -> str:
    if plan.stack is _STACK_MEGATRON and family is _GENERATION_HOPPER and kind in ("16-bit", "fp8-te"):
        return f"megatron-{kind}"
    return kind


def attention_kernel(plan: Plan, gpu_id: str = "") -> str:
    """The attention kernel family the step runs: FlashAttention 1 or its Triton kernel when the
    plan names it (``flash1``: MPT's ``attn_impl: triton`` and flash-attn < 2.0, about half
    FlashAttention-2's speed); else Megatron / NeMo use Transformer Engine's fused attention
    (cuDNN, FlashAttention-3 class on Hopper) and PyTorch stacks SDPA's flash backend or the
    flash-attn package (FlashAttention-2). Eager attention (and SDPA's math fallback) is no
    attention kernel: its QKᵀ and PV are cuBLAS batched GEMMs (``_attention_padding``), ``eager``
    (``eager-fp32`` in float32), at the card's matmul coefficient (efficiency.derived). The flash-attn package on a
    datacenter Blackwell card ``gpu_id`` (sm_100 / sm_103) runs Ampere's mma.sync, not tcgen05 (``flash-sm80``,
    efficiency.FLASH_SM80: at the H100's rate per SM and clock), and so does SDPA's flash backend there, but from
    PyTorch 2.14 SDPA runs cuDNN's fused attention there (``sdpa-cudnn``, efficiency.SDPA_CUDNN: Transformer Engine's
    ``fused`` rate; attention.sdpa_runs_cudnn); FlashAttention-3 on Hopper is ``flash3``
    (efficiency.FLASH3_OVER_FLASH x FlashAttention-2's speed)."""
    if not fused_attention(plan):
        compute = dtypes_for(plan).compute
        if sdpa_kernel(plan) is _KERNEL_MATH:  # float32 inside from PyTorch 2.5 (math_kernel_bytes)
            compute = math_kernel_bytes(plan, compute)
        return "eager-fp32" if compute == 4 else "eager"
    if plan.attention is _ATTENTION_FLASH1:
        return "flash1"
    if plan.stack is _STACK_MEGATRON:
        return "fused"
    if plan.attention is _ATTENTION_FLASH3 and generation(gpu_id) is _GENERATION_HOPPER:
        return "flash3"
    # FlashAttention-3 elsewhere cannot run (core.checks warns): timed as FlashAttention-2, which can.
    if sdpa_runs_cudnn(plan, gpu_id):  # SDPA's cuDNN backend, first on sm_100 / sm_103 from PyTorch 2.14
        return SDPA_CUDNN
    # SDPA's own flash backend is FlashAttention-2's mma.sync code too (core.training.attention.sdpa_runs_cudnn).
    return FLASH_SM80 if tcgen05(gpu_id) else "flash"


# Bytes eager PyTorch moves per token and block around the matmuls, in elements of the
# activation dtype, forward; the backward moves about twice as much (each op reads its saved
# inputs and the incoming gradient and writes one gradient). Counted from transformers'
# LlamaDecoderLayer run eagerly: RMSNorm (an upcast to float32, the square, the mean, the
# scale, the downcast and the weight: about 18 d-sized passes in 16-bit elements, each),
# two residual adds (3 d each), rotary embeddings on q and k (rotate_half's slices and
# concatenation, two products and a sum: 9 passes each), the head transposes around
# attention (2 each of q, k, v and the output) and the gated activation (silu and the
# product: 5 passes of the MLP width). The transposes are copies around eager attention only
# (its output, a batched GEMM's, is transposed back with .contiguous()). A fused kernel takes
# strided views: PyTorch's SDPA wrappers hand the kernels ``query.transpose(1, 2)`` and return
# the (batch, seq, heads, dim) output as a view, and the flash backward's ``grad_out.contiguous()``
# and ``out.contiguous()`` copy nothing already in that layout (pytorch/pytorch@00afd8f2
# aten/src/ATen/native/transformers/cuda/attention_backward.cu ``_flash_attention_backward``,
# ``_scaled_dot_product_flash_attention_backward_cuda``; the forward wrapper in attention.cu the
# same); the flash-attn package and its Triton kernel take (batch, seq, heads, dim) tensors, which
# MPT gets by a view (mosaicml/llm-foundry@b2a43a147 llmfoundry/models/layers/attention.py
# ``triton_flash_attn_fn``: rearrange 'b s (h d) -> b s h d'). So a fused-attention plan is
# charged none (``_elementwise_bytes``). Not counted either way: the copies a caller makes to
# repeat grouped k / v heads (torchtitan's repeat_kv) or to unpad a batch for a varlen kernel.
NORM_PASSES: Final = 18.0
RESIDUAL_PASSES: Final = 3.0
ROPE_PASSES: Final = 9.0
TRANSPOSE_PASSES: Final = 2.0
ACTIVATION_PASSES: Final = 5.0
BACKWARD_OVER_FORWARD: Final = 2.0
# The same work under torch.compile, per block (torchtitan compiles each TransformerBlock with
# fullgraph=True: pytorch/torchtitan@9dec370 torchtitan/parallelisms/parallelize_llama.py
# apply_compile; its block, torchtitan/models/llama/model.py: h = x + attention(attention_norm(x)),
# out = h + feed_forward(ffn_norm(h)), RMSNorm as x.float() * rsqrt(mean(x²) + eps), cast back,
# times the weight, torchtitan/models/norms.py; rotary by view_as_complex products; SwiGLU as
# silu(w1(x)) * w3(x)). Inductor fuses each chain of pointwise ops and reductions between two
# extern kernels (the matmuls, SDPA) into one kernel that reads its inputs and writes its outputs
# once, the float32 intermediates staying in registers (pytorch/pytorch@0012d881
# torch/_inductor/choices.py: can_fuse_vertical, "Hook for heuristics to prevent vertical
# (producer/consumer) fusions", allows every one; can_fuse refuses only nodes sharing no data,
# past config.max_fusion_size, raising the peak memory or reading too many buffers): a norm
# reads x and writes the normed copy (2 passes); a residual add folded into the following norm
# reads the branch and writes the sum (2 more), the block's last add, at the compiled region's
# edge, reads both and writes (3): 2.5 per add; rotary reads q or k and writes it (2 passes);
# the gated activation reads gate and up and writes their product (3 passes of the MLP width),
# an ungated one reads and writes (2). The backward is taken as twice the forward, as in eager.
# The head transposes are counted as in eager: none around a fused attention kernel (above).
# An eager LayerNorm is one native kernel, not a chain of pointwise ops: nn.LayerNorm and
# F.layer_norm call aten::native_layer_norm, whose CUDA kernel reads each row once and writes the
# normed row (its mean and rstd, a float32 pair per row, are negligible): 2 passes forward, the
# backward taken at twice that as for every other pass here. NORM_PASSES' 18 count an RMSNorm
# written in Python (transformers' LlamaRMSNorm, torchtitan's eager RMSNorm, fms' LayerNormParameterized),
# which eager PyTorch runs op by op. The LayerNorm plans of the corpus under the eager stack are
# llm-foundry's MPT runs, whose benchmark script sets ``norm_type = 'low_precision_layernorm'``
# (mosaicml/llm-foundry@b2a43a147 scripts/train/benchmarking/submit_benchmarks.py), i.e. LPLayerNorm:
# torch.nn.functional.layer_norm on the autocast-dtype input (llmfoundry/models/layers/norm.py).
# Megatron's norms (apex's fused kernel, Transformer Engine's) keep the eager count and the Megatron
# stack's fitted factor: their kernels are not read here.
LAYERNORM_PASSES: Final = 2.0
COMPILE_NORM_PASSES: Final = 2.0
COMPILE_RESIDUAL_PASSES: Final = 2.5
COMPILE_ROPE_PASSES: Final = 2.0
COMPILE_GATED_PASSES: Final = 3.0
COMPILE_ACTIVATION_PASSES: Final = 2.0
# The loss over the vocabulary in float32 (upcast, log-softmax, its backward, the downcast):
# about 10 passes of 4 bytes per logit, forward and backward together.
LOSS_BYTES_PER_LOGIT: Final = 40.0
# Eager attention's score matrix, bytes per score forward: the scores written by the first
# matmul (2), the mask added (2 + 2), the float32 softmax with its casts (2 + 4 + 4 + 4 + 4 + 2)
# and the probabilities read by the second matmul (2) (transformers eager_attention_forward).
SCORE_BYTES: Final = 28.0
# ALiBi in eager attention adds its bias as the GEMM's C: torch.baddbmm(alibi, q, kᵀ, beta=1)
# (BigScience's Megatron-DeepSpeed, bigscience-workshop/Megatron-DeepSpeed@541b967
# megatron/model/transformer.py; transformers' BloomAttention alike). With beta ≠ 0 PyTorch first
# copies the broadcast bias into the whole score tensor (aten/src/ATen/native/LinearAlgebra.cpp,
# common_checks_baddbmm_bmm: "if (beta.toComplexDouble() != 0.0) result.copy_(self)") and the
# GEMM then reads it back: 2 + 2 bytes per score, forward only (the bias takes no gradient).
ALIBI_SCORE_BYTES: Final = 4.0
# A float8 cast reads the 16-bit tensor twice (its amax, then the scaled cast) and writes one
# byte per element (torchao float8_scaling_utils.hp_tensor_to_float8_dynamic).
FLOAT8_CAST_BYTES: Final = 5.0
# torchao's MX cast (torchao 0.13.0 torchao/prototype/mx_formats/mx_tensor.py ``to_mx``, compiled, and
# the dim-1 cast kernels of kernels.py, ``triton_to_mxfp8_dim1`` / ``mxfp8_quantize_cuda``): each 32-element
# block's amax and cast in one pass, reading the 16-bit tensor once (2 bytes) and writing one byte
# per element plus one E8M0 scale byte per block of 32.
MX_CAST_BYTES: Final = ELEMENT_BYTES["bf16"] + 1.0 + 1.0 / MX_BLOCK
# Transformer Engine's per-tensor casts: one fused kernel reads the 16-bit tensor (2 bytes), takes
# its amax on the way and writes the fp8 copy and its transpose (1 + 1: Hopper's fp8 GEMMs take
# only the TN layout), at the memory bandwidth; the forward casts the input and the weight of each
# linear, the backward the output gradient only (the forward's fp8 input and weight transposes
# are saved for the weight and input gradients). Measured: NVIDIA's GEMM profiling guide
# (NVIDIA/TransformerEngine@1609c890, docs/examples/gemm_profiling/gemm_profiling.rst, 5B model
# on an H200 NVL) times te.Linear under DelayedScaling at 18.978 ms per layer against 16.785 ms
# for the pre-quantized fp8 kernel: 2.19 ms for 2.48e9 cast input and weight elements, 4.24
# bytes each at 4.8 TB/s (its CurrentScaling, with a separate amax pass: 6.8; its B300 run,
# 187.2 vs 163.5 ms at 8 TB/s: 3.2).
TE_CAST_BYTES: Final = 4.0
# Transformer Engine's MXFP8 casts (MXFP8BlockScaling, Blackwell): one E8M0 scale per 1×32 block,
# and the two copies a training linear needs are two quantisations, not a copy and its transpose
# (the rowwise copy's blocks run along a row, the columnwise copy's down a column: each is scaled
# from its own 32 values; TE v2.12 grouped_linear.py sets both usages on the input and, in the
# backward, on the output gradient), so each cast reads the 16-bit tensor and writes 2 bytes plus
# 2/32 of scales, swizzled for the GEMM. Measured in the same guide as TE_CAST_BYTES, on the B300
# (NVIDIA/TransformerEngine@1609c890, docs/examples/gemm_profiling/gemm_profiling.rst, "Autocast vs
# Pre-quantized", the 5B model's 12 GEMMs a layer, 24 layers, M = 15,872): MXFP8 through te.Linear
# (autocast, its casts included) 215.608 ms against 171.869 ms pre-quantized, 43.739 ms for 24 ×
# 2.482e9 cast input and weight elements at 8 TB/s (NVIDIA B300 datasheet), 5.87 bytes each where
# the same run's per-tensor DelayedScaling gives 3.2 (TE_CAST_BYTES above).
TE_MXFP8_CAST_BYTES: Final = (215.608 - 171.869) * 1e-3 / 24 * 8e12 / 2.482e9
# Transformer Engine's per-tensor current scaling (Float8CurrentScaling; Megatron's --fp8-recipe
# tensorwise, Megatron-Bridge's "fp8_cs"): the cast first takes the tensor's amax in a pass of its own,
# then scales with it, so the 16-bit tensor is read twice (2 + 2 bytes) before the fp8 copy and its
# transpose are written (1 + 1). Measured in the same guide, "Worked Example: 5B Model on H200" (H200
# NVL, 4.8 TB/s): te.Linear under FP8 CurrentScaling 20.285 ms a layer (autocast, casts included)
# against 16.785 ms pre-quantized, 3.500 ms for 2.482e9 cast input and weight elements: 6.77 bytes
# each (DelayedScaling's 4.24 there is TE_CAST_BYTES).
TE_CURRENT_CAST_BYTES: Final = (20.285 - 16.785) * 1e-3 * 4.8e12 / 2.482e9
# Float8 rowwise on a linear too small for it: torchao converts every nn.Linear unless told
# otherwise (torchtitan's filter_fqns, its auto filter opt-in), and a rowwise linear whose local
# weight (N out × K in) is below torchao's rowwise thresholds runs slower than in bf16: "approx
# 40%" slower for Llama 3 8B's wk / wv under TP (pytorch/ao#2410, the RCA of torchtitan#1207).
# The thresholds are torchao's _auto_filter_for_rowwise (pytorch/ao 36027d8,
# torchao/float8/float8_linear_utils.py: N <= 2048, K <= 1024, or N <= 4096 and K <= 2048).
ROWWISE_SMALL_SLOWDOWN: Final = 1.4
# A fused attention kernel's backward runs five matmuls, not four: it keeps no score matrix, so it
# recomputes S = QKᵀ (and P from the saved log-sum-exp) before dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K and
# dK = dSᵀ·Q. FlashAttention counts its backward at 2.5 × the forward's FLOPs for that reason
# (Dao-AILab/flash-attention@0469c72 benchmarks/benchmark_flash_attention.py ``flops``: ``f`` for
# "fwd", ``2.5 * f`` for "bwd"; the FlashAttention-2 paper's benchmark section, Dao 2023,
# arXiv:2307.08691 §4.1, states the same count), and the rates the attention priors are read from
# (core.training.efficiency._ATTENTION: FlashAttention-2's and -3's papers) are per FLOP of that
# count. The counted FLOPs (the Megatron / Narayanan convention, 2 × the forward for the backward)
# stay what the MFU and the hardware FLOPs report; the kernel's time is charged for the matmuls it
# runs. cuDNN's fused attention (Transformer Engine) and FlashAttention 1 / Triton run the same
# algorithm. Eager attention saves its probabilities and runs four (no recompute).
FUSED_BACKWARD_OVER_COUNTED: Final = 2.5 / 2.0


def rowwise_too_small(k: float, n: float) -> bool:
    """torchao's rule for a linear (K in, N out features) rowwise float8 makes slower."""
    return n <= 2048 or k <= 1024 or (n <= 4096 and k <= 2048)


# bitsandbytes' dequantisation of a 4-bit weight: reads ½ byte plus its block's float32 absmax
# (4 bytes per NF4 block of 64; with double quantisation 1, taken as 4 here), writes 2 bytes.
# The block and the bytes are core.dtypes' (the one table): 0.5 + 4/64 + 2 = 2.5625.
DEQUANT_BYTES: Final = ELEMENT_BYTES["nf4"] + 4.0 / NF4_BLOCK + ELEMENT_BYTES["bf16"]
# PyTorch's ring attention (context parallel > 1 outside Megatron): the per-step merge of partial
# outputs and the backward's gradient accumulation, in float32, eagerly, as bytes per element of
# one ring call's local queries × the attention width (torch.distributed.tensor.experimental.
# _attention, pytorch/pytorch@0123248a484ffe531edb5098b986c1bac08cd296; the round-robin load
# balancing and the all-gather rotation torchtitan 9dec370 sets: enable_load_balance defaults
# to True, torchtitan/utils.py set_rotate_method("allgather")). Counted on the last CP rank,
# which merges whole outputs at every step (the others merge half, ``partial``):
# forward (_templated_ring_attention): K and V made contiguous (2 × 2 B read + write), the
# result cast back to 16 bits (4 read + 2 written) and the first step's cast to float32 (2 + 4):
# 20 once; at each further step the K/V concatenation sent on (8), the block output cast to
# float32 (6) and _SDPAMerger._merge_one's three full-size float32 ops (out − block_out,
# sigmoid(Δlse) × that, out − that: 12 + 8 + 12): 46 per step.
RING_FORWARD_ONCE: Final = 20.0
RING_FORWARD_PER_STEP: Final = 46.0
# backward (_templated_ring_attention_backward): three float32 zero buffers (12), K and V made
# contiguous (8), the first step's dK/dV accumulation (fp32 += 16-bit: 10 each, 20), its
# concatenation sent on (16) and dQ's accumulation (10), and the final casts of dQ (6) and
# dK/dV (12) to 16 bits: 84 once; each further step the K/V concatenation (8), dK/dV's half
# update and re-concatenation in _partial_update (10 + 16), the float32 dK/dV concatenation
# sent on (16) and dQ's accumulation (10): 60 per step.
RING_BACKWARD_ONCE: Final = 84.0
RING_BACKWARD_PER_STEP: Final = 60.0
# Megatron's context parallel is Transformer Engine's ring (AttnFuncWithCP, p2p exchange of K/V), and its merges run
# beside the fused attention kernels, not inside them: eager copies and jit-fused corrections in the compute dtype
# (2 bytes an element), counted at NVIDIA/TransformerEngine@7d576ed2 (the TE_TAG NVIDIA/NeMo's Dockerfile.ci pins
# from 7c05678e, 2024-07-06, to 5b4d0914, 2025-01-21: NeMo 24.07's) transformer_engine/pytorch/attention.py
# AttnFuncWithCP, causal, sbhd (Megatron-Core's layout), on the last CP rank (every step of its forward takes half
# the received K/V and merges a whole output). Bytes per element of the rank's local queries (Q: tokens × its heads'
# width) and of one of its K / V tensors (KV: tokens × its K/V heads' width). Forward, once: K and V concatenated
# into the send buffer (2 tensors × 2 read + 2 written: 8 KV), the output zeroed (2 Q) and the first step's
# flash_attn_fwd_out_correction (out_per_step read, out read and written: 6 Q); each further step: the received
# K/V's first half made contiguous (2 × ½ × 4: 4 KV) and a whole correction (6 Q). Backward (its steps run from the
# received blocks to the diagonal), once: K/V copied into the send buffer (8 KV), dQ's first copy (4 Q), the
# diagonal step's whole dK/dV concatenated (8 KV) and added (12 KV) and the first step's half dK/dV copied (4 KV),
# less the half add the step count charges for it (−6 KV): 4 Q + 26 KV; each further step: dQ accumulated (dq.add_:
# 6 Q), the received K/V's half made contiguous (4 KV), the half dK/dV concatenated (4 KV) and added (6 KV): 6 Q +
# 14 KV. The lse corrections (a float per head and token) are left out. Later releases keep the ring outside the
# kernels (v2.18 transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py:
# flash_attn_fwd_out_correction_init writes the first merge instead of zeroing and correcting, 4 Q less once); the
# same count stands for them.
TE_RING_FORWARD_ONCE: Final = (8.0, 8.0)  # (bytes per Q element, per KV element)
TE_RING_FORWARD_PER_STEP: Final = (6.0, 4.0)
TE_RING_BACKWARD_ONCE: Final = (4.0, 26.0)
TE_RING_BACKWARD_PER_STEP: Final = (6.0, 14.0)
# A mixture of experts moves each routed token copy to its expert's rows and back (dropless,
# balanced routing: N tokens, N·k copies, rows of d elements in the compute dtype). Transformer
# Engine's fused permutation, which Megatron-Core's moe_permute_fusion calls (NVIDIA/Megatron-LM
# b0cc2706, megatron/core/transformer/moe/moe_utils.py permute / unpermute / sort_chunks_by_idxs;
# NVIDIA/TransformerEngine v2.9 70f53666, transformer_engine/pytorch/triton/permutation.py):
# _permute_kernel loads each token's row once and stores it to its k experts' rows (N + N·k rows),
# _unpermute_kernel loads a token's k rows and stores their sum (N·k + N); each is the other's
# backward (transformer_engine/pytorch/permutation.py, _moe_permute_mask_map.backward and
# _moe_unpermute_mask_map.backward). Other stacks gather the copies and scatter-add them back,
# the same rows (transformers' eager expert loop: hidden_states[top_x], index_add_; torchtitan's
# gather and scatter_add). Per MoE layer and pass (forward, its recompute, backward):
MOE_PERMUTE_TOKEN_ROWS: Final = 2.0  # the permute's reads, the unpermute's writes
MOE_PERMUTE_COPY_ROWS: Final = 2.0  # the permute's writes, the unpermute's reads
# Megatron-Core's alltoall dispatcher (megatron/core/transformer/moe/token_dispatcher.py,
# MoEAlltoAllTokenDispatcher at b0cc2706; moe_token_dispatcher_type "alltoall" is the default and
# Qwen3's provider's, Megatron-Bridge v0.2.0 qwen_provider.py) also sorts the received copies by
# local expert ("Permutation 2", dispatch_postprocess) and back (combine_preprocess) when a rank
# holds more than one expert: _sort_chunks_by_map_kernel loads and stores each row once, 2·N·k
# each, its backward the same (_moe_chunk_sort.backward).
MOE_SORT_COPY_ROWS: Final = 4.0
# torchtitan's token-choice MoE as prime-rl copies it (plan setting moe_layer torchtitan-scatter, on a stack that is
# not Megatron's) materialises the N·k copies six times a forward, each pass reading and writing them, where a fused
# permute moves them twice (PrimeIntellect-ai/prime-rl@8718eb14 src/prime_rl/trainer/models/layers/moe.py MoE.forward;
# its experts wrapped by torchtitan's expert_parallel at a1fdd7e, the rev prime-rl's uv.lock pins,
# torchtitan/distributed/expert_parallel.py ``wrapper``): the gather into expert order (moe.py L419
# ``torch.gather(x, dim=0, index=token_indices_experts_sorted)``), expert_parallel's ``torch.vstack`` of a zero row
# (L352) and its padded permute ``x[permuted_indices, :]`` (L354), the unpermute ``out_unpermuted[permuted_indices, :]
# = out`` (L360), the router scores' float32 product cast back (moe.py L427-428, ``score_before_experts=False`` in
# prime-rl's Qwen3-MoE, one pass when compiled) and the out-of-place ``scatter_add`` of the copies into
# ``torch.zeros_like(x)`` (L434-436: the copies read and added, the N-row zeros written, then cloned: read and written).
# The backward runs each pass's adjoint, as many rows (the same convention as MOE_PERMUTE_* above).
TITAN_SCATTER_COPY_ROWS: Final = 12.0
TITAN_SCATTER_TOKEN_ROWS: Final = 3.0
# The host's time to issue one Megatron-Core MoE layer's forward and backward for a micro-batch,
# beyond a dense MLP's. The step cannot run faster than the host enqueues its kernels, and a
# dropless MoE layer makes the host wait for the device every forward (the all-to-all's and the
# grouped GEMM's split sizes are host lists: MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize,
# NVIDIA/Megatron-LM b0cc2706 megatron/core/transformer/moe/token_dispatcher.py), so it cannot
# queue the next layer behind the device's work. Measured by Megatron-LM's own CI on DGX H100, on
# a model small enough (hidden 512) that the device's work is a small part of the step: two
# functional tests that differ only in the MLP (NVIDIA/Megatron-LM d98e8a64,
# tests/functional_tests/test_cases/, golden_values_dev_dgx_h100.json and its _2nd resumed run,
# "iteration-time", each run's first logged step dropped: 146 steps each):
# moe/gpt3_moe_mcore_te_ep8_resume_torch_dist_dist_optimizer (12 layers of 8 experts, EP 8, top-2,
# grouped GEMM, allgather dispatcher, bf16, micro-batch 4 × 1,024 tokens, one micro-batch a step)
# takes a median 0.15525 s a step, gpt/gpt3_mcore_te_tp1_pp1_resume_torch_dist_dist_optimizer (the
# same 12 layers, dense) 0.05262 s: (0.15525 − 0.05262) ÷ 12 = 8.55 ms a MoE layer. A MoE model's
# per-step extras (its aux-loss logging, the expert gradient buffers) are inside it; the dense
# layer's own host time is not (the floor is the MoE increment). The measured run had no fused
# router or permutes, no CUDA graphs over the router (Megatron-Bridge's recipes have them), no FP8
# and one expert a rank: none is a plan input, none is scaled. The same pair's GB200 golden values
# (a Grace host) give 6.96 ms; Megatron-Bridge's DGX H100 and DGX B200 have x86 hosts, as the CI's.
MEGATRON_MOE_LAYER_HOST_S: Final = (0.15525 - 0.05262) / 12
# An eager step is paced by the host where the device's work is shorter than the time the host takes to
# issue it: eager PyTorch dispatches each ATen op from Python (forward) or autograd's engine (backward)
# and launches its kernel asynchronously, one after another. Kernels per transformer block per
# micro-batch, counted by tools/measure/kernel_count.py (torch 2.13.0, transformers 5.25.0, peft 0.18.0,
# one LlamaDecoderLayer under a TorchDispatchMode, views and empty allocations left out; the counts do
# not depend on the sizes): (forward, backward, recompute under full checkpointing). SDPA (and any fused
# attention kernel: one op forward, one backward) or eager attention (its matmuls, mask, softmax and
# casts one by one); every weight trained (full fine-tuning) or all frozen (the base of an adapter).
EAGER_BLOCK_KERNELS: Final = {
    ("fused", True): (45, 73, 42),
    ("fused", False): (45, 62, 42),
    ("eager", True): (60, 86, 57),
    ("eager", False): (60, 75, 57),
}
# PEFT's LoRA Linear adds, per adapted linear (huggingface/peft v0.18.0 src/peft/tuners/lora/layer.py
# ``Linear.forward``: ``result = result + lora_B(lora_A(dropout(x))) * scaling``): dropout, two matmuls, the
# scale and the add forward, their gradients and the adapters' weight gradients backward. Measured as
# (LoRA on q, v − frozen) ÷ 2 with SDPA (tools/measure/kernel_count.py: forward 67 − 45, backward 82 − 62,
# recompute 64 − 42); LoRA on all seven linears gives 11.0 / 10.0 / 10.6 a linear.
LORA_LINEAR_KERNELS: Final = (11, 10, 11)
# bitsandbytes' 4-bit linear dequantises its weight in each pass that multiplies by it (forward, the
# recompute, the input gradient): bitsandbytes-foundation/bitsandbytes@aaa71d7e
# bitsandbytes/autograd/_functions.py ``MatMul4Bit.forward`` (``F.dequantize_4bit(B, quant_state)``
# then ``linear``) and ``.backward`` (``matmul(grad_output, F.dequantize_4bit(B, ctx.state).t())``);
# bitsandbytes/functional.py ``dequantize_4bit``: with double quantisation the absmax is dequantised
# first (``dequantize_blockwise``) and its offset added, then the 4-bit kernel: 3 kernels, else 1.
BNB_DEQUANT_KERNELS: Final = {True: 3, False: 1}
# The routed experts' GEMMs as core.training.flops.block_gemms names them ("experts gate|up", "experts down").
_ROUTED_EXPERT_GEMMS: Final = "experts "
# Host seconds to issue one eager kernel: Hugging Face generate's host time per decoder layer per decode step
# (core.runtime.HF_HOST_LAYER_S, the serving fit's HF_HOST_LAYER default, 0.7285 ms: fitted on the Qwen team's serving
# speed tables, QwenLM/Qwen3@a912d239 speed_benchmark.rst and @7a2f61ff speed_benchmark.md, an A100 and an H20 host,
# no training figure) over the ops one such layer issues (tools/measure/kernel_count.py: a SDPA LlamaDecoderLayer
# decoding one token against a cache, no grad: 47): 15.5 µs an op, Python's module and dispatch overhead included.
# Taken for every op of a training step, the backward's too (autograd's C++ engine issues those without Python; so the
# floor may read slow where the backward dominates).
DECODE_LAYER_KERNELS: Final = 47
EAGER_KERNEL_HOST_S: Final = HF_HOST_LAYER_S / DECODE_LAYER_KERNELS


def eager_block_kernels(plan: Plan) -> tuple[float, float, float]:
    """(forward, backward, recompute) kernels one block issues per micro-batch in eager PyTorch: the
    block's own (EAGER_BLOCK_KERNELS), PEFT's LoRA path on each adapted linear of the block, bitsandbytes'
    dequantisation of each 4-bit linear. The counts are transformers' Llama block's; other architectures
    (GPT-2's LayerNorm and GELU, Gemma's extra norms) are taken at it. Methods whose adapter code was not
    counted (prompt learning, LitGPT's adapters) get the frozen block's; IA3, LoHa, LoKr, VeRA, OFT, MiSS, DoRA and
    AdaLoRA add their own (core.training.flops.method_work: DoRA's and AdaLoRA's beyond LoRA's path)."""
    attention = "eager" if plan.attention is _ATTENTION_EAGER else "fused"
    trains = not plan.adapter_based
    forward, backward, recompute = (float(k) for k in EAGER_BLOCK_KERNELS[(attention, trains)])
    # A fused matrix (GPT-2's c_attn, Qwen's, Phi-3's) is one linear; an MoE block's experts count as one MLP:
    # the expert loop's own host time is not counted (a floor below it).
    model = plan.model
    if plan.lora_adapters:
        # a block's adapted linears, the mean over its kinds (an MoE's dense blocks: ModelSpec.adapter_blocks)
        targets, experts = plan.lora.targets, plan.linear_experts
        adapted = model.over_blocks(lambda dense: len(model.adapted_rows(targets, experts, dense))) / model.num_layers
        lf, lb, lr = LORA_LINEAR_KERNELS
        forward, backward, recompute = forward + adapted * lf, backward + adapted * lb, recompute + adapted * lr
    if plan.four_bit_base:
        # the base's 4-bit linears, one per projection (not what an adapter reaches): routed experts among them
        # unless they stay 16-bit (Plan.bnb_16bit_experts: 3-D parameters, read by the experts' own matmuls)
        names, linear = tuple(model.linear_shapes()), not plan.bnb_16bit_experts
        linears = model.over_blocks(lambda dense: len(model.adapted_rows(names, linear, dense))) / model.num_layers
        dequant = linears * BNB_DEQUANT_KERNELS[plan.double_quant]
        forward, backward, recompute = forward + dequant, backward + dequant, recompute + dequant
    extra = method_work(plan)  # a PEFT method's own ops (DoRA's and AdaLoRA's beyond LoRA's path)
    if extra is not None:
        mf, mb = extra.kernels
        forward, backward, recompute = forward + mf, backward + mb, recompute + mf
    return forward, backward, recompute


def eager_host_kernels(plan: Plan, layers: int, backward_layers: int, recomputed: float) -> float:
    """Kernels the host issues for one micro-batch of ``layers`` blocks (``backward_layers`` of them
    run backward, ``recomputed`` of those recompute their forward) under the eager stack; 0 under
    torch.compile (Inductor's fused kernels, CUDA graphs under mode="reduce-overhead") and Megatron's
    fused stack, whose kernels were not counted, and under the lesson's accounting (its FLOPs alone)."""
    if plan.stack is not _STACK_EAGER or plan.accounting is not _ACCOUNTING_DETAILED:
        return 0.0
    forward, backward, recompute = eager_block_kernels(plan)
    return layers * forward + backward_layers * backward + recomputed * recompute


# The ops outside the blocks one micro-batch issues on the rank holding the head (and the embedding): the
# embedding lookup, the final norm, the head's matmul and Hugging Face's loss (the logits upcast to float32,
# the shift, cross-entropy), forward and backward (tools/measure/kernel_count.py --step: a 2-block
# LlamaForCausalLM with labels less its two blocks' ops, torch 2.13.0, transformers 5.25.0): (forward, backward)
# with the embedding, norm and head trained (full fine-tuning), and frozen (an adapter's base: the backward
# only carries the gradient through the head into the blocks). The loss's float32 passes over the logits are
# already timed as bytes (LOSS_BYTES_PER_LOGIT).
EAGER_OUTSIDE_KERNELS: Final = {True: (32, 27), False: (32, 8)}


def eager_outside_kernels(plan: Plan, head: bool) -> float:
    """Kernels one micro-batch issues outside the blocks (EAGER_OUTSIDE_KERNELS) on a rank that holds the
    head under the eager stack's detailed accounting; 0 elsewhere (the embedding's few on a first pipeline
    stage without the head are left out)."""
    if not head or plan.stack is not _STACK_EAGER or plan.accounting is not _ACCOUNTING_DETAILED:
        return 0.0
    forward, backward = EAGER_OUTSIDE_KERNELS[not plan.adapter_based]
    return float(forward + backward)


# How torch launches a foreach (``_foreach_*``) or fused (``_fused_adamw_``, ``_fused_sgd_``) op on CUDA:
# multi_tensor_apply packs the tensor lists' 65,536-element chunks into one kernel until either the blocks
# or the tensors of one launch are full, then launches (pytorch/pytorch@008356ca
# aten/src/ATen/native/cuda/MultiTensorApply.cuh: kChunkSize 65536; with CUDA >= 12.1's 32 KB kernel
# arguments depth_to_max_blocks 2,240 and depth_to_max_tensors 770 / 448 / 336 / 252 / 210 for 1 to 5 lists;
# the 4 KB limit of older builds, torch 2.1's, has 320 blocks and 110 / 64 / 48 / 36 / 30 tensors). Taken at
# three lists (336 tensors) for every op.
MTA_CHUNK: Final = 65536
MTA_BLOCKS: Final = 2240
MTA_TENSORS: Final = 336
# Device ops a step issues (tools/measure/kernel_count.py --step, ops over bulk tensors; the for-loop and
# foreach optimizers keep their step counters on the CPU): AdamW / Adam for-loop 7 a tensor (lerp_, mul_,
# addcmul_, sqrt, div, add_, addcdiv_), foreach the same 7 as foreach ops, fused one ``_fused_adamw_`` and the
# GPU step counters' ``_foreach_add_``; SGD with momentum 3 (mul_, add_, add_), plain SGD 1, fused SGD one.
# bitsandbytes' optimizers launch one kernel per tensor (update_step); Adafactor and schedulefree's optimizers
# (core.training.optimizer.SCHEDULE_FREE: their foreach ops, and train() / eval()'s lerp at each switch) are not
# counted.
STEP_OPS: Final = {
    Optimizer.ADAMW: 7,
    Optimizer.ADAM: 7,
    Optimizer.SGD_MOMENTUM: 3,
    Optimizer.SGD: 1,
    # torch 2.13.0 adagrad.py ``_multi_tensor_adagrad``: _foreach_addcmul_, _foreach_sqrt, _foreach_add_, _foreach_mul,
    # _foreach_addcdiv_ (its for-loop 4, no separate mul: counted at 5); rmsprop.py ``_multi_tensor_rmsprop``
    # (momentum 0, not centered) and ``_single_tensor_rmsprop``: mul_, addcmul_, sqrt, add_, addcdiv_.
    Optimizer.ADAGRAD: 5,
    Optimizer.RMSPROP: 5,
}
# Fused: one kernel per tensor list and, for Adam and Adagrad, the GPU step counters' ``_foreach_add_``.
FUSED_STEP_OPS: Final = {
    Optimizer.ADAMW: 2,
    Optimizer.ADAM: 2,
    Optimizer.SGD_MOMENTUM: 1,
    Optimizer.SGD: 1,
    Optimizer.ADAGRAD: 2,  # adagrad.py ``_fused_adagrad``: torch._fused_adagrad_ (CPU and CUDA)
}
BNB_STEP_OPS: Final = frozenset(
    {
        Optimizer.ADAMW_8BIT,
        Optimizer.PAGED_ADAMW,
        Optimizer.PAGED_ADAMW_8BIT,
        *LION_FAMILY,
        *RMSPROP_BNB_FAMILY,
        *ADEMAMIX_FAMILY,
    }
)
# torchao's low-bit AdamW: one torch.compile'd ``single_param_adam`` per tensor (pytorch/ao 36027d82
# torchao/optim/adam.py ``_AdamBase.step``), counted as one kernel a tensor (its step counter is a CPU tensor).
PER_TENSOR_STEP: Final = BNB_STEP_OPS | frozenset(AO_LOW_BIT)
# AnyPrecisionAdamW's for-loop (meta-llama/llama-cookbook 0e003351 policies/anyprecision_optimizer.py, its step
# counter a CPU tensor): mul_, add_ (m), mul_, addcmul_ (v), sqrt, div, add_, addcdiv_ a tensor; with Kahan the
# addcdiv_ goes to the buffer, then clone, add_, sub_, add_: 12.
ANYPRECISION_STEP_OPS: Final = {Optimizer.ANYPRECISION_ADAMW: 8, Optimizer.ANYPRECISION_ADAMW_KAHAN: 12}
# torch.optim.Muon (torch 2.13.0 torch/optim/_muon.py ``_single_tensor_muon``), per matrix: lerp_, lerp, norm, clamp,
# div_, 5 rounds of mm and two addmm, mul_, add_ (22; one cast more when the gradient is not bf16); its AdamW group
# the plan's implementation's ops over the rest.
MUON_STEP_OPS: Final = 22
# PEFT's LoraFAOptimizer.step (huggingface/peft 5d602fdb src/peft/optimizers/lorafa.py), per (lora_A, lora_B) pair,
# counted under a TorchDispatchMode on CPU (torch 2.13.0, PEFT 0.18.0; 17 ops a pair): A @ A.T, eye, mul, add, pinv,
# the autocast's two bf16 casts, mm, mul, the cast back, then AdamW's mul_, add_, mul_, addcmul_, sqrt, add_,
# addcdiv_; on CUDA one more, eye's ``.to(A.device)`` (made on the CPU). pinv counted as one op (its SVD's
# cuSOLVER kernels are not).
LORA_FA_STEP_OPS: Final = 18
# galore-torch 1.0 galore_torch/adamw.py, per parameter, counted under a TorchDispatchMode on CPU (torch 2.13.0,
# tools/measure/galore_step_check.py's second step, 14 targeted weights and 7 others: 28 mm, 14 mul, 63 add_, 42
# mul_, 21 addcmul_, 21 sqrt, 21 div): mul_, add_ (m), mul_, addcmul_ (v), sqrt, add_ (eps), div, add_ (p) for every
# parameter; a targeted weight's projection and back-projection (2 mm) and ``* self.scale`` (mul) besides. A weight
# decay adds ``p.add_(p, ...)``: one more a tensor. The projector's SVD every update_proj_gap steps: galore_feature.
GALORE_STEP_OPS: Final = 8
GALORE_TARGET_OPS: Final = 3
# clip_grad_norm_ (foreach): ``_foreach_norm`` and ``_foreach_mul_`` over the gradients, and 6 small ops on
# the device (stack, the norms' norm, add, reciprocal, mul, clamp); a GradScaler's unscale_ one foreach op,
# and its update 2 (tools/measure/kernel_count.py --step; torch/amp/grad_scaler.py).
CLIP_FOREACH_OPS: Final = 2
CLIP_SMALL_OPS: Final = 6
UNSCALE_SMALL_OPS: Final = 2


def multi_tensor_launches(elements: float, tensors: int) -> float:
    """Kernel launches of one foreach / fused op over ``tensors`` tensors of ``elements`` in all
    (MTA_*): one whenever a launch's blocks (chunks, each tensor's last one partial) or tensors fill."""
    if tensors <= 0:
        return 0.0
    chunks = elements / MTA_CHUNK + tensors / 2
    return float(max(math.ceil(tensors / MTA_TENSORS), math.ceil(chunks / MTA_BLOCKS)))


def step_host_kernels(plan: Plan, counts: ParamCounts, stage: Stage) -> float:
    """Kernels the host issues for one optimizer step on the rank, under the eager stack's detailed
    accounting (the rule eager_host_kernels' counts follow): the optimizer's (STEP_OPS per tensor in a
    for-loop, per multi_tensor_apply launch in foreach and fused; one op more for an unfused weight decay),
    clip_grad_norm_'s and a GradScaler's.
    0 where the step runs on the host (offload) or its code was not counted (Megatron, DeepSpeed)."""
    if (
        plan.stack is not _STACK_EAGER
        or plan.accounting is not _ACCOUNTING_DETAILED
        or plan.parallel.offload is not _OFFLOAD_NONE
        or not _torch_optim(plan)
    ):
        return 0.0
    elements = rank_trainable(plan, counts, stage)
    tensors = trainable_tensors(plan)
    launches = multi_tensor_launches(elements, tensors)
    ops = STEP_OPS.get(plan.optimizer, 0)
    if plan.optimizer is _OPTIMIZER_MUON:
        return _muon_kernels(plan, counts, elements, tensors)
    if plan.optimizer is _OPTIMIZER_GALORE_ADAMW:
        return _galore_kernels(plan, tensors, launches)
    if plan.optimizer in PER_TENSOR_STEP:
        kernels = float(tensors)
    elif plan.optimizer is _OPTIMIZER_LORA_FA:  # one pair a trained lora_B
        kernels = float(LORA_FA_STEP_OPS * tensors)
    elif plan.optimizer in ANYPRECISION_STEP_OPS:
        kernels = float(ANYPRECISION_STEP_OPS[plan.optimizer] * tensors)
    elif plan.optimizer_impl is _OPTIMIZER_IMPL_FORLOOP:
        kernels = float(ops * tensors)
    elif plan.optimizer_impl is _OPTIMIZER_IMPL_FUSED:
        kernels = FUSED_STEP_OPS.get(plan.optimizer, 0) * launches
    else:
        kernels = ops * launches
    if decays_unfused(plan):  # one op more: a foreach op's launches, or one a tensor in a for-loop
        kernels += float(tensors) if _one_at_a_time(plan) else launches
    if plan.grad_clip:
        kernels += CLIP_FOREACH_OPS * launches + CLIP_SMALL_OPS
    if runs_grad_scaler(plan):
        kernels += launches + UNSCALE_SMALL_OPS
    return kernels


def _galore_kernels(plan: Plan, tensors: int, launches: float) -> float:
    """GaLore AdamW's own for-loop: GALORE_STEP_OPS a tensor (one more with a weight decay), GALORE_TARGET_OPS more a
    targeted weight; clipping and a GradScaler as step_host_kernels counts them."""
    targets = muon_layers(plan) * len(muon_matrices(plan))
    kernels = float((GALORE_STEP_OPS + (1 if plan.weight_decay > 0 else 0)) * tensors + GALORE_TARGET_OPS * targets)
    if plan.grad_clip:
        kernels += CLIP_FOREACH_OPS * launches + CLIP_SMALL_OPS
    if runs_grad_scaler(plan):
        kernels += launches + UNSCALE_SMALL_OPS
    return kernels


def _muon_kernels(plan: Plan, counts: ParamCounts, elements: float, tensors: int) -> float:
    """Muon's step: MUON_STEP_OPS a matrix (one more cast off a non-bf16 gradient), then torch's AdamW over the rest
    in the plan's implementation (STEP_OPS / FUSED_STEP_OPS, as step_host_kernels counts it); clipping and a
    GradScaler as there."""
    matrices = muon_layers(plan) * len(muon_matrices(plan))
    cast = 0 if dtypes_for(plan).grad == MUON_X_BYTES else 1
    kernels = float((MUON_STEP_OPS + cast) * matrices)
    rest_tensors = max(0, tensors - matrices)
    rest_launches = multi_tensor_launches(max(0.0, elements - muon_elements(plan)), rest_tensors)
    if plan.optimizer_impl is OptimizerImpl.FORLOOP:
        kernels += STEP_OPS[Optimizer.ADAMW] * rest_tensors
    elif plan.optimizer_impl is OptimizerImpl.FUSED:
        kernels += FUSED_STEP_OPS[Optimizer.ADAMW] * rest_launches
    else:
        kernels += STEP_OPS[Optimizer.ADAMW] * rest_launches
    launches = multi_tensor_launches(elements, tensors)
    if plan.grad_clip:
        kernels += CLIP_FOREACH_OPS * launches + CLIP_SMALL_OPS
    if runs_grad_scaler(plan):
        kernels += launches + UNSCALE_SMALL_OPS
    return kernels


def method_step_kernels(plan: Plan, layers: int) -> float:
    """Ops the host issues once an optimizer step for ``layers`` blocks under the eager stack (AdaLoRA's rank
    allocator: core.training.flops.ADALORA_ALLOCATOR_KERNELS); 0 elsewhere, as eager_host_kernels."""
    work = method_work(plan)
    if work is None or plan.stack is not Stack.EAGER:
        return 0.0
    return work.step_kernels * layers


# A custom card has no bandwidth figure: the A100's bytes per FLOP (2,039 GB/s for 312
# dense 16-bit TFLOP/s, NVIDIA A100 datasheet) is assumed.
BYTES_PER_FLOP_ASSUMED: Final = 2039e9 / 312e12


@fills_fields
@dataclass(frozen=True)
class Work:
    """One optimizer step's compute on the rank that sets its pace, as seconds at the card's
    ideal rates, by the kind of work (keys of :attr:`features`)."""

    features: Mapping[str, float]  # feature name -> seconds at the peak or at the bandwidth
    hardware_flops: float  # FLOPs the rank runs per step (causal attention, recompute)
    forward_share: float  # the forward's share of the step's compute (what FSDP's gathers hide under)
    gemm_peak_tflops: float  # the matmuls' peak (fp8 for float8 linears)
    generation: Generation
    gemm_kind: str
    # Seconds per step the host takes to issue the pacing rank's work: its eager kernels
    # (eager_host_kernels × EAGER_KERNEL_HOST_S) and Megatron-Core's MoE layers (moe_host_floor); the
    # compute takes no less (core.training.compute). 0 where nothing is counted.
    host_floor: float = 0.0
    host_kernels: float = 0.0  # of which: eager kernels per step (micro-batches × per micro-batch)
    # Kernels the host issues for the optimizer step (step_host_kernels): the step takes no less than
    # their issue time, EAGER_KERNEL_HOST_S each (core.training.compute). 0 where nothing is counted.
    optimizer_kernels: float = 0.0
    # The matmul kernels behind the gemm features and "gemm_bytes": (the compute feature, its seconds at the peak,
    # its operand bytes' seconds at the bandwidth), each before its coefficient.
    kernels: tuple[tuple[str, float, float], ...] = ()

    @property
    def optimizer_host_seconds(self) -> float:
        """Seconds the host takes to issue the optimizer step's kernels."""
        return self.optimizer_kernels * EAGER_KERNEL_HOST_S


def _bandwidth(gpu: GpuSpec, peak_tflops: float) -> float:
    """Bytes per second of the card's memory (assumed from its peak for a custom card)."""
    if gpu.memory_bandwidth_gb_s > 0:
        return gpu.memory_bandwidth_gb_s * 1e9
    return max(peak_tflops, 1e-3) * 1e12 * BYTES_PER_FLOP_ASSUMED


@fills_fields
@dataclass(frozen=True)
class _Rank:
    """What the pacing rank's share of the work is computed from."""

    plan: Plan
    tokens: float  # tokens of one micro-batch on one context-parallel rank
    tp: int
    layers: int  # blocks on the rank
    backward_layers: int  # of which the backward runs through
    head: bool  # the rank holds the output head and the loss
    fp8: bool  # the linears run in float8
    sms: int | None = None  # the card's SMs (GpuSpec.sm_count): a wave of tiles; None: tiles only
    mxfp8: bool = False  # they run Transformer Engine's MXFP8 recipe (a card that has it)


def _split(gemm_k: int, gemm_n: int, split: str, tp: int) -> tuple[float, float]:
    if split == "column":
        return float(gemm_k), gemm_n / tp
    if split == "row":
        return gemm_k / tp, float(gemm_n)
    return float(gemm_k), float(gemm_n)


def _rows(rank: _Rank, gemm: Gemm) -> tuple[float, float]:
    """Tokens each copy of ``gemm`` multiplies on the rank, and its copies. Under expert
    parallel a rank runs E ÷ EP experts on the tokens all EP ranks route to them, EP times
    the rows each (balanced routing, dropless: Megatron-Core's alltoall dispatcher gathers
    them, NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/moe/token_dispatcher.py): the
    same FLOPs in larger, fewer matmuls. The pacing rank is the busiest: its experts' rows times
    ``expert_load`` (the plan's imbalance, capped or padded by a capacity factor)."""
    ep = rank.plan.parallel.expert_parallel
    if gemm.count > 1:
        load = expert_load(rank.plan)
        if ep > 1:
            return rank.tokens * gemm.share * ep * load, gemm.count / ep * gemm.layers
        return rank.tokens * gemm.share * load, gemm.count * gemm.layers
    return rank.tokens * gemm.share, gemm.count * gemm.layers


def _recomputed_blocks(plan: Plan, rank: _Rank) -> float:
    """Blocks (of the rank's) whose forward the backward runs again, as a share of each."""
    if not plan.checkpointing or plan.checkpoint_policy is _CHECKPOINT_POLICY_ATTENTION:
        return 0.0
    if plan.checkpoint_policy is _CHECKPOINT_POLICY_OP:
        return rank.backward_layers * recomputed_share(plan)
    return rank.backward_layers * min(1.0, plan.checkpointed_blocks(plan.model.num_layers) / plan.model.num_layers)


# Whether step_work keeps each matmul kernel (Work.kernels). Nothing in the app reads them, and recording costs
# about 10 % of an estimate's instructions, so only benchmarks/realgpu/gemm_roofline.py (the roofline experiment of
# docs/TRAINING_TIME.md) and its tests switch it on.
RECORD_KERNELS = False


@dataclass
class _Tally:
    flops: float = 0.0  # matmul FLOPs
    bytes: float = 0.0  # matmul operand bytes
    forward_flops: float = 0.0
    # The FLOPs the tensor cores spend, the tiles' and waves' empty slots included
    # (core.training.gemm_shape): what the matmuls' time at the peak is counted from.
    padded: float = 0.0
    # Of the padded FLOPs, in a float8 plan: the 16-bit ones (the output head, which torchtitan's
    # filter_fqns keeps in bf16, and LoRA adapters), and the float8 rowwise linears too small to
    # gain (ROWWISE_SMALL_SLOWDOWN); both at the 16-bit peak.
    wide_flops: float = 0.0
    slow_flops: float = 0.0
    # Of the padded FLOPs: a PEFT method's adapter matmuls that run in float32 (float32 adapters on a 16-bit base:
    # LoHa's / LoKr's delta applied, OFT's rotation, VeRA's projections), at the card's float32 peak.
    fp32_adapter: float = 0.0
    # Each kernel (one pass of one matmul, its copies together): (its kind, padded FLOPs, operand bytes); the kind
    # is the rate it runs at: "main" (the plan's matmul kind), "wide" / "slow" (a float8 plan's 16-bit ones), "fp32".
    kernels: list[tuple[str, float, float]] = field(default_factory=list)


def _matmul(
    tally: _Tally,
    m: float,
    k: float,
    n: float,
    passes: tuple[float, float, float],
    fp8: bool,
    sms: int | None,
    forward_layers: float,
    kind: str = "main",
) -> float:
    """A linear's matmuls of (m × k) by (k × n): ``passes`` forward (recompute included), input-
    and weight-gradient ones; operands in 1 byte under float8, outputs in 2. Each pass's output is
    tile- and wave-quantized (forward m × n, input gradient m × k, weight gradient k × n).
    ``forward_layers`` counts the forward's own share (what FSDP's gathers hide under). Returns the
    padded FLOPs added."""
    forward, dgrad, wgrad = passes
    flops = 2.0 * m * k * n
    tally.flops += flops * (forward + dgrad + wgrad)
    tally.forward_flops += flops * forward_layers
    padded = flops * (forward / shape_efficiency(m, n, sms) + dgrad / shape_efficiency(m, k, sms))
    if wgrad:
        padded += flops * wgrad / shape_efficiency(k, n, sms)
    tally.padded += padded
    inputs = 1.0 if fp8 else 2.0
    moved = (m * k + k * n) * inputs + m * n * 2.0
    tally.bytes += moved * (forward + dgrad + wgrad)
    for copies, (rows, cols) in zip((forward, dgrad, wgrad), ((m, n), (m, k), (k, n)), strict=True):
        if copies and RECORD_KERNELS:
            tally.kernels.append((kind, flops * copies / shape_efficiency(rows, cols, sms), moved * copies))
    return padded


def _matmuls(rank: _Rank) -> _Tally:
    """The rank's matmuls of one micro-batch: the blocks' forward, input- and weight-gradient
    passes and recompute, and the output head on the last stage."""
    plan, tally = rank.plan, _Tally()
    scale = plan.model.shape_scale  # a typed P's share; a hybrid's matmuls are its exact widths
    again = _recomputed_blocks(plan, rank)
    for gemm in block_gemms(plan):
        k, n = _split(gemm.k, gemm.n, gemm.split, rank.tp)
        m, c = _rows(rank, gemm)
        lora = gemm.name.endswith(ADAPTER_GEMMS)
        passes = ((rank.layers + again) * c, rank.backward_layers * c, rank.backward_layers * c if gemm.trains else 0.0)
        slow = rank.fp8 and not lora and _rowwise_slow(rank, gemm, k, n)
        fp8 = rank.fp8 and not lora and not slow and not megatron_router(rank.plan, gemm)
        if fp8 and passes[2] and plan.float8 is _FLOAT8_ROWWISE_GW_HP:
            # torchao's rowwise_with_gw_hp: the weight gradient's matmul takes the 16-bit input and
            # output gradient (cast_config_*_for_grad_weight ScalingType.DISABLED, torchao 0.13.0
            # torchao/float8/config.py from_recipe_name): at the 16-bit rate, with 2-byte operands
            tally.wide_flops += _matmul(tally, m, k * scale, n, (0.0, 0.0, passes[2]), False, rank.sms, 0.0, "wide")
            passes = (passes[0], passes[1], 0.0)
        fp32 = lora and float32_adapter_matmul(plan, gemm)
        kind = "fp32" if fp32 else "slow" if slow else "wide" if rank.fp8 and not fp8 else "main"
        padded = _matmul(tally, m, k * (1.0 if lora else scale), n, passes, fp8, rank.sms, rank.layers, kind)
        if fp32:
            tally.fp32_adapter += padded
        elif slow:
            tally.slow_flops += padded
        elif rank.fp8 and not fp8:
            tally.wide_flops += padded
    if rank.head:
        model = plan.model
        head = (1.0, 1.0, 1.0 if head_trains(plan) else 0.0)
        kind = "wide" if rank.fp8 else "main"
        padded = _matmul(
            tally, rank.tokens, model.hidden_size, model.vocab_size / rank.tp, head, False, rank.sms, 1, kind
        )
        # A LoRA on the head (core.training.flops.head_adapter_weight): A (d → r) replicated, B (r → V)
        # split with the head's columns; both train.
        adapter = model.head_adapter_shape(plan.lora.targets) if plan.lora_adapters else None
        if adapter is not None:
            r = plan.lora.rank
            padded += _matmul(tally, rank.tokens, adapter[0], r, (1.0, 1.0, 1.0), False, rank.sms, 1, kind)
            padded += _matmul(tally, rank.tokens, r, adapter[1] / rank.tp, (1.0, 1.0, 1.0), False, rank.sms, 1, kind)
        if rank.fp8:
            tally.wide_flops += padded
    _dense_builds(rank, tally)
    return tally


def _dense_builds(rank: _Rank, tally: _Tally) -> None:
    """A PEFT method's weight builds whose matmuls run in the block's compute dtype (core.training.flops.MethodWork
    ``builds_as_blocks``: BOFT's three in × in × in matmuls a target, forward, and one gradient each backward,
    huggingface/peft 51c2ff66 src/peft/tuners/boft/layer.py ``Linear.forward``), with the block's matmuls: each an
    in × in × in matmul, tile- and wave-quantized as they are."""
    work = method_work(rank.plan)
    if work is None or not work.builds_as_blocks:
        return
    again = _recomputed_blocks(rank.plan, rank)
    model = rank.plan.model
    matrices = [  # every kind of block's (ModelSpec.adapter_blocks), each as its share of the blocks
        (fan_in, copies * layers / model.num_layers)
        for layers, dense in model.adapter_blocks()
        for fan_in, _, copies in model.adapted_matrices(rank.plan.lora.targets, rank.plan.linear_experts, dense)
    ]
    for fan_in, copies in matrices:
        count, k = 3.0 * copies, float(fan_in)
        passes = ((rank.layers + again) * count, rank.backward_layers * count, 0.0)
        _matmul(tally, k, k, k, passes, False, rank.sms, rank.layers * count)


# The adapter matmuls that run in the adapter's dtype: PEFT casts the input to it (``_cast_input_dtype``: LoHa's and
# LoKr's F.linear(x, delta), OFT's einsum, VeRA's F.linear(x, vera_A)): huggingface/peft 51c2ff66 src/peft/tuners/
# loha/layer.py, lokr/layer.py ``_get_delta_activations``, oft/layer.py ``OFTRotationModule.forward``, vera/layer.py
# ``Linear.forward``; MiSS's block sum @ miss_block, miss/layer.py ``MissLinear.forward``). LoRA's A and B do too but
# stay at the compute dtype's rate (what the coefficients were fitted with; at r 32 they are about 1 % of a step's
# matmuls).
# BOFT's rotation (branch h80boft) runs in the input's dtype: ``x @ boft_rotation``, the rotation cast to it.
_FLOAT32_ADAPTER_GEMMS: Final = tuple(g for g in ADAPTER_GEMMS[2:] if g != BOFT_ROTATION)


def float32_adapter_matmul(plan: Plan, gemm: Gemm) -> bool:
    """``gemm`` is a non-LoRA adapter matmul run in float32 (float32 adapters on a 16-bit compute dtype)."""
    dt = dtypes_for(plan)
    return gemm.name.endswith(_FLOAT32_ADAPTER_GEMMS) and dt.adapter == 4 and dt.compute != 4


def method_features(
    rank: _Rank, mm: _Tally, micro: int, family: Generation, gpu: GpuSpec, bandwidth: float
) -> dict[str, float]:
    """A PEFT method's work beyond the block's (core.training.flops.method_work) and its float32 adapter matmuls
    (``mm``: the rank's matmul tally), as seconds per step: the float32 matmuls at the card's float32 peak
    (``adapter_fp32:``, the float32 matmul coefficient) and the memory-bound passes at its bandwidth
    (``adapter_bytes:``, the stack's elementwise one)."""
    work = method_work(rank.plan)
    fp32 = mm.fp32_adapter  # the rank's matmuls (_matmuls), already tallied
    if work is None and not fp32:
        return {}
    out: dict[str, float] = {}
    again = _recomputed_blocks(rank.plan, rank)
    if work is not None:
        fp32 += method_build_flops(rank)
        moved = work.bytes_forward * (rank.layers + again) + work.bytes_backward * rank.backward_layers
        out[f"adapter_bytes:{rank.plan.stack.value}"] = micro * moved / bandwidth
    if not fp32 and work is not None and work.builds_as_blocks:  # BOFT: no float32 matmul (_dense_builds)
        return out
    peak = gpu.peak_tflops("fp32")
    out[f"adapter_fp32:{family.value}"] = micro * fp32 / (peak * 1e12) if peak else math.inf
    return out


def method_build_flops(rank: _Rank) -> float:
    """A micro-batch's FLOPs of the PEFT method's float32 weight builds on the rank (core.training.flops.method_work);
    builds in the block's compute dtype (BOFT's) are in the matmul tally (_dense_builds)."""
    work = method_work(rank.plan)
    if work is None or work.builds_as_blocks:
        return 0.0
    return work.build_forward * (rank.layers + _recomputed_blocks(rank.plan, rank)) + work.build_backward * (
        rank.backward_layers
    )


def megatron_router(plan: Plan, gemm: Gemm) -> bool:
    """Megatron-Core's MoE router under Transformer Engine float8: its gate is a plain parameter
    multiplied by ``router_gating_linear`` (NVIDIA/Megatron-LM 55ac7082 megatron/core/transformer/
    moe/router.py ``TopKRouter.gating``; moe_utils.py ``RouterGatingLinearFunction``: TE's
    ``general_gemm`` on the 16-bit input and weight, output in ``moe_router_dtype``, the input's
    dtype unless set — Qwen3-30B-A3B's provider leaves it, Megatron-Bridge v0.3.1 qwen_provider.py,
    only Qwen3-Next sets "fp32"), not a TE linear under ``fp8_autocast``: no fp8 GEMM, no cast."""
    return gemm.name == "router" and plan.stack is _STACK_MEGATRON and plan.float8 in TE_FLOAT8


# torchao's recipes whose forward and input-gradient matmuls are rowwise-scaled (_rowwise_slow).
_ROWWISE_RECIPES: Final = frozenset({Float8.ROWWISE, Float8.ROWWISE_GW_HP})


def _rowwise_slow(rank: _Rank, gemm: Gemm, k: float, n: float) -> bool:
    """A float8 rowwise linear whose local shape torchao's rowwise filter would leave in bf16
    (a gated MLP's gate and up are two nn.Linear of half the pair's width each)."""
    width = n / 2 if "gate|up" in gemm.name else n
    return rank.fp8 and rank.plan.float8 in _ROWWISE_RECIPES and rowwise_too_small(k, width)


@last_answer
def fused_attention(plan: Plan) -> bool:
    """A fused kernel (flash, memory-efficient) skips the masked half of causal attention and
    never writes the scores; eager attention (and SDPA's math fallback) computes every score
    and moves the B·H·S² matrix through memory (:func:`core.training.attention.sdpa_kernel`)."""
    return sdpa_kernel(plan) in (_KERNEL_FLASH, _KERNEL_EFFICIENT)


def _attention_flops(rank: _Rank) -> tuple[float, float]:
    """Attention FLOPs of one micro-batch on the rank, all passes and forward: the causal
    count for a fused kernel, every score for eager attention. A hybrid's attention runs in its
    attention layers only, and its recurrent layers' convolution and chunked scan
    (core.training.mixer_flops, on the path the plan runs) join this term: the scan's products are
    small batched matmuls like attention's, timed at the same rate."""
    plan = rank.plan
    model = plan.model
    keys = attended_keys(model, plan.workload.seq_len, fused_attention(plan))
    per_token = 4.0 * keys * model.q_width
    mixer = mixer_flops(model, plan.mamba_kernels)
    if mixer is not None:
        recurrent = (mixer.conv + mixer.scan) * model.recurrent_layers
        per_token = (per_token * model.kv_layers + recurrent) / model.num_layers
    forward = rank.tokens * per_token / rank.tp
    recompute = _attention_recompute(rank)
    return forward * (rank.layers + 2 * rank.backward_layers + recompute), forward * rank.layers


def _attention_padding(rank: _Rank, sms: int | None) -> tuple[float, float]:
    """Eager attention's tensor-core FLOPs over its counted ones, forward and backward: it runs
    as cuBLAS batched GEMMs (Megatron-DeepSpeed's CoreAttention: ``torch.baddbmm`` for QKᵀ and
    ``torch.bmm`` for PV, one [sq × hn] · [hn × sk] matrix per micro-batch sequence and local
    head, bigscience-workshop/Megatron-DeepSpeed@8387ae1 megatron/model/transformer.py;
    transformers' eager_attention_forward alike), each timed in whole tiles with the batch's
    matrices filling the waves (gemm_shape.shape_efficiency). Forward: QKᵀ's output is sq × sk,
    PV's sq × hn; backward: dP = dO·Vᵀ sq × sk, dV = Pᵀ·dO sk × hn, dQ = dS·K sq × hn,
    dK = dSᵀ·Q sk × hn, each of the same FLOPs. A head dimension off the tile (BigScience's
    prequel: 14,400 ÷ 96 heads = 150, two tiles of 128 for 150 columns) pays for the whole last
    tile. A fused kernel (FlashAttention, cuDNN) has its own tiling, and its backward recomputes
    the scores: (1.0, FUSED_BACKWARD_OVER_COUNTED)."""
    plan = rank.plan
    if fused_attention(plan):
        return 1.0, FUSED_BACKWARD_OVER_COUNTED
    model = plan.model
    micro = plan.workload.micro_batch
    queries = rank.tokens / micro
    keys = float(plan.workload.seq_len)  # the bmm multiplies every key; the mask is added after
    batch = micro * max(1, model.num_heads // rank.tp)
    head = float(model.head_dim)

    def waste(m: float, n: float) -> float:
        return 1.0 / shape_efficiency(m, n, sms, batch)

    scores, values = waste(queries, keys), waste(queries, head)
    forward = (scores + values) / 2
    backward = (scores + 2 * waste(keys, head) + values) / 4
    return forward, backward


def _attention_recompute(rank: _Rank) -> float:
    """Blocks whose attention the backward runs again: every one under full checkpointing,
    none under torchtitan's op SAC (it saves the attention kernel's output), the checkpointed
    share under layer SAC."""
    plan = rank.plan
    if not plan.checkpointing or plan.checkpoint_policy is _CHECKPOINT_POLICY_OP:
        return 0.0
    if plan.checkpoint_policy is _CHECKPOINT_POLICY_LAYER:
        return _recomputed_blocks(plan, rank)
    return float(rank.backward_layers)


def ring_attention_bytes(rank: _Rank) -> float:
    """Bytes the ring attention moves beside its attention kernels for one micro-batch on the
    rank: PyTorch's (the RING_* constants), or under Megatron Transformer Engine's (the TE_RING_*
    ones, :func:`_te_ring_bytes`); 0 without context parallelism."""
    plan = rank.plan
    if plan.stack is _STACK_MEGATRON and plan.parallel.context_parallel > 1:
        return _te_ring_bytes(rank)
    if torch_ring_rotate(plan) is None:  # no PyTorch ring (CP 1)
        return 0.0
    cp = plan.parallel.context_parallel
    elements = rank.tokens * plan.model.q_width / rank.tp
    forward = RING_FORWARD_ONCE + RING_FORWARD_PER_STEP * (cp - 1)
    backward = RING_BACKWARD_ONCE + RING_BACKWARD_PER_STEP * (cp - 1)
    return elements * (forward * (rank.layers + _attention_recompute(rank)) + backward * rank.backward_layers)


def _te_ring_bytes(rank: _Rank) -> float:
    """Transformer Engine's ring merges and copies (TE_RING_*) for one micro-batch on the rank, in
    the attention layers only: per local query element and per element of one K / V tensor (the
    rank's K/V heads; one whole head where TP splits fewer of them than it has ranks)."""
    plan = rank.plan
    model = plan.model
    cp = plan.parallel.context_parallel
    q = rank.tokens * model.q_width / rank.tp
    kv = rank.tokens * model.head_dim * max(1.0, model.num_kv_heads / rank.tp)

    def pass_bytes(once: tuple[float, float], step: tuple[float, float]) -> float:
        return q * (once[0] + step[0] * (cp - 1)) + kv * (once[1] + step[1] * (cp - 1))

    forward = pass_bytes(TE_RING_FORWARD_ONCE, TE_RING_FORWARD_PER_STEP)
    backward = pass_bytes(TE_RING_BACKWARD_ONCE, TE_RING_BACKWARD_PER_STEP)
    layers = forward * (rank.layers + _attention_recompute(rank)) + backward * rank.backward_layers
    return layers * model.kv_layers / model.num_layers


def moe_permute_bytes(rank: _Rank) -> float:
    """Bytes a mixture of experts' token permutes move for one micro-batch on the rank (the
    MOE_* rows above, in the compute dtype); 0 for a dense model. N is the tokens the MoE layer
    receives: ÷ CP, and ÷ TP with sequence parallel (layout.dispatched_copies' N); its N·k copies
    are what the rank's experts receive too (balanced routing). Under Megatron with expert parallel
    the dispatcher decides (parallel.moe_dispatcher): alltoall adds its sort by local expert;
    allgather permutes from the EP group's gathered tokens (``MoEAllGatherTokenDispatcher``);
    DeepEP's fused dispatch sends a token once to each rank holding one of its experts, and the rank
    permutes the tokens it received (``_DeepepManager.get_permuted_hidden_states_by_experts``:
    ``permute(..., fused=self.permute_fusion)``); HybridEP permutes inside its dispatch and combine
    kernels ("permute tokens for experts in single step"; its get_permuted_hidden_states_by_experts
    returns the tokens as they arrived): no permute kernel of its own (NVIDIA/Megatron-LM 55ac7082,
    megatron/core/transformer/moe/token_dispatcher.py). torchtitan's scatter-add MoE layer (plan setting moe_layer)
    off Megatron moves its copies six times a pass (TITAN_SCATTER_*)."""
    plan = rank.plan
    model, par = plan.model, plan.parallel
    if model.num_experts <= 1:
        return 0.0
    tokens = rank.tokens / (rank.tp if par.sequence_parallel else 1)
    copies = tokens * model.experts_per_token
    ep = par.expert_parallel
    # Under expert parallel the plan's Megatron dispatcher decides; elsewhere (no Megatron
    # dispatcher, or EP 1) the permute pair alone.
    dispatcher = megatron_dispatcher(plan) if ep > 1 else None
    if dispatcher is _MOE_DISPATCHER_HYBRIDEP:
        return 0.0
    # The busiest rank receives, sorts and computes expert_load × the mean copies; padded to capacity, every
    # permute writes the capacity's rows (token_dispatcher.py preprocess: num_out_tokens = capacity × E).
    load = expert_load(plan)
    if dispatcher is _MOE_DISPATCHER_DEEPEP:
        tokens = received_tokens(tokens, model.num_experts, model.experts_per_token, ep) * load
    if dispatcher is _MOE_DISPATCHER_ALLGATHER:
        # MoEAllGatherTokenDispatcher permutes from the gathered tokens of the EP group (N·EP rows
        # read) the copies its local experts take (N·k written, balanced), and back: no sort.
        tokens *= ep
    token_rows, copy_rows = MOE_PERMUTE_TOKEN_ROWS, MOE_PERMUTE_COPY_ROWS
    if plan.moe_layer is _MOE_LAYER_TITAN_SCATTER and plan.stack is not _STACK_MEGATRON:
        token_rows, copy_rows = TITAN_SCATTER_TOKEN_ROWS, TITAN_SCATTER_COPY_ROWS
    rows = token_rows * tokens + copy_rows * copies * (load if capacity_padded(plan) else 1.0)
    if dispatcher is _MOE_DISPATCHER_ALLTOALL and model.num_experts // max(1, ep) > 1:
        rows += MOE_SORT_COPY_ROWS * copies * load
    passes = rank.layers + _recomputed_blocks(plan, rank) + rank.backward_layers
    return rows * model.hidden_size * dtypes_for(plan).compute * passes


def _elementwise_bytes(rank: _Rank) -> float:
    """Bytes eager PyTorch moves around the matmuls for one micro-batch on the rank."""
    plan = rank.plan
    model, dt = plan.model, dtypes_for(plan)
    d, q, kv = model.hidden_size, model.q_width, model.kv_width
    mlp = model.intermediate_size * (model.experts_per_token * expert_load(plan) if model.num_experts > 1 else 1)
    mlp += model.shared_expert_size
    sp = rank.tp if plan.parallel.sequence_parallel else 1
    fused = plan.stack is _STACK_COMPILE
    norm, residual = (COMPILE_NORM_PASSES, COMPILE_RESIDUAL_PASSES) if fused else (NORM_PASSES, RESIDUAL_PASSES)
    if plan.stack is _STACK_EAGER and model.norm == "layernorm":
        norm = LAYERNORM_PASSES
    norms = (model.norms_per_layer * norm * d + 2 * residual * d) / sp
    # Rotary embeddings only where the model has them: a learned position table (GPT-2's wpe,
    # MPT's learned_pos_emb) is added once at the input and ALiBi (BLOOM) biases the scores
    # inside attention; neither rotates q or k.
    rope = 0.0 if model.learned_positions or model.alibi else (COMPILE_ROPE_PASSES if fused else ROPE_PASSES)
    # The head transposes are copies only around eager attention (its batched GEMMs' output is
    # transposed back with .contiguous()): a fused kernel takes and returns strided views
    # (TRANSPOSE_PASSES, above).
    transposes = 0.0 if fused_attention(plan) else TRANSPOSE_PASSES
    inner = rope * (q + kv) + transposes * (2 * q + 2 * kv)
    if fused:
        inner += (COMPILE_GATED_PASSES if model.gated_mlp else COMPILE_ACTIVATION_PASSES) * mlp
    else:
        inner += ACTIVATION_PASSES * mlp * (1 if model.gated_mlp else 0.6)
    per_layer = (norms + inner / rank.tp) * dt.compute * rank.tokens
    again = _recomputed_blocks(plan, rank)
    total = per_layer * (rank.layers + BACKWARD_OVER_FORWARD * rank.backward_layers + again)
    if rank.head:
        total += rank.tokens * model.vocab_size / rank.tp * LOSS_BYTES_PER_LOGIT
    if not fused_attention(plan):
        keys = attended_keys(model, plan.workload.seq_len, causal=False)
        scores = rank.tokens * keys * model.num_heads / rank.tp  # one micro-batch's B·H·S² (÷ CP: its queries)
        scores *= model.kv_layers / model.num_layers  # a hybrid's attention layers only
        total += scores * SCORE_BYTES * (rank.layers + BACKWARD_OVER_FORWARD * rank.backward_layers + again)
        if model.alibi:
            total += scores * ALIBI_SCORE_BYTES * (rank.layers + again)
    return total + _float8_cast_bytes(rank) + _dequant_bytes(rank)


def _float8_cast_bytes(rank: _Rank) -> float:
    """torchao Float8Linear (pytorch/ao 36027d8 torchao/float8/float8_linear.py,
    ``matmul_with_hp_or_float8_args``): the input and the weight cast in the forward; in the
    backward the output gradient twice (for each of its matmuls), the weight and the input
    again (the forward saved them in high precision). Under rowwise_with_gw_hp the weight
    gradient's operands are not cast: the backward casts the output gradient and the weight once
    each. torchao's MXLinear (torchao 0.13.0 torchao/prototype/mx_formats/mx_linear.py ``mx_mm``)
    casts the same tensors as the tensorwise recipe, at MX_CAST_BYTES an element."""
    if not rank.fp8 or rank.plan.float8 in TE_FLOAT8:
        return 0.0  # Transformer Engine's casts: te_cast_bytes
    plan, total = rank.plan, 0.0
    gw_hp = plan.float8 is _FLOAT8_ROWWISE_GW_HP
    per_element = MX_CAST_BYTES if plan.float8 is _FLOAT8_MXFP8 else FLOAT8_CAST_BYTES
    for gemm in block_gemms(plan):
        if gemm.name.endswith(ADAPTER_GEMMS):
            continue
        k, n = _split(gemm.k, gemm.n, gemm.split, rank.tp)
        if _rowwise_slow(rank, gemm, k, n):
            continue  # its casts are in the measured slowdown
        m, c = _rows(rank, gemm)
        forward = (m * k + k * n) * c
        backward = (m * n + k * n if gw_hp else 2 * m * n + k * n + m * k) * c
        total += (forward * rank.layers + backward * rank.backward_layers) * per_element
    return total


def te_cast_bytes(rank: _Rank) -> float:
    """Transformer Engine's casts for one micro-batch on the rank, at its recipe's bytes an element
    (TE_CAST_BYTES delayed, TE_CURRENT_CAST_BYTES current scaling, TE_MXFP8_CAST_BYTES MXFP8): each
    float8 linear's input and weight in the forward, its output gradient in the backward. Under
    Megatron-Core each weight is cast once a step, not once a micro-batch (te_weight_casts_per_micro)."""
    if not rank.fp8 or rank.plan.float8 not in TE_FLOAT8:
        return 0.0
    if rank.mxfp8:
        per_element = TE_MXFP8_CAST_BYTES
    elif rank.plan.float8 is _FLOAT8_TE_CURRENT:
        per_element = TE_CURRENT_CAST_BYTES
    else:
        per_element = TE_CAST_BYTES
    weights = te_weight_casts_per_micro(rank.plan)
    total = 0.0
    for gemm in block_gemms(rank.plan):
        if gemm.name.endswith(ADAPTER_GEMMS) or megatron_router(rank.plan, gemm):
            continue
        k, n = _split(gemm.k, gemm.n, gemm.split, rank.tp)
        m, c = _rows(rank, gemm)
        total += ((m * k + k * n * weights) * rank.layers + m * n * rank.backward_layers) * c
    return total * per_element


def te_weight_casts_per_micro(plan: Plan) -> float:
    """How often a micro-batch casts each Transformer Engine weight to fp8. Megatron-Core's TE linears
    pass ``is_first_microbatch`` (NVIDIA/Megatron-LM d98e8a64 megatron/core/extensions/
    transformer_engine.py ``TELinear.forward``, set once a step by pipeline_parallel/schedules.py
    ``forward_step`` through ``set_is_first_microbatch``), and TE then casts the weight on the step's
    first micro-batch only and reuses the cached copy on the others (NVIDIA/TransformerEngine v2.12
    pytorch/module/linear.py ``_Linear.forward``: ``update_workspace = is_first_microbatch is None or
    is_first_microbatch``, ``get_weight_workspace(cache_name="weight")``; module/base.py
    ``get_weight_workspace`` caches Float8 and MXFP8 storages alike, so every TE recipe does):
    1 ÷ grad_accum. Another stack calls TE's linears without it (llm-foundry / Composer's amp_fp8):
    one cast a micro-batch."""
    if plan.stack is _STACK_MEGATRON:
        return 1.0 / max(1, plan.workload.grad_accum)
    return 1.0


def _dequant_bytes(rank: _Rank) -> float:
    """A 4-bit base dequantised before every matmul that reads it (forward, input gradient,
    recompute); int8 bases are read by LLM.int8's own matmul (not counted). Routed experts a
    bitsandbytes base leaves in 16 bits (Plan.bnb_16bit_experts) are read as they are."""
    plan = rank.plan
    if not plan.quantised_base or plan.quant is _QUANT_INT8:
        return 0.0
    experts_16 = plan.bnb_16bit_experts
    per_block = sum(
        g.k * g.n * g.count * g.layers
        for g in block_gemms(plan)
        if not g.name.endswith(ADAPTER_GEMMS) and not (experts_16 and g.name.startswith(_ROUTED_EXPERT_GEMMS))
    )
    uses = rank.layers + rank.backward_layers + _recomputed_blocks(plan, rank)
    return per_block / rank.tp * plan.model.shape_scale * uses * DEQUANT_BYTES


def _optimizer_bytes(plan: Plan, counts: ParamCounts, stage: Stage) -> float:
    """The optimizer step's traffic on the GPU: none when it runs on the host (offload:
    core.training.host.host_step times it there, the transfers are communication). The fused
    count (optimizer_step_bytes), the passes torch's unfused implementations add, and the
    gradient passes clipping and a GradScaler's unscale make before the step (step_pass_bytes)."""
    if plan.parallel.offload is not _OFFLOAD_NONE:
        return 0.0
    return optimizer_step_bytes(plan, counts, stage) + step_pass_bytes(plan, counts, stage)


# The optimizer step as torch.optim runs it, beyond the fused count (optimizer_step_bytes: each parameter,
# gradient and state element read once, the parameter and the state written once: 7 passes for AdamW, what
# ``_fused_adamw_`` moves). Counted by tools/measure/kernel_count.py --step (torch 2.13.0, a tiny Llama's
# 21 float32 tensors, bytes each op reads and writes per trainable element): AdamW for-loop and foreach 72 B
# (18 passes), fused 28 B (7); SGD with momentum for-loop and foreach 32 B (8), fused 20 B (5); plain SGD 12 B
# (3) in all three. The foreach AdamW (torch/optim/adam.py ``_multi_tensor_adam``, weight decay 0 as the HF
# Trainer's groups set it) runs lerp_(m, g), mul_(v), addcmul_(v, g, g), sqrt(v) into a temporary, div_ and
# add_ on it, addcdiv_(p, m, tmp): the gradient read twice (once more than fused) and the moments and the
# temporary 14 times (10 more than fused's m and v read and written); the for-loop (``_single_tensor_adam``)
# the same per tensor. SGD's momentum buffer: mul_, add_(buf, g), add_(p, buf): 3 more. Per (optimizer,
# implementation): (gradient passes, state-element passes) beyond the fused count; the state element (and the
# temporary) in the trainable parameters' dtype, as optimizer_terms allocates it. Megatron's and DeepSpeed's
# own fused Adam run the fused count whatever the plan's implementation; bitsandbytes' optimizers one kernel
# per tensor (the fused count); Adafactor's factored step is not counted beyond it.
UNFUSED_PASSES: Final = {
    (Optimizer.ADAMW, OptimizerImpl.FOREACH): (1.0, 10.0),
    (Optimizer.ADAMW, OptimizerImpl.FORLOOP): (1.0, 10.0),
    (Optimizer.ADAM, OptimizerImpl.FOREACH): (1.0, 10.0),
    (Optimizer.ADAM, OptimizerImpl.FORLOOP): (1.0, 10.0),
    (Optimizer.SGD_MOMENTUM, OptimizerImpl.FOREACH): (0.0, 3.0),
    (Optimizer.SGD_MOMENTUM, OptimizerImpl.FORLOOP): (0.0, 3.0),
    # Adagrad (addcmul_ into the sum, sqrt, add_ eps, the numerator's mul, addcdiv_) and RMSprop (mul_ and addcmul_
    # into square_avg, sqrt, add_ eps, addcdiv_): the gradient read once more, 7 more passes over the state and the
    # step's lists (STEP_OPS' ops, torch 2.13.0 adagrad.py / rmsprop.py), the same per tensor in the for-loop.
    (Optimizer.ADAGRAD, OptimizerImpl.FOREACH): (1.0, 7.0),
    (Optimizer.ADAGRAD, OptimizerImpl.FORLOOP): (1.0, 7.0),
    (Optimizer.RMSPROP, OptimizerImpl.FOREACH): (1.0, 7.0),
    (Optimizer.RMSPROP, OptimizerImpl.FORLOOP): (1.0, 7.0),
}
# clip_grad_norm_ (torch/nn/utils/clip_grad.py, foreach: ``_foreach_norm`` reads each gradient, the stacked
# norms' norm and the clip coefficient, ``_foreach_mul_`` reads and writes each gradient): 12 B per float32
# element counted, 3 passes; a GradScaler's unscale_ (``_amp_foreach_non_finite_check_and_unscale_``: reads
# and writes each gradient, checking for inf / NaN on the way): 8 B, 2 passes.
CLIP_GRAD_PASSES: Final = 3.0
UNSCALE_GRAD_PASSES: Final = 2.0
# A nonzero weight decay in torch's foreach and for-loop steps (torch 2.13.0 torch/optim/adam.py
# ``_multi_tensor_adam`` L688-699 and ``_single_tensor_adam`` L416-428; torch/optim/sgd.py ``_multi_tensor_sgd``
# L424-431): AdamW (decoupled) ``_foreach_mul_(params, 1 - lr * weight_decay)``, each parameter read and written
# once; Adam and SGD (L2) ``grads = _foreach_add(grads, params, alpha=weight_decay)``, each parameter and gradient
# read and a new gradient written, which the later ops read in place of the old one. Per optimizer: (parameter
# passes, gradient passes), timed where UNFUSED_PASSES is (the fused kernels, Megatron's and DeepSpeed's fused
# Adam and bitsandbytes' kernels fold the decay into their one pass). Adam's and SGD's new gradient list is
# memory too: core.training.optimizer.L2_DECAY (docs/TRAINING_TIME.md, "Weight decay as a plan input").
WEIGHT_DECAY_PASSES: Final = {
    Optimizer.ADAMW: (2.0, 0.0),
    Optimizer.ADAM: (1.0, 2.0),
    Optimizer.SGD_MOMENTUM: (1.0, 2.0),
    Optimizer.SGD: (1.0, 2.0),
    # Adagrad and RMSprop fold it into the gradient as Adam does (adagrad.py L518-523, rmsprop.py L429-432)
    Optimizer.ADAGRAD: (1.0, 2.0),
    Optimizer.RMSPROP: (1.0, 2.0),
    # AnyPrecisionAdamW: ``p.data.mul_(1 - lr * weight_decay)`` per tensor, whatever the plan's implementation
    Optimizer.ANYPRECISION_ADAMW: (2.0, 0.0),
    Optimizer.ANYPRECISION_ADAMW_KAHAN: (2.0, 0.0),
}
# AnyPrecisionAdamW's for-loop beyond the fused count, read off its ops (ANYPRECISION_STEP_OPS) as UNFUSED_PASSES
# counts torch's: torch's for-loop AdamW with lerp_ split into mul_ and add_ (2 passes over m more): the gradient
# once more, 12 passes over bf16 moments and temporaries. Kahan summation's buffer work: 3 passes more over the
# bf16 buffer and 6 over the parameter and its clone (clone, add_, sub_). (gradient, bf16 state, parameter).
ANYPRECISION_PASSES: Final = {
    Optimizer.ANYPRECISION_ADAMW: (1.0, 12.0, 0.0),
    Optimizer.ANYPRECISION_ADAMW_KAHAN: (1.0, 15.0, 6.0),
}


def _one_at_a_time(plan: Plan) -> bool:
    """Whether the step runs one tensor at a time: torch's for-loop, or AnyPrecisionAdamW's own loop."""
    return plan.optimizer in ANYPRECISION_STEP_OPS or plan.optimizer_impl is _OPTIMIZER_IMPL_FORLOOP


def decays_unfused(plan: Plan) -> bool:
    """Whether the step runs torch's foreach or for-loop weight decay as ops of its own (WEIGHT_DECAY_PASSES)."""
    unfused = plan.optimizer in ANYPRECISION_STEP_OPS or plan.optimizer_impl is not _OPTIMIZER_IMPL_FUSED
    return plan.weight_decay > 0 and plan.optimizer in WEIGHT_DECAY_PASSES and unfused and _torch_optim(plan)


def step_pass_bytes(plan: Plan, counts: ParamCounts, stage: Stage) -> float:
    """Bytes the rank's optimizer step moves beyond the fused count: torch's unfused implementations'
    extra passes (UNFUSED_PASSES) and their weight decay's (WEIGHT_DECAY_PASSES), clip_grad_norm_'s and a
    GradScaler's unscale over the gradients."""
    dt = dtypes_for(plan)
    elements = rank_trainable(plan, counts, stage)
    grads = (CLIP_GRAD_PASSES if plan.grad_clip else 0.0) + (UNSCALE_GRAD_PASSES if runs_grad_scaler(plan) else 0.0)
    state = params = 0.0
    own = 0.0  # AnyPrecisionAdamW's passes over its bf16 moments
    if _torch_optim(plan) and plan.optimizer is _OPTIMIZER_MUON:
        return elements * grads * dt.grad + _muon_pass_bytes(plan, stage, elements, dt)
    if _torch_optim(plan) and plan.optimizer is _OPTIMIZER_GALORE_ADAMW:
        return elements * grads * dt.grad + _galore_pass_bytes(plan, stage, elements, dt)
    if _torch_optim(plan):
        extra_grads, state = UNFUSED_PASSES.get((plan.optimizer, plan.optimizer_impl), (0.0, 0.0))
        if plan.optimizer in ANYPRECISION_PASSES:
            extra_grads, own, params = ANYPRECISION_PASSES[plan.optimizer]
        grads += extra_grads
    if decays_unfused(plan):
        decay_params, decay_grads = WEIGHT_DECAY_PASSES[plan.optimizer]
        params += decay_params
        grads += decay_grads
    return elements * ((grads + state) * dt.grad + params * dt.param + own * ANYPRECISION_MOMENT_BYTES)


def _muon_pass_bytes(plan: Plan, stage: Stage, elements: float, dt: Dtypes) -> float:
    """Muon's step beyond the fused count (optimizer_step_bytes) per element it steps, read off
    ``_single_tensor_muon``: ``grad.lerp(buf)`` reads the gradient and the buffer once more and writes the update
    (gradient dtype); the bf16 iterate's cast (off a non-bf16 update), norm, div_ and the final read by add_ (the
    Newton-Schulz matmuls are timed as matmuls: speed.muon_feature); ``param.mul_`` reads and writes the parameter
    once more. The AdamW group's torch passes (UNFUSED_PASSES) over the rest."""
    muon = min(elements, muon_elements(plan) * trainable_layers(plan, stage) / max(1, muon_layers(plan)))
    cast = dt.grad != MUON_X_BYTES
    grads = 2.0 + (1.0 if cast else 0.0)  # lerp's read of g, the update written (and read by the cast)
    bf16 = 4.0 + (1.0 if cast else 0.0)  # X written by the cast, norm, div_ read and write, add_'s read
    muon_bytes = muon * ((grads + 1.0) * dt.grad + bf16 * MUON_X_BYTES + 2.0 * dt.param)  # + 1: the buffer's read
    extra_grads, state = UNFUSED_PASSES.get((Optimizer.ADAMW, plan.optimizer_impl), (0.0, 0.0))
    return muon_bytes + (elements - muon) * (extra_grads + state) * dt.grad


def _galore_pass_bytes(plan: Plan, stage: Stage, elements: float, dt: Dtypes) -> float:
    """GaLore AdamW's step beyond the fused count, read off galore-torch 1.0 adamw.py: its own for-loop AdamW
    (torch's for-loop passes, UNFUSED_PASSES) over every element, and over a targeted weight's m × n the
    back-projection written, ``* self.scale`` read and written and ``p.add_``'s read of it (4 gradient-dtype passes);
    the fused count's passes over the targets' moments, which are r / min(m, n) of it, are left in (an upper
    bound); a weight decay's ``p.add_(p)`` reads and writes the parameter once more."""
    targets = min(elements, muon_elements(plan) * trainable_layers(plan, stage) / max(1, muon_layers(plan)))
    extra_grads, state = UNFUSED_PASSES[(Optimizer.ADAMW, OptimizerImpl.FORLOOP)]
    decay = 2.0 * elements * dt.param if plan.weight_decay > 0 else 0.0
    return elements * (extra_grads + state) * dt.grad + 4.0 * targets * dt.grad + decay


def galore_feature(plan: Plan, stage: Stage, gpu: GpuSpec) -> dict[str, float]:
    """GaLore's projector refresh (optimizer.galore_svd_flops: torch.linalg.svd of every targeted gradient in
    float32), once every update_proj_gap steps, spread over them, at the card's float32 peak: a floor (cuSOLVER's SVD
    runs far below it; not measured on a GPU). Its own key, "optimizer_svd", in the optimizer step's time."""
    if plan.optimizer is not _OPTIMIZER_GALORE_ADAMW:
        return {}
    peak = gpu.peak_tflops("fp32")
    flops = galore_svd_flops(plan) * trainable_layers(plan, stage) / max(1, muon_layers(plan))
    return {"optimizer_svd": flops / plan.galore_update_proj_gap / (peak * 1e12) if peak else math.inf}


def muon_feature(plan: Plan, stage: Stage, family: Generation, gpu: GpuSpec) -> dict[str, float]:
    """Muon's Newton-Schulz matmuls (optimizer.muon_ns_flops) for the stage's trained blocks (a frozen block has none),
    once a step, as bf16 matmuls at the card's bf16 peak (``grad.bfloat16()``); none for the other optimizers."""
    if plan.optimizer is not _OPTIMIZER_MUON:
        return {}
    peak = gpu.peak_tflops("bf16")
    flops = muon_ns_flops(plan) * trainable_layers(plan, stage) / max(1, muon_layers(plan))  # every block frozen: 0
    # Its own name (core.training.efficiency.derived ties it to the matmuls' coefficient) so that the Compute & time
    # arithmetic counts it in the optimizer step, which it is: once a step, whatever the batch.
    key = f"optimizer_gemm:{family.value}/{_stack_kind(plan, family, '16-bit')}"
    return {key: flops / (peak * 1e12) if peak else math.inf}


def _torch_optim(plan: Plan) -> bool:
    """Whether torch.optim runs the step as the plan's implementation says: not Megatron's fused Adam
    (its distributed optimizer's, Transformer Engine's or apex's) nor DeepSpeed's FusedAdam."""
    return plan.stack is not _STACK_MEGATRON and not plan.parallel.strategy.deepspeed


# Gradient accumulation outside the weight-gradient matmul. A rank that holds its whole gradient
# across the micro-batches of a step (DDP, ZeRO-1) adds each micro-batch's gradient after the
# first into it in a pass of its own: autograd's AccumulateGrad (``variable.grad += new_grad``:
# the held gradient and the new one read, the sum written, each in the gradient's dtype), or
# Megatron's backward hook ``param.main_grad.add_(param.grad.data)`` (bigscience-workshop/
# Megatron-DeepSpeed@541b967 megatron/model/distributed.py; NVIDIA/Megatron-LM d98e8a64
# megatron/core/distributed/distributed_data_parallel.py: the new gradient in the model's 16-bit
# dtype, the buffer in its own). Megatron-LM fuses it into the weight-gradient GEMM unless
# --no-gradient-accumulation-fusion (``parallel.grad_accum_fusion``); Megatron-DeepSpeed of 2022
# has no such fusion. FSDP under no_sync (accelerate's and the HF Trainer's FSDP1 default,
# layout.fsdp_no_sync) holds the unsharded gradient the same way. Sharded gradients (FSDP reducing
# every micro-batch, ZeRO-2/3) are accumulated as 1/N shards: not counted. A plain pointwise
# kernel, timed at the prior 1/0.92 of the bandwidth (efficiency.FIXED), not fitted.
def grad_accum_bytes(plan: Plan, counts: ParamCounts, stage: Stage) -> float:
    """Bytes the rank moves per micro-batch after the first, adding its new gradients into the
    held ones; 0 where the accumulation is fused, sharded, or there is one micro-batch."""
    par = plan.parallel
    no_sync = fsdp_no_sync(par, plan.workload.grad_accum)
    if plan.workload.grad_accum <= 1 or not (no_sync or par.strategy in (_STRATEGY_DDP, _STRATEGY_ZERO1)):
        return 0.0
    dt = dtypes_for(plan)
    if no_sync:
        # FSDP under no_sync holds the whole unsharded gradient (core.parallel.state._no_sync_accumulated):
        # FSDP1 in the gathered dtype autograd computed it in, FSDP2 upcast to its reduce dtype.
        new, held = MP_BYTES.get(par.fsdp_param_dtype, dt.grad), no_sync_grad_bytes(par, dt.grad)
    elif megatron_grad_buffer(plan):
        if par.grad_accum_fusion:
            return 0.0
        held, new = megatron_grad_bytes(plan, dt.grad, dt.compute), dt.compute
    else:
        held, new = dt.grad, dt.grad
    elements = counts.trainable * train_share(plan, stage, par.tensor_parallel, experts_split=True)
    return elements * (new + 2.0 * held)


def rank_trainable(plan: Plan, counts: ParamCounts, stage: Stage) -> float:
    """The trainable parameters whose step the rank runs (sharded strategies: the rank's part)."""
    par = plan.parallel
    sharded = par.strategy is not _STRATEGY_DDP
    # Sharded, a rank's part is its share without the EP split ÷ DP × CP (Layout.state_shards_of).
    share = train_share(plan, stage, par.tensor_parallel, experts_split=not sharded)
    shards = par.fsdp_shards if sharded else 1  # Layout.state_shards
    return counts.trainable * share / shards


def optimizer_step_bytes(plan: Plan, counts: ParamCounts, stage: Stage) -> float:
    """The optimizer step's memory traffic for the rank's part, wherever it runs: each trainable
    parameter, its gradient and its state read, the parameter and the state written."""
    par = plan.parallel
    dt = dtypes_for(plan)
    sharded = par.strategy is not _STRATEGY_DDP
    share = train_share(plan, stage, par.tensor_parallel, experts_split=not sharded)
    shards = par.fsdp_shards if sharded else 1
    state = sum(t.bytes for t in optimizer_terms(plan, counts, dt)) * share / shards
    # PEFT's modules_to_save copies and trainable tokens (one GPU or DDP: Plan._check_modules_to_save), each
    # read, its gradient read and written back, in its own dtype, with its state (core.training.extra_trained).
    extra = sum(3.0 * t.elements * t.bytes for t in trained_tensors(plan, dt))
    extra += 2.0 * sum(t.bytes for t in extra_state_terms(plan, dt)) if extra else 0.0
    return rank_trainable(plan, counts, stage) * (2.0 * dt.param + dt.grad) + 2.0 * state + extra


def _rank_of(plan: Plan, stage: Stage, fp8: bool, sms: int | None = None, mxfp8: bool = False) -> _Rank:
    par = plan.parallel
    backward = trainable_layers(plan, stage) if plan.gradless_layers else stage.layers
    return _Rank(
        plan=plan,
        tokens=plan.workload.micro_batch * plan.workload.seq_len / par.context_parallel,
        tp=par.tensor_parallel,
        layers=stage.layers,
        backward_layers=backward,
        head=stage.head,
        fp8=fp8,
        sms=sms,
        mxfp8=mxfp8,
    )


def _wide_feature(mm: _Tally, micro: int, family: Generation, peak: float, plan: Plan) -> dict[str, float]:
    """A float8 plan's 16-bit matmuls (the head, LoRA adapters) at the 16-bit peak, and its
    rowwise linears too small to gain at their 16-bit time × ROWWISE_SMALL_SLOWDOWN."""
    flops = mm.wide_flops + mm.slow_flops * ROWWISE_SMALL_SLOWDOWN
    if not flops or not peak:
        return {}
    return {f"gemm:{family.value}/{_stack_kind(plan, family, '16-bit')}": micro * flops / (peak * 1e12)}


def _ring_feature(rank: _Rank, micro: int, bandwidth: float) -> dict[str, float]:
    """The ring attention's merge traffic, Transformer Engine's float8 casts and a mixture of
    experts' token permutes, each a feature of its own at the pointwise rate (none without them)."""
    ring = ring_attention_bytes(rank)
    casts = te_cast_bytes(rank)
    permutes = moe_permute_bytes(rank)
    return {
        **({"ring_merge": micro * ring / bandwidth} if ring else {}),
        **({"te_casts": micro * casts / bandwidth} if casts else {}),
        **({"moe_permute": micro * permutes / bandwidth} if permutes else {}),
    }


def moe_host_floor(plan: Plan, layers: int) -> float:
    """Seconds the host takes to issue ``layers`` Megatron-Core MoE layers' forward and backward for
    one micro-batch (MEGATRON_MOE_LAYER_HOST_S each); 0 for a dense model or another stack, whose
    host time was not measured. Recomputed forwards are not counted (the measured run recomputed
    nothing)."""
    if plan.stack is not _STACK_MEGATRON or plan.model.num_experts <= 1:
        return 0.0
    return layers * MEGATRON_MOE_LAYER_HOST_S


def step_work(plan: Plan, counts: ParamCounts, gpu: GpuSpec) -> Work:
    """The step's compute on the pipeline stage with the most of it."""
    kind = gemm_kind(plan, gpu)
    fp8 = "fp8" in kind  # fp8-<recipe>, or megatron-fp8-te
    compute = roles.compute_dtype(plan).value
    gemm_peak = gpu.peak_tflops("fp8" if fp8 else compute)
    attention_peak = gpu.peak_tflops(compute)
    bandwidth = _bandwidth(gpu, attention_peak)
    family = generation(gpu.id)
    micro = plan.workload.grad_accum
    best: Work | None = None
    for stage in layout(plan).stages:
        rank = _rank_of(plan, stage, fp8, gpu.sm_count, fp8 and kind.endswith(Float8.TE_MXFP8.value))
        mm = _matmuls(rank)
        attention, attention_forward = _attention_flops(rank)
        # Seconds at the peak from the FLOPs the tensor cores spend (eager's batched GEMMs in
        # whole tiles and waves); the hardware FLOPs and the MFU stay the counted ones.
        # A fused kernel's backward at the five matmuls it runs (FUSED_BACKWARD_OVER_COUNTED).
        forward_waste, backward_waste = _attention_padding(rank, rank.sms)
        passes = attention_forward / rank.layers if rank.layers else 0.0
        again = passes * _attention_recompute(rank)
        attention_padded = (attention_forward + again) * forward_waste + (
            attention - attention_forward - again
        ) * backward_waste
        features = {
            f"gemm:{family}/{kind}": micro
            * (mm.padded - mm.wide_flops - mm.slow_flops - mm.fp32_adapter)
            / (gemm_peak * 1e12)
            if gemm_peak
            else math.inf,
            **_wide_feature(mm, micro, family, attention_peak, plan),
            "gemm_bytes": micro * mm.bytes / bandwidth,
            f"attention:{family}/{attention_kernel(plan, gpu.id)}": (
                micro * attention_padded / (attention_peak * 1e12) if attention_peak else math.inf
            ),
            f"elementwise:{plan.stack}": micro * _elementwise_bytes(rank) / bandwidth,
            **_ring_feature(rank, micro, bandwidth),
            **method_features(rank, mm, micro, family, gpu, bandwidth),
            "optimizer": _optimizer_bytes(plan, counts, stage) / bandwidth,
        }
        for key, seconds in muon_feature(plan, stage, family, gpu).items():  # Muon's matmuls, once a step
            features[key] = features.get(key, 0.0) + seconds
        features.update(galore_feature(plan, stage, gpu))  # GaLore's SVD, spread over update_proj_gap steps
        accumulate = grad_accum_bytes(plan, counts, stage)
        if accumulate:
            features["grad_accum"] = (micro - 1) * accumulate / bandwidth
        flops = micro * (mm.flops + attention + method_build_flops(rank))
        forward = (mm.forward_flops + attention_forward) / (mm.flops + attention) if mm.flops + attention else 1 / 3
        blocks = eager_host_kernels(plan, rank.layers, rank.backward_layers, _recomputed_blocks(plan, rank))
        kernels = micro * (blocks + eager_outside_kernels(plan, stage.head))
        kernels += method_step_kernels(plan, rank.layers)  # once a step: AdaLoRA's rank allocator
        floor = micro * moe_host_floor(plan, rank.layers) + kernels * EAGER_KERNEL_HOST_S
        step_kernels = step_host_kernels(plan, counts, stage)
        fp32_peak = gpu.peak_tflops("fp32")
        wide = f"gemm:{family.value}/{_stack_kind(plan, family, '16-bit')}"
        rates = {  # kernel kind -> (its compute feature, seconds per padded FLOP)
            "main": (f"gemm:{family}/{kind}", 1 / (gemm_peak * 1e12) if gemm_peak else math.inf),
            "wide": (wide, 1 / (attention_peak * 1e12) if attention_peak else math.inf),
            "slow": (wide, ROWWISE_SMALL_SLOWDOWN / (attention_peak * 1e12) if attention_peak else math.inf),
            "fp32": (f"adapter_fp32:{family.value}", 1 / (fp32_peak * 1e12) if fp32_peak else math.inf),
        }
        gemms = tuple(
            (rates[k][0], micro * padded * rates[k][1], micro * moved / bandwidth) for k, padded, moved in mm.kernels
        )
        work = Work(features, flops, forward, gemm_peak, family, kind, floor, kernels, step_kernels, gemms)
        if best is None or work.hardware_flops > best.hardware_flops:
            best = work
    assert best is not None
    return best

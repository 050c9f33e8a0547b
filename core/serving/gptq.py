"""GPTQ (4 and 8 bits) and AWQ weights: which kernel each engine runs, what it keeps, what it costs.

The checkpoint (AutoGPTQ's packing; Qwen's -GPTQ-Int8 repositories: bits 8, group_size 128, desc_act
false, sym true) stores each quantised matrix as qweight int32 [in / 4, out], qzeros int32 [in / 128,
out / 4], scales fp16 [in / 128, out] and g_idx int32 [in]: :func:`core.dtypes.gptq_int8_matrix_bytes`.
4-bit GPTQ and AWQ are counted as 4 bits, an fp16 scale and a 4-bit zero per group of 128
(:func:`core.dtypes.int4_group_bytes_per_weight`; no g_idx). What each engine keeps after loading
(:func:`after_loading_delta`), read from the released wheels:

* **vLLM, GPTQ on sm80+**: ``override_quantization_method`` turns a GPTQ checkpoint into ``gptq_marlin``
  (from 0.24 ``auto_gptq``) unless the user forces ``quantization="gptq"``; its linear method builds the
  kernel with ``choose_mp_linear_kernel``, whose candidates list ``MacheteLinearKernel`` before
  ``MarlinLinearKernel`` (0.6.3 ``kernels/__init__.py`` through 0.34.0 ``kernels/linear/__init__.py``).
  Machete takes compute capability 9.0 only (Hopper; ``is_device_capability(90)`` in 0.10.2 on) and
  the sym types ``uint4b8`` / ``uint8b128`` in groups of 128; its ``process_weights_after_loading``
  repacks qweight and scales and leaves qzeros and g_idx as loaded. Elsewhere (Ampere, Ada, Blackwell)
  Marlin runs: 0.6.3-0.33.0 replace qzeros and, without act-order, g_idx by empty tensors
  (``marlin_make_empty_g_idx`` / ``marlin_make_empty``); 0.34.0 retires qzeros instead
  (``_retire_unused_zp``: "keep the param and its data"). The linear registers g_idx up to 0.28.0
  and not in 0.31.0. Fused MoE experts (``GPTQMarlinMoEMethod``) empty their g_idx and keep qzeros.
  Below sm80 ``GPTQLinearMethod``'s exllama ``gptq_gemm`` keeps qzeros and empties g_idx.
* **vLLM, AWQ**: Marlin repacks the zero points (``awq_to_marlin_zero_points``: int32
  [in / 128, out / 8], the checkpoint's bytes). Where ``AWQMarlinLinearMethod`` chooses its kernel
  with ``choose_mp_linear_kernel`` (0.19.0 and 0.34.0 ``auto_awq``; 0.10.2 still calls Marlin
  directly) a Hopper card runs Machete, whose ``transform_w_zp`` turns the zero points into
  ``-scale × zero`` in the scales' dtype: [in / 128, out] fp16, 2 bytes a group and column for 0.5.
* **SGLang**: 0.4.3.post4 to 0.4.9 import vLLM's ``GPTQMarlinLinearMethod`` (vLLM's choice, Machete
  on Hopper); from 0.4.10 its own ``layers/quantization/gptq.py`` runs Marlin on every sm80+ card
  and empties qzeros and g_idx (read in 0.4.10, 0.5.1, 0.5.10). AWQ through Marlin: same bytes.
* **transformers**: the quantised linear comes from the GPTQ library the release integrates, taken by
  release here (:func:`hf_gptq_library`). Up to 4.48 only AutoGPTQ (through optimum):
  ``dynamically_import_QuantLinear`` (AutoGPTQ v0.6.0 ``auto_gptq/utils/import_utils.py``) sends 8 bits
  past ExLlama and ExLlama v2 (``bits == 4`` only) to ``qlinear_cuda_old.QuantLinear`` (desc_act false),
  which keeps every buffer of the checkpoint and no ExLlama buffer. From 4.49 transformers loads GPTQ
  through GPTQModel where it is installed (the Qwen3 table's GPTQModel 2.2.0): ``hf_select_quant_linear``
  walks ``AUTO_SELECT_BACKEND_ORDER``, whose first entry, ``MarlinQuantLinear`` (bits 4 and 8, sym, sm80+),
  empties g_idx in ``post_init`` and keeps its qzeros buffer. 4-bit figures under transformers are
  the checkpoint's (not re-read here).

AutoGPTQ's cuda-old linear is also a different cost: below ``kernel_switch_threshold`` (128 rows) it calls
``vecquant8matmul_old`` on a float32 copy of the input (``use_cuda_fp16`` is off for 8 bits), and above it
dequantises the whole matrix in torch before ``torch.matmul`` (:func:`cuda_old_dequant_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from core.catalogue import Generation, generation
from core.dtypes import (
    GPTQ8_ZERO_BYTES,
    GPTQ_G_IDX_BYTES,
    INT4_GROUP,
    INT4_SCALE_BYTES,
    INT4_ZERO_BYTES,
    WeightFormat,
    matrix_input_rows,
)
from core.model import ModelSpec
from core.plan import Engine, Plan, SglangVersion, TransformersVersion, VllmVersion
from core.serving.releases import at_least

# Architectures whose compute capability is 8.0 or more (Marlin's minimum): every other card of the
# catalogue (Volta, Turing, AMD, Apple, a custom card) is Generation.OTHER.
MARLIN_GENERATIONS: Final = frozenset({Generation.AMPERE, Generation.ADA, Generation.HOPPER, Generation.BLACKWELL})
# vLLM's Machete (kernels/linear/mixed_precision/machete.py, 0.10.2 to 0.34.0: "Machete requires compute
# capability of 90 (Hopper)"; 0.6.3 get_min_capability 90) comes before Marlin in choose_mp_linear_kernel.
MACHETE_GENERATIONS: Final = frozenset({Generation.HOPPER})
# vLLM 0.34.0 mixed_precision/marlin.py retires an unused qzeros (keeps its data); 0.33.0 still replaces it
# by marlin_make_empty (both read).
VLLM_ZEROS_KEPT_FROM: Final = VllmVersion.V0_34
# vLLM's GPTQ linear registers g_idx in 0.28.0 (auto_gptq.py) and not in 0.31.0; 0.29 and 0.30 not read.
VLLM_NO_G_IDX_FROM: Final = VllmVersion.V0_31
# The first vLLM line read whose AWQMarlinLinearMethod picks its kernel with choose_mp_linear_kernel
# (0.19.0 awq_marlin.py; 0.10.2 calls Marlin directly).
VLLM_AWQ_MP_KERNEL_FROM: Final = VllmVersion.V0_19
# SGLang 0.4.10 is the first release read with its own GPTQMarlinLinearMethod (Marlin on every sm80+
# card); 0.4.3.post4 to 0.4.9 import vLLM's (layers/quantization/__init__.py).
SGLANG_OWN_MARLIN_FROM: Final = SglangVersion.V0_4_10
# Machete's transform_w_zp keeps an AWQ zero point as -scale × zero in the scales' dtype (fp16).
MACHETE_ZERO_BYTES: Final = INT4_SCALE_BYTES
GPTQ_FORMATS: Final = frozenset({WeightFormat.GPTQ_INT4, WeightFormat.GPTQ_INT8})
# transformers 4.49.0 is the first release whose GPTQ quantizer loads through GPTQModel
# (quantizers/quantizer_gptq.py: is_gptqmodel_available beside is_auto_gptq_available).
GPTQMODEL_FROM: Final = TransformersVersion.V4_49
# AutoGPTQ v0.6.0 qlinear_cuda_old.QuantLinear: kernel_switch_threshold = 128 rows; from there the
# forward dequantises in torch.
CUDA_OLD_SWITCH_ROWS: Final = 128
# Bytes per weight alive at once while the cuda-old forward dequantises one matrix (its torch path,
# bits = 8): bitwise_right_shift of the expanded qweight makes an int32 per weight (4 B) and .to(int16)
# a copy (2 B) before the int32 is freed: 6 B; later bitwise_and (int16 beside int16: 4 B) and
# ``scales * (weight - zeros)`` (the int16 weight, the int16 difference and the float16 product: 6 B).
CUDA_OLD_DEQUANT_BYTES: Final = 6
# torch calls of one cuda-old linear at decode (bits = 8, fewer than 128 rows; the forward above):
# reshape, torch.zeros of the float32 output, x.to(float32), scales.float(), vecquant8matmul_old,
# out.to(x's dtype), reshape; and out + bias where the layer has one. nn.Linear is one call (bias
# included).
CUDA_OLD_LINEAR_OPS: Final = 7
# GPTQModel 2.2.0 MarlinQuantLinear.forward -> apply_gptq_marlin_linear: reshape, gptq_marlin_gemm,
# reshape; add_ of the bias where the layer has one.
MARLIN_LINEAR_OPS: Final = 3


def marlin_card(gpu_id: str) -> bool:
    """Whether the card is one Marlin's kernels run on (compute capability 8.0 or more)."""
    return generation(gpu_id) in MARLIN_GENERATIONS


def marlin_runs(plan: Plan) -> bool:
    """Whether the plan's engine runs an 8-bit GPTQ checkpoint on a Marlin kernel: vLLM and SGLang on a
    card of compute capability 8.0 or more; transformers through GPTQModel (from 4.49) on such a card."""
    inf = plan.inference
    if inf.weight_dtype is not WeightFormat.GPTQ_INT8 or not marlin_card(plan.hardware.gpu):
        return False
    return inf.engine in (Engine.VLLM, Engine.SGLANG) or (
        inf.engine is Engine.HF and at_least(inf.transformers_version, GPTQMODEL_FROM)
    )


def hf_gptq_library(plan: Plan) -> str:
    """The GPTQ library transformers loads through at the plan's release (see the module docstring)."""
    return "GPTQModel" if at_least(plan.inference.transformers_version, GPTQMODEL_FROM) else "AutoGPTQ"


def cuda_old_runs(plan: Plan) -> bool:
    """Whether the plan's quantised linears are AutoGPTQ's cuda-old ones: 8-bit GPTQ under a transformers
    before GPTQModel's integration."""
    inf = plan.inference
    return (
        inf.engine is Engine.HF
        and inf.weight_dtype is WeightFormat.GPTQ_INT8
        and not at_least(inf.transformers_version, GPTQMODEL_FROM)
    )


def machete_runs(plan: Plan) -> bool:
    """Whether vLLM's Machete kernel takes the plan's GPTQ / AWQ linears: a Hopper card under vLLM (for AWQ
    from VLLM_AWQ_MP_KERNEL_FROM), or under SGLang before its own Marlin method (GPTQ)."""
    inf = plan.inference
    if generation(plan.hardware.gpu) not in MACHETE_GENERATIONS:
        return False
    if inf.weight_dtype is WeightFormat.AWQ_INT4:
        return inf.engine is Engine.VLLM and at_least(inf.vllm_version, VLLM_AWQ_MP_KERNEL_FROM)
    if inf.weight_dtype not in GPTQ_FORMATS:
        return False
    return inf.engine is Engine.VLLM or (
        inf.engine is Engine.SGLANG and not at_least(inf.sglang_version, SGLANG_OWN_MARLIN_FROM)
    )


def fused_expert_params(model: ModelSpec) -> int:
    """The routed experts' matrices (a fused MoE layer's w13 and w2), which the engines' Marlin MoE methods
    load whole: 0 for a dense model. Shared experts and dense MLP layers are ordinary linears."""
    if model.num_experts <= 1:
        return 0
    per_layer = (3 if model.gated_mlp else 2) * model.hidden_size * model.intermediate_size * model.num_experts
    return round((model.num_layers - model.first_k_dense_replace) * per_layer * model.params_scale)


@dataclass(frozen=True)
class GptqKept:
    """What the engine's kernel keeps of a GPTQ checkpoint's qzeros and g_idx after loading (see the module
    docstring): ``qzeros`` an ordinary linear's (a fused MoE's experts keep theirs under every Marlin MoE method),
    ``g_idx`` every matrix's, the experts' included (no act-order). The one rule :func:`after_loading_delta` and
    SGLang's replay of its weights (core.serving.sglang_weights) both read."""

    qzeros: bool
    g_idx: bool


# Every tensor of the checkpoint stays: a format other than GPTQ, or AutoGPTQ's cuda-old linear.
CHECKPOINT_KEPT: Final = GptqKept(qzeros=True, g_idx=True)


def gptq_kept(plan: Plan) -> GptqKept:
    """What the plan's engine keeps of a GPTQ checkpoint's qzeros and g_idx after loading (:class:`GptqKept`):
    g_idx only under Machete while vLLM still registers it; qzeros unless Marlin frees them."""
    inf = plan.inference
    if inf.weight_dtype not in GPTQ_FORMATS or cuda_old_runs(plan):
        return CHECKPOINT_KEPT
    g_idx = machete_runs(plan) and not (inf.engine is Engine.VLLM and at_least(inf.vllm_version, VLLM_NO_G_IDX_FROM))
    return GptqKept(qzeros=not _gptq_zeros_freed(plan), g_idx=g_idx)


def _gptq_zeros_freed(plan: Plan) -> bool:
    """Whether the engine's GPTQ linears free qzeros after loading (Marlin, before vLLM retired it)."""
    inf = plan.inference
    if not marlin_card(plan.hardware.gpu) or machete_runs(plan):
        return False
    if inf.engine is Engine.VLLM:
        return not at_least(inf.vllm_version, VLLM_ZEROS_KEPT_FROM)
    return inf.engine is Engine.SGLANG


def after_loading_delta(plan: Plan, model: ModelSpec, quantised: int) -> float:
    """Bytes the engine's kernel holds after loading ``quantised`` matrix weights less what
    :func:`core.dtypes.weight_bytes` counts for the checkpoint (negative where it frees tensors; see the
    module docstring). GPTQ: the ordinary linears' qzeros where Marlin frees them (one 8-bit or 4-bit
    zero a group and column), and the 8-bit checkpoint's g_idx (no act-order) wherever a kernel other
    than AutoGPTQ's cuda-old runs, except Machete's while vLLM still registers it. AWQ under Machete:
    fp16 zero points for the 4-bit ones of its ordinary linears. A fused MoE's experts keep the
    checkpoint's zeros (Marlin's MoE methods). 0 for every other format and engine."""
    inf = plan.inference
    fmt = inf.weight_dtype
    if fmt is WeightFormat.AWQ_INT4:
        if not machete_runs(plan):
            return 0.0
        return (quantised - fused_expert_params(model)) * (MACHETE_ZERO_BYTES - INT4_ZERO_BYTES) / INT4_GROUP
    if fmt not in GPTQ_FORMATS:
        return 0.0
    kept = gptq_kept(plan)
    delta = 0.0
    if fmt is WeightFormat.GPTQ_INT8 and not kept.g_idx:  # the 4-bit checkpoint's bytes count no g_idx
        delta -= float(matrix_input_rows(model) * GPTQ_G_IDX_BYTES)
    if not kept.qzeros:
        zero = GPTQ8_ZERO_BYTES if fmt is WeightFormat.GPTQ_INT8 else INT4_ZERO_BYTES
        delta -= (quantised - fused_expert_params(model)) * zero / INT4_GROUP
    return delta


def cuda_old_dequant_bytes(plan: Plan, rows: int) -> float:
    """The transient of AutoGPTQ's cuda-old forward at ``rows`` rows: the largest quantised matrix of the
    rank at CUDA_OLD_DEQUANT_BYTES a weight once the forward takes its torch path (``rows`` of at least
    CUDA_OLD_SWITCH_ROWS); 0 below it and for every other kernel."""
    if not cuda_old_runs(plan) or rows < CUDA_OLD_SWITCH_ROWS:
        return 0.0
    largest = max(n_in * n_out for n_in, n_out in plan.model.linear_shapes().values())
    return largest / plan.inference.tensor_parallel * CUDA_OLD_DEQUANT_BYTES


def hf_linear_extra_ops(plan: Plan) -> float:
    """torch calls one decoder layer's quantised linears add at a decode step beyond nn.Linear's one call
    each, under transformers with 8-bit GPTQ weights (0 otherwise): per linear CUDA_OLD_LINEAR_OPS
    (AutoGPTQ) or MARLIN_LINEAR_OPS (GPTQModel), one more with a bias, less the one call nn.Linear makes.
    A mixture of experts' linears are not counted (its expert loop's calls are core.serving.hf_generate's)."""
    inf = plan.inference
    if inf.engine is not Engine.HF or inf.weight_dtype is not WeightFormat.GPTQ_INT8:
        return 0.0
    model = plan.model
    per_linear = CUDA_OLD_LINEAR_OPS if cuda_old_runs(plan) else MARLIN_LINEAR_OPS
    attention_biases = 3 * int(model.qkv_bias) + int(model.o_bias)
    linears = ["q_proj", "k_proj", "v_proj", "o_proj"]
    mlp_linears = [name for name in model.linear_shapes() if name not in linears]
    mlp_biases = len(mlp_linears) * int(model.mlp_bias)
    count = len(linears) + (len(mlp_linears) if model.num_experts <= 1 else 0)
    biases = attention_biases + (mlp_biases if model.num_experts <= 1 else 0)
    return count * (per_linear - 1) + biases

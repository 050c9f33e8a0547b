"""8-bit GPTQ weights (``WeightFormat.GPTQ_INT8``): which kernel each engine runs, what it keeps, what it costs.

The checkpoint (AutoGPTQ's packing; Qwen's -GPTQ-Int8 repositories: bits 8, group_size 128, desc_act
false, sym true) stores each quantised matrix as qweight int32 [in / 4, out], qzeros int32 [in / 128,
out / 4], scales fp16 [in / 128, out] and g_idx int32 [in]: :func:`core.dtypes.gptq_int8_matrix_bytes`.
What each engine keeps of it after loading, read from the sources:

* **vLLM** (0.6.3's ``model_executor/layers/quantization/gptq_marlin.py``; the layout is the same in later
  releases): ``GPTQMarlinConfig.TYPE_MAP`` takes (8 bits, sym) as ``uint8b128`` beside (4, sym)
  ``uint4b8``, and ``override_quantization_method`` turns a GPTQ checkpoint into ``gptq_marlin`` whenever
  ``check_marlin_supported`` passes (compute capability 8.0 or more, ``get_min_capability`` 80), unless
  the user forces ``quantization="gptq"``. ``MarlinLinearKernel.process_weights_after_loading`` repacks
  qweight (``gptq_marlin_repack``: the same bytes), permutes the scales (same bytes), replaces g_idx
  (no act-order) and qzeros by empty tensors (``marlin_make_empty_g_idx``) and adds a workspace of
  out / 64 × 16 int32 (a few kB a layer, not counted). Below sm80 (and on ROCm) ``GPTQLinearMethod``
  runs its exllama-style ``gptq_gemm``, which keeps qzeros and empties g_idx without act-order.
* **SGLang** (0.4.x ``layers/quantization/gptq.py``): the same ``GPTQMarlinConfig`` rule (it imports or
  copies vLLM's), so the same bytes after loading.
* **transformers**: the quantised linear comes from the GPTQ library the release integrates, taken by
  release here (:func:`hf_gptq_library`). Up to 4.48 only AutoGPTQ (through optimum):
  ``dynamically_import_QuantLinear`` (AutoGPTQ v0.6.0 ``auto_gptq/utils/import_utils.py``) sends 8 bits
  past ExLlama and ExLlama v2 (``bits == 4`` only) to ``qlinear_cuda_old.QuantLinear`` (desc_act false),
  which keeps every buffer of the checkpoint and no ExLlama buffer. From 4.49 transformers loads GPTQ
  through GPTQModel where it is installed (the Qwen3 table's GPTQModel 2.2.0): ``hf_select_quant_linear``
  walks ``AUTO_SELECT_BACKEND_ORDER``, whose first entry, ``MarlinQuantLinear`` (bits 4 and 8, sym, sm80+),
  empties g_idx in ``post_init`` and keeps its qzeros buffer.

AutoGPTQ's cuda-old linear is also a different cost: below ``kernel_switch_threshold`` (128 rows) it calls
``vecquant8matmul_old`` on a float32 copy of the input (``use_cuda_fp16`` is off for 8 bits), and above it
dequantises the whole matrix in torch before ``torch.matmul`` (:func:`cuda_old_dequant_bytes`).
"""

from __future__ import annotations

from typing import Final

from core.catalogue import Generation, generation
from core.dtypes import (
    GPTQ8_ZERO_BYTES,
    GPTQ_G_IDX_BYTES,
    INT4_GROUP,
    WeightFormat,
    matrix_input_rows,
)
from core.model import ModelSpec
from core.plan import Engine, Plan, TransformersVersion
from core.serving.releases import at_least

# Architectures whose compute capability is 8.0 or more (Marlin's minimum): every other card of the
# catalogue (Volta, Turing, AMD, Apple, a custom card) is Generation.OTHER.
MARLIN_GENERATIONS: Final = frozenset({Generation.AMPERE, Generation.ADA, Generation.HOPPER, Generation.BLACKWELL})
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


def gptq_dropped_bytes(plan: Plan, model: ModelSpec, quantised: int) -> float:
    """Bytes of the checkpoint's 8-bit GPTQ tensors the engine frees after loading ``quantised`` matrix
    weights: g_idx (no act-order) wherever a kernel other than AutoGPTQ's cuda-old runs, and qzeros
    where vLLM's or SGLang's Marlin does; 0 for every other format."""
    inf = plan.inference
    if inf.weight_dtype is not WeightFormat.GPTQ_INT8 or cuda_old_runs(plan):
        return 0.0
    dropped = float(matrix_input_rows(model) * GPTQ_G_IDX_BYTES)
    if marlin_runs(plan) and inf.engine is not Engine.HF:
        dropped += quantised * GPTQ8_ZERO_BYTES / INT4_GROUP
    return dropped


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

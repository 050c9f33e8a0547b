"""Bytes per format: the one table every part of the estimate reads, and the one compute-dtype rule.

Owns the storage formats a plan can name — training dtypes (:class:`Dtype`), autocast
(:class:`Autocast`), FSDP2's mixed-precision dtypes (:class:`MpDtype`), QLoRA's quantised
base (:class:`Quant`), served weights (:class:`WeightFormat`) and the KV cache
(:class:`KvDtype`) — with the bytes one element takes in each, the block scales quantised
formats add, and which dtype a matmul produces. Memory (training and serving), time and the
lesson accounting all read these; none keeps a table of its own.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from core.model import ModelSpec

__all__ = [
    "AUTOCAST_LABELS",
    "DENSE_BYTES",
    "DTYPE_BYTES",
    "DTYPE_LABELS",
    "ELEMENT_BYTES",
    "GGML_BLOCKS",
    "GGUF_LABELS",
    "HALF",
    "KV_BYTES",
    "MP_BYTES",
    "WEIGHT_LABELS",
    "Autocast",
    "CacheType",
    "Dtype",
    "GgmlType",
    "GgufQuant",
    "KvDtype",
    "MpDtype",
    "Quant",
    "WeightFormat",
    "compute_dtype",
    "ggml_row_bytes",
    "gptq_int8_bytes_per_weight",
    "gptq_int8_matrix_bytes",
    "int4_group_bytes_per_weight",
    "matmul_dtype",
    "matrix_output_rows",
    "mxfp4_bytes_per_weight",
    "nf4_bytes_per_weight",
    "quantised_matrix_bytes",
    "weight_bytes",
]


class Dtype(StrEnum):
    """Storage dtype of one precision role."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"


class Autocast(StrEnum):
    """torch.autocast around the forward and the loss (fp16 brings a GradScaler)."""

    NONE = "none"
    BF16 = "bf16"
    FP16 = "fp16"


class MpDtype(StrEnum):
    """FSDP2 ``MixedPrecisionPolicy`` dtypes; STORED is ``None`` (the parameter's own dtype)."""

    STORED = "stored"
    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"


class Quant(StrEnum):
    """Storage of the frozen base weights under QLoRA."""

    NF4 = "nf4"
    FP4 = "fp4"
    INT8 = "int8"


class WeightFormat(StrEnum):
    """Storage of served weights."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"
    FP8 = "fp8"  # per-tensor / per-channel scaled float8 (vLLM --quantization fp8)
    INT8 = "int8"  # LLM.int8 (bitsandbytes) / W8A16 with one scale per output row
    AWQ_INT4 = "awq-int4"
    GPTQ_INT4 = "gptq-int4"
    GPTQ_INT8 = "gptq-int8"  # 8-bit GPTQ, groups of 128 (Qwen's -GPTQ-Int8 checkpoints)
    NF4 = "nf4"  # bitsandbytes 4-bit NormalFloat with double quantisation
    MXFP4 = "mxfp4"  # OCP microscaling FP4: the MoE experts in 4 bits + one E8M0 scale per 32 (gpt-oss)


class KvDtype(StrEnum):
    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"
    FP8 = "fp8"  # vLLM --kv-cache-dtype fp8 (e4m3 / e5m2)
    INT8 = "int8"  # HF QuantizedCache; vLLM int8_per_token_head from 0.20 (core.inputs.VLLM_KV_NAMES); not SGLang
    INT4 = "int4"  # HF QuantizedCache (quanto) 4-bit; vLLM int4_per_token_head from 0.25
    # vLLM's fp8 cache with a float32 scale per token and KV head (from 0.20, core.inputs.VLLM_KV_NAMES), not the
    # per-tensor scaled fp8 above; no other engine keeps it
    FP8_PER_TOKEN_HEAD = "fp8_per_token_head"


DTYPE_LABELS: Final = {Dtype.FP32: "float32", Dtype.BF16: "bf16", Dtype.FP16: "fp16"}
AUTOCAST_LABELS: Final = {Autocast.NONE: "off", Autocast.BF16: "bf16", Autocast.FP16: "fp16 (+ GradScaler)"}
WEIGHT_LABELS: Final = {
    WeightFormat.BF16: "bf16",
    WeightFormat.FP16: "fp16",
    WeightFormat.FP32: "fp32",
    WeightFormat.FP8: "FP8",
    WeightFormat.INT8: "int8",
    WeightFormat.AWQ_INT4: "AWQ int4 (g128)",
    WeightFormat.GPTQ_INT4: "GPTQ int4 (g128)",
    WeightFormat.GPTQ_INT8: "GPTQ int8 (g128)",
    WeightFormat.NF4: "bitsandbytes NF4",
    WeightFormat.MXFP4: "MXFP4 experts (gpt-oss)",
}

# --- the one table ---------------------------------------------------------------------
# Bytes of one stored element, before any block scales. Sources: IEEE 754 (fp32, fp16);
# bfloat16 and tf32 are 16 and 32 bits of storage by definition; float8 (e4m3 / e5m2) and
# int8 one byte; NF4, FP4 and int4 4 bits (Dettmers et al. 2023, arXiv:2305.14314). The
# block scales of the quantised formats are added by the functions below.
ELEMENT_BYTES: Final[dict[str, float]] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "nf4": 0.5,
    "fp4": 0.5,
    "int4": 0.5,
}
# The same table by each enum: a tensor in a training dtype, an FSDP2 cast, a KV element (transformers'
# QuantizedCache scales, below 1 %, left out; vLLM's per-token-head ones added in core.serving.kv), a dense served
# weight.
DTYPE_BYTES: Final[dict[Dtype, float]] = {d: ELEMENT_BYTES[d.value] for d in Dtype}
MP_BYTES: Final[dict[MpDtype, float]] = {m: ELEMENT_BYTES[m.value] for m in MpDtype if m is not MpDtype.STORED}
# vLLM's fp8_per_token_head is one byte an element (vllm/utils/torch_utils.py STR_DTYPE_TO_TORCH_DTYPE: torch.uint8,
# 0.20.2 and 0.34.0); its scales are added by core.serving.kv.per_token_head_scale_bytes.
KV_BYTES: Final[dict[KvDtype, float]] = {k: ELEMENT_BYTES[k.value.removesuffix("_per_token_head")] for k in KvDtype}
DENSE_BYTES: Final[dict[WeightFormat, float]] = {
    w: ELEMENT_BYTES[w.value] for w in (WeightFormat.BF16, WeightFormat.FP16, WeightFormat.FP32)
}
HALF: Final = ELEMENT_BYTES["bf16"]  # what quantisation leaves in 16 bits (embeddings, head, norms)

# --- which dtype a matmul produces -----------------------------------------------------
AUTOCAST_DTYPE: Final = {Autocast.BF16: Dtype.BF16, Autocast.FP16: Dtype.FP16}


def compute_dtype(model: Dtype, autocast: Autocast) -> Dtype:
    """The dtype matmuls run in and produce: the autocast dtype when autocast runs, else the
    dtype the model is loaded in (torch.autocast casts matmul inputs to its dtype; without it a
    matmul runs in its operands' dtype)."""
    return AUTOCAST_DTYPE[autocast] if autocast is not Autocast.NONE else model


# Tensor-core rate a served weight format runs at: FP8 checkpoints run W8A8 on FP8 tensor
# cores (vLLM Fp8LinearMethod); int4 / NF4 / int8 weights are dequantised to 16 bits for the
# matmul (bf16 unless the checkpoint is fp16 or fp32).
_SERVED_MATMUL: Final = {WeightFormat.FP8: "fp8", WeightFormat.FP16: "fp16", WeightFormat.FP32: "fp32"}


def matmul_dtype(fmt: WeightFormat) -> str:
    """The card rate (a key of :meth:`core.catalogue.GpuSpec.peak_tflops`) served ``fmt`` runs at."""
    return _SERVED_MATMUL.get(fmt, "bf16")


# --- quantised storage -----------------------------------------------------------------
# NF4/FP4 (bitsandbytes, QLoRA): 4 bits per weight in blocks of 64 with one absmax per
# block; double quantisation stores the absmax in 8 bits with one float32 constant per 256
# absmax values (Dettmers et al. 2023, arXiv:2305.14314, section 3).
NF4_BLOCK: Final = 64
NF4_DQ_BLOCK: Final = 256
# LLM.int8 (bitsandbytes Int8Params): int8 weights plus one float32 scale per output row
# (Dettmers et al. 2022, arXiv:2208.07339).
INT8_ROW_SCALE_BYTES: Final = 4
# AWQ and GPTQ int4 (AutoAWQ / AutoGPTQ checkpoints as vLLM loads them): 4-bit weights,
# one fp16 scale and one 4-bit zero point per group of 128 input rows
# (qweight int32-packed, scales fp16 [in/128, out], qzeros int32-packed [in/128, out/8]).
INT4_GROUP: Final = 128
INT4_SCALE_BYTES: Final = 2.0
INT4_ZERO_BYTES: Final = 0.5
# GPTQ int8 (AutoGPTQ's packing, as Qwen's -GPTQ-Int8 checkpoints store it and as AutoGPTQ v0.6.0
# auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py QuantLinear registers its buffers for bits = 8):
# qweight int32 [in / 4, out] (1 byte a weight), qzeros int32 [in / 128, out / 4] (one 8-bit zero a
# group and column), scales fp16 [in / 128, out], g_idx int32 [in]. vLLM's GPTQMarlinConfig maps
# (8 bits, sym) to uint8b128 beside (4, sym) uint4b8 (model_executor/layers/quantization/gptq_marlin.py
# TYPE_MAP): after loading the Marlin repack keeps qweight (same bytes) and scales and replaces qzeros
# and, without act-order, g_idx by empty tensors (core.serving.gptq.after_loading_delta).
GPTQ8_WEIGHT_BYTES: Final = ELEMENT_BYTES["int8"]
GPTQ8_ZERO_BYTES: Final = 1.0  # one 8-bit zero per group and output column, four to an int32
GPTQ_G_IDX_BYTES: Final = 4  # int32 per input row of each quantised matrix
# FP8 checkpoints (vLLM Fp8LinearMethod): 1 byte per weight, one float32 scale per tensor.
FP8_SCALE_BYTES: Final = 4


def nf4_bytes_per_weight(double_quant: bool = True) -> float:
    half_byte = ELEMENT_BYTES["nf4"]
    if double_quant:
        return half_byte + 1 / NF4_BLOCK + 4 / (NF4_BLOCK * NF4_DQ_BLOCK)
    return half_byte + 4 / NF4_BLOCK


def int4_group_bytes_per_weight() -> float:
    """4 bits + (fp16 scale + 4-bit zero) per 128 weights = 0.5 + 2.5/128 bytes."""
    return ELEMENT_BYTES["int4"] + (INT4_SCALE_BYTES + INT4_ZERO_BYTES) / INT4_GROUP


def gptq_int8_bytes_per_weight(zeros: bool = True) -> float:
    """1 byte + an fp16 scale (and, as stored, an 8-bit zero) per 128 weights: 1 + 3/128 bytes as the
    checkpoint stores them, 1 + 2/128 once a Marlin kernel has dropped the zeros."""
    return GPTQ8_WEIGHT_BYTES + (INT4_SCALE_BYTES + (GPTQ8_ZERO_BYTES if zeros else 0.0)) / INT4_GROUP


def matrix_input_rows(model: ModelSpec) -> int:
    """Input rows of every quantised matrix (one g_idx entry each in a GPTQ checkpoint): the attention
    projections and every expert's MLP matrices of each block."""
    shapes = model.linear_shapes()
    attention = sum(shapes[name][0] for name in ("q_proj", "k_proj", "v_proj", "o_proj"))
    mlp = sum(n_in for name, (n_in, _) in shapes.items() if name not in ("q_proj", "k_proj", "v_proj", "o_proj"))
    return model.num_layers * (attention + max(1, model.num_experts) * mlp)


def gptq_int8_matrix_bytes(model: ModelSpec, quantised: int) -> float:
    """The checkpoint's bytes of ``quantised`` matrix weights in GPTQ int8: qweight, scales, qzeros
    and each matrix's g_idx."""
    return quantised * gptq_int8_bytes_per_weight() + matrix_input_rows(model) * GPTQ_G_IDX_BYTES


def matrix_output_rows(model: ModelSpec) -> int:
    """Output rows of every quantised matrix (one int8 scale each)."""
    return model.num_layers * sum(out for _, out in model.linear_shapes().values())


def quantised_matrix_bytes(model: ModelSpec, fmt: WeightFormat, quantised: int, *, double_quant: bool = True) -> float:
    """Bytes of ``quantised`` matrix weights stored in ``fmt`` with their scales."""
    if fmt is WeightFormat.INT8:
        return quantised * ELEMENT_BYTES["int8"] + matrix_output_rows(model) * INT8_ROW_SCALE_BYTES
    if fmt is WeightFormat.NF4:
        return quantised * nf4_bytes_per_weight(double_quant)
    if fmt in (WeightFormat.AWQ_INT4, WeightFormat.GPTQ_INT4):
        return quantised * int4_group_bytes_per_weight()
    if fmt is WeightFormat.GPTQ_INT8:
        return gptq_int8_matrix_bytes(model, quantised)
    if fmt is WeightFormat.FP8:
        return quantised * ELEMENT_BYTES["fp8"] + FP8_SCALE_BYTES * model.num_layers * len(model.linear_shapes())
    return quantised * DENSE_BYTES[fmt]


def mlp_matrix_params(model: ModelSpec) -> int:
    """The MLP (every expert's) projection matrices: what an MXFP4 checkpoint stores in 4 bits."""
    per_expert = (3 if model.gated_mlp else 2) * model.hidden_size * model.intermediate_size
    return min(model.total_params(), round(model.num_layers * model.num_experts * per_expert * model.params_scale))


def weight_bytes(model: ModelSpec, total_params: int, fmt: WeightFormat) -> float:
    """Stored weights: quantised formats cover the blocks' matrices; embeddings, the
    output head and norms stay in 16 bits (bitsandbytes, AWQ, GPTQ and vLLM's FP8 all
    leave ``lm_head`` and ``embed_tokens`` unquantised by default). MXFP4 covers the experts'
    MLP matrices only: gpt-oss keeps attention, router, embeddings and head in bf16 (its
    config's ``quantization_config.modules_to_not_convert``)."""
    if fmt in DENSE_BYTES:
        return total_params * DENSE_BYTES[fmt]
    if fmt is WeightFormat.MXFP4:
        mlp = mlp_matrix_params(model)
        return mlp * mxfp4_bytes_per_weight() + (total_params - mlp) * HALF
    quantised = model.stored_matmul_params()
    return quantised_matrix_bytes(model, fmt, quantised) + (total_params - quantised) * HALF


# --- MXFP4 (OCP Microscaling FP4, as gpt-oss checkpoints store their experts) ----------------
# 32 E2M1 values (4 bits each) share one E8M0 scale byte: ggml's block_mxfp4 is
# ``uint8_t e; uint8_t qs[QK_MXFP4/2]`` with QK_MXFP4 = 32 (ggml/src/ggml-common.h,
# ggml-org/llama.cpp 01243c58), the layout vLLM's Mxfp4MoEMethod allocates too (uint8 weights
# of hidden/2 bytes per row and one uint8 scale per 32).
MXFP4_BLOCK: Final = 32
# MX training (MXFP8) scales blocks of the same 32 elements, one E8M0 byte each: torchao's (0.13.0
# torchao/prototype/mx_formats/config.py MXLinearConfig ``block_size: int = 32``) and Transformer Engine's
# (TE v2.12 pytorch/tensor/mxfp8_tensor.py, core.parallel.state's cached weights).
MX_BLOCK: Final = 32


def mxfp4_bytes_per_weight() -> float:
    return ELEMENT_BYTES["fp4"] + 1 / MXFP4_BLOCK


# --- GGUF: llama.cpp's storage types ----------------------------------------------------------
class GgmlType(StrEnum):
    """The storage type of one tensor in a GGUF file (``enum ggml_type``)."""

    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    Q4_0 = "q4_0"
    Q4_1 = "q4_1"
    Q5_0 = "q5_0"
    Q5_1 = "q5_1"
    Q8_0 = "q8_0"
    Q2_K = "q2_k"
    Q3_K = "q3_k"
    Q4_K = "q4_k"
    Q5_K = "q5_k"
    Q6_K = "q6_k"
    IQ1_S = "iq1_s"
    IQ1_M = "iq1_m"
    IQ2_XXS = "iq2_xxs"
    IQ2_XS = "iq2_xs"
    IQ2_S = "iq2_s"
    IQ3_XXS = "iq3_xxs"
    IQ3_S = "iq3_s"
    IQ4_NL = "iq4_nl"
    IQ4_XS = "iq4_xs"
    MXFP4 = "mxfp4"


# (values per block, bytes per block), each the struct of ggml/src/ggml-common.h at
# ggml-org/llama.cpp commit 01243c587feceaa5d6a6c2305535ef2f549c48b8 (its static_asserts give
# the sizes): ggml_half is 2 bytes, QK_K = 256.
GGML_BLOCKS: Final[dict[GgmlType, tuple[int, int]]] = {
    GgmlType.F32: (1, 4),
    GgmlType.F16: (1, 2),
    GgmlType.BF16: (1, 2),
    GgmlType.Q4_0: (32, 2 + 16),  # d, qs[16]
    GgmlType.Q4_1: (32, 2 + 2 + 16),  # d, m, qs[16]
    GgmlType.Q5_0: (32, 2 + 4 + 16),  # d, qh[4], qs[16]
    GgmlType.Q5_1: (32, 2 + 2 + 4 + 16),  # d, m, qh[4], qs[16]
    GgmlType.Q8_0: (32, 2 + 32),  # d, qs[32]
    GgmlType.Q2_K: (256, 16 + 64 + 2 + 2),  # scales[16], qs[64], d, dmin: 2.625 bits
    GgmlType.Q3_K: (256, 32 + 64 + 12 + 2),  # hmask[32], qs[64], scales[12], d: 3.4375 bits
    GgmlType.Q4_K: (256, 2 + 2 + 12 + 128),  # d, dmin, scales[12], qs[128]: 4.5 bits
    GgmlType.Q5_K: (256, 2 + 2 + 12 + 32 + 128),  # d, dmin, scales[12], qh[32], qs[128]: 5.5 bits
    GgmlType.Q6_K: (256, 128 + 64 + 16 + 2),  # ql[128], qh[64], scales[16], d: 6.5625 bits
    GgmlType.IQ1_S: (256, 2 + 32 + 16),  # d, qs[32], qh[8] (uint16): 1.5625 bits
    GgmlType.IQ1_M: (256, 32 + 16 + 8),  # qs[32], qh[16], scales[8]: 1.75 bits
    GgmlType.IQ2_XXS: (256, 2 + 64),  # d, qs[32] (uint16): 2.0625 bits
    GgmlType.IQ2_XS: (256, 2 + 64 + 8),  # d, qs[32] (uint16), scales[8]: 2.3125 bits
    GgmlType.IQ2_S: (256, 2 + 64 + 8 + 8),  # d, qs[64], qh[8], scales[8]: 2.5625 bits
    GgmlType.IQ3_XXS: (256, 2 + 96),  # d, qs[96]: 3.0625 bits
    GgmlType.IQ3_S: (256, 2 + 64 + 8 + 32 + 4),  # d, qs[64], qh[8], signs[32], scales[4]: 3.4375 bits
    GgmlType.IQ4_NL: (32, 2 + 16),  # d, qs[16]
    GgmlType.IQ4_XS: (256, 2 + 2 + 4 + 128),  # d, scales_h, scales_l[4], qs[128]: 4.25 bits
    GgmlType.MXFP4: (MXFP4_BLOCK, 1 + 16),  # e (E8M0), qs[16]
}


def ggml_row_bytes(kind: GgmlType, row: int) -> float:
    """Bytes of one row of ``row`` values stored as ``kind`` (ggml_row_size)."""
    values, size = GGML_BLOCKS[kind]
    return row / values * size


class GgufQuant(StrEnum):
    """The file types ``llama-quantize`` writes (``enum llama_ftype``): each a default tensor
    type and a mix of others per tensor (core.serving.llamacpp applies the mix)."""

    F32 = "F32"
    F16 = "F16"
    BF16 = "BF16"
    Q8_0 = "Q8_0"
    Q6_K = "Q6_K"
    Q5_K_M = "Q5_K_M"
    Q5_K_S = "Q5_K_S"
    Q5_1 = "Q5_1"
    Q5_0 = "Q5_0"
    Q4_K_M = "Q4_K_M"
    Q4_K_S = "Q4_K_S"
    Q4_1 = "Q4_1"
    Q4_0 = "Q4_0"
    IQ4_XS = "IQ4_XS"
    IQ4_NL = "IQ4_NL"
    Q3_K_L = "Q3_K_L"
    Q3_K_M = "Q3_K_M"
    Q3_K_S = "Q3_K_S"
    IQ3_M = "IQ3_M"
    IQ3_S = "IQ3_S"
    IQ3_XS = "IQ3_XS"
    IQ3_XXS = "IQ3_XXS"
    Q2_K = "Q2_K"
    Q2_K_S = "Q2_K_S"
    IQ2_M = "IQ2_M"
    IQ2_S = "IQ2_S"
    IQ2_XS = "IQ2_XS"
    IQ2_XXS = "IQ2_XXS"
    IQ1_M = "IQ1_M"
    IQ1_S = "IQ1_S"
    MXFP4_MOE = "MXFP4_MOE"


GGUF_LABELS: Final = {q: q.value for q in GgufQuant}
# The file types that store every weight as floats: no per-tensor mix, no quantised matmul.
GGUF_FLOAT: Final = frozenset({GgufQuant.F32, GgufQuant.F16, GgufQuant.BF16})


class CacheType(StrEnum):
    """llama.cpp's KV cache types (``-ctk`` / ``-ctv``, common/arg.cpp ``kv_cache_types``)."""

    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    Q8_0 = "q8_0"
    Q5_1 = "q5_1"
    Q5_0 = "q5_0"
    Q4_1 = "q4_1"
    Q4_0 = "q4_0"
    IQ4_NL = "iq4_nl"


CACHE_GGML: Final = {c: GgmlType(c.value) for c in CacheType}


class LlamaCppBackend(StrEnum):
    """The ggml backend llama.cpp runs the GPU layers with (llama-bench's ``backend`` column)."""

    NATIVE = "native"  # the card's own: ggml-cuda on NVIDIA (and HIP on AMD), ggml-metal on Apple
    VULKAN = "vulkan"  # ggml-vulkan, on any card with a Vulkan driver

"""Serving engines, weight formats and KV-cache dtypes, and the bytes each stores.

The storage of quantised weights lives here once; training's QLoRA accounting
(:mod:`core.training.detailed`) uses the same functions.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from core.model import ModelSpec


class Engine(StrEnum):
    HF = "hf"  # Hugging Face transformers model.generate(): one static batch
    VLLM = "vllm"  # vLLM: paged KV pool sized at start-up, continuous batching
    SGLANG = "sglang"  # SGLang: token pool of mem_fraction_static less the weights


class WeightFormat(StrEnum):
    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"
    FP8 = "fp8"  # per-tensor / per-channel scaled float8 (vLLM --quantization fp8)
    INT8 = "int8"  # LLM.int8 (bitsandbytes) / W8A16 with one scale per output row
    AWQ_INT4 = "awq-int4"
    GPTQ_INT4 = "gptq-int4"
    NF4 = "nf4"  # bitsandbytes 4-bit NormalFloat with double quantisation


class KvDtype(StrEnum):
    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"
    FP8 = "fp8"  # vLLM --kv-cache-dtype fp8 (e4m3 / e5m2)
    INT8 = "int8"  # HF QuantizedCache / SGLang int8
    INT4 = "int4"  # HF QuantizedCache (quanto) 4-bit


ENGINE_LABELS: Final = {Engine.HF: "Hugging Face generate", Engine.VLLM: "vLLM", Engine.SGLANG: "SGLang"}
WEIGHT_LABELS: Final = {
    WeightFormat.BF16: "bf16",
    WeightFormat.FP16: "fp16",
    WeightFormat.FP32: "fp32",
    WeightFormat.FP8: "FP8",
    WeightFormat.INT8: "int8",
    WeightFormat.AWQ_INT4: "AWQ int4 (g128)",
    WeightFormat.GPTQ_INT4: "GPTQ int4 (g128)",
    WeightFormat.NF4: "bitsandbytes NF4",
}
# Bytes of one cached key or value element (IEEE 754 for fp32/fp16, bf16 by definition,
# 8 and 4 bits for the quantised caches; their per-token scales are below 1 % and ignored).
KV_BYTES: Final = {
    KvDtype.BF16: 2.0,
    KvDtype.FP16: 2.0,
    KvDtype.FP32: 4.0,
    KvDtype.FP8: 1.0,
    KvDtype.INT8: 1.0,
    KvDtype.INT4: 0.5,
}
HALF: Final = 2.0  # bytes of what quantisation leaves in 16 bits (embeddings, head, norms)

# --- quantised storage ---------------------------------------------------------------
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
# FP8 checkpoints (vLLM Fp8LinearMethod): 1 byte per weight, one float32 scale per tensor.


def nf4_bytes_per_weight(double_quant: bool = True) -> float:
    if double_quant:
        return 0.5 + 1 / NF4_BLOCK + 4 / (NF4_BLOCK * NF4_DQ_BLOCK)
    return 0.5 + 4 / NF4_BLOCK


def int4_group_bytes_per_weight() -> float:
    """4 bits + (fp16 scale + 4-bit zero) per 128 weights = 0.5 + 2.5/128 bytes."""
    return 0.5 + (INT4_SCALE_BYTES + INT4_ZERO_BYTES) / INT4_GROUP


def matrix_output_rows(model: ModelSpec) -> int:
    """Output rows of every quantised matrix (one int8 scale each)."""
    return model.num_layers * sum(out for _, out in model.linear_shapes().values())


def quantised_matrix_bytes(model: ModelSpec, fmt: WeightFormat, quantised: int, *, double_quant: bool = True) -> float:
    """Bytes of ``quantised`` matrix weights stored in ``fmt`` with their scales."""
    if fmt is WeightFormat.INT8:
        return quantised * 1.0 + matrix_output_rows(model) * INT8_ROW_SCALE_BYTES
    if fmt is WeightFormat.NF4:
        return quantised * nf4_bytes_per_weight(double_quant)
    if fmt in (WeightFormat.AWQ_INT4, WeightFormat.GPTQ_INT4):
        return quantised * int4_group_bytes_per_weight()
    if fmt is WeightFormat.FP8:
        return quantised * 1.0 + 4 * model.num_layers * len(model.linear_shapes())
    return quantised * DENSE_BYTES[fmt]


DENSE_BYTES: Final = {WeightFormat.BF16: 2.0, WeightFormat.FP16: 2.0, WeightFormat.FP32: 4.0}


def weight_bytes(model: ModelSpec, total_params: int, fmt: WeightFormat) -> float:
    """Stored weights: quantised formats cover the blocks' matrices; embeddings, the
    output head and norms stay in 16 bits (bitsandbytes, AWQ, GPTQ and vLLM's FP8 all
    leave ``lm_head`` and ``embed_tokens`` unquantised by default)."""
    if fmt in DENSE_BYTES:
        return total_params * DENSE_BYTES[fmt]
    quantised = model.stored_matmul_params()
    return quantised_matrix_bytes(model, fmt, quantised) + (total_params - quantised) * HALF

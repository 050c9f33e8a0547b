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
    "HALF",
    "KV_BYTES",
    "MP_BYTES",
    "WEIGHT_LABELS",
    "Autocast",
    "Dtype",
    "KvDtype",
    "MpDtype",
    "Quant",
    "WeightFormat",
    "compute_dtype",
    "int4_group_bytes_per_weight",
    "matmul_dtype",
    "matrix_output_rows",
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
    NF4 = "nf4"  # bitsandbytes 4-bit NormalFloat with double quantisation


class KvDtype(StrEnum):
    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"
    FP8 = "fp8"  # vLLM --kv-cache-dtype fp8 (e4m3 / e5m2)
    INT8 = "int8"  # HF QuantizedCache / SGLang int8
    INT4 = "int4"  # HF QuantizedCache (quanto) 4-bit


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
    WeightFormat.NF4: "bitsandbytes NF4",
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
# The same table by each enum: a tensor in a training dtype, an FSDP2 cast, a KV element
# (the quantised caches' per-token scales are below 1 % and left out), a dense served weight.
DTYPE_BYTES: Final[dict[Dtype, float]] = {d: ELEMENT_BYTES[d.value] for d in Dtype}
MP_BYTES: Final[dict[MpDtype, float]] = {m: ELEMENT_BYTES[m.value] for m in MpDtype if m is not MpDtype.STORED}
KV_BYTES: Final[dict[KvDtype, float]] = {k: ELEMENT_BYTES[k.value] for k in KvDtype}
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
    if fmt is WeightFormat.FP8:
        return quantised * ELEMENT_BYTES["fp8"] + FP8_SCALE_BYTES * model.num_layers * len(model.linear_shapes())
    return quantised * DENSE_BYTES[fmt]


def weight_bytes(model: ModelSpec, total_params: int, fmt: WeightFormat) -> float:
    """Stored weights: quantised formats cover the blocks' matrices; embeddings, the
    output head and norms stay in 16 bits (bitsandbytes, AWQ, GPTQ and vLLM's FP8 all
    leave ``lm_head`` and ``embed_tokens`` unquantised by default)."""
    if fmt in DENSE_BYTES:
        return total_params * DENSE_BYTES[fmt]
    quantised = model.stored_matmul_params()
    return quantised_matrix_bytes(model, fmt, quantised) + (total_params - quantised) * HALF

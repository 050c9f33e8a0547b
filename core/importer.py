"""Import a model from a local ``config.json`` or a Hugging Face model folder.

Only data is read: ``config.json`` as JSON and the JSON headers of ``*.safetensors``
files (never their tensor data, never ``*.bin``/``*.pt`` pickles, never ``*.py``), so a
folder cannot run code through this path.
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from core.errors import PlanError, PlanFileError
from core.hfconfig import model_from_hf_config
from core.model import MAX_NAME_CHARS, ModelSpec

MAX_CONFIG_BYTES: Final = 2_000_000
# The safetensors format caps its header at 100 MB (huggingface/safetensors, lib.rs
# MAX_HEADER_SIZE); anything larger is refused before it is read.
MAX_HEADER_BYTES: Final = 100_000_000
MAX_SHARDS: Final = 10_000
MAX_TENSOR_RANK: Final = 64  # real tensors have a handful of dimensions
# Bytes per element of safetensors dtypes (safetensors/src/tensor.rs Dtype::size).
SAFETENSORS_DTYPE_BYTES: Final = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "C64": 8,
    "F4": 1,
    "F6_E2M3": 1,
    "F6_E3M2": 1,
}
# Sub-byte dtypes (safetensors Dtype::bitsize); every other dtype is 8 × its byte size.
_DTYPE_BITS: Final = {"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}
# Buffers some checkpoints store beside the parameters: GPT-2's causal-mask tables
# (h.N.attn.bias, h.N.attn.masked_bias) and rotary inv_freq tables.
_BUFFER_SUFFIXES: Final = (".attn.masked_bias", ".rotary_emb.inv_freq")


@dataclass(frozen=True)
class CheckpointCount:
    params: int
    buffers: int
    bytes_by_dtype: dict[str, int]
    params_by_dtype: dict[str, int]
    files: int


def _is_buffer(name: str, shape: list[int]) -> bool:
    if name.endswith(_BUFFER_SUFFIXES):
        return True
    return name.endswith(".attn.bias") and len(shape) == 4  # GPT-2's causal mask


def read_safetensors_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON header of a safetensors file, checked against the file's real size."""
    where = str(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise PlanFileError(where, "is too short to be a safetensors file")
            (length,) = struct.unpack("<Q", prefix)
            if length > MAX_HEADER_BYTES or length > size - 8:
                raise PlanFileError(
                    where, f"claims a {length:,}-byte header but the file has {size - 8:,} bytes after its prefix"
                )
            raw = handle.read(length)
    except OSError as exc:
        raise PlanFileError(where, f"cannot be read ({exc.strerror or exc})") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # bad UTF-8, bad JSON, an integer of thousands of digits
        raise PlanFileError(where, "has a header that is not valid JSON") from None
    if not isinstance(header, dict):
        raise PlanFileError(where, "has a header that is not a JSON object")
    data_size = size - 8 - length
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict):
            raise PlanFileError(where, f"tensor {name!r} has no description")
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in SAFETENSORS_DTYPE_BYTES:
            raise PlanFileError(where, f"tensor {name!r} has unknown dtype {dtype!r}")
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_TENSOR_RANK
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
            or not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        ):
            raise PlanFileError(where, f"tensor {name!r} has a malformed shape or offsets")
        start, end = offsets
        if not 0 <= start <= end <= data_size:
            raise PlanFileError(where, f"tensor {name!r} lies outside the file (offsets {start}..{end})")
        # As safetensors itself validates (tensor.rs, TensorInfo): the byte range must
        # hold exactly the elements the shape claims, so a shape cannot inflate the count.
        elements = math.prod(shape)
        if elements * _DTYPE_BITS.get(dtype, 8 * SAFETENSORS_DTYPE_BYTES[dtype]) != 8 * (end - start):
            raise PlanFileError(
                where, f"tensor {name!r}: its shape does not match its {end - start:,} bytes of {dtype}"
            )
    return header


def count_safetensors(paths: list[Path]) -> CheckpointCount:
    params = buffers = 0
    by_dtype_bytes: dict[str, int] = {}
    by_dtype_params: dict[str, int] = {}
    for path in paths:
        header = read_safetensors_header(path)
        for name, info in header.items():
            if name == "__metadata__":
                continue
            elements = 1
            for dim in info["shape"]:
                elements *= dim
            if _is_buffer(name, info["shape"]):
                buffers += elements
                continue
            params += elements
            dtype = info["dtype"]
            by_dtype_params[dtype] = by_dtype_params.get(dtype, 0) + elements
            start, end = info["data_offsets"]
            by_dtype_bytes[dtype] = by_dtype_bytes.get(dtype, 0) + (end - start)
    return CheckpointCount(params, buffers, by_dtype_bytes, by_dtype_params, len(paths))


def _read_config(path: Path) -> dict[str, Any]:
    where = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise PlanFileError(where, f"is {size:,} bytes; a config.json is a few kB")
        raw = path.read_bytes()
    except OSError as exc:
        raise PlanFileError(where, f"cannot be read ({exc.strerror or exc})") from None
    try:
        config = json.loads(raw.decode("utf-8-sig"))  # a byte-order mark is harmless
    except UnicodeDecodeError:
        raise PlanFileError(where, "is not UTF-8 text") from None
    except RecursionError:
        raise PlanFileError(where, "is nested too deeply to be a config.json") from None
    except ValueError as exc:  # JSONDecodeError, or an integer of thousands of digits
        raise PlanFileError(where, f"is not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise PlanFileError(where, "is not a JSON object")
    return config


@dataclass(frozen=True)
class ImportedModel:
    spec: ModelSpec
    source: str
    checkpoint: CheckpointCount | None


def import_model(path: str | os.PathLike[str]) -> ImportedModel:
    """Read a ``config.json`` file or a model folder; errors are :class:`PlanFileError`."""
    target = Path(path)
    folder = target if target.is_dir() else target.parent
    config_path = target / "config.json" if target.is_dir() else target
    if not config_path.is_file():
        raise PlanFileError(str(target), "has no config.json")
    config = _read_config(config_path)
    given = config.get("_name_or_path")
    label = given.strip() if isinstance(given, str) and given.strip() else (folder.name or "imported model")
    try:
        spec = model_from_hf_config(config, name=label[:MAX_NAME_CHARS])
    except PlanError as exc:
        raise PlanFileError(str(config_path), str(exc)) from None
    checkpoint = None
    if target.is_dir():
        shards = sorted(p for p in folder.glob("*.safetensors") if p.is_file())[:MAX_SHARDS]
        if shards:
            checkpoint = count_safetensors(shards)
            if checkpoint.params:
                try:
                    spec = replace(spec, params_override=checkpoint.params)
                except PlanError as exc:
                    raise PlanFileError(str(folder), f"its safetensors files claim {exc}") from None
    return ImportedModel(spec=spec, source=str(config_path), checkpoint=checkpoint)

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
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO, Final

from core.errors import ImportCancelled, PlanError, PlanFileError
from core.files.fileio import DOORS, open_regular, other_door_of, read_regular_file
from core.hfconfig import model_from_hf_config
from core.model import MAX_NAME_CHARS, ModelSpec, parse_skip_modules

MAX_CONFIG_BYTES: Final = 2_000_000
# The safetensors format caps its header at 100 MB (huggingface/safetensors, lib.rs
# MAX_HEADER_SIZE); anything larger is refused before it is read.
MAX_HEADER_BYTES: Final = 100_000_000
MAX_SHARDS: Final = 10_000
# Budgets over all the shards of one model, so that many files cannot add up to what one
# may not be. Headers: one format-maximum header's worth in all. Tensors: the largest open
# checkpoints list about 10⁵ (Kimi K2's config, 61 layers × 384 routed experts × 3
# matrices × weight and scale ≈ 1.4 × 10⁵); 5 × 10⁵ leaves room for 4-bit packings that
# store four tensors per matrix, and parses in a few seconds where 1.67 × 10⁶ took 15 s.
MAX_TOTAL_HEADER_BYTES: Final = 100_000_000
MAX_TOTAL_TENSORS: Final = 500_000
_CANCEL_CHECK_EVERY: Final = 4096  # tensors validated between two looks at the Cancel button
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


Progress = Callable[[int, int], None]  # (shards read, shards in all)
Cancelled = Callable[[], bool]


@dataclass
class HeaderBudget:
    """What is still allowed to be read for one model: header bytes and tensors."""

    header_bytes: int
    tensors: int

    @classmethod
    def per_model(cls) -> HeaderBudget:
        return cls(MAX_TOTAL_HEADER_BYTES, MAX_TOTAL_TENSORS)


def _count_key(handle: BinaryIO, length: int, key: bytes, chunk: int = 1 << 20) -> int:
    """Occurrences of ``key`` in the next ``length`` bytes of ``handle``, read a chunk at a time."""
    count, tail, left = 0, b"", length
    while left > 0:
        block = handle.read(min(chunk, left))
        if not block:
            break
        left -= len(block)
        data = tail + block
        count += data.count(key)
        tail = data[-(len(key) - 1) :]  # shorter than the key: nothing in it is counted twice
    return count


def read_safetensors_header(
    path: str | os.PathLike[str], budget: HeaderBudget | None = None, cancelled: Cancelled | None = None
) -> dict[str, Any]:
    """The JSON header of a safetensors file, checked against the file's real size and,
    when given, against what ``budget`` still allows (which it then takes off)."""
    where = str(path)
    budget = budget if budget is not None else HeaderBudget.per_model()
    raw, data_size = _read_header_bytes(path, budget, cancelled)
    budget.header_bytes -= len(raw)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # bad UTF-8, bad JSON, an integer of thousands of digits
        raise PlanFileError(where, "has a header that is not valid JSON") from None
    if not isinstance(header, dict):
        raise PlanFileError(where, "has a header that is not a JSON object")
    budget.tensors -= len(header) - ("__metadata__" in header)
    for index, (name, info) in enumerate(header.items()):
        if index % _CANCEL_CHECK_EVERY == _CANCEL_CHECK_EVERY - 1 and cancelled is not None and cancelled():
            raise ImportCancelled(where)
        if name != "__metadata__":
            _check_tensor(where, name, info, data_size)
    return header


def _read_header_bytes(
    path: str | os.PathLike[str], budget: HeaderBudget, cancelled: Cancelled | None
) -> tuple[bytes, int]:
    """The header's raw bytes and the size of the data after it, read only once its length
    fits the format, the file and the budget, and its tensors (counted unparsed) the budget."""
    where = str(path)
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise PlanFileError(where, "is too short to be a safetensors file")
            (length,) = struct.unpack("<Q", prefix)
            _check_header_length(where, length, size, budget)
            # Every tensor entry has a "data_offsets" key: counting the key in the raw bytes
            # (in C, a megabyte at a time) bounds the tensors from above before json.loads
            # builds a dict for each, and before the whole header is held in memory.
            listed = _count_key(handle, length, b'"data_offsets"')
            if listed > budget.tensors:
                raise PlanFileError(
                    where,
                    f"lists about {listed:,} tensors, which takes the model past {MAX_TOTAL_TENSORS:,} tensors, "
                    "the most read for one model",
                )
            if cancelled is not None and cancelled():
                raise ImportCancelled(where)
            handle.seek(8)
            raw = handle.read(length)
    except OSError as exc:
        raise PlanFileError(where, f"cannot be read ({exc.strerror or exc})") from None
    return raw, size - 8 - length


def _check_header_length(where: str, length: int, size: int, budget: HeaderBudget) -> None:
    """A header no longer than the format allows, the file holds and the model's budget leaves."""
    if length > MAX_HEADER_BYTES:
        raise PlanFileError(
            where, f"has a {length:,}-byte header; the safetensors format allows at most {MAX_HEADER_BYTES:,}"
        )
    if length > size - 8:
        raise PlanFileError(
            where, f"claims a {length:,}-byte header but the file has {size - 8:,} bytes after its prefix"
        )
    if length > budget.header_bytes:
        raise PlanFileError(
            where,
            f"has a {length:,}-byte header, which takes the model's safetensors headers past "
            f"{MAX_TOTAL_HEADER_BYTES:,} bytes, the most read for one model",
        )


def _check_tensor(where: str, name: str, info: object, data_size: int) -> None:
    """One tensor's entry: a known dtype, a sane shape, offsets inside the data, and a byte
    range that holds exactly the elements the shape claims."""
    if not isinstance(info, dict):
        raise PlanFileError(where, f"tensor {name!r} has no description")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in SAFETENSORS_DTYPE_BYTES:
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
        raise PlanFileError(where, f"tensor {name!r}: its shape does not match its {end - start:,} bytes of {dtype}")


def count_safetensors(
    paths: list[Path], progress: Progress | None = None, cancelled: Cancelled | None = None
) -> CheckpointCount:
    """Parameters and bytes by dtype over all shards, within one :class:`HeaderBudget`.

    ``progress(done, total)`` is called before the first shard and after each; when
    ``cancelled()`` turns true the read stops with :class:`ImportCancelled`.
    """
    params = buffers = 0
    by_dtype_bytes: dict[str, int] = {}
    by_dtype_params: dict[str, int] = {}
    budget = HeaderBudget.per_model()
    if progress is not None:
        progress(0, len(paths))
    for done, path in enumerate(paths, start=1):
        if cancelled is not None and cancelled():
            raise ImportCancelled(str(path))
        header = read_safetensors_header(path, budget, cancelled)
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
        if progress is not None:
            progress(done, len(paths))
    return CheckpointCount(params, buffers, by_dtype_bytes, by_dtype_params, len(paths))


def _read_config(path: Path) -> dict[str, Any]:
    where = str(path)
    raw = read_regular_file(path, MAX_CONFIG_BYTES, "a config.json")
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
    mine = other_door_of(config, "a model's config.json")  # `--config plan.json`: "config.model_type: None ..."
    if mine:
        raise PlanFileError(where, mine)
    if "peft_type" in config and "model_type" not in config:  # an adapter's config, by the model's door
        raise PlanFileError(
            where, f"is a PEFT adapter_config.json, not a model's config.json: {DOORS['launch config']}"
        )
    return config


@dataclass(frozen=True)
class ImportedModel:
    spec: ModelSpec
    source: str
    checkpoint: CheckpointCount | None
    # A pre-quantised bitsandbytes checkpoint's quantization_config.llm_int8_skip_modules, as the
    # plan's bnb_skip_modules reads it ("" when the config names none).
    skip_modules: str = ""

    @property
    def skip_note(self) -> str:
        """The sentence that says the import set the modules kept in 16 bits ("" when it did not)."""
        if not self.skip_modules:
            return ""
        return (
            f"{self.source}: quantization_config.llm_int8_skip_modules keeps {self.skip_modules} in 16 bits "
            "under a bitsandbytes base (the plan's modules kept in 16 bits)"
        )


def skip_modules_of(config: dict[str, Any], where: str) -> str:
    """``quantization_config.llm_int8_skip_modules`` of a bitsandbytes checkpoint's config.json, as a
    comma list (transformers' BitsAndBytesConfig reads the key from there when the checkpoint is
    loaded: huggingface/transformers 01ae98ae, utils/quantization_config.py ``BitsAndBytesConfig``,
    quantizers/quantizer_bnb_4bit.py). "" for another quantisation method or none."""
    quant = config.get("quantization_config")
    if not isinstance(quant, dict) or quant.get("quant_method", "bitsandbytes") != "bitsandbytes":
        return ""
    names = quant.get("llm_int8_skip_modules")
    if names is None:
        return ""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise PlanFileError(where, "quantization_config.llm_int8_skip_modules is not a list of module names")
    text = ",".join(n.strip() for n in names)
    try:
        parse_skip_modules(text)
    except PlanError as exc:
        raise PlanFileError(where, f"quantization_config.llm_int8_skip_modules: {exc}") from None
    return text


def import_model(
    path: str | os.PathLike[str], progress: Progress | None = None, cancelled: Cancelled | None = None
) -> ImportedModel:
    """Read a ``config.json`` file or a model folder; errors are :class:`PlanFileError`.

    Synchronous: the window runs it in a worker thread, passing ``progress`` (shards read,
    shards in all) and ``cancelled`` (its Cancel button), see :func:`count_safetensors`.
    """
    target = Path(path)
    try:
        is_folder = target.is_dir()
        folder = target if is_folder else target.parent
        config_path = target / "config.json" if is_folder else target
        has_config = config_path.is_file()
        shards = sorted(p for p in folder.glob("*.safetensors") if p.is_file())[:MAX_SHARDS] if is_folder else []
    except OSError as exc:  # a name over 255 bytes, a folder without search permission
        raise PlanFileError(str(target), f"cannot read the model ({exc.strerror or exc})") from None
    if not has_config:
        raise PlanFileError(str(target), "has no config.json")
    config = _read_config(config_path)
    given = config.get("_name_or_path")
    label = given.strip() if isinstance(given, str) and given.strip() else (folder.name or "imported model")
    try:
        spec = model_from_hf_config(config, name=label[:MAX_NAME_CHARS])
    except PlanError as exc:
        raise PlanFileError(str(config_path), str(exc)) from None
    checkpoint = None
    if shards:
        checkpoint = count_safetensors(shards, progress, cancelled)
        if checkpoint.params:
            # The shards hold an image-text checkpoint's vision tower too, which the spec counts apart
            # (ModelSpec.vision_params): the override is the language model's share.
            tower = spec.vision_params if checkpoint.params > spec.vision_params else 0
            language = checkpoint.params - tower
            try:
                spec = replace(spec, params_override=language)
            except PlanError as exc:
                raise PlanFileError(str(folder), f"its safetensors files claim {exc}") from None
    skip = skip_modules_of(config, str(config_path))
    return ImportedModel(spec=spec, source=str(config_path), checkpoint=checkpoint, skip_modules=skip)

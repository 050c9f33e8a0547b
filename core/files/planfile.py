"""The plan file: a versioned JSON document, saved atomically, read without executing.

``{"format": "vramplan-plan", "version": 4, "plan": {...}}``. Reading checks every key:
unknown keys, missing keys and wrong types raise :class:`PlanError` naming the field.
Older versions are migrated forward by :data:`MIGRATIONS`, one version at a time.

History: version 2 added ``plan.workload.eval_batch`` (0: evaluate with the training
micro-batch); a version 1 file is read as if it said 0. Version 3 added the precision
roles (``preset``, ``weight_dtype``, ``base_dtype``, ``adapter_dtype``, ``autocast``) and
``optimizer_impl``: a version 2 file's ``precision`` becomes the preset it always meant
(bf16-mixed → fp32-autocast-bf16, bf16 → pure-bf16, fp16-mixed → fp16-amp, fp32 → fp32,
fp16 → custom with fp16 storage) and its optimizer runs as foreach, what every estimate
before version 3 assumed, so a migrated plan estimates exactly as before. Version 4
moved the GPU count and sharding into ``plan.parallel`` (nodes, GPUs per node, strategy,
tensor / pipeline / context parallel degrees, offload, links).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Final, get_type_hints

from core.errors import PlanError, PlanFileError
from core.files.fileio import read_regular_file
from core.model import ModelSpec, model_from_dict
from core.plan import (
    PRECISION_ROLES,
    PRESET_ROLES,
    ROLE_FIELDS,
    Hardware,
    Inference,
    LessonSettings,
    LoraSettings,
    OptimizerImpl,
    Parallelism,
    Plan,
    Precision,
    Preset,
    Workload,
)
from core.units import finite_number

FORMAT: Final = "vramplan-plan"
VERSION: Final = 4
MAX_FILE_BYTES: Final = 5_000_000  # a plan is a few kB; refuse anything absurd before parsing
MAX_DEPTH: Final = 32

_NESTED: Final = {
    "lora": LoraSettings,
    "workload": Workload,
    "hardware": Hardware,
    "parallel": Parallelism,
    "inference": Inference,
    "lesson": LessonSettings,
}


# The serving inputs of issue 23: a file without them reads as vLLM 0.19 (the rules every earlier
# release of this program applied), the card's own link, and llama.cpp's defaults.
ISSUE_23_KEYS: Final = ("vllm_version", "link", "gguf_quant", "gpu_layers", "cache_type", "flash_attention", "ubatch")
# Keys that may be absent, read as the field's default. The serving fields added after
# version 2 (engine, parallelism, vLLM's scheduler limits) are optional so that files
# written before them read as "Hugging Face generate on one GPU", what they meant.
OPTIONAL_KEYS: Final = (
    frozenset(
        (Inference, name)
        for name in (
            "engine",
            "new_tokens",
            "tensor_parallel",
            "pipeline_parallel",
            "replicas",
            "gpu_memory_utilization",
            "max_num_seqs",
            "max_num_batched_tokens",
            "mem_fraction_static",
            # issue 23: the vLLM release, the serving link and llama.cpp's settings
            *ISSUE_23_KEYS,
        )
    )
    | frozenset(
        (Parallelism, f.name) for f in fields(Parallelism) if f.name not in ("nodes", "gpus_per_node", "strategy")
    )
    | frozenset((Plan, name) for name in ("checkpoint_policy", "checkpoint_every", "precision"))
)
# Of the parallelism (version 4), only the GPU count and the strategy must be written; the
# degrees and the frameworks' knobs default to one GPU's split and the frameworks' defaults.
# The checkpointing policy came later within version 4: a file without it means full
# checkpointing (or none, with ``checkpointing`` off), what every earlier file meant.
# ``precision`` is derived from the roles since version 3; files keep writing it (a reader
# of an older release requires it) and it is read by :func:`_with_file_precision`.


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, ModelSpec):
        return value.to_dict()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "plan": _plain(plan)}


def dumps(plan: Plan) -> str:
    return json.dumps(plan_to_dict(plan), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _convert(path: str, hint: Any, value: Any) -> Any:
    """Check ``value`` against a field's type and convert it (enums, tuples, nested)."""
    if isinstance(hint, type) and issubclass(hint, Enum):
        try:
            return hint(value)
        except ValueError:
            raise PlanError(path, value, "one of " + ", ".join(str(e.value) for e in hint)) from None
    if hint is bool:
        if not isinstance(value, bool):
            raise PlanError(path, value, "true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise PlanError(path, value, "an integer")
        return value
    if hint is float:
        if finite_number(value) is None:
            raise PlanError(path, value, "a finite number")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise PlanError(path, value, "a string")
        return value
    if hint == tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise PlanError(path, value, "a list of strings")
        return tuple(value)
    raise PlanError(path, value, f"a value of type {hint}")  # pragma: no cover - a field type we forgot


# Fields a file holds that the dataclass derives rather than takes.
_DERIVED: Final = frozenset({(Plan, "precision")})


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise PlanError(where, type(data).__name__, "a JSON object")
    hints = get_type_hints(cls)
    names = [f.name for f in fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise PlanError(f"{where}.{unknown[0]}", data[unknown[0]], "a known key", "unknown key")
    missing = [n for n in names if n not in data and (cls, n) not in OPTIONAL_KEYS]
    if missing:
        raise PlanError(f"{where}.{missing[0]}", None, "a value", "the key is missing")
    kwargs = {}
    for name in names:
        if name not in data or (cls, name) in _DERIVED:
            continue  # an optional key: the field's default; a derived one: read below
        path = f"{where}.{name}"
        if name == "model":
            kwargs[name] = model_from_dict(data[name], path)
        elif name in _NESTED:
            kwargs[name] = _build(_NESTED[name], data[name], path)
        else:
            kwargs[name] = _convert(path, hints[name], data[name])
    built = cls(**kwargs)
    if cls is Plan and "precision" in data:
        return _with_file_precision(built, _convert(f"{where}.precision", Precision, data["precision"]), where)
    return built


def _with_file_precision(plan: Plan, word: Precision, where: str) -> Plan:
    """The plan as a file that also names the old one-word precision meant it. The word
    agrees with the roles (every file this program wrote); or it is bf16-mixed, the old
    default, which follows the roles; or the file gave only the word (default preset and
    roles), and the word picks them, as a precision alone always did. Anything else
    contradicts the roles and is refused."""
    if word is plan.precision or word is Precision.BF16_MIXED:
        return plan
    if plan.preset is Preset.FP32_AUTOCAST_BF16 and plan.roles == PRESET_ROLES[Preset.FP32_AUTOCAST_BF16]:
        return plan.with_changes(precision=word)
    raise PlanError(f"{where}.precision", word.value, plan.precision.value, "it must describe the precision roles")


def _depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth, stopping early once past ``limit``."""
    stack = [(value, 1)]
    deepest = 0
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _v1_to_v2(document: dict[str, Any]) -> dict[str, Any]:
    """Version 2 added ``workload.eval_batch``; 0 keeps version 1's behaviour (the training micro-batch)."""
    migrated = dict(document, version=2)
    plan = document.get("plan")
    if isinstance(plan, Mapping) and isinstance(plan.get("workload"), Mapping):
        workload = dict(plan["workload"])
        workload.setdefault("eval_batch", 0)
        migrated["plan"] = dict(plan, workload=workload)
    return migrated  # anything else malformed is reported by the reader, naming the field


def _v2_to_v3(document: dict[str, Any]) -> dict[str, Any]:
    """Version 3 added the precision roles and the optimizer implementation (see the module doc)."""
    migrated = dict(document, version=3)
    plan = document.get("plan")
    if not isinstance(plan, Mapping):
        return migrated
    try:
        preset, roles = PRECISION_ROLES[Precision(str(plan.get("precision")))]
    except (ValueError, TypeError):  # the reader names the bad precision when it reaches it
        preset, roles = PRECISION_ROLES[Precision.BF16_MIXED]
    added: dict[str, Any] = {"preset": preset.value, "optimizer_impl": OptimizerImpl.FOREACH.value}
    added.update({name: getattr(roles, name).value for name in ROLE_FIELDS})
    migrated["plan"] = {**added, **plan}  # keys a hand-edited file already has win
    return migrated


def _v3_to_v4(document: dict[str, Any]) -> dict[str, Any]:
    """Version 4 moved ``hardware.gpu_count`` and ``hardware.sharding`` into ``parallel``: the
    count becomes one node's GPUs, no sharding becomes DDP, ZeRO stage N stays stage N."""
    migrated = dict(document, version=4)
    plan = document.get("plan")
    if not isinstance(plan, Mapping) or not isinstance(plan.get("hardware"), Mapping) or "parallel" in plan:
        return migrated
    hardware = dict(plan["hardware"])
    count = hardware.pop("gpu_count", 1)
    sharding = hardware.pop("sharding", "none")
    strategy = {"none": "ddp", "zero1": "zero1", "zero2": "zero2", "zero3": "zero3"}.get(sharding, sharding)
    parallel = {"nodes": 1, "gpus_per_node": count, "strategy": strategy}
    migrated["plan"] = dict(plan, hardware=hardware, parallel=parallel)
    return migrated


# version -> function turning a document of that version into the next version's.
MIGRATIONS: Final[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
}


def plan_from_dict(document: Any) -> Plan:
    if not isinstance(document, Mapping):
        raise PlanError("(document)", type(document).__name__, "a JSON object")
    if document.get("format") != FORMAT:
        raise PlanError("format", document.get("format"), f"'{FORMAT}'", "not a VRAM Planner plan")
    version = document.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= VERSION:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > VERSION
        raise PlanError(
            "version", version, f"an integer from 1 to {VERSION}", "written by a newer VRAM Planner?" if newer else ""
        )
    doc = dict(document)
    while doc["version"] < VERSION:
        doc = MIGRATIONS[doc["version"]](doc)
    extra = sorted(set(doc) - {"format", "version", "plan"})
    if extra:
        raise PlanError(extra[0], doc[extra[0]], "only format, version and plan", "unknown key")
    if "plan" not in doc:
        raise PlanError("plan", None, "a plan object", "the key is missing")
    result: Plan = _build(Plan, doc["plan"], "plan")
    return result


def loads(text: str | bytes, where: str = "(text)") -> Plan:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")  # a byte-order mark, as some Windows editors write, is harmless
        except UnicodeDecodeError:
            raise PlanFileError(where, "is not UTF-8 text (is it a plan file?)") from None
    elif text.startswith("\ufeff"):
        text = text[1:]
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise PlanFileError(where, "is nested too deeply to be a plan") from None
    except (json.JSONDecodeError, ValueError) as exc:
        raise PlanFileError(where, f"is not valid JSON ({exc})") from None
    if _depth(document) > MAX_DEPTH:
        raise PlanFileError(where, "is nested too deeply to be a plan")
    try:
        return plan_from_dict(document)
    except PlanError as exc:
        raise PlanFileError(where, str(exc)) from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def load(path: str | os.PathLike[str]) -> Plan:
    # Never a FIFO or a device (opening a FIFO blocks until someone writes to it), never more
    # than a plan file can hold: core.files.fileio reads every bounded file from outside.
    raw = read_regular_file(path, MAX_FILE_BYTES, "a plan file")
    return loads(raw, str(path))


# Temporary files of a save are named ``.<target name>.vramplan-save-<random>.tmp`` so that a
# clean-up can tell them from anything else; the earlier ``.<name>.<8 random>.tmp`` names
# (tempfile.mkstemp's) are recognised too. Older than this, no save is still writing them:
# a save of a few kB takes milliseconds.
TEMP_MARK: Final = "vramplan-save-"
STALE_TEMP_SECONDS: Final = 60.0
_TEMP_STEM_CHARS: Final = 100  # of the target's name in a temporary's: 255-byte names still save
_TEMP_NAME: Final = re.compile(r"^\.(?P<target>.+)\.(?:" + TEMP_MARK + r"[A-Za-z0-9_]+|[a-z0-9_]{8})\.tmp$")


def _new_file_mode() -> int:
    """0o666 less the umask, what open() gives a new file (mkstemp's own 0o600 is not that)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # no /proc: read the umask by setting it (briefly) and back
    os.umask(mask)
    return 0o666 & ~mask


def _temp_stem(target_name: str) -> str:
    """The target's name as a temporary's name carries it (shortened, so that the
    temporary's name stays within the 255 bytes a file name may have)."""
    return target_name if len(target_name.encode()) <= _TEMP_STEM_CHARS else target_name[: _TEMP_STEM_CHARS // 4]


def remove_stale_temporaries(folder: str | os.PathLike[str], target_name: str | None = None) -> int:
    """Remove the temporary files interrupted saves left in ``folder`` (of ``target_name``
    only, if given) that are older than :data:`STALE_TEMP_SECONDS`; the number removed.

    Only regular files, owned by this user, whose names match the save's own pattern are
    removed; a symlink named like one is left alone, and nothing here raises.
    """
    removed = 0
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        match = _TEMP_NAME.match(entry.name)
        if match is None or (target_name is not None and match.group("target") != _temp_stem(target_name)):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            mine = not hasattr(os, "getuid") or info.st_uid == os.getuid()
            if stat.S_ISREG(info.st_mode) and mine and now - info.st_mtime > STALE_TEMP_SECONDS:
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed


def _save_target(path: str | os.PathLike[str]) -> tuple[Path, os.stat_result | None]:
    """Where a save really writes: the end of any chain of symlinks, and what is there now.

    As Qt's QSaveFile: a symlink is followed and its target rewritten (the link stays); a
    directory, FIFO, socket or device is refused; so is a file without write permission.
    """
    target = Path(os.path.realpath(path))
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        return target, None
    assert info is not None
    if not stat.S_ISREG(info.st_mode):
        raise PlanFileError(str(path), "is not a regular file; a plan is saved only to a file")
    if not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(target, os.W_OK):
        raise PlanFileError(str(path), "is read-only; save the plan under another name")
    return target, info


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write to a temporary file beside the real target, flush, then rename over it.

    A failure at any point leaves the previous file as it was. The file keeps its mode and
    (where allowed) its owner and group; a new file gets the umask's mode. A hard-linked
    file is replaced like any other (QSaveFile does the same): the name saved to holds the
    new plan and the other names keep the old one, whole — never a half-written file.
    Raises :class:`PlanFileError` for targets that are not regular, writable files and
    OSError for failures of the write itself.
    """
    target, existing = _save_target(path)
    folder = target.parent
    remove_stale_temporaries(folder, target.name)
    fd, temp = tempfile.mkstemp(prefix=f".{_temp_stem(target.name)}.{TEMP_MARK}", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            if hasattr(os, "fchmod"):
                os.fchmod(handle.fileno(), stat.S_IMODE(existing.st_mode) if existing else _new_file_mode())
            if existing is not None and hasattr(os, "fchown"):
                with contextlib.suppress(OSError):  # only root (or the owner, for the group) may
                    os.fchown(handle.fileno(), existing.st_uid, existing.st_gid)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def save(plan: Plan, path: str | os.PathLike[str]) -> None:
    try:
        atomic_write_text(path, dumps(plan))
    except OSError as exc:
        raise PlanFileError(str(path), f"cannot be written ({exc.strerror or exc})") from None

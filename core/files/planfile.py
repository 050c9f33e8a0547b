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

The question the plan was saved with came later within version 4 (branch h56mode): the
document's ``mode`` beside ``plan``, ``"training"`` or ``"inference"`` (core.verdict.Mode).
A file without it reads as training, what every earlier file reopened as; any other value
is refused naming it, never read as training. Read it with :func:`load_saved` /
:func:`loads_saved`; :func:`load` keeps returning the plan alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from typing import Any, Final, get_type_hints

from core.catalogue import load_models
from core.errors import PlanError, PlanFileError
from core.files.fileio import (
    DOORS,
    SIGNATURE_SPAN,
    other_door,
    other_door_of,
    read_regular_file,
    vramplan_kind,
    write_file,
)
from core.files.fileio import STALE_TEMP_SECONDS as STALE_TEMP_SECONDS  # the writer's names,
from core.files.fileio import TEMP_MARK as TEMP_MARK  # where earlier callers import them
from core.files.fileio import atomic_write_text as atomic_write_text
from core.files.fileio import remove_stale_temporaries as remove_stale_temporaries
from core.model import ModelSpec, model_from_dict, spelled_targets
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
    SglangVersion,
    Workload,
)
from core.presets import FORMER_LESSON_NAMES
from core.units import finite_number
from core.verdict import Mode

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
ISSUE_23_KEYS: Final = (
    "vllm_version",
    "link",
    "gguf_quant",
    "gpu_layers",
    "cache_type",
    "flash_attention",
    "ubatch",
    "llamacpp_build",
    "llamacpp_backend",
    "vllm_sampler",
    # Ollama in front of the runner (branch h38ollama): a file without it reads as llama-server.
    "ollama_version",
)
# A file without SGLang's release was written when every release had the one default the
# program knew, the table by tensor-parallel size: it reads as the releases that used it
# (core.serving.sglang_versions, 0.4.0-0.4.5), not as the newest release's default.
SGLANG_VERSION_KEY: Final = "sglang_version"
SGLANG_VERSION_OF_OLD_FILES: Final = SglangVersion.V0_4_0
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
            SGLANG_VERSION_KEY,
            # the transformers release of Hugging Face generate: a file without it reads as the
            # default, the newest release line read (core.serving.transformers_versions)
            "transformers_version",
            # text-only serving of an image-text checkpoint (branch h63text): a file without it loads the tower,
            # as every earlier release planned
            "text_only",
            # vLLM --enforce-eager / SGLang --disable-cuda-graph and vLLM's prefix-caching switch (branch
            # h68eager): a file without them runs the engine's defaults, as every earlier release planned
            "cuda_graphs",
            "prefix_caching",
            # llama.cpp's --n-cpu-moe (branch h71cpumoe): a file without it keeps every expert on the GPU
            "cpu_moe_layers",
            # the host memory bandwidth (stop 63): a file without it reads at the old fixed 51.2 GB/s
            "host_bandwidth_gb_s",
            # SGLang's --enable-multimodal (branch h74sglmm): a file without it serves Gemma 3 as SGLang's defaults
            # do, a text model, as every earlier release planned
            "sglang_enable_multimodal",
            # a context past the model's limit allowed (branch h89ctx): a file without it sets neither engine's
            # variable, as every earlier release planned
            "long_context",
            # vLLM's compile cache (branch h94cold): a file without it plans a warm restart, as every earlier
            # release planned
            "compile_cache",
        )
    )
    | frozenset(
        (Parallelism, f.name) for f in fields(Parallelism) if f.name not in ("nodes", "gpus_per_node", "strategy")
    )
    | frozenset((Plan, name) for name in ("checkpoint_policy", "checkpoint_every", "precision", "stack", "float8"))
    | frozenset(
        (Plan, name)
        for name in (
            "fused_loss",
            "grad_clip",
            # the optimizer's weight decay (branch h55tt): a file without it reads as 0.0, HF Trainer's default and
            # what every earlier release priced (no decay pass).
            "weight_decay",
            # GaLore's optim_args (branch h64galore): a file without them reads as transformers' defaults, read only
            # with the GaLore optimizer no earlier release had.
            "galore_rank",
            "galore_update_proj_gap",
            "optimizer_in_backward",
            "activation_offload",
            "bnb_legacy",
            # modules kept in 16 bits under a bitsandbytes base (branch h40skip): a file without it
            # reads as none, transformers' default (the head alone) every earlier release priced.
            "bnb_skip_modules",
            "kbit_upcast",
            "litgpt",
            "compiled_loss",
            # flash-attn's fused cross-entropy (branch h33thr): a file without it reads as off, the
            # aten cross-entropy every earlier release priced.
            "flash_loss",
            # prime-rl's chunked log-prob head (branch h82rl): a file without it reads as off.
            "logprob_head",
            "loop_keeps_output",
            # The K/V cache a training forward returns (branch h35smi): a file without it reads as off.
            "training_kv_cache",
            # Unsloth (branch h22k): a file without it reads as before, no Unsloth.
            "unsloth",
            # Megatron's cross-entropy fusion (branch h22y): a file without it reads as off, the
            # unfused loss every earlier release priced.
            "megatron_ce_fusion",
            # The experts' loop over stacked weights (branch h22p): a file without it reads as off, the
            # grouped matmuls every earlier release priced.
            "experts_loop",
            # Whose MoE layer runs (branch h88ttmoe): a file without it reads as transformers', the only layer
            # every earlier release priced.
            "moe_layer",
            # Mamba kernels for a hybrid's training (branch h66htrain): a file without it reads as installed,
            # what transformers runs when mamba_ssm is there (training of a hybrid was refused before).
            "mamba_kernels",
            # Megatron's MoE grouped GEMM (branch h22p): a file without it reads as off.
            "moe_grouped_gemm",
            # A loop's own cross-entropy on 16-bit logits (2026-12-04): a file without it reads as off,
            # the float32 upcast every earlier release priced.
            "loss_16bit",
            # The transformers release line of a training run (2026-12-04): a file without it reads as
            # the newest, the loss every earlier release priced.
            "training_transformers",
        )
    )
    | frozenset(
        (Hardware, name)
        for name in (
            "measured_tokens_per_s",
            "measured_step_s",
            "calibration",
            "custom_bandwidth_gb_s",
            "alloc_conf",
            # issue 22: the PyTorch release and TORCH_NCCL_AVOID_RECORD_STREAMS; a file without
            # them reads as the newest release's rules, what the estimate followed before.
            "torch_version",
            "nccl_avoid_record_streams",
            # issue 23: memory other processes hold on each GPU (branch h54held): a file without it
            # reads as 0, a card nothing else uses, what every earlier release planned on.
            "held_by_others",
            # issue 22/23: the OS CUDA runs under (branch h92wsl): a file without it reads as native Linux,
            # what every earlier release planned on.
            "platform",
        )
    )
    # IA3's feedforward modules (branch h40peft): a file without it reads as PEFT's default, down_proj.
    | frozenset({(LoraSettings, "dropout"), (LoraSettings, "ia3_feedforward"), (LoraSettings, "virtual_tokens")})
    # LitGPT's adapters (branch h41adapt): a file without them reads as LitGPT's defaults, a 16-bit base.
    | frozenset((LoraSettings, name) for name in ("adapter_prompt_length", "adapter_start_layer", "adapter_quantised"))
    # Prompt learning's virtual tokens (branch h41soft): a file without it reads as 20.
    # LoKr's decompose_factor (branch h53lyco): a file without it reads as PEFT's default, -1.
    | frozenset({(LoraSettings, "lokr_factor")})
    # OFT's oft_block_size (branch h54oft): a file without it reads as PEFT's default, 32.
    | frozenset({(LoraSettings, "oft_block_size")})
    # RoAd's variant (branch h76peft): a file without it reads as PEFT's default, road_1.
    | frozenset({(LoraSettings, "road_variant")})
    # PEFT's modules_to_save and trainable tokens (branch h60mts): a file without them reads as none, what every
    # earlier release planned (the importers only noted them).
    | frozenset({(LoraSettings, "modules_to_save"), (LoraSettings, "trainable_tokens")})
)
# Of the parallelism (version 4), only the GPU count and the strategy must be written; the
# degrees and the frameworks' knobs default to one GPU's split and the frameworks' defaults.
# The checkpointing policy came later within version 4: a file without it means full
# checkpointing (or none, with ``checkpointing`` off), what every earlier file meant.
# A custom card's bandwidth came later within version 4 (issue 28 item 20): a file without it
# reads the field's default, the default card's 2,039 GB/s; before it, such a card decoded 0 tokens/s.
# ``precision`` is derived from the roles since version 3; files keep writing it (a reader
# of an older release requires it) and it is read by :func:`_with_file_precision`.
# The software stack, float8 and the calibration from a measured run came later within
# version 4: a file without them means eager PyTorch, 16-bit linears and no measurement.
# A file from before them with the old default utilisation (0.4) is read as modelled
# (:func:`_modelled_utilisation`); any other typed utilisation stays typed.


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


# The document's key for the question asked (branch h56mode); a file without it was saved before
# the mode was kept and reopened in Training, so it still does.
MODE_KEY: Final = "mode"
MODE_OF_OLD_FILES: Final = Mode.TRAINING


@dataclass(frozen=True)
class SavedPlan:
    """A plan file's content: the plan and the question it was saved with."""

    plan: Plan
    mode: Mode = Mode.TRAINING


def plan_to_dict(plan: Plan, mode: Mode = Mode.TRAINING) -> dict[str, Any]:
    document = _plain(plan)
    # all-linear is written as itself (the seven names it covers are read back with it); a file that lists the seven
    # names alone stays seven names, which reach no MoE router (core.model.ALL_LINEAR).
    document["lora"]["targets"] = list(spelled_targets(plan.lora.targets))
    return {"format": FORMAT, "version": VERSION, MODE_KEY: mode.value, "plan": document}


def dumps(plan: Plan, mode: Mode = Mode.TRAINING) -> str:
    return json.dumps(plan_to_dict(plan, mode), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


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
            kwargs[name] = _as_lesson(_as_catalogue(model_from_dict(data[name], path), data[name]), data[name])
        elif name in _NESTED:
            kwargs[name] = _build(_NESTED[name], data[name], path)
        else:
            kwargs[name] = _convert(path, hints[name], data[name])
    built = cls(**kwargs)
    if cls is Plan and "precision" in data:
        return _with_file_precision(built, _convert(f"{where}.precision", Precision, data["precision"]), where)
    return built


def _as_catalogue(model: ModelSpec, stored: Mapping[str, Any]) -> ModelSpec:
    """A model written before the catalogue entry of its name gained fields (vision tower depth and
    width, the vision family, ...): when every field the file holds equals that entry's, the model is
    the entry, so a saved plan gives the figures and the launch files the catalogue pick gives. A
    model differing in any stored field (an edited or imported one) stays as written."""
    missing = [f.name for f in fields(ModelSpec) if f.name not in stored]
    if not missing:
        return model
    try:
        models = load_models()
    except PlanFileError:
        return model
    for entry in models:
        spec = entry.spec
        if spec.name == model.name and all(getattr(spec, key) == getattr(model, key) for key in stored):
            return spec
    return model


def _as_lesson(model: ModelSpec, stored: Mapping[str, Any]) -> ModelSpec:
    """A lesson's model under the name it had until 2026-12 ("7B model (lesson, P = 6.7e9)"): when every other
    field the file holds equals that model's, it is the lesson's model, under today's name
    (core.presets.FORMER_LESSON_NAMES); a model edited since keeps the name it was saved with."""
    make = FORMER_LESSON_NAMES.get(model.name)
    if make is None:
        return model
    lesson = make()
    return lesson if all(getattr(lesson, key) == getattr(model, key) for key in stored if key != "name") else model


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


_V3_SHARDING: Final = {"none": "ddp", "zero1": "zero1", "zero2": "zero2", "zero3": "zero3"}


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
    # Named as the version-3 file names them: a list or an object here was a TypeError.
    if isinstance(count, bool) or not isinstance(count, int):
        raise PlanError("plan.hardware.gpu_count", count, "an integer (a version-3 plan's GPU count)")
    if not isinstance(sharding, str):
        raise PlanError("plan.hardware.sharding", sharding, "none, zero1, zero2 or zero3 (a version-3 plan)")
    strategy = _V3_SHARDING.get(sharding, sharding)  # any other word: the reader names it
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
    return saved_from_dict(document).plan


def _mode_of(document: Mapping[str, Any]) -> Mode:
    """The document's mode: absent, the old files' Training; an unknown word is refused."""
    if MODE_KEY not in document:
        return MODE_OF_OLD_FILES
    value = document[MODE_KEY]
    try:
        return Mode(value)
    except ValueError:
        allowed = " or ".join(m.value for m in Mode)
        why = "not a mode this release knows: written by a newer VRAM Planner?"
        raise PlanError(MODE_KEY, value, allowed, why) from None


def saved_from_dict(document: Any) -> SavedPlan:
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
    extra = sorted(set(doc) - {"format", "version", MODE_KEY, "plan"})
    if extra:
        raise PlanError(extra[0], doc[extra[0]], "only format, version, mode and plan", "unknown key")
    if "plan" not in doc:
        raise PlanError("plan", None, "a plan object", "the key is missing")
    mode = _mode_of(doc)
    result: Plan = _build(Plan, _old_sglang_rule(_modelled_utilisation(doc["plan"])), "plan")
    return SavedPlan(result, mode)


# The utilisation every plan had before it was modelled (issue 24): the lesson's 40 %.
_OLD_DEFAULT_UTILISATION: Final = 0.4


def _modelled_utilisation(plan: Any) -> Any:
    """A file written before the utilisation was modelled (it has no ``stack``, which came with
    it) holds the old default 0.4 because every plan had it: read as 0, modelled. Any other
    value was typed and stays."""
    if not isinstance(plan, Mapping) or "stack" in plan or not isinstance(plan.get("hardware"), Mapping):
        return plan
    hardware = plan["hardware"]
    if hardware.get("utilisation") != _OLD_DEFAULT_UTILISATION:
        return plan
    return dict(plan, hardware=dict(hardware, utilisation=0.0))


def _old_sglang_rule(plan: Any) -> Any:
    """A file without ``inference.sglang_version`` reads as the release of the rule it was
    estimated with (SGLANG_VERSION_OF_OLD_FILES)."""
    if not isinstance(plan, Mapping) or not isinstance(plan.get("inference"), Mapping):
        return plan
    inference = plan["inference"]
    if SGLANG_VERSION_KEY in inference:
        return plan
    return dict(plan, inference=dict(inference, **{SGLANG_VERSION_KEY: SGLANG_VERSION_OF_OLD_FILES.value}))


def loads(text: str | bytes, where: str = "(text)") -> Plan:
    return loads_saved(text, where).plan


def loads_saved(text: str | bytes, where: str = "(text)") -> SavedPlan:
    """The plan and its mode from a plan file's text; every failure is a PlanFileError."""
    if isinstance(text, bytes):
        raw = text
        try:
            text = raw.decode("utf-8-sig")  # a byte-order mark, as some Windows editors write, is harmless
        except UnicodeDecodeError:
            why = other_door(vramplan_kind(raw[:SIGNATURE_SPAN], raw[-SIGNATURE_SPAN:]), "a plan")  # a PDF, a PNG
            raise PlanFileError(where, why or "is not UTF-8 text (is it a plan file?)") from None
    elif text.startswith("\ufeff"):
        text = text[1:]
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise PlanFileError(where, "is nested too deeply to be a plan") from None
    except (json.JSONDecodeError, ValueError) as exc:
        raise PlanFileError(where, _not_json(text, where, exc)) from None
    if _depth(document) > MAX_DEPTH:
        raise PlanFileError(where, "is nested too deeply to be a plan")
    mine = other_door_of(document, "a plan") if isinstance(document, dict) and document.get("format") != FORMAT else ""
    if mine:  # a comparison: "format: 'vramplan-comparison' is not allowed; ... (not a VRAM Planner plan)"
        raise PlanFileError(where, mine)
    try:
        return saved_from_dict(document)
    except PlanError as exc:
        raise PlanFileError(where, str(exc)) from None


_CONFIG_SUFFIXES: Final = (".yaml", ".yml", ".toml")


def _not_json(text: str, where: str, error: Exception) -> str:
    """Why a plan file that is not JSON was refused, naming the door it belongs to where that is known
    (`estimate --plan report.md` said only "is not valid JSON (Expecting value: line 1 column 1 (char 0))")."""
    data = text.encode("utf-8", "replace")
    mine = other_door(vramplan_kind(data[:SIGNATURE_SPAN], data[-SIGNATURE_SPAN:]), "a plan")
    if mine:
        return mine
    if where.lower().endswith(_CONFIG_SUFFIXES):
        return f"is not valid JSON ({error}); {DOORS['launch config']}"
    return f"is not valid JSON ({error})"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def load(path: str | os.PathLike[str]) -> Plan:
    return load_saved(path).plan


def load_saved(path: str | os.PathLike[str]) -> SavedPlan:
    # Never a FIFO or a device (opening a FIFO blocks until someone writes to it), never more
    # than a plan file can hold: core.files.fileio reads every bounded file from outside.
    raw = read_regular_file(path, MAX_FILE_BYTES, "a plan file")
    return loads_saved(raw, str(path))


def save(plan: Plan, path: str | os.PathLike[str], *, force: bool = False, mode: Mode = Mode.TRAINING) -> None:
    """The plan and its mode to ``path`` through the one atomic writer (:mod:`core.files.fileio`):
    a file VRAM Planner did not write is kept unless ``force``; every failure is a PlanFileError."""
    write_file(path, dumps(plan, mode), force=force)

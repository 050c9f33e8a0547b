"""Pieces every importer shares: target-module lists, dtype and optimizer names, odd values."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from core.errors import PlanError, PlanFileError
from core.files.runconfig.deepspeed_optimizer import deepspeed_optimizer
from core.files.runconfig.mapping import (
    DTYPES,
    HF_ANYPRECISION,
    HF_ANYPRECISION_WHY,
    HF_DEFAULT_OPTIM,
    HF_GALORE_LAYERWISE,
    HF_NOT_MODELLED,
    HF_OPTIMIZERS,
)
from core.files.runconfig.reading import Taker, read_json_document
from core.files.runconfig.result import ConfigKind, FieldRead, RunConfig, RunSettings
from core.model import normalise_lora_targets, spelled_targets
from core.units import finite_number

# Names some frameworks use for the same matrices that core.model does not list.
_EXTRA_TARGETS = {"output_proj": "o_proj"}  # torchtune's attention output


class OddValues:
    """Values of understood keys that the planner cannot represent: listed, never dropped."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, key: str, value: object, why: str) -> None:
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        self.items.append(f"{key} = {shown} ({why})")


def lora_targets(
    taker: Taker, key: str, names: tuple[str, ...] | None, odd: OddValues, setting: str = "lora_targets"
) -> tuple[str, ...] | None:
    """The module names the planner knows; the others are listed as not understood.

    A single string that is not a list may be a regular expression (PEFT matches it with
    ``re.fullmatch``): the known names it mentions are taken.
    """
    if names is None:
        return None
    if len(names) == 1 and re.search(r"[\\|()*\[\]$^]", names[0]):
        found = re.findall(r"[a-z_0-9]+", names[0])
        names = tuple(n for n in found if _known(n))
        if not names:
            odd.add(key, taker.raw(key), "a pattern naming no module the planner knows")
            return None
    known: list[str] = []
    for name in names:
        if _known(name):
            known.append(_EXTRA_TARGETS.get(name.lower(), name))
        else:
            odd.add(key, name, "not a matrix of the planner's model: q/k/v/o, gate/up/down projections, lm_head")
    if not known:
        return None
    targets = normalise_lora_targets(known)
    taker.record(setting, ", ".join(spelled_targets(targets)), key)
    return targets


def rank_and_alpha(
    taker: Taker, rank_key: str, alpha_key: str, default_rank: int, default_alpha: float | None
) -> tuple[int, float]:
    """A LoRA rank and alpha, the framework's defaults recorded where absent (``default_alpha`` None: 2 × rank)."""
    rank = taker.integer(rank_key, "lora_rank", 1, 65_536)
    if rank is None:
        rank = default_rank
        taker.record("lora_rank", rank, f"default: {rank_key} = {default_rank}")
    alpha = taker.number(alpha_key, "lora_alpha", 0.0, 1e6)
    if alpha is None:
        alpha = 2.0 * rank if default_alpha is None else default_alpha
        shown = f"2 × {rank_key}" if default_alpha is None else f"{default_alpha:g}"
        taker.record("lora_alpha", alpha, f"default: {alpha_key} = {shown}")
    return rank, float(alpha)


def _known(name: str) -> bool:
    try:
        normalise_lora_targets([_EXTRA_TARGETS.get(name.lower(), name)])
    except PlanError:
        return False
    return True


def dtype(taker: Taker, key: str, odd: OddValues) -> str | None:
    value = taker.raw(key)
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None
    name = DTYPES.get(str(value).strip().lower()) if isinstance(value, str) else None
    if name is None:
        odd.add(key, value, "not a dtype: bfloat16, float16 or float32")
        return None
    taker.record("model_dtype", name, key)
    return name


def hf_optimizer(taker: Taker, key: str, odd: OddValues, framework: str) -> tuple[str | None, str | None]:
    """A transformers ``optim`` name as (optimizer, implementation); the Trainer's default if absent."""
    value = taker.raw(key)
    source = key
    if value is None:
        value, source = (
            HF_DEFAULT_OPTIM,
            f"default: {framework} passes no optim, TrainingArguments uses {HF_DEFAULT_OPTIM}",
        )
    if isinstance(value, str) and value.strip().lower() == HF_ANYPRECISION:
        odd.add(key, value, HF_ANYPRECISION_WHY)
        return None, None
    if isinstance(value, str) and value.strip().lower() in HF_NOT_MODELLED:
        odd.add(key, value, HF_NOT_MODELLED[value.strip().lower()])
        return None, None
    if not isinstance(value, str) or value.strip().lower() not in HF_OPTIMIZERS:
        odd.add(key, value, "an optimizer the planner does not model")
        return None, None
    optimizer, impl = HF_OPTIMIZERS[value.strip().lower()]
    taker.record("optimizer", optimizer.value, source)
    if impl is not None:
        taker.record("optimizer_impl", impl, source)
    return optimizer.value, impl


# The module names transformers matches optim_target_modules against (trainer_optimizer.py _setup_low_rank_optimizer:
# model.named_modules(), nn.Linear only), for a Llama-layout block: the ones GaLore's plan projects, and the head.
GALORE_BLOCK_MODULES: Final = tuple(
    f"model.layers.0.{part}"
    for part in (
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
    )
)  # fmt: skip
GALORE_HEAD_MODULE: Final = "lm_head"
GALORE_TARGETS_WHY: Final = (
    "the plan projects every block Linear weight (attention and MLP) and no other: optim_target_modules "
    "matching another set is not modelled"
)


def _hf_target_matches(targets: str | list[str], key: str) -> bool:
    """transformers 5.25 trainer_utils.py check_target_module_exists: a string is a regex matched whole (or
    "all-linear": every Linear); a list matches a name exactly, as a substring, or as a whole regex."""
    if isinstance(targets, str):
        return targets.replace("_", "-") == "all-linear" or bool(re.fullmatch(targets, key))
    return key in targets or any(t in key for t in targets) or any(bool(re.fullmatch(t, key)) for t in targets)


def hf_galore(taker: Taker, odd: OddValues, optim_key: str) -> dict[str, Any]:
    """GaLore's settings from a TrainingArguments-style file whose optim names galore_adamw or its layer-wise form
    (transformers 5.25 trainer_optimizer.py _get_galore_optimizer): optim_args' rank and update_proj_gap (scale and
    proj_type "std" change neither memory nor time; another proj_type is listed), optim_target_modules (required by
    transformers; the plan's targets are the blocks' Linear weights, any other set listed), the layer-wise form as
    the step in the backward."""
    value = taker.raw(optim_key)
    name = value.strip().lower() if isinstance(value, str) else ""
    if name not in HF_OPTIMIZERS or HF_OPTIMIZERS[name][0].value != "galore-adamw":
        return {}
    s: dict[str, Any] = {}
    if name == HF_GALORE_LAYERWISE:
        s["optimizer_in_backward"] = True
        taker.record("optimizer_in_backward", True, f"{optim_key}: {name}")
    targets = taker.raw("optim_target_modules")
    if not isinstance(targets, str | list) or (
        isinstance(targets, list) and not all(isinstance(t, str) for t in targets)
    ):
        raise taker.fail(
            "optim_target_modules",
            targets,
            "the Linear modules GaLore projects (transformers raises "
            "without them): a regex, a list of names or 'all-linear'",
        )
    try:
        blocks = all(_hf_target_matches(targets, key) for key in GALORE_BLOCK_MODULES)
        head = _hf_target_matches(targets, GALORE_HEAD_MODULE)
    except re.error as error:
        raise taker.fail("optim_target_modules", targets, f"a valid regular expression ({error})") from None
    if not blocks or head:
        odd.add("optim_target_modules", targets, GALORE_TARGETS_WHY)
    else:
        taker.record("galore targets", "the blocks' Linear weights", "optim_target_modules")
    s.update(_galore_args(taker, odd))
    return s


def _galore_args(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """optim_args as transformers parses it (trainer_optimizer.py: ``optim_args.replace(" ", "").split(",")``, each
    ``key=value``)."""
    raw = taker.raw("optim_args")
    if raw is None:
        return {}
    if not isinstance(raw, str):
        raise taker.fail("optim_args", raw, "a string of key=value pairs separated by commas")
    s: dict[str, Any] = {}
    settings = {"rank": "galore_rank", "update_proj_gap": "galore_update_proj_gap"}
    for pair in (p for p in raw.replace(" ", "").split(",") if p):
        key, sep, text = pair.partition("=")
        if not sep:
            raise taker.fail("optim_args", raw, "key=value pairs separated by commas")
        if key in settings:
            if not text.isdigit() or not 1 <= int(text) <= 10_000_000:  # transformers: int(value)
                raise taker.fail("optim_args", raw, f"{key} a whole number from 1 to 10,000,000")
            s[settings[key]] = int(text)
            taker.record(settings[key], int(text), f"optim_args {key}")
        elif key == "scale" or (key == "proj_type" and text == "std"):
            taker.notes.append(FieldRead("note", text, f"optim_args {key}: changes neither memory nor time"))
        else:
            odd.add(f"optim_args {key}", text, "a GaLore argument the planner does not model")
    return s


def finish(
    kind: ConfigKind, taker: Taker, odd: OddValues, model_ref: str | None, settings: dict[str, Any], **extra: Any
) -> RunConfig:
    """The importer's result: settings, every field read, notes, and what was not understood."""
    return RunConfig(
        kind=kind,
        path=taker.where,
        model_ref=model_ref,
        settings=RunSettings(**settings),
        fields=tuple(taker.fields),
        notes=tuple(taker.notes),
        unknown=taker.unknown() + tuple(odd.items),
        **extra,
    )


# FSDP sharding strategies (torch.distributed.fsdp ShardingStrategy, as transformers'
# ``fsdp`` option and axolotl's ``fsdp`` list spell them) -> (strategy, reshard after
# forward). SHARD_GRAD_OP keeps the gathered parameters from the forward to the backward,
# which is FSDP2's reshard_after_forward=False; NO_SHARD is DDP.
FSDP_STRATEGIES: Final = {
    "full_shard": ("fsdp", True),
    "hybrid_shard": ("fsdp", True),
    "shard_grad_op": ("fsdp", False),
    "no_shard": ("ddp", None),
}
MAX_DEEPSPEED_BYTES: Final = 1_000_000


def sharding(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """The data-parallel strategy (RunSettings ``sharding``, ``reshard_after_forward``,
    ``offload``) from ``deepspeed`` (an inline dict or a JSON file in or below the config's
    own folder: ``zero_optimization``) or ``fsdp`` (strategy words)."""
    found: dict[str, Any] = {}
    stage = _deepspeed_stage(taker, odd, found)
    if stage is not None:
        found["sharding"] = stage
        return found
    fsdp = taker.raw("fsdp")
    words = fsdp.split() if isinstance(fsdp, str) else fsdp if isinstance(fsdp, list) else []
    for word in words:
        if isinstance(word, str) and word in FSDP_STRATEGIES:
            strategy, reshard = FSDP_STRATEGIES[word]
            taker.record("sharding", strategy, "fsdp")
            found["sharding"] = strategy
            if reshard is not None:
                taker.record("reshard_after_forward", reshard, f"fsdp: {word}")
                found["reshard_after_forward"] = reshard
            if "offload" in words:  # CPUOffload(offload_params=True): parameters, gradients, optimizer
                taker.record("offload", "params", "fsdp: offload")
                found["offload"] = "params"
            found.update(_fsdp1_wrap(taker))
            return found
    if fsdp:
        odd.add("fsdp", fsdp, "full_shard, shard_grad_op, hybrid_shard or no_shard")
    return found


def _fsdp1_wrap(taker: Taker) -> dict[str, Any]:
    """FSDP1 wrapping a model held on the CPU or the meta device (``parallel.fsdp1_wrap``):
    TrainingArguments' ``fsdp_config`` with ``version`` 1 (accelerate's default when the key is
    absent: huggingface/accelerate 16cb6eb8 utils/dataclasses.py ``FullyShardedDataParallelPlugin``
    reads FSDP_VERSION, default "1") and ``cpu_ram_efficient_loading`` or ``sync_module_states``
    (accelerate forces the second on with the first)."""
    config = taker.raw("fsdp_config")
    if not isinstance(config, dict):
        return {}
    version = config.get("version", config.get("fsdp_version", 1))
    # Either spelling: transformers' TrainingArguments.__post_init__ and axolotl (067b021,
    # utils/schemas/validation.py, "the `fsdp_` prefix is deprecated") drop the ``fsdp_`` prefix of each key.
    loading = [
        key
        for name in ("cpu_ram_efficient_loading", "sync_module_states")
        for key in (name, f"fsdp_{name}")
        if _true_word(config.get(key))
    ]
    if str(version).strip() != "1" or not loading:
        return {}
    taker.record("fsdp1_wrap", True, f"fsdp_config: version 1 with {loading[0]}")
    return {"fsdp1_wrap": True}


def accelerate_grad_sync(taker: Taker, found: dict[str, Any]) -> dict[str, Any]:
    """accelerate's default under accumulation for an FSDP run trained through it (the HF Trainer,
    TRL, LLaMA-Factory, axolotl) when the file does not set ``sync_each_batch``:
    ``GradientAccumulationPlugin.sync_each_batch`` defaults to False, so ``Accelerator.accumulate``
    enters ``no_sync`` for every micro-batch but the last: FSDP1's ``no_sync()`` (huggingface/
    accelerate v0.28.0 ``accelerator.py``, whether or not the model was loaded on the CPU) and
    FSDP2's ``set_requires_gradient_sync(False)`` from v1.11.0 (ec92b1af); earlier accelerate
    reduced FSDP2 every micro-batch (the user sets "each"). ``parallel.grad_sync``."""
    if found.get("sharding") != "fsdp" or "grad_sync" in found:
        return {}
    source = "default: accelerate's sync_each_batch=False (no_sync under accumulation; FSDP2 from accelerate 1.11)"
    taker.record("grad_sync", "no_sync", source)
    return {"grad_sync": "no_sync"}


def _true_word(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


# What a framework makes of a DeepSpeed config's own sections beyond the ZeRO stage (its precision, where the
# framework reads the file's bf16 / fp16 itself): the document and where it came from, to RunSettings fields.
SectionReader = Callable[[dict[str, Any], str], dict[str, Any]]


def deepspeed_config(taker: Taker, odd: OddValues, key: str, sections: SectionReader | None = None) -> dict[str, Any]:
    """The strategy a DeepSpeed config under ``key`` sets (RunSettings ``sharding`` and ``offload``, ...), and what
    ``sections`` reads of the same document (LLaMA-Factory v1's precision and optimizer section: v1 hands
    DeepSpeed an optimizer of its own, so the trainer's-DummyOptim reading of ``sharding`` is not applied)."""
    found: dict[str, Any] = {}
    stage = _deepspeed_stage(taker, odd, found, key, sections, trainer_optimizer=False)
    if stage is not None:
        found["sharding"] = stage
    return found


def _deepspeed_stage(
    taker: Taker,
    odd: OddValues,
    out: dict[str, Any],
    key: str = "deepspeed",
    sections: SectionReader | None = None,
    trainer_optimizer: bool = True,
) -> str | None:
    """The ZeRO stage of the DeepSpeed config under ``key`` (inline, or a JSON file in or below the
    config's folder), with its offload, overlap and bf16 settings (and ``sections``') put into ``out``;
    ``trainer_optimizer``: a transformers Trainer runs it, building the section's optimizer
    (core.files.runconfig.deepspeed_optimizer)."""
    value = taker.raw(key)
    if not value:
        return None
    document: Any = value
    source = key
    if isinstance(value, str):
        found, why = confined(Path(taker.where).parent, value)
        if found is None:
            taker.note(key, f"{why}: set the ZeRO stage in the plan")
            return None
        try:
            document = read_json_document(found, MAX_DEEPSPEED_BYTES, "a DeepSpeed config")
        except PlanFileError as error:
            odd.add(key, value, f"not readable: {error.reason}")
            return None
        source = f"{key} → {value}: zero_optimization.stage"
    zero = document.get("zero_optimization") if isinstance(document, dict) else None
    stage = zero.get("stage") if isinstance(zero, dict) else None
    # JSON has one number type: 3.0 is stage 3. true == 1 in Python, but it is no stage.
    if isinstance(stage, bool) or stage not in (0, 1, 2, 3):
        odd.add(key, value if isinstance(value, str) else "(inline)", "no zero_optimization.stage 0-3")
        return None
    result = "ddp" if stage == 0 else f"zero{int(stage)}"
    taker.record("sharding", result, source)
    if isinstance(zero, dict):
        for part, offload in (("offload_param", "params"), ("offload_optimizer", "optimizer")):
            target = zero.get(part)
            device = target.get("device") if isinstance(target, dict) else None
            if device in ("cpu", "nvme"):
                taker.record("offload", offload, f"{key}: zero_optimization.{part}.device")
                out["offload"] = offload
                break
        out.update(_overlap_comm(taker, zero, int(stage), source))
        out.update(_bf16_master(taker, document.get("bf16"), source))
    if trainer_optimizer:
        out.update(deepspeed_optimizer(taker, odd, document, source.removesuffix(": zero_optimization.stage")))
    if sections is not None:
        out.update(sections(document, source.removesuffix(": zero_optimization.stage")))
    return result


# DeepSpeed's bf16 section keys and the plan settings they are (deepspeedai/DeepSpeed edaa7221,
# runtime/precision_config.py DeepSpeedBF16Config, both False by default; PR #7700, v0.18.3).
_BF16_KEYS: Final = (
    ("bf16_master_weights_and_grads", "bf16_master_weights"),
    ("bf16_optimizer_states", "bf16_optimizer_states"),
)


def _bf16_master(taker: Taker, section: Any, source: str) -> dict[str, Any]:
    """``bf16.bf16_master_weights_and_grads`` / ``bf16.bf16_optimizer_states`` of a DeepSpeed config, where it
    sets them true (absent or false: DeepSpeed's default, the plan's)."""
    if not isinstance(section, dict):
        return {}
    where = source.removesuffix(": zero_optimization.stage")
    found: dict[str, Any] = {}
    for key, name in _BF16_KEYS:
        if section.get(key) is True:
            taker.record(name, True, f"{where}: bf16.{key}")
            found[name] = True
    return found


def _overlap_comm(taker: Taker, zero: dict[str, Any], stage: int, source: str) -> dict[str, Any]:
    """``zero_optimization.overlap_comm`` of a ZeRO config: ``parallel.zero_overlap_comm`` for stages 1-2,
    ``parallel.zero3_overlap_comm`` for stage 3; a file that does not say runs DeepSpeed's default,
    off below stage 3 and on at it (deepspeedai/DeepSpeed edaa7221, deepspeed/runtime/zero/config.py
    ``overlap_comm_valid``: ``self.stage == ZeroStageEnum.weights``)."""
    if stage not in (1, 2, 3):
        return {}
    name = "zero3_overlap_comm" if stage == 3 else "zero_overlap_comm"
    value = zero.get("overlap_comm")
    where = source.removesuffix(": zero_optimization.stage")
    if isinstance(value, bool):
        taker.record(name, value, f"{where}: zero_optimization.overlap_comm")
        return {name: value}
    default = stage == 3
    taker.record(name, default, f"default: DeepSpeed's overlap_comm is {'on at' if default else 'off below'} stage 3")
    return {name: default}


def confined(folder: Path, value: str) -> tuple[Path | None, str]:
    """The DeepSpeed file a config names, only when it lies in or below the config's own folder
    after every ``..`` and symbolic link is resolved (issue 28 item 24); else None and why."""
    try:
        if Path(value).is_absolute():
            return None, "skipped: an absolute path; only files in or below the config's own folder are read"
        home = folder.resolve()
        target = (folder / value).resolve()
        if not target.is_relative_to(home):
            return None, "skipped: it leads out of the config's own folder; only files in or below it are read"
        if not target.is_file():
            return None, "the DeepSpeed config was not found beside the config"
    except (OSError, ValueError) as error:  # a name over the OS limit, a NUL byte, a link loop
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        return None, f"skipped: the path cannot be opened ({reason})"
    return target, ""


def recipe_numbers(
    taker: Taker, clip_key: str | None, dropout_key: str | None, decay_key: str | None = None
) -> dict[str, Any]:
    """Gradient clipping (a max norm: 0 turns it off), LoRA dropout (0 to 0.99) and the optimizer's
    weight decay (0 to 10, the plan input's range: core/inputs.py), read where a framework names them."""
    s: dict[str, Any] = {}
    keys = ((clip_key, "grad_clip", 1e12), (dropout_key, "lora_dropout", 0.99), (decay_key, "weight_decay", 10.0))
    for key, setting, high in keys:
        if key is None:
            continue
        value = taker.raw(key)
        if value is None:
            continue
        number = finite_number(value)
        if number is None or not 0 <= number <= high:
            raise taker.fail(key, value, f"a number from 0 to {high:g}")
        s[setting] = number > 0 if setting == "grad_clip" else float(number)
        taker.record(setting, s[setting], key)
    return s


# PEFT's modules_to_save (branch h60mts): the names a causal LM's embedding and head go by, matched as PEFT matches
# them (huggingface/peft 51c2ff66 src/peft/utils/other.py ``_set_trainable``: ``key.endswith(target_key)``):
# transformers' Llama / Mistral / Qwen / Gemma (embed_tokens, lm_head), GPT-2 (wte), GPT-NeoX (embed_in,
# embed_out), Falcon / BLOOM (word_embeddings), Mistral's own and torchtune's (tok_embeddings, output).
EMBEDDING_NAMES: Final = ("embed_tokens", "wte", "embed_in", "word_embeddings", "tok_embeddings")
HEAD_NAMES: Final = ("lm_head", "embed_out", "output")


def modules_to_save(taker: Taker, key: str) -> dict[str, Any]:
    """The plan's ``modules_to_save`` from a list of module names (``key``): the embedding and / or the head;
    names it cannot price are noted, never dropped. A list naming neither leaves the plan's setting alone."""
    names = taker.names(key)
    if not names:
        return {}
    embedding = any(n.split(".")[-1] in EMBEDDING_NAMES for n in names)
    head = any(n.split(".")[-1] in HEAD_NAMES for n in names)
    rest = [n for n in names if n.split(".")[-1] not in (*EMBEDDING_NAMES, *HEAD_NAMES)]
    if rest:
        taker.notes.append(
            FieldRead("note", rest, f"{key}: modules trained in full that the estimate has no shape for")
        )
    if not (embedding or head):
        return {}
    value = "both" if embedding and head else "embedding" if embedding else "head"
    taker.record("modules_to_save", value, key)
    return {"modules_to_save": value}


def trainable_tokens(taker: Taker, key: str) -> dict[str, Any]:
    """The number of embedding rows PEFT's ``trainable_token_indices`` trains: a list of token ids (the input
    embedding's), or a mapping of layer names to lists (the embedding's entry counts; others are noted)."""
    value = taker.raw(key)
    if value in (None, [], {}):
        return {}
    if isinstance(value, dict):
        rows = [ids for name, ids in value.items() if str(name).split(".")[-1] in EMBEDDING_NAMES]
        others = [name for name in value if str(name).split(".")[-1] not in EMBEDDING_NAMES]
        if others:
            taker.notes.append(FieldRead("note", others, f"{key}: trainable tokens of other layers are not modelled"))
        if not rows:
            return {}
        value = rows[0]
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value):
        raise taker.fail(key, value, "a list of token indices (or a mapping of layer names to lists)")
    count = len(set(value))
    taker.record("trainable_tokens", count, key)
    return {"trainable_tokens": count}

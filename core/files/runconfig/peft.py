"""PEFT ``adapter_config.json`` (LoraConfig, peft 0.13-0.17 keys).

The file describes the adapter only: rank, alpha, target modules, DoRA, the modules
trained in full beside it, and the base model's name. It does not record batch, sequence,
precision or whether the base was quantised; those stay as the plan has them.
"""

from __future__ import annotations

from typing import Any, Final

from core.files.runconfig.common import OddValues, finish, lora_targets, recipe_numbers
from core.files.runconfig.reading import Taker
from core.files.runconfig.result import ConfigKind, RunConfig

# LoraConfig defaults (peft/tuners/lora/config.py): r=8, lora_alpha=8.
DEFAULT_RANK: Final = 8
DEFAULT_ALPHA: Final = 8

IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "init_lora_weights", "revision", "fan_in_fan_out",
    "auto_mapping", "peft_version", "megatron_config", "megatron_core", "use_rslora",
    "loftq_config", "eva_config", "corda_config", "lora_ga_config", "layers_pattern", "use_qalora",
    "qalora_group_size", "ensure_weight_tying", "use_bdlora",
)  # fmt: skip


_KINDS: Final = "LORA or IA3 (the planner models LoRA, DoRA, QLoRA and IA3 adapters)"
# IA3Config keys with no effect on memory (huggingface/peft 51c2ff66 src/peft/tuners/ia3/config.py).
IA3_IRRELEVANT: Final = (
    "peft_type", "task_type", "inference_mode", "init_ia3_weights", "revision", "fan_in_fan_out",
    "auto_mapping", "peft_version",
)  # fmt: skip


def read_peft(document: dict[str, Any], where: str) -> RunConfig:
    taker = Taker(document, where)
    odd = OddValues()
    kind = taker.word("peft_type", _KINDS)
    if kind is not None and kind.upper() == "IA3":
        return _read_ia3(taker, odd)
    if kind is not None and kind.upper() != "LORA":
        raise taker.fail("peft_type", kind, _KINDS)
    s: dict[str, Any] = {"method": "lora"}
    taker.record("method", "lora", "peft_type" if kind else "r / target_modules")
    if taker.flag("use_dora"):
        s["method"] = "dora"
        taker.record("method", "dora", "use_dora")
    rank = taker.integer("r", "lora_rank", 1, 65_536)
    if rank is None:
        rank = DEFAULT_RANK
        taker.record("lora_rank", rank, f"default: LoraConfig.r = {DEFAULT_RANK}")
    alpha = taker.number("lora_alpha", "lora_alpha", 0.0, 1e6)
    if alpha is None:
        alpha = DEFAULT_ALPHA
        taker.record("lora_alpha", alpha, f"default: LoraConfig.lora_alpha = {DEFAULT_ALPHA}")
    s["lora_rank"], s["lora_alpha"] = rank, alpha
    s.update(recipe_numbers(taker, None, "lora_dropout"))
    model_ref = _targets_and_model(taker, odd, s)
    taker.note("modules_to_save", "modules trained in full beside the adapters are not in the estimate")
    taker.note("trainable_token_indices", "trainable token rows are not in the estimate")
    taker.note("rank_pattern", "per-module ranks: the estimate uses r everywhere")
    taker.note("alpha_pattern", "per-module alphas change scaling only")
    taker.note("layers_to_transform", "adapters on some layers only: the estimate adapts every layer")
    taker.note("layer_replication", "replicated layers are not modelled")
    taker.note("exclude_modules", "excluded modules: the estimate adapts every listed target")
    taker.note("target_parameters", "adapters on parameters (MoE experts) are not modelled")
    if taker.word("bias", "none, all or lora_only") not in (None, "none"):
        taker.note("bias", "trainable biases are not in the estimate")
    if taker.flag("lora_bias"):
        taker.note("lora_bias", "a LoRA bias on B is not in the estimate")
    taker.missing("quant", "adapter_config.json does not say whether the base was quantised: choose QLoRA if it was")
    taker.irrelevant(*IRRELEVANT)
    return finish(ConfigKind.PEFT, taker, odd, model_ref, s)


def _targets_and_model(taker: Taker, odd: OddValues, s: dict[str, Any]) -> str | None:
    """``target_modules`` into ``s``; the base model's name, as the file gives it."""
    s["lora_targets"] = lora_targets(taker, "target_modules", taker.names("target_modules"), odd)
    model_ref = taker.text("base_model_name_or_path")
    if model_ref:
        taker.record("model", model_ref, "base_model_name_or_path")
    return model_ref


def _read_ia3(taker: Taker, odd: OddValues) -> RunConfig:
    """An IA3Config (huggingface/peft 51c2ff66 src/peft/tuners/ia3/config.py): target_modules,
    and feedforward_modules, the targets whose input the vector scales."""
    s: dict[str, Any] = {"method": "ia3"}
    taker.record("method", "ia3", "peft_type")
    model_ref = _targets_and_model(taker, odd, s)
    if taker.raw("feedforward_modules") == []:  # PEFT's mt5 default: no feedforward module
        s["ia3_feedforward"] = ()
        taker.record("ia3_feedforward", "", "feedforward_modules")
    else:
        feedforward = taker.names("feedforward_modules")
        s["ia3_feedforward"] = lora_targets(taker, "feedforward_modules", feedforward, odd, "ia3_feedforward")
    taker.note("modules_to_save", "modules trained in full beside the vectors are not in the estimate")
    taker.note("exclude_modules", "excluded modules: the estimate scales every listed target")
    taker.note("layers_to_transform", "vectors on some layers only: the estimate scales every layer")
    taker.missing("quant", "adapter_config.json does not say whether the base was quantised")
    taker.irrelevant(*IA3_IRRELEVANT)
    return finish(ConfigKind.PEFT, taker, odd, model_ref, s)

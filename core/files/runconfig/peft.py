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


def read_peft(document: dict[str, Any], where: str) -> RunConfig:
    taker = Taker(document, where)
    odd = OddValues()
    kind = taker.word("peft_type", "LORA (the planner models LoRA, DoRA and QLoRA adapters)")
    if kind is not None and kind.upper() != "LORA":
        raise taker.fail("peft_type", kind, "LORA (the planner models LoRA, DoRA and QLoRA adapters)")
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
    s["lora_targets"] = lora_targets(taker, "target_modules", taker.names("target_modules"), odd)
    model_ref = taker.text("base_model_name_or_path")
    if model_ref:
        taker.record("model", model_ref, "base_model_name_or_path")
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

"""all-linear as a LoRA target of its own (issue 22, branch h84alllin): PEFT's every nn.Linear but the head, which on a
mixture of experts reaches the router (and Qwen2-MoE's shared-expert gate) the seven names leave out where the
transformers release builds it as an nn.Linear (core.model.ALL_LINEAR, ModelSpec.all_linear_rows). Kept apart from
the seven names through the plan's files, the command line, the importers and the exporters.

Sources: PEFT's printed counts, tests/data/moe_lora/ (tests/core/test_moe_lora_targets.py); the catalogue's
Mixtral 8x7B (resources/models.json mixtral-8x7b-v0.1: 32 layers, hidden 4,096, 8 experts); the tools' all-linear
spellings: huggingface/trl f2cd5771 trl/trainer/model_config.py lines 177-178 (a one-name lora_target_modules list is
handed to PEFT as that name), axolotl-ai-cloud/axolotl b78dab1e src/axolotl/loaders/adapter.py find_all_linear_names
(lora_target_linear), hiyouga/LLaMA-Factory ff6d4d12 src/llamafactory/model/adapter.py lines 229-230 and
model_utils/misc.py find_all_linear_modules (a lone lora_target "all").
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from core.catalogue import find_model
from core.cli.app import main as cli_main
from core.files import planfile
from core.files.launch import Target, export
from core.files.runconfig import loads_run_config
from core.model import LORA_TARGETS, spelled_targets, toggled_targets
from core.params import param_counts
from core.plan import LoraSettings, Method, Plan, TransformersLoss

ALL_LINEAR = (*LORA_TARGETS, "all-linear")
FOUR_X = TransformersLoss.V4_49_TO_4_57
# Mixtral 8x7B's router, block_sparse_moe.gate = nn.Linear(4,096, 8) under transformers 4.57.1 (tests/data/moe_lora/
# peft_transformers_4.57.1.json mixtral all-linear adapts it), at r 16 over 32 layers: 32 × 16 × (4,096 + 8).
MIXTRAL_ROUTERS_R16 = 2_101_248


def _plan(model: str, targets: tuple[str, ...], **changes: Any) -> Plan:
    lora = LoraSettings(rank=16, alpha=32, targets=targets)
    return Plan(model=find_model(model).spec, method=Method.LORA, lora=lora, **changes)


def test_all_linear_is_kept_beside_the_seven_names_and_spelled_as_itself() -> None:
    plan = _plan("mixtral-8x7b-v0.1", ("all-linear",), training_transformers=FOUR_X)
    assert plan.lora.targets == ALL_LINEAR
    assert spelled_targets(plan.lora.targets) == ("all-linear",)
    assert spelled_targets((*ALL_LINEAR, "lm_head")) == ("all-linear", "lm_head")
    seven = _plan("mixtral-8x7b-v0.1", LORA_TARGETS, training_transformers=FOUR_X)
    assert param_counts(plan).adapter - param_counts(seven).adapter == MIXTRAL_ROUTERS_R16
    assert plan.all_linear_reaches_more and not seven.all_linear_reaches_more
    # On a dense model all-linear and the seven names train the same matrices (what an export is compared on).
    dense = _plan("llama-3.1-8b", ("all-linear",))
    assert param_counts(dense) == param_counts(_plan("llama-3.1-8b", LORA_TARGETS))
    assert not dense.all_linear_reaches_more and dense.trained_targets == LORA_TARGETS


def test_the_window_boxes_toggle_all_linear_apart_from_the_names() -> None:
    assert toggled_targets(("q_proj", "v_proj"), "all-linear", True) == ALL_LINEAR
    assert toggled_targets(ALL_LINEAR, "all-linear", False) == LORA_TARGETS
    assert toggled_targets(ALL_LINEAR, "q_proj", False) == LORA_TARGETS[1:]  # no longer every linear
    assert toggled_targets(ALL_LINEAR, "lm_head", True) == (*ALL_LINEAR, "lm_head")


def test_a_plan_file_keeps_all_linear_and_an_old_seven_name_file_stays_seven_names() -> None:
    plan = _plan("mixtral-8x7b-v0.1", ("all-linear", "lm_head"), training_transformers=FOUR_X)
    document = planfile.plan_to_dict(plan)
    assert document["plan"]["lora"]["targets"] == ["all-linear", "lm_head"]
    assert planfile.loads(json.dumps(document)) == plan
    # A file written before (the seven names listed) reads as the seven names: no router.
    document["plan"]["lora"]["targets"] = list(LORA_TARGETS)
    old = planfile.loads(json.dumps(document))
    assert old.lora.targets == LORA_TARGETS
    assert param_counts(plan).adapter - param_counts(old).adapter == MIXTRAL_ROUTERS_R16 + 16 * (4_096 + 32_000)


def test_the_command_line_takes_all_linear(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "mixtral-8x7b-v0.1", "--method", "lora", "--lora-rank", "16", "--json"]
    args += ["--training-transformers", "4.49-4.57", "--lora-targets"]
    adapters = []
    for targets in ("all-linear", ",".join(LORA_TARGETS)):
        assert cli_main([*args, targets]) == 0
        adapters.append(json.loads(capsys.readouterr().out)["params"]["adapter"])
    assert adapters[0] - adapters[1] == MIXTRAL_ROUTERS_R16


def test_each_tool_gets_its_own_all_linear_and_the_seven_names_stay_a_list() -> None:
    plan = _plan("mixtral-8x7b-v0.1", ("all-linear",), training_transformers=FOUR_X)
    seven = plan.with_lora(targets=LORA_TARGETS)
    trl = json.loads(export(plan, Target.TRL).text)
    assert trl["lora_target_modules"] == ["all-linear"]
    # Mixtral 4.x's experts are w1 / w3 / w2 (core.model.MIXTRAL_4X_MLP_NAMES): the seven names as PEFT matches them.
    names = ["q_proj", "k_proj", "v_proj", "o_proj", "w1", "w3", "w2"]
    assert json.loads(export(seven, Target.TRL).text)["lora_target_modules"] == names
    axolotl = yaml.safe_load(export(plan, Target.AXOLOTL).text)
    assert axolotl["lora_target_linear"] is True and "lora_target_modules" not in axolotl
    axolotl_seven = yaml.safe_load(export(seven, Target.AXOLOTL).text)
    assert "lora_target_linear" not in axolotl_seven and axolotl_seven["lora_target_modules"] == names
    assert yaml.safe_load(export(plan, Target.LLAMA_FACTORY).text)["lora_target"] == "all"
    assert yaml.safe_load(export(seven, Target.LLAMA_FACTORY).text)["lora_target"] == ",".join(names)
    for target in (Target.TRL, Target.AXOLOTL, Target.LLAMA_FACTORY):
        assert not export(plan, target).cannot("method.lora.targets")


def test_all_linear_with_the_head_is_written_where_the_tool_can_and_named_where_not() -> None:
    plan = _plan("mixtral-8x7b-v0.1", ("all-linear", "lm_head"), training_transformers=FOUR_X)
    axolotl = yaml.safe_load(export(plan, Target.AXOLOTL).text)  # lora_target_modules beside lora_target_linear
    assert axolotl["lora_target_linear"] is True and axolotl["lora_target_modules"] == ["lm_head"]
    # PEFT's and LLaMA-Factory's shorthands take no name beside them: the names are written, the router named as
    # left out.
    trl = export(plan, Target.TRL)
    assert "all-linear" not in json.loads(trl.text)["lora_target_modules"] and trl.cannot("method.lora.targets")
    assert export(plan, Target.LLAMA_FACTORY).cannot("method.lora.targets")
    # Where all-linear reaches nothing more (a dense model, Mixtral under 5.x) the names train the same: nothing named.
    five = plan.with_changes(training_transformers=TransformersLoss.V5_ON)
    assert not export(five, Target.TRL).cannot("method.lora.targets")
    # torchtune names its LoRA modules: the router is named as left out.
    assert export(plan.with_lora(targets=("all-linear",)), Target.TORCHTUNE).cannot("method.lora.targets")


@pytest.mark.parametrize("target", [Target.TRL, Target.AXOLOTL, Target.LLAMA_FACTORY])
def test_an_exported_all_linear_reads_back_as_all_linear(target: Target) -> None:
    plan = _plan("mixtral-8x7b-v0.1", ("all-linear",), training_transformers=FOUR_X)
    run = loads_run_config(export(plan, target).text.encode(), "run.yaml" if target is not Target.TRL else "run.json")
    assert run.settings.lora_targets == ALL_LINEAR
    seven = plan.with_lora(targets=LORA_TARGETS)
    run = loads_run_config(export(seven, target).text.encode(), "run.yaml" if target is not Target.TRL else "run.json")
    assert run.settings.lora_targets == LORA_TARGETS


def test_a_peft_adapter_config_with_all_linear_reads_as_all_linear() -> None:
    # PEFT's LoraConfig(target_modules="all-linear") saves the string in adapter_config.json.
    config = {"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": "all-linear", "task_type": "CAUSAL_LM"}
    run = loads_run_config(json.dumps(config).encode(), "adapter_config.json")
    assert run.settings.lora_targets == ALL_LINEAR
    config["target_modules"] = list(LORA_TARGETS)
    assert loads_run_config(json.dumps(config).encode(), "adapter_config.json").settings.lora_targets == LORA_TARGETS


def test_a_latent_attention_model_names_its_targets() -> None:
    # DeepSeek-V3's all-linear would adapt its MLA projections, which no plan target counts: picking it keeps the
    # named targets it has (core.plan.lora_on: o_proj and the MLP), so the exports list what the plan counts.
    dense = _plan("llama-3.1-8b", ("all-linear",))
    moved = dense.on_model(find_model("deepseek-v3").spec, "deepseek-v3")
    assert moved.lora.targets == ("o_proj", "gate_proj", "up_proj", "down_proj")

"""The config importers read the optimizer's weight decay (Plan.weight_decay) where each tool names it, instead of
listing it as ignored: TrainingArguments' and axolotl's ``weight_decay``, torchtune's ``optimizer.weight_decay``,
torchtitan's ``[optimizer] weight_decay`` (its default 0.1 when absent: torchtitan/config/job_config.py L148 at
238fa995) and Megatron-Bridge's ``optimizer.weight_decay``. A value out of range is refused with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.catalogue import find_model
from core.errors import PlanFileError
from core.files.runconfig import load_run_config, loads_run_config, plan_from_run
from core.plan import Plan

BASE = Plan(model=find_model("llama-3.2-1b").spec)
DATA = Path(__file__).resolve().parents[1] / "data" / "runconfigs"


def read(text: str, name: str) -> tuple[Plan, dict[str, object]]:
    run = loads_run_config(text.encode(), name)
    assert not run.unknown, run.unknown
    return plan_from_run(run, BASE, None), {f.setting: f.value for f in run.fields}


def test_trainer_arguments_weight_decay() -> None:
    plan, fields = read('{"model_name_or_path": "meta-llama/Llama-3.2-1B", "weight_decay": 0.1}', "sft.json")
    assert plan.weight_decay == pytest.approx(0.1) and fields["weight_decay"] == pytest.approx(0.1)
    # Not given: TrainingArguments.weight_decay's default 0.0, the plan's own.
    plan, fields = read('{"model_name_or_path": "meta-llama/Llama-3.2-1B"}', "sft.json")
    assert plan.weight_decay == 0.0 and "weight_decay" not in fields


def test_axolotl_and_torchtune_weight_decay() -> None:
    plan, _ = read("base_model: meta-llama/Llama-3.2-1B\nweight_decay: 0.05\n", "axolotl.yaml")
    assert plan.weight_decay == pytest.approx(0.05)
    # tests/data/runconfigs/torchtune_llama3_1_8B_lora_single_device.yaml (torchtune's recipe): weight_decay 0.01.
    run = load_run_config(DATA / "torchtune_llama3_1_8B_lora_single_device.yaml")
    assert {f.setting: f.value for f in run.fields}["weight_decay"] == pytest.approx(0.01)


def test_torchtitan_weight_decay_and_its_default() -> None:
    # tests/data/runconfigs/torchtitan_llama3_8b.toml sets no weight_decay: torchtitan's default 0.1.
    run = load_run_config(DATA / "torchtitan_llama3_8b.toml")
    decay = next(f for f in run.fields if f.setting == "weight_decay")
    assert decay.value == pytest.approx(0.1) and "default" in decay.source
    text = (DATA / "torchtitan_llama3_8b.toml").read_text().replace("eps = 1e-8", "eps = 1e-8\nweight_decay = 0.0")
    run = loads_run_config(text.encode(), "llama3_8b.toml")
    assert next(f for f in run.fields if f.setting == "weight_decay").value == 0.0


def test_megatron_bridge_weight_decay() -> None:
    # tests/data/runconfigs/megatron_bridge_llama32_1b_finetune.yaml: optimizer.weight_decay 0.0.
    run = load_run_config(DATA / "megatron_bridge_llama32_1b_finetune.yaml")
    assert {f.setting: f.value for f in run.fields}["weight_decay"] == 0.0


@pytest.mark.parametrize("value", ["-0.1", "11", '"a lot"'])
def test_a_weight_decay_out_of_range_is_refused_with_the_reason(value: str) -> None:
    with pytest.raises(PlanFileError) as error:
        loads_run_config(f'{{"model_name_or_path": "x/y", "weight_decay": {value}}}'.encode(), "sft.json")
    assert "weight_decay" in str(error.value) and "0 to 10" in str(error.value)

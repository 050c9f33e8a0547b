"""LLaMA-Factory v1's loose ends (branch h91hub): freeze tuning's float32 blocks, DeepSpeed's bf16 section, and a
DPO run chosen by the command rather than the file.

Read at hiyouga/LLaMA-Factory ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30 (the commit the v1 reader and its fixtures
were read at):

- ``src/llamafactory/v1/plugins/model_plugins/peft.py`` ``FreezeParams.cast_trainable_params_to_fp32 = True``
  (line 78) and ``get_freeze_model`` (lines 281-285): every trained parameter gets ``param.data.to(torch.float32)``;
  the frozen ones stay in the dtype ``model_engine.py`` loaded (``dtype="auto"``: bf16 for Qwen3-4B).
- ``plugins/model_plugins/deepspeed_utils.py`` ``infer_deepspeed_mixed_precision`` (lines 55-79): ``fp16.enabled``
  true is refused; ``bf16.enabled`` true → bf16; false → none; ``fp16.enabled`` false (bf16 auto) → none; both
  auto or absent → bf16. ``trainer_plugins/distributed/deepspeed.py`` hands that to accelerate's DeepSpeedPlugin
  (``set_mixed_precision``): DeepSpeed's bf16 engine, which the plan's bf16 autocast stands for under a ZeRO stage
  (core.roles.deepspeed_engine_dtype).
- ``launcher.py`` (lines 31, 140-150): ``llamafactory-cli sft | dpo | rm`` picks the trainer; the file has no stage.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.dtypes import Dtype, MpDtype
from core.files.runconfig import load_run_config, loads_run_config, plan_from_run, resolve_model
from core.plan import Method, Strategy
from core.presets import default_plan
from core.roles import deepspeed_engine_dtype, dtypes_for, runs_autocast

RUNCONFIGS = Path(__file__).parent.parent / "data" / "runconfigs"


def _notes(run: object) -> str:
    return " | ".join(f"{n.source} {n.value}" for n in run.notes)  # type: ignore[attr-defined]


# ---- (a) freeze: the trained blocks in float32 ------------------------------------------------------------------
def test_freeze_on_fsdp2_holds_its_trained_blocks_in_float32() -> None:
    # examples/v1/train_freeze/train_freeze_sft.yaml: freeze, freeze_trainable_layers 2, dist_config fsdp2.
    run = load_run_config(RUNCONFIGS / "llamafactory_v1_train_freeze_sft.yaml")
    assert run.settings.trainable_dtype == "fp32"  # cast_trainable_params_to_fp32 defaults to true
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert plan.method is Method.FROZEN and plan.frozen_layers == plan.model.num_layers - 2
    # Measured on CPU (torch 2.13.0, transformers 5.25.0, a 4-layer bf16 Qwen3 under fully_shard with v1's
    # MixedPrecisionPolicy): the trained blocks' sharded weights and gradients float32, the frozen ones bf16,
    # every block computing in bf16 (fsdp2.py get_mp_policy param_dtype bf16).
    assert plan.weight_dtype is Dtype.FP32 and plan.base_dtype is Dtype.BF16  # Qwen3-4B config.json: bfloat16
    assert plan.parallel.fsdp_param_dtype is MpDtype.BF16


def test_freeze_without_the_cast_keeps_the_models_dtype() -> None:
    text = b"model: Qwen/Qwen3-4B\npeft_config:\n  name: freeze\n  cast_trainable_params_to_fp32: false\n"
    run = loads_run_config(text, "v1.yaml")
    assert run.settings.trainable_dtype is None
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert plan.weight_dtype is Dtype.BF16 and plan.base_dtype is Dtype.BF16


def test_freeze_without_a_sharding_plugin_says_the_forward_fails_on_a_16_bit_model() -> None:
    # Measured on CPU (torch 2.13.0, transformers 5.25.0): a bf16 Qwen3 with its top 2 blocks cast to float32 and no
    # autocast runs those blocks in float32 and stops at the frozen bf16 head, "expected m1 and m2 to have the same
    # dtype, but got: float != c10::BFloat16".
    run = loads_run_config(b"model: Qwen/Qwen3-4B\npeft_config:\n  name: freeze\n", "v1.yaml")
    assert run.settings.trainable_dtype == "fp32"
    assert "head" in _notes(run) and "fails" in _notes(run)


def test_freeze_under_deepspeed_bf16_is_cast_back_to_bf16() -> None:
    # DeepSpeed's bf16 engine casts every floating parameter (core.roles.deepspeed_cast_weights): the float32
    # blocks become bf16 again, with DeepSpeed's float32 master copy in the optimizer.
    text = (
        b"model: Qwen/Qwen3-4B\npeft_config:\n  name: freeze\n"
        b"dist_config:\n  name: deepspeed\n  config_file: examples/deepspeed/ds_z3_config.json\n"
    )
    run = loads_run_config(text, str(RUNCONFIGS / "v1.yaml"))
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert plan.method is Method.FROZEN and plan.parallel.strategy is Strategy.ZERO3
    assert dtypes_for(plan).param == 2 and dtypes_for(plan).base == 2


def test_freeze_under_fsdpturbo_bf16_is_cast_back_to_bf16() -> None:
    # trainer_plugins/distributed/fsdpturbo.py FSDPTurboFSDP2Engine.shard_model (lines 302-307): model.to(bf16)
    # before sharding, whatever the tuning; the float32 blocks of get_freeze_model become bf16 again.
    text = b"model: Qwen/Qwen3-4B\npeft_config:\n  name: freeze\ndist_config:\n  name: fsdpturbo\n"
    run = loads_run_config(text, "v1.yaml")
    assert run.settings.trainable_dtype is None and run.settings.model_dtype == "bf16"
    assert "fsdpturbo" in _notes(run)


# ---- (b) DeepSpeed's bf16 section ---------------------------------------------------------------------------------
def test_the_deepspeed_example_runs_deepspeeds_bf16_engine() -> None:
    # examples/v1/train_full/train_full_deepspeed.yaml names examples/deepspeed/ds_z3_config.json: bf16 "auto".
    run = load_run_config(RUNCONFIGS / "llamafactory_v1_train_full_deepspeed.yaml")
    assert run.settings.sharding == "zero3" and run.settings.autocast == "bf16"
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert deepspeed_engine_dtype(plan) is Dtype.BF16 and not runs_autocast(plan)
    assert dtypes_for(plan).param == 2  # the float32 model (full tuning) cast to bf16 by the engine


def test_v0_and_v1_read_one_deepspeed_file_alike() -> None:
    # The same ds_z3_config.json under v0 (`deepspeed:` with `bf16: true`, LLaMA-Factory 0.9) and v1.
    v0 = load_run_config(RUNCONFIGS / "llamafactory_llama3_lora_sft_ds3.yaml").settings
    v1 = loads_run_config(
        b"model: Qwen/Qwen3-4B\npeft_config:\n  name: lora\n"
        b"dist_config:\n  name: deepspeed\n  config_file: examples/deepspeed/ds_z3_config.json\n",
        str(RUNCONFIGS / "v1.yaml"),
    ).settings
    for name in ("sharding", "offload", "zero3_overlap_comm", "bf16_master_weights", "autocast"):
        assert getattr(v1, name) == getattr(v0, name), name


@pytest.mark.parametrize(
    ("sections", "autocast"),
    [
        ({"bf16": {"enabled": True}}, "bf16"),
        ({"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}}, "bf16"),
        ({}, "bf16"),  # both absent: bf16
        ({"bf16": {"enabled": False}}, "none"),
        ({"bf16": {"enabled": "auto"}, "fp16": {"enabled": False}}, "none"),  # fp16 false with bf16 auto: "no"
    ],
)
def test_deepspeeds_precision_as_v1_infers_it(tmp_path: Path, sections: dict[str, object], autocast: str) -> None:
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 2}, **sections}))
    text = b"model: Qwen/Qwen3-0.6B\ndist_config:\n  name: deepspeed\n  config_file: ds.json\n"
    run = loads_run_config(text, str(tmp_path / "v1.yaml"))
    assert run.settings.sharding == "zero2" and run.settings.autocast == autocast


def test_fp16_under_deepspeed_is_listed_as_v1_refuses_it(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 2}, "fp16": {"enabled": True}}))
    text = b"model: Qwen/Qwen3-0.6B\ndist_config:\n  name: deepspeed\n  config_file: ds.json\n"
    run = loads_run_config(text, str(tmp_path / "v1.yaml"))
    assert any("fp16" in item for item in run.unknown)


def test_v1s_own_bf16_key_does_not_reach_deepspeed(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}))
    text = b"model: Qwen/Qwen3-0.6B\nbf16: false\ndist_config:\n  name: deepspeed\n  config_file: ds.json\n"
    run = loads_run_config(text, str(tmp_path / "v1.yaml"))
    assert run.settings.autocast == "bf16" and "DeepSpeed" in _notes(run)


# ---- (c) the stage is the command's -------------------------------------------------------------------------------
def test_the_dpo_example_says_the_command_chooses_dpo() -> None:
    # examples/v1/train_lora/train_lora_dpo.yaml: the LoRA of the sft example, train_dataset data/v1_dpo_demo.yaml;
    # it runs as `llamafactory-cli dpo`, which the file cannot say.
    run = load_run_config(RUNCONFIGS / "llamafactory_v1_train_lora_dpo.yaml")
    notes = _notes(run)
    assert "llamafactory-cli dpo" in notes and "v1_dpo_demo" in notes and "not modelled" in notes
    assert run.settings.method == "lora"  # estimated as the supervised step, and said so


def test_preference_keys_say_the_stage_too() -> None:
    run = loads_run_config(b"model: Qwen/Qwen3-0.6B\nmodel_class: llm\npref_beta: 0.1\n", "v1.yaml")
    assert "llamafactory-cli dpo" in _notes(run) and "pref_beta" in _notes(run)


def test_a_file_with_no_sign_of_the_stage_says_it_is_read_as_sft() -> None:
    run = load_run_config(RUNCONFIGS / "llamafactory_v1_train_lora_sft.yaml")
    assert "llamafactory-cli sft" in _notes(run)

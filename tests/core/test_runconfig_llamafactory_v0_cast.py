"""LLaMA-Factory v0 casts the trained parameters to float32 (branch h93lfv0), read in and written out.

Read at hiyouga/LLaMA-Factory v0.9.4 (95ac3f2373b82662c1bd855c284d3379e6a763d3), src/llamafactory/model/adapter.py:

- ``init_adapter`` lines 340-353: ``cast_trainable_params_to_fp32`` is true unless ``pure_bf16`` or ``use_badam``
  (line 347) or DeepSpeed ZeRO-3 without ``quantization_bit`` (line 349); the same rule at v0.9.3 (287-293) and
  v0.9.5 (319-325).
- ``_setup_full_tuning`` line 54 and ``_setup_freeze_tuning`` line 136: ``param.data = param.data.to(torch.float32)``
  on every trained parameter; the frozen ones keep the dtype the model was loaded in.
- ``_setup_lora_tuning`` lines 315-316: the same on every parameter with ``requires_grad`` (adapters, and PEFT's
  ``modules_to_save`` copies from ``additional_target``).

And huggingface/peft v0.17.1 (53c25fe4, LLaMA-Factory 0.9.4's pin) src/peft/peft_model.py lines 132-134:
``PeftModel.__init__`` casts bf16 / fp16 adapter weights to float32 (``autocast_adapter_dtype=True``, the default of
``get_peft_model``, mapping_func.py:36, which adapter.py calls without it): LoRA adapters are float32 under
``pure_bf16`` too.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from core.catalogue import find_model
from core.dtypes import Autocast, Dtype
from core.files.launch import Target, export
from core.files.runconfig import load_run_config, loads_run_config, plan_from_run, resolve_model
from core.plan import PRESET_ROLES, ROLE_FIELDS, Method, Plan, Preset, Strategy
from core.presets import default_plan
from core.roles import dtypes_for

RUNCONFIGS = Path(__file__).parent.parent / "data" / "runconfigs"
HEAD = "model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: sft\n"


def _read(text: str) -> Plan:
    run = loads_run_config((HEAD + text).encode(), str(RUNCONFIGS / "a.yaml"))
    return plan_from_run(run, default_plan(), resolve_model(run))


def _notes(text: str) -> str:
    run = loads_run_config((HEAD + text).encode(), str(RUNCONFIGS / "a.yaml"))
    return " | ".join(f"{n.source} {n.value}" for n in run.notes)


# ---- the reader ---------------------------------------------------------------------------------------------------
def test_the_full_example_trains_float32_weights_under_bf16_amp() -> None:
    # examples/extras/dft/qwen2_full_sft.yaml at v0.9.4: finetuning_type full, bf16: true, no DeepSpeed.
    run = load_run_config(RUNCONFIGS / "llamafactory_qwen2_full_sft.yaml")
    assert run.settings.trainable_dtype == "fp32"  # adapter.py:353, then _setup_full_tuning line 54
    # Qwen/Qwen2-1.5B-Instruct is not in the catalogue; Qwen2.5 1.5B has its shape (hidden 1536, 28 layers, vocab
    # 151936: both models' config.json).
    spec = find_model("qwen2.5-1.5b").spec
    plan = plan_from_run(run, replace(default_plan(), model=spec, model_id="qwen2.5-1.5b"), None)
    assert plan.method is Method.FULL and plan.weight_dtype is Dtype.FP32 and plan.autocast is Autocast.BF16
    assert dtypes_for(plan).param == 4 and dtypes_for(plan).grad == 4  # Adam's state takes the parameter's dtype
    assert plan.preset is Preset.FP32_AUTOCAST_BF16  # every weight trained, so every weight cast


def test_freeze_holds_its_trained_blocks_in_float32_and_the_frozen_ones_as_loaded() -> None:
    plan = _read("finetuning_type: freeze\nbf16: true\n")
    assert plan.method is Method.FROZEN and plan.frozen_layers == plan.model.num_layers - 2  # default 2 blocks
    assert plan.weight_dtype is Dtype.FP32 and plan.base_dtype is Dtype.BF16  # _setup_freeze_tuning line 136


def test_no_cast_under_pure_bf16_badam_or_zero3() -> None:
    for text in (
        "finetuning_type: full\npure_bf16: true\n",  # adapter.py:347
        "finetuning_type: full\nbf16: true\nuse_badam: true\n",  # adapter.py:347
        "finetuning_type: freeze\nbf16: true\ndeepspeed: examples/deepspeed/ds_z3_config.json\n",  # adapter.py:349
    ):
        plan = _read(text)
        assert plan.weight_dtype is Dtype.BF16, text


def test_float32_full_training_has_no_amp_key() -> None:
    plan = _read("finetuning_type: full\n")  # no bf16 / fp16: the cast still runs (adapter.py:353)
    assert plan.weight_dtype is Dtype.FP32 and plan.autocast is Autocast.NONE and plan.preset is Preset.FP32


def test_freeze_without_amp_says_the_forward_fails_on_a_16_bit_model() -> None:
    assert "forward fails" in _notes("finetuning_type: freeze\n")
    assert "forward fails" not in _notes("finetuning_type: freeze\nbf16: true\n")


def test_lora_adapters_are_float32_under_pure_bf16_too() -> None:
    # peft v0.17.1 peft_model.py:132-134 (autocast_adapter_dtype=True); the reader held them in bf16 before.
    plan = _read("finetuning_type: lora\npure_bf16: true\n")
    assert plan.adapter_dtype is Dtype.FP32 and plan.base_dtype is Dtype.BF16 and plan.autocast is Autocast.NONE


def test_additional_target_copies_cast_to_float32_are_noted() -> None:
    # adapter.py:315-316 casts every requires_grad parameter, the modules_to_save copies among them.
    assert "additional_target" in _notes("finetuning_type: lora\nbf16: true\nadditional_target: embed_tokens\n")
    assert "additional_target" not in _notes(
        "finetuning_type: lora\npure_bf16: true\nadditional_target: embed_tokens\n"
    )


# ---- the export ---------------------------------------------------------------------------------------------------
def _roles(preset: Preset) -> dict[str, object]:
    return {"preset": preset, **{name: getattr(PRESET_ROLES[preset], name) for name in ROLE_FIELDS}}


def _full(preset: Preset) -> Plan:
    return default_plan().with_changes(method=Method.FULL, frozen_layers=0, **_roles(preset))


def _written(plan: Plan) -> tuple[dict[str, object], dict[str, str], Plan]:
    exported = export(plan, Target.LLAMA_FACTORY)
    run = loads_run_config(exported.text.encode(), "plan.yaml")
    back = plan_from_run(run, default_plan(), resolve_model(run))
    return yaml.safe_load(exported.text), {u.field: u.why for u in exported.unexpressed}, back


def test_float32_weights_under_bf16_amp_are_written_exactly() -> None:
    document, unexpressed, back = _written(_full(Preset.FP32_AUTOCAST_BF16))
    assert document["bf16"] is True and "pure_bf16" not in document
    assert "method.weight_dtype" not in unexpressed and "method.autocast" not in unexpressed
    assert back.weight_dtype is Dtype.FP32 and back.autocast is Autocast.BF16


def test_bf16_weights_under_bf16_amp_are_listed_as_cast() -> None:
    # Trainer(bf16=True) on a bf16 model: LLaMA-Factory casts the trained weights to float32 (adapter.py:353).
    _, unexpressed, back = _written(_full(Preset.TRAINER_BF16))
    assert "float32" in unexpressed["method.weight_dtype"] and back.weight_dtype is Dtype.FP32


def test_under_zero3_the_weights_stay_as_loaded() -> None:
    plan = _full(Preset.TRAINER_BF16)
    plan = plan.with_changes(parallel=replace(plan.parallel, gpus_per_node=2, strategy=Strategy.ZERO3))
    _, unexpressed, _ = _written(plan)
    assert "method.weight_dtype" not in unexpressed  # adapter.py:349: ZeRO-3 without quantization_bit, no cast


def test_float32_full_training_is_written_with_no_amp_key() -> None:
    document, unexpressed, back = _written(_full(Preset.FP32))
    assert (document["bf16"], document["fp16"]) == (False, False) and "pure_bf16" not in document
    assert not {"method.weight_dtype", "method.autocast"} & set(unexpressed)
    assert back.weight_dtype is Dtype.FP32 and back.autocast is Autocast.NONE


def test_lora_under_pure_bf16_is_written_with_float32_adapters() -> None:
    plan = default_plan().with_changes(
        **_roles(Preset.PURE_BF16)
    )  # PURE_BF16: bf16 base, float32 adapters, no autocast
    document, unexpressed, back = _written(plan)
    assert document["pure_bf16"] is True and "method.adapter_dtype" not in unexpressed
    assert back.adapter_dtype is Dtype.FP32


def test_freeze_with_float32_blocks_on_a_bf16_base_is_written_exactly() -> None:
    roles = {**_roles(Preset.TRAINER_BF16), "preset": Preset.CUSTOM, "weight_dtype": Dtype.FP32}
    plan = default_plan().with_changes(method=Method.FROZEN, frozen_layers=30, **roles)  # Llama 3.1 8B: 32 blocks
    document, unexpressed, back = _written(plan)
    assert document["finetuning_type"] == "freeze" and document["freeze_trainable_layers"] == 2
    assert document["bf16"] is True and not {"method.weight_dtype", "method.base_dtype"} & set(unexpressed)
    assert (back.weight_dtype, back.base_dtype, back.autocast) == (Dtype.FP32, Dtype.BF16, Autocast.BF16)

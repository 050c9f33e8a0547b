"""LLaMA-Factory v1 configs read into the plan (branch h89lf).

Every ``tests/data/runconfigs/llamafactory_v1_*.yaml`` is a byte copy of hiyouga/LLaMA-Factory
``examples/v1/<folder>/<name>.yaml`` at ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30 (tests/data/runconfigs/SOURCES.md);
each expected value below is the one that file writes, or the v1 default named beside it
(``src/llamafactory/v1/config/*.py`` and the plugins at the same commit, quoted in
core/files/runconfig/llamafactory_v1.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.dtypes import Dtype, MpDtype
from core.files.runconfig import ConfigKind, load_run_config, loads_run_config, plan_from_run, resolve_model
from core.plan import Method, Optimizer, Strategy
from core.presets import default_plan

RUNCONFIGS = Path(__file__).parent.parent / "data" / "runconfigs"

# The full-tuning examples on FSDP2 (examples/v1/train_full/*.yaml, train_batching_strategy/*.yaml): `model`,
# `micro_batch_size`, `cutoff_len: 2048`, `dist_config: {name: fsdp2}`, no peft_config (model_engine.py casts the
# model to float32), bf16 by default (fsdp2.py get_mp_policy: bf16 params, fp32 reduce).
_FULL = {"method": "full", "model_dtype": "fp32", "sharding": "fsdp", "fsdp_param_dtype": "bf16", "seq_len": 2048}
# The LoRA examples (examples/v1/train_lora/*.yaml, train_qlora/quantization.yaml): `peft_config: {name: lora, r: 16,
# lora_alpha: 32, target_modules: all}` on FSDP2; the model stays in its own dtype (dtype="auto").
_LORA = {"lora_rank": 16, "lora_alpha": 32.0, "model_dtype": None, "sharding": "fsdp", "fsdp_param_dtype": "bf16"}

EXAMPLES: dict[str, tuple[str, dict[str, Any]]] = {
    # train_full/train_full_fsdp2.yaml: micro_batch_size 1
    "train_full_fsdp2": ("Qwen/Qwen3-0.6B", {**_FULL, "micro_batch": 1, "optimizer": "adamw"}),
    # train_batching_strategy/train_full_fsdp2_batching_normal.yaml: micro_batch_size 2, batching_strategy normal
    "train_full_fsdp2_batching_normal": ("Qwen/Qwen3-0.6B", {**_FULL, "micro_batch": 2, "attention": "sdpa"}),
    # train_batching_strategy/train_full_fsdp2_dynamic_batching.yaml: micro_batch_size 2
    "train_full_fsdp2_dynamic_batching": ("Qwen/Qwen3-0.6B", {**_FULL, "micro_batch": 2}),
    # train_batching_strategy/train_full_fsdp2_dynamic_padding_free.yaml: micro_batch_size 4, flash_attention_2
    "train_full_fsdp2_dynamic_padding_free": ("Qwen/Qwen3-0.6B", {**_FULL, "micro_batch": 4, "attention": "flash"}),
    # train_batching_strategy/train_full_fsdp2_padding_free.yaml: the same, padding_free
    "train_full_fsdp2_padding_free": ("Qwen/Qwen3-0.6B", {**_FULL, "micro_batch": 4, "attention": "flash"}),
    # train_full/train_full_liger_kernel.yaml: kernel_config liger_kernel, applied with require_logits in training
    # (model_engine.py), so no fused loss
    "train_full_liger_kernel": ("Qwen/Qwen3-0.6B", {**_FULL, "fused_loss": None}),
    # train_full/train_full_muon.yaml: optim_config muon under fsdp2: listed, the plan's optimizer kept
    "train_full_muon": ("Qwen/Qwen3-0.6B", {**_FULL, "optimizer": None}),
    # train_full/train_multimodal.yaml: Qwen/Qwen3.5-0.8B
    "train_multimodal": ("Qwen/Qwen3.5-0.8B", {**_FULL, "micro_batch": 1}),
    # train_full/train_full_ulysses_cp.yaml: bf16: false (fp32 MixedPrecisionPolicy), flash_attention_2, cp_size 2
    "train_full_ulysses_cp": (
        "Qwen/Qwen3-0.6B",
        {**_FULL, "fsdp_param_dtype": "fp32", "attention": "flash", "checkpointing": True},
    ),
    # train_full/train_full_qwen3_moe_fsdpturbo_ep_fsdp.yaml: fsdpturbo, bf16: true (fsdpturbo.py casts a full
    # model to bf16), cutoff_len 256
    "train_full_qwen3_moe_fsdpturbo_ep_fsdp": (
        "Qwen/Qwen3.5-35B-A3B",
        {"method": "full", "model_dtype": "bf16", "sharding": "fsdp", "fsdp_param_dtype": None, "seq_len": 256},
    ),
    # train_full/train_full_deepspeed.yaml: dist_config deepspeed, config_file examples/deepspeed/ds_z3_config.json
    # (stage 3; the copy beside the fixtures is e64f558's, the same stage)
    "train_full_deepspeed": ("Qwen/Qwen3-0.6B", {"method": "full", "model_dtype": "fp32", "sharding": "zero3"}),
    # train_freeze/train_freeze_sft.yaml: peft_config freeze, freeze_trainable_layers 2; loaded dtype kept, the
    # trained blocks cast to float32 (cast_trainable_params_to_fp32 defaults to true; branch h91hub)
    "train_freeze_sft": (
        "Qwen/Qwen3-4B",
        {"method": "full", "trainable_layers": 2, "model_dtype": None, "trainable_dtype": "fp32"},
    ),
    # train_lora/train_lora_sft.yaml
    "train_lora_sft": ("Qwen/Qwen3-4B", {**_LORA, "method": "lora", "micro_batch": 1, "seq_len": 2048}),
    # train_lora/train_lora_sft_rank0.yaml: init_config init_on_rank0, bf16: true
    "train_lora_sft_rank0": ("Qwen/Qwen3-4B", {**_LORA, "method": "lora"}),
    # train_lora/train_lora_dpo.yaml: the same LoRA (DPO is chosen by `llamafactory-cli dpo`, not the file)
    "train_lora_dpo": ("Qwen/Qwen3-4B", {**_LORA, "method": "lora"}),
    # train_qlora/quantization.yaml: quant_config {name: bnb, quantization_bit: 4}; BnbParams nf4, double quant
    "quantization": ("Qwen/Qwen3-0.6B", {**_LORA, "method": "qlora", "quant": "nf4", "double_quant": True}),
    # train_lora/export_lora.yaml: r and alpha not given (LoraParams r 8, lora_alpha 16), no dist_config (DDP)
    "export_lora": ("Qwen/Qwen3-4B", {"method": "lora", "lora_rank": 8, "lora_alpha": 16.0, "sharding": "ddp"}),
}

# What each example leaves not understood: FLA's kernel name (no such kernel in the planner) and Muon under FSDP2.
UNKNOWN = {"train_full_qwen3_moe_fsdpturbo_ep_fsdp": "flash-linear-attention", "train_full_muon": "muon"}


def test_every_v1_example_is_here() -> None:
    # 17 YAML files under examples/v1/ at ff6d4d1 (git ls-tree -r HEAD examples/v1).
    assert len(EXAMPLES) == 17
    assert len(list(RUNCONFIGS.glob("llamafactory_v1_*.yaml"))) == 17


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_v1_example_reads_into_its_settings(name: str) -> None:
    run = load_run_config(RUNCONFIGS / f"llamafactory_v1_{name}.yaml")
    model, expected = EXAMPLES[name]
    assert run.kind is ConfigKind.LLAMA_FACTORY
    assert run.model_ref == model
    for setting, value in expected.items():
        assert getattr(run.settings, setting) == value, setting
    # No torch.autocast in v1 (core/base_trainer.py): bf16 only reaches the sharding plugin; under DeepSpeed the
    # file's bf16 section ("auto" in ds_z3_config.json) gives DeepSpeed's bf16 engine, which the plan's bf16
    # autocast stands for under ZeRO (tests/core/test_runconfig_llamafactory_v1_precision.py, branch h91hub).
    assert run.settings.autocast == ("bf16" if name == "train_full_deepspeed" else "none")
    # enable_activation_checkpointing defaults to true and no example turns it off.
    assert run.settings.checkpointing is True
    if name in UNKNOWN:
        assert len(run.unknown) == 1 and UNKNOWN[name] in run.unknown[0]
    else:
        assert run.unknown == ()


def test_lora_targets_all_are_every_linear_but_the_head() -> None:
    # peft.py _find_all_linear_modules skips lm_head: `target_modules: all` is the v0 reader's `all`.
    run = load_run_config(RUNCONFIGS / "llamafactory_v1_train_lora_sft.yaml")
    v0 = loads_run_config(b"finetuning_type: lora\nlora_target: all\n", "v0.yaml")
    assert run.settings.lora_targets == v0.settings.lora_targets
    assert "lm_head" not in (run.settings.lora_targets or ())


def test_a_v1_lora_run_becomes_a_plan() -> None:
    run = load_run_config(RUNCONFIGS / "llamafactory_v1_train_lora_sft.yaml")
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert plan.model_id == "qwen3-4b"  # resources/models.json: Qwen/Qwen3-4B
    assert plan.method is Method.LORA and plan.lora is not None and plan.lora.rank == 16
    assert plan.parallel.strategy is Strategy.FSDP
    assert plan.parallel.fsdp_param_dtype is MpDtype.BF16 and plan.parallel.fsdp_reduce_dtype is MpDtype.FP32
    assert plan.weight_dtype is Dtype.BF16  # Qwen3-4B's config.json torch_dtype bfloat16, loaded with dtype="auto"


def test_a_v1_full_run_holds_float32_weights() -> None:
    run = load_run_config(RUNCONFIGS / "llamafactory_v1_train_full_fsdp2.yaml")
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert plan.method is Method.FULL and plan.weight_dtype is Dtype.FP32
    assert plan.optimizer is Optimizer.ADAMW


def test_freeze_trains_the_top_two_blocks() -> None:
    run = load_run_config(RUNCONFIGS / "llamafactory_v1_train_freeze_sft.yaml")
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert plan.method is Method.FROZEN
    assert plan.frozen_layers == plan.model.num_layers - 2  # freeze_trainable_layers: 2


def test_muon_without_sharding_is_read() -> None:
    run = loads_run_config(b"model: Qwen/Qwen3-0.6B\noptim_config:\n  name: muon\n", "v1.yaml")
    assert run.settings.optimizer == "muon" and run.settings.sharding == "ddp" and run.unknown == ()


def test_an_unknown_plugin_is_listed_or_refused_in_one_line() -> None:
    run = loads_run_config(b"model: Qwen/Qwen3-0.6B\ndist_config:\n  name: megatron\n", "v1.yaml")
    assert any("megatron" in item for item in run.unknown)
    with pytest.raises(Exception) as refused:
        loads_run_config(b"model: Qwen/Qwen3-0.6B\npeft_config:\n  name: oft\n", "v1.yaml")
    assert "peft_config.name" in str(refused.value) and "\n" not in str(refused.value)


def test_global_batch_size_gives_accumulation_only_with_dp_size() -> None:
    # core/utils/batching.py: num_micro_batch = global_batch_size // dp_size // micro_batch_size.
    text = b"model: Qwen/Qwen3-0.6B\nmodel_class: llm\nmicro_batch_size: 2\nglobal_batch_size: 32\n"
    assert loads_run_config(text + b"dp_size: 4\n", "v1.yaml").settings.grad_accum == 4
    run = loads_run_config(text, "v1.yaml")
    assert run.settings.grad_accum is None and any("global_batch_size" in n.source for n in run.notes)

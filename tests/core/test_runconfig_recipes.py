"""The config importers read the recipes of issue 22 where the tools name them, and never drop
one silently: torchtune's optimizer_in_bwd, enable_activation_offloading, clip_grad_norm and
model.lora_dropout; TrainingArguments' use_liger_kernel and max_grad_norm; axolotl's
cut_cross_entropy / liger_fused_linear_cross_entropy, activation_offloading, max_grad_norm and
lora_dropout; LLaMA-Factory's enable_liger_kernel; PEFT's adapter_config lora_dropout."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.catalogue import find_model
from core.errors import PlanFileError
from core.files.runconfig import loads_run_config, plan_from_run
from core.plan import Method, Plan

BASE = Plan(model=find_model("llama-3.2-1b").spec)
RUNCONFIGS = Path(__file__).resolve().parents[1] / "data" / "runconfigs"


def read(text: str, name: str) -> tuple[Plan, dict[str, object]]:
    run = loads_run_config(text.encode(), name)
    assert not run.unknown, run.unknown
    return plan_from_run(run, BASE, None), {f.setting: f.value for f in run.fields}


def test_torchtune_recipes() -> None:
    plan, fields = read(
        "model:\n  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n  lora_rank: 8\n  lora_dropout: 0.05\n"
        "batch_size: 2\noptimizer_in_bwd: false\nenable_activation_offloading: true\nclip_grad_norm: 1.0\n"
        "enable_activation_checkpointing: true\n",
        "lora.yaml",
    )
    assert plan.activation_offload and plan.grad_clip and plan.lora.dropout == 0.05
    assert fields["activation_offload"] is True and fields["grad_clip"] is True
    plan, _ = read(
        "model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\nbatch_size: 2\noptimizer_in_bwd: true\n",
        "full.yaml",
    )
    assert plan.optimizer_in_backward and plan.method is Method.FULL


def test_trainer_arguments_liger_and_clipping() -> None:
    plan, fields = read(
        '{"model_name_or_path": "meta-llama/Llama-3.2-1B", "use_liger_kernel": true, "max_grad_norm": 0.0, '
        '"lora_dropout": 0.1, "use_peft": true, "lora_r": 8}',
        "sft.json",
    )
    assert plan.fused_loss and not plan.chunked_loss and not plan.grad_clip and plan.lora.dropout == 0.1
    assert fields["fused_loss"] is True and fields["grad_clip"] is False


def test_axolotl_fused_losses_and_offloading() -> None:
    plan, _ = read(
        "base_model: meta-llama/Llama-3.2-1B\nadapter: lora\nlora_r: 8\nlora_dropout: 0.05\n"
        "cut_cross_entropy: true\nactivation_offloading: true\nmax_grad_norm: 1.0\nmicro_batch_size: 1\n"
        "sequence_len: 2048\n",
        "axolotl.yaml",
    )
    assert plan.fused_loss and plan.activation_offload and plan.grad_clip and plan.lora.dropout == 0.05
    plan, _ = read("base_model: meta-llama/Llama-3.2-1B\nchunked_cross_entropy: true\n", "axolotl.yaml")
    assert plan.chunked_loss and not plan.fused_loss


def test_llamafactory_liger_is_the_fused_loss() -> None:
    plan, _ = read(
        "model_name_or_path: meta-llama/Llama-3.2-1B\nstage: sft\nfinetuning_type: lora\nenable_liger_kernel: true\n"
        "lora_dropout: 0.1\nmax_grad_norm: 1.0\n",
        "llamafactory.yaml",
    )
    assert plan.fused_loss and plan.lora.dropout == 0.1 and plan.grad_clip


def test_peft_adapter_config_dropout() -> None:
    plan, _ = read(
        '{"peft_type": "LORA", "r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "target_modules": ["q_proj"]}',
        "adapter_config.json",
    )
    assert plan.lora.dropout == 0.05


def test_torch_compile_and_float8_reach_the_plan() -> None:
    # torchtune `compile: true`, the Trainer's `torch_compile`, axolotl's `torch_compile`: stack
    # "compile" (the blocks save less: core.training.activations COMPILE_NOTE).
    plan, fields = read(
        "model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\nbatch_size: 2\ncompile: true\n", "full.yaml"
    )
    assert plan.stack.value == "compile" and fields["stack"] == "compile"
    plan, _ = read('{"model_name_or_path": "meta-llama/Llama-3.2-1B", "torch_compile": true}', "sft.json")
    assert plan.stack.value == "compile"
    plan, _ = read("base_model: meta-llama/Llama-3.2-1B\ntorch_compile: true\n", "axolotl.yaml")
    assert plan.stack.value == "compile"


def test_torchtitans_float8_converter_is_the_float8_setting() -> None:
    # torchtitan's llama3_8b.toml (tests/data/runconfigs) with its commented converter line turned on:
    # model.converters = ["quantize.linear.float8"] is torchao's Float8Linear, tensorwise unless the
    # float8 section names the rowwise recipe; compile.enable = true is stack "compile".
    text = (RUNCONFIGS / "torchtitan_llama3_8b.toml").read_text()
    text = text.replace('# converters = ["float8"]', 'converters = ["quantize.linear.float8"]')
    text = text.replace("enable=false", "enable=true")
    plan = plan_from_run(loads_run_config(text.encode(), "llama3_8b.toml"), BASE, None)
    assert plan.float8.value == "tensorwise" and plan.stack.value == "compile"
    # compile.components = ["model", "loss"] (the file's, and CompileConfig's default): the loss is
    # compiled too (torchtitan/components/loss.py at e7c0cae); without "loss" it is eager.
    assert plan.compiled_loss
    model_only = text.replace('components = ["model", "loss"]', 'components = ["model"]')
    assert not plan_from_run(loads_run_config(model_only.encode(), "llama3_8b.toml"), BASE, None).compiled_loss
    rowwise = text.replace("[quantize.linear.float8]\n", '[quantize.linear.float8]\nrecipe_name = "rowwise"\n')
    assert plan_from_run(loads_run_config(rowwise.encode(), "llama3_8b.toml"), BASE, None).float8.value == "rowwise"


def test_torchtitans_other_low_precision_recipes_are_their_float8_settings() -> None:
    # torchtitan's float8 recipe "rowwise_with_gw_hp" (Float8Linear.recipe_name at pytorch/torchtitan 238fa995) is
    # the plan's "rowwise-gw-hp" (it was read as plain rowwise before); its MX converter ("quantize.linear.mx" at
    # 238fa995, "mx" at 6fc499f6, recipe_name default "mxfp8_cublas") is "mxfp8", and a recipe the plan does
    # not have (torchao's "mxfp8_emulated") is refused with the key named.
    text = (RUNCONFIGS / "torchtitan_llama3_8b.toml").read_text()
    float8 = text.replace('# converters = ["float8"]', 'converters = ["quantize.linear.float8"]')
    section = "[quantize.linear.float8]\n"
    gw_hp = float8.replace(section, section + 'recipe_name = "rowwise_with_gw_hp"\n')
    assert plan_from_run(loads_run_config(gw_hp.encode(), "llama3_8b.toml"), BASE, None).float8.value == "rowwise-gw-hp"
    mx = text.replace('# converters = ["float8"]', 'converters = ["quantize.linear.mx"]')
    assert plan_from_run(loads_run_config(mx.encode(), "llama3_8b.toml"), BASE, None).float8.value == "mxfp8"
    rceil = mx + '\n[quantize.linear.mx]\nrecipe_name = "mxfp8_cublas_rceil"\n'
    assert plan_from_run(loads_run_config(rceil.encode(), "llama3_8b.toml"), BASE, None).float8.value == "mxfp8"
    old = text.replace('# converters = ["float8"]', 'converters = ["mx"]') + '\n[mx]\nrecipe_name = "mxfp8_cublas"\n'
    assert plan_from_run(loads_run_config(old.encode(), "llama3_8b.toml"), BASE, None).float8.value == "mxfp8"
    emulated = mx + '\n[quantize.linear.mx]\nrecipe_name = "mxfp8_emulated"\n'
    with pytest.raises(PlanFileError, match=r"quantize\.linear\.mx\.recipe_name: 'mxfp8_emulated' is not allowed"):
        loads_run_config(emulated.encode(), "llama3_8b.toml")

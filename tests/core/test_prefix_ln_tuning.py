"""PEFT's prefix tuning and LN tuning (branch h52pfx): the tensors PEFT trains, what the forward keeps,
the step's FLOPs, the plan's setting through the plan file, the command line, adapter_config.json and the
exporters.

Source read: huggingface/peft 51c2ff666b142d004c12609c9686cf17ca055751 (PEFT 0.19.2.dev0, the version of the
method_comparison results): src/peft/tuners/prefix_tuning/model.py (``PrefixEncoder``), src/peft/peft_model.py
(``get_prompt``, ``PeftModelForCausalLM.forward``), src/peft/utils/other.py (``_prepare_prompt_learning_config``),
src/peft/tuners/ln_tuning/layer.py and model.py (``LNTuningLayer``, ``LNTuningModel._cast_adapter_dtype``),
src/peft/utils/constants.py (``TRANSFORMERS_MODELS_TO_LNTUNING_TARGET_MODULES_MAPPING``).
"""

from __future__ import annotations

import json

import pytest

from core.cli.app import main
from core.errors import PlanError, PlanFileError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.planfile import dumps, loads
from core.files.runconfig import loads_run_config, plan_from_run, resolve_model
from core.params import param_counts
from core.plan import Attention, LoraSettings, Method, Plan, Preset, Strategy
from core.presets import default_plan, plan_for_model
from core.roles import adapter_dtype
from core.training.activations import layer_activations, outside_blocks
from core.training.attention import Kernel, sdpa_kernel
from core.training.flops import token_flops
from core.training.optimizer import trainable_tensors


def _plan(method: Method, tokens: int = 200, model: str = "llama-3.2-3b", **kw: object) -> Plan:
    kw.setdefault("preset", Preset.TRAINER_BF16)
    plan = plan_for_model(model, method=method, lora=LoraSettings(virtual_tokens=tokens), **kw)
    return plan.with_workload(micro_batch=4, seq_len=768)  # the method comparison's batch and max_seq_length


def _saved(plan: Plan) -> dict[str, float]:
    return {t.label: t.bytes for t in layer_activations(plan, False).items}


def test_trainable_parameters_are_peft_s_count() -> None:
    # method_comparison/MetaMathQA/results/prefixtuning--llama-3.2-3B-lr_0.001.json (peft 51c2ff66): token_dim
    # 1024 (8 key/value heads × 128), num_layers 28: "num_trainable_params": 11468800 = 200 × 28 × 2 × 1,024.
    prefix = _plan(Method.PREFIX_TUNING)
    assert (param_counts(prefix).trainable, trainable_tensors(prefix)) == (11_468_800, 1)
    # prefixtuning--llama-3.2-3B-tokens50-init_prefix-lr_0.005.json: "num_trainable_params": 2867200 (50 tokens).
    assert param_counts(_plan(Method.PREFIX_TUNING, 50)).trainable == 2_867_200
    # ln_tuning--llama-3.2-3B-default.json: "num_trainable_params": 175104 = (2 × 28 + 1) × 3,072, one
    # tensor per norm (input_layernorm, post_attention_layernorm of 28 blocks, the final norm).
    ln = _plan(Method.LN_TUNING)
    assert (param_counts(ln).trainable, trainable_tensors(ln)) == (175_104, 57)


def test_ln_tuning_copies_keep_the_base_dtype() -> None:
    # LNTuningModel._cast_adapter_dtype is a no-op: the deep copies of bf16 norms stay bf16, whatever
    # the plan's adapter dtype (float32 by default, PEFT's autocast_adapter_dtype for other adapters).
    ln = _plan(Method.LN_TUNING)
    assert (adapter_dtype(ln).value, ln.adapter_dtype.value) == ("bf16", "fp32")


def test_ln_tuning_keeps_each_trained_norm_s_normalised_value() -> None:
    # LlamaRMSNorm: ``self.weight * hidden_states.to(input_dtype)``: with the weight trained, the multiply
    # keeps the normalised value, N·d in bf16, for each of the block's two norms and the final one.
    ln, lora = _plan(Method.LN_TUNING), _plan(Method.LORA).with_changes(lora=LoraSettings(targets=("q_proj",)))
    n_d_bf16 = 4 * 768 * 3072 * 2  # B·S·d × 2 B
    assert _saved(ln)["attention norm: normalised"] == n_d_bf16
    assert _saved(ln)["MLP norm: normalised"] == n_d_bf16
    assert "attention norm: normalised" not in _saved(lora)
    final = {t.label: t.bytes for t in outside_blocks(ln).items}
    assert final["final norm: normalised"] == n_d_bf16


def test_ln_tuning_refuses_families_peft_targets_otherwise() -> None:
    # constants.py: qwen2 / qwen3 name post_attention_layernorm alone.
    with pytest.raises(PlanError, match="LN tuning"):
        _plan(Method.LN_TUNING, model="qwen2.5-7b")


def test_prefix_keys_and_values_lengthen_every_layer_s_attention() -> None:
    # get_prompt hands the model a cache of 200 positions per layer; with more keys than queries
    # transformers passes an explicit mask, so no enable_gqa: the memory-efficient kernel, k and v
    # repeated to all 24 heads over 768 + 200 positions.
    prefix = _plan(Method.PREFIX_TUNING)
    assert sdpa_kernel(prefix) is Kernel.EFFICIENT
    assert sdpa_kernel(_plan(Method.LN_TUNING)) is Kernel.FLASH
    saved = _saved(prefix)
    assert saved["k, v repeated to every head (seq + 200 prefix positions)"] == 2 * 4 * 968 * 3072 * 2
    assert saved["prefix tuning: the cache's k, v (seq + prefix)"] == 2 * 4 * 968 * 1024 * 2
    # attention.cpp preprocess_mask: 968 keys are a multiple of 8 already (50 tokens: 818 -> 824).
    assert saved["prefix tuning: the mask as the kernel's bias"] == 4 * 768 * 968 * 2
    assert _saved(_plan(Method.PREFIX_TUNING, 50))["prefix tuning: the mask as the kernel's bias"] == 4 * 768 * 824 * 2
    # The sequence itself does not grow (the queries, the logits): Plan.run_seq_len is the data's.
    assert prefix.run_seq_len == 768


def test_prefix_flops_add_the_virtual_keys() -> None:
    # Each query meets 200 more keys in both attention matmuls: 4·H·hd·n per layer forward, ×3 with the
    # backward's two (input gradients through all 28 blocks).
    prefix, none = token_flops(_plan(Method.PREFIX_TUNING)), token_flops(_plan(Method.LN_TUNING))
    extra = 4 * 3072 * 200 * (28 + 2 * 28)
    assert prefix.model - none.model == pytest.approx(extra)
    assert prefix.hardware - none.hardware == pytest.approx(extra)


def test_layouts_beyond_one_process_or_ddp_and_other_attention_are_refused() -> None:
    with pytest.raises(PlanError, match="one GPU or DDP"):
        _plan(Method.LN_TUNING).with_parallel(strategy=Strategy.FSDP, gpus_per_node=2)
    with pytest.raises(PlanError, match="sdpa with prefix tuning"):
        _plan(Method.PREFIX_TUNING).with_changes(attention=Attention.EAGER)
    # peft_model.py: "PREFIX_TUNING does not work with gradient checkpointing".
    with pytest.raises(PlanError, match="gradient checkpointing"):
        _plan(Method.PREFIX_TUNING).with_changes(checkpointing=True)


def test_a_switch_to_prefix_tuning_turns_checkpointing_off_unless_typed(capsys: pytest.CaptureFixture[str]) -> None:
    # peft_model.py (51c2ff66) refuses PREFIX_TUNING with gradient checkpointing: the app's first plan
    # checkpoints, so a switch turns it off (and picks SDPA, the kernel modelled) rather than refuse.
    switched = default_plan().with_changes(attention=Attention.EAGER).with_method(Method.PREFIX_TUNING)
    assert not switched.checkpointing and switched.attention is Attention.SDPA
    with pytest.raises(PlanError, match="gradient checkpointing"):
        default_plan().with_method(Method.PREFIX_TUNING, typed=frozenset({"checkpointing"}))
    args = ["estimate", "--model", "llama-3.2-3b", "--method", "prefix-tuning"]
    assert main(args) == 0
    capsys.readouterr()
    assert main([*args, "--checkpointing"]) != 0  # typed: refused with PEFT's reason
    assert "gradient checkpointing" in capsys.readouterr().err


def test_plan_file_round_trips() -> None:
    for method in (Method.PREFIX_TUNING, Method.LN_TUNING):
        plan = _plan(method, 33)
        assert loads(dumps(plan)) == plan


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "llama-3.2-3b", "--json", "--virtual-tokens", "50"]
    assert main([*args, "--method", "prefix-tuning"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 2_867_200
    assert main([*args, "--method", "ln-tuning"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 175_104


def _read(document: dict[str, object]) -> Plan:
    run = loads_run_config(json.dumps(document).encode(), "adapter_config.json")
    assert run.unknown == ()
    return plan_from_run(run, default_plan(), resolve_model(run))


# The peft_config blocks of prefixtuning--llama-3.2-3B-lr_0.001.json and ln_tuning--llama-3.2-3B-default.json.
_COMMON = {
    "peft_version": "0.19.2.dev0@UNKNOWN",
    "base_model_name_or_path": "meta-llama/Llama-3.2-3B",
    "revision": None,
    "inference_mode": False,
    "auto_mapping": None,
    "modules_to_save": None,
}
_PREFIX = {
    **_COMMON, "task_type": "CAUSAL_LM", "peft_type": "PREFIX_TUNING", "num_virtual_tokens": 200, "token_dim": 1024,
    "num_transformer_submodules": 1, "num_attention_heads": 8, "num_layers": 28, "init_weights": None,
    "encoder_hidden_size": 3072, "prefix_projection": False,
}  # fmt: skip
_LN = {
    **_COMMON, "task_type": None, "peft_type": "LN_TUNING",
    "target_modules": ["input_layernorm", "norm", "post_attention_layernorm"], "exclude_modules": None,
}  # fmt: skip


def test_adapter_config_is_read() -> None:
    prefix = _read(_PREFIX)
    assert (prefix.method, prefix.lora.virtual_tokens, estimate(prefix).params.trainable) == (
        Method.PREFIX_TUNING,
        200,
        11_468_800,
    )
    ln = _read(_LN)
    assert (ln.method, estimate(ln).params.trainable) == (Method.LN_TUNING, 175_104)


def test_adapter_config_refusals_and_unknown_keys() -> None:
    with pytest.raises(PlanFileError, match="prefix_projection: True"):
        loads_run_config(json.dumps({**_PREFIX, "prefix_projection": True}).encode(), "a.json")
    with pytest.raises(PlanFileError, match="target_modules"):
        loads_run_config(json.dumps({**_LN, "target_modules": ["q_proj"]}).encode(), "a.json")
    with pytest.raises(PlanFileError, match="exclude_modules"):
        loads_run_config(json.dumps({**_LN, "exclude_modules": ["norm"]}).encode(), "a.json")
    run = loads_run_config(json.dumps({**_PREFIX, "some_new_field": 3}).encode(), "a.json")
    assert "some_new_field" in run.unknown  # listed, not dropped


def test_exporters_say_they_write_lora() -> None:
    written = export(_plan(Method.PREFIX_TUNING), Target.TRL)
    assert written.cannot("method.kind") and written.cannot("method.lora.virtual_tokens")
    assert export(_plan(Method.LN_TUNING), Target.TRL).cannot("method.kind")

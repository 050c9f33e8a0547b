"""Megatron-Bridge configs in (core.files.runconfig.megatron).

The fixtures are Megatron-Bridge's own YAML files (tests/data/runconfigs/SOURCES.md); the
small documents below are written in the ConfigContainer's own keys, and what each means is
Megatron-Core's (NVIDIA/Megatron-LM d98e8a64: megatron/core/transformer/transformer_config.py
for recompute and fp8, megatron/core/optimizer/optimizer_config.py for the optimizer) or
Megatron-Bridge's (NVIDIA-NeMo/Megatron-Bridge 067f987d: training/config.py, peft/lora.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from core.catalogue import find_model
from core.errors import PlanFileError
from core.files.runconfig import ConfigKind, RunConfig, load_run_config, loads_run_config, plan_from_run, resolve_model
from core.plan import CheckpointPolicy, Float8, Method, Offload, Optimizer, OptimizerImpl, Stack, Strategy
from core.presets import plan_for_model

DATA = Path(__file__).resolve().parents[1] / "data" / "runconfigs"


def _read(document: dict[str, object]) -> RunConfig:
    return loads_run_config(yaml.safe_dump(document).encode(), "run_config.yaml")


def test_the_llama_tutorials_lora_override_is_read_with_its_model() -> None:
    # tutorials/recipes/llama/conf/llama32_1b_finetune.yaml: peft dim 8, alpha 16 over the
    # recipe's LoRA (llama32_1b_peft_config(peft_scheme="lora")), micro-batch 2, 4,096 tokens,
    # the checkpoint folder ./checkpoints/llama32_1b names the model.
    run = load_run_config(DATA / "megatron_bridge_llama32_1b_finetune.yaml")
    assert run.kind is ConfigKind.MEGATRON_BRIDGE
    s = run.settings
    assert (s.method, s.lora_rank, s.lora_alpha, s.micro_batch, s.seq_len) == ("lora", 8, 16, 2, 4096)
    # LoRA's default target_modules: linear_qkv, linear_proj, linear_fc1, linear_fc2.
    assert set(s.lora_targets or ()) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert s.stack == "megatron"
    assert run.unknown == ()
    assert any("global_batch_size" in n.source for n in run.notes)
    choice = resolve_model(run)
    assert choice is not None and choice.model_id == "llama-3.2-1b"


def test_the_qwen3_vl_override_checkpoints_every_block_and_keeps_data_parallel() -> None:
    # examples/models/qwen/qwen_vl/conf/qwen3_vl_pretrain_override_example.yaml:
    # recompute_granularity full, recompute_method uniform, recompute_num_layers 1; micro-batch 4;
    # dist.use_megatron_fsdp / use_torch_fsdp2 false; ddp.grad_reduce_in_fp32 true (read).
    run = load_run_config(DATA / "megatron_bridge_qwen3_vl_pretrain_override_example.yaml")
    s = run.settings
    assert (s.checkpointing, s.checkpoint_policy, s.micro_batch, s.seq_len) == (True, "full", 4, 4096)
    assert s.sharding is None and s.method is None  # the recipe's: an override does not say
    assert s.grad_reduce_in_fp32 is True  # the plan's Megatron gradient buffer in float32
    assert run.unknown == ()


def test_the_qwen3_next_override_is_recognised_and_keeps_the_recipes_method() -> None:
    run = load_run_config(DATA / "megatron_bridge_qwen3_next_80b_a3b_finetune_override_example.yaml")
    assert run.kind is ConfigKind.MEGATRON_BRIDGE
    assert (run.settings.micro_batch, run.settings.seq_len, run.settings.method) == (1, 2048, None)


def test_selective_recompute_is_megatrons_attention_only_policy() -> None:
    # TransformerConfig: 'selective' recomputes recompute_modules, default ["core_attn"].
    s = _read({"model": {"recompute_granularity": "selective"}}).settings
    assert (s.checkpointing, s.checkpoint_policy) == (True, "attention")
    other = _read({"model": {"recompute_granularity": "selective", "recompute_modules": ["core_attn", "mlp"]}})
    assert any("mlp" in u for u in other.unknown)
    mlp_only = _read({"model": {"recompute_granularity": "selective", "recompute_modules": ["mlp"]}})
    assert mlp_only.settings.checkpoint_policy is None and any("mlp" in u for u in mlp_only.unknown)


def test_null_recompute_saves_everything_and_a_partial_block_recompute_is_listed() -> None:
    none = _read({"model": {"recompute_granularity": None}}).settings
    assert none.checkpointing is False
    block = _read({"model": {"recompute_granularity": "full", "recompute_method": "block", "recompute_num_layers": 4}})
    assert block.settings.checkpoint_policy == "full"
    assert any("recompute_num_layers" in u for u in block.unknown)


def test_fp8_and_the_distributed_optimizer_map_onto_te_and_zero1() -> None:
    # mixed_precision.py: bf16_with_fp8_delayed_scaling_mixed sets fp8 "hybrid" over bf16;
    # use_distributed_optimizer shards the float32 main parameters and moments (as ZeRO-1);
    # optimizer "adam" is Transformer Engine / Apex FusedAdam in AdamW mode.
    run = _read(
        {
            "model": {"tensor_model_parallel_size": 2},
            "mixed_precision": "bf16_with_fp8_delayed_scaling_mixed",
            "optimizer": {"optimizer": "adam", "use_distributed_optimizer": True, "clip_grad": 1.0},
            "train": {"micro_batch_size": 1},
        }
    )
    s = run.settings
    assert (s.model_dtype, s.autocast, s.float8) == ("bf16", "none", "te")
    assert (s.optimizer, s.optimizer_impl, s.sharding, s.grad_clip) == ("adamw", "fused", "zero1", True)
    assert any(n.source.startswith("model.tensor_model_parallel_size") for n in run.notes)
    plan = plan_from_run(run, plan_for_model("llama-3.1-8b").on_gpus(8))
    assert plan.stack is Stack.MEGATRON and plan.float8 is Float8.TE
    assert (plan.optimizer, plan.optimizer_impl) == (Optimizer.ADAMW, OptimizerImpl.FUSED)
    assert plan.parallel.strategy is Strategy.ZERO1


def test_the_mxfp8_recipe_maps_onto_transformer_engines_mxfp8() -> None:
    # Megatron-Bridge v0.3.1 src/megatron/bridge/training/mixed_precision.py bf16_with_mxfp8_mixed:
    # fp8 "e4m3", fp8_recipe "mxfp8"; Megatron-Core's TransformerConfig.fp8_recipe takes "mxfp8"
    # (NVIDIA/Megatron-LM 55ac7082). Before, every fp8 recipe read as per-tensor "te".
    named = _read({"mixed_precision": "bf16_with_mxfp8_mixed", "train": {"micro_batch_size": 1}}).settings
    assert named.float8 == "te-mxfp8"
    keyed = _read({"model": {"fp8": "e4m3", "fp8_recipe": "mxfp8"}, "train": {"micro_batch_size": 1}})
    assert keyed.settings.float8 == "te-mxfp8" and not any("fp8_recipe" in u for u in keyed.unknown)
    delayed = _read({"model": {"fp8": "hybrid", "fp8_recipe": "delayed"}, "train": {"micro_batch_size": 1}})
    assert delayed.settings.float8 == "te"
    # Current scaling is its own input (Megatron's tensorwise; Megatron-Bridge's MixedPrecisionConfig
    # default, NVIDIA-NeMo/Megatron-Bridge v0.1.0rc3 .. v0.5.0). Before, it read as "te" (delayed).
    tensorwise = _read({"model": {"fp8": "hybrid", "fp8_recipe": "tensorwise"}, "train": {"micro_batch_size": 1}})
    assert tensorwise.settings.float8 == "te-current"
    named = _read({"mixed_precision": "bf16_with_fp8_current_scaling_mixed", "train": {"micro_batch_size": 1}})
    assert named.settings.float8 == "te-current"
    default = _read({"mixed_precision": {"bf16": True, "fp8": "hybrid"}, "train": {"micro_batch_size": 1}})
    assert default.settings.float8 == "te-current"
    plan = plan_from_run(
        _read({"mixed_precision": "bf16_with_mxfp8_mixed", "train": {"micro_batch_size": 1}}),
        plan_for_model("llama-3.1-8b").on_gpus(8),
    )
    assert plan.float8 is Float8.TE_MXFP8


def test_fsdp_offload_dora_and_a_null_peft() -> None:
    fsdp = _read({"dist": {"use_torch_fsdp2": True}, "optimizer": {"optimizer_cpu_offload": True}}).settings
    assert (fsdp.sharding, fsdp.offload) == ("fsdp", "optimizer")
    dora = _read({"peft": {"_target_": "megatron.bridge.peft.dora.DoRA", "dim": 16, "target_modules": ["linear_qkv"]}})
    assert (dora.settings.method, dora.settings.lora_rank) == ("dora", 16)
    assert set(dora.settings.lora_targets or ()) == {"q_proj", "k_proj", "v_proj"}
    full = _read({"peft": None, "train": {"micro_batch_size": 1}}).settings
    assert full.method == "full"
    plan = plan_from_run(_read({"peft": None, "train": {"micro_batch_size": 1}}), plan_for_model("llama-3.2-1b"))
    assert plan.method is Method.FULL
    offloaded = plan_from_run(
        _read({"optimizer": {"optimizer_cpu_offload": True, "use_distributed_optimizer": True}}),
        plan_for_model("llama-3.2-1b").on_gpus(2),
    )
    assert offloaded.parallel.offload is Offload.OPTIMIZER


def test_a_wildcard_target_or_another_peft_scheme_is_listed_not_dropped() -> None:
    wild = _read({"peft": {"target_modules": ["*.layers.0.*.linear_qkv"]}})
    assert any("layers.0" in u for u in wild.unknown)
    other = _read({"peft": {"_target_": "megatron.bridge.peft.ia3.IA3"}, "train": {"micro_batch_size": 1}})
    assert any("IA3" in u for u in other.unknown)
    assert other.settings.method is None


def test_the_model_comes_from_the_hub_id_then_the_provider_class() -> None:
    # GPTModelProvider.hf_model_id (a provider built from a Hugging Face model) wins.
    hub = _read({"model": {"hf_model_id": "meta-llama/Llama-3.1-8B", "_target_": "megatron.Llama32ModelProvider1B"}})
    assert hub.model_ref == "meta-llama/Llama-3.1-8B"
    provider = _read({"model": {"_target_": "megatron.bridge.models.llama.llama_provider.Llama31ModelProvider8B"}})
    choice = resolve_model(provider)
    assert choice is not None and choice.model_id == "llama-3.1-8b"
    moe = _read({"model": {"_target_": "megatron.bridge.models.qwen.qwen_provider.Qwen3MoEModelProvider30B_A3B"}})
    found = resolve_model(moe)
    assert found is not None and found.model_id == find_model("qwen3-30b-a3b").id


def test_a_key_it_does_not_model_is_listed() -> None:
    run = _read({"model": {"moe_token_dispatcher_type": "alltoall", "seq_length": 4096}})
    assert "model.moe_token_dispatcher_type" in run.unknown


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ({"model": {"recompute_granularity": "sometimes"}}, "model.recompute_granularity"),
        ({"model": {"recompute_granularity": "full", "recompute_method": "random"}}, "model.recompute_method"),
        ({"model": {"fp8": "e5m2"}, "train": {"micro_batch_size": 1}}, "model.fp8"),
        ({"train": {"micro_batch_size": 0}}, "train.micro_batch_size"),
        ({"peft": ["lora"], "train": {"micro_batch_size": 1}}, "peft"),
    ],
)
def test_a_value_megatron_would_refuse_is_refused_with_its_key(document: dict[str, object], key: str) -> None:
    with pytest.raises(PlanFileError, match=key.replace(".", r"\.")):
        _read(document)


def test_the_selective_policy_reaches_the_plan() -> None:
    run = _read({"model": {"recompute_granularity": "selective"}, "train": {"micro_batch_size": 1}})
    plan = plan_from_run(run, plan_for_model("llama-3.1-8b"))
    assert plan.checkpointing and plan.checkpoint_policy is CheckpointPolicy.ATTENTION


@pytest.mark.parametrize("section", ["dist", "ddp"])
def test_megatron_fsdp_is_read_from_either_section(section: str) -> None:
    # Megatron-Bridge 067f987d training/config.py, ConfigContainer.validate: "if
    # self.dist.use_megatron_fsdp or self.ddp.use_megatron_fsdp" turns Megatron-FSDP on; NVIDIA's
    # performance recipes set the ddp form. Either one is fully sharded data parallel.
    run = _read({"model": {"tensor_model_parallel_size": 1}, section: {"use_megatron_fsdp": True}})
    assert run.kind is ConfigKind.MEGATRON_BRIDGE
    assert run.settings.sharding == "fsdp"
    assert not any("use_megatron_fsdp" in u for u in run.unknown)

"""Launch configs out: worked examples, what each target writes that its importer does not read
back (checked on the text), hostile names, and the TOML writer.

The expected texts quote the tools' own keys (the module docstrings name the versions read).
"""

from __future__ import annotations

import json
import math
import shlex
import tomllib
from dataclasses import replace
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.catalogue import find_model
from core.dtypes import KvDtype, Quant, WeightFormat
from core.files.launch import SERVING_TARGETS, TARGET_LABELS, Target, export
from core.files.launch.accelerate import read_accelerate_config
from core.files.launch.common import optimizer_steps
from core.files.launch.deepspeed import read_deepspeed
from core.files.launch.toml_writer import dumps_toml
from core.files.launch.torchrun import read_torchrun
from core.files.runconfig import loads_run_config
from core.inputs import Float8, FsdpUnits, Stack
from core.plan import (
    Engine,
    Inference,
    LoraSettings,
    Method,
    Offload,
    Parallelism,
    Plan,
    Preset,
    Strategy,
    VllmVersion,
    Workload,
    default_plan_on,
    training_refusal,
)
from tests.core.test_launch_roundtrip import launch_plans

LLAMA = find_model("llama-3.1-8b")
STRUCTURE = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def llama_plan(**changes: Any) -> Plan:
    return Plan(model=LLAMA.spec, model_id=LLAMA.id, **changes)


def parse(target: Target, text: str) -> Any:
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    if target in (Target.TRL, Target.DEEPSPEED):
        return json.loads(text)
    if target is Target.TORCHTITAN:
        return tomllib.loads(text)
    if target in (Target.TORCHRUN, Target.ACCELERATE_LAUNCH) or target in SERVING_TARGETS:
        return shlex.split(body)
    return yaml.safe_load(text)


# ---- worked examples ------------------------------------------------------------------------------
QLORA = llama_plan(
    method=Method.QLORA,
    quant=Quant.NF4,
    lora=LoraSettings(rank=16, alpha=32.0, targets=("q_proj", "k_proj", "v_proj", "o_proj")),
    preset=Preset.TRAINER_BF16,
    checkpointing=True,
    workload=Workload(micro_batch=4, seq_len=2048, grad_accum=8, tokens=0),
)


def test_qlora_for_trl() -> None:
    exported = export(QLORA, Target.TRL)
    assert json.loads(exported.text) == {
        "model_name_or_path": "meta-llama/Llama-3.1-8B",
        "dtype": "bfloat16",
        "attn_implementation": "sdpa",
        "use_peft": True,
        "lora_r": 16,
        "lora_alpha": 32,
        "lora_target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
        # TRL's ModelConfig defaults lora_dropout to 0.05 and TrainingArguments max_grad_norm to
        # 1.0: the plan's no-dropout, no-clipping run must say both.
        "lora_dropout": 0.0,
        "use_dora": False,
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "nf4",
        "use_bnb_nested_quant": True,
        "max_length": 2048,
        "per_device_train_batch_size": 4,
        "per_device_eval_batch_size": 4,
        "gradient_accumulation_steps": 8,
        "optim": "adamw_torch_fused",
        "bf16": True,
        "fp16": False,
        "gradient_checkpointing": True,
        "use_liger_kernel": False,
        "torch_compile": False,
        "max_grad_norm": 0.0,
        "weight_decay": 0.0,  # the plan's, TrainingArguments' default (Plan.weight_decay)
    }
    assert exported.unexpressed == () and exported.suffix == ".json"


def test_qlora_for_axolotl_llamafactory_and_torchtune() -> None:
    axolotl = yaml.safe_load(export(QLORA, Target.AXOLOTL).text)
    assert axolotl["adapter"] == "qlora" and axolotl["load_in_4bit"] is True and axolotl["bf16"] is True
    assert (axolotl["lora_r"], axolotl["lora_alpha"], axolotl["sequence_len"]) == (16, 32, 2048)
    factory = yaml.safe_load(export(QLORA, Target.LLAMA_FACTORY).text)
    assert (factory["finetuning_type"], factory["quantization_bit"], factory["lora_target"]) == (
        "lora",
        4,
        "q_proj,k_proj,v_proj,o_proj",
    )
    assert factory["disable_gradient_checkpointing"] is False and factory["bf16"] is True
    tune = export(QLORA, Target.TORCHTUNE)
    model = yaml.safe_load(tune.text)["model"]
    assert model["_component_"] == "torchtune.models.llama3_1.lora_llama3_1_8b" and model["quantize_base"] is True
    assert model["lora_attn_modules"] == ["q_proj", "k_proj", "v_proj", "output_proj"]
    # torchtune keeps the adapters in bf16 with the base and runs no autocast: both named.
    assert [u.field for u in tune.unexpressed] == ["method.adapter_dtype", "method.autocast"]


def test_fsdp_on_two_nodes_for_the_launchers() -> None:
    plan = llama_plan(parallel=Parallelism(nodes=2, gpus_per_node=8, strategy=Strategy.FSDP))
    torchrun = export(plan, Target.TORCHRUN, command=("-m", "my_trainer", "run config.yaml"))
    assert torchrun.text.splitlines()[-1] == (
        "torchrun --nnodes=2 --nproc_per_node=8 --node_rank=$NODE_RANK --master_addr=$MASTER_ADDR "
        "--master_port=29500 -m my_trainer 'run config.yaml'"
    )
    config = yaml.safe_load(export(plan, Target.ACCELERATE).text)
    assert (config["distributed_type"], config["num_machines"], config["num_processes"]) == ("FSDP", 2, 16)
    assert config["fsdp_config"]["fsdp_version"] == 2 and config["fsdp_config"]["fsdp_reshard_after_forward"] is True
    launch = parse(Target.ACCELERATE_LAUNCH, export(plan, Target.ACCELERATE_LAUNCH).text)
    assert launch[:6] == ["accelerate", "launch", "--num_machines", "2", "--num_processes", "16"]
    assert "--use_fsdp" in launch and launch[-1] == "train.py"
    one_node = export(llama_plan(parallel=Parallelism(gpus_per_node=4)), Target.TORCHRUN).text.splitlines()[-1]
    assert one_node == "torchrun --standalone --nnodes=1 --nproc_per_node=4 train.py"


def test_the_recipes_reach_torchtitan_torchtune_and_the_trainers() -> None:
    """A float8 + torch.compile + async-TP plan on 8 H100s: torchtitan gets every key (its job
    config at 238fa995: model.converters "quantize.linear.float8", enable_fsdp_float8_all_gather,
    compile.components, parallelism.enable_async_tensor_parallel, optimizer.early_step_in_backward); before, all of
    them were dropped without a word."""
    layout = Parallelism(gpus_per_node=8, strategy=Strategy.FSDP, tensor_parallel=2, tp_overlap=True)
    layout = replace(layout, fsdp_float8_all_gather=True)
    plan = llama_plan(
        hardware=replace(llama_plan().hardware, gpu="h100-80gb-sxm"),
        parallel=layout,
        stack=Stack.COMPILE,
        float8=Float8.TENSORWISE,
        compiled_loss=True,
        grad_clip=True,
        optimizer_in_backward=True,
    )
    titan = export(plan, Target.TORCHTITAN)
    doc = tomllib.loads(titan.text)
    assert doc["model"]["converters"] == ["quantize.linear.float8"]
    # Tensorwise is recipe_name unset: torchtitan 0.2.2 components/quantization/float8.py:65-69 asserts the float8
    # all-gather off whenever recipe_name is set (found by tools/measure/export_check.py, branch h91titan).
    assert doc["quantize"]["linear"]["float8"] == {"enable_fsdp_float8_all_gather": True}
    assert doc["compile"] == {"enable": True, "components": ["model", "loss"]}
    assert doc["parallelism"]["enable_async_tensor_parallel"] is True
    assert doc["optimizer"]["early_step_in_backward"] is True and doc["training"]["max_norm"] == 1.0
    assert not {u.field for u in titan.unexpressed} & {"method.float8", "method.stack", "parallel.tp_overlap"}
    # torchtune: compile (the loss with it), optimizer_in_bwd; it refuses clipping alongside.
    single = replace(plan, parallel=Parallelism(), float8=Float8.NONE)
    tune = export(single, Target.TORCHTUNE)
    keys = yaml.safe_load(tune.text)
    assert (keys["compile"], keys["optimizer_in_bwd"], keys["clip_grad_norm"]) == (True, True, None)
    assert tune.cannot("method.grad_clip")
    # The HF trainers: torch_compile and max_grad_norm; what they have no key for is listed.
    trl = export(replace(single, optimizer_in_backward=False, activation_offload=True), Target.TRL)
    keys = json.loads(trl.text)
    assert (keys["torch_compile"], keys["max_grad_norm"]) == (True, 1.0)
    assert trl.cannot("method.activation_offload") and trl.cannot("method.compiled_loss")
    # accelerate compiles the prepared model with its dynamo backend (commands/launch.py --dynamo_backend).
    assert yaml.safe_load(export(single, Target.ACCELERATE).text)["dynamo_config"] == {"dynamo_backend": "INDUCTOR"}
    assert "--dynamo_backend inductor" in export(single, Target.ACCELERATE_LAUNCH).text
    # with checkpointing: axolotl 0.12.2 utils/schemas/validation.py:1119 refuses offloading without it
    offloaded = replace(single, activation_offload=True, fused_loss=True, checkpointing=True)
    axolotl = yaml.safe_load(export(offloaded, Target.AXOLOTL).text)
    assert axolotl["activation_offloading"] is True and axolotl["liger_fused_linear_cross_entropy"] is True
    assert axolotl["plugins"] == ["axolotl.integrations.liger.LigerPlugin"]


def test_a_loop_that_keeps_the_output_is_listed_by_every_training_target() -> None:
    """No trainer config has a key for Answer.AI's loop (train.py holds the output through the
    backward): every training export says so rather than dropping it."""
    plan = llama_plan(loop_keeps_output=True)
    for target in (t for t in Target if t not in SERVING_TARGETS):
        assert export(plan, target).cannot("method.loop_keeps_output"), target


def test_modules_kept_in_16_bits_are_listed_by_every_training_target() -> None:
    """No trainer config has a key for transformers' llm_int8_skip_modules (the checkpoint's
    quantization_config or the loading script's BitsAndBytesConfig carries it): every training export
    says so rather than dropping it."""
    plan = llama_plan(method=Method.QLORA, bnb_skip_modules="model.layers.0.mlp,lm_head")
    for target in (t for t in Target if t not in SERVING_TARGETS):
        assert export(plan, target).cannot("method.bnb_skip_modules"), target


def test_fsdp1_wrap_and_allocator_settings_reach_accelerate_and_torchrun() -> None:
    """The plan's FSDP1 wrap is accelerate's fsdp_version 1 with fsdp_cpu_ram_efficient_loading
    (which forces fsdp_sync_module_states: huggingface/accelerate 16cb6eb8 utils/dataclasses.py);
    PYTORCH_CUDA_ALLOC_CONF goes in front of the launch commands and reads back."""
    layout = Parallelism(gpus_per_node=2, strategy=Strategy.FSDP, reshard_after_forward=False, fsdp1_wrap=True)
    plan = llama_plan(parallel=layout, hardware=replace(llama_plan().hardware, alloc_conf="expandable_segments:True"))
    config = yaml.safe_load(export(plan, Target.ACCELERATE).text)["fsdp_config"]
    assert (config["fsdp_version"], config["fsdp_reshard_after_forward"]) == (1, "SHARD_GRAD_OP")
    assert config["fsdp_cpu_ram_efficient_loading"] is True and config["fsdp_sync_module_states"] is True
    back = read_accelerate_config(export(plan, Target.ACCELERATE).text)
    assert back["parallel.fsdp1_wrap"] is True and back["parallel.reshard_after_forward"] is False
    for target in (Target.TORCHRUN, Target.ACCELERATE_LAUNCH):
        exported = export(plan, target)
        assert exported.text.splitlines()[-1].startswith("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ")
        assert not exported.cannot("hardware.alloc_conf")
    assert export(plan, Target.ACCELERATE).cannot("hardware.alloc_conf")  # a file: the variable is listed
    trl = json.loads(export(plan, Target.TRL).text)
    assert trl["fsdp_config"] == {"version": 1, "cpu_ram_efficient_loading": True, "sync_module_states": True}


def test_the_offloaded_steps_threads_reach_the_launch_commands() -> None:
    """A typed OMP_NUM_THREADS (the host optimizer step's threads a rank, core.training.host) goes in
    front of the torchrun and accelerate launch commands and reads back; torchrun keeps a value the
    user set (torch/distributed/run.py config_from_args defaults it only when unset). A trainer's
    config file cannot carry it: listed."""
    layout = Parallelism(gpus_per_node=8, strategy=Strategy.FSDP, offload=Offload.PARAMS, host_threads_per_rank=12)
    plan = llama_plan(parallel=layout)
    for target in (Target.TORCHRUN, Target.ACCELERATE_LAUNCH):
        exported = export(plan, target)
        assert "OMP_NUM_THREADS=12 " in exported.text.splitlines()[-1]
        assert not exported.cannot("parallel.host_threads_per_rank")
    assert read_torchrun(export(plan, Target.TORCHRUN).text)["parallel.host_threads_per_rank"] == 12
    assert export(plan, Target.AXOLOTL).cannot("parallel.host_threads_per_rank")
    # The launcher's default (0) writes nothing.
    default = llama_plan(parallel=replace(layout, host_threads_per_rank=0))
    assert "OMP_NUM_THREADS" not in export(default, Target.TORCHRUN).text


@pytest.mark.parametrize(
    ("strategy", "reshards"),
    [("FULL_SHARD", True), ("SHARD_GRAD_OP", False), ("1", True), ("2", False), ("HYBRID_SHARD", True)],
)
def test_an_fsdp1_accelerate_config_reads_its_sharding_strategy(strategy: str, reshards: bool) -> None:
    """accelerate's FSDP1 files name a ShardingStrategy (accelerate 16cb6eb8: a name or its number
    1-5, in fsdp_reshard_after_forward or the older fsdp_sharding_strategy). Before, the name was
    read as a boolean: FULL_SHARD came back as "keeps the parameters gathered"."""
    for key in ("fsdp_reshard_after_forward", "fsdp_sharding_strategy"):
        text = yaml.safe_dump({"distributed_type": "FSDP", "fsdp_config": {key: strategy}})
        fields = read_accelerate_config(text)
        assert fields["parallel.reshard_after_forward"] is reshards
        assert fields["parallel.fsdp1_wrap"] is False  # FSDP1, but no CPU-held model named


def test_serving_commands() -> None:
    served = llama_plan(inference=Inference(engine=Engine.VLLM, context=8192, concurrent=16, kv_dtype=KvDtype.FP8))
    vllm = export(served, Target.VLLM)
    assert vllm.text.splitlines()[-1] == (
        "vllm serve meta-llama/Llama-3.1-8B --dtype bfloat16 --kv-cache-dtype fp8 --max-model-len 8192 "
        "--tensor-parallel-size 1"  # no --gpu-memory-utilization: the release's default
    )
    assert [u.field for u in vllm.unexpressed] == ["inference.concurrent"]  # the clients' load
    # an int8 cache on vLLM from 0.20 (int8_per_token_head, core.inputs.VLLM_KV_FROM), llama.cpp's q8_0
    llama = export(served.with_inference(kv_dtype=KvDtype.INT8, vllm_version=VllmVersion.V0_20), Target.LLAMA_SERVER)
    assert llama.text.splitlines()[-1] == (
        "llama-server -m Llama-3.1-8B-BF16.gguf -c 131072 -np 16 -n 256 -ngl 999 -fa on -ctk q8_0 -ctv q8_0 -sm none"
    )
    assert [u.field for u in llama.unexpressed] == ["model", "inference.engine"]
    # A plan judged under llama.cpp's own rules writes its GGUF type, GPU layers and cache type.
    own = served.with_inference(engine=Engine.LLAMACPP, gguf_quant="Q4_K_M", gpu_layers=20, cache_type="q8_0")
    llama = export(own, Target.LLAMA_SERVER)
    assert llama.text.splitlines()[-1] == (
        "llama-server -m Llama-3.1-8B-Q4_K_M.gguf -c 131072 -np 16 -n 256 -ngl 20 -fa on -ctk q8_0 -ctv q8_0 -sm none"
    )
    assert [u.field for u in llama.unexpressed] == ["model"]
    awq = export(served.with_inference(weight_dtype=WeightFormat.AWQ_INT4, kv_dtype=KvDtype.FP16), Target.VLLM)
    assert "--dtype float16 --quantization awq" in awq.text and "Serve an AWQ checkpoint" in awq.text


def test_what_a_target_cannot_say_is_named_with_why() -> None:
    frozen = llama_plan(method=Method.FROZEN, frozen_layers=16)
    trl = export(frozen, Target.TRL)
    assert {u.field for u in trl.unexpressed} == {"method.kind", "method.frozen_layers"}
    factory = export(frozen, Target.LLAMA_FACTORY)
    assert yaml.safe_load(factory.text)["freeze_trainable_layers"] == 16
    assert not factory.cannot("method.kind") and not factory.cannot("method.frozen_layers")
    tp = export(llama_plan(parallel=Parallelism(gpus_per_node=8, tensor_parallel=2)), Target.TRL)
    assert tp.cannot("parallel.tensor_parallel") and tp.cannot("parallel.gpus_per_node")
    hf_served = export(llama_plan(), Target.VLLM)
    assert hf_served.cannot("inference.engine")
    assert "Hugging Face generate" in next(u.why for u in hf_served.unexpressed if u.field == "inference.engine")


def test_every_target_has_a_label_and_parses() -> None:
    for target in Target:
        exported = export(QLORA, target)
        assert exported.label == TARGET_LABELS[target] and parse(target, exported.text)
    assert {Target.VLLM, Target.LLAMA_SERVER, Target.SGLANG, Target.OLLAMA} == SERVING_TARGETS
    with pytest.raises(ValueError):
        export(QLORA, "slurm")


# ---- what is written but not read back ------------------------------------------------------------
@STRUCTURE
@given(plan=launch_plans(), target=st.sampled_from([Target.TRL, Target.AXOLOTL, Target.LLAMA_FACTORY]))
def test_trainer_configs_carry_steps_buckets_and_deepspeed(plan: Plan, target: Target) -> None:
    document = parse(target, export(plan, target).text)
    steps = optimizer_steps(plan)
    assert document.get("max_steps") == steps
    par = plan.parallel
    if par.strategy is Strategy.DDP and plan.world_size > 1:
        assert document["ddp_bucket_cap_mb"] == par.ddp_bucket_mb
    if par.strategy in (Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3):
        zero = document["deepspeed"]["zero_optimization"]
        assert zero["reduce_bucket_size"] == par.zero_bucket_elements
        if par.strategy is Strategy.ZERO3:
            assert zero["stage3_prefetch_bucket_size"] == par.zero3_prefetch_elements
            assert zero["stage3_max_live_parameters"] == par.zero3_max_live_elements
            assert zero["stage3_max_reuse_distance"] == par.zero3_max_reuse_elements


@STRUCTURE
@given(plan=launch_plans())
def test_torchtitan_carries_the_layout_and_precision(plan: Plan) -> None:
    exported = export(plan, Target.TORCHTITAN)
    document = tomllib.loads(exported.text)
    par, work = plan.parallel, plan.workload
    training, split = document["training"], document["parallelism"]
    assert training["global_batch_size"] == work.micro_batch * par.data_parallel * work.grad_accum
    assert training.get("steps") == optimizer_steps(plan)
    assert (split["tensor_parallel_degree"], split["pipeline_parallel_degree"]) == (
        par.tensor_parallel,
        par.pipeline_parallel,
    )
    assert split["context_parallel_degree"] == par.context_parallel
    # torchtitan's "default" keeps [norm, head] gathered after the forward, as a carved plan does (b5bcd76c fsdp.py)
    carved = par.fsdp_units is FsdpUnits.CARVED and par.pipeline_parallel == 1
    assert split["fsdp_reshard_after_forward"] == (
        ("default" if carved else "always") if par.reshard_after_forward else "never"
    )
    assert training["enable_cpu_offload"] is (par.offload is Offload.PARAMS)
    if not exported.cannot("method.weight_dtype"):
        assert training["dtype"] == {"bf16": "bfloat16", "fp32": "float32"}[plan.weight_dtype.value]
    assert f"--nnodes={par.nodes} --nproc_per_node={par.gpus_per_node}" in exported.text.splitlines()[1]


@STRUCTURE
@given(plan=launch_plans())
def test_megatron_bridge_carries_the_layout_and_its_header_command_says_the_same(plan: Plan) -> None:
    # Megatron-Bridge 067f987d: model.*_parallel_size (ModelParallelConfig), train.global_batch_size
    # (micro × data-parallel × accumulation), train.train_iters; scripts/training/run_recipe.py takes
    # the same keys as trailing KEY=VALUE overrides.
    exported = export(plan, Target.MEGATRON_BRIDGE)
    document = yaml.safe_load(exported.text)
    par, work = plan.parallel, plan.workload
    model, train = document["model"], document["train"]
    assert (model["tensor_model_parallel_size"], model["pipeline_model_parallel_size"]) == (
        par.tensor_parallel,
        par.pipeline_parallel,
    )
    assert (model["context_parallel_size"], model["expert_model_parallel_size"]) == (
        par.context_parallel,
        par.expert_parallel,
    )
    assert model["sequence_parallel"] is (par.tensor_parallel > 1 and par.sequence_parallel)
    assert train["global_batch_size"] == work.micro_batch * par.data_parallel * work.grad_accum
    assert train.get("train_iters") == optimizer_steps(plan)
    command = shlex.split(exported.text.splitlines()[1].removeprefix("# "))
    assert command[:3] == ["torchrun", f"--nnodes={par.nodes}", f"--nproc_per_node={par.gpus_per_node}"]
    overrides = dict(word.split("=", 1) for word in command if "=" in word and not word.startswith("--"))
    assert overrides["model.tensor_model_parallel_size"] == str(par.tensor_parallel)
    assert overrides["train.global_batch_size"] == str(train["global_batch_size"])
    assert overrides["model.recompute_granularity"] == str(model["recompute_granularity"] or "null")


def test_megatron_bridge_writes_each_transformer_engine_recipe() -> None:
    # Megatron-Core 55ac7082 TransformerConfig.fp8_recipe ("delayed", "tensorwise", "mxfp8", ...), and the
    # precision recipe that runs it (NVIDIA-NeMo/Megatron-Bridge v0.2.0 .. v0.5.0 training/mixed_precision.py:
    # MixedPrecisionConfig.setup copies its fields over the model's, so "bf16_mixed" beside model.fp8 would
    # run no fp8 at all). Before, the per-tensor recipe exported as fp8 "hybrid" under bf16_mixed.
    plan = llama_plan(stack=Stack.MEGATRON)
    expected = {
        Float8.TE: ("delayed", "bf16_with_fp8_delayed_scaling_mixed"),
        Float8.TE_CURRENT: ("tensorwise", "bf16_with_fp8_current_scaling_mixed"),
        Float8.TE_MXFP8: ("mxfp8", "bf16_with_mxfp8_mixed"),
    }
    for recipe, (name, precision) in expected.items():
        written = export(replace(plan, float8=recipe), Target.MEGATRON_BRIDGE)
        document = yaml.safe_load(written.text)
        assert (document["model"]["fp8"], document["model"]["fp8_recipe"]) == ("hybrid", name)
        assert document["mixed_precision"] == precision
        # the recipe file is read back as the same plan input
        assert loads_run_config(written.text.encode(), "megatron-bridge.yaml").settings.float8 == recipe.value


def test_torchtitan_writes_torchaos_other_recipes_and_reads_them_back() -> None:
    # torchtitan 238fa995 (job_config.py, class Float8Linear recipe_name "rowwise_with_gw_hp"; class MXLinear
    # recipe_name default "mxfp8_cublas"; components/quantization/mx.py registers "quantize.linear.mx").
    # Before, both plan settings exported as "not Transformer Engine" refusals.
    plan = llama_plan(hardware=replace(llama_plan().hardware, gpu="b200"))
    expected = {
        Float8.ROWWISE_GW_HP: ("quantize.linear.float8", {"float8": {"recipe_name": "rowwise_with_gw_hp"}}),
        Float8.MXFP8: ("quantize.linear.mx", {"mx": {"recipe_name": "mxfp8_cublas"}}),
    }
    for recipe, (converter, quantize) in expected.items():
        written = export(replace(plan, float8=recipe), Target.TORCHTITAN)
        document = tomllib.loads(written.text)
        assert document["model"]["converters"] == [converter]
        assert document["quantize"]["linear"] == quantize
        assert not written.cannot("method.float8")
        assert loads_run_config(written.text.encode(), "run.toml").settings.float8 == recipe.value


def test_megatron_bridge_lists_a_split_fused_group_and_a_4bit_base() -> None:
    # Megatron-Core fuses q, k, v into linear_qkv (and gate, up into linear_fc1): LoRA on q and v
    # alone cannot be said; Megatron-Bridge's PEFT adapts a 16-bit base.
    lora_qv = replace(QLORA, method=Method.LORA, lora=replace(QLORA.lora, targets=("q_proj", "v_proj")))
    exported = export(lora_qv, Target.MEGATRON_BRIDGE)
    assert exported.cannot("method.lora.targets")
    assert yaml.safe_load(exported.text)["peft"]["target_modules"] == ["linear_qkv"]
    assert export(QLORA, Target.MEGATRON_BRIDGE).cannot("method.kind")


@STRUCTURE
@given(plan=launch_plans())
def test_torchtune_carries_eval_batch_sharding_and_steps(plan: Plan) -> None:
    document = yaml.safe_load(export(plan, Target.TORCHTUNE).text)
    assert document["batch_size_val"] == (plan.workload.eval_batch or plan.workload.micro_batch)
    if plan.parallel.strategy is Strategy.FSDP:
        assert document["fsdp_reshard_after_forward"] is plan.parallel.reshard_after_forward
        assert document["fsdp_cpu_offload"] is (plan.parallel.offload is Offload.PARAMS)
    steps = optimizer_steps(plan)
    assert document.get("max_steps_per_epoch") == steps and document.get("epochs") == (1 if steps else None)


@STRUCTURE
@given(plan=launch_plans())
def test_the_deepspeed_file_reads_the_same_through_a_trainer_config(plan: Plan) -> None:
    """The DeepSpeed export given inline to a transformers config: the project's importer reads
    the same stage and offload as the export's own reader."""
    document = json.loads(export(plan, Target.DEEPSPEED).text)
    run = loads_run_config(json.dumps({"per_device_train_batch_size": 1, "deepspeed": document}).encode(), "x.json")
    own = read_deepspeed(document)
    assert run.settings.sharding == own["parallel.strategy"].value
    assert (run.settings.offload or "none") == own["parallel.offload"].value


# ---- hostile names --------------------------------------------------------------------------------
HOSTILE = 'evil"\n[model]\nname = "x" # \\ \x1b]0;t\x07 \u202e'


@pytest.mark.parametrize("target", list(Target))
def test_hostile_model_names_stay_inside_their_strings(target: Target) -> None:
    custom = replace(LLAMA.spec, name=HOSTILE, params_override=123_456_789)
    plan = Plan(model=custom, inference=Inference(engine=Engine.VLLM))
    for given_ref in (None, HOSTILE):
        exported = export(plan, target, model_ref=given_ref)
        comments = [line for line in exported.text.splitlines() if line.startswith("#")]
        assert all("\x1b" not in line and "\x07" not in line for line in comments)
        parsed = parse(target, exported.text)
        assert parsed  # still one document / one command
        if given_ref is None and target not in (
            Target.DEEPSPEED,
            Target.ACCELERATE,
            Target.ACCELERATE_LAUNCH,
            Target.TORCHRUN,
        ):
            assert exported.cannot("model")  # launch-only files name no model: the script's config does
        if target is Target.TORCHTITAN:
            assert set(parsed) == {
                "job",
                "model",
                "optimizer",
                "training",
                "activation_checkpoint",
                "parallelism",
                "compile",
            }
            assert parsed["job"]["description"] == f"VRAM Planner plan for {HOSTILE}"
        if target is Target.VLLM and given_ref is not None:
            assert parsed[2] == HOSTILE
        assert all("\n" not in u.why for u in exported.unexpressed)


# ---- the TOML writer ---------------------------------------------------------------------------------
keys = st.text(max_size=12)
scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30),
)
values = st.one_of(scalars, st.lists(scalars, max_size=4))
tables = st.recursive(
    st.dictionaries(keys, values, max_size=5),
    lambda inner: st.dictionaries(keys, st.one_of(values, inner), max_size=5),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(document=tables)
def test_toml_written_reads_back_the_same(document: dict[str, Any]) -> None:
    back = tomllib.loads(dumps_toml(document))
    assert back == document or _same_floats(back, document)


def _same_floats(a: Any, b: Any) -> bool:
    """-0.0 and 0.0 compare equal; anything else must be identical."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_floats(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_floats(x, y) for x, y in zip(a, b, strict=True))
    return a == b and type(a) is type(b)


def test_toml_refuses_what_it_cannot_write() -> None:
    for bad in (math.inf, math.nan, None, {1, 2}):
        with pytest.raises((ValueError, TypeError)):
            dumps_toml({"x": bad})
    with pytest.raises(ValueError):
        dumps_toml({"x": "\ud800"})


def test_a_training_export_of_a_model_not_trained_here_says_so() -> None:
    # core.plan.training_refusal: Llama 4 is planned for serving only (transformers' Llama4TextMoe runs every
    # expert on every token). Its training configs are still written, and the model line says nothing in them
    # was judged to fit; the serving command, which the plan did judge, carries no such note.
    scout = find_model("llama-4-scout-17b-16e")
    plan = default_plan_on(scout.spec, scout.id)
    refusal = training_refusal(plan.model)
    assert refusal is not None
    for target in Target:
        exported = export(plan, target)
        said = [u.why for u in exported.unexpressed if u.field == "model"]
        if target in SERVING_TARGETS:
            assert not any("training step" in why for why in said), target
        else:
            assert len(said) == 1 and "does not estimate this model's training step" in said[0], target
            assert refusal in said[0], target
    # A model the planner trains gets no such line.
    assert not export(QLORA, Target.TRL).cannot("model")

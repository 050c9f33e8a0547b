"""accelerate: its config file (YAML) and the ``accelerate launch`` command that carries the same.

Keys read from huggingface/accelerate 1.15.0.dev0 (commit 16cb6eb8): ``commands/config/config_args.py``
``ClusterConfig`` (unknown keys are refused: only its fields are written: ``compute_environment``,
``distributed_type`` NO | MULTI_GPU | FSDP | DEEPSPEED, ``mixed_precision`` no | bf16 | fp16,
``num_machines``, ``num_processes`` (all GPUs), ``machine_rank``, ``main_process_ip`` /
``main_process_port``, ``rdzv_backend``, ``same_network``, ``use_cpu``, ``fsdp_config``,
``deepspeed_config``, ``parallelism_config``) and ``commands/launch.py``, whose flags have the
sections' key names: ``fsdp_version`` 2, ``fsdp_reshard_after_forward``, ``fsdp_offload_params``
(parameters, gradients and optimizer state), ``fsdp_activation_checkpointing`` (every block);
``zero_stage``, ``offload_optimizer_device`` / ``offload_param_device`` (none | cpu),
``gradient_accumulation_steps``, ``zero3_init_flag``; ``parallelism_config_tp_size`` /
``_cp_size`` / ``_dp_shard_size`` / ``_dp_replicate_size`` (``--use_parallelism_config``),
``_cp_comm_strategy`` (allgather | alltoall: ``TorchContextParallelConfig``, handed to torch's
``set_rotate_method`` by ``Accelerator._prepare_cp``).
"""

from __future__ import annotations

import shlex
from typing import Any, Final

import yaml

from core.dtypes import Autocast
from core.files.launch.common import (
    ENV_SETTINGS,
    RECIPE_WHY,
    TRAINING_NAMES,
    Draft,
    Export,
    Target,
    alloc_env,
    command_words,
    dump_yaml,
    header,
    read_alloc_env,
)
from core.inputs import Stack
from core.plan import CheckpointPolicy, CpRotate, Offload, Plan, Strategy

MIXED: Final = {Autocast.NONE: "no", Autocast.BF16: "bf16", Autocast.FP16: "fp16"}
AUTOCAST: Final = {v: k for k, v in MIXED.items()}
PORT: Final = 29500
ZERO_STAGES: Final = {Strategy.ZERO1: 1, Strategy.ZERO2: 2, Strategy.ZERO3: 3}
SCRIPT_WHY: Final = "the training script's, not accelerate's: pair this with a trainer config export"
UNITS_WHY: Final = (
    "no config key chooses FSDP2's units: accelerate 1.14.0 on carves the embedding and [final norm, head] "
    "(utils/fsdp_utils.py fsdp2_prepare_model), up to 1.13 they stay in the root unit: run a release that matches"
)


def _fsdp(draft: Draft, expressed: set[str]) -> dict[str, Any]:
    plan, par = draft.plan, draft.plan.parallel
    if par.offload is Offload.OPTIMIZER:
        draft.cannot("parallel.offload", "FSDP's CPU offload moves parameters, gradients and optimizer state together")
    if plan.checkpointing and plan.checkpoint_policy is not CheckpointPolicy.FULL:
        draft.cannot("method.checkpoint_policy", "fsdp_activation_checkpointing checkpoints every block")
    expressed.update({"parallel.reshard_after_forward", "method.checkpointing", "method.checkpoint_policy"})
    expressed.add("parallel.fsdp1_wrap")
    if par.fsdp1_wrap:
        strategy = "FULL_SHARD" if par.reshard_after_forward else "SHARD_GRAD_OP"
        if par.dp_replicate > 1:
            strategy = _fsdp1_hybrid(draft, strategy)
        expressed.add("parallel.dp_replicate")
        return {
            "fsdp_version": 1,
            "fsdp_reshard_after_forward": strategy,
            "fsdp_offload_params": par.offload is Offload.PARAMS,
            "fsdp_activation_checkpointing": plan.checkpointing,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_sync_module_states": True,
        }
    expressed.add("parallel.dp_replicate")  # FSDP2: parallelism_config_dp_replicate_size (_parallelism)
    # accelerate v1.14.0 (PR #4015) carves the embedding and [final norm, head] whatever the config says.
    draft.outside(["parallel.fsdp_units"], UNITS_WHY)
    return {
        "fsdp_version": 2,
        "fsdp_reshard_after_forward": par.reshard_after_forward,
        "fsdp_offload_params": par.offload is Offload.PARAMS,
        "fsdp_activation_checkpointing": plan.checkpointing,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_state_dict_type": "SHARDED_STATE_DICT",
        "fsdp_cpu_ram_efficient_loading": True,
    }


def _fsdp1_hybrid(draft: Draft, strategy: str) -> str:
    """FSDP1's hybrid sharding: HYBRID_SHARD (or _HYBRID_SHARD_ZERO2, which keeps the gathered
    parameters after the forward). Given no process group, as accelerate's FSDP1 plugin gives it,
    FSDP1 shards within a node and replicates across nodes (pytorch/pytorch
    ``torch/distributed/fsdp/_init_utils.py`` ``_init_process_group_state_for_hybrid_shard``:
    ``_init_intra_and_inter_node_groups(default_group, device_count())``, "we shard across
    intra-node"), so the plan's shard group must be one node's GPUs."""
    par = draft.plan.parallel
    if par.fsdp_shards != par.gpus_per_node or par.tensor_parallel * par.pipeline_parallel > 1:
        draft.cannot(
            "parallel.dp_replicate",
            f"FSDP1's HYBRID_SHARD shards over one node's {par.gpus_per_node} GPUs and replicates across the "
            f"{par.nodes} nodes; this plan shards over {par.fsdp_shards} ranks in {par.dp_replicate} replicas "
            "(FSDP2 with parallelism_config_dp_replicate_size sets any split)",
        )
        return strategy
    return "HYBRID_SHARD" if strategy == "FULL_SHARD" else "_HYBRID_SHARD_ZERO2"


def _deepspeed(draft: Draft, expressed: set[str]) -> dict[str, Any]:
    plan, par = draft.plan, draft.plan.parallel
    stage = ZERO_STAGES[par.strategy]
    if par.offload is Offload.PARAMS and stage != 3:
        draft.cannot("parallel.offload", "DeepSpeed offloads parameters only under ZeRO-3")
    params = par.offload is Offload.PARAMS and stage == 3
    expressed.add("workload.grad_accum")
    return {
        "zero_stage": stage,
        "offload_optimizer_device": "cpu" if par.offload is not Offload.NONE else "none",
        "offload_param_device": "cpu" if params else "none",
        "gradient_accumulation_steps": plan.workload.grad_accum,
        "zero3_init_flag": stage == 3,
    }


def _parallelism(draft: Draft, distributed: str) -> dict[str, Any] | None:
    """accelerate's ParallelismConfig (FSDP2 or DDP): tensor and context parallel, and HSDP as
    ``dp_replicate_size`` > 1 beside ``dp_shard_size`` > 1 (accelerate 16cb6eb8
    ``parallelism_config.py``: "dp_replicate_size > 1 and dp_shard_size > 1, we obtain Hybrid
    Sharded Data Parallel (HSDP)"; the sizes' product must be the process count)."""
    par = draft.plan.parallel
    hybrid = distributed == "FSDP" and not par.fsdp1_wrap and par.dp_replicate > 1
    if par.tensor_parallel == 1 and par.context_parallel == 1 and not hybrid:
        return None
    if distributed == "DEEPSPEED":
        for name in ("parallel.tensor_parallel", "parallel.context_parallel", "parallel.cp_rotate_method"):
            draft.outside([name], "accelerate's tensor / context parallel runs with FSDP2 or DDP, not DeepSpeed")
        return None
    fsdp = distributed == "FSDP"
    table: dict[str, Any] = {
        "parallelism_config_dp_replicate_size": par.dp_replicate if fsdp else par.data_parallel,
        "parallelism_config_dp_shard_size": par.data_parallel // par.dp_replicate if fsdp else 1,
        "parallelism_config_tp_size": par.tensor_parallel,
        "parallelism_config_cp_size": par.context_parallel,
    }
    if par.context_parallel > 1:
        # The ring's K/V rotation: launch passes it on only for CP > 1 (utils/launch.py:
        # PARALLELISM_CONFIG_CP_COMM_STRATEGY), TorchContextParallelConfig reads it and
        # Accelerator._prepare_cp calls torch's set_rotate_method with it.
        table["parallelism_config_cp_comm_strategy"] = par.cp_rotate_method.value
    return table


def settings(draft: Draft, written: tuple[str, ...] = ()) -> dict[str, Any]:
    """What accelerate is told, as its config file names it (the command's flags are the same keys);
    ``written``: the fields the caller writes besides (the launch command's allocator settings)."""
    plan, par = draft.plan, draft.plan.parallel
    expressed = {
        *written,
        "parallel.nodes",
        "parallel.gpus_per_node",
        "parallel.strategy",
        "parallel.offload",
        "method.autocast",
    }
    expressed.update({"parallel.tensor_parallel", "parallel.context_parallel", "parallel.cp_rotate_method"})
    found: dict[str, Any] = {
        "num_machines": par.nodes,
        "num_processes": plan.world_size,
        "mixed_precision": MIXED[plan.autocast],
    }
    expressed.add("method.stack")
    if plan.stack is Stack.COMPILE:
        found["dynamo_config"] = {"dynamo_backend": "INDUCTOR"}
    elif plan.stack is Stack.MEGATRON:
        draft.cannot("method.stack", "Megatron-LM / NeMo's fused kernels are not accelerate's (eager is written)")
    if par.strategy is Strategy.FSDP:
        found.update(distributed_type="FSDP", fsdp_config=_fsdp(draft, expressed))
    elif par.strategy in ZERO_STAGES:
        found.update(distributed_type="DEEPSPEED", deepspeed_config=_deepspeed(draft, expressed))
    else:
        found["distributed_type"] = "MULTI_GPU" if plan.world_size > 1 else "NO"
        if par.offload is not Offload.NONE:
            draft.cannot("parallel.offload", "DDP keeps everything on the GPU: offload needs FSDP or DeepSpeed")
    parallelism = _parallelism(draft, found["distributed_type"])
    if parallelism is not None:
        found["parallelism_config"] = parallelism
    draft.outside(["parallel.pipeline_parallel"], "accelerate runs pipeline parallelism only through Megatron-LM")
    draft.outside(
        [
            "parallel.zero_bucket_elements",
            "parallel.zero_overlap_comm",
            "parallel.zero3_overlap_comm",
            "parallel.zero3_prefetch_elements",
            "parallel.zero3_max_live_elements",
            "parallel.zero3_max_reuse_elements",
            "parallel.bf16_master_weights",
            "parallel.bf16_optimizer_states",
        ],
        "accelerate's deepspeed_config holds no bucket sizes, overlap_comm nor bf16 master options: give it the "
        "DeepSpeed export as deepspeed_config_file",
    )
    for name in ENV_SETTINGS:
        if name not in expressed:
            draft.outside([name], RECIPE_WHY[name])
    draft.outside([n for n in TRAINING_NAMES if n not in expressed], SCRIPT_WHY)
    return found


def export_accelerate_config(plan: Plan) -> Export:
    draft = Draft(plan)
    found = settings(draft)
    document: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "debug": False,
        "distributed_type": found.pop("distributed_type"),
        "mixed_precision": found.pop("mixed_precision"),
        "num_machines": found.pop("num_machines"),
        "num_processes": found.pop("num_processes"),
        "machine_rank": 0,
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
        **found,
    }
    lines = ["accelerate config written by VRAM Planner: accelerate launch --config_file <this file> <script>"]
    if plan.parallel.nodes > 1:
        document.update(main_process_ip=None, main_process_port=PORT)
        lines.append("On each node: set machine_rank (0 on the first) and main_process_ip to the first node's address.")
    return draft.finish(Target.ACCELERATE, header(lines) + dump_yaml(document))


def _flag(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def export_accelerate_launch(plan: Plan, command: tuple[str, ...] = ("train.py",)) -> Export:
    """``accelerate launch`` with every setting as a flag, then ``command`` (the script and its arguments)."""
    draft = Draft(plan)
    found = settings(draft, ENV_SETTINGS)
    env = alloc_env(draft)
    argv = [
        "accelerate",
        "launch",
        "--num_machines",
        str(found["num_machines"]),
        "--num_processes",
        str(found["num_processes"]),
    ]
    if plan.parallel.nodes > 1:
        argv += [
            "--machine_rank",
            "$MACHINE_RANK",
            "--main_process_ip",
            "$MAIN_PROCESS_IP",
            "--main_process_port",
            str(PORT),
        ]
    argv += ["--mixed_precision", found["mixed_precision"]]
    switch = {"FSDP": "--use_fsdp", "DEEPSPEED": "--use_deepspeed", "MULTI_GPU": "--multi_gpu"}
    if found["distributed_type"] in switch:
        argv.append(switch[found["distributed_type"]])
    for section in ("fsdp_config", "deepspeed_config", "parallelism_config", "dynamo_config"):
        if section == "parallelism_config" and section in found:
            argv.append("--use_parallelism_config")
        for key, value in found.get(section, {}).items():
            argv += [f"--{key}", _flag(value).lower() if key == "dynamo_backend" else _flag(value)]
    words = env + [w if w.startswith("$") else shlex.quote(w) for w in argv] + [shlex.quote(c) for c in command]
    lines = ["accelerate launch written by VRAM Planner"]
    if plan.parallel.nodes > 1:
        lines.append(
            "Run on every node with MACHINE_RANK (0 on the first) and MAIN_PROCESS_IP (the first node's address)."
        )
    return draft.finish(Target.ACCELERATE_LAUNCH, header(lines) + " ".join(words) + "\n")


# ---- reading them back ---------------------------------------------------------------------
_SECTIONS: Final = {"fsdp_": "fsdp_config", "parallelism_config_": "parallelism_config", "dynamo_": "dynamo_config"}
_DEEPSPEED_KEYS: Final = (
    "zero_stage",
    "offload_optimizer_device",
    "offload_param_device",
    "gradient_accumulation_steps",
    "zero3_init_flag",
)


def _fields(found: dict[str, Any]) -> dict[str, Any]:
    """Plan fields from accelerate's settings (the inverse of :func:`settings`)."""
    machines, processes = int(found.get("num_machines", 1)), int(found.get("num_processes", 1))
    fields: dict[str, Any] = {"parallel.nodes": machines, "parallel.gpus_per_node": processes // machines}
    fields["method.autocast"] = AUTOCAST[str(found.get("mixed_precision", "no"))]
    kind = found.get("distributed_type", "NO")
    fsdp, deepspeed = found.get("fsdp_config") or {}, found.get("deepspeed_config") or {}
    if kind == "FSDP":
        fields["parallel.strategy"] = Strategy.FSDP
        fields["parallel.reshard_after_forward"] = _reshards(fsdp)
        fields["parallel.offload"] = Offload.PARAMS if _true(fsdp.get("fsdp_offload_params")) else Offload.NONE
        fields["method.checkpointing"] = _true(fsdp.get("fsdp_activation_checkpointing"))
        loading = _true(fsdp.get("fsdp_cpu_ram_efficient_loading")) or _true(fsdp.get("fsdp_sync_module_states"))
        fields["parallel.fsdp1_wrap"] = str(fsdp.get("fsdp_version", 1)).strip() == "1" and loading
    elif kind == "DEEPSPEED":
        fields["parallel.strategy"] = {1: Strategy.ZERO1, 2: Strategy.ZERO2, 3: Strategy.ZERO3}[
            int(deepspeed["zero_stage"])
        ]
        params, optimizer = deepspeed.get("offload_param_device"), deepspeed.get("offload_optimizer_device")
        fields["parallel.offload"] = (
            Offload.PARAMS if params == "cpu" else Offload.OPTIMIZER if optimizer == "cpu" else Offload.NONE
        )
        fields["workload.grad_accum"] = int(deepspeed.get("gradient_accumulation_steps", 1))
    else:
        fields.update({"parallel.strategy": Strategy.DDP, "parallel.offload": Offload.NONE})
    backend = str((found.get("dynamo_config") or {}).get("dynamo_backend", "NO")).upper()
    fields["method.stack"] = Stack.EAGER if backend == "NO" else Stack.COMPILE
    split = found.get("parallelism_config") or {}
    fields["parallel.tensor_parallel"] = int(split.get("parallelism_config_tp_size", 1))
    fields["parallel.context_parallel"] = int(split.get("parallelism_config_cp_size", 1))
    fields["parallel.cp_rotate_method"] = CpRotate(str(split.get("parallelism_config_cp_comm_strategy", "allgather")))
    if kind == "FSDP":
        fields["parallel.dp_replicate"] = _replicas(fsdp, split, machines)
    return fields


def _replicas(fsdp: dict[str, Any], split: dict[str, Any], machines: int) -> int:
    """HSDP's replicas: FSDP2's ``parallelism_config_dp_replicate_size``, or one per node under
    FSDP1's HYBRID_SHARD / _HYBRID_SHARD_ZERO2 (see :func:`_fsdp1_hybrid`)."""
    if str(fsdp.get("fsdp_version", 1)).strip() == "2":
        return int(split.get("parallelism_config_dp_replicate_size", 1))
    return machines if _strategy(fsdp) in ("HYBRID_SHARD", "_HYBRID_SHARD_ZERO2") else 1


# torch.distributed.fsdp.ShardingStrategy, in accelerate's FSDP_SHARDING_STRATEGY order (1-5):
# whether each frees the gathered parameters after the forward.
FSDP1_RESHARDS: Final = {
    "FULL_SHARD": True,
    "SHARD_GRAD_OP": False,
    "NO_SHARD": False,
    "HYBRID_SHARD": True,
    "_HYBRID_SHARD_ZERO2": False,
}


def _strategy(fsdp: dict[str, Any]) -> str:
    """FSDP1's sharding strategy as its name: ``fsdp_reshard_after_forward`` or the older
    ``fsdp_sharding_strategy``, a name or accelerate's number; FSDP2's boolean comes back as it is."""
    word = str(fsdp.get("fsdp_reshard_after_forward", fsdp.get("fsdp_sharding_strategy", True))).strip().upper()
    if word.isdigit() and 1 <= int(word) <= len(FSDP1_RESHARDS):
        return list(FSDP1_RESHARDS)[int(word) - 1]
    return word


def _reshards(fsdp: dict[str, Any]) -> bool:
    """Reshard after forward: FSDP2's boolean, or what FSDP1's strategy does."""
    word = _strategy(fsdp)
    return FSDP1_RESHARDS[word] if word in FSDP1_RESHARDS else _true(word)


def _true(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def read_accelerate_config(text: str) -> dict[str, Any]:
    return _fields(yaml.safe_load(text))


def read_accelerate_launch(text: str) -> dict[str, Any]:
    """Plan fields from an ``accelerate launch`` line (the inverse of :func:`export_accelerate_launch`)."""
    env, words = read_alloc_env(command_words(text))
    found: dict[str, Any] = {"distributed_type": "NO"}
    kinds = {"--use_fsdp": "FSDP", "--use_deepspeed": "DEEPSPEED", "--multi_gpu": "MULTI_GPU"}
    index = 2
    while index < len(words) and words[index].startswith("--"):
        flag = words[index]
        if flag in kinds or flag == "--use_parallelism_config":
            found["distributed_type"] = kinds.get(flag, found["distributed_type"])
            index += 1
            continue
        key, value = flag[2:], words[index + 1]
        section = next((s for p, s in _SECTIONS.items() if key.startswith(p)), None)
        section = "deepspeed_config" if key in _DEEPSPEED_KEYS else section
        (found.setdefault(section, {}) if section else found)[key] = value
        index += 2
    return {**_fields(found), **env}

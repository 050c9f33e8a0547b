"""torchtitan job config (TOML), for ``torchrun ... -m torchtitan.train --job.config_file run.toml``.

Keys read from pytorch/torchtitan commit 238fa995 (``torchtitan/config/job_config.py``, the last
release configured by TOML, as :mod:`core.files.runconfig.torchtitan` reads it): ``[model]``
``name``, ``flavor``, ``hf_assets_path``; ``[training]`` ``local_batch_size``, ``global_batch_size``
(local × data-parallel degree × accumulation: torchtitan derives the accumulation from it),
``seq_len``, ``steps``, ``dtype`` (bfloat16 | float32, the stored weights),
``mixed_precision_param`` (FSDP2's parameter dtype; without FSDP, the autocast dtype:
``distributed/utils.py`` ``maybe_enable_amp``), ``mixed_precision_reduce`` (float32 only),
``enable_cpu_offload``; ``[optimizer]`` ``name`` (AdamW | Adam), ``implementation`` (fused |
foreach | for-loop); ``[activation_checkpoint]`` ``mode`` (none | full | selective),
``selective_ac_option`` ("op" or N: every Nth block); ``[parallelism]``
``data_parallel_replicate_degree`` (DDP), ``data_parallel_shard_degree`` (FSDP2; -1: the ranks
left), ``fsdp_reshard_after_forward`` (default | always | never), ``tensor_parallel_degree``,
``pipeline_parallel_degree``, ``pipeline_parallel_schedule`` (GPipe | 1F1B | Interleaved1F1B),
``context_parallel_degree``, ``context_parallel_rotate_method`` (allgather | alltoall, read at
torchtitan 000204a4), ``enable_async_tensor_parallel``; ``[compile]`` ``enable``,
``components`` ("model", "loss"); ``[model] converters`` with ``quantize.linear.float8``
(``recipe_name`` tensorwise | rowwise | rowwise_with_gw_hp, ``enable_fsdp_float8_all_gather``) or
``quantize.linear.mx`` (``recipe_name`` mxfp8_cublas);
``[optimizer] early_step_in_backward``; ``[training] max_norm`` (torchtitan clips the gradients
every step: ``train.py`` calls ``clip_grad_norm_`` unconditionally). torchtitan trains every
weight of its own model definitions (``torchtitan/models``: llama3 8B / 70B / 405B, qwen3 0.6B to 32B and 30B-A3B).
"""

from __future__ import annotations

from typing import Any, Final

from core.catalogue import catalogue_entry
from core.dtypes import Autocast, Dtype, MpDtype
from core.files.launch.common import (
    Draft,
    Export,
    Target,
    header,
    model_reference,
    optimizer_steps,
    recipes_outside,
)
from core.files.launch.fields import FIELDS_BY_NAME
from core.files.launch.toml_writer import dumps_toml
from core.files.runconfig.torchtitan import FLOAT8_RECIPES as TITAN_FLOAT8_RECIPES
from core.files.runconfig.torchtitan import MX_DEFAULT_RECIPE
from core.inputs import Float8, FsdpUnits, Stack
from core.optimizer_stacks import TORCHTITAN_NAMES, TORCHTITAN_RULE
from core.plan import (
    CheckpointPolicy,
    Method,
    Offload,
    OptimizerImpl,
    Parallelism,
    PipelineSchedule,
    Plan,
    Strategy,
)

MODELS: Final = {
    "llama-3.1-8b": ("llama3", "8B"),
    "llama-3.1-70b": ("llama3", "70B"),
    "qwen3-0.6b": ("qwen3", "0.6B"),
    "qwen3-1.7b": ("qwen3", "1.7B"),
    "qwen3-4b": ("qwen3", "4B"),
    "qwen3-8b": ("qwen3", "8B"),
    "qwen3-14b": ("qwen3", "14B"),
    "qwen3-32b": ("qwen3", "32B"),
    "qwen3-30b-a3b": ("qwen3", "30B-A3B"),
}
TORCH_DTYPES: Final = {Dtype.BF16: "bfloat16", Dtype.FP32: "float32"}
MP_DTYPES: Final = {MpDtype.BF16: "bfloat16", MpDtype.FP32: "float32"}
OPTIMIZERS: Final = TORCHTITAN_NAMES  # core.optimizer_stacks: what torchtitan builds
# torchtitan's FSDP2 wrap since 83e69410 (2025-07-28; torchtitan/distributed/fsdp.py apply_fsdp_to_decoder at
# b5bcd76c): no key chooses it.
TORCHTITAN_CARVES: Final = (
    "torchtitan (since July 2025) always makes the embedding and [final norm, head] FSDP2 units of their own "
    "(carved): the plan's root-unit layout is an older torchtitan's or accelerate up to 1.13's"
)
IMPLEMENTATIONS: Final = {
    OptimizerImpl.FUSED: "fused",
    OptimizerImpl.FOREACH: "foreach",
    OptimizerImpl.FORLOOP: "for-loop",
}
# torchtitan 238fa995: the converter registered as "quantize.linear.float8"
# (torchtitan/components/quantization/float8.py) and the recipe names of Float8Linear.recipe_name.
FLOAT8_CONVERTER: Final = "quantize.linear.float8"
# The names written are the importer's (core.files.runconfig.torchtitan), so an export reads back as the same setting.
FLOAT8_RECIPES: Final = {Float8(value): name for name, value in TITAN_FLOAT8_RECIPES.items()}
# torchtitan 238fa995: the MX converter "quantize.linear.mx" (torchtitan/components/quantization/mx.py), written
# with its default recipe (torchao's MXLinear on Blackwell's block-scaled GEMM).
MX_CONVERTER: Final = "quantize.linear.mx"
SCHEDULES: Final = {
    PipelineSchedule.GPIPE: "GPipe",
    PipelineSchedule.ONE_F_ONE_B: "1F1B",
    PipelineSchedule.INTERLEAVED: "Interleaved1F1B",
}


def _model(draft: Draft, model_ref: str | None) -> dict[str, Any]:
    plan = draft.plan
    entry = catalogue_entry(plan)
    known = MODELS.get(entry.id) if entry is not None else None
    table: dict[str, Any] = {}
    if known is None:
        draft.cannot("model", "torchtitan has no model definition for it (llama3, qwen3, deepseek_v3, llama4 only)")
    else:
        table.update(name=known[0], flavor=known[1])
    reference = model_reference(draft, model_ref)
    table["hf_assets_path"] = "./assets/hf/" + reference.rstrip("/").rsplit("/", 1)[-1]
    if plan.method is not Method.FULL:
        draft.cannot("method.kind", "torchtitan trains every weight (no adapters, no frozen layers)")
    if plan.float8 in FLOAT8_RECIPES:
        table["converters"] = [FLOAT8_CONVERTER]
    elif plan.float8 is Float8.MXFP8:
        table["converters"] = [MX_CONVERTER]
    elif plan.float8 is not Float8.NONE:
        draft.cannot(
            "method.float8",
            "torchtitan's float8 is torchao's (tensorwise, rowwise, rowwise_with_gw_hp or MX), not Transformer Engine",
        )
    return table


def _float8(draft: Draft) -> dict[str, Any] | None:
    """``[quantize.linear.float8]``: the recipe and FSDP2's float8 all-gather; or ``[quantize.linear.mx]``."""
    plan = draft.plan
    if plan.float8 is Float8.MXFP8:
        if plan.parallel.strategy is Strategy.FSDP and plan.parallel.fsdp_float8_all_gather:
            draft.outside(
                ["parallel.fsdp_float8_all_gather"],
                "torchtitan's MX converter has no float8 all-gather (238fa995 job_config.py, class MXLinear)",
            )
        return {"linear": {"mx": {"recipe_name": MX_DEFAULT_RECIPE}}}
    if plan.float8 not in FLOAT8_RECIPES:
        return None
    # torchtitan 0.2.2 components/quantization/float8.py:65-69 asserts enable_fsdp_float8_all_gather off whenever
    # recipe_name is set; its tensorwise run with FSDP2's float8 all-gather is recipe_name unset (:79-95, what the
    # importer reads as tensorwise), so tensorwise is written without the name.
    table: dict[str, Any] = {}
    if plan.float8 is not Float8.TENSORWISE:
        table["recipe_name"] = FLOAT8_RECIPES[plan.float8]
    elif plan.parallel.strategy is Strategy.FSDP:
        table["enable_fsdp_float8_all_gather"] = plan.parallel.fsdp_float8_all_gather
    return {"linear": {"float8": table}} if table else None


def _compile(draft: Draft) -> dict[str, Any]:
    plan = draft.plan
    if plan.stack is Stack.MEGATRON:
        draft.cannot("method.stack", "torchtitan runs PyTorch kernels, eager or compiled (eager is written)")
    if plan.stack is not Stack.COMPILE:
        draft.outside(["method.compiled_loss"], "torchtitan compiles the loss only with the model (compile.enable)")
        return {"enable": False}
    if plan.float8 is Float8.MXFP8 and plan.parallel.tensor_parallel > 1:
        # torchtitan 0.2.2 components/quantization/mx.py:50-52: "TP not yet supported with torch.compile for mxfp8".
        draft.cannot("method.stack", "torchtitan's MX linears with tensor parallel run the model eager (not compiled)")
        return {"enable": plan.compiled_loss, "components": ["loss"]}
    return {"enable": True, "components": ["model", "loss"] if plan.compiled_loss else ["model"]}


def _precision(draft: Draft) -> dict[str, Any]:
    """``dtype`` is the stored weights'; ``mixed_precision_param`` is FSDP2's parameter dtype, or the
    autocast dtype without FSDP."""
    plan, par = draft.plan, draft.plan.parallel
    keys: dict[str, Any] = {"dtype": TORCH_DTYPES.get(plan.weight_dtype, "bfloat16")}
    if plan.weight_dtype not in TORCH_DTYPES:
        draft.cannot("method.weight_dtype", "torchtitan stores weights in bfloat16 or float32 (bfloat16 is written)")
    if FIELDS_BY_NAME["method.base_dtype"].relevant(plan) and plan.base_dtype is not plan.weight_dtype:
        # A full plan's frozen vision tower (core.training.storage.vision_weight_term): one dtype for every weight.
        draft.cannot("method.base_dtype", "torchtitan holds every weight in the one dtype written")
    if par.strategy is Strategy.FSDP:
        param = par.fsdp_param_dtype
        keys["mixed_precision_param"] = keys["dtype"] if param is MpDtype.STORED else MP_DTYPES.get(param, "bfloat16")
        if param is MpDtype.FP16:
            draft.cannot("parallel.fsdp_param_dtype", "torchtitan's mixed_precision_param is bfloat16 or float32")
        if par.fsdp_reduce_dtype not in (MpDtype.FP32, MpDtype.STORED) or (
            par.fsdp_reduce_dtype is MpDtype.STORED and plan.weight_dtype is not Dtype.FP32
        ):
            draft.cannot("parallel.fsdp_reduce_dtype", "torchtitan reduces gradients in float32")
        if plan.autocast is not Autocast.NONE:
            draft.cannot("method.autocast", "under FSDP torchtitan casts with fully_shard's policy, not autocast")
    else:
        casts = {Autocast.NONE: keys["dtype"], Autocast.BF16: "bfloat16"}
        keys["mixed_precision_param"] = casts.get(plan.autocast, "bfloat16")
        if plan.autocast is Autocast.FP16:
            draft.cannot("method.autocast", "torchtitan autocasts to bfloat16 or float32, not fp16")
    keys["mixed_precision_reduce"] = "float32"
    return keys


def _seq_len(draft: Draft) -> int:
    """The plan's sequence length, or the nearest torchtitan runs: its llama3 and qwen3 models need a multiple of
    TP × 2·CP, 2 without either (torchtitan 0.2.2 models/llama3/infra/parallelize.py:69 and qwen3 :62 assert
    ``seq_len % parallel_dims.seq_len_divisor == 0``; distributed/parallel_dims.py:372 ``tp * (cp * 2)``). The
    multiple below is written, so the run holds no more than the plan."""
    par, seq = draft.plan.parallel, draft.plan.workload.seq_len
    step = par.tensor_parallel * 2 * par.context_parallel
    if seq % step == 0:
        return seq
    written = max(step, seq - seq % step)
    draft.cannot(
        "workload.seq_len",
        f"torchtitan's sequence length is a multiple of tensor parallel x 2 x context parallel ({step}): "
        f"{written} is written",
    )
    return written


def _training(draft: Draft) -> dict[str, Any]:
    plan, work = draft.plan, draft.plan.workload
    table: dict[str, Any] = {
        "local_batch_size": work.micro_batch,
        "global_batch_size": work.micro_batch * plan.parallel.data_parallel * work.grad_accum,
        "seq_len": _seq_len(draft),
    }
    steps = optimizer_steps(plan)
    if steps is not None:
        table["steps"] = steps
    table.update(_precision(draft))
    offload = plan.parallel.offload
    table["enable_cpu_offload"] = offload is Offload.PARAMS
    table["max_norm"] = 1.0
    if not plan.grad_clip:
        draft.cannot("method.grad_clip", "torchtitan clips the gradients every step (training.max_norm)")
    if offload is Offload.OPTIMIZER:
        draft.cannot("parallel.offload", "torchtitan offloads parameters, gradients and optimizer state together")
    if plan.workload.eval_batch not in (0, work.micro_batch):
        draft.cannot("workload.eval_batch", "torchtitan validates with the training batch")
    for name, why in (
        ("method.attention", "torchtitan picks its attention from the model flavour (sdpa, flex, varlen)"),
        ("method.chunked_loss", "torchtitan's loss is a plain cross-entropy"),
    ):
        draft.outside([name], why)
    return table


def _optimizer(draft: Draft) -> dict[str, Any]:
    plan = draft.plan
    name = OPTIMIZERS.get(plan.optimizer)
    if name is None:
        draft.cannot("method.optimizer", f"{TORCHTITAN_RULE} (AdamW is written)")
    return {
        "name": name or "AdamW",
        "implementation": IMPLEMENTATIONS[plan.optimizer_impl],
        "weight_decay": plan.weight_decay,
        "early_step_in_backward": plan.optimizer_in_backward,
    }


def _checkpoint(draft: Draft) -> dict[str, Any]:
    plan = draft.plan
    if plan.checkpointing and plan.checkpoint_policy is CheckpointPolicy.ATTENTION:
        # torchtitan has no attention-only recompute: full checkpointing recomputes more and
        # keeps less, so the config fits wherever the plan does.
        draft.cannot("method.checkpoint_policy", "torchtitan has no attention-only recompute (Megatron's selective)")
        return {"mode": "full"}
    if not plan.checkpointing:
        return {"mode": "none"}
    if plan.checkpoint_policy is CheckpointPolicy.UNSLOTH:
        draft.cannot("method.checkpoint_policy", "torchtitan has no offloaded checkpointing (Unsloth's)")
        return {"mode": "full"}
    if plan.checkpoint_policy is CheckpointPolicy.FULL:
        return {"mode": "full"}
    option = "op" if plan.checkpoint_policy is CheckpointPolicy.OP else str(plan.checkpoint_every)
    return {"mode": "selective", "selective_ac_option": option}


def _reshard_word(par: Parallelism) -> str:
    """torchtitan's ``fsdp_reshard_after_forward`` for the plan: "default" where the plan carves the ends
    (``get_fsdp_reshard_after_forward_policy``: blocks and the embedding resharded without a pipeline,
    [norm, head] kept, as core.parallel.layout.carved_ends plans), else "always" or "never" ("always"
    reshards [norm, head] too: torchtitan b5bcd76c ``reshard_after_forward_policy == "always"``)."""
    if par.fsdp_units is FsdpUnits.CARVED and par.reshard_after_forward and par.pipeline_parallel == 1:
        return "default"
    return "always" if par.reshard_after_forward else "never"


def _ddp_alone(par: Parallelism) -> bool:
    """Whether torchtitan can run the plan's DDP: only as the one parallelism (torchtitan 0.2.2
    models/llama3/infra/parallelize.py:149-151 and qwen3 :178-180, "DDP has not supported > 1D parallelism")."""
    return par.strategy is Strategy.DDP and par.tensor_parallel * par.pipeline_parallel * par.context_parallel == 1


def _parallelism(draft: Draft) -> dict[str, Any]:
    plan, par = draft.plan, draft.plan.parallel
    ddp = _ddp_alone(par)
    if par.strategy is Strategy.DDP and not ddp:
        draft.cannot(
            "parallel.strategy",
            "torchtitan runs DDP only alone, not beside tensor, pipeline or context parallel: FSDP2 is written",
        )
    # torchtitan 0.2.2 distributed/tensor_parallel.py:20-23: async TP "requires 'model' in --compile.components and
    # --compile.enable" (what _compile writes).
    async_tp = par.tensor_parallel > 1 and par.tp_overlap
    if async_tp and (plan.stack is not Stack.COMPILE or plan.float8 is Float8.MXFP8):
        draft.cannot("parallel.tp_overlap", "torchtitan's async tensor parallel runs only on the compiled model")
        async_tp = False
    table: dict[str, Any] = {
        # HSDP: R replicas of FSDP2's shards, the shard degree derived (-1) as world ÷ (R·cp·tp·pp).
        "data_parallel_replicate_degree": par.data_parallel if ddp else par.dp_replicate,
        "data_parallel_shard_degree": 1 if ddp else -1,  # ZeRO: FSDP2, the nearest
        "fsdp_reshard_after_forward": _reshard_word(par),
        "tensor_parallel_degree": par.tensor_parallel,
        "pipeline_parallel_degree": par.pipeline_parallel,
        "pipeline_parallel_schedule": SCHEDULES[par.schedule],
        "context_parallel_degree": par.context_parallel,
        "context_parallel_rotate_method": par.cp_rotate_method.value,
        "enable_async_tensor_parallel": async_tp,
        "expert_parallel_degree": par.expert_parallel,
    }
    if par.expert_parallel > 1 and par.tensor_parallel > 1:
        draft.cannot(
            "parallel.expert_parallel",
            "torchtitan's EP borrows the TP ranks too (pytorch/torchtitan b5bcd76 parallel_dims.py: "
            "efsdp = dp_shard·cp·tp ÷ ep, experts not split by TP); the plan splits experts by TP × EP "
            "as Megatron does",
        )
    if par.strategy not in (Strategy.DDP, Strategy.FSDP):  # DDP beside other splits: listed above
        draft.cannot(
            "parallel.strategy", "torchtitan shards with FSDP2 (ZeRO is DeepSpeed's): data_parallel_shard_degree"
        )
    if par.pipeline_parallel > 1 and par.virtual_stages > 1:
        draft.cannot("parallel.virtual_stages", "torchtitan derives the stages per rank from the layers per stage")
    if par.strategy is Strategy.FSDP and not par.fsdp1_wrap and par.fsdp_units is not FsdpUnits.CARVED:
        draft.cannot("parallel.fsdp_units", TORCHTITAN_CARVES)
    if par.tensor_parallel > 1 and not par.sequence_parallel:
        draft.cannot("parallel.sequence_parallel", "torchtitan's tensor parallel always splits the sequence too")
    draft.outside(
        ["parallel.ddp_bucket_mb", "parallel.ddp_bucket_view", "parallel.zero_bucket_elements"],
        "torchtitan sets no bucket sizes",
    )
    draft.outside(
        ["parallel.zero3_prefetch_elements", "parallel.zero3_max_live_elements", "parallel.zero3_max_reuse_elements"],
        "DeepSpeed's, not torchtitan's",
    )
    return table


def export_torchtitan(plan: Plan, model_ref: str | None = None) -> Export:
    draft = Draft(plan)
    document = {
        "job": {"description": f"VRAM Planner plan for {plan.model.name}"[:200]},
        "model": _model(draft, model_ref),
        "optimizer": _optimizer(draft),
        "training": _training(draft),
        "activation_checkpoint": _checkpoint(draft),
        "parallelism": _parallelism(draft),
        "compile": _compile(draft),
    }
    quantize = _float8(draft)
    if quantize is not None:
        document["quantize"] = quantize
    recipes_outside(
        draft,
        (
            "method.stack",
            "method.compiled_loss",
            "method.float8",
            "method.grad_clip",
            "method.weight_decay",
            "method.optimizer_in_backward",
            "parallel.tp_overlap",
            "parallel.expert_parallel",
            "parallel.dp_replicate",
            "parallel.fsdp_float8_all_gather",
            "parallel.cp_rotate_method",
            "parallel.fsdp_units",
        ),
    )
    nodes, gpus = plan.parallel.nodes, plan.parallel.gpus_per_node
    launch = f"torchrun --nnodes={nodes} --nproc_per_node={gpus} -m torchtitan.train --job.config_file <this file>"
    lines = [f"torchtitan job config written by VRAM Planner for {nodes} node(s) x {gpus} GPU(s):", launch]
    return draft.finish(Target.TORCHTITAN, header(lines) + dumps_toml(document))

"""The plan fields a launch config can carry, each with what it means and when it matters.

One table for the exporters (which name the fields they cannot express) and for the round
trip (plan → export → import → plan compares exactly these). A field's *effective* value is
its value where it matters and None where it does not: the LoRA rank of a full fine-tune,
the checkpointing policy with checkpointing off, the evaluation batch 0 that means "the
training micro-batch". Names are the dotted paths the plan file and :class:`~core.errors.PlanError`
use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from core.inputs import LOSS_CODE, input_at
from core.parallel.layout import fsdp_no_sync
from core.plan import CheckpointPolicy, Engine, Method, Optimizer, Plan, Strategy, default_plan_on

ADAM_FAMILY: Final = (Optimizer.ADAMW, Optimizer.ADAM)  # the optimizers whose code path (impl) matters


def _always(plan: Plan) -> bool:
    return True


def _galore(plan: Plan) -> bool:
    return plan.optimizer is Optimizer.GALORE_ADAMW


@dataclass(frozen=True)
class PlanField:
    name: str
    value: Callable[[Plan], object]
    relevant: Callable[[Plan], bool] = _always
    depends_on: tuple[str, ...] = ()  # the fields that decide whether this one matters

    def effective(self, plan: Plan) -> object:
        return self.value(plan) if self.relevant(plan) else None


def _f(name: str, value: Callable[[Plan], object], relevant: Callable[[Plan], bool] = _always, *on: str) -> PlanField:
    return PlanField(name, value, relevant, on)


_ADAPTER = "method.kind"
# The loss settings with code of their own (core.inputs.LOSS_CODE): what a setting of the eager loss
# depends on.
_LOSS_CODE = tuple(f"method.{name}" for name in LOSS_CODE)


def _compile_cache_written(plan: Plan) -> bool:
    return plan.inference.engine is Engine.VLLM and plan.inference.cuda_graphs


def _matters(path: str) -> Callable[[Plan], bool]:
    """When a setting matters, as the window and the CLI decide it (core.inputs): one answer."""
    return input_at(path).matters


TRAINING_FIELDS: Final = (
    _f("model", lambda p: p.model),
    _f("method.kind", lambda p: p.method),
    _f("method.frozen_layers", lambda p: p.frozen_layers, lambda p: p.method is Method.FROZEN, _ADAPTER),
    _f("method.lora.rank", lambda p: p.lora.rank, _matters("lora.rank"), _ADAPTER),
    _f("method.lora.alpha", lambda p: p.lora.alpha, _matters("lora.alpha"), _ADAPTER),
    _f(
        "method.lora.targets",
        lambda p: p.trained_targets,
        lambda p: p.adapter_based and not (p.litgpt_adapter or p.peft_flat_trained),
        _ADAPTER,
    ),
    _f("method.lora.dropout", lambda p: p.lora.dropout, lambda p: p.lora_adapters, _ADAPTER),
    _f("method.lora.ia3_feedforward", lambda p: p.lora.ia3_feedforward, lambda p: p.method is Method.IA3, _ADAPTER),
    # LitGPT's adapters (branch h41adapt): their prompt, start layer and quantised base.
    _f(
        "method.lora.adapter_prompt_length",
        lambda p: p.lora.adapter_prompt_length,
        _matters("lora.adapter_prompt_length"),
        _ADAPTER,
    ),
    _f(
        "method.lora.adapter_start_layer",
        lambda p: p.lora.adapter_start_layer,
        _matters("lora.adapter_start_layer"),
        _ADAPTER,
    ),
    _f(
        "method.lora.adapter_quantised",
        lambda p: p.lora.adapter_quantised,
        _matters("lora.adapter_quantised"),
        _ADAPTER,
    ),
    _f("method.quant", lambda p: p.quant, lambda p: p.quantised_base, _ADAPTER, "method.lora.adapter_quantised"),
    _f("method.lora.virtual_tokens", lambda p: p.lora.virtual_tokens, lambda p: p.prompt_learning, _ADAPTER),
    _f("method.lora.lokr_factor", lambda p: p.lora.lokr_factor, _matters("lora.lokr_factor"), _ADAPTER),
    _f("method.lora.oft_block_size", lambda p: p.lora.oft_block_size, _matters("lora.oft_block_size"), _ADAPTER),
    _f("method.lora.road_variant", lambda p: p.lora.road_variant, _matters("lora.road_variant"), _ADAPTER),
    # PEFT's modules_to_save / trainable tokens (branch h60mts): a field only when set (the default, none, is what
    # a plan on any other stack or method has, and what every target writes by leaving the key out).
    _f(
        "method.lora.modules_to_save",
        lambda p: p.lora.modules_to_save,
        lambda p: bool(p.lora.modules_to_save != "none"),
    ),
    _f("method.lora.trainable_tokens", lambda p: p.lora.trainable_tokens, lambda p: p.lora.trainable_tokens > 0),
    _f(
        "method.double_quant",
        lambda p: p.double_quant,
        lambda p: p.four_bit_base,
        _ADAPTER,
        "method.quant",
    ),
    _f("method.weight_dtype", lambda p: p.weight_dtype, lambda p: p.method in (Method.FULL, Method.FROZEN), _ADAPTER),
    # Full fine-tuning's only frozen weights: an image-text model's vision tower (core.training.storage).
    _f("method.base_dtype", lambda p: p.base_dtype, lambda p: p.method is not Method.FULL or p.model.vision_params > 0,
       _ADAPTER),
    _f("method.adapter_dtype", lambda p: p.adapter_dtype, lambda p: p.adapter_based, _ADAPTER),
    _f("method.autocast", lambda p: p.autocast),
    _f("method.optimizer", lambda p: p.optimizer),
    _f("method.optimizer_impl", lambda p: p.optimizer_impl, lambda p: p.optimizer in ADAM_FAMILY, "method.optimizer"),
    _f("method.weight_decay", lambda p: p.weight_decay),
    _f("method.galore_rank", lambda p: p.galore_rank, _galore, "method.optimizer"),
    _f("method.galore_update_proj_gap", lambda p: p.galore_update_proj_gap, _galore, "method.optimizer"),
    _f("method.checkpointing", lambda p: p.checkpointing),
    _f("method.checkpoint_policy", lambda p: p.checkpoint_policy, lambda p: p.checkpointing, "method.checkpointing"),
    _f(
        "method.checkpoint_every",
        lambda p: p.checkpoint_every,
        lambda p: p.checkpointing and p.checkpoint_policy is CheckpointPolicy.LAYER,
        "method.checkpointing",
        "method.checkpoint_policy",
    ),
    _f("method.attention", lambda p: p.attention),
    _f(
        "method.chunked_loss",
        lambda p: p.chunked_loss,
        _matters("chunked_loss"),
        "method.unsloth",
        "method.fused_loss",
        "method.litgpt",
    ),
    # The recipes a framework turns on by a key of its config (or cannot): each exporter writes
    # them or lists them, so a plan with torch.compile or float8 never leaves without saying so.
    _f("method.stack", lambda p: p.stack),
    _f("method.float8", lambda p: p.float8),
    _f("method.unsloth", lambda p: p.unsloth),
    _f("method.fused_loss", lambda p: p.fused_loss),
    _f(
        "method.compiled_loss",
        lambda p: p.compiled_loss,
        _matters("compiled_loss"),
        "method.unsloth",
        "method.fused_loss",
        "method.litgpt",
        "method.chunked_loss",
        "method.flash_loss",
    ),
    _f(
        "method.flash_loss",
        lambda p: p.flash_loss,
        _matters("flash_loss"),
        "method.unsloth",
        "method.fused_loss",
        "method.litgpt",
        "method.chunked_loss",
    ),
    _f(
        "method.logprob_head",
        lambda p: p.logprob_head,
        _matters("logprob_head"),
        "method.unsloth",
        "method.fused_loss",
        "method.litgpt",
        "method.chunked_loss",
        "method.flash_loss",
        "method.compiled_loss",
    ),
    _f(
        "method.megatron_ce_fusion",
        lambda p: p.megatron_ce_fusion,
        _matters("megatron_ce_fusion"),
        "method.stack",
        *_LOSS_CODE,
    ),
    _f("method.grad_clip", lambda p: p.grad_clip),
    _f("method.optimizer_in_backward", lambda p: p.optimizer_in_backward),
    _f("method.activation_offload", lambda p: p.activation_offload),
    _f("method.bnb_legacy", lambda p: p.bnb_legacy, _matters("bnb_legacy"), _ADAPTER, "method.quant"),
    _f("method.bnb_skip_modules", lambda p: p.bnb_skip_modules, _matters("bnb_skip_modules"), _ADAPTER),
    _f("method.kbit_upcast", lambda p: p.kbit_upcast, _matters("kbit_upcast"), _ADAPTER),
    _f("method.litgpt", lambda p: p.litgpt, _matters("litgpt"), "method.unsloth", "method.fused_loss"),
    _f(
        "method.loop_keeps_output",
        lambda p: p.loop_keeps_output,
        _matters("loop_keeps_output"),
        *_LOSS_CODE,
    ),
    _f("method.training_kv_cache", lambda p: p.training_kv_cache, _matters("training_kv_cache"), "method.stack"),
    _f(
        "method.training_transformers",
        lambda p: p.training_transformers,
        _matters("training_transformers"),
        "method.stack",
        "method.loss_16bit",
        _ADAPTER,
        "method.kbit_upcast",
        "method.autocast",
        "method.weight_dtype",
        "method.base_dtype",
        *_LOSS_CODE,
    ),
    _f(
        "method.loss_16bit",
        lambda p: p.loss_16bit,
        _matters("loss_16bit"),
        _ADAPTER,
        "method.kbit_upcast",
        "method.autocast",
        "method.weight_dtype",
        "method.base_dtype",
        "method.stack",
        *_LOSS_CODE,
    ),
    _f("method.moe_grouped_gemm", lambda p: p.moe_grouped_gemm, _matters("moe_grouped_gemm"), "model", "method.stack"),
    _f("method.experts_loop", lambda p: p.experts_loop, _matters("experts_loop"), "model", "method.stack"),
    _f("method.moe_layer", lambda p: p.moe_layer, _matters("moe_layer"), "model", "method.kind", "method.stack",
       "method.experts_loop"),
    _f("workload.micro_batch", lambda p: p.workload.micro_batch),
    _f("workload.seq_len", lambda p: p.workload.seq_len),
    _f("workload.grad_accum", lambda p: p.workload.grad_accum),
    _f(
        "workload.eval_batch",
        lambda p: p.workload.eval_batch or p.workload.micro_batch,  # 0: the training micro-batch
        _always,
        "workload.micro_batch",
    ),
    _f("workload.tokens", lambda p: p.workload.tokens),
    _f("hardware.alloc_conf", lambda p: p.hardware.alloc_conf),
    _f(
        "hardware.torch_version",
        lambda p: p.hardware.torch_version,
        # Where it sets the collectives' buffers (FSDP2). It also matters on an Apple GPU (core.inputs), but
        # no launch config names the card, so a file read back could not say it: not compared there.
        lambda p: p.parallel.strategy is Strategy.FSDP and not p.parallel.fsdp1_wrap,
        "parallel.strategy",
        "parallel.fsdp1_wrap",
    ),
    _f(
        "hardware.nccl_avoid_record_streams",
        lambda p: p.hardware.nccl_avoid_record_streams,
        _matters("hardware.nccl_avoid_record_streams"),
        "parallel.strategy",
        "parallel.fsdp1_wrap",
        "hardware.torch_version",
    ),
    _f("parallel.nodes", lambda p: p.parallel.nodes),
    _f("parallel.gpus_per_node", lambda p: p.parallel.gpus_per_node),
    _f("parallel.strategy", lambda p: p.parallel.strategy),
    _f("parallel.tensor_parallel", lambda p: p.parallel.tensor_parallel),
    _f("parallel.pipeline_parallel", lambda p: p.parallel.pipeline_parallel),
    _f("parallel.context_parallel", lambda p: p.parallel.context_parallel),
    _f(
        "parallel.expert_parallel",
        lambda p: p.parallel.expert_parallel,
        _matters("parallel.expert_parallel"),
        "parallel.nodes",
        "parallel.gpus_per_node",
    ),
    _f(
        "parallel.expert_imbalance",
        lambda p: p.parallel.expert_imbalance,
        _matters("parallel.expert_imbalance"),
        "parallel.expert_parallel",
    ),
    _f(
        "parallel.capacity_factor",
        lambda p: p.parallel.capacity_factor,
        _matters("parallel.capacity_factor"),
        "method.stack",
    ),
    _f(
        "parallel.pad_to_capacity",
        lambda p: p.parallel.pad_to_capacity,
        _matters("parallel.pad_to_capacity"),
        "method.stack",
        "parallel.capacity_factor",
    ),
    _f(
        "parallel.moe_dispatcher",
        lambda p: p.parallel.moe_dispatcher,
        _matters("parallel.moe_dispatcher"),
        "method.stack",
        "parallel.expert_parallel",
    ),
    _f(
        "parallel.cp_rotate_method",
        lambda p: p.parallel.cp_rotate_method,
        _matters("parallel.cp_rotate_method"),
        "method.stack",
        "parallel.context_parallel",
    ),
    _f(
        "parallel.dp_replicate",
        lambda p: p.parallel.dp_replicate,
        _matters("parallel.dp_replicate"),
        "parallel.strategy",
        "parallel.nodes",
        "parallel.gpus_per_node",
    ),
    _f(
        "parallel.sequence_parallel",
        lambda p: p.parallel.sequence_parallel,
        lambda p: p.parallel.tensor_parallel > 1,
        "parallel.tensor_parallel",
    ),
    _f(
        "parallel.schedule",
        lambda p: p.parallel.schedule,
        lambda p: p.parallel.pipeline_parallel > 1,
        "parallel.pipeline_parallel",
    ),
    _f(
        "parallel.stage_split",
        lambda p: p.parallel.stage_split,
        lambda p: p.parallel.pipeline_parallel > 1,
        "parallel.pipeline_parallel",
    ),
    _f(
        "parallel.virtual_stages",
        lambda p: p.parallel.virtual_stages,
        lambda p: p.parallel.pipeline_parallel > 1,
        "parallel.pipeline_parallel",
    ),
    _f(
        "parallel.tp_overlap",
        lambda p: p.parallel.tp_overlap,
        _matters("parallel.tp_overlap"),
        "parallel.tensor_parallel",
    ),
    _f("parallel.offload", lambda p: p.parallel.offload),
    _f(
        "parallel.host_threads_per_rank",
        lambda p: p.parallel.host_threads_per_rank,
        _matters("parallel.host_threads_per_rank"),
        "parallel.offload",
    ),
    _f(
        "parallel.reshard_after_forward",
        lambda p: p.parallel.reshard_after_forward,
        lambda p: p.parallel.strategy is Strategy.FSDP,
        "parallel.strategy",
    ),
    _f(
        "parallel.fsdp_param_dtype",
        lambda p: p.parallel.fsdp_param_dtype,
        lambda p: p.parallel.strategy is Strategy.FSDP,
        "parallel.strategy",
    ),
    _f(
        "parallel.fsdp_reduce_dtype",
        lambda p: p.parallel.fsdp_reduce_dtype,
        lambda p: p.parallel.strategy is Strategy.FSDP,
        "parallel.strategy",
    ),
    _f(
        "parallel.fsdp_float8_all_gather",
        lambda p: p.parallel.fsdp_float8_all_gather,
        _matters("parallel.fsdp_float8_all_gather"),
        "parallel.strategy",
        "method.float8",
    ),
    _f(
        "parallel.grad_reduce_in_fp32",
        lambda p: p.parallel.grad_reduce_in_fp32,
        _matters("parallel.grad_reduce_in_fp32"),
        "method.stack",
        "parallel.strategy",
    ),
    _f(
        "parallel.grad_accum_fusion",
        lambda p: p.parallel.grad_accum_fusion,
        _matters("parallel.grad_accum_fusion"),
        "method.stack",
        "parallel.strategy",
        "workload.grad_accum",
    ),
    _f(
        "parallel.fsdp1_wrap",
        lambda p: p.parallel.fsdp1_wrap,
        _matters("parallel.fsdp1_wrap"),
        "parallel.strategy",
    ),
    _f(
        "parallel.fsdp_units",
        lambda p: p.parallel.fsdp_units,
        lambda p: p.parallel.strategy is Strategy.FSDP and not p.parallel.fsdp1_wrap,  # the GPU count: the launcher's
        "parallel.strategy",
        "parallel.fsdp1_wrap",
    ),
    # What the loop does, not the word chosen: "auto" on FSDP1 and "no_sync" hold the same gradients.
    _f(
        "parallel.grad_sync",
        lambda p: fsdp_no_sync(p.parallel, p.workload.grad_accum),
        _matters("parallel.grad_sync"),
        "parallel.strategy",
        "parallel.fsdp1_wrap",
        "parallel.pipeline_parallel",
        "workload.grad_accum",
    ),
    _f(
        "parallel.ddp_bucket_mb",
        lambda p: p.parallel.ddp_bucket_mb,
        lambda p: p.parallel.strategy is Strategy.DDP and p.world_size > 1,
        "parallel.strategy",
        "parallel.nodes",
        "parallel.gpus_per_node",
    ),
    _f(
        "parallel.ddp_bucket_view",
        lambda p: p.parallel.ddp_bucket_view,
        lambda p: p.parallel.strategy is Strategy.DDP and p.world_size > 1,
        "parallel.strategy",
        "parallel.nodes",
        "parallel.gpus_per_node",
    ),
    _f(
        "parallel.zero_bucket_elements",
        lambda p: p.parallel.zero_bucket_elements,
        lambda p: p.parallel.strategy.deepspeed,
        "parallel.strategy",
    ),
    _f(
        "parallel.zero_overlap_comm",
        lambda p: p.parallel.zero_overlap_comm,
        _matters("parallel.zero_overlap_comm"),
        "parallel.strategy",
        "method.stack",
    ),
    _f(
        "parallel.bf16_master_weights",
        lambda p: p.parallel.bf16_master_weights,
        _matters("parallel.bf16_master_weights"),
        "parallel.strategy",
        "method.stack",
        "method.autocast",
    ),
    _f(
        "parallel.bf16_optimizer_states",
        lambda p: p.parallel.bf16_optimizer_states,
        _matters("parallel.bf16_optimizer_states"),
        "parallel.strategy",
        "method.stack",
        "method.autocast",
    ),
    _f(
        "parallel.zero3_overlap_comm",
        lambda p: p.parallel.zero3_overlap_comm,
        _matters("parallel.zero3_overlap_comm"),
        "parallel.strategy",
    ),
    _f(
        "parallel.zero3_prefetch_elements",
        lambda p: p.parallel.zero3_prefetch_elements,
        lambda p: p.parallel.strategy is Strategy.ZERO3,
        "parallel.strategy",
    ),
    _f(
        "parallel.zero3_max_live_elements",
        lambda p: p.parallel.zero3_max_live_elements,
        lambda p: p.parallel.strategy is Strategy.ZERO3,
        "parallel.strategy",
    ),
    _f(
        "parallel.zero3_max_reuse_elements",
        lambda p: p.parallel.zero3_max_reuse_elements,
        lambda p: p.parallel.strategy is Strategy.ZERO3,
        "parallel.strategy",
    ),
)

_VLLM = "inference.engine"


def _llamacpp(plan: Plan) -> bool:
    return plan.inference.engine is Engine.LLAMACPP


def _not_llamacpp(plan: Plan) -> bool:
    return plan.inference.engine is not Engine.LLAMACPP


def _image_text_served(plan: Plan) -> bool:
    return plan.model.vision_params > 0 and _not_llamacpp(plan)


SERVING_FIELDS: Final = (
    _f("model", lambda p: p.model),
    _f("inference.engine", lambda p: p.inference.engine),
    _f("inference.weight_dtype", lambda p: p.inference.weight_dtype, _not_llamacpp, _VLLM),
    _f("inference.kv_dtype", lambda p: p.inference.kv_dtype, _not_llamacpp, _VLLM),
    _f("inference.gguf_quant", lambda p: p.inference.gguf_quant, _llamacpp, _VLLM),
    _f("inference.gpu_layers", lambda p: p.inference.gpu_layers, _llamacpp, _VLLM),
    # --n-cpu-moe N, or --cpu-moe at the layer count and above (read back as 999): compared as the layers it covers
    _f(
        "inference.cpu_moe_layers",
        lambda p: min(p.inference.cpu_moe_layers, p.model.num_layers),
        _matters("inference.cpu_moe_layers"),
        _VLLM,
        "inference.ollama_version",
    ),
    _f("inference.cache_type", lambda p: p.inference.cache_type, _llamacpp, _VLLM),
    _f("inference.flash_attention", lambda p: p.inference.flash_attention, _llamacpp, _VLLM),
    _f("inference.ubatch", lambda p: p.inference.ubatch, _llamacpp, _VLLM),
    # The release lines whose rules the estimate followed (SGLang's default fraction; Ollama's own
    # choice of GPU layers and its defaults in front of llama.cpp).
    _f(
        "inference.sglang_version",
        lambda p: p.inference.sglang_version,
        lambda p: p.inference.engine is Engine.SGLANG,
        _VLLM,
    ),
    _f("inference.ollama_version", lambda p: p.inference.ollama_version, _llamacpp, _VLLM),
    _f("inference.concurrent", lambda p: p.inference.concurrent),
    _f("inference.context", lambda p: p.inference.context),
    _f("inference.new_tokens", lambda p: p.inference.new_tokens),
    _f("inference.tensor_parallel", lambda p: p.inference.tensor_parallel),
    _f("inference.pipeline_parallel", lambda p: p.inference.pipeline_parallel),
    _f("inference.replicas", lambda p: p.inference.replicas),
    _f(
        "inference.gpu_memory_utilization",
        lambda p: p.inference.gpu_memory_utilization,
        lambda p: p.inference.engine is Engine.VLLM,
        _VLLM,
    ),
    _f(
        "inference.max_num_seqs", lambda p: p.inference.max_num_seqs, lambda p: p.inference.engine is Engine.VLLM, _VLLM
    ),
    _f(
        "inference.max_num_batched_tokens",
        lambda p: p.inference.max_num_batched_tokens,
        lambda p: p.inference.engine is Engine.VLLM,
        _VLLM,
    ),
    # Compared wherever an image-text checkpoint is served off llama.cpp, not where the form offers the box
    # (core.inputs.text_only_offered, by vLLM release): the vLLM command carries no release to read back, and a tick
    # is refused wherever the box is not offered, so the value is False on both sides there.
    _f("inference.text_only", lambda p: p.inference.text_only, _image_text_served, _VLLM, "model"),
    _f("inference.cuda_graphs", lambda p: p.inference.cuda_graphs, _matters("inference.cuda_graphs"), _VLLM),
    # Compared on every vLLM plan with CUDA graphs on, not where the form offers it (V1 lines): the command carries no
    # release to read back, and VLLM_DISABLE_COMPILE_CACHE=1 is written for a cold plan of any line (vllm.py).
    _f("inference.compile_cache", lambda p: p.inference.compile_cache, _compile_cache_written, _VLLM),
    _f(
        "inference.sglang_enable_multimodal",
        lambda p: p.inference.sglang_enable_multimodal,
        _matters("inference.sglang_enable_multimodal"),
        _VLLM,
        "inference.sglang_version",
        "model",
    ),
    _f(
        "inference.prefix_caching",
        lambda p: p.inference.prefix_caching,
        lambda p: p.inference.engine is Engine.VLLM,
        _VLLM,
    ),
    _f(
        "inference.mem_fraction_static",
        lambda p: p.inference.mem_fraction_static,
        lambda p: p.inference.engine is Engine.SGLANG,
        _VLLM,
    ),
)
FIELDS_BY_NAME: Final = {f.name: f for f in TRAINING_FIELDS + SERVING_FIELDS}


def default_plan(plan: Plan) -> Plan:
    """The plan every field is compared with: the planner's defaults on the same model."""
    return default_plan_on(plan.model)


def differs_from_default(plan: Plan, name: str) -> bool:
    """The field matters in ``plan`` and holds another value than the defaults give it."""
    if name == "workload.eval_batch":  # 0 (the default) and the micro-batch evaluate alike
        return plan.workload.eval_batch not in (0, plan.workload.micro_batch)
    field = FIELDS_BY_NAME[name]
    return field.relevant(plan) and field.value(plan) != field.value(default_plan(plan))

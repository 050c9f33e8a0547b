"""transformers ``TrainingArguments`` and TRL ``SFTConfig`` / ``ModelConfig`` files (JSON or YAML).

Keys follow transformers' training_args.py and TRL's sft_config.py / model_config.py
(TRL 0.19-0.24: ``max_seq_length`` was renamed ``max_length``; both are read). A file
saved with ``TrainingArguments.to_json_string()`` or passed to ``trl sft --config`` reads
the same way. Defaults that decide memory are taken from TrainingArguments and shown
as defaults.
"""

from __future__ import annotations

from typing import Any, Final

from core.files.runconfig.common import (
    OddValues,
    accelerate_grad_sync,
    dtype,
    finish,
    hf_galore,
    hf_optimizer,
    lora_targets,
    modules_to_save,
    recipe_numbers,
    sharding,
)
from core.files.runconfig.deepspeed_optimizer import replaced_trainer_optimizer
from core.files.runconfig.mapping import ATTENTION_KERNELS
from core.files.runconfig.reading import Taker
from core.files.runconfig.result import ConfigKind, RunConfig

# TrainingArguments defaults (transformers training_args.py).
DEFAULT_TRAIN_BATCH: Final = 8
DEFAULT_EVAL_BATCH: Final = 8
# transformers 5.25.0 integrations/deepspeed.py deepspeed_optim_sched raises on both.
ADAFACTOR_AND_SECTION: Final = 'transformers raises "--adafactor was passed, but also found `optimizer` configured"'

# Keys of TrainingArguments / TRL configs with no effect on memory or time per step.
IRRELEVANT: Final = (
    "output_dir", "overwrite_output_dir", "do_train", "do_eval", "do_predict", "eval_strategy",
    "evaluation_strategy", "prediction_loss_only", "eval_accumulation_steps", "eval_delay",
    "learning_rate", "adam_beta1", "adam_beta2", "adam_epsilon",
    "num_train_epochs", "max_steps", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_ratio",
    "warmup_steps", "log_level", "log_level_replica", "log_on_each_node", "logging_dir",
    "logging_strategy", "logging_first_step", "logging_steps", "logging_nan_inf_filter",
    "save_strategy", "save_steps", "save_total_limit", "save_safetensors", "save_on_each_node",
    "save_only_model", "restore_callback_states_from_checkpoint", "no_cuda", "use_cpu",
    "use_mps_device", "seed", "data_seed", "jit_mode_eval", "use_ipex", "fp16_opt_level",
    "half_precision_backend", "fp16_backend", "local_rank", "ddp_backend", "tpu_num_cores",
    "tpu_metrics_debug", "debug", "dataloader_drop_last", "eval_steps", "dataloader_num_workers",
    "dataloader_prefetch_factor", "past_index", "run_name", "disable_tqdm", "remove_unused_columns",
    "label_names", "load_best_model_at_end", "metric_for_best_model", "greater_is_better",
    "ignore_data_skip", "label_smoothing_factor", "optim_args",
    "group_by_length", "length_column_name", "report_to", "ddp_find_unused_parameters",
    "ddp_broadcast_buffers", "dataloader_pin_memory",
    "dataloader_persistent_workers", "skip_memory_metrics", "use_legacy_prediction_loop",
    "push_to_hub", "resume_from_checkpoint", "hub_model_id", "hub_strategy", "hub_token",
    "hub_private_repo", "hub_always_push", "hub_revision", "gradient_checkpointing_kwargs",
    "include_inputs_for_metrics", "include_for_metrics", "eval_do_concat_batches",
    "push_to_hub_model_id", "push_to_hub_organization", "push_to_hub_token", "mp_parameters",
    "full_determinism", "torchdynamo", "ray_scope", "ddp_timeout", "torch_compile_backend",
    "torch_compile_mode", "dispatch_batches", "split_batches", "include_tokens_per_second",
    "include_num_input_tokens_seen", "neftune_noise_alpha", "batch_eval_metrics", "eval_on_start",
    "eval_use_gather_object", "average_tokens_across_devices", "torch_empty_cache_steps",
    "per_gpu_train_batch_size", "per_gpu_eval_batch_size", "optim_target_modules", "tp_size",
    "fsdp_min_num_params", "fsdp_transformer_layer_cls_to_wrap", "liger_kernel_config",
    # TRL ModelConfig / ScriptArguments / SFTConfig
    "model_revision", "trust_remote_code", "dataset_name", "dataset_config", "dataset_train_split",
    "dataset_test_split", "dataset_text_field", "dataset_kwargs", "dataset_num_proc",
    "dataset_mixer", "dataset_splits", "preprocessing_num_workers", "chat_template",
    "lora_task_type", "use_rslora", "eos_token", "pad_token", "completion_only_loss",
    "assistant_only_loss", "model_init_kwargs", "env", "beta", "temperature", "reward_weights",
    "sync_ref_model", "ref_model_mixup_alpha", "ref_model_sync_steps", "log_completions",
    "ds3_gather_for_generation", "vllm_device", "vllm_gpu_memory_utilization", "vllm_dtype",
    "vllm_max_model_len", "vllm_sampling_params", "unsloth_num_chunks",
)  # fmt: skip


def take_trainer_args(taker: Taker, odd: OddValues, framework: str) -> dict[str, Any]:
    """The TrainingArguments keys every HF-based framework shares."""
    s: dict[str, Any] = {}
    batch = taker.integer("per_device_train_batch_size", "micro_batch")
    if batch is None:
        batch = DEFAULT_TRAIN_BATCH
        taker.record("micro_batch", batch, f"default: TrainingArguments.per_device_train_batch_size = {batch}")
    s["micro_batch"] = batch
    eval_batch = taker.integer("per_device_eval_batch_size", "eval_batch")
    s["eval_batch"] = eval_batch if eval_batch is not None else DEFAULT_EVAL_BATCH
    if eval_batch is None:
        taker.record("eval_batch", DEFAULT_EVAL_BATCH, "default: TrainingArguments.per_device_eval_batch_size = 8")
    s["grad_accum"] = taker.integer("gradient_accumulation_steps", "grad_accum") or 1
    bf16 = taker.flag("bf16")
    fp16 = taker.flag("fp16")
    if bf16 and fp16:
        raise taker.fail("bf16", True, "bf16 or fp16, not both (TrainingArguments refuses both)")
    s["autocast"] = "bf16" if bf16 else "fp16" if fp16 else "none"
    taker.record("autocast", s["autocast"], "bf16" if bf16 else "fp16" if fp16 else "bf16 / fp16 not set")
    if taker.flag("adafactor"):
        s["optimizer"], s["optimizer_impl"] = "adafactor", None
        taker.record("optimizer", "adafactor", "adafactor")
        taker.raw("optim")
    else:
        s["optimizer"], s["optimizer_impl"] = hf_optimizer(taker, "optim", odd, framework)
        s.update(hf_galore(taker, odd, "optim"))
    checkpointing = taker.flag("gradient_checkpointing", "checkpointing")
    if checkpointing is not None:
        s["checkpointing"] = checkpointing
    if taker.flag("use_liger_kernel"):
        # Liger's fused linear cross-entropy never materialises the full logits.
        s["fused_loss"] = True
        taker.record("fused_loss", True, "use_liger_kernel")
    s.update(recipe_numbers(taker, "max_grad_norm", "lora_dropout", "weight_decay"))
    taker.note("tf32", "TF32 matmuls change speed, not memory")
    if taker.flag("torch_compile"):  # torch.compile: the blocks save less (core.training.activations, COMPILE_NOTE)
        s["stack"] = "compile"
        taker.record("stack", "compile", "torch_compile")
    strategy = sharding(taker, odd)
    if "optimizer" in strategy and s["optimizer"] == "adafactor" and taker.flag("adafactor"):
        raise taker.fail("adafactor", True, f"false beside a DeepSpeed optimizer section ({ADAFACTOR_AND_SECTION})")
    replaced_trainer_optimizer(taker, odd, s, strategy, "optim")
    s.update(strategy)
    s.update(ddp_bucket(taker, "ddp_bucket_cap_mb"))
    s.update(_accelerator_config(taker, odd))
    s.update(accelerate_grad_sync(taker, s))
    taker.irrelevant("fsdp_config")
    taker.note("auto_find_batch_size", "the Trainer halves the batch after an OOM; the plan uses the given batch")
    taker.note("bf16_full_eval", "evaluation in pure bf16")
    taker.note("fp16_full_eval", "evaluation in pure fp16")
    taker.note("packing", "packing fills every sequence to the full length")
    taker.irrelevant(*IRRELEVANT)
    return s


def ddp_bucket(taker: Taker, key: str) -> dict[str, Any]:
    """``ddp_bucket_cap_mb`` (``parallel.ddp_bucket_mb``): the Trainer passes it unchanged as
    DistributedDataParallel's ``bucket_cap_mb`` (transformers 5.25.0 trainer.py lines 759-760,
    ``ddp_kwargs["bucket_cap_mb"] = self.args.ddp_bucket_cap_mb``, through accelerate's
    DistributedDataParallelKwargs), which torch reads in MiB, the plan's unit; absent, torch's 25."""
    size = taker.number(key, "ddp_bucket_mb", 0.0, 1e6)
    return {} if size is None else {"ddp_bucket_mb": size}


# TrainingArguments' AcceleratorConfig keys with no effect on memory or time per step (transformers
# trainer_pt_utils.py AcceleratorConfig); ``gradient_accumulation_kwargs`` is read, key by key.
ACCELERATOR_IRRELEVANT: Final = (
    "split_batches", "dispatch_batches", "even_batches", "use_seedable_sampler", "non_blocking",
    "use_configured_state", "gradient_accumulation_kwargs.num_steps",
    "gradient_accumulation_kwargs.adjust_scheduler", "gradient_accumulation_kwargs.sync_with_dataloader",
)  # fmt: skip


def _accelerator_config(taker: Taker, odd: OddValues) -> dict[str, Any]:
    """``accelerator_config.gradient_accumulation_kwargs.sync_each_batch`` (``parallel.grad_sync``):
    the Trainer hands it to accelerate's ``GradientAccumulationPlugin`` (transformers PR #29589,
    v4.39.0; accelerate v0.28.0 60bfdaa9). True reduces every micro-batch; false, accelerate's
    default, enters ``no_sync`` for all but the last (core.parallel.layout.fsdp_no_sync). A
    config written on the command line as a JSON string is listed, not read."""
    config = taker.document.get("accelerator_config")  # a table: its keys are taken one by one
    if isinstance(config, str) and config.strip():
        odd.add("accelerator_config", taker.raw("accelerator_config"), "a JSON string: write it as a table")
        return {}
    taker.irrelevant(*(f"accelerator_config.{key}" for key in ACCELERATOR_IRRELEVANT))
    key = "accelerator_config.gradient_accumulation_kwargs.sync_each_batch"
    each = taker.flag(key)
    if each is None:
        return {}
    value = "each" if each else "no_sync"
    taker.record("grad_sync", value, key)
    return {"grad_sync": value}


def _sequence(taker: Taker, s: dict[str, Any]) -> None:
    for key in ("max_length", "max_seq_length", "model_max_length"):
        value = taker.integer(key, "seq_len", 1, 100_000_000)
        if value is not None:
            s["seq_len"] = value
            return
    prompt = taker.integer("max_prompt_length", None)
    completion = taker.integer("max_completion_length", None)
    if prompt and completion:  # GRPO / online methods: one sequence is prompt + completion
        s["seq_len"] = prompt + completion
        taker.record("seq_len", prompt + completion, "max_prompt_length + max_completion_length")
        taker.note("num_generations", "generations per prompt: sampling memory is not modelled")
        taker.note("use_vllm", "generation in vLLM is not modelled")
    else:
        taker.missing("seq_len", "no max_length in the file: the plan's sequence length is kept")


def read_hf(document: dict[str, Any], where: str) -> RunConfig:
    taker = Taker(document, where)
    odd = OddValues()
    s = take_trainer_args(taker, odd, "the file")
    _sequence(taker, s)
    model_ref = taker.text("model_name_or_path")
    if model_ref:
        taker.record("model", model_ref, "model_name_or_path")
    s["model_dtype"] = dtype(taker, "torch_dtype", odd) or dtype(taker, "dtype", odd)
    attention = taker.word("attn_implementation", "eager, sdpa or flash_attention_2")
    if attention is not None:
        if attention in ATTENTION_KERNELS:
            s["attention"] = ATTENTION_KERNELS[attention].value
            taker.record("attention", s["attention"], "attn_implementation")
        else:
            odd.add("attn_implementation", attention, "eager, sdpa or flash_attention_2")
    if taker.flag("use_flash_attention_2"):
        s["attention"] = "flash"
        taker.record("attention", "flash", "use_flash_attention_2")
    # TRL ModelConfig: PEFT and bitsandbytes switches.
    four = taker.flag("load_in_4bit")
    eight = taker.flag("load_in_8bit")
    peft = taker.flag("use_peft")
    if four or eight:
        s["method"], s["quant"] = "qlora", "int8" if eight and not four else "nf4"
        if four:
            quant_type = taker.word("bnb_4bit_quant_type", "nf4 or fp4")
            if quant_type in ("nf4", "fp4"):
                s["quant"] = quant_type
            elif quant_type is not None:
                odd.add("bnb_4bit_quant_type", quant_type, "nf4 or fp4")
        taker.record("method", "qlora", "load_in_4bit" if four else "load_in_8bit")
        taker.record("quant", s["quant"], "bnb_4bit_quant_type" if taker.has("bnb_4bit_quant_type") else "load_in_4bit")
        nested = taker.flag("use_bnb_nested_quant", "double_quant")
        if nested is not None:
            s["double_quant"] = nested
    elif peft:
        s["method"] = "lora"
        taker.record("method", "lora", "use_peft")
    else:
        s["method"] = "full"
        taker.record("method", "full", "no use_peft / load_in_4bit: every weight trains")
    if s["method"] != "full":
        if taker.flag("use_dora"):
            s["method"] = "dora"
            taker.record("method", "dora", "use_dora")
        s["lora_rank"] = taker.integer("lora_r", "lora_rank", 1, 65_536)
        s["lora_alpha"] = taker.number("lora_alpha", "lora_alpha", 0.0, 1e6)
        s["lora_targets"] = lora_targets(taker, "lora_target_modules", taker.names("lora_target_modules"), odd)
        s.update(modules_to_save(taker, "lora_modules_to_save"))  # PEFT modules_to_save (branch h60mts)
    taker.irrelevant("gradient_checkpointing_kwargs")
    return finish(ConfigKind.HF, taker, odd, model_ref, s)

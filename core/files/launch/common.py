"""What every exporter shares: the result, the list of what a target cannot say, the model's
name, transformers' optimizer names, and the writers' small helpers."""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Final

import yaml

from core.catalogue import catalogue_entry, hub_repo_of
from core.dtypes import Dtype, WeightFormat
from core.errors import one_line
from core.files.launch.fields import FIELDS_BY_NAME, TRAINING_FIELDS, differs_from_default
from core.model import ALL_LINEAR, LORA_TARGETS
from core.optimizer_stacks import DEEPSPEED_TYPES, OptimizerStack, optimizer_stack
from core.plan import Attention, Engine, Method, OllamaVersion, Optimizer, OptimizerImpl, Plan
from core.serving.gptq import marlin_card


class Target(StrEnum):
    TRL = "trl"  # transformers TrainingArguments / TRL SFTConfig + ModelConfig, JSON
    ACCELERATE = "accelerate"  # accelerate config file (FSDP / DeepSpeed / multi-GPU), YAML
    DEEPSPEED = "deepspeed"  # DeepSpeed config, JSON
    AXOLOTL = "axolotl"
    LLAMA_FACTORY = "llamafactory"
    TORCHTUNE = "torchtune"  # recipe config overrides, YAML
    TORCHTITAN = "torchtitan"  # job config, TOML
    MEGATRON_BRIDGE = "megatron-bridge"  # ConfigContainer overrides, YAML
    TORCHRUN = "torchrun"  # command line
    ACCELERATE_LAUNCH = "accelerate-launch"  # command line
    VLLM = "vllm"  # `vllm serve` command line
    LLAMA_SERVER = "llama-server"  # llama.cpp's server command line
    SGLANG = "sglang"  # `python -m sglang.launch_server` command line
    OLLAMA = "ollama"  # Ollama's server environment and Modelfile, a shell text


TARGET_LABELS: Final = {
    Target.TRL: "Hugging Face TrainingArguments / TRL (JSON)",
    Target.ACCELERATE: "accelerate config (YAML)",
    Target.DEEPSPEED: "DeepSpeed config (JSON)",
    Target.AXOLOTL: "axolotl config (YAML)",
    Target.LLAMA_FACTORY: "LLaMA-Factory config (YAML)",
    Target.TORCHTUNE: "torchtune config overrides (YAML)",
    Target.TORCHTITAN: "torchtitan job config (TOML)",
    Target.MEGATRON_BRIDGE: "Megatron-Bridge config overrides (YAML)",
    Target.TORCHRUN: "torchrun command",
    Target.ACCELERATE_LAUNCH: "accelerate launch command",
    Target.VLLM: "vllm serve command",
    Target.LLAMA_SERVER: "llama.cpp llama-server command",
    Target.SGLANG: "SGLang launch_server command",
    Target.OLLAMA: "Ollama Modelfile and server environment",
}
TARGET_SUFFIXES: Final = {
    Target.TRL: ".json",
    Target.ACCELERATE: ".yaml",
    Target.DEEPSPEED: ".json",
    Target.AXOLOTL: ".yaml",
    Target.LLAMA_FACTORY: ".yaml",
    Target.TORCHTUNE: ".yaml",
    Target.TORCHTITAN: ".toml",
    Target.MEGATRON_BRIDGE: ".yaml",
    Target.TORCHRUN: ".sh",
    Target.ACCELERATE_LAUNCH: ".sh",
    Target.VLLM: ".sh",
    Target.LLAMA_SERVER: ".sh",
    Target.SGLANG: ".sh",
    Target.OLLAMA: ".sh",
}
SERVING_TARGETS: Final = frozenset({Target.VLLM, Target.LLAMA_SERVER, Target.SGLANG, Target.OLLAMA})
# The export that starts the engine whose rules judged the plan (Hugging Face generate is a script's
# call, not a server: vLLM's command stands in for it, and says so).
_ENGINE_TARGETS: Final = {Engine.VLLM: Target.VLLM, Engine.SGLANG: Target.SGLANG, Engine.HF: Target.VLLM}


def serving_target(plan: Plan) -> Target:
    """The serving export of the plan's engine: llama.cpp's is Ollama's when a release line is in front."""
    inf = plan.inference
    if inf.engine is Engine.LLAMACPP:
        return Target.LLAMA_SERVER if inf.ollama_version is OllamaVersion.NONE else Target.OLLAMA
    return _ENGINE_TARGETS[inf.engine]


@dataclass(frozen=True)
class Unexpressed:
    """A plan field the target cannot say (or not as the plan has it), and why."""

    field: str  # dotted, as the plan file names it: "method.optimizer", "parallel.tensor_parallel"
    why: str


@dataclass(frozen=True)
class Export:
    target: Target
    text: str  # the file's or the command's text; nothing is written anywhere
    unexpressed: tuple[Unexpressed, ...]

    @property
    def suffix(self) -> str:
        return TARGET_SUFFIXES[self.target]

    @property
    def label(self) -> str:
        return TARGET_LABELS[self.target]

    def cannot(self, field: str) -> bool:
        return any(u.field == field for u in self.unexpressed)


FLASH1_WHY: Final = (
    "FlashAttention 1 / Triton (MPT's attn_impl: triton) is not a kernel this target offers: its "
    "FlashAttention-2 setting is written (the same memory, a faster step)"
)


# PEFT's wrapped methods the exporters write as LoRA on the same targets: each one's config class, and the plan fields
# of its own no target writes (branches h53vera, h54oft, h58peft, h76peft, h78peft).
_WRITTEN_AS_LORA: Final[dict[Method, tuple[str, tuple[str, ...]]]] = {
    Method.VERA: ("VeraConfig", ()),
    Method.MISS: ("MissConfig", ()),
    Method.FOURIERFT: ("FourierFTConfig", ()),
    Method.ROAD: ("RoadConfig", ("method.lora.road_variant",)),
    Method.VBLORA: ("VBLoRAConfig", ()),  # branch h78peft
    Method.RANDLORA: ("RandLoraConfig", ()),
    Method.SHIRA: ("ShiraConfig", ()),
    Method.BOFT: ("BOFTConfig", ("method.lora.oft_block_size",)),  # branch h80boft
    Method.OFT: ("OFTConfig", ("method.lora.oft_block_size",)),
}


class Draft:
    """What an exporter gathers while it writes: the fields it cannot express, first reason kept."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._why: dict[str, str] = {}
        if plan.attention is Attention.FLASH1:
            self.cannot("method.attention", FLASH1_WHY)
        if plan.method is Method.IA3:
            why = "the exporters write LoRA settings, not PEFT's IA3Config (LoRA on the targets is written)"
            self.cannot("method.kind", why)
            self.cannot("method.lora.ia3_feedforward", why)
        if plan.litgpt_adapter:
            why = "the exporters write LoRA settings, not LitGPT's Adapter (finetune/adapter*.py): LoRA is written"
            for name in ("kind", "lora.adapter_prompt_length", "lora.adapter_start_layer", "lora.adapter_quantised"):
                self.cannot(f"method.{name}", why)
        if plan.prompt_learning:
            why = (
                "the exporters write LoRA settings, not PEFT's PromptTuningConfig / PromptEncoderConfig / "
                "PrefixTuningConfig"
            )
            self.cannot("method.kind", why)
            self.cannot("method.lora.virtual_tokens", why)
        if plan.method is Method.LN_TUNING:
            self.cannot("method.kind", "the exporters write LoRA settings, not PEFT's LNTuningConfig")
        if plan.method is Method.TRAINABLE_TOKENS:
            why = "the exporters write LoRA settings, not PEFT's TrainableTokensConfig (token_indices)"
            self.cannot("method.kind", why)
        if plan.lycoris:
            why = (
                "the exporters write LoRA settings, not PEFT's LoHaConfig / LoKrConfig (LoRA on the targets is written)"
            )
            self.cannot("method.kind", why)
            if plan.method is Method.LOKR:
                self.cannot("method.lora.lokr_factor", why)
        if plan.adalora:
            why = "the exporters write LoRA settings, not PEFT's AdaLoraConfig (LoRA at r = init_r is written)"
            self.cannot("method.kind", why)
        written_as_lora = _WRITTEN_AS_LORA.get(plan.method)
        if written_as_lora is not None:
            config, own = written_as_lora
            why = f"the exporters write LoRA settings, not PEFT's {config} (LoRA on the targets is written)"
            for field in ("method.kind", *own):
                self.cannot(field, why)

    def cannot(self, field: str, why: str) -> None:
        self._why.setdefault(field, one_line(why)[:300])

    def outside(self, fields: Iterable[str], why: str) -> None:
        """Fields the target has no setting for: listed where the plan differs from the defaults."""
        for name in fields:
            if differs_from_default(self.plan, name):
                self.cannot(name, why)

    def finish(self, target: Target, text: str) -> Export:
        order = {f.name: i for i, f in enumerate(TRAINING_FIELDS)}
        items = sorted(self._why.items(), key=lambda kv: order.get(kv[0], len(order)))
        return Export(target, text, tuple(Unexpressed(f, w) for f, w in items))


TRAINING_NAMES: Final = tuple(f.name for f in TRAINING_FIELDS)
# Why a target's config cannot carry a recipe the plan turns on: each exporter writes the ones
# its framework has a key for and lists the rest with these reasons (or its own).
RECIPE_WHY: Final = {
    "method.lora.dropout": "no LoRA dropout setting in this target",
    # PEFT's modules_to_save / trainable_token_indices (branch h60mts): axolotl lora_modules_to_save, TRL
    # ModelConfig lora_modules_to_save and LLaMA-Factory additional_target carry the first; none the second.
    "method.lora.modules_to_save": (
        "no modules_to_save setting in this target (axolotl lora_modules_to_save, TRL lora_modules_to_save, "
        "LLaMA-Factory additional_target; PEFT's LoraConfig modules_to_save)"
    ),
    "method.lora.trainable_tokens": (
        "no trainable-token setting in this target (PEFT's LoraConfig trainable_token_indices, in a script)"
    ),
    "method.stack": "no torch.compile setting in this target's config",
    "method.float8": "no float8 training setting in this target's config",
    "method.fused_loss": "no fused linear cross-entropy (Liger) setting in this target",
    "method.compiled_loss": "whether torch.compile covers the loss is not a setting of this target",
    "method.flash_loss": "flash-attn's fused cross-entropy is llm-foundry's loss_fn, not a setting of this target",
    "method.logprob_head": "prime-rl's chunked log-prob head belongs to its RL trainer, not a setting of this target",
    "method.megatron_ce_fusion": "Megatron-Core's cross-entropy fusion is not a setting of this target",
    "method.grad_clip": "no gradient-clipping setting in this target's config",
    "method.weight_decay": "no weight-decay setting in this target's config",
    "method.optimizer_in_backward": "no optimizer-step-in-the-backward setting in this target",
    "method.galore_rank": "no GaLore optim_args in this target (TrainingArguments optim_args rank=...)",
    "method.galore_update_proj_gap": "no GaLore optim_args in this target (TrainingArguments optim_args "
    "update_proj_gap=...)",
    "method.activation_offload": "no activation offloading setting in this target",
    "method.bnb_legacy": "the bitsandbytes version installed, not a config key (pin bitsandbytes<0.43.2 for it)",
    "method.kbit_upcast": "prepare_model_for_kbit_training is a call in the training script, not a config key",
    "method.bnb_skip_modules": (
        "the modules kept in 16 bits are the checkpoint's quantization_config (or the loading script's "
        "BitsAndBytesConfig(llm_int8_skip_modules=...)), not a key of this target"
    ),
    "method.litgpt": "LitGPT's fine-tuning scripts, not this target",
    "method.unsloth": "Unsloth's FastLanguageModel is its own training script, not a key of this target",
    "method.loop_keeps_output": (
        "a training loop that holds the model output through the backward (Answer.AI's train.py); "
        "this target's trainer drops it first"
    ),
    "method.training_kv_cache": (
        "transformers' use_cache is a model-loading argument of the training script (use_cache=False drops "
        "the cache), not a key of this target"
    ),
    "method.training_transformers": (
        "the transformers release installed where the run starts, not a key of this target (pin it, e.g. "
        "transformers>=4.49,<5 for 4.49-4.57, for the loss and the experts' adapters the estimate counts)"
    ),
    "method.loss_16bit": (
        "a cross-entropy on 16-bit logits is the training script's own loss call, not a key of this target "
        "(its trainer upcasts the logits to float32)"
    ),
    "method.moe_grouped_gemm": "Megatron-Core's MoE grouped GEMM is not a setting of this target",
    "method.experts_loop": (
        "which experts' forward runs follows the transformers release and where kernels' kernelize found the "
        "model (transformers 4.55 gpt-oss loaded on the CPU for FSDP loops), not a key of this target"
    ),
    "method.moe_layer": "whose MoE layer runs is the model code the run builds, not a key of this target",
    "hardware.alloc_conf": (
        "an environment variable: set PYTORCH_CUDA_ALLOC_CONF where the run starts "
        "(the torchrun and accelerate launch exports write it)"
    ),
    "hardware.torch_version": "the PyTorch release installed, not a config key (pin torch to it)",
    "parallel.host_threads_per_rank": (
        "an environment variable: set OMP_NUM_THREADS where the run starts "
        "(the torchrun and accelerate launch exports write it)"
    ),
    "hardware.nccl_avoid_record_streams": (
        "an environment variable: set TORCH_NCCL_AVOID_RECORD_STREAMS=1 where the run starts "
        "(the torchrun and accelerate launch exports write it)"
    ),
    "parallel.tp_overlap": "no tensor-parallel overlap setting in this target",
    "parallel.expert_parallel": "no expert-parallel setting in this target (Megatron: --expert-model-parallel-size)",
    # Issue 24 item 4: routing's imbalance is what training learns, no framework's setting; the capacity factor and
    # its padding are Megatron-Core's (DeepSpeed-MoE's capacity_factor is an argument of its MoE layer in code).
    "parallel.expert_imbalance": (
        "the routing's imbalance is what training learns, not a setting (force it balanced: Megatron "
        "--moe-router-force-load-balancing, torchtitan --debug.moe_force_load_balance)"
    ),
    "parallel.capacity_factor": (
        "no MoE capacity factor in this target (Megatron-Bridge: model.moe_expert_capacity_factor; DeepSpeed-MoE: "
        "deepspeed.moe.layer.MoE(capacity_factor=...) in the model's code)"
    ),
    "parallel.pad_to_capacity": (
        "no expert padding setting in this target (Megatron-Bridge: model.moe_pad_expert_input_to_capacity)"
    ),
    "parallel.moe_dispatcher": (
        "Megatron-Core's MoE token dispatcher is not a setting of this target (Megatron-Bridge: "
        "model.moe_token_dispatcher_type, model.moe_flex_dispatcher_backend)"
    ),
    "parallel.cp_rotate_method": (
        "PyTorch ring attention's K/V rotation (torch.distributed.tensor.experimental.set_rotate_method) is "
        "not a setting of this target (torchtitan: parallelism.context_parallel_rotate_method; accelerate: "
        "parallelism_config_cp_comm_strategy)"
    ),
    # No framework has a key for it: the release decides (core.inputs.FsdpUnits).
    "parallel.fsdp_units": (
        "FSDP2's unit layout is the release's, not a setting: accelerate up to 1.13 keeps the embedding and "
        "head in the root unit, accelerate 1.14 on and torchtitan since July 2025 give them units of their own"
    ),
    "parallel.dp_replicate": (
        "no hybrid-sharding (HSDP) setting in this target (torchtitan: data_parallel_replicate_degree; "
        "FSDP1: ShardingStrategy.HYBRID_SHARD)"
    ),
    "parallel.fsdp_float8_all_gather": "no float8 all-gather setting in this target",
    "parallel.zero_overlap_comm": (
        "DeepSpeed's zero_optimization.overlap_comm is not a setting of this target (the DeepSpeed export "
        "and the TRL, axolotl and LLaMA-Factory exports' deepspeed config carry it)"
    ),
    "parallel.zero3_overlap_comm": (
        "DeepSpeed's zero_optimization.overlap_comm is not a setting of this target (the DeepSpeed export "
        "and the TRL, axolotl and LLaMA-Factory exports' deepspeed config carry it)"
    ),
    "parallel.bf16_master_weights": (
        "DeepSpeed's bf16.bf16_master_weights_and_grads is not a setting of this target (the DeepSpeed export "
        "and the TRL, axolotl and LLaMA-Factory exports' deepspeed config carry it)"
    ),
    "parallel.bf16_optimizer_states": (
        "DeepSpeed's bf16.bf16_optimizer_states is not a setting of this target (the DeepSpeed export "
        "and the TRL, axolotl and LLaMA-Factory exports' deepspeed config carry it)"
    ),
    "parallel.grad_reduce_in_fp32": (
        "Megatron-Core's gradient buffer dtype: no such setting in this target (Megatron-Bridge: "
        "ddp.grad_reduce_in_fp32; Megatron-LM: --grad-reduce-in-bf16)"
    ),
    "parallel.grad_accum_fusion": (
        "Megatron's gradient accumulation fusion: no such setting in this target (Megatron-Bridge: "
        "model.gradient_accumulation_fusion; Megatron-LM: --no-gradient-accumulation-fusion)"
    ),
    "parallel.grad_sync": (
        "when FSDP reduces under accumulation is accelerate's GradientAccumulationPlugin(sync_each_batch=...) "
        "in the training loop (TrainingArguments: accelerator_config.gradient_accumulation_kwargs), not a key "
        "of this target"
    ),
    "parallel.stage_split": (
        "this target splits the pipeline's blocks evenly; the split by compute is nanotron's build_model"
    ),
    "parallel.fsdp1_wrap": (
        "this target wraps with FSDP2; FSDP1 over a CPU-held model is accelerate's fsdp_version 1 "
        "with fsdp_cpu_ram_efficient_loading"
    ),
}


def recipes_outside(draft: Draft, written: Iterable[str], why: Mapping[str, str] | None = None) -> None:
    """List the recipes the plan turns on that ``written`` does not carry, each with its reason."""
    for name, reason in RECIPE_WHY.items():
        if name not in written:
            draft.outside([name], (why or {}).get(name, reason))


def lora_target_names(draft: Draft, shorthand: str | None) -> tuple[bool, list[str]]:
    """(whether the tool's own all-linear is written, the target names written beside it or instead) for a plan's
    LoRA targets (core.model.ALL_LINEAR). ``shorthand``: the tool's all-linear where it takes no names beside it
    (PEFT's and TRL's "all-linear", LLaMA-Factory's "all"); None where it does (axolotl's lora_target_linear beside
    lora_target_modules). A plan on the seven names alone lists them: the tools' all-linear adapts the MoE routers
    too. Where all-linear cannot be written and it reaches more than the names (Plan.all_linear_reaches_more), the
    names are written and the routers named as left out."""
    plan = draft.plan
    targets = plan.lora.targets
    names = list(plan.model.peft_target_names(tuple(t for t in targets if t != ALL_LINEAR), plan.linear_experts))
    if ALL_LINEAR not in targets:
        return False, names
    beside = [n for n in names if n not in plan.model.peft_target_names(LORA_TARGETS, plan.linear_experts)]
    if shorthand is None:
        return True, beside
    if not beside:
        return True, [shorthand]
    if plan.all_linear_reaches_more:
        draft.cannot(
            "method.lora.targets",
            f"{shorthand} takes no other name beside it ({', '.join(beside)}): the names are written, which leave "
            "out the MoE router the plan's all-linear adapts",
        )
    return False, names


def modules_to_save_names(plan: Plan) -> list[str]:
    """The module names PEFT's modules_to_save takes for the plan's setting (the readers' first names:
    core.files.runconfig.common EMBEDDING_NAMES / HEAD_NAMES, transformers' Llama-style ones)."""
    setting = plan.lora.modules_to_save
    return [name for name, on in (("embed_tokens", setting.embedding), ("lm_head", setting.head)) if on]


GPU_COUNT: Final = ("parallel.nodes", "parallel.gpus_per_node")
LAUNCHER_WHY: Final = "the GPU count is the launcher's: see the torchrun or accelerate launch export"


# ---- the model the file names ------------------------------------------------------------
GPTQ_INT8_CHECKPOINT: Final = (
    "Serve an 8-bit GPTQ checkpoint of the model (Qwen's: its repository name + '-GPTQ-Int8'): "
    "the weights come from it."
)


def gptq_int8_header(draft: Draft, engine: str) -> list[str]:
    """An 8-bit GPTQ plan's header line (the checkpoint to serve), listing the weights where
    ``--quantization gptq_marlin`` cannot run: a card below compute capability 8.0
    (core.serving.gptq.marlin_card), where the engine runs the checkpoint as ``gptq``; none for other formats."""
    plan = draft.plan
    if plan.inference.weight_dtype is not WeightFormat.GPTQ_INT8:
        return []
    if not marlin_card(plan.hardware.gpu):
        draft.cannot(
            "inference.weight_dtype",
            f"{engine}'s gptq_marlin needs compute capability 8.0 or more; on this card '--quantization gptq' runs "
            "the checkpoint",
        )
    return [GPTQ_INT8_CHECKPOINT]


# config.json's torch_dtype (or transformers 5's dtype) words for the three dtypes a checkpoint is stored in.
_CHECKPOINT_DTYPES: Final = {"bfloat16": Dtype.BF16, "float16": Dtype.FP16, "float32": Dtype.FP32}


def checkpoint_dtype(plan: Plan) -> Dtype | None:
    """The dtype the plan's catalogue checkpoint is stored in (its config.json's ``torch_dtype``), what a loader
    asked for ``torch_dtype="auto"`` loads; None for a model outside the catalogue or a config that names none."""
    entry = catalogue_entry(plan)
    value = entry.config.get("torch_dtype", entry.config.get("dtype")) if entry is not None else None
    return _CHECKPOINT_DTYPES.get(value) if isinstance(value, str) else None


def model_reference(draft: Draft, given: str | None) -> str:
    """The Hub id (or folder) the file names: ``given``, else the catalogue's Hub repository
    (core.catalogue.hub_repo_of, what SGLang's --model-path rules read too); else the model's own name, and
    the model is listed as not expressed."""
    if given and given.strip():
        return given.strip()
    repo = hub_repo_of(draft.plan)
    if repo:
        return repo
    name = one_line(draft.plan.model.name)[:200] or "MODEL"
    draft.cannot("model", f"not a catalogue model: '{name}' is written; put its Hub id or folder there")
    return name


# ---- names the HF-based trainers share (transformers TrainingArguments.optim) ---------------
HF_OPTIM: Final = {
    Optimizer.ADAMW_8BIT: "adamw_bnb_8bit",
    Optimizer.PAGED_ADAMW: "paged_adamw_32bit",
    Optimizer.PAGED_ADAMW_8BIT: "paged_adamw_8bit",
    Optimizer.ADAFACTOR: "adafactor",
    Optimizer.SGD: "sgd",
    # torchao's AdamW8bit / AdamW4bit and bitsandbytes' Lion (transformers OptimizerNames)
    Optimizer.AO_ADAMW_8BIT: "adamw_torch_8bit",
    Optimizer.AO_ADAMW_4BIT: "adamw_torch_4bit",
    Optimizer.LION: "lion_32bit",
    Optimizer.LION_8BIT: "lion_8bit",
    Optimizer.PAGED_LION: "paged_lion_32bit",
    Optimizer.PAGED_LION_8BIT: "paged_lion_8bit",
    # transformers 5.25 OptimizerNames (training_args.py): torch's Adagrad / RMSprop, bitsandbytes' RMSprop, AdEMAMix
    Optimizer.ADAGRAD: "adagrad",
    Optimizer.RMSPROP: "rmsprop",
    Optimizer.RMSPROP_BNB: "rmsprop_bnb_32bit",
    Optimizer.RMSPROP_BNB_8BIT: "rmsprop_bnb_8bit",
    Optimizer.ADEMAMIX: "ademamix",
    Optimizer.ADEMAMIX_8BIT: "ademamix_8bit",
    Optimizer.PAGED_ADEMAMIX: "paged_ademamix_32bit",
    Optimizer.PAGED_ADEMAMIX_8BIT: "paged_ademamix_8bit",
    Optimizer.SCHEDULE_FREE_ADAMW: "schedule_free_adamw",
    Optimizer.SCHEDULE_FREE_RADAM: "schedule_free_radam",
    Optimizer.SCHEDULE_FREE_SGD: "schedule_free_sgd",
    Optimizer.GALORE_ADAMW: "galore_adamw",  # galore_adamw_layerwise with the step in the backward (hf_optim)
}
# transformers 5.25 trainer_optimizer.py _setup_low_rank_optimizer: a name ending in "layerwise" steps each
# parameter in a post-accumulate-grad hook, the plan's optimizer_in_backward.
HF_GALORE_LAYERWISE: Final = "galore_adamw_layerwise"
# optim_target_modules for the plan's GaLore targets, the blocks' Linear weights: transformers matches a list's
# names as substrings of the module path (trainer_utils.py check_target_module_exists), "attn" and "mlp" catching
# model.layers.N.self_attn.* and .mlp.* and not lm_head, as its GaLore docs write it.
HF_GALORE_TARGETS: Final = ("attn", "mlp")
# transformers builds torch's Adagrad and RMSprop with no foreach / fused argument: torch's foreach on CUDA.
HF_FOREACH_ONLY: Final = (Optimizer.ADAGRAD, Optimizer.RMSPROP)
# The plan's optimizers transformers has no ``optim`` name for (written as AdamW, said so).
HF_UNNAMED: Final = {
    Optimizer.AO_ADAMW_FP8: "transformers has no optim name for torchao's AdamWFp8",
    Optimizer.ANYPRECISION_ADAMW: (
        "transformers' adamw_anyprecision keeps float32 moments unless optim_args ask bf16 (not written)"
    ),
    Optimizer.ANYPRECISION_ADAMW_KAHAN: (
        "transformers' adamw_anyprecision keeps float32 moments and no Kahan buffer unless optim_args ask (not written)"
    ),
    Optimizer.MUON: "transformers has no optim name for torch.optim.Muon with AdamW on the rest",
    Optimizer.LORA_FA: (
        "transformers has no optim name for PEFT's LoRA-FA: build it with peft.optimizers.create_lorafa_optimizer("
        "model, r, lora_alpha, lr) and pass Trainer(optimizers=(optimizer, None))"
    ),
}
HF_DTYPES: Final = {Dtype.BF16: "bfloat16", Dtype.FP16: "float16", Dtype.FP32: "float32"}


def deepspeed_section_builds(plan: Plan) -> bool:
    """Whether the DeepSpeed config written for ``plan`` carries an ``optimizer`` section, which DeepSpeed builds in
    place of the trainer's ``optim`` (core.files.launch.deepspeed.optimizer_section): ZeRO-Offload, whose CPU
    kernels step only its own optimizers, and one of their types."""
    stack = optimizer_stack(plan.stack, plan.parallel.strategy, plan.parallel.offload)
    return stack is OptimizerStack.ZERO_OFFLOAD and plan.optimizer in DEEPSPEED_TYPES


def hf_optim(draft: Draft) -> str:
    """transformers' ``optim`` name for the plan's optimizer (OptimizerNames, v4.57 / v5). Where the inline DeepSpeed
    section builds the optimizer (:func:`deepspeed_section_builds`), the section says Adam and ``optim`` is unused
    (transformers hands DeepSpeed a DummyOptim: integrations/deepspeed.py ``deepspeed_optim_sched``)."""
    plan = draft.plan
    if plan.optimizer in HF_FOREACH_ONLY and plan.optimizer_impl is not OptimizerImpl.FOREACH:
        draft.cannot("method.optimizer_impl", f"transformers' {HF_OPTIM[plan.optimizer]} runs torch's foreach step")
    if plan.optimizer is Optimizer.GALORE_ADAMW and plan.optimizer_in_backward:
        return HF_GALORE_LAYERWISE
    if plan.optimizer in HF_OPTIM:
        return HF_OPTIM[plan.optimizer]
    if plan.optimizer is Optimizer.SGD_MOMENTUM:
        draft.cannot("method.optimizer", "transformers' sgd has no momentum setting (optim_args are not read back)")
        return "sgd"
    if plan.optimizer is Optimizer.ADAM and not deepspeed_section_builds(plan):
        draft.cannot("method.optimizer", "transformers offers AdamW, not Adam (the same state; written as AdamW)")
    if plan.optimizer in HF_UNNAMED:
        draft.cannot("method.optimizer", f"{HF_UNNAMED[plan.optimizer]}: written as torch's AdamW")
    if plan.optimizer_impl is OptimizerImpl.FORLOOP:
        draft.cannot("method.optimizer_impl", "transformers' AdamW runs fused or foreach, not one tensor at a time")
    return "adamw_torch_fused" if plan.optimizer_impl is OptimizerImpl.FUSED else "adamw_torch"


def hf_galore_keys(plan: Plan) -> dict[str, Any]:
    """TrainingArguments' optim_target_modules and optim_args for GaLore (transformers 5.25 _get_galore_optimizer
    reads rank and update_proj_gap from optim_args, "key=value" pairs joined by commas); none for another optimizer."""
    if plan.optimizer is not Optimizer.GALORE_ADAMW:
        return {}
    return {
        "optim_target_modules": list(HF_GALORE_TARGETS),
        "optim_args": f"rank={plan.galore_rank},update_proj_gap={plan.galore_update_proj_gap}",
    }


def hf_galore_written(plan: Plan) -> tuple[str, ...]:
    """The fields a TrainingArguments file carries for GaLore: its optim_args and, in the optim name, the step in
    the backward."""
    if plan.optimizer is not Optimizer.GALORE_ADAMW:
        return ()
    return ("method.galore_rank", "method.galore_update_proj_gap", "method.optimizer_in_backward")


def loaded_dtype(draft: Draft) -> Dtype:
    """The one dtype HF-based trainers load the model in: the frozen base's for adapter methods,
    the weights' otherwise; frozen layers, and a full run's frozen vision tower, need both the same.
    PEFT's prepare_model_for_kbit_training casts to float32 after loading (a call in the script, listed as
    such): the loaded dtype is the base's."""
    plan = draft.plan
    frozen = plan.method is Method.FROZEN or (plan.method is Method.FULL and plan.model.vision_params > 0)
    if frozen and plan.weight_dtype is not plan.base_dtype:
        draft.cannot("method.base_dtype", "the trainer loads the whole model in one dtype (the weights' is written)")
    return plan.base_dtype if plan.adapter_based else plan.weight_dtype


def one_model_dtype(draft: Draft, allowed: Collection[Dtype], why: Callable[[Dtype, Dtype], str]) -> Dtype:
    """The one dtype a framework keeps every weight in, adapters too (torchtune, Megatron-Core):
    the base's for adapter methods, else the weights'; bf16 where that is not in ``allowed``.
    Each precision role the plan holds in another dtype is listed with ``why(dtype, written)``."""
    plan = draft.plan
    dtype = plan.base_dtype if plan.adapter_based else plan.weight_dtype
    written = dtype if dtype in allowed else Dtype.BF16
    for name in ("method.weight_dtype", "method.base_dtype", "method.adapter_dtype"):
        field = FIELDS_BY_NAME[name]
        if field.relevant(plan) and field.value(plan) is not written:
            draft.cannot(name, why(dtype, written))
    return written


def optimizer_steps(plan: Plan) -> int | None:
    """Optimizer steps that train the plan's token budget on its data-parallel ranks."""
    per_step = (
        plan.workload.micro_batch * plan.workload.seq_len * plan.workload.grad_accum * plan.parallel.data_parallel
    )
    return math.ceil(plan.workload.tokens / per_step) if plan.workload.tokens > 0 else None


def integer_alpha(draft: Draft) -> float | int:
    """LoRA alpha as frameworks that type it ``int`` take it (TRL, axolotl, LLaMA-Factory)."""
    alpha = draft.plan.lora.alpha
    if draft.plan.adapter_based and not float(alpha).is_integer():
        draft.cannot("method.lora.alpha", "this framework's lora_alpha is an integer")
    return int(alpha) if float(alpha).is_integer() else alpha


def fraction_text(fraction: float) -> str:
    """A memory fraction flag (SGLang's ``--mem-fraction-static``, vLLM's ``--gpu-memory-utilization``) written
    as SGLang writes its own fractions, two or three decimals (0.4.7 server_args.py ``__post_init__``: 0.79, 0.81,
    0.85, 0.88), where that is the same number to 1e-9: a default worked out as 0.88 - 0.03 is 0.8500000000000001
    in floating point, and written 0.85. A fraction with more digits keeps them all, so it reads back as it was."""
    for places in (2, 3):
        text = f"{fraction:.{places}f}".rstrip("0").removesuffix(".")  # 0.7, not 0.70
        if abs(float(text) - fraction) <= 1e-9:
            return text
    return repr(float(fraction))


def header(lines: Iterable[str], mark: str = "#") -> str:
    """Comment lines for the top of a YAML, TOML or shell text; anything from outside is one line."""
    return "".join(f"{mark} {one_line(line)}\n" for line in lines)


def command_words(text: str) -> list[str]:
    """The words of an exported command: its text less the comment lines at the top."""
    lines = text.split("\n")
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return shlex.split("\n".join(lines))


def dump_yaml(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1000)


# ---- reading an export back (the exports no project importer reads: commands, accelerate, DeepSpeed) ----
_TOP_LEVEL: Final = {"method.kind": "method"}


def apply_fields(plan: Plan, changes: dict[str, Any]) -> Plan:
    """``plan`` with fields given by their dotted names ("workload.micro_batch": 4, ...)."""
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in changes.items():
        if name.startswith("method.lora."):
            nested.setdefault("lora", {})[name.rsplit(".", 1)[1]] = value
        elif name.split(".", 1)[0] in ("workload", "parallel", "inference", "hardware"):
            section, key = name.split(".", 1)
            nested.setdefault(section, {})[key] = value
        else:
            top[_TOP_LEVEL.get(name, name.removeprefix("method."))] = value
    for section, values in nested.items():
        top[section] = replace(getattr(plan, section), **values)
    return plan.with_changes(**top)


# ---- the caching allocator's settings in front of a launch command ----------------------------
ALLOC_ENV: Final = "PYTORCH_CUDA_ALLOC_CONF"
# ProcessGroupNCCL reads it at construction (ProcessGroupNCCL.hpp, torch 2.4.0-2.8.0 wheels);
# from 2.8 it only warns that it is the default (core.parallel.state._release_cache).
RECORD_STREAMS_ENV: Final = "TORCH_NCCL_AVOID_RECORD_STREAMS"
# The CPU threads of each rank (the offloaded optimizer step's): torchrun keeps a value the user set
# and only defaults it to 1 when it is unset (torch/distributed/run.py config_from_args).
THREADS_ENV: Final = "OMP_NUM_THREADS"
ENV_SETTINGS: Final = ("hardware.alloc_conf", "hardware.nccl_avoid_record_streams", "parallel.host_threads_per_rank")


def alloc_env(draft: Draft) -> list[str]:
    """``PYTORCH_CUDA_ALLOC_CONF=...``, ``TORCH_NCCL_AVOID_RECORD_STREAMS=1`` and ``OMP_NUM_THREADS=N``
    in front of a launch command, where the plan sets them (the variable where its release reads it)."""
    plan = draft.plan
    conf = plan.hardware.alloc_conf
    words = [f"{ALLOC_ENV}={shlex.quote(conf)}"] if conf else []
    if differs_from_default(plan, "hardware.nccl_avoid_record_streams"):
        words.append(f"{RECORD_STREAMS_ENV}=1")
    if differs_from_default(plan, "parallel.host_threads_per_rank"):
        words.append(f"{THREADS_ENV}={plan.parallel.host_threads_per_rank}")
    return words


def read_alloc_env(words: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The allocator settings in front of a command, and the command's words after them."""
    found: dict[str, Any] = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        name, value = words[0].split("=", 1)
        if name == ALLOC_ENV:
            found["hardware.alloc_conf"] = value
        elif name == RECORD_STREAMS_ENV:
            found["hardware.nccl_avoid_record_streams"] = value == "1"
        elif name == THREADS_ENV and value.isdigit():
            found["parallel.host_threads_per_rank"] = int(value)
        words = words[1:]
    return found, words

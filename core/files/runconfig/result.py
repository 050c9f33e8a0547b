"""What an importer returns: the run's settings, where each came from, and what was not understood.

An importer never touches a :class:`~core.plan.Plan`. It turns a framework's file into
:class:`RunSettings` (the framework-neutral description of the run) and lists every
field it read (:class:`FieldRead`: the setting, the value, the key in the file) and every
key it did not understand. :func:`core.files.runconfig.mapping.apply_settings` is the one
place where settings become plan fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class ConfigKind(StrEnum):
    PEFT = "peft"  # PEFT adapter_config.json
    HF = "hf"  # transformers TrainingArguments / TRL SFTConfig (JSON or YAML)
    AXOLOTL = "axolotl"
    LLAMA_FACTORY = "llamafactory"
    TORCHTUNE = "torchtune"
    TORCHTITAN = "torchtitan"
    MEGATRON_BRIDGE = "megatron-bridge"  # Megatron-Bridge / NeMo 2 ConfigContainer YAML


CONFIG_KIND_LABELS: Final = {
    ConfigKind.PEFT: "PEFT adapter_config.json",
    ConfigKind.HF: "Hugging Face TrainingArguments / TRL config",
    ConfigKind.AXOLOTL: "axolotl config",
    ConfigKind.LLAMA_FACTORY: "LLaMA-Factory config",
    ConfigKind.TORCHTUNE: "torchtune recipe config",
    ConfigKind.TORCHTITAN: "torchtitan job config (TOML)",
    ConfigKind.MEGATRON_BRIDGE: "Megatron-Bridge / NeMo config (YAML)",
}

# Display names of the settings, in the order a dialog lists them.
SETTING_LABELS: Final = {
    "method": "Method",
    "lora_rank": "LoRA rank",
    "lora_alpha": "LoRA alpha",
    "lora_targets": "LoRA target modules",
    "ia3_feedforward": "IA3 feedforward modules",
    "virtual_tokens": "Virtual tokens",
    "lokr_factor": "LoKr decompose factor",
    "oft_block_size": "OFT block size",
    "road_variant": "RoAd variant",
    "modules_to_save": "Modules to save",
    "trainable_tokens": "Trainable tokens",
    "quant": "Base quantisation",
    "double_quant": "Double quantisation",
    "model_dtype": "Model loaded in",
    "adapter_dtype": "Adapter dtype",
    "trainable_dtype": "Trained blocks held in",
    "autocast": "Autocast",
    "optimizer": "Optimizer",
    "optimizer_impl": "Optimizer implementation",
    "checkpointing": "Gradient checkpointing",
    "checkpoint_policy": "Checkpointing policy",
    "checkpoint_every": "Checkpoint every Nth block",
    "attention": "Attention kernel",
    "chunked_loss": "Loss in chunks",
    "fused_loss": "Fused linear cross-entropy",
    "compiled_loss": "Loss under torch.compile",
    "megatron_ce_fusion": "Megatron cross-entropy fusion",
    "moe_grouped_gemm": "Megatron MoE grouped GEMM",
    "capacity_factor": "Megatron MoE expert capacity factor",
    "pad_to_capacity": "Megatron MoE pad expert input to capacity",
    "grad_clip": "Gradient clipping",
    "weight_decay": "Weight decay",
    "optimizer_in_backward": "Optimizer step in the backward",
    "galore_rank": "GaLore rank",
    "galore_update_proj_gap": "GaLore projector update gap",
    "activation_offload": "Activation offloading",
    "stack": "Software stack",
    "float8": "Float8 linears",
    "kbit_upcast": "prepare_model_for_kbit_training",
    "unsloth": "Unsloth FastLanguageModel",
    "lora_dropout": "LoRA dropout",
    "micro_batch": "Micro-batch per GPU",
    "grad_accum": "Gradient accumulation",
    "seq_len": "Sequence length",
    "eval_batch": "Evaluation batch",
    "trainable_layers": "Trainable top blocks",
    "sharding": "Data-parallel strategy",
    "reshard_after_forward": "Reshard after forward (FSDP)",
    "offload": "Offload to CPU",
    "tp_overlap": "Tensor-parallel overlap",
    "fsdp_float8_all_gather": "FSDP float8 all-gather",
    "fsdp1_wrap": "FSDP1 wrap from CPU/meta",
    "grad_sync": "FSDP gradient sync under accumulation",
    "zero_overlap_comm": "DeepSpeed ZeRO overlap_comm",
    "bf16_master_weights": "DeepSpeed bf16 master weights",
    "bf16_optimizer_states": "DeepSpeed bf16 optimizer states",
    "zero3_overlap_comm": "DeepSpeed ZeRO-3 overlap_comm",
    "grad_reduce_in_fp32": "Megatron gradient reduce in fp32",
    "grad_accum_fusion": "Megatron gradient accumulation fusion",
    "cp_rotate_method": "Context-parallel rotate method",
    "fsdp_units": "FSDP2 unit layout",
    "fsdp_param_dtype": "FSDP parameter dtype",
    "fsdp_reduce_dtype": "FSDP reduce dtype",
    "ddp_bucket_mb": "DDP bucket size (MiB)",
    "model": "Model",
    "note": "Noted (not modelled)",
}


@dataclass(frozen=True)
class RunSettings:
    """A training run as any framework describes it; None means "the file does not say"."""

    method: str | None = None  # full | lora | qlora | dora | ia3 | prompt-tuning | p-tuning | prefix-tuning | ln-tuning
    # | loha | lokr | vera | oft | adalora | miss | trainable-tokens | fourierft | road | vblora | randlora | shira
    # | boft
    lora_rank: int | None = None
    lora_alpha: float | None = None
    lora_targets: tuple[str, ...] | None = None
    ia3_feedforward: tuple[str, ...] | None = None  # PEFT IA3Config.feedforward_modules
    virtual_tokens: int | None = None  # PEFT PromptLearningConfig.num_virtual_tokens
    lokr_factor: int | None = None  # PEFT LoKrConfig.decompose_factor
    oft_block_size: int | None = None  # PEFT OFTConfig.oft_block_size
    road_variant: str | None = None  # PEFT RoadConfig.variant: road_1 | road_2 | road_4
    modules_to_save: str | None = None  # none | embedding | head | both (PEFT modules_to_save; branch h60mts)
    trainable_tokens: int | None = None  # rows of PEFT's trainable_token_indices
    quant: str | None = None  # nf4 | fp4 | int8
    double_quant: bool | None = None
    model_dtype: str | None = None  # fp32 | bf16 | fp16: the dtype the model is loaded in
    adapter_dtype: str | None = None  # fp32 | bf16 | fp16
    trainable_dtype: str | None = None  # fp32 | bf16 | fp16: freeze tuning's trained blocks, where cast (else loaded)
    autocast: str | None = None  # none | bf16 | fp16
    optimizer: str | None = None  # a core.plan.Optimizer value
    optimizer_impl: str | None = None  # fused | foreach | forloop
    checkpointing: bool | None = None
    checkpoint_policy: str | None = None  # a core.plan.CheckpointPolicy value: full | op | layer | attention | unsloth
    checkpoint_every: int | None = None  # layer policy: every Nth block
    attention: str | None = None  # a core.plan.Attention value
    chunked_loss: bool | None = None
    fused_loss: bool | None = None  # Liger / Cut Cross-Entropy: head + loss fused
    compiled_loss: bool | None = None  # torchtitan compile.components names "loss"
    megatron_ce_fusion: str | None = None  # a core.plan.MegatronCeFusion value: off | native | te
    moe_grouped_gemm: bool | None = None  # Megatron-Bridge model.moe_grouped_gemm
    grad_clip: bool | None = None  # max_grad_norm / clip_grad_norm set
    weight_decay: float | None = None  # the optimizer's weight decay, where the file sets it
    optimizer_in_backward: bool | None = None  # torchtune optimizer_in_bwd; HF galore_adamw_layerwise
    galore_rank: int | None = None  # HF optim_args rank (GaLore)
    galore_update_proj_gap: int | None = None  # HF optim_args update_proj_gap (GaLore)
    activation_offload: bool | None = None  # torchtune / axolotl activation offloading
    stack: str | None = None  # a core.plan.Stack value: "compile" when the file turns torch.compile on
    float8: str | None = None  # a core.plan.Float8 value: torchtitan's float8 converter
    kbit_upcast: bool | None = None  # peft prepare_model_for_kbit_training
    unsloth: bool | None = None  # LLaMA-Factory use_unsloth: Unsloth's FastLanguageModel
    lora_dropout: float | None = None
    micro_batch: int | None = None
    grad_accum: int | None = None
    seq_len: int | None = None
    eval_batch: int | None = None
    trainable_layers: int | None = None  # freeze-tuning: the top blocks that train
    sharding: str | None = None  # a core.plan.Strategy value: ddp | fsdp | zero1 | zero2 | zero3
    reshard_after_forward: bool | None = None  # FSDP: full_shard True, shard_grad_op False
    offload: str | None = None  # a core.plan.Offload value
    tp_overlap: bool | None = None  # torchtitan enable_async_tensor_parallel
    fsdp_float8_all_gather: bool | None = None  # torchtitan float8 enable_fsdp_float8_all_gather
    fsdp1_wrap: bool | None = None  # FSDP1 over a CPU/meta model (cpu_ram_efficient_loading)
    grad_sync: str | None = None  # a core.plan.GradSync value: accelerate's sync_each_batch (each) or not (no_sync)
    grad_reduce_in_fp32: bool | None = None  # Megatron-Core DistributedDataParallelConfig.grad_reduce_in_fp32
    grad_accum_fusion: bool | None = None  # Megatron-Core ModelParallelConfig.gradient_accumulation_fusion
    zero_overlap_comm: bool | None = None  # DeepSpeed zero_optimization.overlap_comm (ZeRO-1/2)
    bf16_master_weights: bool | None = None  # DeepSpeed bf16.bf16_master_weights_and_grads
    bf16_optimizer_states: bool | None = None  # DeepSpeed bf16.bf16_optimizer_states
    zero3_overlap_comm: bool | None = None  # DeepSpeed zero_optimization.overlap_comm (ZeRO-3)
    cp_rotate_method: str | None = None  # a core.plan.CpRotate value: torchtitan context_parallel_rotate_method
    fsdp_units: str | None = None  # a core.plan.FsdpUnits value: torchtitan's wrap carves the ends
    capacity_factor: float | None = None  # Megatron-Core moe_expert_capacity_factor (0: None, dropless)
    pad_to_capacity: bool | None = None  # Megatron-Core moe_pad_expert_input_to_capacity
    fsdp_param_dtype: str | None = None  # a core.dtypes.MpDtype value: FSDP2 MixedPrecisionPolicy.param_dtype
    fsdp_reduce_dtype: str | None = None  # a core.dtypes.MpDtype value: FSDP2 MixedPrecisionPolicy.reduce_dtype
    ddp_bucket_mb: float | None = None  # DistributedDataParallel(bucket_cap_mb=...), MiB


@dataclass(frozen=True)
class FieldRead:
    """One value taken from the file (or a framework default), and what it sets."""

    setting: str  # a RunSettings field, "model", or "note"
    value: object
    source: str  # the key in the file ("model.lora_rank"), or "default: <why>"

    @property
    def label(self) -> str:
        return SETTING_LABELS.get(self.setting, self.setting)


@dataclass(frozen=True)
class RunConfig:
    kind: ConfigKind
    path: str
    model_ref: str | None  # the model the file names: a Hub id or a path
    settings: RunSettings
    fields: tuple[FieldRead, ...] = ()
    notes: tuple[FieldRead, ...] = ()  # read and shown, but the estimate has no input for them
    unknown: tuple[str, ...] = ()  # keys not understood, as dotted paths
    model_dir: str | None = None  # a local folder the file names for the weights (torchtune's checkpointer)

    @property
    def kind_label(self) -> str:
        return CONFIG_KIND_LABELS[self.kind]

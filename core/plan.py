"""The Plan: one immutable value holding every input of an estimate.

A Plan validates itself when it is built; every error is a :class:`PlanError` naming the
field (as a dotted path of the plan file), the value and what is allowed. Plans are
saved as a versioned JSON document (see :mod:`core.files.planfile`).

One concern past 400 lines: the enums, labels and ranges of every input sit beside the
dataclasses that check them, so a field's name, range and message are read in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final

from core.dtypes import Autocast, Dtype, KvDtype, MpDtype, Quant, WeightFormat
from core.errors import PlanError
from core.model import ModelSpec, check_text, normalise_lora_targets
from core.units import finite_number


class Method(StrEnum):
    FULL = "full"
    LORA = "lora"
    QLORA = "qlora"
    FROZEN = "frozen"
    DORA = "dora"  # PEFT LoraConfig(use_dora=True): LoRA plus a trained magnitude per output row


class Precision(StrEnum):
    FP32 = "fp32"  # float32 weights, gradients and optimizer state
    BF16_MIXED = "bf16-mixed"  # float32 master weights, bf16 compute (autocast)
    FP16_MIXED = "fp16-mixed"
    BF16 = "bf16"  # everything in bf16, no float32 copy
    FP16 = "fp16"


class Preset(StrEnum):
    """The precision set-ups people run, each a fixed set of roles (see PRESET_ROLES)."""

    TRAINER_BF16 = "trainer-bf16"  # model loaded in bf16, Trainer(bf16=True)
    FP32_AUTOCAST_BF16 = "fp32-autocast-bf16"  # the old "bf16-mixed"
    PURE_BF16 = "pure-bf16"  # the old "bf16"
    FP16_AMP = "fp16-amp"  # the old "fp16-mixed"
    FP32 = "fp32"
    CUSTOM = "custom"


class OptimizerImpl(StrEnum):
    """Which torch.optim code path runs the step (AdamW, Adam, SGD)."""

    FUSED = "fused"  # one CUDA kernel per group: no parameter-sized temporaries
    FOREACH = "foreach"  # torch.optim's default on CUDA: _foreach_* ops over every tensor at once
    FORLOOP = "forloop"  # one parameter at a time (foreach=False, fused=False)


class Optimizer(StrEnum):
    ADAMW = "adamw"
    ADAMW_8BIT = "adamw-8bit"
    PAGED_ADAMW = "paged-adamw"
    PAGED_ADAMW_8BIT = "paged-adamw-8bit"
    SGD_MOMENTUM = "sgd-momentum"
    SGD = "sgd"
    ADAFACTOR = "adafactor"
    ADAM = "adam"  # torch.optim.Adam: same state as AdamW, weight decay folded into the gradient


class Attention(StrEnum):
    EAGER = "eager"  # materialises batch·heads·seq² scores and probabilities
    SDPA = "sdpa"  # PyTorch scaled_dot_product_attention: flash / memory-efficient kernels
    FLASH = "flash"  # the flash-attn package (FlashAttention-2)


class CheckpointPolicy(StrEnum):
    """Which tensors a checkpointed run keeps (with ``checkpointing`` on).

    FULL recomputes every block (HF ``gradient_checkpointing``, torchtitan ``mode = "full"``);
    OP and LAYER are torchtitan's selective modes (``selective_ac_option = "op"`` or an
    integer N): OP keeps the outputs of a list of expensive ops in every block, LAYER
    checkpoints every Nth block and keeps the others whole.
    """

    FULL = "full"
    OP = "op"  # selective per op: matmuls (every other one) and the attention kernel saved
    LAYER = "layer"  # every Nth block fully checkpointed, the rest not at all


class Strategy(StrEnum):
    """How the data-parallel ranks hold the model state."""

    DDP = "ddp"  # torch DistributedDataParallel: a full replica per rank + gradient buckets
    FSDP = "fsdp"  # FSDP2 fully_shard per decoder block and the root: everything sharded
    ZERO1 = "zero1"  # DeepSpeed ZeRO-1: optimizer state sharded
    ZERO2 = "zero2"  # + gradients
    ZERO3 = "zero3"  # + parameters


class Offload(StrEnum):
    NONE = "none"
    OPTIMIZER = "optimizer"  # optimizer state (fp32 master copy, moments) and its step on the host
    PARAMS = "params"  # parameters, gradients and optimizer state on the host


class PipelineSchedule(StrEnum):
    GPIPE = "gpipe"  # every micro-batch's forward, then every backward
    ONE_F_ONE_B = "1f1b"  # PipeDream-flush / Megatron 1F1B
    INTERLEAVED = "interleaved"  # Megatron interleaved 1F1B over virtual stages


class Accounting(StrEnum):
    LESSON = "lesson"  # the lesson's four buckets with a typed activation allowance
    DETAILED = "detailed"  # derived from the architecture and how the step runs


class Engine(StrEnum):
    """Which inference engine serves (its memory rules: :mod:`core.serving.engines`)."""

    HF = "hf"  # Hugging Face transformers model.generate(): one static batch
    VLLM = "vllm"  # vLLM: paged KV pool sized at start-up, continuous batching
    SGLANG = "sglang"  # SGLang: token pool of mem_fraction_static less the weights


ENGINE_LABELS: Final = {Engine.HF: "Hugging Face generate", Engine.VLLM: "vLLM", Engine.SGLANG: "SGLang"}
METHOD_LABELS: Final = {
    Method.FULL: "Full fine-tuning",
    Method.LORA: "LoRA",
    Method.QLORA: "QLoRA (quantised base)",
    Method.FROZEN: "Frozen layers",
    Method.DORA: "DoRA (LoRA + magnitude)",
}
PRECISION_LABELS: Final = {
    Precision.FP32: "float32",
    Precision.BF16_MIXED: "bf16 mixed (fp32 master)",
    Precision.FP16_MIXED: "fp16 mixed (fp32 master)",
    Precision.BF16: "pure bf16",
    Precision.FP16: "pure fp16",
}
OPTIMIZER_LABELS: Final = {
    Optimizer.ADAMW: "AdamW",
    Optimizer.ADAM: "Adam",
    Optimizer.ADAMW_8BIT: "AdamW 8-bit",
    Optimizer.PAGED_ADAMW: "Paged AdamW",
    Optimizer.PAGED_ADAMW_8BIT: "Paged AdamW 8-bit",
    Optimizer.SGD_MOMENTUM: "SGD + momentum",
    Optimizer.SGD: "SGD",
    Optimizer.ADAFACTOR: "Adafactor",
}
PRESET_LABELS: Final = {
    Preset.TRAINER_BF16: "Trainer(bf16=True), bf16 model",
    Preset.FP32_AUTOCAST_BF16: "float32 weights + bf16 autocast",
    Preset.PURE_BF16: "pure bf16 (no autocast)",
    Preset.FP16_AMP: "fp16 AMP (float32 weights, GradScaler)",
    Preset.FP32: "float32",
    Preset.CUSTOM: "custom",
}
CHECKPOINT_POLICY_LABELS: Final = {
    CheckpointPolicy.FULL: "full (every block recomputed)",
    CheckpointPolicy.OP: "selective per op (torchtitan)",
    CheckpointPolicy.LAYER: "every Nth block (torchtitan)",
}
OPTIMIZER_IMPL_LABELS: Final = {
    OptimizerImpl.FUSED: "HF Trainer default (fused)",
    OptimizerImpl.FOREACH: "foreach (torch.optim default on CUDA)",
    OptimizerImpl.FORLOOP: "for-loop",
}


@dataclass(frozen=True)
class PrecisionRoles:
    """Where each kind of tensor lives. Defaults and their sources:

    - ``weight_dtype``: transformers 5 ``from_pretrained`` loads the checkpoint's dtype
      (``dtype="auto"``), bf16 for today's checkpoints; the HF Trainer does not upcast a
      model loaded in bf16, so its gradients and optimizer state are bf16 too.
    - ``base_dtype``: the frozen base of LoRA / DoRA / frozen layers, loaded the same way.
    - ``adapter_dtype``: PEFT ``get_peft_model(autocast_adapter_dtype=True)`` (its
      default) casts adapters to float32; litgpt's ``bf16-true`` keeps them in the base's.
    - ``autocast``: ``Trainer(bf16=True)`` wraps the forward and the loss in
      ``torch.autocast(dtype=bfloat16)``; ``fp16=True`` adds a GradScaler.
    """

    weight_dtype: Dtype
    base_dtype: Dtype
    adapter_dtype: Dtype
    autocast: Autocast


PRESET_ROLES: Final[dict[Preset, PrecisionRoles]] = {
    Preset.TRAINER_BF16: PrecisionRoles(Dtype.BF16, Dtype.BF16, Dtype.FP32, Autocast.BF16),
    Preset.FP32_AUTOCAST_BF16: PrecisionRoles(Dtype.FP32, Dtype.FP32, Dtype.FP32, Autocast.BF16),
    Preset.PURE_BF16: PrecisionRoles(Dtype.BF16, Dtype.BF16, Dtype.FP32, Autocast.NONE),
    Preset.FP16_AMP: PrecisionRoles(Dtype.FP32, Dtype.FP32, Dtype.FP32, Autocast.FP16),
    Preset.FP32: PrecisionRoles(Dtype.FP32, Dtype.FP32, Dtype.FP32, Autocast.NONE),
}
# The old single ``precision`` setting, read as roles (plan files before version 3, lesson
# mode). Pure fp16 never had a preset of its own: it is custom with fp16 storage.
PRECISION_ROLES: Final[dict[Precision, tuple[Preset, PrecisionRoles]]] = {
    Precision.FP32: (Preset.FP32, PRESET_ROLES[Preset.FP32]),
    Precision.BF16_MIXED: (Preset.FP32_AUTOCAST_BF16, PRESET_ROLES[Preset.FP32_AUTOCAST_BF16]),
    Precision.FP16_MIXED: (Preset.FP16_AMP, PRESET_ROLES[Preset.FP16_AMP]),
    Precision.BF16: (Preset.PURE_BF16, PRESET_ROLES[Preset.PURE_BF16]),
    Precision.FP16: (Preset.CUSTOM, PrecisionRoles(Dtype.FP16, Dtype.FP16, Dtype.FP32, Autocast.NONE)),
}
_MIXED_BY_AUTOCAST: Final = {
    Autocast.NONE: Precision.FP32,
    Autocast.BF16: Precision.BF16_MIXED,
    Autocast.FP16: Precision.FP16_MIXED,
}
ROLE_FIELDS: Final = ("weight_dtype", "base_dtype", "adapter_dtype", "autocast")


def precision_of(roles: PrecisionRoles) -> Precision:
    """The old one-word precision that describes the roles (what lesson mode reads)."""
    if roles.weight_dtype is Dtype.FP32:
        return _MIXED_BY_AUTOCAST[roles.autocast]
    return Precision.BF16 if roles.weight_dtype is Dtype.BF16 else Precision.FP16


def preset_matching(roles: PrecisionRoles) -> Preset:
    return next((p for p, r in PRESET_ROLES.items() if r == roles), Preset.CUSTOM)


ATTENTION_LABELS: Final = {
    Attention.EAGER: "eager (scores kept)",
    Attention.SDPA: "SDPA (fused)",
    Attention.FLASH: "FlashAttention-2",
}
STRATEGY_LABELS: Final = {
    Strategy.DDP: "DDP (full replica)",
    Strategy.FSDP: "FSDP2 (fully_shard)",
    Strategy.ZERO1: "ZeRO-1 (optimizer)",
    Strategy.ZERO2: "ZeRO-2 (+ gradients)",
    Strategy.ZERO3: "ZeRO-3 (+ weights)",
}
OFFLOAD_LABELS: Final = {
    Offload.NONE: "none",
    Offload.OPTIMIZER: "optimizer state to CPU",
    Offload.PARAMS: "parameters + optimizer to CPU",
}
SCHEDULE_LABELS: Final = {
    PipelineSchedule.GPIPE: "GPipe",
    PipelineSchedule.ONE_F_ONE_B: "1F1B",
    PipelineSchedule.INTERLEAVED: "interleaved 1F1B",
}
QUANT_LABELS: Final = {Quant.NF4: "4-bit NF4", Quant.FP4: "4-bit FP4", Quant.INT8: "8-bit (LLM.int8)"}

# Ranges: wide enough for any real run, narrow enough that every product stays finite.
MAX_BATCH: Final = 1_000_000
MAX_SEQ: Final = 100_000_000
MAX_TOKENS: Final = 10**16
MAX_GPUS: Final = 1_000_000
MAX_RANK: Final = 65_536
# Layer SAC's N: past the block count it checkpoints nothing, so any bound above the deepest
# model works; 1024 is far above every catalogue model's layer count.
MAX_CHECKPOINT_EVERY: Final = 1024


def _check_int(path: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise PlanError(path, value, f"an integer from {low:,} to {high:,}")


def _check_float(path: str, value: object, low: float, high: float, *, low_open: bool = False) -> None:
    number = finite_number(value)
    if number is None:
        raise PlanError(path, value, f"a number from {low:g} to {high:g}")
    if number > high or number < low or (low_open and number == low):
        bound = f"above {low:g}" if low_open else f"from {low:g}"
        raise PlanError(path, value, f"a number {bound} to {high:g}")


def _check_enum(path: str, value: object, enum: type[StrEnum]) -> None:
    if not isinstance(value, enum):
        raise PlanError(path, value, "one of " + ", ".join(e.value for e in enum))


@dataclass(frozen=True)
class LoraSettings:
    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = ("q_proj", "v_proj")

    def __post_init__(self) -> None:
        _check_int("method.lora.rank", self.rank, 1, MAX_RANK)
        _check_float("method.lora.alpha", self.alpha, 0.0, 1e6, low_open=True)
        if not isinstance(self.targets, tuple):
            raise PlanError("method.lora.targets", self.targets, "a list of module names")
        normal = normalise_lora_targets(self.targets)
        if normal != self.targets:
            object.__setattr__(self, "targets", normal)


@dataclass(frozen=True)
class Workload:
    micro_batch: int = 1
    seq_len: int = 1024
    grad_accum: int = 1
    tokens: int = 20_000_000  # token budget of the whole run (for time and cost)
    eval_batch: int = 0  # 0: evaluate with the training micro-batch

    def __post_init__(self) -> None:
        _check_int("workload.micro_batch", self.micro_batch, 1, MAX_BATCH)
        _check_int("workload.seq_len", self.seq_len, 1, MAX_SEQ)
        _check_int("workload.grad_accum", self.grad_accum, 1, MAX_BATCH)
        _check_int("workload.tokens", self.tokens, 0, MAX_TOKENS)
        _check_int("workload.eval_batch", self.eval_batch, 0, MAX_BATCH)


@dataclass(frozen=True)
class Hardware:
    gpu: str = "a100-80gb-sxm"  # id in the GPU catalogue, or "custom"
    utilisation: float = 0.4  # model FLOP utilisation; the lesson: 30-50 % for well-tuned code
    headroom: float = 0.10  # fraction of the card kept free; the lesson advises 10-20 %
    price_per_gpu_hour: float = 2.0  # currency units per GPU-hour
    custom_memory_gb: float = 80.0  # used when gpu == "custom"
    custom_tflops: float = 100.0  # dense 16-bit TFLOP/s, used when gpu == "custom"
    peak_tflops_override: float = 0.0  # 0: take the card's peak for the precision

    def __post_init__(self) -> None:
        if not isinstance(self.gpu, str) or not self.gpu.strip():
            raise PlanError("hardware.gpu", self.gpu, "a GPU id from the catalogue or 'custom'")
        check_text("hardware.gpu", self.gpu)
        _check_float("hardware.utilisation", self.utilisation, 0.0, 1.0, low_open=True)
        _check_float("hardware.headroom", self.headroom, 0.0, 0.9)
        _check_float("hardware.price_per_gpu_hour", self.price_per_gpu_hour, 0.0, 1e6)
        _check_float("hardware.custom_memory_gb", self.custom_memory_gb, 0.0, 1e6, low_open=True)
        _check_float("hardware.custom_tflops", self.custom_tflops, 0.0, 1e7, low_open=True)
        _check_float("hardware.peak_tflops_override", self.peak_tflops_override, 0.0, 1e7)


# Defaults of the frameworks, as the knobs are named there.
DDP_BUCKET_MB: Final = 25.0  # torch.nn.parallel.DistributedDataParallel(bucket_cap_mb=None) -> 25 MiB
# DeepSpeed ZeRO defaults (deepspeed/runtime/zero/config.py, v0.16): reduce_bucket_size and
# allgather_bucket_size 5e8 elements, stage3_prefetch_bucket_size 5e7, stage3_max_live_parameters 1e9.
ZERO_BUCKET_ELEMENTS: Final = 500_000_000
ZERO3_PREFETCH_ELEMENTS: Final = 50_000_000
ZERO3_MAX_LIVE_ELEMENTS: Final = 1_000_000_000
MAX_DEGREE: Final = 4096
MAX_BUCKET_ELEMENTS: Final = 10**13  # DeepSpeed bucket / prefetch / live sizes, in elements
# GPUs in one server node: DGX/HGX A100, H100, H200 and B200 boards carry 8 (NVIDIA DGX
# user guides); what "N GPUs" means when a count is turned into nodes.
GPUS_PER_NODE: Final = 8


@dataclass(frozen=True)
class Parallelism:
    """How many GPUs, how the work is split across them, and what moves to the host.

    The GPU count is ``nodes × gpus_per_node``; it factors into tensor × pipeline ×
    context × data parallel degrees (the data-parallel degree is what is left). Whether a
    layout fits the model (heads divisible by the tensor-parallel degree, ...) is checked
    by :class:`Plan`, which knows the model.
    """

    nodes: int = 1
    gpus_per_node: int = 1
    strategy: Strategy = Strategy.DDP
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    context_parallel: int = 1
    sequence_parallel: bool = True  # Megatron sequence parallelism alongside tensor parallel
    schedule: PipelineSchedule = PipelineSchedule.ONE_F_ONE_B
    virtual_stages: int = 1  # model chunks per pipeline rank (interleaved schedule)
    offload: Offload = Offload.NONE
    reshard_after_forward: bool = True  # FSDP2 fully_shard's default
    fsdp_param_dtype: MpDtype = MpDtype.STORED  # MixedPrecisionPolicy.param_dtype
    fsdp_reduce_dtype: MpDtype = MpDtype.STORED  # MixedPrecisionPolicy.reduce_dtype
    ddp_bucket_mb: float = DDP_BUCKET_MB
    # DistributedDataParallel(gradient_as_bucket_view=...): False (torch's default) keeps
    # param.grad apart from the buckets, a second copy of the gradients; True makes the
    # gradients views into them.
    ddp_bucket_view: bool = False
    zero_bucket_elements: int = ZERO_BUCKET_ELEMENTS
    zero3_prefetch_elements: int = ZERO3_PREFETCH_ELEMENTS
    zero3_max_live_elements: int = ZERO3_MAX_LIVE_ELEMENTS
    intra_link: str = "nvlink4"  # id in resources/links.json: GPU to GPU within a node
    inter_link: str = "ib-ndr400"  # id in resources/links.json: between nodes
    host_ram_gb: float = 2048.0  # RAM per node (a DGX H100 has 2 TB)

    def __post_init__(self) -> None:
        _check_int("parallel.nodes", self.nodes, 1, MAX_GPUS)
        _check_int("parallel.gpus_per_node", self.gpus_per_node, 1, MAX_DEGREE)
        _check_int("parallel.world_size", self.nodes * self.gpus_per_node, 1, MAX_GPUS)
        for name, enum in (
            ("strategy", Strategy),
            ("schedule", PipelineSchedule),
            ("offload", Offload),
            ("fsdp_param_dtype", MpDtype),
            ("fsdp_reduce_dtype", MpDtype),
        ):
            _check_enum(f"parallel.{name}", getattr(self, name), enum)
        for name in ("tensor_parallel", "pipeline_parallel", "context_parallel", "virtual_stages"):
            _check_int(f"parallel.{name}", getattr(self, name), 1, MAX_DEGREE)
        for name in ("sequence_parallel", "reshard_after_forward", "ddp_bucket_view"):
            if not isinstance(getattr(self, name), bool):
                raise PlanError(f"parallel.{name}", getattr(self, name), "true or false")
        _check_float("parallel.ddp_bucket_mb", self.ddp_bucket_mb, 0.0, 1e6, low_open=True)
        for name in ("zero_bucket_elements", "zero3_prefetch_elements", "zero3_max_live_elements"):
            _check_int(f"parallel.{name}", getattr(self, name), 1, MAX_BUCKET_ELEMENTS)
        for name in ("intra_link", "inter_link"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise PlanError(f"parallel.{name}", value, "a link id from the catalogue")
            check_text(f"parallel.{name}", value)
        _check_float("parallel.host_ram_gb", self.host_ram_gb, 0.0, 1e9, low_open=True)
        model_split = self.tensor_parallel * self.pipeline_parallel * self.context_parallel
        if self.world_size % model_split:
            raise PlanError(
                "parallel.tensor_parallel",
                self.tensor_parallel,
                f"degrees whose product divides {self.world_size} GPUs",
                f"TP {self.tensor_parallel} × PP {self.pipeline_parallel} × CP {self.context_parallel} = {model_split}",
            )
        if self.virtual_stages > 1 and self.schedule is not PipelineSchedule.INTERLEAVED:
            raise PlanError(
                "parallel.virtual_stages", self.virtual_stages, "1", "only the interleaved schedule uses them"
            )

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def data_parallel(self) -> int:
        """Ranks holding the same part of the model and different data."""
        return self.world_size // (self.tensor_parallel * self.pipeline_parallel * self.context_parallel)

    @property
    def split(self) -> str:
        """How the GPUs factor, as the window and the command line print it."""
        return (
            f"TP {self.tensor_parallel} × PP {self.pipeline_parallel} × CP {self.context_parallel} "
            f"× DP {self.data_parallel}"
        )


@dataclass(frozen=True)
class Inference:
    """How the model is served. Engine defaults (0 = "the engine's default") follow the
    engine's own: see :mod:`core.serving.engines`."""

    weight_dtype: WeightFormat = WeightFormat.BF16
    kv_dtype: KvDtype = KvDtype.BF16
    concurrent: int = 1  # requests served at once (batch)
    context: int = 4096  # tokens per request, prompt + generated (vLLM: max_model_len)
    engine: Engine = Engine.HF
    new_tokens: int = 256  # generated tokens per request, part of ``context``
    tensor_parallel: int = 1  # GPUs one copy of the model is split across (per layer)
    pipeline_parallel: int = 1  # stages the layers are split into
    replicas: int = 1  # independent copies (data parallel serving)
    gpu_memory_utilization: float = 0.9  # vLLM's default fraction of each GPU it may use
    max_num_seqs: int = 0  # vLLM scheduler limit; 0: vLLM's default for the card
    max_num_batched_tokens: int = 0  # vLLM tokens per step (chunked prefill); 0: default
    mem_fraction_static: float = 0.0  # SGLang: weights + KV pool share of the GPU; 0: its default

    def __post_init__(self) -> None:
        for name, enum in (("weight_dtype", WeightFormat), ("kv_dtype", KvDtype), ("engine", Engine)):
            value = getattr(self, name)
            if not isinstance(value, enum):
                try:  # plain strings are accepted and stored as the enum
                    object.__setattr__(self, name, enum(value))
                except ValueError:
                    raise PlanError(f"inference.{name}", value, "one of " + ", ".join(e.value for e in enum)) from None
        _check_int("inference.concurrent", self.concurrent, 1, MAX_BATCH)
        _check_int("inference.context", self.context, 1, MAX_SEQ)
        _check_int("inference.new_tokens", self.new_tokens, 0, MAX_SEQ)
        _check_int("inference.tensor_parallel", self.tensor_parallel, 1, MAX_PARALLEL)
        _check_int("inference.pipeline_parallel", self.pipeline_parallel, 1, MAX_PARALLEL)
        _check_int("inference.replicas", self.replicas, 1, MAX_GPUS)
        _check_float("inference.gpu_memory_utilization", self.gpu_memory_utilization, 0.0, 1.0, low_open=True)
        _check_int("inference.max_num_seqs", self.max_num_seqs, 0, MAX_BATCH)
        _check_int("inference.max_num_batched_tokens", self.max_num_batched_tokens, 0, MAX_SEQ)
        _check_float("inference.mem_fraction_static", self.mem_fraction_static, 0.0, 1.0)

    @property
    def prompt_tokens(self) -> int:
        """The prompt: the context less the generated tokens, at least one token."""
        return max(1, self.context - self.new_tokens)

    @property
    def gpus(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel * self.replicas


# The StrEnums are the one list of allowed values; these tuples remain for callers that
# list choices.
WEIGHT_DTYPES: Final = tuple(f.value for f in WeightFormat)
KV_DTYPES: Final = tuple(k.value for k in KvDtype)
MAX_PARALLEL: Final = 1024


def _roles_dict(roles: PrecisionRoles) -> dict[str, Any]:
    return {name: getattr(roles, name) for name in ROLE_FIELDS}


@dataclass(frozen=True)
class LessonSettings:
    """Inputs only the lesson's accounting uses."""

    activations_gb: float = 1.5  # the lesson's activation allowance
    trainable_override: int = 0  # T as the lesson gives it; 0 derives T from the architecture

    def __post_init__(self) -> None:
        _check_float("lesson.activations_gb", self.activations_gb, 0.0, 1e6)
        _check_int("lesson.trainable_override", self.trainable_override, 0, 10**16)


@dataclass(frozen=True)
class Plan:
    model: ModelSpec
    model_id: str = ""  # catalogue id the model came from, "" for custom/imported
    method: Method = Method.FULL
    lora: LoraSettings = field(default_factory=LoraSettings)
    quant: Quant = Quant.NF4  # base storage for QLoRA
    double_quant: bool = True  # QLoRA's quantised absmax constants
    frozen_layers: int = 0  # FROZEN: bottom blocks (and embeddings) without gradients
    precision: Precision = Precision.BF16_MIXED  # the old one-word setting; follows the roles below
    optimizer: Optimizer = Optimizer.ADAMW
    # Precision roles (plan file version 3). A named preset fixes all four; "custom" leaves
    # them free. The defaults are the old default precision, bf16-mixed.
    preset: Preset = Preset.FP32_AUTOCAST_BF16
    weight_dtype: Dtype = Dtype.FP32
    base_dtype: Dtype = Dtype.FP32
    adapter_dtype: Dtype = Dtype.FP32
    autocast: Autocast = Autocast.BF16
    optimizer_impl: OptimizerImpl = OptimizerImpl.FUSED  # HF Trainer's adamw_torch_fused (torch ≥ 2.8)
    checkpointing: bool = False
    checkpoint_policy: CheckpointPolicy = CheckpointPolicy.FULL  # read only with checkpointing on
    checkpoint_every: int = 1  # LAYER: every Nth block checkpointed (torchtitan selective_ac_option)
    attention: Attention = Attention.SDPA
    chunked_loss: bool = False  # cross-entropy computed in chunks (no full logits in float32)
    workload: Workload = field(default_factory=Workload)
    hardware: Hardware = field(default_factory=Hardware)
    parallel: Parallelism = field(default_factory=Parallelism)
    inference: Inference = field(default_factory=Inference)
    accounting: Accounting = Accounting.DETAILED
    lesson: LessonSettings = field(default_factory=LessonSettings)

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelSpec):
            raise PlanError("model", self.model, "a model description")
        if not isinstance(self.model_id, str):
            raise PlanError("model_id", self.model_id, "a catalogue id or empty")
        check_text("model_id", self.model_id, allow_empty=True)
        _check_enum("method.kind", self.method, Method)
        _check_enum("method.quant", self.quant, Quant)
        _check_enum("method.precision", self.precision, Precision)
        _check_enum("method.optimizer", self.optimizer, Optimizer)
        _check_enum("method.preset", self.preset, Preset)
        for name in ROLE_FIELDS:
            _check_enum(f"method.{name}", getattr(self, name), Autocast if name == "autocast" else Dtype)
        _check_enum("method.optimizer_impl", self.optimizer_impl, OptimizerImpl)
        self._reconcile_precision()
        _check_enum("method.attention", self.attention, Attention)
        _check_enum("method.checkpoint_policy", self.checkpoint_policy, CheckpointPolicy)
        _check_int("method.checkpoint_every", self.checkpoint_every, 1, MAX_CHECKPOINT_EVERY)
        _check_enum("accounting", self.accounting, Accounting)
        for name in ("double_quant", "checkpointing", "chunked_loss"):
            if not isinstance(getattr(self, name), bool):
                raise PlanError(f"method.{name}", getattr(self, name), "true or false")
        for name, kind in (
            ("lora", LoraSettings),
            ("workload", Workload),
            ("hardware", Hardware),
            ("parallel", Parallelism),
            ("inference", Inference),
            ("lesson", LessonSettings),
        ):
            if not isinstance(getattr(self, name), kind):
                raise PlanError(name, getattr(self, name), f"a {kind.__name__} value")
        _check_int("method.frozen_layers", self.frozen_layers, 0, self.model.num_layers)
        self._check_layout()
        if self.method is Method.FROZEN and self.frozen_layers == 0:
            raise PlanError(
                "method.frozen_layers",
                0,
                f"1 to {self.model.num_layers}",
                "the frozen-layers method freezes at least one",
            )

    @property
    def checkpointing_text(self) -> str:
        """The checkpointing as one short phrase: off, on (full), or the selective policy."""
        if not self.checkpointing:
            return "off"
        if self.checkpoint_policy is CheckpointPolicy.OP:
            return "selective per op"
        if self.checkpoint_policy is CheckpointPolicy.LAYER:
            return f"every {self.checkpoint_every} block(s)"
        return "on"

    def _check_layout(self) -> None:
        """Refuse a split the frameworks cannot run on this model (Megatron-LM's and
        torchtitan's own checks: heads and KV groups divide by the tensor-parallel degree,
        at least one layer per pipeline chunk, the sequence in 2 × CP load-balanced chunks)."""
        par, model = self.parallel, self.model
        tp = par.tensor_parallel
        if tp > 1:
            for what, heads in (("attention heads", model.num_heads), ("KV heads", model.num_kv_heads)):
                if heads % tp:
                    raise PlanError("parallel.tensor_parallel", tp, f"a divisor of the model's {heads} {what}")
        chunks = par.pipeline_parallel * par.virtual_stages
        if chunks > model.num_layers:
            raise PlanError(
                "parallel.pipeline_parallel",
                par.pipeline_parallel,
                f"at most {model.num_layers // par.virtual_stages} stages",
                f"the model has {model.num_layers} layers for {chunks} pipeline chunks",
            )
        self._check_serving_layout()
        cp = par.context_parallel
        if cp > 1 and self.workload.seq_len % (2 * cp):
            raise PlanError(
                "parallel.context_parallel",
                cp,
                f"a degree where 2 × CP divides the sequence of {self.workload.seq_len} tokens",
                "context parallel splits it into 2 × CP load-balanced chunks",
            )

    def _check_serving_layout(self) -> None:
        """Refuse a serving split vLLM refuses (vllm-project/vllm, stored snapshot commit
        0052a5b8 of ``vllm/config/model.py``, ``ModelConfig.verify_with_parallel_config``:
        "Total number of attention heads (...) must be divisible by tensor parallel size";
        ``vllm/model_executor/layers/linear.py QKVParallelLinear.__init__``: with TP ≥ the KV
        heads each rank holds one, ``divide(tp_size, total_num_kv_heads)`` (TP a multiple of
        them, the heads replicated), else ``divide(total_num_kv_heads, tp_size)``). A pipeline
        stage needs at least one layer to hold, so PP is at most the layer count (the same
        bound the training check sets; vLLM's own layer partitioning was not read for it)."""
        inf, model = self.inference, self.model
        tp = inf.tensor_parallel
        if tp > 1:
            kv = model.num_kv_heads
            if model.num_heads % tp:
                raise PlanError(
                    "inference.tensor_parallel", tp, f"a divisor of the model's {model.num_heads} attention heads"
                )
            if (kv % tp) if tp < kv else (tp % kv):
                raise PlanError(
                    "inference.tensor_parallel",
                    tp,
                    f"a divisor or a multiple of the model's {kv} KV heads",
                    "vLLM splits the KV heads evenly, or replicates them when TP exceeds them",
                )
        if inf.pipeline_parallel > model.num_layers:
            raise PlanError(
                "inference.pipeline_parallel",
                inf.pipeline_parallel,
                f"at most {model.num_layers} stages",
                f"the model has {model.num_layers} layers",
            )

    def _reconcile_precision(self) -> None:
        """Keep preset, roles and the old ``precision`` one description.

        Built with only some of them (``Plan(precision=...)``, ``Plan(preset=...)``,
        ``Plan(preset=CUSTOM, base_dtype=...)``) the others follow; given all three and
        disagreeing, the plan is refused, naming the field. :meth:`with_changes` decides
        which one an edit meant before this check runs.
        """
        default = PRESET_ROLES[Preset.FP32_AUTOCAST_BF16]
        roles = self.roles
        preset = self.preset
        if preset is not Preset.CUSTOM and roles != PRESET_ROLES[preset]:
            if roles == default:  # roles left at their defaults: the preset sets them
                roles = PRESET_ROLES[preset]
            elif preset is Preset.FP32_AUTOCAST_BF16:  # preset left at its default: the roles decide
                preset = preset_matching(roles)
            else:
                raise PlanError(
                    "method.preset", preset.value, "custom", f"the roles differ from the {preset.value} preset's"
                )
        if self.precision is not precision_of(roles):
            if self.precision is Precision.BF16_MIXED:  # the default: it follows the roles
                pass
            elif preset is Preset.FP32_AUTOCAST_BF16 and roles == default:  # only precision given
                preset, roles = PRECISION_ROLES[self.precision]
            else:
                raise PlanError(
                    "method.precision",
                    self.precision.value,
                    precision_of(roles).value,
                    "it must describe the precision roles",
                )
        object.__setattr__(self, "preset", preset)
        for name in ROLE_FIELDS:
            object.__setattr__(self, name, getattr(roles, name))
        object.__setattr__(self, "precision", precision_of(roles))

    # ---- derived inputs (no arithmetic on memory here: that is the estimator's) ------
    @property
    def roles(self) -> PrecisionRoles:
        return PrecisionRoles(self.weight_dtype, self.base_dtype, self.adapter_dtype, self.autocast)

    @property
    def adapter_based(self) -> bool:
        return self.method in (Method.LORA, Method.QLORA, Method.DORA)

    @property
    def grad_scaler(self) -> bool:
        """fp16 autocast runs with a GradScaler (Trainer(fp16=True), torch.amp recipes)."""
        return self.autocast is Autocast.FP16

    @property
    def effective_batch(self) -> int:
        """Sequences per optimizer step: micro-batch × accumulation × data-parallel ranks."""
        return self.workload.micro_batch * self.workload.grad_accum * self.parallel.data_parallel

    @property
    def world_size(self) -> int:
        """GPUs the run uses: nodes × GPUs per node."""
        return self.parallel.world_size

    def with_changes(self, **changes: Any) -> Plan:
        """A copy with top-level fields replaced; nested ones via ``workload=...`` etc.

        Precision edits say what they mean: a new ``precision`` alone picks its preset, a
        named ``preset`` alone brings its roles, a role alone makes the plan custom (unless
        the roles still are the preset's). The old ``precision`` always follows the roles.
        """
        role_edits = {k: changes[k] for k in ROLE_FIELDS if k in changes}
        if "precision" in changes and "preset" not in changes and not role_edits:
            preset, roles = PRECISION_ROLES[Precision(changes["precision"])]
            changes.update(preset=preset, **_roles_dict(roles))
        elif "preset" in changes and Preset(changes["preset"]) is not Preset.CUSTOM and not role_edits:
            changes.update(_roles_dict(PRESET_ROLES[Preset(changes["preset"])]))
        elif role_edits and "preset" not in changes:
            roles = replace(self.roles, **role_edits)
            if self.preset is not Preset.CUSTOM and roles != PRESET_ROLES[self.preset]:
                changes["preset"] = Preset.CUSTOM
        if "preset" in changes or role_edits:
            merged = replace(self.roles, **{k: changes.get(k, getattr(self, k)) for k in ROLE_FIELDS})
            changes["precision"] = precision_of(merged)
        return replace(self, **changes)

    def checkpointed_blocks(self, layers: int) -> int:
        """Blocks (of ``layers``) whose activations are recomputed: all under full or per-op
        checkpointing; under layer SAC those whose 1-based index is a multiple of N
        (torchtitan ``_apply_layer_sac``: ``_layer_sac_count % ac_freq == 0``)."""
        if not self.checkpointing:
            return 0
        if self.checkpoint_policy is CheckpointPolicy.LAYER:
            return layers // self.checkpoint_every
        return layers

    def with_workload(self, **changes: Any) -> Plan:
        return replace(self, workload=replace(self.workload, **changes))

    def with_hardware(self, **changes: Any) -> Plan:
        return replace(self, hardware=replace(self.hardware, **changes))

    def with_parallel(self, **changes: Any) -> Plan:
        return replace(self, parallel=replace(self.parallel, **changes))

    def with_inference(self, **changes: Any) -> Plan:
        return replace(self, inference=replace(self.inference, **changes))

    def with_lora(self, **changes: Any) -> Plan:
        return replace(self, lora=replace(self.lora, **changes))

    def with_lesson(self, **changes: Any) -> Plan:
        return replace(self, lesson=replace(self.lesson, **changes))

    # ---- the same plan on other GPUs, model or method (one home: forms, CLI, remedies) ----
    def on_gpus(self, count: int, strategy: Strategy | None = None, *, per_node: int = GPUS_PER_NODE) -> Plan:
        """This plan on ``count`` GPUs: one node up to ``per_node`` GPUs, then full nodes
        (a count that does not fill whole nodes stays on one). Tensor, pipeline and
        context degrees are kept when they still divide the count, else they drop to 1."""
        nodes, gpus = (count // per_node, per_node) if count > per_node and count % per_node == 0 else (1, count)
        par = self.parallel
        changes: dict[str, Any] = {"nodes": nodes, "gpus_per_node": gpus}
        if strategy is not None:
            changes["strategy"] = strategy
        if count % (par.tensor_parallel * par.pipeline_parallel * par.context_parallel):
            changes.update(tensor_parallel=1, pipeline_parallel=1, context_parallel=1, virtual_stages=1)
        return self.with_parallel(**changes)

    def on_model(self, model: ModelSpec, model_id: str = "") -> Plan:
        """This plan on another model; frozen layers are kept within the new model's depth, and
        a tensor or pipeline split the new model cannot take (heads that TP does not divide,
        fewer layers than pipeline chunks), for training or serving, drops to 1 on the same GPUs,
        as :meth:`on_gpus` does."""
        frozen = min(self.frozen_layers, model.num_layers)
        plan = self
        for _ in range(2):  # the training split, then the serving split
            try:
                return replace(plan, model=model, model_id=model_id, frozen_layers=frozen)
            except PlanError as error:
                if error.field in ("parallel.tensor_parallel", "parallel.pipeline_parallel"):
                    flat = replace(plan.parallel, tensor_parallel=1, pipeline_parallel=1, virtual_stages=1)
                    plan = replace(plan, parallel=flat) if plan.parallel != flat else plan
                elif error.field in ("inference.tensor_parallel", "inference.pipeline_parallel"):
                    served = replace(plan.inference, tensor_parallel=1, pipeline_parallel=1)
                    plan = replace(plan, inference=served) if plan.inference != served else plan
                else:
                    raise
        return replace(plan, model=model, model_id=model_id, frozen_layers=frozen)

    def with_method(self, method: Method, **changes: Any) -> Plan:
        """This plan trained another way; ``changes`` are further top-level fields (lora, quant...).

        The frozen-layers method needs at least one frozen block: switching to it from a plan
        with none starts from half the model, a common choice, rather than refuse the switch.
        Leaving it keeps the count, so switching back restores it.
        """
        model = changes.get("model", self.model)
        if method is Method.FROZEN and changes.get("frozen_layers", self.frozen_layers) == 0:
            changes["frozen_layers"] = max(1, model.num_layers // 2)
        return replace(self, method=method, **changes)

"""What to change when a plan does not fit: remedy kinds, each a change of the plan that is
judged by estimating the changed plan, and the cheapest combination of them that fits.

No remedy carries arithmetic of its own: its verdict, total and cost come from
:func:`core.estimate.estimate` of its plan and :func:`core.verdict.judge`. Training kinds are
here; the serving kinds live in :mod:`core.advice.serving_remedies`. One concern past 400 lines:
the kinds, their small transforms and the search over combinations of them read together.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from core.advice.fit import QUANTISED_BASE_SHARDS_ONLY, fewest_gpus, layout_name, one_per_machine
from core.advice.limits import max_micro_batch, max_sequence, sequence_step
from core.advice.request import Pin
from core.advice.symptoms import Failure
from core.breakdown import BucketKey
from core.catalogue import GpuSpec, load_gpus, load_models
from core.dtypes import Dtype, Quant
from core.errors import PlanError
from core.estimate import Estimate, estimate, gpu_for
from core.format import hours as format_hours
from core.inputs import CpRotate, torch_ring_rotate
from core.parallel.layout import fsdp_no_sync
from core.plan import (
    GPUS_PER_NODE,
    METHOD_LABELS,
    Attention,
    CheckpointPolicy,
    GradSync,
    LoraSettings,
    Method,
    Offload,
    Optimizer,
    Plan,
    Strategy,
    TransformersLoss,
)
from core.roles import deepspeed_engine_dtype
from core.runtime import pytorch_limit_bytes, runs_mps
from core.units import GB
from core.verdict import Judgement, Mode, Verdict


class RemedyKind(StrEnum):
    # training
    FUSED_ATTENTION = "fused-attention"
    CHUNKED_LOSS = "chunked-loss"
    OPTIMIZER_8BIT = "optimizer-8bit"
    MICRO_BATCH = "micro-batch"
    CHECKPOINTING = "checkpointing"
    LORA = "lora"
    QLORA_NF4 = "qlora-nf4"
    QLORA_INT8 = "qlora-int8"
    BASE_16BIT = "base-16bit"  # the frozen base loaded in bf16 (fp16 on a card without bf16) where it is float32
    # transformers 4.49-4.57, where a bitsandbytes base quantises the routed experts that 5.x leaves in 16 bits
    EXPERTS_QUANTISED = "experts-quantised"
    PAGED_OPTIMIZER = "paged-optimizer"
    MORE_GPUS = "more-gpus"  # the fewest of this card that fit (core.advice.fit.fewest_gpus)
    FSDP = "fsdp"  # the same GPUs sharding everything instead of holding replicas
    SYNC_EACH_BATCH = "sync-each-batch"  # FSDP reduces every micro-batch instead of holding unsharded gradients
    CP_ALLTOALL = "cp-alltoall"  # PyTorch's ring passes K/V one chunk at a time instead of gathering every rank's
    OFFLOAD_OPTIMIZER = "offload-optimizer"
    OFFLOAD_PARAMS = "offload-params"  # FSDP's CPU offload: parameters, gradients and optimizer state on the host
    TENSOR_PARALLEL = "tensor-parallel"
    SHORTER_SEQUENCE = "shorter-sequence"
    SMALLER_MODEL = "smaller-model"
    BIGGER_CARD = "bigger-card"
    # serving (core.advice.serving_remedies)
    KV_FP8 = "kv-fp8"
    KV_INT4 = "kv-int4"  # vLLM's int4_per_token_head (0.25 on), where the model's attention keeps it
    FEWER_REQUESTS = "fewer-requests"
    SHORTER_CONTEXT = "shorter-context"
    WEIGHTS_NF4 = "weights-nf4"
    MORE_TENSOR_PARALLEL = "more-tensor-parallel"
    SMALLER_BATCHED_TOKENS = "smaller-batched-tokens"
    STARTING_UTILIZATION = "starting-utilization"  # vLLM: the gpu_memory_utilization its start-up check passes
    # vLLM's gpu_memory_utilization / SGLang's mem_fraction_static raised where the KV pool is short or empty
    HIGHER_SHARE = "higher-share"
    # vLLM's / SGLang's variable that starts a context past the model's limit (core.context_limit)
    LONG_CONTEXT = "long-context"
    # llama.cpp / Ollama (core.advice.serving_remedies)
    KV_Q8_0 = "kv-q8_0"  # -ctk q8_0 -ctv q8_0
    SMALLER_GGUF = "smaller-gguf"  # a smaller file type of the same model
    GPU_LAYERS = "gpu-layers"  # -ngl N: the rest of the layers run on the CPU
    CPU_MOE = "cpu-moe"  # --n-cpu-moe N: the first N layers' routed experts stay in host RAM
    LAYER_SPLIT = "layer-split"  # the layers over more GPUs (-sm layer)


Transform = Callable[[Plan], "tuple[Plan, str] | None"]


@dataclass(frozen=True)
class RemedySpec:
    """A kind of change: how to make it, what it costs, what it fixes, what it changes."""

    kind: RemedyKind
    transform: Transform  # the changed plan and its title, or None where it does not apply
    cost_rank: int  # 0 = free; higher = costs more time, money or quality
    addresses: frozenset[Failure]
    cost_note: str
    combinable: bool = True
    changes: frozenset[Pin] = frozenset()
    judged_on: Mode = Mode.TRAINING
    # Kinds that are alternatives to each other (two optimizers, two bases) never combine.
    excludes: frozenset[RemedyKind] = frozenset()
    # A further cost note read from the changed plan (the price of the card it moves to).
    plan_note: Callable[[Plan], str] | None = None
    # A changed plan that fits by less than the estimate's uncertainty (Judgement.fits_with_margin) is listed
    # as not fitting: more GPUs, whose answer is a count (branch h59qtp).
    needs_margin: bool = False
    # A cost rank read from the plan and the changed plan's estimate, where it depends on them (llama.cpp's
    # experts in RAM rank before fewer GPU layers when the app's own decode estimate says they are faster).
    rank_of: Callable[[Plan, Estimate], int] | None = None

    def apply(self, plan: Plan) -> tuple[Plan, str] | None:
        """The changed plan and its title; None where the change does not apply, or where the
        plan refuses it (a split the model's heads or the GPU count cannot take)."""
        try:
            return self.transform(plan)
        except PlanError:
            return None


@dataclass(frozen=True)
class Remedy:
    kind: RemedyKind
    title: str
    plan: Plan
    estimate: Estimate
    judgement: Judgement  # on the training step, or on serving for serving remedies
    cost_rank: int
    cost: str  # what it costs, in words, with the compute model's figure where one exists
    addresses: frozenset[Failure]
    # Its kind needs margin (RemedySpec.needs_margin) and the verdict's fit is by less than the uncertainty.
    short_of_margin: bool = False
    # Serving with it, the engine would still refuse to start (InferenceEstimate.would_not_start): listed after every
    # change with which it starts (:func:`remedies_for`, h94start), whatever its cost.
    refused: bool = False

    @property
    def key(self) -> str:
        return self.kind.value

    @property
    def fits(self) -> bool:
        return self.judgement.fits and not self.short_of_margin

    @property
    def fits_narrowly(self) -> bool:
        """Its verdict fits, the estimate's range reaching into the headroom (core.verdict): listed after the
        changes that fit with margin, badged "Fits narrowly", never a green "Fits"."""
        return self.judgement.fits_narrowly

    @property
    def label(self) -> str:
        """Its verdict in core.verdict's words (Judgement.label)."""
        return self.judgement.label

    @property
    def verdict(self) -> Verdict:
        return self.judgement.verdict

    @property
    def total_bytes(self) -> float:
        """The figure the verdict judges: the serving total for serving remedies."""
        return self.judgement.total_bytes

    @property
    def serving(self) -> bool:
        return Failure.SERVING in self.addresses


@dataclass(frozen=True)
class Combination:
    remedies: tuple[Remedy, ...]
    plan: Plan
    estimate: Estimate
    judgement: Judgement
    cost_rank: int  # the parts' ranks added
    cost: str

    @property
    def title(self) -> str:
        return " + ".join(r.title for r in self.remedies)

    @property
    def fits(self) -> bool:
        return self.judgement.fits

    @property
    def fits_narrowly(self) -> bool:
        return self.judgement.fits_narrowly

    @property
    def label(self) -> str:
        """Its verdict in core.verdict's words (Judgement.label)."""
        return self.judgement.label

    @property
    def verdict(self) -> Verdict:
        return self.judgement.verdict

    @property
    def total_bytes(self) -> float:
        return self.judgement.total_bytes


# ---- training transforms ----------------------------------------------------------
DEFAULT_LORA: Final = LoraSettings(rank=16, alpha=32, targets=("all-linear",))


def _lora(plan: Plan) -> tuple[Plan, str] | None:
    if plan.method in (Method.LORA, Method.QLORA):
        return None
    return plan.with_method(Method.LORA, lora=DEFAULT_LORA), "LoRA (rank 16, all linear layers)"


# The methods a quantised-base remedy keeps as LoRA without saying so: the base alone changes (or, for full
# fine-tuning and frozen layers, the title's "QLoRA" / "+ LoRA" names the adapter that replaces them).
_LORA_ALREADY: Final = (Method.FULL, Method.FROZEN, Method.LORA, Method.QLORA)
# LitGPT's own flag for each base (core.inputs lora.adapter_quantised, Lightning-AI/litgpt 0f021f3).
_LITGPT_QUANTIZE: Final = {Quant.NF4: "bnb.nf4", Quant.INT8: "bnb.int8-training"}


def _qlora(quant: Quant) -> Transform:
    def apply(plan: Plan) -> tuple[Plan, str] | None:
        if plan.quantised_base and plan.quant is quant:
            return None
        base = "4-bit NF4 base" if quant is Quant.NF4 else "8-bit base"
        if plan.litgpt_adapter:  # LitGPT's adapters train on a bitsandbytes base themselves
            quantised = plan.with_input("lora.adapter_quantised", True).with_input("quant", quant)
            return quantised, f"{base} (LitGPT --quantize {_LITGPT_QUANTIZE[quant]})"
        lora = plan.lora if plan.adapter_based else DEFAULT_LORA
        label = f"{base} (QLoRA)" if quant is Quant.NF4 else f"{base} (LLM.int8 + LoRA)"
        if plan.method not in _LORA_ALREADY:
            label += f", LoRA in place of {METHOD_LABELS[plan.method]}"
        return plan.with_method(Method.QLORA, quant=quant, lora=lora), label

    return apply


def _base_16bit(plan: Plan) -> tuple[Plan, str] | None:
    """The frozen base of an adapter or frozen-layers plan loaded in 16 bits where the plan keeps it in
    float32 (the fp32-autocast-bf16, fp16-amp and fp32 presets; the command line's default): what
    ``from_pretrained(torch_dtype=torch.bfloat16)`` and Trainer(bf16=True) run (core.plan PRESET_ROLES
    trainer-bf16); fp16 on a card the catalogue lists without bf16 (resources/gpus.json
    unsupported_dtypes: Volta, Turing). The adapters and the trained layers keep their dtype. A base in
    16 bits or quantised, and full fine-tuning (no frozen base), are left alone."""
    if plan.method is Method.FULL or plan.quantised_base or plan.base_dtype is not Dtype.FP32:
        return None
    gpu = {g.id: g for g in load_gpus()}.get(plan.hardware.gpu)
    half = Dtype.FP16 if gpu is not None and "bf16" in gpu.unsupported_dtypes else Dtype.BF16
    try:
        new = plan.with_input("base_dtype", half)
    except PlanError:  # pragma: no cover - a role the plan refuses beside its others
        return None
    # The from_pretrained argument alone: the call written out wrapped as "( from_ pretrained(" in a narrow dock.
    return new, f"Frozen base loaded in {half.value} (torch_dtype=torch.{_TORCH_NAMES[half]})"


_TORCH_NAMES: Final = {Dtype.BF16: "bfloat16", Dtype.FP16: "float16"}


def _experts_quantised(plan: Plan) -> tuple[Plan, str] | None:
    """A bitsandbytes base whose routed experts transformers 5 holds as 3-D parameters in 16 bits
    (Plan.bnb_16bit_experts) trained under 4.49-4.57 instead, where the family's experts are nn.Linear modules that
    bitsandbytes quantises (core.model.BNB_LINEAR_EXPERTS_4X). gpt-oss, Llama 4 and Granite's experts are 3-D in
    4.x too: nothing to offer."""
    if not (plan.bnb_16bit_experts and plan.release_moves_bnb_experts):
        return None
    new = plan.with_input("training_transformers", TransformersLoss.V4_49_TO_4_57)
    return new, f"transformers 4.49-4.57: its {plan.quant.value} base quantises the routed experts too"


# bitsandbytes' Lion family (core.inputs.Optimizer: HF lion_32bit, lion_8bit, paged_lion_32bit, paged_lion_8bit):
# its 8-bit and paged forms are Lion's own, so a Lion plan is offered those, never AdamW's (h58left: a plan on
# Lion was offered "Paged 8-bit AdamW", another optimizer with twice Lion's state).
_LION: Final = frozenset({Optimizer.LION, Optimizer.LION_8BIT, Optimizer.PAGED_LION, Optimizer.PAGED_LION_8BIT})
_PAGED_8BIT: Final = frozenset({Optimizer.PAGED_ADAMW_8BIT, Optimizer.PAGED_LION_8BIT})
_OPTIMIZER_FORMS: Final = {  # the remedy's target: (the AdamW family's, Lion's), each with its name
    "8bit": ((Optimizer.ADAMW_8BIT, "8-bit AdamW"), (Optimizer.LION_8BIT, "8-bit Lion")),
    "paged": ((Optimizer.PAGED_ADAMW_8BIT, "Paged 8-bit AdamW"), (Optimizer.PAGED_LION_8BIT, "Paged 8-bit Lion")),
}


def _optimizer(form: str) -> Transform:
    """The plan's optimizer in 8 bits, or paged in 8 bits: Lion's own form for a Lion plan, AdamW's else."""
    adamw, lion = _OPTIMIZER_FORMS[form]

    def apply(plan: Plan) -> tuple[Plan, str] | None:
        target, label = lion if plan.optimizer in _LION else adamw
        if plan.optimizer in (target, Optimizer.SGD) or plan.optimizer in _PAGED_8BIT:
            return None
        return replace(plan, optimizer=target), label

    return apply


def _checkpointing(plan: Plan) -> tuple[Plan, str] | None:
    """Full checkpointing: turned on, or in place of a selective policy (which keeps more)."""
    if plan.checkpointing and plan.checkpoint_policy in (CheckpointPolicy.FULL, CheckpointPolicy.UNSLOTH):
        return None  # Unsloth's offloaded checkpointing keeps less than full
    label = "Full gradient checkpointing (every block)" if plan.checkpointing else "Gradient checkpointing"
    return replace(plan, checkpointing=True, checkpoint_policy=CheckpointPolicy.FULL), label


def _fused_attention(plan: Plan) -> tuple[Plan, str] | None:
    if plan.attention is not Attention.EAGER:
        return None
    return replace(plan, attention=Attention.SDPA), "Fused attention (SDPA / FlashAttention)"


def _chunked_loss(plan: Plan) -> tuple[Plan, str] | None:
    return None if plan.chunked_loss else (replace(plan, chunked_loss=True), "Loss computed in chunks")


# Sequence lengths offered as remedies are multiples of 64 (what tokenizers pad to with
# pad_to_multiple_of, and tensor cores prefer); below 128 tokens the exact longest is offered.
SEQUENCE_STEP: Final = 64
# A change that still does not fit is listed only when it saves at least this much: 1 % of what
# is judged, and 0.25 GB (savings of ~0.1 GB cluttered the list).
MIN_SAVING_FRACTION: Final = 0.01
MIN_SAVING_BYTES: Final = 0.25e9


def _largest(plan: Plan, axis: str, high: int) -> int:
    """The largest value of ``axis`` up to ``high`` that fits with margin, else the largest that fits narrowly
    (core.verdict.fit_rank's order, as every search; the row is then badged "Fits narrowly"); 0: none fits.

    A value with margin under half the one that fits at all is not offered: where weights fill the card the
    range alone can push it down to a 40-token sequence while 384 fits narrowly; the narrow fit, badged, is
    the useful advice there (the halving bound :func:`_smaller_micro_batch` already keeps)."""
    solve = max_micro_batch if axis == "micro_batch" else max_sequence
    at_all = solve(plan, high)
    margin = solve(plan, at_all, margin=True)
    return margin if 2 * margin >= at_all else at_all


def _smaller_micro_batch(plan: Plan) -> tuple[Plan, str] | None:
    wl = plan.workload
    if wl.micro_batch == 1:
        return None
    effective = wl.micro_batch * wl.grad_accum
    best = _largest(plan.with_workload(grad_accum=1), "micro_batch", wl.micro_batch - 1) or 1
    # A micro-batch that divides the effective batch keeps it exactly (16 × 16 = 256 becomes
    # 4 × 64, not 5 × 52 = 260), unless that would more than halve what fits.
    divisor = max(b for b in range(1, best + 1) if effective % b == 0)
    if 2 * divisor >= best:
        accum = effective // divisor
        new = plan.with_workload(micro_batch=divisor, grad_accum=accum)
        return new, f"Micro-batch {divisor} × {accum} accumulation steps (same effective batch)"
    accum = -(-effective // best)
    new = plan.with_workload(micro_batch=best, grad_accum=accum)
    return new, f"Micro-batch {best} × {accum} accumulation steps (effective batch {best * accum:,}, was {effective:,})"


def _shorter_sequence(plan: Plan) -> tuple[Plan, str] | None:
    seq = plan.workload.seq_len
    best = _largest(plan, "seq_len", seq - 1) if seq > 1 else 0
    if best < 1:
        return None
    # A length people pad to (745 reads as 704) that context parallel can still split.
    step = math.lcm(SEQUENCE_STEP, sequence_step(plan))
    if best >= 2 * step:
        best -= best % step
    return plan.with_workload(seq_len=best), f"Sequence length {best:,} (was {seq:,})"


def _more_gpus(plan: Plan) -> tuple[Plan, str] | None:
    """The fewest of this card that fit with the plan's strategy or else FSDP2 alone (more DDP
    replicas never lower the memory per GPU) where that is within one node or no more GPUs than any
    layout needs; else the fewest with tensor and pipeline parallel too, as `vramplan fewest-gpus`
    finds them (sharding only for a bitsandbytes base). Each fits with margin (Judgement.fits_with_margin);
    where none does, the fewest that fit by less, titled so and listed as not fitting (needs_margin);
    None when nothing fits.

    Sharding alone was taken at any count: QLoRA on Llama 3.1 8B on an RTX 3060 12GB, over by its
    activations, was offered 32 GPUs (4 nodes) with FSDP2, fitting by 0.05 GB (sharding leaves every
    rank's activations whole), less than the estimate's range above it (to 12.6 GB); tensor parallel,
    which fitted 2, is no layout for its bitsandbytes base (branch h59qtp). Within a node, sharding alone
    needs no change to the model's code; past it, a second machine is the bigger change."""
    if one_per_machine(plan):  # a laptop's or a Mac's GPU (core.advice.fit, the one home of the rule)
        return None
    answer = fewest_gpus(plan)  # every layout, TP and PP included (sharding only for a bitsandbytes base)
    found = answer.found
    if found is None:  # none fits with margin: the fewest that fit by less, said so (RemedySpec.needs_margin)
        narrow = answer.narrow
        if narrow is None or narrow.count <= plan.world_size:
            return None
        limit = f"{answer.max_gpus:,}"
        return narrow.plan, f"{narrow.count} GPUs with {narrow.layout} (none within {limit} fits with margin)"
    per_node = plan.parallel.gpus_per_node if plan.parallel.nodes > 1 else GPUS_PER_NODE
    sharded = fewest_gpus(plan, max_gpus=max(found.count, per_node), model_parallel=False).found
    fewest = found.count
    found = sharded if sharded is not None else found
    if found.count <= plan.world_size:
        return None
    why = "the fewest of this card that fit"
    if found.count > fewest:  # sharding alone within a node, though TP or PP needs fewer
        why = f"sharding alone; {fewest} fit with tensor or pipeline parallel"
    return found.plan, f"{found.count} GPUs with {layout_name(found.plan)} ({why})"


def _more_gpus_note(plan: Plan) -> str:
    """Why the more-GPUs count falls short, where it does: its fit is within the estimate's uncertainty, and a
    bitsandbytes base was sharded only."""
    notes = []
    est = estimate(plan)
    if est.fits and not est.judgement().fits_with_margin:
        notes.append(f"{plan.world_size} GPUs: {est.judgement().narrow_words()}")
    if plan.quantised_base:
        notes.append(QUANTISED_BASE_SHARDS_ONLY)
    return "; ".join(notes)


def _fsdp(plan: Plan) -> tuple[Plan, str] | None:
    if plan.world_size < 2 or plan.parallel.strategy in (Strategy.FSDP, Strategy.ZERO3):
        return None
    was = layout_name(plan).split(" + ")[0]
    return plan.with_parallel(strategy=Strategy.FSDP), f"FSDP2 instead of {was} on the same {plan.world_size} GPUs"


def _sync_each_batch(plan: Plan) -> tuple[Plan, str] | None:
    """An FSDP plan under no_sync (core.parallel.layout.fsdp_no_sync) holds the whole model's
    trainable gradients unsharded through the accumulation; reducing every micro-batch keeps them
    sharded (accelerate's GradientAccumulationPlugin(sync_each_batch=True), TrainingArguments'
    accelerator_config gradient_accumulation_kwargs)."""
    if not fsdp_no_sync(plan.parallel, plan.workload.grad_accum):
        return None
    new = plan.with_parallel(grad_sync=GradSync.EACH)
    return new, "Reduce the gradients every micro-batch (accelerate sync_each_batch=True)"


def _cp_alltoall(plan: Plan) -> tuple[Plan, str] | None:
    """PyTorch's ring attention under its default all-gather rotation keeps every context-parallel
    rank's K/V in the backward; the all-to-all rotation keeps three chunks (core.parallel.acts
    ring_kv_elements; torchtitan's parallelism.context_parallel_rotate_method = "alltoall")."""
    if torch_ring_rotate(plan) is not CpRotate.ALLGATHER or plan.parallel.context_parallel < 3:
        return None  # at CP 2 both hold the same (ring_kv_elements)
    new = plan.with_parallel(cp_rotate_method=CpRotate.ALLTOALL)
    return new, "Context parallel's K/V passed one chunk at a time (rotate method alltoall)"


def _offload_optimizer(plan: Plan) -> tuple[Plan, str] | None:
    """Optimizer state and its step on the CPU. DeepSpeed's ZeRO-Offload (offload_optimizer,
    ZeRO stage 1-3, one GPU included); FSDP2's CPUOffloadPolicy moves the parameters too, and
    DDP has no offload, so a DDP or FSDP plan moves to ZeRO-2 (v0.16 ``zero_optimization``)."""
    if plan.parallel.offload is not Offload.NONE:
        return None
    if runs_mps(plan.hardware.gpu):
        # A Mac's CPU and GPU share one RAM: the state would leave Metal's working set, not the machine, and it
        # needs a DeepSpeed build from after 2026-08-23 (core.mac._deepspeed): not a fix to offer.
        return None
    card = gpu_for(plan)
    if card.unified_memory_gb is not None and card.gpu_share is None:
        # DGX Spark: CUDA already allocates from all the RAM the OS manages (its catalogue entry), so the state on
        # the CPU stays in the memory the GPU's step uses. (A Ryzen AI Max's GPU is held to half of it by Linux's
        # TTM limit, gpu_share 0.5: there the state leaves the GPU's part, and offloading is offered.)
        return None
    strategy = plan.parallel.strategy
    if strategy in (Strategy.DDP, Strategy.FSDP):
        strategy = Strategy.ZERO2
    new = plan.with_layout(strategy=strategy, offload=Offload.OPTIMIZER)  # HSDP is FSDP's: drops to 1
    after = estimate(new)
    if not after.host_holds:
        return None  # the nodes' memory cannot hold the state either
    title = f"Optimizer state on the CPU ({layout_name(new)}, DeepSpeed ZeRO-Offload)"
    return new, title + _engine_cast_words(plan, after)


def _engine_cast_words(plan: Plan, after: Estimate) -> str:
    """What else a move to DeepSpeed changes: its 16-bit engine casts the module to the plan's autocast dtype
    (core.roles.deepspeed_engine_dtype), so float32 weights are held in bf16 (h58left: LoRA on a float32
    Llama 3.1 8B on an RTX 4090 went 56.1 -> 24.6 GB, 31 GB of it the weights' cast, titled as the optimizer's
    move). "" where the plan ran the engine already or the weights do not shrink by a saving that matters."""
    engine = deepspeed_engine_dtype(after.plan)
    if engine is None or deepspeed_engine_dtype(plan) is not None:
        return ""
    was, now = estimate(plan).bucket(BucketKey.WEIGHTS).bytes, after.bucket(BucketKey.WEIGHTS).bytes
    if was - now < MIN_SAVING_BYTES:
        return ""
    dtype = engine.value
    return f"; DeepSpeed's {dtype} engine also holds the weights in {dtype}: {was / GB:.1f} → {now / GB:.1f} GB"


def _offload_params(plan: Plan) -> tuple[Plan, str] | None:
    """FSDP's CPU offload on the plan's GPUs: the sharded parameters, their gradients and the optimizer
    state live on the host, each unit copied in before its all-gather (FSDP2 CPUOffloadPolicy; FSDP1
    CPUOffload(offload_params=True), Answer.AI's fsdp_qlora --use_cpu_offload for a 70B model on two
    24 GB cards). Offered on several GPUs, or on one already under FSDP / ZeRO-3; a DDP or ZeRO-1/2
    plan moves to FSDP2. None where the nodes' memory cannot hold what moves there."""
    par = plan.parallel
    if par.offload is Offload.PARAMS or (plan.world_size < 2 and par.strategy not in (Strategy.FSDP, Strategy.ZERO3)):
        return None
    strategy = par.strategy if par.strategy in (Strategy.FSDP, Strategy.ZERO3) else Strategy.FSDP
    try:
        new = plan.with_layout(strategy=strategy, offload=Offload.PARAMS)
    except PlanError:
        return None  # a layout the plan refuses with the parameters on the host
    if not estimate(new).host_holds:
        return None
    return new, f"Parameters and optimizer state on the CPU ({layout_name(new)})"


def _host_note(plan: Plan) -> str:
    host = estimate(plan).host
    if host is None:
        return ""
    if host.verdict is None:  # no RAM given (Host RAM per node, core/inputs.py): shown, not judged
        return f"host RAM {host.bytes / 1e9:,.0f} GB per node (Host RAM per node not given: not judged)"
    return f"host RAM {host.bytes / 1e9:,.0f} GB of {host.capacity_bytes / 1e9:,.0f} GB per node"


def _tensor_parallel(plan: Plan) -> tuple[Plan, str] | None:
    """TP 2 on the same GPUs (Megatron-style, with sequence parallel): half of each layer's
    weights and activations per GPU, where the heads divide and the node has GPUs in pairs."""
    par = plan.parallel
    if par.tensor_parallel > 1 or par.gpus_per_node % 2 or plan.world_size < 2:
        return None
    if plan.quantised_base:  # no trainer splits a bitsandbytes base by TP (core.advice.fit.QUANTISED_BASE_SHARDS_ONLY)
        return None
    try:
        new = plan.with_parallel(tensor_parallel=2, sequence_parallel=True)
    except PlanError:
        return None  # heads not divisible by 2, or the degrees no longer divide the GPUs
    return new, f"Tensor parallel 2 on the same {plan.world_size} GPUs (with sequence parallel)"


# A size in a catalogue model's name (resources/models.json): 70B, 0.5B, 135M, 1T, 8x7B, 30B-A3B, 20b.
_SIZE: Final = re.compile(r"(?i)(?<![\w.])\d+(?:\.\d+)?(?:x\d+)?[bmt](?:-a\d+(?:\.\d+)?b)?(?![\w.])")
# GPT-2's sizes in words (openai-community/gpt2, gpt2-medium, gpt2-large, gpt2-xl: "GPT-2 small (124M)"),
# and the tuning of one release (Llama 3.3 70B Instruct is of the Llama 3 line of Llama 3.1 8B).
_SIZE_WORDS: Final = re.compile(r"(?i)\b(?:small|medium|large|xl|instruct|base)\b")
# A point release within a generation: Llama 3.1 / 3.2 / 3.3 are Meta's Llama 3 models (their model
# cards), Qwen2.5 of Qwen2; a major version (Llama 2, Qwen3, Gemma 3) is another line.
_POINT_RELEASE: Final = re.compile(r"(\d+)\.\d+")


def model_line(name: str, point_release: bool = False) -> str:
    """A model's line: its name less the size, any parenthesis and the point release ("Llama 3.1 70B"
    → "llama 3", "DeepSeek-R1-Distill-Llama-70B" → "deepseek r1 distill llama"). The catalogue's
    family is the architecture (model_type), which groups Yi 34B and SmolLM2 with Llama 3.1: a
    smaller model of another line is another model, not a smaller one of this (branch h56mode).
    ``point_release``: keep it ("Llama 3.1 70B" → "llama 3.1"), to prefer the plan's own release among
    equal sizes."""
    text = _SIZE_WORDS.sub(" ", _SIZE.sub(" ", re.sub(r"\([^)]*\)", " ", name))).lower()
    return " ".join(re.split(r"[\s_-]+", text if point_release else _POINT_RELEASE.sub(r"\1", text))).strip()


def _smaller_model(plan: Plan) -> tuple[Plan, str] | None:
    current = plan.model.total_params()
    line = model_line(plan.model.name)
    same_family = [
        m
        for m in load_models()
        if m.spec.family == plan.model.family and m.spec.total_params() < current and model_line(m.name) == line
    ]
    narrow: tuple[Plan, str] | None = None
    release = model_line(plan.model.name, point_release=True)
    # The largest first; of equal sizes, the plan's own point release (Llama 3.1 70B → Llama 3.1 8B, not Llama 3 8B).
    for entry in sorted(same_family, key=lambda m: (-m.spec.total_params(), model_line(m.name, True) != release)):
        candidate = plan.on_model(entry.spec, entry.id)  # frozen layers clamped to its depth
        rank = estimate(candidate).judgement().fit_rank  # core.verdict.fit_rank: margin first, then narrow
        if rank == 0:
            return candidate, f"Smaller model: {entry.name}"
        if rank == 1 and narrow is None:  # the largest that fits narrowly, where none fits with margin
            narrow = candidate, f"Smaller model: {entry.name}"
    return narrow


def _bigger_card(plan: Plan) -> tuple[Plan, str] | None:
    """The cheapest larger card that fits, priced per card where the catalogue has a price.

    A card that fits with margin is preferred to one that fits narrowly (core.verdict.fit_rank);
    then a card with a known price is preferred to one without; among those, the lower price per
    GPU-hour, then the smaller memory. The changed plan carries the card's price, so its
    cost figure is that card's. None for a card that comes one to a machine (a laptop's or a Mac's
    GPU, core.advice.fit.one_per_machine): its machine takes no other card.
    """
    if one_per_machine(plan):
        return None
    capacity = estimate(plan).capacity_bytes
    # What PyTorch may hold on each card (an Apple GPU's: the MPS limit, at most its RAM).
    bigger: list[GpuSpec] = [g for g in load_gpus() if pytorch_limit_bytes(g) > capacity]
    fitting: list[tuple[tuple[int, float, float, str], Plan, str]] = []
    for gpu in bigger:
        priced = gpu.hourly_price()
        try:
            candidate = plan.with_hardware(gpu=gpu.id)
        except PlanError:  # a card the plan cannot run on (an Apple GPU for several GPUs: core.mac)
            continue
        if priced is not None:
            candidate = candidate.with_hardware(price_per_gpu_hour=priced[0])
        judged = estimate(candidate).judgement()
        if not judged.fits:
            continue
        room = pytorch_limit_bytes(gpu)
        title = f"A bigger card: {gpu.name} ({room / 1e9:.0f} GB)"
        order = (judged.fit_rank, priced[0] if priced else float("inf"), room, gpu.id)
        fitting.append((order, candidate, title))
    if not fitting:
        return None
    _, candidate, title = min(fitting, key=lambda item: item[0])
    return candidate, title


def _card_price_note(plan: Plan) -> str:
    """Where the price of the card a plan runs on comes from."""
    gpus = {g.id: g for g in load_gpus()}
    gpu = gpus.get(plan.hardware.gpu)
    priced = gpu.hourly_price() if gpu is not None else None
    if priced is None:
        return "the catalogue has no price for this card: its cost is unknown"
    return f"about ${priced[0]:.2f} per GPU-hour ({priced[1]})"


FIRST: Final = frozenset({Failure.FIRST_STEP})
ACTS: Final = frozenset({Failure.LONG_BATCHES})
EVAL: Final = frozenset({Failure.EVALUATION, Failure.LONG_BATCHES})
ALL: Final = frozenset({Failure.FIRST_STEP, Failure.LONG_BATCHES, Failure.EVALUATION})
_BASES: Final = frozenset({RemedyKind.LORA, RemedyKind.QLORA_NF4, RemedyKind.QLORA_INT8})
_OPTIMIZERS: Final = frozenset({RemedyKind.OPTIMIZER_8BIT, RemedyKind.PAGED_OPTIMIZER})
_STRATEGIES: Final = frozenset({RemedyKind.FSDP, RemedyKind.OFFLOAD_OPTIMIZER, RemedyKind.OFFLOAD_PARAMS})

K = RemedyKind
TRAINING_KINDS: Final = (
    RemedySpec(K.FUSED_ATTENTION, _fused_attention, 0, ACTS, "no cost: the same result, usually faster"),
    RemedySpec(K.CHUNKED_LOSS, _chunked_loss, 0, EVAL, "no cost in quality; a little slower loss"),
    RemedySpec(
        K.OPTIMIZER_8BIT,
        _optimizer("8bit"),
        1,
        FIRST,
        "little or no quality loss (Dettmers et al. 2022)",
        excludes=_OPTIMIZERS,
    ),
    RemedySpec(
        K.BASE_16BIT,
        _base_16bit,
        1,
        ALL,
        "the frozen weights rounded to 16 bits, as Trainer(bf16=True) on a bf16 model trains; adapters unchanged",
    ),
    RemedySpec(
        K.EXPERTS_QUANTISED,
        _experts_quantised,
        1,
        ALL,
        "an older transformers (4.57.x): the same training; under 4.x MLP targets also reach the routed experts",
    ),
    RemedySpec(
        K.MICRO_BATCH, _smaller_micro_batch, 1, ACTS, "same effective batch; smaller kernels run less efficiently"
    ),
    RemedySpec(K.CHECKPOINTING, _checkpointing, 2, ACTS, "recomputes the forward"),
    RemedySpec(
        K.LORA, _lora, 2, FIRST, "trains an adapter instead of every weight; quality usually close", excludes=_BASES
    ),
    RemedySpec(
        K.QLORA_NF4,
        _qlora(Quant.NF4),
        3,
        FIRST,
        "dequantising costs some speed; quality close to 16-bit LoRA (QLoRA paper)",
        excludes=_BASES,
    ),
    RemedySpec(
        K.QLORA_INT8, _qlora(Quant.INT8), 3, FIRST, "int8 matmuls are slower; quality close to 16-bit", excludes=_BASES
    ),
    RemedySpec(
        K.PAGED_OPTIMIZER,
        _optimizer("paged"),
        3,
        FIRST,
        "pages state to CPU memory under pressure: slower when it does",
        excludes=_OPTIMIZERS,
    ),
    RemedySpec(
        K.FSDP,
        _fsdp,
        1,
        FIRST,
        "gathers each layer's weights in the forward and backward: more communication",
        changes=frozenset({Pin.LAYOUT}),
        excludes=_STRATEGIES,
    ),
    RemedySpec(
        K.SYNC_EACH_BATCH,
        _sync_each_batch,
        1,
        FIRST,
        "a reduce-scatter every micro-batch instead of one per step: more communication",
    ),
    RemedySpec(
        K.CP_ALLTOALL,
        _cp_alltoall,
        1,
        ACTS,
        "a point-to-point send per ring step instead of one all-gather, hidden under each step's attention",
    ),
    RemedySpec(
        K.TENSOR_PARALLEL,
        _tensor_parallel,
        2,
        ALL,
        "two GPUs compute each layer: collectives in every layer, best within one node",
        changes=frozenset({Pin.LAYOUT}),
    ),
    RemedySpec(
        K.OFFLOAD_OPTIMIZER,
        _offload_optimizer,
        3,
        FIRST,
        "the optimizer step runs on the CPU and the state crosses PCIe each step: slower steps, host RAM",
        changes=frozenset({Pin.LAYOUT, Pin.NO_OFFLOAD}),
        excludes=_STRATEGIES,
        plan_note=_host_note,
    ),
    RemedySpec(
        K.OFFLOAD_PARAMS,
        _offload_params,
        4,
        ALL,
        "every layer's weights cross PCIe from the host each step, and the optimizer step runs on the CPU: "
        "much slower steps, host RAM",
        changes=frozenset({Pin.LAYOUT, Pin.NO_OFFLOAD}),
        excludes=_STRATEGIES,
        plan_note=_host_note,
    ),
    RemedySpec(
        K.MORE_GPUS,
        _more_gpus,
        4,
        ALL,
        "more GPUs: the same tokens in fewer hours, the GPU-hours about the same",
        combinable=False,
        changes=frozenset({Pin.GPU_COUNT, Pin.LAYOUT}),  # the data-parallel degree, often the strategy
        plan_note=_more_gpus_note,
        needs_margin=True,
    ),
    RemedySpec(
        K.SHORTER_SEQUENCE,
        _shorter_sequence,
        5,
        ACTS,
        "the model sees shorter contexts",
        combinable=False,
        changes=frozenset({Pin.SEQUENCE}),
    ),
    RemedySpec(
        K.SMALLER_MODEL,
        _smaller_model,
        6,
        ALL,
        "a smaller model is usually less capable",
        combinable=False,
        changes=frozenset({Pin.MODEL}),
    ),
    RemedySpec(
        K.BIGGER_CARD,
        _bigger_card,
        6,
        ALL,
        "a different, larger GPU",
        combinable=False,
        changes=frozenset({Pin.GPU}),
        plan_note=_card_price_note,
    ),
)
# Kinds listed even when they do not lower the total (a bigger card, more GPUs: the total
# per card may stay while the card grows).
_ALWAYS_LISTED: Final = frozenset({K.BIGGER_CARD, K.MORE_GPUS})
# Changes of layout: what they cost is time (communication, the CPU's step), so their hours
# before and after are always shown, even where the compute model finds no difference.
_TIMED: Final = frozenset({K.MORE_GPUS, K.FSDP, K.TENSOR_PARALLEL, K.OFFLOAD_OPTIMIZER, K.OFFLOAD_PARAMS})


# The most changes cheapest_combination puts together (pairs and triples past single changes).
MAX_COMBINED: Final = 3


def _time_and_money(base: Estimate, new: Estimate, always_time: bool = False) -> list[str]:
    hours, new_hours = base.compute.hours, new.compute.hours
    parts = []
    change = f"time {format_hours(hours)} → {format_hours(new_hours)}"
    if always_time and hours and new_hours and abs(new_hours / hours - 1) <= 0.005:
        parts.append(change)
    elif hours and new_hours and abs(new_hours / hours - 1) > 0.005:
        parts.append(f"{change} ({new_hours / hours - 1:+.0%})")
    costs_known = math.isfinite(base.compute.cost) and math.isfinite(new.compute.cost)
    if costs_known and base.compute.cost and new.compute.cost and abs(new.compute.cost / base.compute.cost - 1) > 0.005:
        parts.append(f"cost {new.compute.cost / base.compute.cost - 1:+.0%}")
    return parts


def cost_text(notes: Sequence[str], base: Estimate, new: Estimate, always_time: bool = False) -> str:
    """What a change costs in words, then its time and money against the current plan (the
    hours always with ``always_time``: a change of layout whose cost is its time)."""
    return "; ".join([*(n for n in notes if n), *_time_and_money(base, new, always_time)])


def allowed(specs: Iterable[RemedySpec], pins: frozenset[Pin]) -> tuple[RemedySpec, ...]:
    """The kinds that change nothing the user pinned."""
    return tuple(s for s in specs if not (s.changes & pins))


def remedies_for(
    plan: Plan,
    specs: Sequence[RemedySpec] = TRAINING_KINDS,
    base: Estimate | None = None,
    pins: frozenset[Pin] = frozenset(),
) -> tuple[Remedy, ...]:
    """Every applicable change that lowers the judged total, those that fit first, cheapest first."""
    base = base or estimate(plan)
    found: list[Remedy] = []
    for spec in allowed(specs, pins):
        result = spec.apply(plan)
        if result is None:
            continue
        new_plan, title = result
        if new_plan == plan:
            continue
        new = estimate(new_plan)
        judged = new.judgement(spec.judged_on)
        listed = spec.kind in _ALWAYS_LISTED or _starts_it(spec, base, new)
        if not listed and not worth_offering(judged, base.judgement(spec.judged_on)):
            continue
        notes = [spec.cost_note, spec.plan_note(new_plan) if spec.plan_note else ""]
        cost = cost_text(notes, base, new, spec.kind in _TIMED)
        short = spec.needs_margin and judged.fits and not judged.fits_with_margin
        rank = spec.cost_rank if spec.rank_of is None else spec.rank_of(plan, new)
        refused = spec.judged_on is Mode.INFERENCE and bool(new.inference.would_not_start)
        cost = f"{cost}; {_still_refused(new)}" if refused else cost
        found.append(Remedy(spec.kind, title, new_plan, new, judged, rank, cost, spec.addresses, short, refused))
    # Those that fit with margin first, then narrow fits (core.verdict.fit_rank; a more-GPUs count short of
    # margin among them, though not counted as fitting), then the rest, cheapest first; among the rest those the
    # engine would still refuse to start last (h94start: "8-bit KV cache", "Would not start", was listed between
    # two out-of-memory changes by its cost, above changes after which the engine at least starts).
    return tuple(sorted(found, key=lambda r: (r.judgement.fit_rank, r.refused, r.cost_rank, r.total_bytes)))


def _starts_it(spec: RemedySpec, base: Estimate, new: Estimate) -> bool:
    """A serving change after which an engine that refused its memory at start-up (core.start_refusal.MEMORY_KINDS)
    starts, listed whatever it saves (h97rem: a higher gpu_memory_utilization, which starts a pool with no block, adds
    the requests' blocks to the judged total; one that starts a pool short of a request leaves the total as it was).
    Where it still does not fit, the sort lists it after every change that does. A context past the model's limit is
    worth_offering's (a change after which it starts and fits)."""
    first = base.inference.start_refusal if spec.judged_on is Mode.INFERENCE else None
    return first is not None and first.memory and not new.inference.would_not_start


def _still_refused(new: Estimate) -> str:
    """Why a serving change is listed after every change with which the engine starts: the check that still refuses
    it, in a few words (core.start_refusal: the first the engine runs)."""
    first = new.inference.start_refusal
    cause = f": {first.cause}" if first is not None else ""
    return f"listed last: the engine would still not start{cause}"


def worth_offering(judged: Judgement, before: Judgement) -> bool:
    """The one rule for listing a change: it lowers the judged total and fits, or it saves enough to
    matter (MIN_SAVING_*) both on the estimate and at the top of the estimate's range. A saving the
    range swallows is not one: optimizer offload on QLoRA (Llama 3.1 8B on an RTX 3060 12GB) saved
    0.3 GB of a few million adapter parameters' state while its published-figure range rose at the top. A plan the
    engine would not start (WONT_START: a context past the model's limit) is remedied by a change after which it
    starts and fits, whatever it saves: the long-context variable saves nothing, nor does a shorter context on a
    sliding-window model (h93diag2: Phi-3 mini 4k at 32,768 tokens, its window 2,047, was offered neither)."""
    if before.verdict is Verdict.WONT_START and judged.fits:
        return True
    saved = before.total_bytes - judged.total_bytes
    at_top = before.range_bytes[1] - judged.range_bytes[1]
    enough = max(MIN_SAVING_BYTES, MIN_SAVING_FRACTION * before.total_bytes)
    return saved > 0 and (judged.fits or min(saved, at_top) >= enough)


def cheapest_combination(
    plan: Plan,
    remedies: Iterable[Remedy],
    specs: Sequence[RemedySpec] = TRAINING_KINDS,
    max_size: int = MAX_COMBINED,
    mode: Mode = Mode.TRAINING,
    below_rank: int = 1 << 30,
) -> Combination | None:
    """The cheapest set of two or three combinable changes that fits (lowest summed cost
    rank, then smallest total), applied in order of cost to the plan; only sets whose summed
    rank is below ``below_rank`` (a single change that fits at that cost is simpler). A set that
    fits with margin is preferred to one that fits narrowly at any rank (core.verdict.fit_rank)."""
    base = estimate(plan)
    by_kind = {s.kind: s for s in specs}
    pool = [r for r in remedies if r.kind in by_kind and by_kind[r.kind].combinable]
    best: Combination | None = None
    # (fit_rank, summed rank, total): a fit with margin before a narrow one, then the cheapest.
    best_score: tuple[int, int, float] = (2, below_rank - 1, float("inf"))
    for size in range(2, max_size + 1):
        for group in itertools.combinations(pool, size):
            kinds = [r.kind for r in group]
            if any(len(by_kind[k].excludes & set(kinds)) > 1 for k in kinds):
                continue
            rank = sum(r.cost_rank for r in group)
            if rank > below_rank - 1 or (best_score[0] == 0 and rank > best_score[1]):
                continue
            current = plan
            applied: list[Remedy] = []
            for remedy in sorted(group, key=lambda r: r.cost_rank):
                result = by_kind[remedy.kind].apply(current)
                if result is None:
                    break
                current = result[0]
                # Titled as applied here: on a plan the earlier parts changed, a part may pick
                # other values than it did alone (micro-batch 10 × 26, not 5 × 52).
                applied.append(replace(remedy, title=result[1]))
            else:
                est = estimate(current)
                judged = est.judgement(mode)
                score = (judged.fit_rank, rank, judged.total_bytes)
                if judged.fits and score < best_score:
                    notes = [by_kind[r.kind].cost_note for r in applied]
                    cost = cost_text(notes, base, est)
                    best, best_score = Combination(tuple(applied), current, est, judged, rank, cost), score
    return best

"""The lesson's accounting (LM8-T3): four buckets with a typed activation allowance.

Weights P·b_w, gradients T·b_g, optimizer state T·b_o (+ a float32 master copy in mixed
precision), activations as typed. b_w is the dtype each weight is loaded in: the routed experts
a bitsandbytes base keeps in 16 bits count 2 B (:func:`weight_terms`). With adapters the
adapter itself is kept in float32 and counts 16 bytes per parameter (4 weight + 4 gradient +
8 Adam). No overhead bucket: the lesson keeps 10-20 % headroom instead.

On several GPUs the state is divided the way ZeRO divides it (Rajbhandari et al. 2020,
arXiv:1910.02054, Figure 1, the paper the lesson cites): with N_d data-parallel GPUs stage 1
divides the optimizer state (master copy included) by N_d, stage 2 also the gradients,
stage 3 (and FSDP, which shards the same three) also the weights; DDP divides nothing.
"""

from __future__ import annotations

from functools import partial
from typing import Final

from core.breakdown import Breakdown, Bucket, BucketKey, Phase, StepPhase, Term, make_bucket
from core.dtypes import ELEMENT_BYTES
from core.format import gb, sci
from core.params import ParamCounts, bnb_16bit_experts
from core.plan import Optimizer, Plan, Precision, Strategy
from core.units import GB

# Enum members this module's hot paths compare with, read from their classes once: on Python 3.11 each
# ``Class.MEMBER`` read goes through EnumType.__getattr__'s slot, ~0.15 µs (core.plan's note; h74speed).
_BUCKET_KEY_ACTIVATIONS: Final = BucketKey.ACTIVATIONS
_BUCKET_KEY_GRADIENTS: Final = BucketKey.GRADIENTS
_BUCKET_KEY_OPTIMIZER: Final = BucketKey.OPTIMIZER
_BUCKET_KEY_OVERHEAD: Final = BucketKey.OVERHEAD
_BUCKET_KEY_WEIGHTS: Final = BucketKey.WEIGHTS
_PRECISION_FP32: Final = Precision.FP32

# Bytes of optimizer state per trainable parameter, lesson-level.
# AdamW: two float32 moments (Kingma & Ba 2015; the lesson's b_o = 8). 8-bit AdamW: two
# 1-byte moments (Dettmers et al. 2022, arXiv:2110.02861). SGD with momentum: one buffer.
# Adafactor: factored second moment, one row and one column vector per matrix (Shazeer &
# Stern 2018, arXiv:1804.04235) - negligible per parameter at this level of detail.
LESSON_OPTIMIZER_BYTES: Final = {
    Optimizer.ADAMW: 8.0,
    Optimizer.PAGED_ADAMW: 8.0,
    Optimizer.ADAMW_8BIT: 2.0,
    Optimizer.PAGED_ADAMW_8BIT: 2.0,
    Optimizer.SGD_MOMENTUM: 4.0,
    Optimizer.SGD: 0.0,
    Optimizer.ADAFACTOR: 0.0,
    Optimizer.ADAM: 8.0,  # the same two moments as AdamW
    # torchao's low-bit AdamW, two moments of 1, 0.5 and 1 byte (pytorch/ao torchao/optim, block scales left out
    # at this level as 8-bit AdamW's are); AnyPrecisionAdamW's two bf16 moments (llama-recipes' dtypes), and its
    # bf16 Kahan buffer; Lion's one momentum, float32 or 8-bit (bitsandbytes Optimizer1State).
    Optimizer.AO_ADAMW_8BIT: 2.0,
    Optimizer.AO_ADAMW_4BIT: 1.0,
    Optimizer.AO_ADAMW_FP8: 2.0,
    Optimizer.ANYPRECISION_ADAMW: 4.0,
    Optimizer.ANYPRECISION_ADAMW_KAHAN: 6.0,
    Optimizer.LION: 4.0,
    Optimizer.LION_8BIT: 1.0,
    Optimizer.PAGED_LION: 4.0,
    Optimizer.PAGED_LION_8BIT: 1.0,
    Optimizer.MUON: 4.0,  # one float32 momentum (the AdamW group's second moment left out at this level)
    Optimizer.LORA_FA: 8.0,  # AdamW's two float32 moments (PEFT's LoraFAOptimizer; lora_A's freezing left out here)
    # Adagrad's sum and RMSprop's square_avg, one float32 buffer (torch.optim); bitsandbytes' RMSprop one buffer,
    # float32 or 8-bit; AdEMAMix three moments (bitsandbytes optim/ademamix.py: m1, m2, nu), float32 or 8-bit.
    Optimizer.ADAGRAD: 4.0,
    Optimizer.RMSPROP: 4.0,
    Optimizer.RMSPROP_BNB: 4.0,
    Optimizer.RMSPROP_BNB_8BIT: 1.0,
    Optimizer.ADEMAMIX: 12.0,
    Optimizer.ADEMAMIX_8BIT: 3.0,
    Optimizer.PAGED_ADEMAMIX: 12.0,
    Optimizer.PAGED_ADEMAMIX_8BIT: 3.0,
    # schedule-free AdamW / RAdam: z and exp_avg_sq; SGD: z (facebookresearch schedule_free), float32 here
    Optimizer.SCHEDULE_FREE_ADAMW: 8.0,
    Optimizer.SCHEDULE_FREE_RADAM: 8.0,
    Optimizer.SCHEDULE_FREE_SGD: 4.0,
    # GaLore AdamW: AdamW's two float32 moments at this level (the rank-r projection is the detailed accounting's,
    # galore-torch 1.0 galore_torch/adamw.py), as Muon's AdamW group is left out above.
    Optimizer.GALORE_ADAMW: 8.0,
}
MASTER_COPY_BYTES: Final = ELEMENT_BYTES["fp32"]  # float32 master weight in mixed precision
ADAPTER_BYTES: Final = ELEMENT_BYTES["fp32"]  # the lesson keeps adapters, and their gradients, in float32
MIXED: Final = (Precision.BF16_MIXED, Precision.FP16_MIXED)
# The routed experts a bitsandbytes base leaves in the model's 16-bit dtype (Plan.bnb_16bit_experts): the lesson's
# b_w for a 16-bit weight, 2 B (LM8-T3: "bytes per stored weight: ... 2 (bf16/fp16)").
EXPERT_BYTES: Final = ELEMENT_BYTES["bf16"]


def weight_bytes(plan: Plan) -> float:
    """b_w: 4 (float32), 2 (16-bit), 1 (int8), 0.5 (4-bit) bytes per stored weight, without
    the block scales the detailed accounting adds. On a quantised base whose routed experts stay in 16 bits
    (:func:`weight_terms`), b_w of every other weight."""
    if plan.quantised_base:
        return ELEMENT_BYTES[plan.quant.value]
    return ELEMENT_BYTES["fp32"] if plan.precision is _PRECISION_FP32 else ELEMENT_BYTES["bf16"]


# What each strategy splits across the data-parallel GPUs (ZeRO's P_os, P_os+g, P_os+g+p).
SHARDED_BUCKETS: Final = {
    Strategy.DDP: frozenset(),
    Strategy.ZERO1: frozenset({BucketKey.OPTIMIZER}),
    Strategy.ZERO2: frozenset({BucketKey.OPTIMIZER, BucketKey.GRADIENTS}),
    Strategy.ZERO3: frozenset({BucketKey.OPTIMIZER, BucketKey.GRADIENTS, BucketKey.WEIGHTS}),
    Strategy.FSDP: frozenset({BucketKey.OPTIMIZER, BucketKey.GRADIENTS, BucketKey.WEIGHTS}),
}


def weight_terms(plan: Plan, p: int, bw: float) -> list[Term]:
    """The lesson's weights term, P × b_w, applied to what the run loads: on a bitsandbytes MoE base under
    transformers 5 the routed experts are 3-D parameters it does not quantise (Plan.bnb_16bit_experts,
    core.params.bnb_16bit_experts; measured in tests/data/moe_bnb), so E of the P weights are held in 16 bits,
    (P − E) × b_w + E × 2 B. A dense model, or experts the base quantises, keeps the lesson's one product."""
    experts = bnb_16bit_experts(plan)
    if not experts:
        return [Term("stored weights", f"P × b_w = {sci(p)} × {bw:g} B", p * bw)]
    rest = p - experts
    return [
        Term("stored weights (quantised)", f"(P − E) × b_w = {sci(rest)} × {bw:g} B", rest * bw),
        Term(
            "routed experts in 16 bits (3-D parameters; bitsandbytes quantises nn.Linear only)",
            f"E × {EXPERT_BYTES:g} B = {sci(experts)} × {EXPERT_BYTES:g} B",
            experts * EXPERT_BYTES,
        ),
    ]


def _split(terms: list[Term], key: BucketKey, plan: Plan) -> list[Term]:
    gpus = plan.parallel.data_parallel
    if gpus == 1 or key not in SHARDED_BUCKETS[plan.parallel.strategy]:
        return terms
    return [Term(f"{t.label} ÷ {gpus} GPUs", f"({t.formula}) ÷ {gpus}", t.bytes / gpus) for t in terms]


def training_breakdown(plan: Plan, counts: ParamCounts) -> Breakdown:
    p, t = counts.total, counts.trainable
    bw = weight_bytes(plan)
    bo = LESSON_OPTIMIZER_BYTES[plan.optimizer]
    mixed = plan.precision in MIXED
    weights = weight_terms(plan, p, bw)
    stored = [t.bytes for t in weights]
    grads: list[Term] = []
    optim: list[Term] = []
    if plan.adapter_based:
        weights.append(Term("adapter (float32)", f"T × {ADAPTER_BYTES:g} B = {sci(t)} × 4 B", t * ADAPTER_BYTES))
        grads.append(Term("adapter gradients", f"T × {ADAPTER_BYTES:g} B = {sci(t)} × 4 B", t * ADAPTER_BYTES))
        optim.append(Term("optimizer state", f"T × b_o = {sci(t)} × {bo:g} B", t * bo))
    else:
        grads.append(Term("gradients", f"T × b_g = {sci(t)} × {bw:g} B", t * bw))
        if mixed:
            optim.append(Term("float32 master copy", f"T × 4 B = {sci(t)} × 4 B", t * MASTER_COPY_BYTES))
        optim.append(Term("optimizer state", f"T × b_o = {sci(t)} × {bo:g} B", t * bo))
    weights = _split(weights, _BUCKET_KEY_WEIGHTS, plan)
    grads = _split(grads, _BUCKET_KEY_GRADIENTS, plan)
    optim = _split(optim, _BUCKET_KEY_OPTIMIZER, plan)
    act_bytes = plan.lesson.activations_gb * GB
    activations = [Term("activation allowance", f"{plan.lesson.activations_gb:g} GB as typed", act_bytes)]
    buckets = (
        make_bucket(_BUCKET_KEY_WEIGHTS, weights),
        make_bucket(_BUCKET_KEY_GRADIENTS, grads),
        make_bucket(_BUCKET_KEY_OPTIMIZER, optim),
        make_bucket(_BUCKET_KEY_ACTIVATIONS, activations),
    )
    total = sum(b.bytes for b in buckets)
    if plan.adapter_based and plan.parallel.data_parallel == 1:
        adapter_total = t * (ADAPTER_BYTES * 2 + bo)
        parts = [*map(gb, stored), gb(adapter_total)]
    else:
        parts = [gb(t.bytes) for t in (*weights, *grads, *optim)]
    parts.append(f"{plan.lesson.activations_gb:g}")
    summary = " + ".join(parts) + f" = {total / GB:.1f} GB"
    phase = Phase("training step", buckets, "the lesson's sum of the four buckets")
    notes: tuple[str, ...] = ()
    if plan.adapter_based and plan.lesson.trainable_override:
        notes = (f"T = {t:,} as given (the lesson's figure), not derived from the architecture.",)
    overhead = make_bucket(_BUCKET_KEY_OVERHEAD, [])
    return Breakdown(
        phases=(phase,),
        overhead=overhead,
        summary_formula=summary,
        notes=notes,
        _evaluation_of=partial(_evaluation, buckets),
        evaluation_overhead=overhead,
    )


def _evaluation(buckets: tuple[Bucket, ...]) -> Phase:
    """An evaluation forward keeps the weights and the optimizer state; the typed allowance
    stands for its activations too (the lesson has no finer figure)."""
    return Phase(
        "evaluation forward",
        tuple(b for b in buckets if b.key is not BucketKey.GRADIENTS),
        "the weights, the optimizer state and the activation allowance",
        StepPhase.EVALUATION,
    )

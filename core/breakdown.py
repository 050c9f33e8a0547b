"""The shapes an estimate is made of: buckets of bytes with their worked arithmetic."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from core.format import amount, gb
from core.memo import Once, fills_fields


class BucketKey(StrEnum):
    WEIGHTS = "weights"
    GRADIENTS = "gradients"
    OPTIMIZER = "optimizer"
    ACTIVATIONS = "activations"
    OVERHEAD = "overhead"
    KV_CACHE = "kv_cache"  # serving only


# A training step's buckets, in chart order; serving's (weights, KV cache, working memory, overhead).
BUCKET_ORDER: Final = (
    BucketKey.WEIGHTS,
    BucketKey.GRADIENTS,
    BucketKey.OPTIMIZER,
    BucketKey.ACTIVATIONS,
    BucketKey.OVERHEAD,
)
SERVING_BUCKET_ORDER: Final = (BucketKey.WEIGHTS, BucketKey.KV_CACHE, BucketKey.ACTIVATIONS, BucketKey.OVERHEAD)
BUCKET_LABELS: Final = {
    BucketKey.WEIGHTS: "Weights",
    BucketKey.GRADIENTS: "Gradients",
    BucketKey.OPTIMIZER: "Optimizer state",
    BucketKey.ACTIVATIONS: "Activations",
    BucketKey.OVERHEAD: "Overhead",
    BucketKey.KV_CACHE: "KV cache",
}


@dataclass(frozen=True, init=False)
class Term:
    """One line of arithmetic: what it is, the formula with numbers in, the bytes."""

    label: str
    formula: str
    bytes: float

    def __init__(self, label: str, formula: str, bytes: float) -> None:
        # The instance dict filled directly, not through the frozen __init__'s object.__setattr__
        # per field (~35 terms an estimate): the class stays frozen, equal and hashable.
        fields = self.__dict__
        fields["label"] = label
        fields["formula"] = formula
        fields["bytes"] = bytes


@fills_fields
@dataclass(frozen=True)
class Bucket:
    key: BucketKey
    bytes: float
    terms: tuple[Term, ...] = ()
    note: str = ""

    @property
    def label(self) -> str:
        return BUCKET_LABELS[self.key]

    @property
    def formula(self) -> str:
        """The bucket's arithmetic as one readable block, as the lesson writes it."""
        if not self.terms:
            return f"{self.label}: {gb(self.bytes)} GB"
        lines = [f"{t.label}: {t.formula} = {gb(t.bytes)} GB" for t in self.terms]
        if len(self.terms) > 1:
            lines.append(self.total_line())
        return "\n".join(lines)

    def total_line(self, unit: str = "GB") -> str:
        """The bucket as the sum of its terms in ``unit`` (GB or GiB): "Weights: 17.1 + 2.10 = 19.2 GB"."""
        parts = " + ".join(amount(t.bytes, unit) for t in self.terms)
        return f"{self.label}: {parts} = {amount(self.bytes, unit)} {'GiB' if unit == 'GiB' else 'GB'}"


# A term's (or a bucket's) bytes, read in C by filter() and map(): ~25 buckets an estimate.
_BYTES: Final = operator.attrgetter("bytes")


def make_bucket(key: BucketKey, terms: list[Term] | tuple[Term, ...], note: str = "") -> Bucket:
    """The terms with bytes (a zero term is left out) and their sum."""
    kept = tuple(filter(_BYTES, terms))
    return Bucket(key, float(sum(map(_BYTES, kept))), kept, note)


# A phase's allocated bytes, read in C: the key the peaks are found by (max over ~8 phases an estimate).
PHASE_BYTES: Final = operator.attrgetter("allocated_bytes")


class StepPhase(StrEnum):
    """Which moment of a training step a phase is: what code branches on, never the name."""

    STEP = "step"  # the lesson's single sum of the four buckets
    FORWARD = "forward"  # end of the forward pass, logits and loss formed
    BACKWARD_START = "backward-start"  # the loss gradient being formed
    BACKWARD_BLOCK = "backward-block"  # inside the last block's backward
    BACKWARD_END = "backward-end"  # first block and embedding gradients formed
    OPTIMIZER = "optimizer"  # the optimizer step with its temporaries
    EVALUATION = "evaluation"  # an evaluation forward (no_grad): not a phase of the step, judged apart

    @property
    def is_backward(self) -> bool:
        return self in (StepPhase.BACKWARD_START, StepPhase.BACKWARD_BLOCK, StepPhase.BACKWARD_END)


@dataclass(frozen=True, init=False)
class Phase:
    """The memory held at the high point of one phase of a training step."""

    name: str  # for display only; code and tests look at ``kind``
    buckets: tuple[Bucket, ...]  # weights, gradients, optimizer, activations (no overhead)
    description: str = ""
    kind: StepPhase = StepPhase.STEP

    def __init__(
        self, name: str, buckets: tuple[Bucket, ...], description: str = "", kind: StepPhase = StepPhase.STEP
    ) -> None:
        fields = self.__dict__  # filled directly, as Term's (~8 phases an estimate)
        fields["name"] = name
        fields["buckets"] = buckets
        fields["description"] = description
        fields["kind"] = kind

    @Once
    def allocated_bytes(self) -> float:  # read many times per estimate (peaks, ranks, margins): summed once
        return float(sum(map(_BYTES, self.buckets)))

    def bucket(self, key: BucketKey) -> Bucket:
        for bucket in self.buckets:
            if bucket.key is key:
                return bucket
        return Bucket(key=key, bytes=0.0)


@fills_fields
@dataclass(frozen=True)
class Breakdown:
    phases: tuple[Phase, ...]
    overhead: Bucket
    summary_formula: str
    notes: tuple[str, ...] = ()
    # An evaluation forward with the plan's eval batch, between steps (:attr:`evaluation`, worked out when
    # first read: only the diagnosis reads it, and a detailed breakdown's is some tenth of its cost). A partial
    # of a module function, so a breakdown still pickles; None: no evaluation.
    _evaluation_of: Callable[[], Phase] | None = field(default=None, compare=False, repr=False)
    evaluation_overhead: Bucket | None = None
    # Of ``overhead``: what the caching allocator reserves beyond the allocated peak (the rest
    # is the runtime's own memory, outside PyTorch's allocator), and the activations' high
    # point its fragmentation term is a fraction of (:mod:`core.training.device`).
    reserve_bytes: float = 0.0
    # Of ``overhead``: the libraries' workspaces taken from the caching allocator (cuBLAS, Transformer
    # Engine), held from the first matmul on: part of the allocated peak, not of the phases' tensors.
    workspace_bytes: float = 0.0
    fragmentation_basis: float = 0.0
    fragmentation: float = 0.0
    # Of ``reserve_bytes`` as the wrap left it: what an FSDP1 wrap from the CPU cached before the first
    # step (core.parallel.state._fsdp1_wrap_cache); read by a figure taken right after the wrap.
    wrap_cache_bytes: float = 0.0

    @Once
    def evaluation(self) -> Phase | None:
        """An evaluation forward with the plan's eval batch, between steps: the state stays, nothing is
        kept for a backward. Judged apart from the step (its own overhead on top)."""
        return self._evaluation_of() if self._evaluation_of is not None else None

    @property
    def evaluation_bytes(self) -> float:
        """The evaluation forward's allocated bytes plus its overhead (0 without one)."""
        if self.evaluation is None:
            return 0.0
        overhead = self.evaluation_overhead.bytes if self.evaluation_overhead is not None else 0.0
        return self.evaluation.allocated_bytes + overhead


@fills_fields
@dataclass(frozen=True)
class LayerActs:
    """Bytes one block keeps for the backward pass, itemised.

    ``replicated`` indexes the items that lie outside Megatron's tensor-parallel regions
    (Korthikanti et al. 2022, arXiv:2205.05198 §4.1, the "10" of Table 2's sbh(10 + 24/t +
    5as/(ht))): the norms and what they keep, the inputs of q/k/v and of the MLP (the full
    sequence each rank reads before the column-parallel matmuls), the router and the
    dropout masks. Every other item is per head or per MLP column, so ÷ t under TP.

    ``gathered`` indexes the replicated items that are the inputs of the column-parallel
    matmuls (q/k/v and the MLP's gate/up): Megatron-LM's sequence parallel keeps only the
    rank's sequence shard of them, PyTorch's DTensor tensor parallel keeps the all-gathered
    whole (see :func:`core.parallel.acts.block_per_rank`).
    """

    items: tuple[Term, ...]
    replicated: tuple[int, ...] = ()
    gathered: tuple[int, ...] = ()

    @property
    def replicated_bytes(self) -> float:
        return float(sum(self.items[i].bytes for i in self.replicated))

    @Once
    def bytes(self) -> float:  # read several times per estimate (phases, ranks, the evaluation): summed once
        return float(sum(map(_BYTES, self.items)))

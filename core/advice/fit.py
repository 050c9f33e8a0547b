"""Which cards fit: the plan on every catalogue GPU, one to eight of them, sorted by cost.

Each row is :func:`core.estimate.estimate` of the plan with only the card and the count
changed, so its peak, verdict, time and cost are the estimator's own. With more than one
card and a plan that does not shard, the rows shard over the cards (ZeRO-3 / FSDP full
shard) unless ``keep_sharding`` is set: more data-parallel copies of the whole state
never lower the memory per card.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from core.catalogue import GpuSpec, load_gpus
from core.errors import PlanError
from core.estimate import Estimate, Verdict, estimate
from core.format import cost, counted, hours, money
from core.plan import GPUS_PER_NODE, Method, Offload, Plan, Strategy
from core.training.compute import PRICE_FROM_PLAN
from core.units import GB
from core.verdict import NARROW_LABEL, fit_rank

COUNTS: Final = tuple(range(1, 9))


@dataclass(frozen=True)
class CardFit:
    plan: Plan  # the plan on this card and count: what "apply" makes current
    estimate: Estimate
    price_from: str = PRICE_FROM_PLAN  # the source of the price per GPU-hour ("given": a price typed per card)

    @property
    def currency(self) -> str:
        """The sign its price and cost show (Compute.currency: a price typed for the card, given or the
        plan's, is the plan's own and shows bare)."""
        return self.estimate.compute.currency

    @property
    def gpu(self) -> GpuSpec:
        return self.estimate.gpu

    @property
    def count(self) -> int:
        return self.plan.world_size

    @property
    def sharding(self) -> Strategy:
        return self.plan.parallel.strategy

    @property
    def verdict(self) -> Verdict:
        return self.estimate.verdict

    @property
    def fits(self) -> bool:
        """The plan runs on these cards: every rank on its GPU, each node's share in its RAM."""
        return self.estimate.fits

    @property
    def fits_narrowly(self) -> bool:
        """It fits, its range reaching past the usable memory (core.verdict's narrow fit)."""
        return self.estimate.judgement().fits_narrowly

    @property
    def label(self) -> str:
        """The verdict in core.verdict's words: "Fits narrowly" for a narrow fit."""
        return self.estimate.judgement().label

    @property
    def cost(self) -> float:
        return self.estimate.compute.cost

    @property
    def hours(self) -> float:
        return self.estimate.compute.hours

    @property
    def price(self) -> float:
        return self.estimate.compute.price_per_gpu_hour


def plan_on(plan: Plan, gpu_id: str, count: int, *, keep_sharding: bool = False, price: float | None = None) -> Plan:
    strategy = plan.parallel.strategy
    if not keep_sharding:
        # One card has nothing to shard over; several shard fully unless the plan chose a stage.
        if count == 1:
            strategy = Strategy.DDP
        elif strategy is Strategy.DDP:
            strategy = Strategy.FSDP
    changes: dict[str, object] = {"gpu": gpu_id}
    if price is not None:
        changes["price_per_gpu_hour"] = price
    return plan.with_hardware(**changes).on_gpus(count, strategy)


def _sort_key(row: CardFit) -> tuple[bool, float, int, float, str]:
    # Rounded so that costs equal up to float noise (hours × N cards at 1/N the hours) tie; an
    # unknown cost (no price for the card) sorts after every known one.
    known = math.isfinite(row.cost)
    return (not known, round(row.cost, 6) if known else 0.0, row.count, row.estimate.total_bytes, row.gpu.id)


def cards_for(
    plan: Plan,
    *,
    counts: Iterable[int] = COUNTS,
    gpus: Iterable[GpuSpec] | None = None,
    keep_sharding: bool = False,
    prices: Mapping[str, float] | None = None,
) -> tuple[CardFit, ...]:
    """Every card × count the plan can run on, sorted by cost (then fewer cards, then less memory).

    Each card is priced per GPU-hour from ``prices`` (GPU id -> price), else as the plan
    prices its own card (``hardware.price_per_gpu_hour``, given for that card only), else at
    the catalogue's typical cloud price (``GpuSpec.hourly_price``), else not at all: its cost
    is unknown and it is never called the cheapest. Each row says which.
    """
    rows = []
    wanted = tuple(counts)
    for gpu in gpus if gpus is not None else load_gpus():
        # A price typed for the plan's card is that card's; another card takes its own.
        price = prices[gpu.id] if prices and gpu.id in prices else None
        if price is None and gpu.id != plan.hardware.gpu:
            price = 0.0  # the catalogue's price, else unknown (core.training.compute.gpu_hour_price)
        for count in wanted:
            try:
                candidate = plan_on(plan, gpu.id, count, keep_sharding=keep_sharding, price=price)
            except PlanError:  # a layout or setting the card cannot run (one Apple GPU: core.mac)
                continue
            est = estimate(candidate, gpu)
            source = "given" if prices and gpu.id in prices else est.compute.price_source
            rows.append(CardFit(candidate, est, source))
    return tuple(sorted(rows, key=_sort_key))


def cheapest_fit(rows: Iterable[CardFit]) -> CardFit | None:
    """The cheapest row that fits with margin, of those whose cost is known; where none does, the cheapest
    narrow fit (core.verdict.fit_rank: the caller labels it by ``fits_narrowly``)."""
    fitting = [r for r in rows if r.fits and math.isfinite(r.cost)]
    return min(fitting, key=lambda r: (fit_rank(r.estimate.judgement()), _sort_key(r))) if fitting else None


# ---- the fewest GPUs of one card that fit ---------------------------------------------
# The search stops here: 512 GPUs (64 nodes of 8) hold a dense 405B model's full fine-tuning
# state several times over; the command line may ask for up to MAX_SEARCH_LIMIT.
MAX_SEARCH_GPUS: Final = 512
MAX_SEARCH_LIMIT: Final = 16_384
SEARCH_STEP_FRACTION: Final = 16  # past MAX_SEARCH_GPUS, counts step by ~1/16 of the count (6.25 %)
# Tensor-parallel degrees tried within one node: Megatron-LM and torchtitan keep TP inside the
# NVLink domain of a node (8 GPUs on HGX boards), in powers of two.
TP_DEGREES: Final = (2, 4, 8)
# Why a bitsandbytes base is never split by tensor, pipeline or context parallel here (core.checks warns
# where a plan does): transformers' tp_plan fails on bitsandbytes weights (huggingface/transformers#38122),
# torchtitan and Megatron-LM have no bitsandbytes path, and vLLM's tensor parallel over bitsandbytes
# (vllm-project/vllm#8434) serves, it does not train. QLoRA recipes shard with FSDP or DeepSpeed ZeRO-3.
QUANTISED_BASE_SHARDS_ONLY: Final = (
    "a bitsandbytes base is sharded only, by FSDP2 or ZeRO-3: no trainer people run splits it by tensor "
    "or pipeline parallel (transformers#38122)"
)
SHOWN_ROWS: Final = 16  # counts listed in the arithmetic before the middle ones are left out
BEYOND_FACTOR: Final = 4  # counts past the fewest tried for a faster or cheaper answer: up to 4 × as many


def search_counts(per_node: int, max_gpus: int) -> Iterator[int]:
    """1 to ``per_node`` GPUs on one node, then whole nodes: 2·per_node, 3·per_node, ...

    Past MAX_SEARCH_GPUS the step grows with the count, in whole nodes, to about
    1/SEARCH_STEP_FRACTION of it: every node count to 16,384 GPUs was 2,000 counts and
    77-114 s (issue 28 item 15); the grid keeps each count within ~6 % of the last.
    """
    yield from range(1, min(per_node, max_gpus) + 1)
    count = 2 * per_node
    while count <= max_gpus:
        yield count
        step = count // SEARCH_STEP_FRACTION // per_node * per_node if count >= MAX_SEARCH_GPUS else 0
        following, last = count + max(per_node, step), max_gpus // per_node * per_node
        count = last if count < last < following else following  # the limit itself is always tried


def layout_name(plan: Plan) -> str:
    """The split in words: "FSDP2", "FSDP2 + TP 8 + PP 2", "ZeRO-3 + optimizer offload"."""
    par = plan.parallel
    parts = [STRATEGY_NAMES[par.strategy] if plan.world_size > 1 else "one GPU"]
    if par.dp_replicate > 1:
        parts[0] = f"HSDP ({par.dp_replicate} replicas)"
    for degree, name in ((par.tensor_parallel, "TP"), (par.pipeline_parallel, "PP"), (par.context_parallel, "CP")):
        if degree > 1:
            parts.append(f"{name} {degree}")
    if par.offload is not Offload.NONE:
        parts.append(f"{par.offload.value} offload")
    return " + ".join(parts)


STRATEGY_NAMES: Final = {
    Strategy.DDP: "DDP",
    Strategy.FSDP: "FSDP2",
    Strategy.ZERO1: "ZeRO-1",
    Strategy.ZERO2: "ZeRO-2",
    Strategy.ZERO3: "ZeRO-3",
}


def _laid_out(plan: Plan, **changes: object) -> Plan | None:
    """``plan`` with these parallel settings, or None where the model or the count refuse them
    (HSDP replicas that no longer fit the data-parallel GPUs drop to 1, plain FSDP)."""
    try:
        return plan.with_layout(**changes)
    except PlanError:
        return None


def candidate_layouts(
    plan: Plan, count: int, *, per_node: int = GPUS_PER_NODE, model_parallel: bool = True
) -> list[Plan]:
    """The splits tried on ``count`` GPUs, simplest first: the plan's own (its strategy, and its
    TP/PP/CP where they still divide the count), ZeRO-3 for a ZeRO-1/2 plan, then FSDP2; with
    ``model_parallel``, FSDP2 + TP 2/4/8 within a node where the heads divide, then that + PP
    across the nodes. A bitsandbytes base (``Plan.quantised_base``) is sharded only (data parallel,
    FSDP2, ZeRO-3, the plan's offload), its own TP/PP/CP dropped: see QUANTISED_BASE_SHARDS_ONLY."""
    on = plan.on_gpus(count, per_node=per_node)
    gpus, nodes = on.parallel.gpus_per_node, on.parallel.nodes
    fsdp = Strategy.FSDP if count > 1 else on.parallel.strategy
    flat = {"tensor_parallel": 1, "pipeline_parallel": 1, "context_parallel": 1, "virtual_stages": 1}
    if plan.quantised_base:
        model_parallel = False
        on = _laid_out(on, **flat) or on
    tried: list[Plan | None] = [on]
    if count > 1 and on.parallel.strategy in (Strategy.ZERO1, Strategy.ZERO2):
        tried.append(_laid_out(on, strategy=Strategy.ZERO3, **flat))  # the same framework, sharding more
    tried.append(_laid_out(on, strategy=fsdp, **flat))
    if model_parallel:
        tps = [t for t in TP_DEGREES if t <= gpus and gpus % t == 0]
        with_tp = [_laid_out(on, strategy=fsdp, **{**flat, "tensor_parallel": t}) for t in tps]
        tried += with_tp
        widest = next((p for p in reversed(with_tp) if p is not None), tried[-1 - len(with_tp)])
        if widest is not None and nodes > 1:
            stages = 2
            while stages <= nodes:
                if nodes % stages == 0:
                    tried.append(_laid_out(widest, pipeline_parallel=stages))
                stages *= 2
    unique: list[Plan] = []
    for candidate in tried:
        if candidate is not None and candidate not in unique:
            unique.append(candidate)
    return unique


@dataclass(frozen=True)
class CountTried:
    """One GPU count of the search: the layout that fitted with margin, or the one that came closest."""

    count: int
    layouts_tried: int
    estimate: Estimate  # of the fastest layout that fits with margin, or of the one with the least memory per GPU
    layouts_fitting: int = 0  # of the layouts tried, how many run with margin

    @property
    def plan(self) -> Plan:
        return self.estimate.plan

    @property
    def layout(self) -> str:
        return layout_name(self.plan)

    @property
    def fits(self) -> bool:
        """An answer: it fits with margin (Judgement.fits_with_margin), the estimate's whole range within
        the usable memory; a fit by less than the uncertainty above the total is no count to give."""
        return self.estimate.judgement().fits_with_margin

    @property
    def fits_narrowly(self) -> bool:
        """The verdict says it fits, by less than the estimate's uncertainty above the total (core.verdict)."""
        return self.estimate.judgement().fits_narrowly


# Catalogue segments of cards that come one to a machine, each with the words that say so: a laptop's
# GPU cannot be joined by seven more of its kind, so "8 GPUs of this card" is no change its owner can
# make; a Mac's GPU is part of its chip (and PyTorch has no NCCL on macOS: core.mac refuses a second one)
# (resources/gpus.json, each card's "segment"). The one home of the rule: the diagnosis offers no more
# GPUs of such a card (core.advice.remedies, commit 7dc9fe3) and no bigger card in its place (branch
# h57one: the machine takes no other), and fewest_gpus searches one of it only (branch h56mode).
ONE_PER_MACHINE_SEGMENTS: Final = {
    "laptop": "a laptop GPU comes one per machine",
    "apple": "an Apple GPU comes one per Mac, part of its chip",
    # DGX Spark, Ryzen AI Max: the GPU is part of the machine's one chip (two Sparks over ConnectX-7 are two nodes).
    "unified": "a unified-memory PC's GPU comes one per machine, part of its chip",
}


def one_per_machine(plan: Plan) -> bool:
    """The plan's card comes one to a machine (a laptop's or a Mac's GPU): no count of it but one exists."""
    return bool(one_per_machine_words(plan))


def one_per_machine_words(plan: Plan) -> str:
    """Why no count of the plan's card but one exists, in words; "" for a card that comes in any number."""
    gpu = {g.id: g for g in load_gpus()}.get(plan.hardware.gpu)
    return ONE_PER_MACHINE_SEGMENTS.get(gpu.segment, "") if gpu is not None else ""


@dataclass(frozen=True)
class FewestGpus:
    """The answer to "how many of this card, and how long on them"."""

    base: Plan
    tried: tuple[CountTried, ...]  # every count searched, in order; the last fits when found
    max_gpus: int
    # Past the fewest, up to BEYOND_FACTOR × as many: the fastest layout that runs at each count,
    # so more GPUs that finish sooner, or cost less, are shown beside the fewest.
    beyond: tuple[CountTried, ...] = ()
    # The card comes one to a machine (one_per_machine): one of it was tried, no more.
    one_per_machine: bool = False

    @property
    def found(self) -> CountTried | None:
        return self.tried[-1] if self.tried and self.tried[-1].fits else None

    @property
    def narrow(self) -> CountTried | None:
        """Where nothing fits with margin: the fewest count that fits by less than the estimate's uncertainty."""
        if self.found is not None:
            return None
        return next((row for row in self.tried if row.fits_narrowly), None)

    def no_answer_words(self) -> str:
        """Why no count is the answer, in words: "none within N GPUs fits with margin" and the closest fit, or
        nothing fits at all; a bitsandbytes base says it was sharded only. "" where a count was found."""
        if self.found is not None:
            return ""
        narrow = self.narrow
        if narrow is None:
            text = f"nothing up to {self.max_gpus:,} GPUs fits"
        else:
            text = (
                f"none within {self.max_gpus:,} GPUs fits with margin: {counted(narrow.count, 'GPU')} with "
                f"{narrow.layout}: {narrow.estimate.judgement().narrow_words()}"
            )
        return text + self._sharded_only()

    @property
    def fastest(self) -> CountTried | None:
        """Of the fewest and the counts past it, the one that finishes first."""
        options = self._running()
        return min(options, key=lambda r: (r.estimate.compute.hours, r.count)) if options else None

    @property
    def cheapest(self) -> CountTried | None:
        """Of the fewest and the counts past it, the one that costs least (hours × GPUs × price)."""
        options = [r for r in self._running() if math.isfinite(r.estimate.compute.cost)]
        return min(options, key=lambda r: (round(r.estimate.compute.cost, 6), r.count)) if options else None

    def _running(self) -> list[CountTried]:
        found = self.found
        return [found, *self.beyond] if found is not None else []

    def arithmetic(self) -> tuple[str, ...]:
        """How the answer was reached, one line each, with the estimator's own figures."""
        first = self.tried[0].estimate
        plan = self.base
        w = plan.workload
        lines = [
            f"{plan.model.name}, {METHOD_NAMES[plan.method]}, micro-batch {w.micro_batch} × {w.seq_len:,} tokens "
            f"on {first.gpu.name}",
            f"usable per GPU = {first.capacity_bytes / GB:.1f} GB × (1 − {plan.hardware.headroom:.0%} headroom) = "
            f"{first.usable_bytes / GB:.1f} GB; the worst rank's peak + overhead must stay within it",
        ]
        rows = self.tried
        if len(rows) > SHOWN_ROWS:  # the first counts, then the last few: the arithmetic stays readable
            rows = (*rows[: SHOWN_ROWS - 4], *rows[-4:])
        for row in rows:
            if len(self.tried) > SHOWN_ROWS and row is self.tried[-4]:
                lines.append(f"  … {len(self.tried) - SHOWN_ROWS} more counts, none fits with margin …")
            est = row.estimate
            sign = "≤" if est.total_bytes <= est.usable_bytes else ">"
            if row.fits:
                best = "" if row.layouts_fitting < 2 else f" (fastest of the {row.layouts_fitting} layouts that fit)"
            else:
                best = "" if row.layouts_tried == 1 else f" (least of {row.layouts_tried} layouts)"
            if row.fits_narrowly:  # core.verdict's word for a fit whose range reaches into the headroom
                best += f", range to {est.judgement().range_bytes[1] / GB:,.1f} GB: {NARROW_LABEL.lower()}"
            layout = f", {row.layout}" if row.count > 1 else ""
            worst = f" on the worst rank ({est.worst.label})" if len(est.ranks) > 1 else ""
            host = ""
            if est.judgement().host_limits and est.host is not None:  # the GPUs hold it, the nodes do not
                host = f"; host {est.host.bytes / GB:,.0f} GB > {est.host.capacity_bytes / GB:,.0f} GB per node"
            lines.append(
                f"{row.count:>5} GPU{'s' if row.count > 1 else ''}{_nodes_text(row.plan)}{layout}: "
                f"{est.total_bytes / GB:,.1f} GB per GPU{worst} {sign} {est.usable_bytes / GB:.1f} GB{best}{host}"
                + (" → fits" if row.fits else "")
            )
        found = self.found
        if found is None and self.one_per_machine:
            lines.append(f"{one_per_machine_words(plan)}, no more are tried: change the plan (see the Diagnosis)")
            return tuple(lines)
        if found is None:
            lines.append(f"{self.no_answer_words()}: change the plan (see the Diagnosis)")
            return tuple(lines)
        comp = found.estimate.compute
        lines.append(f"time for {w.tokens:,} tokens: {comp.formula}")
        lines.append(
            f"cost = {comp.hours:,.2f} h × {counted(found.count, 'GPU')} × "
            f"{money(comp.price_per_gpu_hour, comp.currency)} per GPU-hour ({comp.price_source}) = "
            f"{money(comp.cost, comp.currency)}"
        )
        lines += self._beyond_lines()
        return tuple(lines)

    def _beyond_lines(self) -> list[str]:
        """More GPUs than the fewest, where they finish sooner or cost less."""
        found = self.found
        lines: list[str] = []
        if found is None or not self.beyond:
            return lines
        counts = ", ".join(str(r.count) for r in self.beyond)
        lines.append(f"also tried, past the fewest: {counts} GPUs")
        for name, row in (("fastest", self.fastest), ("cheapest", self.cheapest)):
            if row is not None and row is not found:
                comp = row.estimate.compute
                lines.append(
                    f"{name}: {counted(row.count, 'GPU')}{_nodes_text(row.plan)} with {row.layout}, "
                    f"{hours(comp.hours)} and {cost(comp.cost, comp.currency)}"
                )
        return lines

    def _sharded_only(self) -> str:
        return f"; {QUANTISED_BASE_SHARDS_ONLY}" if self.base.quantised_base else ""

    def summary(self) -> str:
        found = self.found
        name = self.tried[0].estimate.gpu.name if self.tried else self.base.hardware.gpu
        if found is None and self.one_per_machine:
            est = self.tried[0].estimate
            return (
                f"{name}: {one_per_machine_words(self.base)}, and one does not fit this plan: "
                f"{est.total_bytes / GB:,.1f} GB > {est.usable_bytes / GB:.1f} GB usable; change the plan."
            )
        if found is None:
            if self.narrow is None:
                return f"No count of {name} up to {self.max_gpus:,} fits this plan" + self._sharded_only() + "."
            return f"{name}: {self.no_answer_words()}."
        comp = found.estimate.compute
        text = (
            f"{found.count} × {name}{_nodes_text(found.plan)} with {found.layout}: "
            f"{found.estimate.total_bytes / GB:.1f} GB per GPU, {hours(comp.hours)} and "
            f"{cost(comp.cost, comp.currency)} "
            f"for {self.base.workload.tokens:,} tokens"
        )
        for label, row in (("fastest", self.fastest), ("cheapest", self.cheapest)):
            if row is not None and row is not found:
                other = row.estimate.compute
                text += (
                    f"; {label}: {counted(row.count, 'GPU')}, {hours(other.hours)}, {cost(other.cost, other.currency)}"
                )
        return text


METHOD_NAMES: Final = {
    Method.FULL: "full fine-tuning",
    Method.LORA: "LoRA",
    Method.QLORA: "QLoRA",
    Method.FROZEN: "frozen layers",
    Method.DORA: "DoRA",
    Method.IA3: "IA3",
    Method.ADAPTER: "LitGPT Adapter",
    Method.ADAPTER_V2: "LitGPT Adapter v2",
    Method.PROMPT_TUNING: "prompt tuning",
    Method.P_TUNING: "P-tuning",
    Method.PREFIX_TUNING: "prefix tuning",
    Method.LN_TUNING: "LN tuning",
    Method.LOHA: "LoHa",
    Method.LOKR: "LoKr",
    Method.VERA: "VeRA",
    Method.ADALORA: "AdaLoRA",
    Method.OFT: "OFT",
    Method.TRAINABLE_TOKENS: "trainable tokens",
    Method.MISS: "MiSS",
    Method.FOURIERFT: "FourierFT",
    Method.ROAD: "RoAd",
    Method.VBLORA: "VB-LoRA",
    Method.RANDLORA: "RandLoRA",
    Method.SHIRA: "SHiRA",
    Method.BOFT: "BOFT",
}


def _beyond(plan: Plan, fewest: int, per_node: int, most: int, model_parallel: bool) -> tuple[CountTried, ...]:
    """The fastest running layout at each count past ``fewest`` up to ``most``."""
    rows = []
    for count in search_counts(per_node, most):
        if count <= fewest:
            continue
        layouts = candidate_layouts(plan, count, per_node=per_node, model_parallel=model_parallel)
        running = [est for est in (estimate(c) for c in layouts) if est.judgement().fits_with_margin]
        if running:
            best = min(running, key=lambda est: est.compute.hours)
            rows.append(CountTried(count, len(layouts), best, len(running)))
    return tuple(rows)


def _nodes_text(plan: Plan) -> str:
    par = plan.parallel
    return f" ({par.nodes} nodes × {par.gpus_per_node})" if par.nodes > 1 else ""


def fewest_gpus(plan: Plan, *, max_gpus: int = MAX_SEARCH_GPUS, model_parallel: bool = True) -> FewestGpus:
    """The fewest GPUs of the plan's card on which some layout fits, and the fastest such layout.

    Counts go 1 to 8 on one node, then whole nodes (the plan's GPUs per node when it already
    spans nodes, else 8); at each count every layout of :func:`candidate_layouts` is
    estimated, and at the first count where any runs with margin (``Judgement.fits_with_margin``: the
    estimate's whole range within the usable memory), the one with the fewest hours is the answer.
    A fit by less than the estimate's uncertainty is kept as the count's row, not taken as the answer
    (:attr:`FewestGpus.narrow`). Each figure is ``estimate()``'s own.
    """
    if isinstance(max_gpus, bool) or not isinstance(max_gpus, int) or not 1 <= max_gpus <= MAX_SEARCH_LIMIT:
        raise PlanError("max_gpus", max_gpus, f"an integer from 1 to {MAX_SEARCH_LIMIT:,}")
    alone = one_per_machine(plan)
    if alone:  # a laptop's or a Mac's GPU: "8 × laptop GPU" is no answer its owner can use
        max_gpus = 1
    per_node = plan.parallel.gpus_per_node if plan.parallel.nodes > 1 else GPUS_PER_NODE
    tried: list[CountTried] = []
    for count in search_counts(per_node, max_gpus):
        layouts = candidate_layouts(plan, count, per_node=per_node, model_parallel=model_parallel)
        estimates = [estimate(candidate) for candidate in layouts]
        running = [est for est in estimates if est.judgement().fits_with_margin]
        if running:
            # The fewest GPUs found: of the layouts that run on them, the one that finishes first
            # (a tensor-parallel split may fit and still be slower than plain FSDP2).
            fastest = min(running, key=lambda est: est.compute.hours)
            tried.append(CountTried(count, len(layouts), fastest, len(running)))
            beyond = _beyond(plan, count, per_node, min(max_gpus, BEYOND_FACTOR * count), model_parallel)
            return FewestGpus(plan, tuple(tried), max_gpus, beyond, one_per_machine=alone)
        if estimates:
            # A layout that fits by less than the uncertainty stands for its count: the Diagnosis' narrow fit.
            closest = [est for est in estimates if est.fits] or estimates
            tried.append(CountTried(count, len(layouts), min(closest, key=lambda est: est.total_bytes)))
    return FewestGpus(plan, tuple(tried), max_gpus, one_per_machine=alone)

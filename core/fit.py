"""Which cards fit: the plan on every catalogue GPU, one to eight of them, sorted by cost.

Each row is :func:`core.estimate.estimate` of the plan with only the card and the count
changed, so its peak, verdict, time and cost are the estimator's own. With more than one
card and a plan that does not shard, the rows shard over the cards (ZeRO-3 / FSDP full
shard) unless ``keep_sharding`` is set: more data-parallel copies of the whole state
never lower the memory per card.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from core.catalogue import GpuSpec, load_gpus
from core.estimate import Estimate, Verdict, estimate
from core.plan import Plan, Strategy

COUNTS: Final = tuple(range(1, 9))
VERDICT_ORDER: Final = {Verdict.FITS: 0, Verdict.OVER_HEADROOM: 1, Verdict.OOM: 2}


@dataclass(frozen=True)
class CardFit:
    plan: Plan  # the plan on this card and count: what "apply" makes current
    estimate: Estimate
    price_from: str = "the plan"  # the source of the price per GPU-hour

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
        return self.estimate.verdict is Verdict.FITS

    @property
    def cost(self) -> float:
        return self.estimate.compute.cost

    @property
    def hours(self) -> float:
        return self.estimate.compute.hours

    @property
    def price(self) -> float:
        return self.plan.hardware.price_per_gpu_hour


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


def _sort_key(row: CardFit) -> tuple[float, int, float, str]:
    # Rounded so that costs equal up to float noise (hours × N cards at 1/N the hours) tie.
    return (round(row.cost, 6), row.count, row.estimate.total_bytes, row.gpu.id)


def cards_for(
    plan: Plan,
    *,
    counts: Iterable[int] = COUNTS,
    gpus: Iterable[GpuSpec] | None = None,
    keep_sharding: bool = False,
    prices: Mapping[str, float] | None = None,
) -> tuple[CardFit, ...]:
    """Every card × count, sorted by cost (then fewer cards, then less memory).

    Each card is priced per GPU-hour from ``prices`` (GPU id -> price), else from the
    catalogue's typical cloud price (``GpuSpec.hourly_price``), else at the plan's own
    ``hardware.price_per_gpu_hour``; each row says which.
    """
    rows = []
    wanted = tuple(counts)
    for gpu in gpus if gpus is not None else load_gpus():
        price, source = _price(gpu, prices)
        for count in wanted:
            candidate = plan_on(plan, gpu.id, count, keep_sharding=keep_sharding, price=price)
            rows.append(CardFit(candidate, estimate(candidate, gpu), source))
    return tuple(sorted(rows, key=_sort_key))


def _price(gpu: GpuSpec, prices: Mapping[str, float] | None) -> tuple[float | None, str]:
    if prices and gpu.id in prices:
        return prices[gpu.id], "given"
    listed = gpu.hourly_price()
    if listed is not None:
        return listed
    return None, "the plan"


def cheapest_fit(rows: Iterable[CardFit]) -> CardFit | None:
    fitting = [r for r in rows if r.fits]
    return min(fitting, key=_sort_key) if fitting else None

"""The tools' long work, as jobs for the worker process: "Which cards fit", "Fewest GPUs" and
writing a report (estimating and diagnosing up to four plans, then the file).

Each is :mod:`core.advice.fit`'s answer, cut down in the worker to what its panel shows: the
cards' search estimates 576 plans, and their full Estimates (3 MB pickled, 160 ms to read
back) would freeze the window while they arrive. Every figure is still the estimator's own;
nothing is computed here that core does not.

This module runs in the worker process: no Qt (import-linter contract in pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from core.advice.fit import cards_for, cheapest_fit, fewest_gpus
from core.catalogue import GpuSpec, load_gpus
from core.errors import PlanFileError
from core.estimate import Mode, Verdict
from core.files.fileio import write_file
from core.files.report import FORMATS, Report, build_report, verdict_colour
from core.plan import Plan, Strategy
from gui.worker.process import report_progress


@dataclass(frozen=True)
class CardsRequest:
    plan: Plan
    keep_sharding: bool


@dataclass(frozen=True)
class CardRow:
    """One card × count, with the figures of :class:`core.advice.fit.CardFit` the table shows."""

    gpu_id: str
    gpu_name: str
    count: int
    sharding: Strategy
    total_bytes: float
    capacity_bytes: float
    verdict: Verdict
    fits: bool
    label: str  # the verdict in core.verdict's words: "Fits narrowly" for a narrow fit
    colour: str  # core.files.report.verdict_colour: a narrow fit's yellow, not a fit's green
    narrow: bool  # the cheapest below is a narrow fit only where none fits with margin (core.verdict)
    hours: float
    price: float
    price_from: str
    currency: str  # the sign price and cost show (CardFit.currency)
    cost: float
    tokens_per_second: float


@dataclass(frozen=True)
class CardsAnswer:
    request: CardsRequest
    rows: tuple[CardRow, ...]  # by cost, as core sorts them
    cheapest: int | None  # the index of the cheapest card that fits, if any


def _counted(gpus: Iterable[GpuSpec], total: int) -> Iterator[GpuSpec]:
    """The catalogue's cards, reporting each one as the search reaches it."""
    for done, gpu in enumerate(gpus):
        report_progress(done, total)
        yield gpu
    report_progress(total, total)


def find_cards(request: CardsRequest) -> CardsAnswer:
    """Every catalogue card × 1-8 for the plan (:func:`core.advice.fit.cards_for`)."""
    gpus = load_gpus()
    fits = cards_for(request.plan, gpus=_counted(gpus, len(gpus)), keep_sharding=request.keep_sharding)
    best = cheapest_fit(fits)
    rows = tuple(
        CardRow(
            gpu_id=fit.gpu.id,
            gpu_name=fit.gpu.name,
            count=fit.count,
            sharding=fit.sharding,
            total_bytes=fit.estimate.total_bytes,
            capacity_bytes=fit.estimate.capacity_bytes,
            verdict=fit.verdict,
            fits=fit.fits,
            label=fit.label,
            colour=verdict_colour(fit.estimate.judgement()),
            narrow=fit.fits_narrowly,
            hours=fit.hours,
            price=fit.price,
            price_from=fit.price_from,
            currency=fit.currency,
            cost=fit.cost,
            tokens_per_second=fit.estimate.compute.tokens_per_second,
        )
        for fit in fits
    )
    return CardsAnswer(request, rows, fits.index(best) if best is not None else None)


@dataclass(frozen=True)
class FewestRequest:
    plan: Plan
    model_parallel: bool


@dataclass(frozen=True)
class FewestAnswer:
    request: FewestRequest
    summary: str
    arithmetic: tuple[str, ...]
    found_plan: Plan | None  # the plan on the fewest GPUs that fit, in the fastest layout
    found_count: int
    found_layout: str


def find_fewest(request: FewestRequest) -> FewestAnswer:
    """The fewest of the plan's card on which some layout fits (:func:`core.advice.fit.fewest_gpus`)."""
    report_progress(0)  # how many counts the search tries is not known before it ends
    answer = fewest_gpus(request.plan, model_parallel=request.model_parallel)
    found = answer.found
    return FewestAnswer(
        request,
        answer.summary(),
        answer.arithmetic(),
        found.plan if found is not None else None,
        found.count if found is not None else 0,
        found.layout if found is not None else "",
    )


@dataclass(frozen=True)
class ReportRequest:
    plans: tuple[tuple[str, Plan], ...]  # (name, plan): one plan, or a comparison of up to four
    title: str
    unit: str  # GB or GiB
    path: str
    kind: str  # html | md | csv | pdf
    mode: Mode = Mode.TRAINING  # the window's mode: a training report or a serving one
    force: bool = False  # the user confirmed replacing a file VRAM Planner did not write


@dataclass(frozen=True)
class ReportAnswer:
    request: ReportRequest
    report: Report | None  # a PDF's contents, for the GUI to draw with Qt; None once the file is written
    error: str = ""  # why the file could not be written (one line)


def write_report(request: ReportRequest) -> ReportAnswer:
    """Build the report (each plan estimated and diagnosed) and write HTML, Markdown or CSV through
    the atomic writer; a PDF's report comes back to be drawn (Qt is the GUI's)."""
    report_progress(0)  # how long the diagnoses take is not known before they end
    report = build_report(list(request.plans), request.title, unit=request.unit, mode=request.mode)
    if request.kind == "pdf":
        return ReportAnswer(request, report)
    try:
        write_file(request.path, FORMATS[request.kind](report), force=request.force)
    except PlanFileError as error:  # every failure of the one writer, a refused target included
        return ReportAnswer(request, None, str(error))
    return ReportAnswer(request, None)

"""The command line's further commands: ``estimate --from CONFIG``, ``fit``, ``fewest-gpus``,
``report``, ``compare``.

Registered from :mod:`core.cli.app`; like it, bad input exits 2 with one line on stderr.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

from core.advice.compare import MAX_PLANS, Comparison, compare
from core.advice.fit import MAX_SEARCH_GPUS, MAX_SEARCH_LIMIT, CardFit, FewestGpus, cards_for, cheapest_fit, fewest_gpus
from core.errors import PlanFileError
from core.estimate import VERDICT_LABELS, estimate
from core.files.comparison import load_named
from core.files.comparison import save as save_comparison
from core.files.importer import import_model
from core.files.planfile import atomic_write_text
from core.files.planfile import load as load_plan
from core.files.report import FORMATS, Report, build_report, to_markdown, value_text
from core.files.runconfig import (
    ModelChoice,
    RunConfig,
    choice_from_catalogue,
    load_run_config,
    plan_from_run,
    resolve_model,
)
from core.plan import Plan
from core.presets import default_plan
from core.units import GB

COMMANDS = ("fit", "fewest-gpus", "report", "compare")


class ConfigUsageError(Exception):
    """A problem with how the commands were called (exit status 2)."""


def register(sub: Any, estimate_parser: argparse.ArgumentParser) -> None:
    """Add ``--from`` to ``estimate`` and the file subcommands to ``sub``."""
    estimate_parser.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="a training config: PEFT adapter_config.json, TrainingArguments/TRL, axolotl, LLaMA-Factory "
        "or torchtune (JSON/YAML); --model or --config names the model when the file's is not found",
    )
    fit = sub.add_parser("fit", help="which cards fit a plan: every catalogue GPU × 1-8, sorted by cost")
    fit.add_argument("plan", metavar="PLAN", help="a plan file (vramplan estimate ... --save PLAN)")
    fit.add_argument("--json", action="store_true", help="machine-readable rows, bytes throughout")
    fit.add_argument("--fits-only", action="store_true", help="only the rows that fit")
    fit.add_argument(
        "--keep-sharding",
        action="store_true",
        help="keep the plan's sharding for several cards (default: FSDP when the plan does not shard)",
    )
    fit.add_argument("--max-count", type=int, default=8, help="largest number of cards per row (1-8)")

    # Every option of ``estimate`` describes the plan here too (--model, --gpu, --strategy, --seq...).
    fewest = sub.add_parser(
        "fewest-gpus",
        parents=[estimate_parser],
        add_help=False,
        help="the fewest GPUs of the plan's card that fit it (whole nodes past 8), the layout, hours and cost",
        description="Search 1-8 GPUs on one node, then whole nodes; at each count the plan's own split, FSDP2, "
        "FSDP2 + tensor parallel 2/4/8 within a node, then + pipeline parallel across nodes. "
        "The plan's options are those of `vramplan estimate`.",
    )
    fewest.add_argument(
        "--max-gpus", type=int, default=MAX_SEARCH_GPUS, help=f"search up to this many GPUs (default {MAX_SEARCH_GPUS})"
    )
    fewest.add_argument(
        "--no-model-parallel", action="store_true", help="shard the state only: no tensor or pipeline parallel"
    )

    report = sub.add_parser("report", help="a report of a plan or a comparison: HTML, PDF, Markdown or CSV")
    report.add_argument("plans", nargs="+", metavar="PLAN", help="plan files or a comparison file (up to 4 plans)")
    kind = report.add_mutually_exclusive_group(required=True)
    for flag, text in (("html", "a self-contained HTML page"), ("pdf", "a PDF (needs the app's Qt)"),
                       ("md", "Markdown"), ("csv", "CSV, one figure per line")):  # fmt: skip
        kind.add_argument(f"--{flag}", metavar="OUT", help=f"write {text} to OUT")
    report.add_argument("--title", help="the report's title")
    report.add_argument("--gib", action="store_true", help="GiB instead of decimal GB")

    comp = sub.add_parser("compare", help="compare up to four plans side by side")
    comp.add_argument("plans", nargs="+", metavar="PLAN", help="plan files or a comparison file (up to 4 plans)")
    shape = comp.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="machine-readable, bytes throughout")
    shape.add_argument("--markdown", action="store_true", help="a Markdown table")
    comp.add_argument("--save", metavar="FILE", help="also save the comparison to FILE")
    comp.add_argument("--gib", action="store_true", help="GiB instead of decimal GB")


# ---- estimate --from ---------------------------------------------------------------
def _model_for(args: argparse.Namespace, run: RunConfig) -> ModelChoice | None:
    if args.model:
        return choice_from_catalogue(args.model, "--model")
    if args.config:
        imported = import_model(args.config)
        return ModelChoice(imported.spec, "", f"--config {imported.source}", None)
    choice = resolve_model(run)
    if choice is not None and choice.spec is None:
        close = f" (closest: {', '.join(choice.candidates)})" if choice.candidates else ""
        raise ConfigUsageError(f"{run.path}: {choice.how}; give --model ID or --config PATH{close}")
    return choice


def plan_from_config(args: argparse.Namespace) -> tuple[Plan, RunConfig, ModelChoice | None]:
    """The plan a ``--from`` config describes, on top of ``--plan`` (or the default plan)."""
    if args.params is not None:
        raise ConfigUsageError("--from takes its model from the file, --model or --config, not --params")
    run = load_run_config(args.from_file)
    choice = _model_for(args, run)
    base = load_plan(args.plan) if args.plan else default_plan()
    return plan_from_run(run, base, choice), run, choice


def run_report(run: RunConfig, choice: ModelChoice | None) -> dict[str, Any]:
    return {
        "file": run.path,
        "kind": run.kind.value,
        "model": run.model_ref,
        "model_found": choice.how if choice is not None else "the file names no model: the plan's is kept",
        "fields": [{"setting": f.setting, "value": _plain(f.value), "source": f.source} for f in run.fields],
        "notes": [{"setting": f.setting, "value": _plain(f.value), "source": f.source} for f in run.notes],
        "not_understood": list(run.unknown),
    }


def _plain(value: object) -> object:
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def render_run(run: RunConfig, choice: ModelChoice | None) -> str:
    lines = [f"From {run.path} ({run.kind_label})"]
    lines.append(f"  model: {choice.how if choice is not None else 'not named in the file; the plan keeps its model'}")
    width = max((len(f.label) for f in run.fields), default=10)
    for f in run.fields:
        lines.append(f"  {f.label:<{width}}  {_shown(f.value):<24} ← {f.source}")
    for f in run.notes:
        lines.append(f"  noted: {f.source}" + (f" = {_shown(f.value)}" if f.value is not None else ""))
    if run.unknown:
        lines.append(f"  not understood ({len(run.unknown)}): " + "; ".join(run.unknown))
    else:
        lines.append("  not understood: none")
    return "\n".join(lines)


def _shown(value: object) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def estimate_from(args: argparse.Namespace, plan_from_args: Any) -> str:
    """``vramplan estimate --from FILE [options]``: the config's plan, then any option overrides it."""
    from core.cli.app import estimate_json_text, render_estimate  # cli imports this module at its top

    base, run, choice = plan_from_config(args)
    # The remaining options override the file; the model options were used above.
    overrides = argparse.Namespace(**{**vars(args), "model": None, "config": None, "params": None, "plan": None})
    plan = plan_from_args(overrides, base)
    result = estimate(plan)
    if args.save:
        from core.files.planfile import save

        save(plan, args.save)
    if args.json:
        document = json.loads(estimate_json_text(result))
        document["from_config"] = run_report(run, choice)
        return json.dumps(document, indent=2, allow_nan=False) + "\n"
    return render_run(run, choice) + "\n\n" + render_estimate(result, gib=args.gib) + "\n"


# ---- fit ---------------------------------------------------------------------------
def fit_rows_json(rows: tuple[CardFit, ...]) -> list[dict[str, Any]]:
    return [
        {
            "gpu": r.gpu.id,
            "gpu_name": r.gpu.name,
            "count": r.count,
            "sharding": r.sharding.value,
            "peak_bytes": round(r.estimate.peak_bytes),
            "total_bytes": round(r.estimate.total_bytes),
            "capacity_bytes": round(r.estimate.capacity_bytes),
            "verdict": r.verdict.value,
            "hours": r.hours,
            "cost": r.cost,
            "price_per_gpu_hour": r.price,
            "price_source": r.price_from,
            "tokens_per_second": r.estimate.compute.tokens_per_second,
        }
        for r in rows
    ]


def render_fit(plan: Plan, rows: tuple[CardFit, ...]) -> str:
    best = cheapest_fit(rows)
    lines = [
        f"{plan.model.name} · {plan.method.value} · {plan.preset.value} · micro-batch "
        f"{plan.workload.micro_batch} × {plan.workload.seq_len:,} tokens; cards priced from the catalogue "
        f"where it has a price (p), else at the plan's {plan.hardware.price_per_gpu_hour:g} per GPU-hour",
        f"  {'GPU':<30} {'×':>2} {'sharding':<8} {'per GPU':>10} {'of':>9}  {'verdict':<13} {'time':>9} "
        f"{'$/GPU-h':>9} {'cost':>10}",
    ]
    for r in rows:
        mark = "*" if r is best else " "
        lines.append(
            f"{mark} {r.gpu.name[:30]:<30} {r.count:>2} {r.sharding.value:<8} "
            f"{r.estimate.total_bytes / GB:>7.1f} GB {r.estimate.capacity_bytes / GB:>6.1f} GB  "
            f"{VERDICT_LABELS[r.verdict]:<13} {r.hours:>7.1f} h {r.price:>7.2f}"
            f"{' ' if r.price_from == 'the plan' else 'p'} {r.cost:>10,.2f}"
        )
    lines.append(f"* cheapest that fits: {best.gpu.name} × {best.count}" if best else "no card in the catalogue fits")
    return "\n".join(lines)


def _json_text(data: Any) -> str:
    """Valid JSON always: a non-finite figure (no throughput on a card without the dtype) is null."""
    from core.cli.app import _finite_json  # cli imports this module at its top

    return json.dumps(_finite_json(data, "", []), indent=2, allow_nan=False) + "\n"


def run_command(args: argparse.Namespace) -> str:
    """The file subcommands; returns what they print."""
    if args.command == "fit":
        if not 1 <= args.max_count <= 8:
            raise ConfigUsageError(f"--max-count: {args.max_count} is not allowed; expected 1 to 8")
        plan = load_plan(args.plan)
        rows = cards_for(plan, counts=range(1, args.max_count + 1), keep_sharding=args.keep_sharding)
        if args.fits_only:
            rows = tuple(r for r in rows if r.fits)
        if args.json:
            return _json_text(fit_rows_json(rows))
        return render_fit(plan, rows) + "\n"
    if args.command == "fewest-gpus":
        return _fewest(args)
    named = load_named_plans(args.plans)
    if args.command == "report":
        return _report(args, named)
    return _compare(args, named)


# ---- fewest-gpus ------------------------------------------------------------------------
def fewest_json(answer: FewestGpus) -> dict[str, Any]:
    found = answer.found

    def row(est: Any, count: int, layout: str) -> dict[str, Any]:
        par = est.plan.parallel
        return {
            "count": count,
            "nodes": par.nodes,
            "gpus_per_node": par.gpus_per_node,
            "layout": layout,
            "strategy": par.strategy.value,
            "tensor_parallel": par.tensor_parallel,
            "pipeline_parallel": par.pipeline_parallel,
            "data_parallel": par.data_parallel,
            "total_bytes": round(est.total_bytes),
            "usable_bytes": round(est.usable_bytes),
            "verdict": est.verdict.value,
        }

    result: dict[str, Any] = {
        "gpu": answer.base.hardware.gpu,
        "tokens": answer.base.workload.tokens,
        "max_gpus": answer.max_gpus,
        "found": None,
        "tried": [row(t.estimate, t.count, t.layout) for t in answer.tried],
        "arithmetic": list(answer.arithmetic()),
    }
    if found is not None:
        comp = found.estimate.compute
        result["found"] = {
            **row(found.estimate, found.count, found.layout),
            "peak_bytes": round(found.estimate.peak_bytes),
            "hours": comp.hours,
            "cost": comp.cost,
            "price_per_gpu_hour": found.plan.hardware.price_per_gpu_hour,
        }
    return result


def _fewest(args: argparse.Namespace) -> str:
    from core.cli.app import plan_from_args  # cli imports this module at its top

    if not 1 <= args.max_gpus <= MAX_SEARCH_LIMIT:
        raise ConfigUsageError(f"--max-gpus: {args.max_gpus} is not allowed; expected 1 to {MAX_SEARCH_LIMIT:,}")
    plan = plan_from_config(args)[0] if args.from_file else plan_from_args(args)
    answer = fewest_gpus(plan, max_gpus=args.max_gpus, model_parallel=not args.no_model_parallel)
    if args.save and answer.found is not None:
        from core.files.planfile import save

        save(answer.found.plan, args.save)
    if args.json:
        return _json_text(fewest_json(answer))
    return "\n".join([answer.summary(), "", *answer.arithmetic()]) + "\n"


# ---- report and compare --------------------------------------------------------------
PdfWriter = Callable[[Report, str], None]
_pdf_writer: list[PdfWriter] = []


def set_pdf_writer(writer: PdfWriter) -> None:
    """The GUI layer registers its Qt PDF writer here (core never imports Qt)."""
    _pdf_writer[:] = [writer]


def load_named_plans(paths: Sequence[str]) -> list[tuple[str, Plan]]:
    named = load_named(paths)
    if not 1 <= len(named) <= MAX_PLANS:
        raise ConfigUsageError(f"{len(named)} plans given; a comparison holds 1 to {MAX_PLANS}")
    return named


def _report(args: argparse.Namespace, named: list[tuple[str, Plan]]) -> str:
    report = build_report(named, args.title or "", unit="GiB" if args.gib else "GB")
    if args.pdf:
        if not _pdf_writer:
            raise ConfigUsageError(
                "PDF reports are drawn with the app's Qt (PySide6), which is not available here; "
                "use --html and print it, or run the installed vramplan with its GUI"
            )
        _pdf_writer[0](report, args.pdf)
        return ""
    kind, path = ("html", args.html) if args.html else ("md", args.md) if args.md else ("csv", args.csv)
    try:
        atomic_write_text(path, FORMATS[kind](report))
    except OSError as exc:
        raise PlanFileError(path, f"cannot be written ({exc.strerror or exc})") from None
    return ""


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    best = comparison.cheapest_fit()
    return {
        "plans": list(comparison.names),
        "rows": [
            {"key": r.key, "label": r.label, "kind": r.kind.value, "values": list(r.values), "differs": r.differs}
            for r in comparison.rows()
        ],
        "phases": {
            name: list(values) for name, values in zip(comparison.phase_names(), comparison.phase_bytes(), strict=True)
        },
        "cheapest_fit": comparison.names[best] if best is not None else None,
    }


def render_comparison(comparison: Comparison, unit: str) -> str:
    best = comparison.cheapest_fit()
    rows = comparison.rows()
    names = [f"{i + 1}. {n}" for i, n in enumerate(comparison.names)]
    cells = [[value_text(r, v, unit) for v in r.values] for r in rows]
    widths = [max([len(names[i])] + [len(c[i]) for c in cells]) for i in range(len(names))]
    label_w = max(len(r.label) for r in rows) + 2
    lines = [" " * label_w + "  ".join(n.rjust(w) for n, w in zip(names, widths, strict=True))]
    for row, values in zip(rows, cells, strict=True):
        mark = "* " if len(names) > 1 and row.differs else "  "
        lines.append(
            f"{mark}{row.label:<{label_w - 2}}" + "  ".join(v.rjust(w) for v, w in zip(values, widths, strict=True))
        )
    lines.append("")
    if len(names) > 1:
        lines.append("* differs between the plans")
    lines.append(f"cheapest that fits: {names[best]}" if best is not None else "none of these plans fits its card")
    return "\n".join(lines)


def _compare(args: argparse.Namespace, named: list[tuple[str, Plan]]) -> str:
    comparison = compare(named)
    if args.save:
        save_comparison(comparison, args.save)
    unit = "GiB" if args.gib else "GB"
    if args.json:
        return _json_text(comparison_json(comparison))
    if args.markdown:
        return to_markdown(build_report(named, unit=unit))
    return render_comparison(comparison, unit) + "\n"

"""``vramplan fewest-gpus``: the fewest GPUs of the plan's card that fit it, the layout,
hours and cost. The plan's options are those of ``vramplan estimate``."""

from __future__ import annotations

import argparse
from typing import Any

from core.advice.diagnosis import diagnose
from core.advice.fit import MAX_SEARCH_GPUS, MAX_SEARCH_LIMIT, FewestGpus, fewest_gpus
from core.cli.parser import UsageError
from core.cli.plans import plan_from_args, plan_from_config
from core.cli.render import json_text
from core.files.planfile import save as save_plan
from core.verdict import NARROW_LABEL


def register(sub: Any, estimate_parser: argparse.ArgumentParser) -> None:
    # Every option of ``estimate`` describes the plan here too (--model, --gpu, --strategy, --seq...).
    fewest = sub.add_parser(
        "fewest-gpus",
        parents=[estimate_parser],
        add_help=False,
        help="the fewest GPUs of the plan's card that fit it (whole nodes past 8), the layout, hours and cost",
        description="Search 1-8 GPUs on one node, then whole nodes; at each count the plan's own split, FSDP2, "
        "FSDP2 + tensor parallel 2/4/8 within a node, then + pipeline parallel across nodes "
        "(a bitsandbytes base, QLoRA's: sharding only). "
        "The plan's options are those of `vramplan estimate`.",
    )
    fewest.add_argument(
        "--max-gpus", type=int, default=MAX_SEARCH_GPUS, help=f"search up to this many GPUs (default {MAX_SEARCH_GPUS})"
    )
    fewest.add_argument(
        "--no-model-parallel", action="store_true", help="shard the state only: no tensor or pipeline parallel"
    )


def run(args: argparse.Namespace) -> str:
    if not 1 <= args.max_gpus <= MAX_SEARCH_LIMIT:
        raise UsageError(f"--max-gpus: {args.max_gpus} is not allowed; expected 1 to {MAX_SEARCH_LIMIT:,}")
    plan = plan_from_config(args)[0] if args.from_file else plan_from_args(args)
    answer = fewest_gpus(plan, max_gpus=args.max_gpus, model_parallel=not args.no_model_parallel)
    if args.save and answer.found is not None:
        save_plan(answer.found.plan, args.save, force=args.force)
    remedies = _one_card_remedies(answer)
    if args.json:
        return json_text({**fewest_json(answer), "one_per_machine": answer.one_per_machine, "remedies": remedies})
    lines = [answer.summary(), "", *answer.arithmetic()]
    if remedies:
        lines += ["", "what would make it fit on the one card (the diagnosis):", *(f"  - {r}" for r in remedies)]
    return "\n".join(lines) + "\n"


SHOWN_REMEDIES = 3  # the cheapest few; the window's Diagnosis and `vramplan report` list them all


def _one_card_remedies(answer: FewestGpus) -> list[str]:
    """A card that comes one per machine and does not fit: the diagnosis' cheapest changes that fit, or
    where none fits alone, the changes it puts together (none of them another card: the machine takes none)."""
    if not answer.one_per_machine or answer.found is not None:
        return []
    d = diagnose(answer.base)
    # A change that fits narrowly is said so, in core.verdict's words (the Diagnosis badges it, the report words it).
    fitting = [f"{r.title} ({NARROW_LABEL.lower()})" if r.fits_narrowly else r.title for r in d.remedies if r.fits]
    fitting = fitting[:SHOWN_REMEDIES]
    if not fitting and d.combination is not None:
        fitting = [f"together: {d.combination.title}"]
    return fitting


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
            "fits_with_margin": est.judgement().fits_with_margin,  # False for a narrow fit (core.verdict)
        }

    result: dict[str, Any] = {
        "gpu": answer.base.hardware.gpu,
        "tokens": answer.base.workload.tokens,
        "max_gpus": answer.max_gpus,
        "found": None,
        "tried": [row(t.estimate, t.count, t.layout) for t in answer.tried],
        "arithmetic": list(answer.arithmetic()),
    }

    def answer_row(tried: Any) -> dict[str, Any]:
        comp = tried.estimate.compute
        return {
            **row(tried.estimate, tried.count, tried.layout),
            "peak_bytes": round(tried.estimate.peak_bytes),
            "hours": comp.hours,
            "cost": comp.cost,
            "price_per_gpu_hour": tried.plan.hardware.price_per_gpu_hour,
        }

    result["beyond"] = [answer_row(t) for t in answer.beyond]
    for key, tried in (("found", found), ("fastest", answer.fastest), ("cheapest", answer.cheapest)):
        result[key] = answer_row(tried) if tried is not None else None
    return result

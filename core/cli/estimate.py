"""``vramplan estimate``: a plan's memory, time and serving needs, from its options or a
training config (``--from``), as text or JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

from core.cli.parser import add_force_option, add_plan_options, text_arg
from core.cli.plans import mode_for, plan_from_args, plan_from_config, without_model
from core.cli.render import estimate_json_text, render_estimate, render_serving
from core.estimate import Mode, estimate
from core.files.planfile import save as save_plan
from core.files.runconfig import ModelChoice, RunConfig


def register(sub: Any) -> argparse.ArgumentParser:
    """The ``estimate`` parser (``fewest-gpus`` takes every one of its options too)."""
    est: argparse.ArgumentParser = sub.add_parser("estimate", help="estimate memory, time and serving needs of a plan")
    add_plan_options(est)
    out = est.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="machine-readable output, bytes throughout")
    out.add_argument("--gib", action="store_true", help="show GiB instead of decimal GB")
    out.add_argument("--save", type=text_arg, metavar="FILE", help="also save the plan to FILE")
    add_force_option(out)
    est.add_argument(
        "--from",
        dest="from_file",
        type=text_arg,
        metavar="FILE",
        help="a training config: PEFT adapter_config.json, TrainingArguments/TRL, axolotl, LLaMA-Factory, "
        "torchtune, Megatron-Bridge (JSON/YAML) or torchtitan (TOML); --model or --config names the model "
        "when the file's is not found",
    )
    return est


def run(args: argparse.Namespace) -> str:
    args.mode = mode_for(args).value  # --mode, else the plan file's, else training
    if args.from_file:
        return _estimate_from(args)
    plan = plan_from_args(args)
    result = estimate(plan)
    if args.save is not None:
        save_plan(plan, args.save, force=args.force, mode=Mode(args.mode))
    if args.json:
        return estimate_json_text(result, Mode(args.mode))
    if args.mode == "inference":
        return render_serving(result, gib=args.gib) + "\n"
    return render_estimate(result, gib=args.gib) + "\n"


def _estimate_from(args: argparse.Namespace) -> str:
    """``vramplan estimate --from FILE [options]``: the config's plan, then any option overrides it."""
    base, run_config, choice = plan_from_config(args)
    # The remaining options override the file; the model options were used above.
    plan = plan_from_args(without_model(args), base)
    result = estimate(plan)
    if args.save:
        save_plan(plan, args.save, force=args.force, mode=Mode(args.mode))
    if args.json:
        document = json.loads(estimate_json_text(result, Mode(args.mode)))
        document["from_config"] = run_report(run_config, choice)
        return json.dumps(document, indent=2, allow_nan=False) + "\n"
    return render_run(run_config, choice) + "\n\n" + render_estimate(result, gib=args.gib) + "\n"


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

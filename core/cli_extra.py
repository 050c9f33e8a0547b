"""The command line's file commands: ``estimate --from CONFIG``, ``fit``, ``report``, ``compare``.

Registered from :mod:`core.cli`; like it, bad input exits 2 with one line on stderr.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from core.estimate import estimate
from core.importer import import_model
from core.plan import Plan
from core.planfile import load as load_plan
from core.presets import default_plan
from core.runconfig import ModelChoice, RunConfig, choice_from_catalogue, load_run_config, plan_from_run, resolve_model

COMMANDS = ("fit", "report", "compare")


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


def estimate_from(args: argparse.Namespace, out: TextIO, plan_from_args: Any) -> None:
    """``vramplan estimate --from FILE [options]``: the config's plan, then any option overrides it."""
    from core.cli import estimate_to_json, render_estimate  # cli imports this module at its top

    base, run, choice = plan_from_config(args)
    # The remaining options override the file; the model options were used above.
    overrides = argparse.Namespace(**{**vars(args), "model": None, "config": None, "params": None, "plan": None})
    plan = plan_from_args(overrides, base)
    result = estimate(plan)
    if args.save:
        from core.planfile import save

        save(plan, args.save)
    if args.json:
        document = estimate_to_json(result)
        document["from_config"] = run_report(run, choice)
        out.write(json.dumps(document, indent=2) + "\n")
    else:
        out.write(render_run(run, choice) + "\n\n" + render_estimate(result, gib=args.gib) + "\n")


def run_command(args: argparse.Namespace, out: TextIO) -> int:
    """The file subcommands; returns the exit status."""
    raise ConfigUsageError(f"{args.command} is not available yet")

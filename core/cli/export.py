"""``vramplan export --to TARGET``: the plan as the config or command of the tool that runs it.

The plan comes from the options of ``vramplan estimate`` (``--model``, ``--plan FILE``, a
training config with ``--from``...); :func:`core.files.launch.export` writes the text. The
text goes to stdout, or to ``--out FILE`` through the one atomic writer; the plan fields the
target cannot express go to stderr, one "field — why" a line (in ``--json``, inside the JSON).
"""

from __future__ import annotations

import argparse
import os
import shlex
from typing import Any, Final

from core.cli.output import say
from core.cli.parser import UsageError, text_arg
from core.cli.plans import plan_from_args, plan_from_config, without_model
from core.cli.render import json_text
from core.errors import one_line
from core.estimate import gpu_for
from core.files.fileio import write_file
from core.files.launch import DEFAULT_COMMAND, TARGET_LABELS, Export, Target, export
from core.files.model_source import default_model_ref
from core.files.planfile import save as save_plan
from core.plan import Plan

MAX_REF_CHARS: Final = 500  # a Hub id is at most 96 + 1 + 96; a folder path a few hundred
MAX_COMMAND_CHARS: Final = 4000
MAX_COMMAND_WORDS: Final = 200


def register(sub: Any, estimate_parser: argparse.ArgumentParser) -> None:
    targets = ", ".join(f"{t.value} ({TARGET_LABELS[t]})" for t in Target)
    exporter = sub.add_parser(
        "export",
        parents=[estimate_parser],  # the plan: --model, --plan FILE, --from CONFIG and every input
        add_help=False,
        help="the plan as the config or command of the tool that runs it (axolotl, TRL, DeepSpeed, vllm...)",
        description=f"Write the plan as a launch config or command. Targets: {targets}. The plan's options "
        "are those of `vramplan estimate`; what the target cannot express is listed on stderr.",
    )
    out = exporter.add_argument_group("export")
    out.add_argument("--to", required=True, choices=[t.value for t in Target], metavar="TARGET", help="the tool")
    out.add_argument(
        "--model-ref",
        type=text_arg,
        metavar="REF",
        help="the Hub id or folder the file names for the model (default: the catalogue's Hub id, or the "
        "Hub id of a model read from the Hugging Face cache)",
    )
    out.add_argument("--out", type=text_arg, metavar="FILE", help="write the text to FILE instead of stdout")
    out.add_argument(
        "--command",
        dest="launch_command",
        type=text_arg,
        metavar="CMD",
        help="torchrun / accelerate-launch: the script and its arguments (default: train.py)",
    )


def run(args: argparse.Namespace) -> str:
    target = Target(args.to)
    if args.out and os.path.lexists(args.out) and not args.force:
        raise UsageError(f"--out: {one_line(args.out)} exists; --force replaces it")
    plan = _plan(args)
    gpu_for(plan)  # an unknown card is refused here as the estimate refuses it, not written out
    result = export(plan, target, model_ref=_model_ref(args, plan), command=_command(args.launch_command))
    if args.save:
        save_plan(plan, args.save)
    if args.json:
        document = {
            "target": target.value,
            "label": result.label,
            "suffix": result.suffix,
            "text": result.text,
            "unexpressed": [{"field": u.field, "why": u.why} for u in result.unexpressed],
        }
        if args.out:
            _write(args.out, result.text, args.force)
        return json_text(document)
    if args.out:  # written before the notes about it: a refused write is then the one message
        _write(args.out, result.text, args.force)
    _say_unexpressed(result)
    if args.out:
        say(f"vramplan: wrote {one_line(args.out)} ({result.label})\n")
        return ""
    return result.text


def _plan(args: argparse.Namespace) -> Plan:
    if args.from_file:
        base = plan_from_config(args)[0]
        return plan_from_args(without_model(args), base)  # the other options override the file
    return plan_from_args(args)


def _model_ref(args: argparse.Namespace, plan: Plan) -> str | None:
    if args.model_ref is not None:
        ref: str = args.model_ref.strip()
        if len(ref) > MAX_REF_CHARS or not ref.isprintable():
            raise UsageError(f"--model-ref: one line of at most {MAX_REF_CHARS} characters is expected")
        return ref
    return default_model_ref(plan)  # a model read from the cache: its Hub id


def _command(text: str | None) -> tuple[str, ...]:
    if text is None:
        return DEFAULT_COMMAND
    if len(text) > MAX_COMMAND_CHARS:
        raise UsageError(f"--command: {len(text):,} characters; at most {MAX_COMMAND_CHARS:,}")
    try:
        words = tuple(shlex.split(text))
    except ValueError as exc:
        raise UsageError(f"--command: {exc}") from None
    if not words or len(words) > MAX_COMMAND_WORDS:
        raise UsageError(f"--command: 1 to {MAX_COMMAND_WORDS} words are expected")
    return words


def _say_unexpressed(result: Export) -> None:
    if not result.unexpressed:
        return
    say(f"vramplan: the {result.label} cannot express {len(result.unexpressed)} of the plan's fields:\n")
    for item in result.unexpressed:
        say(f"  {item.field} — {item.why}\n")


def _write(path: str, text: str, force: bool) -> None:
    """Through the one atomic writer: a FIFO, a device or a read-only file is refused, and an
    existing file only with --force (checked in :func:`run` before the work)."""
    write_file(path, text, force=force)

"""The command line's parser: the plan options built from the input table, and reading them back.

Every plan input of :mod:`core.inputs` with flags becomes one option, grouped as the help
shows them; its value is stored under the input's attribute path (``workload.micro_batch``)
and :func:`given_inputs` hands back the ones given, as the Plan's types. The options that
are not plan inputs (where the model comes from, old spellings, shorthands, the output)
are the few written here by hand.
"""

from __future__ import annotations

import argparse
import functools
import sys
from enum import Enum
from typing import Any, NoReturn

from core import __version__
from core.cli.output import write_output
from core.errors import one_line
from core.inputs import INPUTS, Input, Kind, Precision
from core.units import parse_count
from core.verdict import Mode


class UsageError(Exception):
    """A problem with how the command was called (exit status 2)."""


class CommandParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def _print_message(self, message: str, file: Any = None) -> None:
        # --help and --version: through the same output guard as every subcommand.
        if message:
            write_output(message, sys.stdout if file is None else file)


def text_arg(value: str) -> str:
    """A file, id or list argument: an empty one is a mistake, never "use the default"."""
    if not value.strip():
        raise argparse.ArgumentTypeError("an empty value is not allowed")
    return value


def add_mode_option(parser: argparse.ArgumentParser | Any, help_text: str) -> None:
    """--mode: what is judged (core.verdict.Mode); estimate, compare and report take the one option.
    Not given, it is None: the plan files' own mode, else a training step (core.cli.plans.mode_for)."""
    choices = [m.value for m in Mode]
    shown = f"{help_text} (default: the plan file's, else training)"
    parser.add_argument("--mode", choices=choices, default=None, help=shown)


def add_force_option(parser: argparse.ArgumentParser | Any) -> None:
    """--force: the one way the command line replaces a file VRAM Planner did not write."""
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace the output file even if VRAM Planner did not write it (without it, such a file is kept)",
    )


def count_arg(text: str) -> int:
    """A count for --params, --trainable and --tokens: the one parser the window uses too."""
    try:
        return parse_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{one_line(text)!r} {exc}") from None


def targets_arg(value: str) -> tuple[str, ...]:
    """--lora-targets: a comma list (q_proj,v_proj, all-linear or all-linear,lm_head)."""
    targets = tuple(t.strip() for t in text_arg(value).split(",") if t.strip())
    if not targets:
        raise argparse.ArgumentTypeError("an empty list is not allowed (e.g. q_proj,v_proj or all-linear)")
    return targets


def new_parser() -> tuple[CommandParser, Any]:
    """The ``vramplan`` parser and its subcommands' action (``add_parser`` on it)."""
    parser = CommandParser(prog="vramplan", description="Will a training or serving run fit in GPU memory?")
    parser.add_argument("--version", action="version", version=f"vramplan {__version__}")
    return parser, parser.add_subparsers(dest="command", parser_class=CommandParser)


# Argument groups in the order --help shows them, by the part of the Plan an input is in;
# the inputs whose group is not their path's are named.
GROUPS = {
    "model": "model (one of)",
    "": "method",
    "lora": "method",
    "workload": "workload",
    "hardware": "hardware",
    "inference": "serving",
    "parallel": "parallelism (training); --tensor/--pipeline-parallel also serve --mode inference",
    "lesson": "accounting",
}
_GROUP_OF_INPUT = {"accounting": "lesson"}
_TYPES = {
    Kind.INT: int,
    Kind.COUNT: count_arg,
    Kind.FLOAT: float,
    Kind.TEXT: text_arg,
    Kind.TARGETS: targets_arg,
    Kind.SETTING: str,  # the plan checks it as the library would; empty: its defaults
}


def add_plan_options(parser: argparse.ArgumentParser) -> None:
    """Every plan input's option, plus the hand-written ones beside them."""
    groups = {key: parser.add_argument_group(title) for key, title in GROUPS.items()}
    model = groups["model"]
    model.add_argument("--model", "-m", type=text_arg, help="catalogue id, e.g. llama-3.1-8b (see `vramplan models`)")
    model.add_argument("--config", type=text_arg, metavar="PATH", help="a Hugging Face config.json or model folder")
    model.add_argument("--plan", type=text_arg, metavar="FILE", help="a saved plan file; other options override it")
    method = groups[""]
    method.add_argument("--dora", action="store_true", help="same as --method dora (PEFT use_dora=True)")
    method.add_argument(
        "--precision",
        choices=[p.value for p in Precision],
        help="the old one-word setting (a preset)",
    )
    add_mode_option(groups["inference"], "which estimate to print")
    groups["inference"].add_argument(
        "--limit-mm-per-prompt",
        type=text_arg,
        metavar="JSON",
        help="vLLM's spelling: a JSON object of per-modality limits; every one 0 (e.g. '{\"image\":0}') "
        "= --text-only, anything else = images allowed",
    )
    groups["inference"].add_argument(
        "--cpu-moe",
        action="store_true",
        help="llama.cpp: keep every layer's routed experts in host RAM (= --n-cpu-moe past the layer count)",
    )
    parallel = groups["parallel"]
    parallel.add_argument(
        "--gpus", type=int, dest="gpus_total", metavar="N", help="GPUs on one node (= --gpus-per-node N)"
    )
    parallel.add_argument("--sharding", choices=["none", "zero1", "zero2", "zero3"], help="old name of --strategy")
    groups["lesson"].add_argument(
        "--lesson", action="store_true", help="the lesson's accounting (typed activations); = --accounting lesson"
    )
    for spec in INPUTS:
        if spec.flags:
            _add_input(groups[_GROUP_OF_INPUT.get(spec.path, spec.group.partition(".")[0])], spec)


def _add_input(group: Any, spec: Input) -> None:
    options: dict[str, Any] = {"dest": spec.path, "help": spec.help.replace("%", "%%")}
    if spec.kind is Kind.BOOL or spec.cli_switch:
        options.update(action=argparse.BooleanOptionalAction, default=None)
    elif spec.kind is Kind.ENUM:
        options["choices"] = list(spec.cli_choices or [e.value for e in spec.enum])
        options["type"] = functools.partial(_enum_text, spec.enum)
    else:
        long_name = next(f for f in spec.flags if f.startswith("--"))
        options.update(type=_TYPES[spec.kind], metavar=spec.metavar or long_name[2:].upper().replace("-", "_"))
    group.add_argument(*spec.flags, **options)


def _enum_text(enum: type[Enum], text: str) -> str:
    """A choice as the enum spells it now: an old spelling the enum still reads (``--torch-version 2.8+``, which
    became "2.8-2.13" when 2.14 got its own rules) is taken as the value it reads as; anything else is left for
    argparse to refuse with the list of choices."""
    try:
        return str(enum(text).value)
    except ValueError:
        return text


def given_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """{attribute path: value} of the plan inputs given on the command line, as the Plan
    holds them (an enum for its text; a switch stays True / False)."""
    given: dict[str, Any] = {}
    for spec in INPUTS:
        value = getattr(args, spec.path, None)
        if value is None:
            continue
        if spec.cli_factor != 1.0:
            value = value * spec.cli_factor  # typed in the command line's unit (GiB), held in the plan's (bytes)
        given[spec.path] = spec.enum(value) if spec.kind is Kind.ENUM and not spec.cli_switch else value
    return given

"""``vramplan import-command``: a ``vllm serve`` / SGLang launch command read into a serving plan and estimated.

The command comes as one argument (quoted) or from ``--file FILE`` (``-``: stdin);
:func:`core.files.launch.serve_command.read_command` reads it. Printed: what each flag set, the flags with no
effect on memory or speed (each with its own reason, the Paste dialog's line: ``FlagNote.ignored_line``), the
engine's flags the plan cannot express (each with why), every word not understood, then the serving estimate. The
card and anything the command does not say come from the other options (``--gpu``, ``--plan FILE``...), which also
override what the command says; ``--model`` replaces the command's model.
``--save FILE`` writes the plan (never over an existing file without ``--force``). A vLLM or SGLang ``--config
FILE`` in the command is read (relative to the ``--file``'s folder, else the working folder); ``--file X.yaml
--engine vllm`` (or ``sglang``) reads such a file alone, as ``vllm serve --config X.yaml``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from core.cli.parser import UsageError, text_arg
from core.cli.plans import base_plan, plan_from_args, without_model
from core.cli.render import estimate_json_text, render_serving
from core.errors import PlanError, PlanFileError, one_line
from core.estimate import estimate
from core.files.fileio import read_regular_file
from core.files.launch.serve_command import (
    CONFIG_SUFFIXES,
    MAX_COMMAND_CHARS,
    CommandPlan,
    CommandRead,
    ConfigLoader,
    command_text,
    plan_from_command,
    read_command,
)
from core.files.planfile import save as save_plan
from core.files.runconfig.reading import MAX_CONFIG_BYTES
from core.inputs import SglangVersion, VllmVersion
from core.verdict import Mode

DEFAULT_MODEL: Final = "llama-2-7b"  # base_plan's model; the command's replaces it


def register(sub: Any, estimate_parser: argparse.ArgumentParser) -> None:
    importer = sub.add_parser(
        "import-command",
        parents=[estimate_parser],  # the card, --plan FILE and every input: what the command does not say
        add_help=False,
        help="a vLLM / SGLang / llama.cpp / Ollama launch command read into a serving plan, every flag not used listed",
        description="Read a `vllm serve`, `python -m vllm.entrypoints.openai.api_server`, `python -m "
        "sglang.launch_server` / `sglang serve`, `llama-server` / `llama-cli` or `ollama serve` / `ollama run` command "
        "(a docker run "
        "around it, KEY=VALUE words in front, backslash continuations, an Ollama Modelfile) into a serving plan and "
        "print its estimate; a vLLM or SGLang --config YAML it names is read too (--file X.yaml --engine vllm or "
        "sglang: the YAML alone). "
        "The flags that change nothing modelled, those the plan cannot express and the words not understood are "
        "listed. The other options set what the command does not (the card: --gpu) and override what it does.",
    )
    given = importer.add_argument_group("launch command")
    given.add_argument("launch_text", nargs="?", metavar="COMMAND", help="the command, quoted as one argument")
    given.add_argument(
        "--file", dest="command_file", type=text_arg, metavar="FILE", help="read the command from FILE (-: stdin)"
    )


def run(args: argparse.Namespace) -> str:
    if args.from_file:
        raise UsageError("--from reads a training config; give the launch command instead")
    text = _text(args)
    if args.save and os.path.lexists(args.save) and not args.force:
        raise UsageError(f"--save: {one_line(args.save)} exists; --force replaces it")
    folder = Path(args.command_file).parent if args.command_file not in (None, "-") else Path.cwd()
    args.mode = Mode.INFERENCE.value
    keep_model = any(getattr(args, name, None) is not None for name in ("model", "config", "model.params_override"))
    base = base_plan(args if keep_model or args.plan else argparse.Namespace(**{**vars(args), "model": DEFAULT_MODEL}))
    # the flags are checked against the plan's release (--vllm-version / --sglang-version, else --plan's) where the
    # text names none
    given = getattr(args, "inference.vllm_version", None)
    line = VllmVersion(given) if given is not None else base.inference.vllm_version
    given_sglang = getattr(args, "inference.sglang_version", None)
    release = SglangVersion(given_sglang) if given_sglang is not None else base.inference.sglang_version
    read = read_command(text, load_config=config_loader(folder), vllm_version=line, sglang_version=release)
    read = replace(read, notes=(*read.notes, *_release_notes(read, given, given_sglang)))
    if given is not None or given_sglang is not None:  # the command is read onto the release the options name,
        with contextlib.suppress(PlanError):  # which may take what the default's does not (int4 KV from vLLM 0.25)
            base = base.with_inference(vllm_version=line, sglang_version=release)
    built = plan_from_command(read, base, keep_model=keep_model)
    try:
        plan = plan_from_args(without_model(args), built.plan)  # the options override the command
    except PlanError as exc:  # the release the options name refuses what the command asks (mxfp4 on vLLM 0.8)
        if not read.stops:
            raise
        raise PlanFileError("the launch command", f"{read.stops}. As a plan: {exc}") from None
    result = estimate(plan)
    if args.save:
        save_plan(plan, args.save, force=args.force, mode=Mode.INFERENCE)
    if args.json:
        document = json.loads(estimate_json_text(result, Mode.INFERENCE))
        document["from_command"] = command_report(read, built)
        return json.dumps(document, indent=2, allow_nan=False) + "\n"
    saved = f"\nSaved the plan to {one_line(args.save)}\n" if args.save else ""
    return render_command(read, built) + "\n\n" + render_serving(result, gib=args.gib) + "\n" + saved


def _release_notes(read: CommandRead, vllm: str | None, sglang: str | None) -> list[str]:
    """Where the text names a release (an image's tag, an export's header) and the option another: the flags were
    checked against the text's, the plan takes the option's (the options override the command), said once."""
    notes = []
    for key, given, label, option in (
        ("inference.vllm_version", vllm, "vLLM", "--vllm-version"),
        ("inference.sglang_version", sglang, "SGLang", "--sglang-version"),
    ):
        named = read.fields.get(key)
        if given is not None and named is not None and str(named) != given:
            notes.append(
                f"{label} {named}, the release the command names, is the one its flags were checked against; "
                f"the plan follows {option} {given}"
            )
    return notes


def config_loader(folder: Path) -> ConfigLoader:
    """A --config path as vLLM opens it, tried beside the --file first, then in the working folder."""

    def load(path: str) -> bytes:
        found = Path(path).expanduser()
        if not found.is_absolute() and (folder / found).is_file():
            found = folder / found
        return read_regular_file(found, MAX_CONFIG_BYTES, "a vLLM config")

    return load


def _text(args: argparse.Namespace) -> str:
    if (args.launch_text is None) == (args.command_file is None):
        raise UsageError("give the launch command once: as one quoted argument, or --file FILE (-: stdin)")
    if args.launch_text is not None:
        return command_text(args.launch_text)
    path = args.command_file
    if path.lower().endswith(CONFIG_SUFFIXES):  # vLLM's or SGLang's --config file alone
        engine = getattr(args, "inference.engine", None)
        if engine not in ("vllm", "sglang"):
            raise UsageError(
                f"--file {one_line(path)}: a YAML file is read as vLLM's or SGLang's --config; add --engine vllm "
                "or --engine sglang"
            )
        return f"{engine} serve --config {shlex.quote(os.path.basename(path))}"
    try:
        if path == "-":
            raw = sys.stdin.buffer.read(MAX_COMMAND_CHARS * 4 + 1)
        else:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_COMMAND_CHARS * 4 + 1)
    except OSError as exc:
        raise PlanFileError(path, exc.strerror or str(exc)) from None
    return command_text(raw, "stdin" if path == "-" else path)


def command_report(read: CommandRead, built: CommandPlan) -> dict[str, Any]:
    return {
        "engine": read.engine.value,
        "model": read.model_ref,
        "model_found": built.model.how,
        "read": [{"words": n.words, "set": n.why} for n in read.read],
        "ignored": [n.words for n in read.ignored],
        "ignored_reasons": [n.ignored_why for n in read.ignored],  # aligned with "ignored"; "" where only NO_EFFECT
        "not_expressed": [{"words": n.words, "why": n.why} for n in read.unexpressed],
        "not_understood": list(read.unknown),
        "would_not_start": read.stops,
        "notes": [*read.notes, *built.notes],
    }


def render_command(read: CommandRead, built: CommandPlan) -> str:
    lines = [f"From the {read.engine_label} launch command"]
    lines += [f"  {read.stops}"] if read.stops else []
    lines += [f"  {note}" for note in built.notes]
    width = min(40, max((len(n.words) for n in read.read), default=10))
    lines += [f"  {_short(n.words):<{width}}  → {n.why}" for n in read.read]
    lines.append(f"  ignored, no effect on memory or speed ({len(read.ignored)})" + (":" if read.ignored else ": none"))
    lines += [f"    {replace(n, words=_short(n.words)).ignored_line}" for n in read.ignored]  # the dialog's lines
    lines.append(f"  not expressed in the plan ({len(read.unexpressed)})" + (":" if read.unexpressed else ": none"))
    lines += [f"    {_short(n.words)} — {n.why}" for n in read.unexpressed]
    unknown = "; ".join(_short(u) for u in read.unknown) or "none"
    lines.append(f"  not understood ({len(read.unknown)}): {unknown}")
    lines += [f"  note: {note}" for note in read.notes]
    return "\n".join(one_line(line) for line in lines)


def _short(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."

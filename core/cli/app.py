"""``vramplan``: the command line over the same core the GUI uses.

``vramplan estimate ...`` prints an estimate; ``models``, ``gpus`` and ``links`` list the
catalogues (``gpus --local`` and ``models --cached``: what this machine has); ``fit``,
``fewest-gpus``, ``compare`` and ``report`` answer from plan files; ``export`` hands the plan
over as a launch config.
Bad input exits with status 2 and one line on stderr, never a traceback.

Each subcommand is one module with ``register(sub)`` (its options) and ``run(args)``
(the text it prints); :func:`main` writes that text through
:func:`core.cli.output.write_output`, the one output guard (no stdout, unencodable
characters, terminal control characters, a full disk). A new subcommand does the same
rather than printing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Final

from core.cli import catalogues, compare, estimate, export, fewest, fit, import_command, report
from core.cli.output import OutputError, say, write_output
from core.cli.parser import CommandParser, UsageError, new_parser
from core.errors import PlanError, PlanFileError, one_line
from core.files.fileio import NotOurFileError

# What each subcommand prints, by its name on the command line.
RUNS: Final[dict[str, Callable[[argparse.Namespace], str]]] = {
    "estimate": estimate.run,
    **dict.fromkeys(catalogues.COMMANDS, catalogues.run),
    "fit": fit.run,
    "fewest-gpus": fewest.run,
    "report": report.run,
    "compare": compare.run,
    "export": export.run,
    "import-command": import_command.run,
}


def build_parser() -> CommandParser:
    parser, sub = new_parser()
    estimate_parser = estimate.register(sub)
    catalogues.register(sub)
    fit.register(sub)
    fewest.register(sub, estimate_parser)  # every estimate option, --from included
    export.register(sub, estimate_parser)  # the same: the plan to hand over
    import_command.register(sub, estimate_parser)  # the same: what the launch command does not say
    report.register(sub)
    compare.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        command = RUNS.get(args.command)
        if command is None:
            write_output(parser.format_help(), sys.stdout)
            return 2
        write_output(command(args), sys.stdout)
    except NotOurFileError as exc:
        say(f"vramplan: {one_line(str(exc))}; --force replaces it\n")
        return 2
    except (UsageError, PlanError, PlanFileError) as exc:
        say(f"vramplan: {one_line(str(exc))}\n")
        return 2
    except OutputError as exc:
        if not exc.quiet:
            say(f"vramplan: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The ``vramplan`` entry point: command-line subcommands go to ``core.cli`` without
loading Qt; anything else opens the desktop application."""

from __future__ import annotations

import sys
from collections.abc import Sequence

CLI_COMMANDS = frozenset({"estimate", "models", "gpus", "--version", "-h", "--help"})


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in CLI_COMMANDS:
        from core.cli import main as cli_main

        return cli_main(args)
    from gui.app import main as gui_main  # Qt is imported only when the window is wanted

    return gui_main(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``python -m core.cli``: the command line without the desktop entry point."""

from core.cli.app import main

raise SystemExit(main())

"""The ``vramplan`` command line: subcommands over the same ``estimate()`` the window uses.

Owns the argument parser and the rendering of estimates, fits, comparisons and reports as
text and JSON. ``python -m core.cli`` runs it; the desktop entry point routes subcommands
here without loading Qt.
"""

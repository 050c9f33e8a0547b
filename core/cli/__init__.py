"""The ``vramplan`` command line: subcommands over the same ``estimate()`` the window uses.

``app`` holds :func:`~core.cli.app.main` and the table of subcommands; each subcommand is
one module (``estimate``, ``catalogues`` for models / gpus / links and this machine's,
``fit``, ``fewest``, ``compare``, ``report``, ``export``) that adds its options and returns the text it prints. Below
them: ``plans`` (the plan the options, a training config or plan files name), ``parser``
(the options built from the input table, :mod:`core.inputs`), ``render`` (estimates as
text and JSON) and ``output`` (the one guard between the text and the terminal).
``python -m core.cli`` runs it; the desktop entry point routes subcommands to
``core.cli.app`` without loading Qt.
"""

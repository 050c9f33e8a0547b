"""The tools: comparisons, the cards that fit, the fewest GPUs, training configs in, reports out.

Each receives a :class:`gui.tools.context.ToolContext` (the window as a plain parent widget,
the plan controller, the document and the display state), never the main window, and is
imported only when its menu entry is first used (:mod:`gui.tools.menu`), so none of them
weighs on start-up. Long searches run in the worker process (:mod:`gui.tools.searches`).

Nothing is imported here, so that the worker process imports gui.tools.searches without Qt.
"""

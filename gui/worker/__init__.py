"""Long work off the GUI thread, the latest request winning.

- :mod:`gui.worker.process`: the worker process, both sides of it (start, send a job, hear
  its outcome, stop or kill it; in the worker, run jobs and report their progress). No Qt:
  the worker process starts with core alone.
- :mod:`gui.worker.runner`: :class:`~gui.worker.runner.LatestJobRunner`, the Qt side that
  the diagnosis, "Which cards fit" and "Fewest GPUs" use.

Nothing is imported here, so that the worker process never imports Qt.
"""

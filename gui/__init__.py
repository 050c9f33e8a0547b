"""VRAM Planner's desktop interface: PySide6 widgets over the pure-Python ``core``.

Views only lay widgets out; :class:`gui.controller.PlanController` owns the current
Plan and is the only caller of :func:`core.estimate.estimate`.
"""

"""VRAM Planner's desktop interface: PySide6 widgets over the pure-Python ``core``.

Views only lay widgets out; :class:`gui.controller.PlanController` owns the current
Plan and is the only caller of :func:`core.estimate.estimate`.
"""

import os

# Qt's raster engine hands every fill of 96 or more scanlines (a scroll bar, a panel's
# background, the chart) to a thread pool and blocks until it is done. For widget-sized
# fills the hand-off costs more than the fill: a repaint of the window took 2.3 ms with
# the pool and 1.1 ms without. Qt reads this once, at its first such fill; set here, on
# import, it is in place before any window paints. Qt only asks whether it is set.
os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")

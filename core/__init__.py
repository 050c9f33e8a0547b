"""VRAM Planner's estimator: pure Python, no Qt.

The public surface is small: build a :class:`~core.plan.Plan`, call
:func:`~core.estimate.estimate` on it, read the :class:`~core.estimate.Estimate`.
"""

__version__ = "0.1.0"

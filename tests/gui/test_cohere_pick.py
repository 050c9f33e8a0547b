"""Command R7B (cohere2) picked from the model list: the window plans it and draws."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from gui.main_window import MainWindow

SHOTS = os.environ.get("VRAMPLAN_SHOTS", "")


def test_picking_command_r7b_plans_its_weight_only_layernorm_and_windows(qtbot: Any, window: MainWindow) -> None:
    picker = window.model_form.picker
    picker.lineEdit().selectAll()
    qtbot.keyClicks(picker.lineEdit(), "command r7b")
    qtbot.keyClick(picker.lineEdit(), Qt.Key.Key_Return)
    model = window.controller.plan.model
    # resources/models.json "command-r7b": one weight-only LayerNorm a parallel block, 24 of 32 layers windowed.
    assert (model.family, model.norm, model.sliding_window_layers) == ("cohere2", "layernorm_nobias", 24)
    assert window.controller.estimate.peak_bytes > 0
    shot = window.grab()
    assert not shot.isNull()
    if SHOTS:
        shot.save(str(Path(SHOTS) / "model_command_r7b.png"))

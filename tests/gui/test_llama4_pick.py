"""Llama 4 Scout picked from the model list: the window moves its serving to vLLM and plans the chunked groups."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from core.plan import Engine
from gui.main_window import MainWindow

SHOTS = os.environ.get("VRAMPLAN_SHOTS", "")


def test_picking_scout_serves_it_on_vllm_and_refuses_its_training(qtbot: Any, window: MainWindow) -> None:
    assert window.controller.plan.inference.engine is Engine.HF  # the start-up plan's engine
    picker = window.model_form.picker
    picker.lineEdit().selectAll()
    qtbot.keyClicks(picker.lineEdit(), "llama 4 scout")
    qtbot.keyClick(picker.lineEdit(), Qt.Key.Key_Return)
    plan = window.controller.plan
    # resources/models.json "llama-4-scout-17b-16e": 36 of 48 layers attend within 8,192-token chunks.
    assert (plan.model.family, plan.model.chunked_layers, plan.model.attention_chunk) == ("llama4_text", 36, 8_192)
    assert plan.inference.engine is Engine.VLLM  # Plan.on_model: Llama 4 is planned on vLLM only
    # Training: no verdict, the reason (core.plan.training_refusal), as for a hybrid recurrent model.
    window.set_chart_mode("training")
    assert window.verdict.badge.text().endswith("Not estimated")
    assert "experts on every token" in window.verdict.detail.text()
    window.set_chart_mode("inference")
    shot = window.grab()
    assert not shot.isNull()
    if SHOTS:
        shot.save(str(Path(SHOTS) / "model_llama4_scout.png"))

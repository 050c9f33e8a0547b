"""A hybrid recurrent model picked from the model list: served on vLLM, its training said not estimated."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from core.inputs import VllmVersion
from core.plan import Engine
from gui.chart.geometry import bars_for
from gui.forms.fields import ChoiceField
from gui.main_window import MainWindow


def _pick(qtbot: Any, window: MainWindow, text: str) -> None:
    picker = window.model_form.picker
    picker.lineEdit().selectAll()
    qtbot.keyClicks(picker.lineEdit(), text)
    qtbot.keyClick(picker.lineEdit(), Qt.Key.Key_Return)


def test_picking_granite_h_tiny_serves_it_and_refuses_its_training(qtbot: Any, window: MainWindow) -> None:
    assert window.controller.plan.inference.engine is Engine.HF  # the first-start plan
    _pick(qtbot, window, "granite 4.0 h-tiny")
    plan = window.controller.plan
    # resources/models.json "granite-4.0-h-tiny": 36 Mamba-2 and 4 attention layers; the engine moved to vLLM.
    assert (plan.model_id, plan.inference.engine) == ("granite-4.0-h-tiny", Engine.VLLM)
    summary = window.model_form.summary.text()
    assert "(from its config)" in summary and "40 layers (36 Mamba-2, 4 attention)" in summary
    # Training: no verdict, no bars, the reason.
    window.set_chart_mode("training")
    assert window.verdict.badge.text().endswith("Not estimated")
    assert "nor is training" in window.verdict.detail.text()
    assert bars_for(window.controller.estimate, "training", None, None) == []
    # Serving: the verdict and the vLLM bar, with the hybrid's page in the engine's words.
    window.set_chart_mode("inference")
    assert window.verdict.badge.text().endswith("Serving fits")
    assert "attention block size 400 tokens" in window.controller.estimate.inference.formula
    assert len(bars_for(window.controller.estimate, "inference", None, None)) == 1
    assert not window.grab().isNull()


def test_granite_h_small_on_the_newest_vllm_line(qtbot: Any, window: MainWindow) -> None:
    _pick(qtbot, window, "granite 4.0 h-small")
    window.set_chart_mode("inference")
    versions = window.serving_form.fields["inference.vllm_version"]
    assert isinstance(versions, ChoiceField)
    versions.setCurrentIndex(versions.findData(VllmVersion.V0_34))  # the newest line core.inputs.VllmVersion knows
    plan = window.controller.plan
    assert (plan.model_id, plan.inference.vllm_version) == ("granite-4.0-h-small", VllmVersion.V0_34)
    # vLLM 0.34.0 (core.serving.vllm_hybrid): a 64-token alignment, 64 · cdiv(2,147,840 B, 64 · 4,096 B) = 576 tokens
    # (tests/core/test_hybrid_vllm_lines.py), and prefix caching on by default: three state blocks a request.
    formula = window.controller.estimate.inference.formula
    assert "attention block size 576 tokens" in formula and "3 state blocks a request" in formula
    assert not window.verdict.badge.text().endswith("Not estimated")
    assert len(bars_for(window.controller.estimate, "inference", None, None)) == 1
    assert not window.grab().isNull()

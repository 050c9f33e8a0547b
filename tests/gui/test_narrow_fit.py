"""A narrow fit (core.verdict: fits, its range reaching past the usable memory) reads so in the window: the
banner's badge and sub-line, the remedy list's badge, the card finder (branch h60one). The plans and their
figures are tests/core/test_narrow_fit.py's."""

from __future__ import annotations

from typing import Any

from core.advice.diagnosis import diagnose
from core.advice.fit import cards_for, cheapest_fit
from core.advice.remedies import RemedyKind
from core.estimate import estimate
from core.plan import Method, Plan
from core.presets import plan_for_model
from gui import colours
from gui.main_window import MainWindow
from gui.panels.remedy_list import RemedyEntry, RemedyList
from gui.panels.verdict import text_colour


def _gemma_qlora(gpu: str = "rtx-pro-6000-blackwell") -> Plan:
    # QLoRA on Gemma 2 9B, micro-batch 4: on an RTX PRO 6000 Blackwell 89.6 GB of 92.4 GB usable, its range to
    # 93.0 GB (`vramplan estimate --model gemma-2-9b --method qlora --micro-batch 4 --gpu rtx-pro-6000-blackwell`).
    return plan_for_model("gemma-2-9b").with_method(Method.QLORA).with_workload(micro_batch=4).with_hardware(gpu=gpu)


def test_the_banner_says_a_narrow_fit_in_cores_words(window: MainWindow, qtbot: Any) -> None:
    """Before: a green "✔ Fits" and "2.76 GB to spare", though the range reaches 93.0 GB, past the usable."""
    window.show()
    plan = _gemma_qlora()
    window.controller.reset(plan)
    judged = estimate(plan).judgement()
    qtbot.waitUntil(lambda: "Fits narrowly" in window.verdict.badge.text(), timeout=10_000)
    assert colours.FITS not in window.verdict.badge.styleSheet()
    assert judged.narrow_words() in window.verdict.headline.text()
    headline = window.verdict.headline.text()
    assert "to spare, but the estimate's range reaches 93.0 GB, past the 92.4 GB usable" in headline


def test_a_narrow_remedy_is_not_badged_a_green_fits(qtbot: Any) -> None:
    """QLoRA on Llama 3.1 8B on an RTX 3060 12GB: more GPUs, 32 with FSDP2, fit by 0.05 GB while the range reaches
    12.6 GB, past the 11.6 GB usable (tests/core/test_remedies.py). Its row read "✔ Fits" in green."""
    plan = plan_for_model("llama-3.1-8b").with_method(Method.QLORA).with_hardware(gpu="rtx-3060-12gb")
    (more,) = [r for r in diagnose(plan).remedies if r.kind is RemedyKind.MORE_GPUS]
    remedies = RemedyList()
    qtbot.addWidget(remedies)
    remedies.show_entries((RemedyEntry.from_remedy(more),), "GB")
    (row,) = remedies.rows[:1]
    text = row.status.text()
    assert "Fits narrowly" in text and colours.FITS not in text
    assert row.accessibleName().endswith("Fits narrowly")


def test_the_card_finder_names_a_fit_with_margin_and_labels_a_narrow_one(window: MainWindow, qtbot: Any) -> None:
    window.show()
    window.controller.reset(_gemma_qlora())
    panel = window.plan_tools.show_fit()
    qtbot.waitUntil(lambda: panel.answer is not None and not panel.searching, timeout=60_000)
    rows = cards_for(window.controller.plan)
    best = cheapest_fit(rows)
    assert best is not None and best.estimate.judgement().fits_with_margin
    # A cheaper row fits narrowly: it was the answer before (tests/core/test_narrow_fit.py).
    assert any(r.fits_narrowly and r.cost < best.cost for r in rows)
    assert f"cheapest that fits: {best.gpu.name} × {best.count}" in panel.summary.text()
    shown = panel.shown_rows
    narrow = next(i for i, r in enumerate(shown) if r.narrow)
    cell = panel.table.item(narrow, 5)
    assert cell.text() == "Fits narrowly"
    # Borderline's yellow, in its darker shade for text (gui.panels.verdict.text_colour), never a fit's green.
    assert cell.foreground().color().name().upper() == text_colour(colours.UNCERTAIN).upper() != colours.FITS.upper()

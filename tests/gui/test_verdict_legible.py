"""The Verdict panel's and the badge's verdict colours read at 4.5:1, light and dark; the Serving tab says a second
start-up refusal after the first, and vLLM's "No available memory for the cache blocks" (h95ui).

4.5:1 is WCAG 2.1 SC 1.4.3's least contrast for text at its usual size (gui.theme.TEXT_CONTRAST). Before: the text
shades stood fixed for a light background, #B07800 3.8:1 on white, #7A6A00 3.0:1 on the dark theme's #1f2023, Fits'
#009E73 3.4:1; the badge's white read 3.4:1 on Fits' green and 3.9:1 on Out of memory's #D55E00 (each ratio computed
by gui.colours.contrast, the WCAG formula). Each test failed before.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QLabel, QStyleFactory

from core.estimate import estimate
from core.plan import Engine, Plan
from core.presets import plan_for_model
from core.verdict import Verdict
from gui import colours, theme
from gui.main_window import MainWindow
from gui.panels.verdict import badge_background, badge_style, badge_text_colour, text_colour
from tests.gui.test_context_limit import _serve, _serving_headline

WCAG_AA = 4.5  # WCAG 2.1 SC 1.4.3, text at its usual size


def _palettes() -> dict[str, QPalette]:
    fusion = QStyleFactory.create("Fusion")
    return {"light": fusion.standardPalette(), "dark": theme.dark_palette()}


@pytest.mark.parametrize("name", ["light", "dark"])
@pytest.mark.parametrize("colour", [colours.FITS, colours.CAUTION, colours.UNCERTAIN, colours.PROBLEM])
def test_every_verdict_text_colour_reads_on_the_panel(name: str, colour: str) -> None:
    palette = _palettes()[name]
    ink = QColor(text_colour(colour, palette))
    for role in (QPalette.ColorRole.Base, QPalette.ColorRole.Window):
        assert theme.contrast(ink, palette.color(role)) >= WCAG_AA, (name, colour, ink.name())
    assert ink != palette.color(QPalette.ColorRole.Text)  # still the verdict's hue


@pytest.mark.parametrize("narrow", [False, True])
@pytest.mark.parametrize("verdict", list(Verdict))
def test_every_badge_reads_at_4_5_to_1(verdict: Verdict, narrow: bool) -> None:
    background, text = QColor(badge_background(verdict, narrow)), QColor(badge_text_colour(verdict, narrow))
    assert theme.contrast(background, text) >= WCAG_AA, (verdict, narrow, background.name())
    style = badge_style(verdict, narrow)
    found = re.search(r"background: (#[0-9A-F]{6});", style)
    assert found is not None and found.group(1) == badge_background(verdict, narrow)


def test_the_banner_and_the_diagnosis_badges_use_the_legible_colour(qtbot: Any, window: MainWindow) -> None:
    """Llama 3.1 8B at 131,072 tokens × 32 on an RTX 4090 (tests/core/test_vllm_kv_refusal.py): out of memory."""
    _serve(qtbot, window, _on_4090(context=131_072, concurrent=32))
    shown = badge_background(Verdict.OOM)
    assert shown in window.verdict.badge.styleSheet() and colours.PROBLEM not in window.verdict.badge.styleSheet()
    assert shown in _diagnosed(qtbot, window).badge.styleSheet()
    window.controller.undo_stack.setClean()


def _on_4090(**inference: object) -> Plan:
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090")
    return plan.with_inference(**{"engine": Engine.VLLM, **inference})


def test_the_serving_tab_says_the_second_refusal_once_the_first_passes(qtbot: Any, window: MainWindow) -> None:
    """Llama 3.1 8B at 200,000 tokens, past its 131,072 (huggingface.co/meta-llama/Llama-3.1-8B config.json), on an
    RTX 4090: vLLM refuses the context first, then its KV pool (tests/core/test_start_refusal_kind.py). The headline
    said "<context>; and <pool>", as if both were printed at once."""
    plan = _on_4090(context=200_000)
    first, then = estimate(plan).inference.start_causes
    text = _serving_headline(qtbot, window, plan).replace("&#x27;", "'")
    assert f"{first}; once that check passes, {then}" in text
    window.controller.undo_stack.setClean()


def test_no_cache_blocks_is_said_in_the_window(qtbot: Any, window: MainWindow) -> None:
    """gpu_memory_utilization 0.6 leaves Llama 3.1 8B's 14.96 GiB of weights no KV block on a 4090
    (tests/core/test_no_cache_blocks.py): the banner's figures line, the Serving tab and the Diagnosis say vLLM's
    words."""
    plan = _on_4090(context=4096, gpu_memory_utilization=0.6)
    text = _serving_headline(qtbot, window, plan)
    assert text.startswith("<b>✖ vLLM would not start</b>") and "no memory for the KV cache" in text
    assert "No available memory for the cache blocks" in window.verdict.detail.text()
    panel = _diagnosed(qtbot, window)
    said = " ".join(label.text() for label in panel.findChildren(QLabel)).replace("&quot;", '"')
    assert '"No available memory for the cache blocks.' in said
    window.controller.undo_stack.setClean()


def _diagnosed(qtbot: Any, window: MainWindow) -> Any:
    panel = window.diagnosis
    window.tabs.setCurrentWidget(panel)
    plan = window.controller.plan
    qtbot.waitUntil(lambda: panel.diagnosis is not None and panel.diagnosis.estimate.plan == plan, timeout=10000)
    return panel


def test_sglang_short_of_one_request_starts_the_tab_does_not_say_it_would_not(qtbot: Any, window: MainWindow) -> None:
    """SGLang on a 4090 at 131,072 tokens: its pool holds fewer tokens than one request, and it starts, capping a
    request at the pool (tp_worker.py ``max_req_len = min(context_len - 1, max_total_num_tokens - 1)``, docs/SERVING.md
    h88fix); the tab said "SGLang would not start: its pool holds … tokens"."""
    plan = _on_4090(engine=Engine.SGLANG, context=131_072)
    inf = estimate(plan).inference
    assert 0 < inf.max_concurrency < 1 and inf.refusals == ()  # the case
    text = _serving_headline(qtbot, window, plan)
    assert "would not start" not in text
    held = f"<b>✖ SGLang holds {inf.kv_cache_tokens:,} tokens of KV cache</b>"
    assert text == f"{held}: no request of 131,072 tokens fits."
    window.controller.undo_stack.setClean()

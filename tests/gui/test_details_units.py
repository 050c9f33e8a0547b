"""What a Details figure is in: the currency a cost is in and the price it is at (h38gui)."""

from __future__ import annotations

from typing import Any

from core.presets import default_plan
from gui.main_window import MainWindow


def _cost_text(qtbot: Any, window: MainWindow) -> str:
    window.show()
    qtbot.waitExposed(window)
    window.tabs.setCurrentWidget(window.compute_panel)
    return window.compute_panel.training.values["cost"].text()


def test_the_cost_says_its_currency_and_the_price_it_is_at(qtbot: Any, window: MainWindow) -> None:
    """Before: "Cost: 1,401.55", no currency, while the Hardware form's card note reads
    "Typical price: $2.50 per GPU-hour". The catalogue's prices are US dollars
    (resources/gpus.json: price_per_hour_usd, "Modal on-demand list price" for the A100 80GB SXM)."""
    window.controller.reset(default_plan().with_hardware(gpu="a100-80gb-sxm", price_per_gpu_hour=0.0))
    text = _cost_text(qtbot, window)
    assert text.startswith("$"), text
    assert "at $2.50 per GPU-hour" in text and "Modal on-demand list price" in text, text


def test_a_typed_price_is_in_the_users_currency(qtbot: Any, window: MainWindow) -> None:
    # The Price field's tooltip (core/inputs.py): "What one GPU costs per hour, in your currency".
    window.controller.reset(default_plan().with_hardware(gpu="a100-80gb-sxm", price_per_gpu_hour=1.5))
    text = _cost_text(qtbot, window)
    assert "$" not in text and "at 1.50 per GPU-hour (your price)" in text, text


def test_a_card_without_a_price_says_what_to_do(qtbot: Any, window: MainWindow) -> None:
    # The RTX 4090 has a purchase price only (resources/gpus.json), no price per hour.
    window.controller.reset(default_plan().with_hardware(gpu="rtx-4090", price_per_gpu_hour=0.0))
    text = _cost_text(qtbot, window)
    assert text.startswith("unknown") and "Price" in text, text

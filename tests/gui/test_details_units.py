"""What a Details figure is in: the currency a cost is in and the price it is at (h38gui)."""

from __future__ import annotations

from typing import Any

from core.plan import Method
from core.presets import default_plan, plan_for_model
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


def test_a_host_paced_step_says_so_beside_the_utilisation(qtbot: Any, window: MainWindow) -> None:
    # Qwen2.5 0.5B LoRA at 1 × 512 on an H100 (tests/core/test_host_pace.py): the row read "17.0% (modelled)"
    # alone while the step waits on the host (MFU 2.0 %); an 8B plan at 4 × 4,096 is not host bound.
    plan = plan_for_model("qwen2.5-0.5b").with_method(Method.LORA).with_hardware(gpu="h100-sxm")
    window.controller.reset(plan.with_workload(micro_batch=1, seq_len=512))
    _cost_text(qtbot, window)
    assert window.compute_panel.training.values["utilisation"].text().endswith("· the host paces the step")
    window.controller.reset(default_plan().with_workload(micro_batch=4, seq_len=4096, grad_accum=4))
    assert "host" not in window.compute_panel.training.values["utilisation"].text()


def test_the_arithmetic_shows_the_steps_fixed_part(qtbot: Any, window: MainWindow) -> None:
    # Llama-2 7B full in pure 16 bits, foreach AdamW with clipping, eager attention, 1 × 256 tokens on an A100
    # (tests/core/test_step_fixed_cost.py): the optimizer step is 63 % of the step (core Compute.fixed_step).
    from core.catalogue import find_model
    from core.plan import Attention, Optimizer, OptimizerImpl, Preset

    plan = default_plan().with_changes(
        model=find_model("llama-2-7b").spec,
        model_id="llama-2-7b",
        method=Method.FULL,
        attention=Attention.EAGER,
        optimizer=Optimizer.ADAMW,
        optimizer_impl=OptimizerImpl.FOREACH,
        grad_clip=True,
        preset=Preset.PURE_BF16,
        checkpointing=False,
    )
    window.controller.reset(
        plan.with_workload(micro_batch=1, seq_len=256, grad_accum=1).with_hardware(gpu="a100-80gb-sxm")
    )
    _cost_text(qtbot, window)
    fixed = window.controller.estimate.compute.fixed_step
    assert fixed.startswith("the optimizer step is ") and "once a step, whatever the batch" in fixed
    assert fixed in window.compute_panel.training.formula.text()
    # An 8B plan at 4 × 4,096 × 4: the optimizer step is under a tenth of the step, nothing said.
    window.controller.reset(default_plan().with_workload(micro_batch=4, seq_len=4096, grad_accum=4))
    assert "once a step, whatever the batch" not in window.compute_panel.training.formula.text()


def test_the_arithmetic_sums_follow_gib(qtbot: Any, window: MainWindow) -> None:
    """h55ux: with GiB picked the Arithmetic tab read "Weights — 23.3 GiB" above "Weights: … = 25.0 GB" and
    "The sum at the peak … = 33.6 GB" (Llama 3.1 70B QLoRA, FSDP over 2 × RTX 4090, Answer.AI's recipe)."""
    from core.plan import Strategy

    plan = plan_for_model("llama-3.1-70b").with_method(Method.QLORA).with_changes(checkpointing=True)
    plan = plan.with_workload(micro_batch=1, seq_len=2048).with_hardware(gpu="rtx-4090").on_gpus(2, Strategy.FSDP)
    window.controller.reset(plan)
    window.set_unit("GiB")
    panel = window.arithmetic
    assert panel.summary.text().endswith(f"GiB at the {window.controller.estimate.peak_phase}")
    panel.picker.setCurrentIndex(panel.picker.findData("weights"))
    text = panel.terms.toPlainText()
    assert "Weights: " in text and text.rstrip().endswith("GiB") and " GB" not in text
    window.set_unit("GB")
    assert panel.summary.text() == window.controller.estimate.summary_formula


def test_the_flops_figure_and_its_formula_read_alike(qtbot: Any, window: MainWindow) -> None:
    """The Compute & time tab showed "7.97 × 10¹⁷" beside its formula's "8.0e+17" for the same FLOPs: one
    formatter (core.format.scientific) writes both, and the command line's compute line."""
    from core.cli.render import render_estimate

    window.controller.reset(default_plan())
    _cost_text(qtbot, window)
    shown = window.compute_panel.training.values["flops"].text()
    assert f"tokens = {shown};" in window.compute_panel.training.formula.text()
    assert f"compute  {shown} FLOPs" in render_estimate(window.controller.estimate)

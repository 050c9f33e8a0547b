"""A hybrid recurrent model picked from the model list: served on vLLM; a Mamba-2 hybrid's training estimated
(core.training.mamba), Qwen3-Next's still said not estimated."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from core.inputs import VllmVersion
from core.plan import Engine, Method, Strategy, lora_on
from core.presets import plan_for_model
from gui.chart.geometry import bars_for
from gui.forms.fields import ChoiceField
from gui.main_window import MainWindow
from tests.gui.test_forms import type_into

SHOTS = os.environ.get("VRAMPLAN_SHOTS", "")


def _pick(qtbot: Any, window: MainWindow, text: str) -> None:
    picker = window.model_form.picker
    picker.lineEdit().selectAll()
    qtbot.keyClicks(picker.lineEdit(), text)
    qtbot.keyClick(picker.lineEdit(), Qt.Key.Key_Return)


def test_picking_granite_h_tiny_serves_it_and_estimates_its_training(qtbot: Any, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    assert window.controller.plan.inference.engine is Engine.HF  # the first-start plan
    assert not window.method_form.fields["mamba_kernels"].isVisibleTo(window.method_form)  # no Mamba-2 layers
    _pick(qtbot, window, "granite 4.0 h-tiny")
    plan = window.controller.plan
    # resources/models.json "granite-4.0-h-tiny": 36 Mamba-2 and 4 attention layers; the engine moved to vLLM.
    assert (plan.model_id, plan.inference.engine) == ("granite-4.0-h-tiny", Engine.VLLM)
    summary = window.model_form.summary.text()
    assert "(from its config)" in summary and "40 layers (36 Mamba-2, 4 attention)" in summary
    # Training: estimated, with the Mamba kernels control shown (installed: transformers' pick when they are).
    window.set_chart_mode("training")
    assert window.method_form.fields["mamba_kernels"].isVisibleTo(window.method_form)
    assert plan.mamba_kernels
    assert not window.verdict.badge.text().endswith("Not estimated")
    assert bars_for(window.controller.estimate, "training", None, None) != []
    # LoRA on attention and the mixer's in_proj / out_proj (core.plan.lora_on adds those two on the pick).
    lora = replace(plan_for_model("granite-4.0-h-tiny"), method=Method.LORA)
    lora = replace(lora, lora=replace(lora.lora, targets=("q_proj", "v_proj", "in_proj", "out_proj")))
    window.controller.set_plan(lora)
    kernels = window.controller.estimate.peak_bytes
    assert bars_for(window.controller.estimate, "training", None, None) != []
    assert not window.verdict.badge.text().endswith("Not estimated")
    assert window.method_form.targets.boxes["in_proj"].isChecked()
    window.controller.set_plan(replace(lora, mamba_kernels=False))
    # transformers' torch path keeps the scan's chunk-by-chunk float32 tensors: more than the fused kernels.
    assert window.controller.estimate.peak_bytes > kernels
    shot = window.grab()
    assert not shot.isNull()
    if SHOTS:
        shot.save(str(Path(SHOTS) / "model_granite_h_tiny_lora.png"))
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


def test_qwen35_lora_is_estimated_with_the_mixer_targets_shown(window: MainWindow) -> None:
    # Branch h68gdn (core.training.gdn): Qwen3.5 9B's LoRA on an RTX 4090, in_proj / out_proj added on the pick.
    plan = plan_for_model("qwen3.5-9b").with_hardware(gpu="rtx-4090")
    window.controller.set_plan(replace(plan, method=Method.LORA, lora=lora_on(plan.model, plan.lora)))
    window.set_chart_mode("training")
    assert not window.verdict.badge.text().endswith("Not estimated")
    assert bars_for(window.controller.estimate, "training", None, None) != []
    assert window.method_form.targets.boxes["in_proj"].isVisibleTo(window.method_form)
    assert window.method_form.targets.boxes["in_proj"].isChecked()
    assert window.method_form.fields["mamba_kernels"].isVisibleTo(window.method_form)


def test_qwen3_next_training_with_use_cache_is_said_not_estimated(window: MainWindow) -> None:
    window.controller.set_plan(plan_for_model("qwen3-next-80b-a3b-instruct").with_changes(training_kv_cache=True))
    window.set_chart_mode("training")
    assert window.verdict.badge.text().endswith("Not estimated")
    assert "Gated DeltaNet" in window.verdict.detail.text()
    assert bars_for(window.controller.estimate, "training", None, None) == []


def test_a_plan_not_estimated_shows_no_terms_of_a_bucket(qtbot: Any, window: MainWindow) -> None:
    # core.plan.hybrid_training_refusal: a Mamba-2 hybrid's LoRA is estimated only with in_proj among the targets.
    # After a plan that was estimated (its weights' terms shown), the same model with q_proj / v_proj only is not,
    # and the Sums tab must not keep the earlier bucket's terms under its "not estimated" summary.
    window.controller.set_plan(plan_for_model("granite-4.0-h-tiny"))
    window.set_chart_mode("training")
    qtbot.waitUntil(lambda: bool(window.arithmetic._terms_html))
    lora = plan_for_model("granite-4.0-h-tiny").with_method(Method.LORA)
    window.controller.set_plan(replace(lora, lora=replace(lora.lora, targets=("q_proj", "v_proj"))))
    qtbot.waitUntil(lambda: window.verdict.badge.text().endswith("Not estimated"))
    assert "in_proj" in window.verdict.detail.text()
    assert window.arithmetic.summary.text().startswith("Training is not estimated for this plan")
    assert window.arithmetic._terms_html == "" and window.arithmetic.picker.count() == 0


def test_a_hybrid_on_eight_gpus_trains_under_fsdp2_and_says_why_not_under_tp(qtbot: Any, window: MainWindow) -> None:
    """The Parallelism section offers a hybrid its data-parallel layouts (core.plan._hybrid_layout_gap); a split of
    the model shows the refusal in the verdict instead of a training figure."""
    window.show()
    qtbot.waitExposed(window)
    _pick(qtbot, window, "granite 4.0 h-small")
    window.set_chart_mode("training")
    form = window.parallel_form
    type_into(qtbot, form.gpus_per_node, "8")
    form.strategy.setCurrentIndex(form.strategy.findData(Strategy.FSDP.value))
    plan = window.controller.plan
    assert (plan.world_size, plan.parallel.strategy) == (8, Strategy.FSDP)
    assert not window.verdict.badge.text().endswith("Not estimated")
    assert bars_for(window.controller.estimate, "training", None, None) != []
    if SHOTS:
        window.grab().save(str(Path(SHOTS) / "model_granite_h_small_fsdp8.png"))
    type_into(qtbot, form.tensor_parallel, "2")
    assert window.controller.plan.parallel.tensor_parallel == 2
    assert window.verdict.badge.text().endswith("Not estimated")
    # transformers 5.25.0 configuration_granitemoehybrid.py: base_model_tp_plan names the attention only.
    assert "no entry for the Mamba-2 mixer" in window.verdict.detail.text()
    assert bars_for(window.controller.estimate, "training", None, None) == []
    shot = window.grab()
    assert not shot.isNull()
    if SHOTS:
        shot.save(str(Path(SHOTS) / "model_granite_h_small_tp_refused.png"))

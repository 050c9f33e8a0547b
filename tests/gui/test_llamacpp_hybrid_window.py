"""The window plans a hybrid recurrent model on llama.cpp (core.serving.llamacpp_hybrid): the RS buffer shown."""

from __future__ import annotations

from core.catalogue import find_model
from core.plan import Engine, default_plan_on
from gui.main_window import MainWindow


def test_picking_llama_cpp_for_granite_tiny_shows_its_recurrent_states(window: MainWindow) -> None:
    window.show()
    window.inference_action.trigger()
    entry = find_model("granite-4.0-h-tiny")
    plan = default_plan_on(entry.spec, entry.id).with_hardware(gpu="rtx-4060-laptop")
    window.controller.reset(plan.with_inference(context=8192))
    assert window.controller.plan.inference.engine is Engine.VLLM  # a hybrid's default engine
    form = window.serving_form
    form.engine.setCurrentIndex(form.engine.findData("llamacpp"))
    assert window.controller.plan.inference.engine is Engine.LLAMACPP
    window.tabs.setCurrentWidget(window.inference_panel)
    text = window.inference_panel.formula.text()
    # Granite 4.0-H Tiny: 4 attention layers hold the KV (8,192 cells × 4 × 2 × 4 KV heads × 128 × 2 B = 64 MiB),
    # 36 Mamba-2 layers one f32 state a slot: 36 × (3 · 3,328 + 128 · 3,072) × 4 B = 55.37 MiB (llama-hparams.cpp).
    assert "KV 64.00 MiB (8,192 cells, 4 attention layers)" in text
    assert "RS 55.37 MiB (1 cell × 36 recurrent layers, f32)" in text
    assert window.inference_panel.values["kv_per_token"].text() == "8,192 B"  # core.format.memory
    assert window.verdict.detail.text()

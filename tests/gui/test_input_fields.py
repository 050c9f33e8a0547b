"""The forms' fields are the input table's (core/inputs.py): range, unit, words and when a row shows.

The core side (the Plan enforces the same ranges, the command line has a flag for each) is
tests/core/test_inputs.py.
"""

from __future__ import annotations

import html
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QLabel

from core.inputs import INPUTS, OPTIMIZER_TOOLTIPS, Input, Kind, input_at
from core.losses import LOSS_INPUTS
from core.plan import Accounting, Engine, Method, Optimizer, OptimizerImpl, Plan, Strategy
from core.presets import default_plan, plan_for_model
from gui.forms.fields import ChoiceField, CountField, FloatField, IntField, is_marked_invalid
from gui.main_window import MainWindow


def _fields(window: MainWindow) -> dict[str, Any]:
    return {key: widget for form in window.forms for key, widget in form.fields.items()}


def test_every_input_has_a_field_keyed_by_its_attribute_path(window: MainWindow) -> None:
    fields = _fields(window)
    for spec in INPUTS:
        if spec.kind is Kind.TARGETS:  # one box per target module
            assert {f"{spec.path}.{t}" for t in ("q_proj", "down_proj")} <= fields.keys()
        elif spec.path in LOSS_INPUTS:  # the loss switches: one Loss list (core.losses)
            assert "loss" in fields
        else:
            assert spec.path in fields, spec.path


def _check_range(spec: Input, widget: Any) -> None:
    least = 0 if spec.zero_means else spec.low  # 0 has its own meaning ("default", "derived")
    if isinstance(widget, IntField):
        assert widget.minimum() == least
        # Frozen layers: at most the model's blocks, never more than the table's ceiling.
        assert widget.maximum() == spec.high or (spec.path == "frozen_layers" and widget.maximum() <= spec.high)
        assert widget.specialValueText() == (spec.zero_means or spec.low_means)
    elif isinstance(widget, FloatField):
        assert widget.minimum() == pytest.approx(least * spec.scale)
        assert widget.maximum() == pytest.approx(spec.high * spec.scale)
        assert widget.decimals() == spec.decimals and widget.singleStep() == spec.step
        assert widget.specialValueText() == spec.zero_means
    else:
        assert isinstance(widget, CountField)
        assert (widget._minimum, widget._maximum) == (spec.low, spec.high)
        assert widget.placeholderText() == spec.zero_means


def test_number_fields_take_the_tables_range_unit_and_steps(window: MainWindow) -> None:
    fields = _fields(window)
    for spec in INPUTS:
        if spec.kind in (Kind.INT, Kind.COUNT, Kind.FLOAT):
            widget = fields[spec.path]
            _check_range(spec, widget)
            if spec.unit and not isinstance(widget, CountField):
                assert widget.suffix().strip() in (spec.unit, spec.unit.removesuffix("s")), spec.path


def test_fields_take_the_tables_words(window: MainWindow) -> None:
    fields = _fields(window)
    labels: dict[str, QLabel] = {key: label for form in window.forms for key, label in form.labels.items()}
    for spec in INPUTS:
        if spec.kind is Kind.TARGETS or spec.path in LOSS_INPUTS:  # the Loss list: test_loss_choice.py
            continue
        widget = fields[spec.path]
        assert widget.accessibleName() == spec.name, spec.path
        assert widget.toolTip().startswith(spec.tooltip), spec.path
        if isinstance(widget, QCheckBox):
            assert widget.text() == spec.label
        elif spec.path in labels:  # the fields set side by side in one row have the row's label
            assert labels[spec.path].text() == spec.label + ":"
        if isinstance(widget, ChoiceField) and spec.labels:
            shown = [(widget.itemText(i), widget.itemData(i)) for i in range(widget.count())]
            assert shown == [(text, choice.value) for choice, text in spec.labels.items()], spec.path


PLANS = {
    "default": default_plan(),
    "full": plan_for_model("gpt2"),
    "qlora": plan_for_model("llama-3.1-8b", method=Method.QLORA),
    "frozen": plan_for_model("gpt2").with_method(Method.FROZEN),
    "lesson": default_plan().with_changes(accounting=Accounting.LESSON),
    "custom gpu": default_plan().with_hardware(gpu="custom"),
    "fsdp on 16": default_plan().on_gpus(16, Strategy.FSDP),
    "zero3 on 8": default_plan().on_gpus(8, Strategy.ZERO3),
    "vllm": default_plan().with_inference(engine=Engine.VLLM),
    "sglang": default_plan().with_inference(engine=Engine.SGLANG),
    # torch.optim's foreach AdamW: its weight decay is a pass of its own (core.training.speed.WEIGHT_DECAY_PASSES)
    "foreach": default_plan().with_changes(optimizer_impl=OptimizerImpl.FOREACH),
}


@pytest.mark.parametrize("name", PLANS)
def test_a_row_shows_exactly_when_its_input_matters(window: MainWindow, name: str) -> None:
    plan: Plan = PLANS[name]
    window.controller.set_plan(plan)
    for form in window.forms:
        advanced = bool(getattr(getattr(form, "advanced", None), "isChecked", lambda: False)())
        for path, spec in form.inputs.items():
            if path in form._input_rows:
                expected = spec.matters(plan) and (advanced or not spec.advanced)
                assert form.form.isRowVisible(form.fields[path]) == expected, (name, path)


def test_weight_decay_shows_for_torchs_unfused_steps_and_an_edit_reaches_the_plan(window: MainWindow) -> None:
    form = window.method_form
    window.controller.set_plan(default_plan())  # HF Trainer's fused AdamW folds the decay in: no row
    assert not form.form.isRowVisible(form.fields["weight_decay"])
    window.controller.set_plan(default_plan().with_changes(optimizer_impl=OptimizerImpl.FOREACH))
    assert form.form.isRowVisible(form.fields["weight_decay"])
    form.weight_decay.edited.emit(0.1)  # torchtitan's and OLMo-core's 0.1
    assert window.controller.plan.weight_decay == pytest.approx(0.1)


def test_advanced_knobs_show_behind_the_disclosure(window: MainWindow) -> None:
    plan = default_plan().on_gpus(8, Strategy.ZERO3)
    window.controller.set_plan(plan)
    form = window.parallel_form
    assert input_at("parallel.zero3_prefetch_elements").advanced
    assert not form.form.isRowVisible(form.fields["parallel.zero3_prefetch_elements"])
    form.advanced.setChecked(True)
    assert form.form.isRowVisible(form.fields["parallel.zero3_prefetch_elements"])


def test_an_edit_reaches_the_plan_at_the_fields_path(window: MainWindow) -> None:
    # The default apply is Plan.with_input(path): a field's edit changes that input only.
    window.controller.set_plan(default_plan())
    window.workload_form.eval_batch.edited.emit(3)
    assert window.controller.plan.workload.eval_batch == 3
    window.serving_form.engine.edited.emit("vllm")
    assert window.controller.plan.inference.engine is Engine.VLLM
    window.accounting_form.params.edited.emit(0)  # an empty box: derived from the architecture
    assert window.controller.plan.model.params_override is None


def test_an_advanced_input_lives_only_in_a_form_with_a_disclosure(window: MainWindow) -> None:
    """An input marked advanced in a form without an "advanced" toggle could never be shown:
    PYTORCH_CUDA_ALLOC_CONF and gradient clipping (issue 22) were such inputs."""
    for form in window.forms:
        if getattr(form, "advanced", None) is None:
            hidden = [path for path in form._input_rows if form.inputs[path].advanced]
            assert hidden == [], type(form).__name__


def test_the_allocator_setting_is_typed_refused_with_pytorchs_reason_and_applied(window: MainWindow) -> None:
    window.controller.set_plan(default_plan())
    form = window.hardware_form
    field = form.fields["hardware.alloc_conf"]
    assert form.form.isRowVisible(field)
    field.edited.emit("max_split_size_mb:4")  # PyTorch: "must be >= 20"
    assert window.controller.plan.hardware.alloc_conf == ""
    assert is_marked_invalid(field) and ">= 20" in html.unescape(field.toolTip())  # a plain-text tooltip
    field.edited.emit("expandable_segments:True")
    assert window.controller.plan.hardware.alloc_conf == "expandable_segments:True"


def test_the_modules_kept_in_16_bits_are_typed_refused_and_applied(window: MainWindow) -> None:
    # transformers' llm_int8_skip_modules (core.model.parse_skip_modules): an empty name is refused.
    window.controller.set_plan(default_plan().with_changes(method=Method.QLORA))
    form = window.method_form
    field = form.fields["bnb_skip_modules"]
    assert form.form.isRowVisible(field)
    field.edited.emit("model.layers.0.mlp,,lm_head")
    assert window.controller.plan.bnb_skip_modules == ""
    assert is_marked_invalid(field) and "empty name" in html.unescape(field.toolTip())
    field.edited.emit("model.layers.0.mlp,lm_head")
    assert window.controller.plan.bnb_skip_modules == "model.layers.0.mlp,lm_head"
    window.controller.set_plan(default_plan().with_changes(method=Method.LORA))
    assert not form.form.isRowVisible(field)


def test_each_optimizer_entry_says_its_bytes_per_parameter_and_source(window: MainWindow) -> None:
    """The Optimizer list's entries carry core.inputs.OPTIMIZER_TOOLTIPS (branch h57opt: torchao's low-bit AdamW,
    AnyPrecisionAdamW and Lion among them), word for word."""
    field = window.method_form.optimizer
    tips = {str(field.itemData(i)): field.itemData(i, Qt.ItemDataRole.ToolTipRole) for i in range(field.count())}
    assert tips == {o.value: OPTIMIZER_TOOLTIPS[o] for o in Optimizer}
    assert "blocks of" not in tips["ao-adamw-4bit"] and "1 B + 8 B per 128" in tips["ao-adamw-4bit"]

"""A plan input's field, built from its row of the input table (:mod:`core.inputs`).

The row gives the field everything: name, tooltip, range and unit, the steps and decimals
it types, a fraction shown as a percentage, the text for 0 where 0 means "the default" or
"derived", and the labelled choices. The forms only place the fields.
"""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QWidget

from core.inputs import Input, Kind
from gui.forms.fields import ChoiceField, CountField, FloatField, IntField, SettingField


def field_for(spec: Input) -> QWidget:
    """A new field for ``spec``: IntField, CountField, FloatField, ChoiceField, SettingField or QCheckBox."""
    if spec.kind is Kind.BOOL:
        return check_box(spec)
    if spec.kind is Kind.ENUM:
        return choice_field(spec)
    if spec.kind is Kind.INT:
        return int_field(spec)
    if spec.kind is Kind.COUNT:
        return count_field(spec)
    if spec.kind is Kind.FLOAT:
        return float_field(spec)
    if spec.kind is Kind.SETTING:
        return SettingField(spec.name, spec.tooltip, "PyTorch's defaults")
    raise ValueError(f"{spec.path}: a {spec.kind.value} input has a field of its own form's making")


def check_box(spec: Input) -> QCheckBox:
    box = QCheckBox(spec.label)
    box.setAccessibleName(spec.name)
    box.setToolTip(spec.tooltip)
    return box


def choice_field(spec: Input) -> ChoiceField:
    assert spec.labels is not None
    return ChoiceField(spec.name, [(label, choice.value) for choice, label in spec.labels.items()], spec.tooltip)


def _least(spec: Input) -> float:
    """The field's minimum: 0 where 0 has its own meaning, else the range's low end."""
    return 0 if spec.zero_means else spec.low


def int_field(spec: Input) -> IntField:
    field = IntField(spec.name, int(_least(spec)), int(spec.high), spec.unit, spec.tooltip)
    if spec.step != 1:
        field.setSingleStep(int(spec.step))
    if spec.zero_means or spec.low_means:
        field.setSpecialValueText(spec.zero_means or spec.low_means)
    return field


def float_field(spec: Input) -> FloatField:
    field = FloatField(
        spec.name,
        _least(spec),
        spec.high,
        spec.unit,
        spec.tooltip,
        decimals=spec.decimals,
        step=spec.step,
        scale=spec.scale,
    )
    if spec.zero_means:
        field.setSpecialValueText(spec.zero_means)
    return field


def count_field(spec: Input) -> CountField:
    blank = 0 if spec.zero_means else None  # an empty box: "derived"
    return CountField(
        spec.name,
        int(spec.low),
        int(spec.high),
        spec.unit,
        spec.tooltip,
        blank_means=blank,
        placeholder=spec.zero_means,
    )

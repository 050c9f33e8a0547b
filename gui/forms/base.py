"""What every plan form shares: field registration, apply-with-validation, redraw."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QWidget,
)

from core.estimate import Estimate
from core.inputs import Input, input_at
from core.plan import Plan
from gui.controller import PlanController
from gui.forms.fields import CatalogueField, any_marked, describe, is_marked_invalid, mark_invalid
from gui.forms.guards import guard
from gui.forms.inputs import field_for

Apply = Callable[[Plan, Any], Plan]


class PlanForm(QGroupBox):
    """A titled group of fields bound to part of the Plan.

    Subclasses add the plan's inputs with :meth:`add_input` (a field built from the input
    table, shown and hidden by :meth:`show_inputs`), other editors with :meth:`bind`, and
    extend :meth:`show_plan`, which sets widgets from a Plan; it runs with every field's
    signals blocked.

    ``problemCleared(key)`` says a field's mark went away (typing corrected, the plan's value
    put back, a valid plan arrived): the window drops the warning it showed for that field.
    """

    problemCleared = Signal(str)

    def __init__(self, title: str, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__(title, parent)
        self.controller = controller
        self.setAccessibleName(title)
        self.form = QFormLayout(self)
        self.form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.fields: dict[str, QWidget] = {}
        self._rows_changed = False
        self._redrawing = False  # inside show_plan
        self._dropped: list[tuple[str, QWidget]] = []  # fields hidden under the cursor (_drop_typing_in)
        self.labels: dict[str, QLabel] = {}
        self.inputs: dict[str, Input] = {}  # the fields add_input made, by attribute path
        self._input_rows: list[str] = []  # those of them on a row of their own
        self._shown: tuple[object, ...] | None = None  # shown_key of the plan the fields show
        self.mode = "training"  # the window's mode: Inference hides training-only inputs
        controller.estimateChanged.connect(self._on_estimate)
        controller.editRejected.connect(self._on_rejected)

    # ---- building ------------------------------------------------------------------
    def bind(self, key: str, label: str, widget: QWidget, apply: Apply, *, row: bool = True) -> QWidget:
        """Register ``widget`` as the editor of plan field ``key``; ``apply(plan, value)`` makes the new Plan."""
        self.fields[key] = widget
        widget.setObjectName(key)
        guard(widget)
        edited = getattr(widget, "edited", None)
        if edited is not None:
            edited.connect(lambda value, k=key, w=widget: self.apply(k, w, lambda plan: apply(plan, value), label))
        elif isinstance(widget, QCheckBox):
            widget.toggled.connect(lambda on, k=key, w=widget: self.apply(k, w, lambda plan: apply(plan, on), label))
        finished = getattr(widget, "editingFinished", None)
        if finished is not None:
            finished.connect(lambda w=widget: self._revert_if_invalid(w))
        rejected = getattr(widget, "rejected", None)
        if rejected is not None:
            rejected.connect(lambda message, k=key: self.controller.editRejected.emit(k, message))
        cleared = getattr(widget, "cleared", None)
        if cleared is not None:
            cleared.connect(lambda k=key, w=widget: self._clear_mark(k, w))
        restore = getattr(widget, "restoreRequested", None)
        if restore is not None:
            restore.connect(lambda k=key, w=widget: self._restore(k, w))
        if row:
            if isinstance(widget, QCheckBox):
                self.form.addRow("", widget)
            else:
                text = QLabel(label + ":")
                text.setBuddy(widget)
                self.labels[key] = text
                self.form.addRow(text, widget)
        return widget

    def add_input(
        self, path: str, apply: Apply | None = None, *, row: bool = True, widget: QWidget | None = None
    ) -> Any:
        """The field of the plan input at ``path``, bound to it: built from its row of the
        input table unless ``widget`` is given; ``apply`` defaults to :meth:`Plan.with_input`.
        Returns the field (an IntField, FloatField, CountField, ChoiceField or QCheckBox)."""
        spec = input_at(path)
        field = widget if widget is not None else field_for(spec)
        self.inputs[path] = spec
        if row:
            self._input_rows.append(path)
        return self.bind(path, spec.label, field, apply or (lambda plan, value: plan.with_input(path, value)), row=row)

    def show_inputs(self, plan: Plan, *, advanced: bool = False) -> None:
        """Every input's field shows the plan's value; its row shows when the input matters
        for the plan (the frameworks' finer knobs only when ``advanced``)."""
        for path in self.inputs:
            widget, value = self.fields[path], plan.input_value(path)
            if isinstance(widget, QCheckBox):
                widget.setChecked(value)
            else:
                widget.show_value(value)  # type: ignore[attr-defined]
        serving = self.mode == "inference"
        for path in self.inputs:
            spec = self.inputs[path]
            if spec.zero_means_serving:  # 0 means another thing to serving's figures (on this card)
                field = self.fields[path]
                zero = self.zero_in_serving(path, plan) if serving else spec.zero_means
                if isinstance(field, QAbstractSpinBox) and field.specialValueText() != zero:
                    field.setSpecialValueText(zero)
                    tip = spec.tooltip
                    if serving:
                        tip += f"\nIn Inference mode 0 is {zero}: the share serving's figures take."
                    describe(field, spec.name, tip)
        for path in self._input_rows:
            spec = self.inputs[path]
            shown = spec.matters(plan) and (advanced or not spec.advanced) and not (serving and spec.training_only)
            self.set_row_visible(path, shown)
            label = self.labels.get(path)
            if shown and label is not None and spec.label_for is not None and label.text() != spec.label_in(plan) + ":":
                label.setText(spec.label_in(plan) + ":")  # core names the field for the plan's method

    def zero_in_serving(self, path: str, plan: Plan) -> str:
        """What 0 in the input at ``path`` means to the plan's serving figures (a form whose
        meaning depends on the plan says it for the plan)."""
        return self.inputs[path].zero_means_serving

    def set_row_visible(self, key: str, visible: bool) -> None:
        self.set_widget_row_visible(self.fields[key], visible)

    def set_widget_row_visible(self, widget: QWidget, visible: bool) -> None:
        if self.form.isRowVisible(widget) != visible:
            if not visible:
                self._drop_typing_in(widget)
            self.form.setRowVisible(widget, visible)
            self._rows_changed = True

    def _drop_typing_in(self, row: QWidget) -> None:
        """A row hidden under the cursor (another choice or a disclosure hid it) shows the
        plan's value: hiding moves the focus, and the field would commit its typing then
        (during a redraw whose blocked signals lose the edit) or keep text the plan refused."""
        focus = QApplication.focusWidget()
        if focus is None or not (focus is row or row.isAncestorOf(focus)):
            return
        key, field = next(((k, w) for k, w in self.fields.items() if w is focus or w.isAncestorOf(focus)), ("", None))
        if field is None:
            return
        drop = getattr(field, "_restore", None)
        if callable(drop):
            drop()  # a number box: its typing goes
        if self._redrawing:
            self._dropped.append((key, field))  # the plan's value, once this redraw has hidden the row
        else:
            self._restore(key, field)

    # ---- edits ---------------------------------------------------------------------
    def apply(self, key: str, widget: QWidget, change: Callable[[Plan], Plan], label: str) -> None:
        error = self.controller.update(key, change, text=f"Change {label.lower()}")
        # A catalogue picker with the focus is being typed in: its text stays, marked, until
        # the user leaves it. An entry chosen from its list is a choice, as any other box's.
        typed = isinstance(widget, CatalogueField) and widget.hasFocus()
        chosen = isinstance(widget, (QCheckBox, QComboBox)) and not typed
        if error is not None and chosen:
            # A choice is not "being typed": show the plan's value again at once; the status
            # bar says why (a picker keeps no mark: it shows the plan's entry, not the refused one).
            self._redraw(self.controller.plan)
        if error is None:
            self._clear_mark(key, widget)
        elif chosen and isinstance(widget, CatalogueField):
            if is_marked_invalid(widget):
                mark_invalid(widget, None)  # unmarked; the status bar keeps saying why
        else:
            mark_invalid(widget, str(error))

    def _clear_mark(self, key: str, widget: QWidget) -> None:
        if is_marked_invalid(widget):
            mark_invalid(widget, None)
        self.problemCleared.emit(key)

    def _restore(self, key: str, widget: QWidget) -> None:
        """Show the plan's value again over the typing (Escape, or leaving refused text)."""
        self._redraw(self.controller.plan)
        self._clear_mark(key, widget)

    def _revert_if_invalid(self, widget: QWidget) -> None:
        """Leaving a box with bad text puts the plan's (last valid) value back."""
        if not widget.hasFocus() and is_marked_invalid(widget):
            self._restore(widget.objectName(), widget)

    def _on_rejected(self, key: str, message: str) -> None:
        widget = self.fields.get(key)
        if widget is not None:
            mark_invalid(widget, message)

    # ---- redraw --------------------------------------------------------------------
    def _redraw(self, plan: Plan, key: tuple[object, ...] | None = None) -> None:
        blockers = [QSignalBlocker(w) for w in self.fields.values()]
        # Qt lays a visible form out at once each time one of its widgets is shown: a plan
        # that shows a few rows (label and field each) laid the whole form out a dozen times.
        # With the layout off meanwhile, it is laid out once, after show_plan, before painting.
        self._rows_changed = False
        self.form.setEnabled(False)
        self._redrawing, self._dropped = True, []
        try:
            self.show_plan(plan)
            if self._dropped:  # a field hidden under the cursor: the plan's value in it
                self.show_plan(plan)
        finally:
            self._redrawing = False
            self.form.setEnabled(True)
            del blockers
        for path, widget in self._dropped:
            self._clear_mark(path, widget)
        if self._rows_changed:
            self.form.invalidate()
        self._shown = key if key is not None else self.shown_key(plan)

    def set_mode(self, mode: str) -> None:
        """The window's mode: in Inference mode the inputs only training reads are hidden."""
        if mode != self.mode:
            self.mode = mode
            self._redraw(self.controller.plan)

    def shown_key(self, plan: Plan) -> tuple[object, ...]:
        """What of ``plan`` the form shows: its inputs' values and which of their rows show.
        A form whose :meth:`show_plan` reads more of the plan adds that."""
        return (
            self.mode,
            tuple(plan.input_value(path) for path in self.inputs),
            tuple(self.inputs[path].matters(plan) for path in self._input_rows),
        )

    def show_estimate_now(self, estimate: Estimate) -> None:
        """Show ``estimate``'s plan and figures (a form built after the estimate came)."""
        self._on_estimate(estimate)

    def _on_estimate(self, estimate: Estimate) -> None:
        # An edit elsewhere leaves most forms showing what they show: setting every field of
        # seven forms again was a sixth of an edit's time. A field marked invalid keeps its
        # typed text until a redraw, so any mark redraws.
        shown = self.shown_key(estimate.plan)
        if shown != self._shown or any_marked():
            self._redraw(estimate.plan, shown)
        self.show_estimate(estimate)
        # A plan that arrived (undo, open, another form) is valid: clear stale marks,
        # except where the user's text is still being typed and is still wrong.
        if not any_marked():
            return
        for key, widget in self.fields.items():
            if not widget.hasFocus() and is_marked_invalid(widget):
                self._clear_mark(key, widget)

    def show_plan(self, plan: Plan) -> None:
        self.show_inputs(plan)

    def show_estimate(self, estimate: Estimate) -> None:
        """Read-only figures beside the inputs (parameter count, card memory); optional."""

"""Model: a catalogue pick, a config.json/model folder import, or dimensions typed by hand."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QLabel, QMenu, QToolButton, QWidget

from core.catalogue import find_model, load_models
from core.errors import PlanError
from core.estimate import Estimate
from core.model import LIMITS, ModelSpec, model_from_dict
from core.plan import Plan
from gui import plaintext
from gui.controller import PlanController
from gui.format import count
from gui.forms.base import PlanForm
from gui.forms.fields import IntField
from gui.forms.pickers import USER_PREFIX, Entry, SearchingPicker
from gui.forms.saved_entries import ask_entry_name, store_entry
from gui.settings import MAX_ENTRY_NAME, Settings

MINE = USER_PREFIX  # id prefix of the user's saved models in the picker

# (ModelSpec field, label, tooltip) for the dimensions editor.
DIMENSIONS: tuple[tuple[str, str, str], ...] = (
    ("num_layers", "Layers", "Transformer blocks (L); config.json num_hidden_layers."),
    ("hidden_size", "Hidden width", "Width of the residual stream (d); config.json hidden_size."),
    ("num_heads", "Attention heads", "Query heads per block; config.json num_attention_heads."),
    ("num_kv_heads", "KV heads", "Key/value heads (grouped-query attention); must divide the query heads."),
    ("head_dim", "Head width", "Width of one attention head; usually hidden width ÷ heads."),
    ("intermediate_size", "MLP width", "Inner width of the feed-forward block; config.json intermediate_size."),
    ("vocab_size", "Vocabulary", "Tokens in the vocabulary (V): sizes the embeddings, the head and the logits."),
    ("num_experts", "Experts", "Mixture-of-experts: experts per block (1 for a dense model)."),
    ("experts_per_token", "Experts per token", "Mixture-of-experts: experts each token is routed to."),
)


def saved_models(settings: Settings | None) -> dict[str, ModelSpec]:
    """The user's saved models that still read as valid models (a bad one is left out)."""
    models: dict[str, ModelSpec] = {}
    for name, data in (settings.custom_models if settings is not None else {}).items():
        try:
            models[name] = model_from_dict(data).renamed(name)
        except (PlanError, TypeError, ValueError):
            continue
    return models


def model_sections(saved: dict[str, ModelSpec]) -> list[tuple[str, list[Entry]]]:
    catalogue = [(m.name, m.id) for m in load_models()]
    return [("", catalogue), ("Your own models", [(f"{name} (yours)", MINE + name) for name in saved])]


def _edited_name(plan: Plan) -> str:
    name = plan.model.name
    return name if not plan.model_id or name.endswith("(edited)") else f"{name} (edited)"


def _with_dimension(plan: Plan, name: str, value: Any) -> Plan:
    model = replace(plan.model, **{name: value, "name": _edited_name(plan)})
    return plan.on_model(model)


def _dimension_setter(name: str) -> Callable[[Plan, Any], Plan]:
    return lambda plan, value: _with_dimension(plan, name, value)


class ModelForm(PlanForm):
    """Emits ``importRequested(kind)`` ("file" or "folder"); the window runs the dialog."""

    importRequested = Signal(str)

    def __init__(
        self, controller: PlanController, parent: QWidget | None = None, *, settings: Settings | None = None
    ) -> None:
        super().__init__("Model", controller, parent)
        self.settings = settings
        self.picker = SearchingPicker(
            "Model",
            model_sections(saved_models(settings)),
            "The model to train or serve, from the catalogue of published architectures, or one you saved.",
        )
        self.bind("model", "Model", self.picker, lambda plan, model_id: self._pick(plan, model_id))

        self.import_button = QToolButton()
        self.import_button.setText("Open config.json…")
        self.import_button.setAccessibleName("Open config.json or model folder")
        self.import_button.setToolTip(
            "Read the architecture from a Hugging Face config.json, or from a model folder that holds one.\n"
            "Nothing in the file is executed."
        )
        self.import_button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        menu = QMenu(self.import_button)
        menu.addAction("config.json file…", lambda: self.importRequested.emit("file"))
        menu.addAction("Model folder…", lambda: self.importRequested.emit("folder"))
        self.import_button.setMenu(menu)
        self.import_button.clicked.connect(lambda: self.importRequested.emit("file"))
        self.import_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.save_model = QToolButton()
        self.save_model.setText("Save to my models…")
        self.save_model.setAccessibleName("Save this model to your list")
        self.save_model.setToolTip("Keep this model (imported or edited) in the list under a name (in your settings).")
        self.save_model.clicked.connect(self._save_model)
        self.save_model.setEnabled(settings is not None)
        self.form.addRow("", self.import_button)
        self.form.addRow("", self.save_model)

        self.summary = QLabel()
        self.summary.setTextFormat(Qt.TextFormat.RichText)  # our markup; the model's name escaped in it
        self.summary.setWordWrap(True)
        self.summary.setAccessibleName("Model summary")
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.form.addRow(self.summary)

        # The dimensions editor folds away: most people pick a catalogue model.
        self.dims_toggle = QToolButton()
        self.dims_toggle.setText("Architecture dimensions")
        self.dims_toggle.setCheckable(True)
        self.dims_toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.dims_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.dims_toggle.setAutoRaise(True)
        self.dims_toggle.setAccessibleName("Show architecture dimensions")
        self.dims_toggle.setToolTip("Edit the model's dimensions by hand (makes it a custom model).")
        self.dims_toggle.toggled.connect(self._show_dimensions)
        self.form.addRow(self.dims_toggle)
        self._dimension_keys: list[str] = []
        for name, label, tooltip in DIMENSIONS:
            key = f"model.{name}"
            field = IntField(label, 1, min(LIMITS[name], 2**31 - 1), "", tooltip)
            self.bind(key, label, field, _dimension_setter(name))
            self._dimension_keys.append(key)
        self.tied = QCheckBox("Tied input/output embeddings")
        self.tied.setAccessibleName("Tied embeddings")
        self.tied.setToolTip("The output head reuses the embedding matrix (no separate V × d head).")
        self.bind(
            "model.tie_embeddings", "Tied embeddings", self.tied, lambda p, v: _with_dimension(p, "tie_embeddings", v)
        )
        self.gated = QCheckBox("Gated MLP (SwiGLU: gate, up, down)")
        self.gated.setAccessibleName("Gated MLP")
        self.gated.setToolTip("Three MLP matrices (Llama, Mistral, Qwen) instead of two (GPT-2).")
        self.bind("model.gated_mlp", "Gated MLP", self.gated, lambda p, v: _with_dimension(p, "gated_mlp", v))
        self._dimension_keys += ["model.tie_embeddings", "model.gated_mlp"]
        self._show_dimensions(False)

    def _pick(self, plan: Plan, model_id: str) -> Plan:
        if model_id.startswith(MINE):
            saved = saved_models(self.settings).get(model_id[len(MINE) :])
            if saved is not None:  # a plan embeds its model: the saved one travels with the file
                return plan.on_model(saved)
        entry = find_model(model_id)
        return plan.on_model(entry.spec, entry.id)

    def _save_model(self) -> None:
        if self.settings is None:
            return
        settings = self.settings
        model = self.controller.plan.model
        title = "Save to my models"
        suggested = model.name.removesuffix(" (edited)")[:MAX_ENTRY_NAME]
        name = ask_entry_name(self, title, "Name for this model:", suggested)
        if name is None:
            return
        data = model.renamed(name).to_dict()
        names = list(settings.custom_models)
        if not store_entry(
            self, title, "model", names, lambda: settings.add_custom_model(name, data), settings.forget_custom_model
        ):
            return
        self.picker.set_sections(model_sections(saved_models(self.settings)))
        self.show_plan(self.controller.plan)

    def _show_dimensions(self, shown: bool) -> None:
        self.dims_toggle.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)
        for key in self._dimension_keys:
            self.set_row_visible(key, shown)

    def show_plan(self, plan: Plan) -> None:
        shown = plan.model_id
        if not shown and plan.model.name in saved_models(self.settings):
            shown = MINE + plan.model.name
        self.picker.show_value(shown, plan.model.name)
        model = plan.model
        for name, _label, _tooltip in DIMENSIONS:
            field = self.fields[f"model.{name}"]
            assert isinstance(field, IntField)
            field.show_value(int(getattr(model, name)))
        self.tied.setChecked(model.tie_embeddings)
        self.gated.setChecked(model.gated_mlp)

    def show_estimate(self, estimate: Estimate) -> None:
        params = estimate.params
        model = estimate.plan.model
        source = "as typed" if model.params_override else "from the architecture"
        text = f"<b>{count(params.total)}</b> parameters ({source})"
        if params.active != params.total:
            text += f", {count(params.active)} active per token"
        text += f"<br>{model.num_layers} layers · width {model.hidden_size:,} · {model.num_heads} heads"
        if model.num_kv_heads != model.num_heads:
            text += f" ({model.num_kv_heads} KV)"
        text += f" · vocab {model.vocab_size:,}"
        if not estimate.plan.model_id:
            text = f"<i>{plaintext.html(model.name)}</i><br>" + text
        self.summary.setText(text)

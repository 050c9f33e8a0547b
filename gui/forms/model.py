"""Model: a catalogue pick, a model downloaded on this machine, a config.json/model folder
import, or dimensions typed by hand.

The models in this machine's Hugging Face cache are listed beside the catalogue once the
"machine" worker has scanned it (:class:`gui.local_machine.LocalMachine`, with progress and
Cancel under the picker). Choosing one reads its safetensors headers in the worker before it
becomes the plan's model (one undoable step); a Hub id typed in the picker is looked up the
same way (:mod:`core.files.model_source`: the cache, else the catalogue, else one line why).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QMenu, QToolButton, QWidget

from core.catalogue import find_model, load_models
from core.errors import PlanError, one_line
from core.estimate import Estimate
from core.hybrid import MIXER_NAMES
from core.model import LIMITS, ModelSpec, model_from_dict
from core.plan import Plan
from gui import dialogs, plaintext
from gui.controller import PlanController
from gui.format import memory, plain_number
from gui.forms.base import PlanForm
from gui.forms.fields import IntField
from gui.forms.pickers import CACHED_PREFIX, USER_PREFIX, Entry, SearchingPicker
from gui.forms.saved_entries import ask_entry_name, store_entry
from gui.progress import SearchProgress
from gui.settings import MAX_ENTRY_NAME, Settings

if TYPE_CHECKING:  # this machine is looked at once the window has painted: not imported before
    from core.files.hfcache import CachedModel, CacheScan
    from gui.local_machine import LocalMachine
    from gui.worker.machine import ModelAnswer

MINE = USER_PREFIX  # id prefix of the user's saved models in the picker
CACHED = CACHED_PREFIX  # id prefix of the models downloaded on this machine
CACHED_HEADING = "Downloaded on this machine (Hugging Face cache)"
MAX_SKIPPED_SHOWN = 50  # the skipped list's dialog: the first ones, then how many more

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
# Multi-head latent attention (DeepSeek-V2 / V3, Kimi K2): shown for such a model only (core.model's fields).
LATENT_DIMENSIONS: tuple[tuple[str, str, str], ...] = (
    (
        "kv_lora_rank",
        "KV latent rank",
        "Multi-head latent attention: width of the compressed KV latent the engines cache (config.json kv_lora_rank).",
    ),
    (
        "qk_rope_head_dim",
        "Rotary key width",
        "Multi-head latent attention: the rotary part of q·k per head, cached beside the latent (qk_rope_head_dim).",
    ),
    ("v_head_dim", "Value head width", "Multi-head latent attention: width of one head's value (v_head_dim)."),
    (
        "q_lora_rank",
        "Query latent rank",
        "Multi-head latent attention: the query's compression (q_lora_rank); 0 is a plain q_proj (DeepSeek-V2-Lite).",
    ),
    (
        "first_k_dense_replace",
        "Dense first layers",
        "DeepSeek: how many first layers have a dense MLP instead of experts (first_k_dense_replace).",
    ),
    (
        "dense_intermediate_size",
        "Dense MLP width",
        "DeepSeek: the dense first layers' MLP width (config.json "
        "intermediate_size; the experts' is moe_intermediate_size).",
    ),
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


def model_sections(saved: dict[str, ModelSpec], cached: tuple[CachedModel, ...] = ()) -> list[tuple[str, list[Entry]]]:
    catalogue = [(m.name, m.id) for m in load_models()]
    downloaded = [(f"{m.repo_id} · {memory(m.size_bytes)} downloaded", CACHED + m.repo_id) for m in cached]
    return [
        ("", catalogue),
        (CACHED_HEADING, downloaded),
        ("Your own models", [(f"{name} (yours)", MINE + name) for name in saved]),
    ]


def is_hub_id(text: str) -> bool:
    """``organisation/name``: looked up in the Hugging Face cache (:mod:`core.files.model_source`)."""
    from core.files.model_source import is_hub_id as hub_id

    return hub_id(text)


def skipped_text(scan: CacheScan) -> str:
    """What the scan skipped, one "name — reason" a line (the first :data:`MAX_SKIPPED_SHOWN`)."""
    lines = [f"{one_line(s.name)} — {s.reason}" for s in scan.skipped[:MAX_SKIPPED_SHOWN]]
    if len(scan.skipped) > MAX_SKIPPED_SHOWN:
        lines.append(f"… and {len(scan.skipped) - MAX_SKIPPED_SHOWN:,} more")
    return "\n".join(lines)


def _edited_name(plan: Plan) -> str:
    name = plan.model.name
    return name if not plan.model_id or name.endswith("(edited)") else f"{name} (edited)"


def _with_dimension(plan: Plan, name: str, value: Any) -> Plan:
    model = plan.model.edited(**{name: value, "name": _edited_name(plan)})
    return plan.on_model(model)


def _dimension_setter(name: str) -> Callable[[Plan, Any], Plan]:
    return lambda plan, value: _with_dimension(plan, name, value)


class ModelForm(PlanForm):
    """Emits ``importRequested(kind)`` ("file" or "folder"); the window runs the dialog."""

    importRequested = Signal(str)

    def __init__(
        self,
        controller: PlanController,
        parent: QWidget | None = None,
        *,
        settings: Settings | None = None,
        local: LocalMachine | None = None,
    ) -> None:
        super().__init__("Model", controller, parent)
        self.settings = settings
        self._estimate: Estimate | None = None  # the last shown: the summary redrawn when the mode changes
        self.local: LocalMachine | None = None
        self.picker = SearchingPicker(
            "Model",
            model_sections(saved_models(settings)),
            "The model to train or serve, from the catalogue of published architectures, one downloaded on "
            "this machine, or one you saved.\nA Hub id (organisation/name) is read from the local Hugging "
            "Face cache, offline.",
            free_text=is_hub_id,
        )
        self.bind("model", "Model", self.picker, lambda plan, model_id: self._pick(plan, model_id))
        self.picker.typed.connect(self._typed)
        self._build_cache_rows()
        if local is not None:
            self.attach_local(local)

        self._build_file_buttons(settings is not None)

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
        self._latent_keys: list[str] = []
        for name, label, tooltip in LATENT_DIMENSIONS:
            key = f"model.{name}"
            field = IntField(label, 0, LIMITS["intermediate_size"], "", tooltip)
            self.bind(key, label, field, _dimension_setter(name))
            self._latent_keys.append(key)
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

    def _build_file_buttons(self, can_save: bool) -> None:
        """Open config.json… (a file or a model folder) and Save to my models…."""
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
        self.save_model.setEnabled(can_save)
        self.form.addRow("", self.import_button)
        self.form.addRow("", self.save_model)

    # ---- the models downloaded on this machine -------------------------------------
    def _build_cache_rows(self) -> None:
        """Under the picker: the scan's and a model read's progress (with Cancel), and what
        the cache holds, with the entries it skipped and why."""
        self.cache_progress = SearchProgress("%v of %m models", again="Scan again")
        self.cache_progress.setObjectName("cacheProgress")
        self.cache_progress.cancelRequested.connect(self._cancel_local)
        self.cache_progress.againRequested.connect(self._again)
        self.form.addRow("", self.cache_progress)
        row = QWidget()
        line = QHBoxLayout(row)
        line.setContentsMargins(0, 0, 0, 0)
        self.cache_note = plaintext.plain_label(QLabel())  # paths and names from this machine
        self.cache_note.setObjectName("cacheNote")
        self.cache_note.setAccessibleName("Downloaded models")
        self.cache_note.setWordWrap(True)
        self.cache_skipped = QToolButton()
        self.cache_skipped.setObjectName("cacheSkipped")
        self.cache_skipped.setAutoRaise(True)
        self.cache_skipped.clicked.connect(self._show_skipped)
        line.addWidget(self.cache_note, 1)
        line.addWidget(self.cache_skipped)
        self.cache_row = row
        self.form.addRow("", row)
        self._last_read: tuple[str, str] = ("", "")  # ("scan" | "read" | "resolve", what): for "again"
        self._model_asked: ModelSpec | None = None  # the plan's model when a read was asked for
        self.set_widget_row_visible(self.cache_progress, False)
        self.set_widget_row_visible(row, False)

    def attach_local(self, local: LocalMachine) -> None:
        """List what ``local`` finds in the Hugging Face cache from now on, and read models with it."""
        self.local = local
        local.scanStarted.connect(self._scan_started)
        local.scanProgressed.connect(self.cache_progress.progressed)
        local.scanned.connect(self._scanned)
        local.scanStopped.connect(lambda why: self._stopped("scan", why))
        local.modelStarted.connect(self._read_started)
        local.modelProgressed.connect(self.cache_progress.progressed)
        local.modelRead.connect(self._model_read)
        local.modelStopped.connect(lambda why: self._stopped("read", why))
        if local.cache is not None:
            self._scanned(local.cache)

    def _cached(self, repo_id: str) -> CachedModel | None:
        cache = self.local.cache if self.local is not None else None
        return cache.find(repo_id) if cache is not None else None

    def _scan_started(self) -> None:
        self._last_read = ("scan", "")
        self.set_widget_row_visible(self.cache_progress, True)
        self.cache_progress.steps = "%v of %m models"
        self.cache_progress.searching("Looking for models downloaded on this machine…")

    def _read_started(self, what: str) -> None:
        self.set_widget_row_visible(self.cache_progress, True)
        self.cache_progress.steps = "%v of %m files"
        self.cache_progress.searching(what)

    def _scanned(self, scan: CacheScan) -> None:
        if not (self.local is not None and self.local.reading):
            self.cache_progress.idle("")
            self.set_widget_row_visible(self.cache_progress, False)
        self.picker.set_sections(model_sections(saved_models(self.settings), scan.models))
        self._redraw(self.controller.plan)
        if not scan.exists:
            self.cache_note.setText(f"No Hugging Face cache at {scan.root}: no models downloaded here.")
        else:
            listed = f"{len(scan.models):,} downloaded models in the list"
            self.cache_note.setText(f"{listed} (Hugging Face cache: {scan.root})")
        self.cache_skipped.setText(f"{len(scan.skipped):,} skipped…")
        self.cache_skipped.setToolTip(plaintext.tooltip(skipped_text(scan)))
        self.cache_skipped.setVisible(bool(scan.skipped))
        self.set_widget_row_visible(self.cache_row, True)

    def _show_skipped(self) -> None:
        cache = self.local.cache if self.local is not None else None
        if cache is not None and cache.skipped:
            dialogs.info(self, "Skipped in the Hugging Face cache", skipped_text(cache))

    def _cancel_local(self) -> None:
        if self.local is None:
            return
        if self.local.reading:
            self.local.cancel_read()
        else:
            self.local.cancel_scan()

    def _stopped(self, kind: str, why: str) -> None:
        if kind == "read":
            self._redraw(self.controller.plan)  # the picker shows the plan's model again
        if why:
            self.cache_progress.idle(why, again=True)
        elif kind == "scan":
            self.cache_progress.idle("Cancelled: the downloaded models are not listed.", again=True)
        else:
            self.cache_progress.idle("")
            self.set_widget_row_visible(self.cache_progress, False)

    def _again(self) -> None:
        if self.local is None:
            return
        kind, what = self._last_read
        cached = self._cached(what) if kind == "read" else None
        if cached is not None:
            self.local.read(cached)
        elif kind == "resolve":
            self.local.resolve(what)
        else:
            self.local.scan()

    def _typed(self, hub_id: str) -> None:
        """A Hub id typed in the picker: read from the cache in the worker (or said why not)."""
        if self.local is None:
            self.controller.editRejected.emit("model", f"Model: no entry called “{hub_id}”; pick one from the list")
            return
        self._last_read = ("resolve", hub_id)
        self._model_asked = self.controller.plan.model
        self.local.resolve(hub_id)

    def _model_read(self, answer: ModelAnswer) -> None:
        self.cache_progress.idle("")
        self.set_widget_row_visible(self.cache_progress, self.local is not None and self.local.scanning)
        named = answer.model
        if self.controller.plan.model != self._model_asked:
            return  # another model was chosen (or undone to) while this one was read: it stays
        if named is None:
            self._redraw(self.controller.plan)
            self.controller.editRejected.emit("model", answer.error)
            return
        text = f"Use {named.hub_id or named.spec.name}" + (" (downloaded)" if named.cached is not None else "")
        refused = self.controller.update("model", lambda plan: plan.on_model(named.spec, named.model_id), text)
        if refused is None and named.note:
            self.cache_note.setText(named.note)
            self.set_widget_row_visible(self.cache_row, True)

    # ---- picking ---------------------------------------------------------------------
    def _pick(self, plan: Plan, model_id: str) -> Plan:
        if model_id.startswith(CACHED):
            cached = self._cached(model_id[len(CACHED) :])
            if cached is not None and self.local is not None:
                self._last_read = ("read", cached.repo_id)
                self._model_asked = plan.model
                self.local.read(cached)  # the plan's model once its headers are read
            return plan
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
        cache = self.local.cache if self.local is not None else None
        self.picker.set_sections(model_sections(saved_models(self.settings), cache.models if cache else ()))
        self.show_plan(self.controller.plan)

    def _show_dimensions(self, shown: bool) -> None:
        self.dims_toggle.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)
        for key in self._dimension_keys:
            self.set_row_visible(key, shown)
        latent = shown and self.controller.plan.model.latent_attention
        for key in self._latent_keys:
            self.set_row_visible(key, latent)

    def shown_key(self, plan: Plan) -> tuple[object, ...]:
        return (*super().shown_key(plan), plan.model_id, plan.model)

    def show_plan(self, plan: Plan) -> None:
        shown = plan.model_id
        if not shown and plan.model.name in saved_models(self.settings):
            shown = MINE + plan.model.name
        elif not shown and is_hub_id(plan.model.name) and self._cached(plan.model.name) is not None:
            shown = CACHED + plan.model.name
        self.picker.show_value(shown, plan.model.name)
        model = plan.model
        for name, _label, _tooltip in DIMENSIONS:
            field = self.fields[f"model.{name}"]
            assert isinstance(field, IntField)
            field.show_value(int(getattr(model, name)))
        for name, _label, _tooltip in LATENT_DIMENSIONS:
            field = self.fields[f"model.{name}"]
            assert isinstance(field, IntField)
            field.show_value(int(getattr(model, name)))
        latent = self.dims_toggle.isChecked() and model.latent_attention
        for key in self._latent_keys:
            self.set_row_visible(key, latent)
        self.tied.setChecked(model.tie_embeddings)
        self.gated.setChecked(model.gated_mlp)

    def set_mode(self, mode: str) -> None:
        """The summary says how the tower is held in the mode shown (frozen in training; per engine in serving)."""
        changed = mode != self.mode
        super().set_mode(mode)
        if changed and self._estimate is not None:
            self.show_estimate(self._estimate)

    def _tower_words(self, estimate: Estimate) -> str:
        if self.mode != "inference":
            return "loaded, frozen"
        from core.serving.text_only import tower_serving_words  # the serving rules load with serving figures

        return tower_serving_words(estimate.plan.model, estimate.plan.inference)

    @staticmethod
    def _stack_words(model: ModelSpec) -> str:
        """A hybrid's layers by kind: "36 Mamba-2, 4 attention"; Falcon-H1's "Mamba-2 beside attention in each"."""
        mixer = MIXER_NAMES.get(model.recurrent_mixer, model.recurrent_mixer)
        if model.attention_layers == model.recurrent_layers == model.num_layers:
            return f"{mixer} beside attention in each"
        return f"{model.recurrent_layers} {mixer}, {model.attention_layers} attention"

    def show_estimate(self, estimate: Estimate) -> None:
        self._estimate = estimate
        params = estimate.params
        model = estimate.plan.model
        hybrid = model.hybrid
        # a hybrid's count is read exactly from its config (core.hybrid), not typed
        source = "as typed" if model.params_override else "from the architecture"
        if hybrid is not None:
            source = "from its config"
        text = f"<b>{plain_number(params.total)}</b> parameters ({source})"
        if params.active != params.total:
            text += f", {plain_number(params.active)} active per token"
        if model.vision_params:  # an image-text checkpoint's tower, held in Weights where loaded (core.vision)
            kind = plaintext.html(model.vision_kind or "vision")
            held = self._tower_words(estimate)
            text += f" + <b>{plain_number(model.vision_params)}</b> in its {kind} vision tower and projector ({held})"
        text += f"<br>{model.num_layers} layers · width {model.hidden_size:,} · {model.num_heads} heads"
        if hybrid is not None:
            text = text.replace(" layers ·", f" layers ({self._stack_words(model)}) ·", 1)
        if model.latent_attention:
            query = f"query latent {model.q_lora_rank}" if model.q_lora_rank else "plain query"
            text += (
                f" (latent attention: KV latent {model.kv_lora_rank} + rotary {model.qk_rope_head_dim} cached, {query})"
            )
        elif model.num_kv_heads != model.num_heads:
            text += f" ({model.num_kv_heads} KV)"
        text += f" · vocab {model.vocab_size:,}"
        if model.first_k_dense_replace:
            text += f" · first {model.first_k_dense_replace} layers dense"
        if not estimate.plan.model_id:
            text = f"<i>{plaintext.html(model.name)}</i><br>" + text
        self.summary.setText(text)

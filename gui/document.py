"""The document life-cycle: new, open, save, recent files, import, export paths, the session.

One object owns "which file is this plan, and is it saved?", so the window only builds
menus and shows titles. It needs no window: dialogs go through :mod:`gui.dialogs` (tests
monkeypatch them) with ``dialog_parent`` as their parent, which may be None.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from core.errors import PlanError, PlanFileError
from core.files import planfile
from core.plan import Plan
from core.presets import default_plan
from core.verdict import Mode
from gui import dialogs, offthread, plaintext, saving
from gui.controller import PlanController
from gui.settings import Settings
from gui.worker.runner import JobFailed

if TYPE_CHECKING:
    from core.files.importer import ImportedModel
    from gui.display_state import DisplayState
    from gui.model_import import ModelImporter

UNTITLED = "Untitled plan"


def _larger_than_a_plan(path: str) -> bool:
    """More than a plan the app writes (a few kB) could be: start-up does not read it."""
    try:
        return os.stat(path).st_size > offthread.SMALL_BYTES
    except OSError:
        return False  # the read says why


class Document(QObject):
    """The current plan's file. Emits :attr:`pathChanged` when the file changes and
    :attr:`message` with a short status text ("Saved …")."""

    pathChanged = Signal()
    message = Signal(str)

    def __init__(
        self,
        controller: PlanController,
        settings: Settings,
        dialog_parent: QWidget | None = None,
        parent: QObject | None = None,
        display: DisplayState | None = None,
    ) -> None:
        """``display``: the window's mode, which a plan file keeps (opened, it is restored; saved,
        written); None (no window) opens and saves in Training."""
        super().__init__(parent)
        self.controller = controller
        self.display = display
        self.settings = settings
        self.dialog_parent = dialog_parent
        self.path: str | None = None
        self._model_importer: ModelImporter | None = None

    @property
    def model_importer(self) -> ModelImporter:
        """Reads a model folder's safetensors headers in a worker, with progress and Cancel;
        made (its modules loaded) when a folder is first opened, not at start-up."""
        if self._model_importer is None:
            from gui import model_import

            self._model_importer = model_import.ModelImporter(self.dialog_parent)
            self._model_importer.imported.connect(self._use_imported)
            self._model_importer.failed.connect(
                lambda message: dialogs.error(self.dialog_parent, "Cannot read the model", message)
            )
        return self._model_importer

    # ---- reading -------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The file's name for titles and menus, with control characters made visible."""
        return plaintext.window_title(Path(self.path).name) if self.path else UNTITLED

    @property
    def modified(self) -> bool:
        return not self.controller.undo_stack.isClean()

    def folder(self) -> str:
        """Where file dialogs start: the document's folder, else the last recent file's."""
        if self.path:
            return str(Path(self.path).parent)
        recent = self.settings.recent_files
        return str(Path(recent[0]).parent) if recent else ""

    def export_path(self, kind: str) -> str:
        """A suggested file name for an exported chart of this document."""
        stem = Path(self.path).name.removesuffix(".json").removesuffix(".vramplan") if self.path else "memory"
        return os.path.join(self.folder(), f"{stem}.{kind}")

    # ---- life-cycle ------------------------------------------------------------------
    def maybe_save(self) -> bool:
        """True when it is fine to replace the current plan (saved, discarded, or unchanged)."""
        if not self.modified or self.path is None:
            return True  # an untitled plan survives as the session's last plan
        choice = dialogs.ask_save_changes(self.dialog_parent, Path(self.path).name)
        if choice == "save":
            return self.save()
        return choice == "discard"

    def new(self) -> None:
        if self.maybe_save():
            self.set_document(default_plan(), None)

    def open(self) -> None:
        if not self.maybe_save():
            return
        path = dialogs.open_file(self.dialog_parent, "Open plan", dialogs.PLAN_FILTER, self.folder())
        if path:
            self.open_path(path)

    def open_path(self, path: str) -> bool:
        try:  # a large file is parsed in the worker process: the window keeps running
            saved = offthread.read_file(
                self.dialog_parent, planfile.load_saved, path, title="Open plan", name="openProgress"
            )
        except (PlanFileError, PlanError, JobFailed) as error:
            dialogs.error(self.dialog_parent, "Cannot open the plan", str(error))
            return False
        if saved is None:
            return False  # cancelled
        if self.set_document(saved.plan, path):
            if self.display is not None:  # the question the plan was saved with (not an undo step)
                self.display.set_mode(saved.mode)
            self.settings.add_recent(os.path.abspath(path))
            return True
        return False

    def open_recent(self, path: str) -> None:
        if not os.path.isfile(path):
            # A file moved or deleted since: say so, and take it off the list.
            self.settings.remove_recent(path)
            gone = f"{path} no longer exists; it has been taken off Open Recent."
            dialogs.error(self.dialog_parent, "Cannot open the plan", gone)
            return
        if self.maybe_save():
            self.open_path(path)

    def load_example(self, title: str, plan: Plan) -> bool:
        """A worked example becomes the plan as one undoable step (the document stays)."""
        error = self.controller.set_plan(plan, text=f"Load example: {title}")
        if error is not None:
            dialogs.error(self.dialog_parent, "Cannot load the example", str(error))
            return False
        return True

    def open_recovered(self, plan: Plan) -> bool:
        """An autosaved plan of a session that ended unexpectedly, as an untitled document."""
        return self.set_document(plan, None)

    def set_document(self, plan: Plan, path: str | None) -> bool:
        error = self.controller.reset(plan)
        if error is not None:
            dialogs.error(self.dialog_parent, "Cannot use the plan", str(error))
            return False
        self._set_path(path)
        return True

    def save(self) -> bool:
        if self.path is None:
            return self.save_as()
        return self.write(self.path)

    def save_as(self) -> bool:
        suggested = self.path or os.path.join(self.folder(), "plan.vramplan.json")
        path = dialogs.save_file(self.dialog_parent, "Save plan as", dialogs.PLAN_FILTER, suggested)
        if not path:
            return False
        if self.write(path):
            self.settings.add_recent(os.path.abspath(path))
            self._set_path(path)
            return True
        return False

    def write(self, path: str) -> bool:
        plan = self.controller.plan  # atomic: temp file, then rename; a file not ours only if confirmed
        mode = self.display.mode if self.display is not None else Mode.TRAINING
        if not saving.write_confirmed(
            self.dialog_parent,
            "Cannot save the plan",
            path,
            lambda force: planfile.save(plan, path, force=force, mode=mode),
        ):
            return False
        self.controller.undo_stack.setClean()
        self.message.emit(f"Saved {path}")
        return True

    def import_model(self, kind: str = "file") -> None:
        """A config.json or model folder becomes the plan's model, as one undoable step."""
        if kind == "folder":
            path = dialogs.open_folder(self.dialog_parent, "Open a model folder (with config.json)", self.folder())
        else:
            path = dialogs.open_file(self.dialog_parent, "Open config.json", dialogs.CONFIG_FILTER, self.folder())
        if path:
            self.model_importer.read(path)

    @property
    def importing(self) -> bool:
        return self._model_importer is not None and self._model_importer.running

    def _use_imported(self, imported: ImportedModel) -> None:
        model, skip = imported.spec, imported.skip_modules

        def use(plan: Plan) -> Plan:
            moved = plan.on_model(model)
            return replace(moved, bnb_skip_modules=skip) if skip else moved

        refused = self.controller.update("model", use, "Import model")
        if refused is not None:
            dialogs.error(self.dialog_parent, "Cannot use the model", str(refused))
        elif skip:
            self.message.emit(imported.skip_note)

    # ---- session -------------------------------------------------------------------
    @staticmethod
    def stored_plan(settings: Settings) -> Plan | None:
        """The last session's plan, or None (none stored, or stale or damaged: the default then)."""
        text = settings.last_plan
        if not text:
            return None
        try:
            return planfile.loads(text, "last session")
        except (PlanFileError, PlanError):
            return None

    def restore(self, stored: Plan | None = None) -> None:
        """The last session's plan, titled with its file only if the file still holds it;
        ``stored``: that plan when the caller has read it already (:meth:`stored_plan`)."""
        plan = stored if stored is not None else self.stored_plan(self.settings)
        if plan is None:
            return
        path = self.settings.last_path or None
        if path is not None and _larger_than_a_plan(path):
            path = None  # replaced by something else since: not read on the GUI thread at start
        if path is not None:
            try:
                if planfile.load(path) != plan:
                    path = None  # the session's plan differs from the file: keep it untitled
            except (PlanFileError, PlanError):
                path = None
        self.set_document(plan, path)

    def store(self) -> None:
        """Remember the plan and its file for the next session (the caller syncs)."""
        self.settings.last_plan = planfile.dumps(self.controller.plan)
        self.settings.last_path = self.path or ""

    def _set_path(self, path: str | None) -> None:
        self.path = path
        self.pathChanged.emit()

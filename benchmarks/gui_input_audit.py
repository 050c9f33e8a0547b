"""How long each path that reads what the user gives blocks the window's GUI thread.

    python benchmarks/gui_input_audit.py [--runs 3] [--only NAME ...] [--list]

The README promises that the window is never blocked longer than 100 ms on input the user
gave. For every such path this drives the real main window (offscreen, 1400 × 900) with the
worst input the caps allow (files at their size caps in the shape slowest to parse, the
longest names, the longest query a line edit takes) and measures the **longest time the GUI
thread went without running its event loop**: a 2 ms ``QTimer`` on the GUI thread stamps
``perf_counter`` at each tick while the path runs (from the user's action until its answer
is shown), and the largest gap between two stamps, less the timer's 2 ms, is the figure.
Work moved to a worker thread that still holds the interpreter lock (``json.loads`` in C
never gives it up) shows here as what it is: a frozen window.

Each path runs ``--runs`` times; the median and the worst are printed with the load average
(the machine is shared: figures are noisy, read them with the load). Modal dialogs are
answered by substitutes of :mod:`gui.dialogs`, as the tests do; a worker process's start-up
is warmed before timing (the window warms it at start too).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

TICK_MS = 2
LONG_NAME = "N" * 1000  # model names (config.json's _name_or_path) are cut to 1,000 characters (importer)
ENTRY_NAME = "N" * 80  # a saved card's or model's name: at most 80 characters (gui/settings.py entry_name)
LINE_EDIT_MAX = 32767  # QLineEdit's default maxLength: the longest text a form field or picker takes


# ---- hostile files at their caps ------------------------------------------------------------
def many_keys(limit: int, prefix: str = "k") -> str:
    """A JSON object of as many short keys as fit in ``limit`` bytes: the slowest shape to parse."""
    parts, size, i = [], 2, 0
    while True:
        part = f'"{prefix}{i}":0'
        if size + len(part) + 1 > limit:
            break
        parts.append(part)
        size += len(part) + 1
        i += 1
    return "{" + ",".join(parts) + "}"


def many_zeros(limit: int) -> str:
    """A JSON list of zeros filling ``limit`` bytes (a comparison or measurement's worst: one
    object of millions of keys would need gigabytes to parse, the list the same time in less)."""
    count = (limit - 2) // 2
    return "[" + ",".join(["0"] * count) + "]"


def safetensors_shard(path: Path, tensors: int) -> None:
    header = {f"t{i}": {"dtype": "F16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]} for i in range(tensors)}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * (2 * tensors))


# ---- the probe ------------------------------------------------------------------------------
class Probe:
    """Stamps the GUI thread's event loop every :data:`TICK_MS`."""

    def __init__(self) -> None:
        from PySide6.QtCore import QTimer

        self.stamps: list[float] = []
        self.timer = QTimer()
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(lambda: self.stamps.append(time.perf_counter()))

    def measure(self, action: Callable[[], object], done: Callable[[], bool]) -> float:
        """ms the GUI thread went without its event loop while ``action`` ran and until ``done()``."""
        from PySide6.QtWidgets import QApplication

        app = QApplication.instance()
        assert app is not None
        self.stamps = [time.perf_counter()]
        self.timer.start()
        action()
        self.stamps.append(time.perf_counter())
        deadline = time.perf_counter() + 120
        while not done() and time.perf_counter() < deadline:
            app.processEvents()
            self.stamps.append(time.perf_counter())  # a processEvents pass is the loop running
            time.sleep(0.001)
        self.timer.stop()
        gaps = [b - a for a, b in zip(self.stamps, self.stamps[1:], strict=False)]
        return max(0.0, max(gaps) * 1000 - TICK_MS)


# ---- the paths --------------------------------------------------------------------------------
class Audit:
    def __init__(self, folder: Path) -> None:
        from PySide6.QtWidgets import QApplication

        from core.files import importer, measurement, planfile
        from core.files.runconfig import reading
        from gui import dialogs
        from gui.main_window import MainWindow
        from gui.settings import Settings

        self.app = QApplication.instance() or QApplication(["gui-input-audit"])
        self.folder = folder
        self.paths: list[str] = []
        self.errors: list[str] = []
        dialogs.open_file = lambda *a: self.paths.pop(0) if self.paths else None  # type: ignore[assignment]
        dialogs.open_files = lambda *a: list(self.paths)  # type: ignore[assignment]
        dialogs.open_folder = lambda *a: self.paths.pop(0) if self.paths else None  # type: ignore[assignment]
        dialogs.save_file = lambda *a: self.paths.pop(0) if self.paths else None  # type: ignore[assignment]
        dialogs.ask_text = lambda *a: ENTRY_NAME  # type: ignore[assignment]
        dialogs.error = lambda *a: self.errors.append(str(a[-1])[:120])  # type: ignore[assignment]
        dialogs.info = lambda *a: None  # type: ignore[assignment]
        dialogs.confirm = lambda *a: True  # type: ignore[assignment]
        dialogs.confirm_replace = lambda *a: True  # type: ignore[assignment]
        dialogs.ask_save_changes = lambda *a: "discard"  # type: ignore[assignment]

        settings = Settings(str(folder / "audit.ini"))
        self.window = MainWindow(settings=settings)
        self.window.resize(1400, 900)
        self.window.show()
        for _ in range(10):
            self.app.processEvents()
        self.probe = Probe()

        # Files at their caps.
        self.plan = folder / "plan.vramplan.json"
        self.plan.write_text(many_keys(planfile.MAX_FILE_BYTES - 16))
        self.measurement = folder / "measurement.json"
        self.measurement.write_text(many_zeros(measurement.MAX_BYTES - 16))
        self.comparison = folder / "comparison.json"
        self.comparison.write_text(many_zeros(planfile.MAX_FILE_BYTES * 4 - 16))
        self.config = folder / "config.json"
        self.config.write_text(many_keys(importer.MAX_CONFIG_BYTES - 16))
        # Configs that are read (a TRL run) with the most keys the entry cap allows, each long
        # enough to fill the size cap: every one is listed as not understood in the dialog.
        import yaml

        trl = Path(__file__).resolve().parents[1] / "tests" / "data" / "runconfigs" / "trl_zephyr_sft_qlora.yaml"
        known = yaml.safe_load(trl.read_text())
        keys = reading.MAX_ENTRIES - 200
        width = (reading.MAX_CONFIG_BYTES - 4000) // keys - 8
        self.training_json = folder / "train.json"
        self.training_json.write_text(json.dumps({**known, **{f"{i:0{width}d}": 0 for i in range(keys)}}))
        self.training_yaml = folder / "train.yaml"
        padding = "".join(f"k{i:0{width}d}: 0\n" for i in range(keys))
        self.training_yaml.write_text(trl.read_text().rstrip() + "\n" + padding)
        self.model_folder = folder / "model"
        self.model_folder.mkdir()
        config = {
            "model_type": "llama",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "vocab_size": 256,
            "_name_or_path": LONG_NAME,
        }
        (self.model_folder / "config.json").write_text(json.dumps(config))
        safetensors_shard(self.model_folder / "model.safetensors", 100_000)

    def run(self, name: str, runs: int) -> tuple[float, float, str]:
        action, done = getattr(self, f"path_{name}")()
        figures = []
        for _ in range(runs):
            self.errors.clear()
            action_now, done_now = action, done
            figures.append(self.probe.measure(action_now, done_now))
            self.settle()
        said = self.errors[0] if self.errors else ""
        return statistics.median(figures), max(figures), said

    def settle(self) -> None:
        for _ in range(5):
            self.app.processEvents()

    @staticmethod
    def at_once() -> bool:
        return True

    # Each path_NAME gives (the user's action, its answer shown?).
    def path_open_plan(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """File → Open plan (and Open Recent, the same reader): 5 MB of short keys."""
        return lambda: self.window.document.open_path(str(self.plan)), self.at_once

    def path_restore_last_plan(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Start-up: the last session's file compared with its plan; the file replaced by 5 MB."""
        from core.files import planfile

        settings = self.window.settings
        settings.last_plan = planfile.dumps(self.window.controller.plan)
        settings.last_path = str(self.plan)
        return self.window.document.restore, self.at_once

    def path_load_measurement(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Load measurement: 10 MB."""

        def act() -> None:
            self.paths[:] = [str(self.measurement)]
            self.window.load_measurement()

        return act, self.at_once

    def path_open_comparison(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Compare → Open: four files of 20 MB each (the cap per file)."""
        panel = self.window.plan_tools.show_compare()

        def act() -> None:
            self.paths[:] = [str(self.comparison)] * 4
            panel.open_files()

        return act, self.at_once

    def path_import_config_json(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Import config.json: 2 MB of short keys."""

        def act() -> None:
            self.paths[:] = [str(self.config)]
            self.window.document.import_model("file")

        return act, lambda: not self.window.document.importing

    def path_import_model_folder(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Import a model folder: one shard of 100,000 tensors (a 6 MB header; the cap is 500,000)."""

        def act() -> None:
            self.paths[:] = [str(self.model_folder)]
            self.window.document.import_model("folder")

        return act, lambda: not self.window.document.importing

    def _training(self, path: Path) -> tuple[Callable[[], object], Callable[[], bool]]:
        from gui.tools import open_config

        open_config.run_dialog = lambda dialog: False  # the dialog is built (GUI thread), then closed

        def act() -> None:
            open_config.open_training_config(self.window.plan_tools.context, str(path))

        return act, self.at_once

    def path_training_config_json(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Open training config: a TRL JSON of 19,800 keys in 1 MB (the caps), the dialog built."""
        return self._training(self.training_json)

    def path_training_config_yaml(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Open training config: the same as YAML."""
        return self._training(self.training_yaml)

    def path_model_search(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Model picker: a pasted query of 32,767 characters (16,383 one-letter words)."""
        return self._search(self.window.model_form.picker)

    def path_gpu_search(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """GPU picker: the same query through the catalogue's search."""
        return self._search(self.window.hardware_form.gpu)

    def _search(self, picker: Any) -> tuple[Callable[[], object], Callable[[], bool]]:
        query = ("a " * (LINE_EDIT_MAX // 2))[:LINE_EDIT_MAX]

        def act() -> None:
            line = picker.lineEdit()
            line.setText(query)
            line.textEdited.emit(query)
            line.returnPressed.emit()

        return act, self.at_once

    def path_typed_counts(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Every count field: 32,767 digits typed, then Enter."""
        from gui.forms.fields import CountField

        fields = self.window.findChildren(CountField)

        def act() -> None:
            for field in fields:
                field.setText("9" * LINE_EDIT_MAX)
                field.textEdited.emit(field.text())
                field.returnPressed.emit()
                self.app.processEvents()  # each field is one user action: the figure is the worst

        return act, self.at_once

    def path_typed_numbers(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Every other editable field (spin boxes, editable combo boxes): 32,767 characters, then Enter."""
        from PySide6.QtWidgets import QAbstractSpinBox, QComboBox

        from gui.forms.fields import CountField

        lines = []
        for widget in self.window.findChildren(QAbstractSpinBox) + self.window.findChildren(QComboBox):
            line = widget.lineEdit()
            if line is not None and not isinstance(widget, CountField) and widget.isEnabled():
                lines.append(line)
        text = "9" * LINE_EDIT_MAX

        def act() -> None:
            for line in lines:
                line.setText(text)
                line.textEdited.emit(text)
                line.returnPressed.emit()
                line.editingFinished.emit()
                self.app.processEvents()  # each field is one user action: the figure is the worst

        return act, self.at_once

    def path_typed_settings(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Every text setting (PYTORCH_CUDA_ALLOC_CONF): 32,767 characters, then Enter."""
        from gui.forms.fields import SettingField

        fields = self.window.findChildren(SettingField)
        text = "expandable_segments:True," * (LINE_EDIT_MAX // 25)

        def act() -> None:
            for field in fields:
                field.setText(text)
                field.editingFinished.emit()
                self.app.processEvents()

        return act, self.at_once

    def path_save_100th_model(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Save to my models with 99 saved, every name 80 characters (the list is rebuilt)."""
        settings = self.window.settings
        data = self.window.controller.plan.model.to_dict()
        for i in range(99):
            settings.add_custom_model(f"{i:03d}{ENTRY_NAME}"[:80], data)
        return self.window.model_form._save_model, self.at_once

    def path_save_100th_card(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Save card with 99 saved, every name 80 characters."""
        from dataclasses import replace

        settings = self.window.settings
        card = settings.custom_gpus[0] if settings.custom_gpus else None
        if card is None:
            self.window.hardware_form._save_card()
            card = settings.custom_gpus[0]
        for i in range(99):
            settings.add_custom_gpu(replace(card, name=f"{i:03d}{ENTRY_NAME}"[:80]))
        return self.window.hardware_form._save_card, self.at_once

    def _long_named_plan(self) -> None:
        from dataclasses import replace

        plan = self.window.controller.plan
        self.window.controller.set_plan(plan.on_model(replace(plan.model, name=LONG_NAME)), text="long name")

    def path_export_chart_svg(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Export chart as SVG, the model named with 1,000 characters."""
        self._long_named_plan()

        def act() -> None:
            self.paths[:] = [str(self.folder / "chart.svg")]
            self.window.export_chart("svg")

        return act, self.at_once

    def path_export_chart_png(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Export chart as PNG (2 ×), the model named with 1,000 characters."""
        self._long_named_plan()

        def act() -> None:
            self.paths[:] = [str(self.folder / "chart.png")]
            self.window.export_chart("png")

        return act, self.at_once

    def _report(self, suffix: str) -> tuple[Callable[[], object], Callable[[], bool]]:
        from gui.tools import report_export

        self._long_named_plan()
        running: list[Any] = []

        def act() -> None:
            self.paths[:] = [str(self.folder / f"report.{suffix}")]
            running[:] = [report_export.export_report(self.window.plan_tools.context)]

        return act, lambda: not running or running[0] is None or running[0].ok is not None

    def path_export_report_html(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Export report as HTML (built in the worker process), the model named with 1,000 characters."""
        return self._report("html")

    def path_export_report_pdf(self) -> tuple[Callable[[], object], Callable[[], bool]]:
        """Export report as PDF (drawn with Qt on the GUI thread), the model named with 1,000 characters."""
        return self._report("pdf")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="path names (see --list)")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    names = [n.removeprefix("path_") for n in vars(Audit) if n.startswith("path_")]
    if args.list:
        for name in names:
            print(f"{name:24} {getattr(Audit, f'path_{name}').__doc__.splitlines()[0]}")
        return 0
    chosen = names if not args.only else [n for n in names if n in args.only]
    with tempfile.TemporaryDirectory(prefix="vramplan-audit-") as folder:
        audit = Audit(Path(folder))
        warm = audit.window.plan_tools.context
        del warm
        print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{'path':24} {'median ms':>10} {'worst ms':>9}  load(1 min)  what the window said")
        for name in chosen:
            median, worst, said = audit.run(name, args.runs)
            mark = "  OVER 100 ms" if median > 100 else ""
            print(f"{name:24} {median:10.0f} {worst:9.0f}  {os.getloadavg()[0]:10.2f}  {said[:60]}{mark}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

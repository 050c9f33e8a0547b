"""What the window loads before its first paint (issue 25: start-up under 1.5 × a bare window).

The diagnosis (remedies, limits, curves), the serving engines' rules, model-folder import,
measurement files and the panels of the tabs hidden at start-up (Compute & time, Serving,
Diagnosis) are loaded when they are first used, not at start-up: in a fresh process,
building and painting the training window must not import them. A module-level import added
back to any view would fail here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, os, sys, tempfile
from PySide6.QtWidgets import QApplication
app = QApplication(["probe"])
from gui.main_window import MainWindow
from gui.settings import Settings
window = MainWindow(settings=Settings(os.path.join(tempfile.mkdtemp(), "probe.ini")))
window.show()
app.processEvents()
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("core.", "gui.")))))
"""

# Loaded on first use: the module, and what first uses it.
LATER = {
    "core.advice.diagnosis": "the first diagnosis (in the worker process)",
    "core.advice.remedies": "the first diagnosis",
    "core.advice.limits": "the first diagnosis",
    "core.serving.inference": "the first serving figure read",
    "core.serving.engines": "the first serving figure read",
    "core.serving.speed": "the first serving figure read",
    "core.files.importer": "opening a model folder or config.json",
    "core.files.measurement": "loading a measurement",
    "gui.model_import": "opening a model folder or config.json",
    "gui.panels.diagnosis": "the Diagnosis tab first shown",
    "gui.panels.remedy_list": "the Diagnosis tab first shown",
    "gui.curve": "the Diagnosis tab first shown",
    "gui.panels.compute": "the Compute & time tab first shown",
    "gui.panels.inference": "the Serving tab first shown",
}


def test_the_training_window_paints_without_loading_what_it_does_not_show() -> None:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "gui.main_window" in loaded and "core.estimate" in loaded  # the probe built the window
    early = {module: when for module, when in LATER.items() if module in loaded}
    assert not early, f"loaded at start-up, wanted only at: {early}"


def test_a_hidden_tab_gets_its_panel_when_first_shown(qtbot: Any) -> None:
    """The empty page of a tab hidden at start-up is replaced by its panel, in place, when the
    tab is chosen; the panel shows the plan's estimate and the window's unit and mode."""
    from gui.main_window import MainWindow

    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    titles = [window.tabs.tabToolTip(i) for i in range(window.tabs.count())]  # full names
    assert window._compute_panel is None and window._diagnosis is None  # not built before shown
    index = titles.index("Compute & time")
    window.tabs.setCurrentIndex(index)
    panel = window.tabs.widget(index)
    assert panel is window.compute_panel and window.tabs.currentIndex() == index
    assert [window.tabs.tabToolTip(i) for i in range(window.tabs.count())] == titles
    batch = window.controller.plan.workload.micro_batch
    window.controller.update("workload.micro_batch", lambda p: p.with_input("workload.micro_batch", batch + 1), "batch")
    assert window.compute_panel.training._estimate is window.controller.estimate  # shown the edit
    assert window._inference_panel is None  # an edit builds no hidden panel
    window.tabs.setCurrentWidget(window.diagnosis)  # asked for by a caller: built, then shown
    assert window.tabs.currentWidget() is window.diagnosis
    assert window.diagnoser.active

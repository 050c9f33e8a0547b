"""What the window loads before its first paint (issue 25: start-up under 1.5 × a bare window).

The diagnosis (remedies, limits, curves), the serving engines' rules, model-folder import and
measurement files are loaded when they are first used, not at start-up: in a fresh process,
building and painting the training window must not import them. A module-level import added
back to any view would fail here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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

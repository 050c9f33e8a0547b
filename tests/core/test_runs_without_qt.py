"""tests/core must run where PySide6 and pytest-qt are absent (issue 10): no pytest-qt setting
may be global. Here pytest runs a core test file with the pytest-qt plugin disabled, as it is
where pytest-qt is not installed; `make unit-core-noqt` runs the whole suite in a Qt-free venv."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_core_tests_run_without_pytest_qt() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    command = [sys.executable, "-m", "pytest", "-p", "no:pytest-qt", "-p", "no:cacheprovider", "-q"]
    result = subprocess.run(
        [*command, "tests/core/test_solve.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "passed" in result.stdout and "warning" not in result.stdout.lower()

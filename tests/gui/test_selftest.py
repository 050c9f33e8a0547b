"""The frozen build's self-test also runs from source, so a change that breaks it fails here
and not only in `make dist smoke` (a v1 plan file stopped matching today's default plan
once the optimizer implementation defaulted to fused)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_self_test_passes_from_source() -> None:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from gui.launcher import main; sys.exit(main(['--self-test']))"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "self-test ok" in result.stdout + result.stderr

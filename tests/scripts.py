"""Benchmark and evidence scripts imported by the tests that check them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str) -> ModuleType:
    """The script at ``path`` run as module ``name``: registered in sys.modules first (a
    dataclass looks its module up while the class is built), with the script's folder on
    sys.path while it runs (the real-GPU scripts import their neighbours, e.g. mapping.py)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module

"""Stub executables for the tests of this machine's GPUs (``nvidia-smi``, ``rocm-smi``,
``sysctl``): the ``tools`` fixture (tests/conftest.py) makes a folder the whole PATH, and
these write scripts there that print a tool's canned output."""

from __future__ import annotations

from pathlib import Path


def stub(folder: Path, name: str, body: str) -> Path:
    """An executable ``name`` in ``folder`` running the shell ``body`` (system PATH inside)."""
    script = folder / name
    script.write_text("#!/bin/sh\nPATH=/usr/bin:/bin\n" + body + "\n")
    script.chmod(0o755)
    return script


def printing(folder: Path, name: str, output: str, status: int = 0) -> Path:
    """An executable ``name`` that prints ``output`` and exits with ``status``."""
    data = folder / f"{name}.out"
    data.write_text(output)
    return stub(folder, name, f'cat "{data}"\nexit {status}')

"""Shared test set-up: Qt runs offscreen; GUI tests are marked so the core suite needs no display."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/gui/" in str(item.fspath).replace(os.sep, "/") or "qtbot" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gui)

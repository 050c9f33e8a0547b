"""Cycle collection happens on the GUI thread only (gui/collector.py)."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

from gui import collector
from gui.main_window import MainWindow


def test_a_window_switches_automatic_collection_off_for_good(window: MainWindow) -> None:
    # A collection in a non-GUI thread that frees a QObject deadlocks with the GUI thread
    # (seen: tests/gui/test_diagnosis.py hung in QObject::~QObject from the worker's result thread).
    assert collector.collecting_on_gui_thread()
    assert not gc.isenabled()


def test_the_timer_collects_what_the_automatic_collector_would(window: MainWindow) -> None:
    installed = collector.install()
    assert installed is collector.install()  # one per process
    threshold = installed.thresholds[0]

    class Cycle:
        def __init__(self) -> None:
            self.me = self

    freed = threading.Event()
    for _ in range(threshold + 10):
        Cycle()
    probe = Cycle()
    weakref.finalize(probe, freed.set)
    del probe
    assert gc.get_count()[0] > threshold  # due, and nothing collected it off this thread
    assert installed.timer.isActive() and installed.timer.interval() == collector.INTERVAL_MS
    assert installed.collect_if_due() >= 0 and freed.is_set()
    assert installed.collect_if_due() == -1  # nothing due right after


def test_a_diagnosis_job_leaves_collection_off(window: MainWindow, qtbot: Any) -> None:
    from gui.worker.process import collector_paused

    assert collector_paused(lambda: gc.isenabled()) is False
    assert not gc.isenabled()  # the pause restores the state it found, not "on"

"""Edit-to-redraw latency of the GUI: from a form change to every view updated and painted.

    python benchmarks/gui_latency.py [--edits 200] [--seed 1]

Runs the real main window offscreen, makes random edits through the form widgets (as a
user's keystroke or click would), and times each from the change until the event queue
is drained (estimate, chart, panels, and the repaint). Prints the median and the 95th
percentile in milliseconds; the design's target is p95 ≤ 16 ms (one frame at 60 Hz).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verbose", action="store_true", help="median per kind of edit")
    args = parser.parse_args(argv)

    from PySide6.QtWidgets import QApplication

    from gui.main_window import MainWindow
    from gui.settings import Settings

    app = QApplication.instance() or QApplication(["gui-latency"])
    folder = tempfile.mkdtemp(prefix="vramplan-bench-")
    window = MainWindow(settings=Settings(os.path.join(folder, "bench.ini")))
    window.resize(1400, 900)
    window.show()
    app.processEvents()
    rng = random.Random(args.seed)

    def pick(combo: object) -> Callable[[], None]:
        def edit() -> None:
            combo.setCurrentIndex(rng.randrange(combo.count()))  # type: ignore[attr-defined]

        return edit

    def pick_catalogue(combo: object) -> Callable[[], None]:
        def edit() -> None:
            index = rng.randrange(combo.count())  # type: ignore[attr-defined]
            combo.setCurrentIndex(index)  # type: ignore[attr-defined]
            combo.activated.emit(index)  # type: ignore[attr-defined]

        return edit

    m, w, h = window.method_form, window.workload_form, window.hardware_form
    edits: list[tuple[str, Callable[[], None]]] = [
        ("micro-batch", lambda: w.micro_batch.setValue(rng.randint(1, 16))),
        ("sequence", lambda: w.seq_len.setValue(rng.choice((512, 1024, 2048, 4096, 8192)))),
        ("accumulation", lambda: w.grad_accum.setValue(rng.randint(1, 8))),
        ("method", pick(m.method)),
        ("precision", pick(m.precision)),
        ("optimizer", pick(m.optimizer)),
        ("attention", pick(m.attention)),
        ("checkpointing", lambda: m.checkpointing.toggle()),
        ("rank", lambda: m.rank.setValue(rng.choice((4, 8, 16, 64)))),
        ("gpu", pick_catalogue(h.gpu)),
        ("gpu count", lambda: h.count.setValue(rng.randint(1, 8))),
        ("sharding", pick(h.sharding)),
        ("headroom", lambda: h.headroom.setValue(rng.choice((5.0, 10.0, 15.0, 20.0)))),
        ("model", pick_catalogue(window.model_form.picker)),
    ]
    timings_ms: list[float] = []
    update_ms: list[float] = []
    by_edit: dict[str, list[float]] = {}
    for _ in range(args.edits):
        name, edit = rng.choice(edits)
        start = time.perf_counter()
        edit()  # controller, estimate() and every view's update run synchronously here
        updated = time.perf_counter()
        app.processEvents()  # layout and repaint of what changed
        elapsed = (time.perf_counter() - start) * 1000
        update_ms.append((updated - start) * 1000)
        timings_ms.append(elapsed)
        by_edit.setdefault(name, []).append(elapsed)
    window.controller.undo_stack.setClean()
    window.close()

    timings_ms.sort()
    median = statistics.median(timings_ms)
    p95 = timings_ms[min(len(timings_ms) - 1, round(0.95 * (len(timings_ms) - 1)))]
    print(
        f"gui latency over {len(timings_ms)} edits: median {median:.2f} ms, p95 {p95:.2f} ms, "
        f"max {timings_ms[-1]:.2f} ms (target p95 <= 16 ms)"
    )
    update_ms.sort()
    print(
        f"  of which model → views (before repaint): median {statistics.median(update_ms):.2f} ms, "
        f"p95 {update_ms[round(0.95 * (len(update_ms) - 1))]:.2f} ms"
    )
    if args.verbose:
        for name, values in sorted(by_edit.items(), key=lambda kv: -statistics.median(kv[1])):
            print(
                f"  {name:14s} median {statistics.median(values):6.2f} ms  max {max(values):6.2f} ms  n={len(values)}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

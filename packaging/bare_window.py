"""The start-up baseline: a bare PySide6 + pyqtgraph window, frozen like the app
(packaging/bare.spec) so benchmarks/startup.py can compare the two.

With VRAMPLAN_EXIT_AFTER_PAINT=1 it prints ``first-paint <time.monotonic()>`` once its
window has painted and exits, exactly as gui/launcher.py's probe does for the app.
"""

import os
import sys
import time


def main() -> int:
    import pyqtgraph as pg
    from PySide6.QtCore import QEvent, QObject, QTimer
    from PySide6.QtWidgets import QApplication, QMainWindow, QWidget

    def report() -> None:
        stamp = time.monotonic()
        if sys.stdout is not None:
            print(f"first-paint {stamp:.6f}", flush=True)
        os._exit(0)

    class FirstPaint(QObject):
        def eventFilter(self, watched: QObject, event: QEvent) -> bool:
            if event.type() == QEvent.Type.Paint and isinstance(watched, QWidget):
                QApplication.instance().removeEventFilter(self)
                QTimer.singleShot(0, report)
            return False

    app = QApplication(sys.argv)
    if os.environ.get("VRAMPLAN_EXIT_AFTER_PAINT") == "1":
        probe = FirstPaint(app)
        app.installEventFilter(probe)
    window = QMainWindow()
    plot = pg.PlotWidget()
    plot.addItem(pg.BarGraphItem(x=[0, 1, 2], height=[3, 5, 4], width=0.6))
    window.setCentralWidget(plot)
    window.resize(1280, 800)
    window.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())

"""``vramplan --self-test [--out PNG] [--report FILE]``: start the real application
headless, check it end to end, and say so in one line.

What it does, in the frozen binary exactly as from a source checkout:

1. reads the bundled resources (catalogues, the app icon through Qt's SVG plug-in);
2. estimates the lesson's two reference plans and compares the printed arithmetic;
3. reads ``packaging/selftest_plan.json`` (bundled as ``selftest/``) through
   ``core.files.planfile``, saves it again and opens the saved copy in the real main window;
4. renders the window to a PNG and checks the picture is not blank;
5. fails on any Qt warning or Python warning raised along the way.

Success prints ``self-test ok: ...`` and exits 0; any failure prints one line
``self-test FAILED: ...`` and exits 1. Windowed builds (Windows, macOS) may have no
stdout at all, so ``--report FILE`` writes the same line to a file as well.
"""

from __future__ import annotations

import inspect
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

USAGE = "usage: vramplan --self-test [--out PNG] [--report FILE]"
WINDOW_SIZE = (1280, 800)
# The lesson's worked examples, as core prints them (README "Two levels of accounting").
FULL_SUMMARY = "13.4 + 13.4 + 53.6 + 1.5 = 81.9 GB"
QLORA_SUMMARY = "3.35 + 0.27 + 1.5 = 5.1 GB"
QLORA_GPU = "rtx-3060-12gb"
# Never inside a frozen bundle (packaging/bundle.py EXCLUDED_MODULES).
MUST_NOT_BE_BUNDLED = ("torch", "transformers", "PIL", "tkinter", "scipy", "matplotlib")
# Qt messages that say something about the headless platform, not about the app:
# QPlatformWindow::propagateSizeHints() warns unless a platform overrides it
# (qtbase src/gui/kernel/qplatformwindow.cpp), and the offscreen plug-in does not.
HEADLESS_PLATFORM_NOISE = {"offscreen": ("This plugin does not support propagateSizeHints()",)}


class SelfTestFailure(Exception):
    pass


def fail(message: str) -> NoReturn:
    raise SelfTestFailure(message)


def check(condition: bool, message: str) -> None:
    if not condition:
        fail(message)


def _say(line: str, *, error: bool, report: str | None) -> None:
    # Windowed Windows builds have sys.stdout and sys.stderr set to None.
    stream = (sys.stderr or sys.stdout) if error else sys.stdout
    if stream is not None:
        print(line, file=stream, flush=True)
    if report:
        Path(report).write_text(line + "\n", encoding="utf-8")


def _parse(argv: Sequence[str]) -> tuple[str | None, str | None]:
    out = report = None
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag in ("--out", "--report") and args:
            if flag == "--out":
                out = args.pop(0)
            else:
                report = args.pop(0)
        else:
            fail(f"unknown argument {flag!r}; {USAGE}")
    return out, report


def selftest_plan_path() -> Path:
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle:
        return Path(bundle) / "selftest" / "selftest_plan.json"
    return Path(__file__).resolve().parent.parent / "packaging" / "selftest_plan.json"


def _check_bundle() -> None:
    """A frozen build holds the resources and none of the packages it must never ship."""
    import importlib.util

    from core.catalogue import load_gpus
    from core.resources import resources_dir

    check(resources_dir().is_dir(), f"resources folder missing: {resources_dir()}")
    check(any(gpu.id == QLORA_GPU for gpu in load_gpus()), f"GPU catalogue lacks {QLORA_GPU}")
    # Two nodes time their collectives over the link catalogue: a bundle without it would
    # fail on the first multi-node plan, not here.
    from core.catalogue import load_links
    from core.estimate import estimate
    from core.plan import Strategy
    from core.presets import plan_for_model

    links = {link.id for link in load_links()}
    check({"nvlink4", "ib-ndr400"} <= links, f"link catalogue lacks the default links: {sorted(links)}")
    nodes = estimate(plan_for_model("llama-3.2-1b").with_parallel(nodes=2, gpus_per_node=8, strategy=Strategy.FSDP))
    check(nodes.compute.comm_seconds_per_step > 0, "two FSDP nodes: no communication time")
    import yaml  # training configs are YAML; the bundle keeps only the pure-Python loader

    check(yaml.safe_load("micro_batch_size: 2") == {"micro_batch_size": 2}, "YAML cannot be read")
    if getattr(sys, "frozen", False):
        bundled = [name for name in MUST_NOT_BE_BUNDLED if importlib.util.find_spec(name) is not None]
        check(not bundled, f"bundle contains {', '.join(bundled)}")


def _check_plans(folder: Path) -> tuple[Any, Any, Path]:
    """The lesson plans estimate to the lesson's numbers; the plan file round-trips."""
    from core.estimate import Verdict, estimate
    from core.files import planfile
    from core.plan import Method, OptimizerImpl, Precision, SglangVersion
    from core.presets import lesson_plan

    full = lesson_plan(Method.FULL, Precision.BF16)
    summary = estimate(full).summary_formula
    check(summary == FULL_SUMMARY, f"full bf16 summary {summary!r}, expected {FULL_SUMMARY!r}")

    qlora = lesson_plan(Method.QLORA, Precision.BF16, gpu=QLORA_GPU)
    # The bundled file is a version-1 plan: it proves old files still open in the frozen app.
    # Files from before the optimizer implementation existed migrate to foreach, what
    # torch.optim ran for them (core.files.planfile); today's plans default to fused.
    # It also wrote the price of its day, 2 per GPU-hour, where today's plans leave it unset,
    # and names no SGLang release: it reads as 0.4.0, the rule of its day (core.files.planfile).
    expected = qlora.with_changes(optimizer_impl=OptimizerImpl.FOREACH).with_hardware(price_per_gpu_hour=2.0)
    expected = expected.with_inference(sglang_version=SglangVersion.V0_4_0)
    from_file = planfile.load(selftest_plan_path())
    check(from_file == expected, f"{selftest_plan_path().name} does not hold lesson_plan(QLORA, BF16, {QLORA_GPU})")
    saved = folder / "selftest.vramplan.json"
    planfile.save(qlora, saved)
    check(planfile.load(saved) == qlora, "plan changed on save and load")
    result = estimate(qlora)
    summary = result.summary_formula
    check(summary == QLORA_SUMMARY, f"qlora summary {summary!r}, expected {QLORA_SUMMARY!r}")
    check(result.verdict is Verdict.FITS, f"qlora on {QLORA_GPU}: verdict {result.verdict}, expected fits")
    return full, qlora, saved


def _shown_texts(window: Any) -> list[str]:
    from PySide6.QtWidgets import QLabel

    return [label.text() for label in window.findChildren(QLabel)]


def _check_window(app: Any, folder: Path, full: Any, qlora: Any, saved: Path) -> tuple[Any, Any]:
    """The real main window shows both lesson plans; returns it and its rendered image."""
    from PySide6.QtCore import QSettings

    from core.estimate import VERDICT_LABELS, Verdict
    from gui import dialogs
    from gui.main_window import MainWindow
    from gui.settings import Settings
    from gui.theme import apply_theme

    # No user settings are read or written, and no dialog may block: any dialog is a failure.
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(folder))
    settings = Settings(str(folder / "selftest.ini"))
    apply_theme(app, "light")

    def no_dialog(name: str) -> Callable[..., NoReturn]:
        def refuse(*args: Any, **_kwargs: Any) -> NoReturn:
            fail(f"dialog {name} opened: {' / '.join(str(a) for a in args[1:])}")

        return refuse

    for name, value in list(vars(dialogs).items()):
        if inspect.isfunction(value) and value.__module__ == dialogs.__name__ and not name.startswith("_"):
            setattr(dialogs, name, no_dialog(name))

    window = MainWindow(settings=settings)
    window.resize(*WINDOW_SIZE)
    window.show()
    app.processEvents()

    check(window.controller.reset(full) is None, "the main window refused the full bf16 lesson plan")
    app.processEvents()
    check(any(FULL_SUMMARY in text for text in _shown_texts(window)), f"window does not show {FULL_SUMMARY!r}")

    check(window.open_path(str(saved)), f"the main window could not open {saved.name}")
    app.processEvents()
    check(window.controller.plan == qlora, "the opened plan differs from the saved one")
    texts = _shown_texts(window)
    check(any(QLORA_SUMMARY in text for text in texts), f"window does not show {QLORA_SUMMARY!r}")
    fits = VERDICT_LABELS[Verdict.FITS]
    check(any(fits in text for text in texts), f"window does not show the verdict {fits!r}")

    # The Diagnosis tab's worker process: spawned, so in the frozen app it is this executable
    # again (multiprocessing.freeze_support in gui.launcher).
    first_tab = window.tabs.currentIndex()
    window.tabs.setCurrentWidget(window.diagnosis)
    deadline = time.monotonic() + 60
    while window.diagnosis.stale and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.01)
    check(not window.diagnosis.stale, "the Diagnosis tab got no answer from its worker process")
    check(fits in window.diagnosis.badge.text(), "the Diagnosis tab does not show the verdict")
    window.tabs.setCurrentIndex(first_tab)

    for _ in range(3):
        app.processEvents()
    image = window.grab().toImage()
    check(not image.isNull(), "rendering the main window gave an empty image")
    return window, image


def _check_image(image: Any, out: Path) -> None:
    from PySide6.QtGui import QIcon, QImage

    from core.resources import resource_path

    colours = {image.pixel(x, y) for x in range(0, image.width(), 16) for y in range(0, image.height(), 16)}
    check(len(colours) >= 8, f"the rendered window looks blank ({len(colours)} colours)")
    out.parent.mkdir(parents=True, exist_ok=True)
    check(image.save(str(out), "PNG"), f"cannot write {out}")
    check(not QImage(str(out)).isNull(), f"{out} is not a readable PNG")
    # The app icon goes through Qt's SVG plug-in: proves the plug-in is bundled and loads.
    icon = QIcon(str(resource_path("icons/app/vramplan.svg")))
    check(not icon.pixmap(64, 64).isNull(), "cannot render the app icon (Qt SVG plug-in missing?)")


def run(out: str | None) -> str:
    """Every check, in order; the success line's details."""
    started = time.perf_counter()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6 import __version__ as pyside_version
    from PySide6.QtCore import Qt, QtMsgType, qInstallMessageHandler
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    qt_messages: list[str] = []

    def on_qt_message(kind: QtMsgType, _context: object, message: str) -> None:
        noise = HEADLESS_PLATFORM_NOISE.get(QGuiApplication.platformName(), ())
        if kind not in (QtMsgType.QtDebugMsg, QtMsgType.QtInfoMsg) and message not in noise:
            qt_messages.append(message)

    previous_handler = qInstallMessageHandler(on_qt_message)
    try:
        with warnings.catch_warnings(record=True) as python_warnings, tempfile.TemporaryDirectory() as temp:
            warnings.simplefilter("always")
            folder = Path(temp)
            _check_bundle()
            full, qlora, saved = _check_plans(folder)
            QGuiApplication.setHighDpiScaleFactorRoundingPolicy(Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
            existing = QApplication.instance()
            app = existing if isinstance(existing, QApplication) else QApplication(["vramplan", "--self-test"])
            window, image = _check_window(app, folder, full, qlora, saved)
            png = Path(out) if out else folder / "selftest.png"
            _check_image(image, png)
            window.controller.undo_stack.setClean()
            window.close()
            window.deleteLater()
            app.processEvents()
            check(not qt_messages, f"Qt warned: {qt_messages[0] if qt_messages else ''}")
            check(not python_warnings, f"Python warned: {python_warnings[0].message if python_warnings else ''}")
    finally:
        qInstallMessageHandler(previous_handler)

    from core import __version__
    from core.plan import Method

    kind = "frozen" if getattr(sys, "frozen", False) else "source"
    png_text = f", png {out}" if out else ""
    return (
        f"vramplan {__version__} ({kind}), PySide6 {pyside_version} on {QGuiApplication.platformName()}; "
        f"lesson {Method.FULL.value} bf16 {FULL_SUMMARY.split(' = ')[1]}, "
        f"{Method.QLORA.value} on {QLORA_GPU} {QLORA_SUMMARY.split(' = ')[1]} fits; "
        f"window {image.width()}x{image.height()}{png_text}; {time.perf_counter() - started:.2f} s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    report = None
    try:
        out, report = _parse(args)
        details = run(out)
    except Exception as error:  # the self-test reports every failure as one line
        text = str(error) if isinstance(error, SelfTestFailure) else f"{type(error).__name__}: {error}"
        text = " ".join(text.split())  # one line, whatever the message held
        _say(f"self-test FAILED: {text}", error=True, report=report)
        return 1
    _say(f"self-test ok: {details}", error=False, report=report)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""Issue 14 in the window: nothing read is shown as markup, imports run in a worker with
Cancel, every window autosaves and says so when it cannot, counts and sizes read as the
command line reads them."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import Qt as QtGui
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QApplication, QLabel, QMessageBox, QProgressDialog, QPushButton

from core.cli.render import render_estimate
from core.estimate import estimate
from core.files import fileio, importer, planfile
from core.presets import default_plan
from gui import autosave, dialogs
from gui import settings as settings_module
from gui.autosave import Autosave
from gui.format import memory
from gui.forms.fields import CountField
from gui.main_window import MainWindow
from gui.settings import Settings
from tests.core import test_hostile as core_hostile
from tests.core.test_malformed_files import LLAMA

HOSTILE = Path(__file__).resolve().parent.parent / "data" / "hostile"
ACCEPTED_CONFIGS = sorted((HOSTILE / "configs").glob("*.json"))
REJECTED = sorted((HOSTILE / "rejected").iterdir())


# ---- item 1: text from files is never markup ---------------------------------------------


def rendered(text: str, text_format: Qt.TextFormat) -> QTextDocument | None:
    """The document Qt lays out for ``text``, or None when it is shown as plain text."""
    rich = text_format == Qt.TextFormat.RichText or (
        text_format == Qt.TextFormat.AutoText and QtGui.mightBeRichText(text)
    )
    if not rich:
        return None
    document = QTextDocument()
    document.setHtml(text)
    return document


def markup_took_effect(text: str, text_format: Qt.TextFormat) -> bool:
    """An image, a link or giant type came out of ``text``: it was rendered as HTML."""
    document = rendered(text, text_format)
    if document is None:
        return False
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isImageFormat() or fmt.isAnchor() or fmt.fontPointSize() >= 30:
                return True
            it += 1
        block = block.next()
    return False


def shown(label: QLabel) -> str:
    document = rendered(label.text(), label.textFormat())
    return label.text() if document is None else document.toPlainText()


def assert_no_label_renders_markup(window: MainWindow) -> None:
    for label in window.findChildren(QLabel):
        assert not markup_took_effect(label.text(), label.textFormat()), (label.objectName(), label.text())


@pytest.mark.parametrize("config", ACCEPTED_CONFIGS, ids=lambda p: p.stem)
def test_imported_model_name_is_shown_as_text(window: MainWindow, fake_dialogs: Any, config: Path) -> None:
    name = json.loads(config.read_text())["_name_or_path"]
    fake_dialogs.paths.append(str(config))
    window.model_form.importRequested.emit("file")
    assert window.controller.plan.model.name == name.strip()
    assert_no_label_renders_markup(window)
    summary = shown(window.model_form.summary)
    if name.isprintable():
        assert name in summary
    else:  # control and format characters are shown as escapes, never acted on
        assert "\x1b" not in summary and "\u202e" not in summary
        assert "\\x1b" in summary or "\\u202e" in summary


def test_a_plan_file_with_a_markup_name(window: MainWindow) -> None:
    path = HOSTILE / "plans" / "markup_model_name.vramplan.json"
    assert window.open_path(str(path))
    assert "<img src='/dev/zero'>" in shown(window.model_form.summary)
    assert_no_label_renders_markup(window)


def test_a_measurement_with_markup(window: MainWindow, fake_dialogs: Any) -> None:
    fake_dialogs.paths.append(str(HOSTILE / "measurements" / "markup_case.json"))
    window.load_measurement()
    assert window.measurement is not None
    assert_no_label_renders_markup(window)


def test_rejected_value_in_the_status_bar_is_text(window: MainWindow) -> None:
    window.controller.editRejected.emit("model", "name: \"<img src='/dev/zero'>\" is not allowed")
    assert window.problem.textFormat() == Qt.TextFormat.PlainText
    assert "<img src='/dev/zero'>" in shown(window.problem)


Boxes = list[tuple[str, Qt.TextFormat, str]]


def capture_boxes(call: Callable[[], object]) -> Boxes:
    """Run ``call`` (which opens modal message boxes) and close each box as it opens,
    recording its text, text format and informative text."""
    seen: Boxes = []

    def close_modal() -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            seen.append((box.text(), box.textFormat(), box.informativeText()))
            box.done(0)
        else:
            QTimer.singleShot(10, close_modal)

    QTimer.singleShot(10, close_modal)
    call()
    return seen


@pytest.mark.parametrize("path", REJECTED, ids=lambda p: p.name)
def test_every_rejection_dialog_shows_the_value_as_text(
    window: MainWindow, fake_dialogs: Any, monkeypatch: pytest.MonkeyPatch, path: Path
) -> None:
    """The real dialogs (not the recorder): the messages carry the hostile value."""
    monkeypatch.undo()  # the real gui.dialogs functions
    fake_dialogs.paths.append(str(path))
    monkeypatch.setattr(dialogs, "open_file", lambda *a: str(path))
    if path.name.startswith("plan"):
        boxes = capture_boxes(lambda: window.open_path(str(path)))
    elif path.name.startswith("measurement"):
        boxes = capture_boxes(window.load_measurement)
    else:
        boxes = capture_boxes(lambda: window.import_model("file"))
    assert len(boxes) == 1
    text, text_format, _ = boxes[0]
    assert "<img src='/dev/zero'>" in text or "&lt;img" not in text
    assert text_format == Qt.TextFormat.PlainText


@pytest.mark.parametrize(
    "show",
    [
        lambda: dialogs.error(None, "t", "<img src='/dev/zero'>"),
        lambda: dialogs.info(None, "t", "<span style='font-size:48pt'>FITS</span>"),
        lambda: dialogs.unexpected_error(None, "<img src='/dev/zero'>", "/tmp/<b>log</b>"),
        lambda: dialogs.ask_save_changes(None, "<img src='/dev/zero'>.json"),
    ],
    ids=["error", "info", "unexpected_error", "ask_save_changes"],
)
def test_every_message_box_is_plain_text(monkeypatch: pytest.MonkeyPatch, show: Callable[[], object]) -> None:
    monkeypatch.undo()
    boxes = capture_boxes(show)
    assert len(boxes) == 1
    text, text_format, _ = boxes[0]
    assert text_format == Qt.TextFormat.PlainText
    assert "<" in text  # the markup is there, as characters


def test_window_title_shows_the_file_name_as_text(window: MainWindow, tmp_path: Path) -> None:
    path = tmp_path / "<b>plan<b>[*]\x1b.vramplan.json"
    planfile.save(default_plan(), path)
    window.show()
    assert window.open_path(str(path))
    title = window.windowHandle().title()
    assert "<b>plan<b>[*]" in title and "\x1b" not in title


def test_recent_files_are_text(window: MainWindow, settings: Settings) -> None:
    path = "/tmp/R&D <img src='/dev/zero'>.vramplan.json"
    settings.add_recent(path)
    window._fill_recent()
    action = window.recent_menu.actions()[0]
    assert action.text().replace("&&", "").count("&") == 1  # only the numbering's mnemonic
    assert not markup_took_effect(action.toolTip(), Qt.TextFormat.AutoText)
    assert rendered(action.toolTip(), Qt.TextFormat.AutoText) is None or path in shown_tooltip(action.toolTip())


def shown_tooltip(text: str) -> str:
    document = rendered(text, Qt.TextFormat.AutoText)
    return text if document is None else document.toPlainText()


# ---- item 3: a folder's safetensors are read in a worker, with progress and Cancel --------


def model_folder(folder: Path, shards: int) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**LLAMA, "_name_or_path": "sharded"}))
    for i in range(shards):
        raw = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}).encode()
        (folder / f"model-{i:05d}.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 16)
    return folder


@pytest.fixture
def slow_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importer.read_safetensors_header

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.05)
        return real(*args, **kwargs)

    monkeypatch.setattr(importer, "read_safetensors_header", slow)


def start_folder_import(window: MainWindow, folder: Path, fake_dialogs: Any) -> QProgressDialog:
    before = window.controller.plan
    fake_dialogs.paths.append(str(folder))
    window.model_form.importRequested.emit("folder")
    assert window.controller.plan == before  # not read yet: the window went on at once
    progress = window.findChild(QProgressDialog)
    assert progress is not None
    return progress


def test_folder_import_runs_in_a_worker_with_progress(
    qtbot: Any, window: MainWindow, tmp_path: Path, fake_dialogs: Any, slow_headers: None
) -> None:
    progress = start_folder_import(window, model_folder(tmp_path / "sharded", 8), fake_dialogs)
    assert progress.maximum() == 8
    qtbot.waitUntil(lambda: window.controller.plan.model.name == "sharded", timeout=5000)
    assert window.controller.plan.model.params_override == 8 * 4
    assert not fake_dialogs.errors()


def test_cancel_stops_a_folder_import(
    qtbot: Any, window: MainWindow, tmp_path: Path, fake_dialogs: Any, slow_headers: None
) -> None:
    before = window.controller.plan
    progress = start_folder_import(window, model_folder(tmp_path / "sharded", 40), fake_dialogs)
    qtbot.waitUntil(lambda: progress.value() >= 1, timeout=5000)
    cancel = progress.findChild(QPushButton)
    assert cancel is not None and cancel.text() == "Cancel"
    cancel.click()  # as the user does
    qtbot.waitUntil(lambda: not window.importing, timeout=5000)
    assert window.controller.plan == before and not fake_dialogs.errors()


def test_an_over_budget_folder_is_one_error(
    qtbot: Any, window: MainWindow, tmp_path: Path, fake_dialogs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importer, "MAX_TOTAL_TENSORS", 3)
    folder = model_folder(tmp_path / "sharded", 5)
    fake_dialogs.paths.append(str(folder))
    window.model_form.importRequested.emit("folder")
    qtbot.waitUntil(lambda: bool(fake_dialogs.errors()), timeout=5000)
    assert "3 tensors" in fake_dialogs.errors()[0]


# ---- item 6: every window autosaves; a failure is said on screen, once ----------------------


def edited(plan: Any) -> Any:
    return plan.with_workload(seq_len=plan.workload.seq_len * 2).with_parallel(gpus_per_node=3)


def test_a_second_window_autosaves_to_its_own_file(qtbot: Any, tmp_path: Path) -> None:
    path = tmp_path / "data" / autosave.FILE_NAME
    first_window = MainWindow(settings=Settings(str(tmp_path / "one.ini")))
    second_window = MainWindow(settings=Settings(str(tmp_path / "two.ini")))
    qtbot.addWidget(first_window)
    qtbot.addWidget(second_window)
    first = Autosave(first_window.controller, path, delay_ms=10)
    second = Autosave(second_window.controller, path, delay_ms=10)
    assert first.start() and second.start()
    assert second.path != first.path and second.path.parent == path.parent
    second_window.controller.set_plan(edited(second_window.controller.plan))
    qtbot.waitUntil(lambda: second.path.exists() and not second.pending)
    assert planfile.load(second.path) == second_window.controller.plan
    assert not first.path.exists()
    # The second window is killed: its lock goes; the next start offers its plan back.
    second._lock.unlock()
    lost = second_window.controller.plan
    third = Autosave(MainWindow(settings=Settings(str(tmp_path / "three.ini"))).controller, path)
    assert third.start()
    assert third.recover() == lost
    third.finish()
    first.finish()


def test_an_orphan_of_another_slot_is_offered_when_the_first_slot_is_free(qtbot: Any, tmp_path: Path) -> None:
    path = tmp_path / "data" / autosave.FILE_NAME
    one = Autosave(MainWindow(settings=Settings(str(tmp_path / "a.ini"))).controller, path, delay_ms=10)
    two_window = MainWindow(settings=Settings(str(tmp_path / "b.ini")))
    two = Autosave(two_window.controller, path, delay_ms=10)
    assert one.start() and two.start()
    two_window.controller.set_plan(edited(two_window.controller.plan))
    qtbot.waitUntil(lambda: two.path.exists() and not two.pending)
    lost = two_window.controller.plan
    one.finish()  # the first window quit normally
    two._lock.unlock()  # the second was killed
    fresh = Autosave(MainWindow(settings=Settings(str(tmp_path / "c.ini"))).controller, path)
    assert fresh.start() and fresh.path == path
    assert fresh.recover() == lost
    fresh.finish()
    assert not any(p.name.endswith(".vramplan.json") for p in path.parent.iterdir())


def test_an_unwritable_data_folder_is_said_on_screen_once(
    window: MainWindow, tmp_path: Path, fake_dialogs: Any
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder should be")
    saver = Autosave(window.controller, blocked / autosave.FILE_NAME)
    autosave.report_problems(window, saver)
    assert not saver.start()
    assert not saver.start()
    problems = [args for name, args in fake_dialogs.calls if name == "error"]
    assert len(problems) == 1 and "autosave" in str(problems[0]).lower()


def test_a_failing_autosave_is_said_on_screen_once(
    qtbot: Any, window: MainWindow, tmp_path: Path, fake_dialogs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    saver = Autosave(window.controller, tmp_path / "data" / autosave.FILE_NAME, delay_ms=10)
    autosave.report_problems(window, saver)
    assert saver.start()

    def full(*_a: Any, **_k: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fileio, "atomic_write_text", full)
    for micro_batch in (2, 3, 4):
        window.controller.set_plan(window.controller.plan.with_workload(micro_batch=micro_batch))
        qtbot.waitUntil(lambda: not saver.pending)
    problems = [str(args) for name, args in fake_dialogs.calls if name == "error"]
    assert len(problems) == 1 and "No space left" in problems[0]
    saver.finish()


# ---- item 7: the start cleans up what interrupted saves left ---------------------------------


def test_start_removes_old_temporaries_in_the_data_folder(window: MainWindow, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    stale = data / f".{autosave.FILE_NAME}.{planfile.TEMP_MARK}dead.tmp"
    stale.write_text("{")
    os.utime(stale, (time.time() - 3600,) * 2)
    saver = Autosave(window.controller, data / autosave.FILE_NAME)
    assert saver.start()
    assert not stale.exists()
    saver.finish()


# ---- issue 10 item 3: one home for counts, sizes and the data folder ------------------------


def test_count_field_refuses_an_ambiguous_separator(window: MainWindow) -> None:
    field = window.findChild(CountField)
    assert field is not None
    rejected: list[str] = []
    field.rejected.connect(rejected.append)
    field.setText("1,5B")
    field.textEdited.emit("1,5B")
    assert field.value() is None and rejected and "ambiguous" in rejected[0]


def test_the_command_line_prints_sizes_as_the_window_does() -> None:
    result = estimate(default_plan())
    text = render_estimate(result)
    for figure in (result.total_bytes, result.capacity_bytes, result.inference.kv_cache_bytes):
        assert memory(figure) in text


def test_the_data_folder_has_one_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gui import crash

    monkeypatch.setattr(settings_module, "data_folder", lambda: tmp_path / "elsewhere")
    assert crash.log_folder() == tmp_path / "elsewhere" / "logs"
    assert not hasattr(crash, "data_folder")


# ==== issue 28: hostile files and faults, round two ======================================
# The Qt side of issue 28: PDF reports, chart pictures, the window's confirmations, the
# worker, saved cards and models, settings. Targets git cannot hold come from
# tests/core/test_hostile.py's helpers.


@pytest.fixture
def saved_plan(tmp_path: Path) -> Path:
    path = tmp_path / "saved.vramplan.json"
    planfile.save(default_plan(), path)
    return path


def run_launcher(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``vramplan ARGS`` as the installed entry point runs it (it registers the Qt PDF writer)."""
    from gui.launcher import main as launcher_main

    code = launcher_main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("kind", core_hostile.TARGET_KINDS)
def test_pdf_report_never_replaces_a_pipe_socket_device_or_read_only_file(
    tmp_path: Path, saved_plan: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """Issue 28 item 1: ``report --pdf`` made a FIFO, socket or device node a regular file
    and overwrote a 0444 file."""
    target = core_hostile.make_target(tmp_path, kind)
    if target is None:
        pytest.skip(f"cannot make a {kind} here")
    before = core_hostile.fingerprint(target)
    code, _, err = run_launcher(capsys, "report", str(saved_plan), "--pdf", str(target))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert core_hostile.fingerprint(target) == before


def test_pdf_report_keeps_a_file_the_app_did_not_write(
    tmp_path: Path, saved_plan: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28 item 3 for PDF; and a PDF the app wrote is replaced without --force."""
    target = tmp_path / "thesis.pdf"
    target.write_bytes(b"%PDF-1.7 someone else's thesis")
    code, _, err = run_launcher(capsys, "report", str(saved_plan), "--pdf", str(target))
    assert code == 2 and "--force" in err
    assert target.read_bytes() == b"%PDF-1.7 someone else's thesis"
    assert run_launcher(capsys, "report", str(saved_plan), "--pdf", str(target), "--force")[0] == 0
    assert run_launcher(capsys, "report", str(saved_plan), "--pdf", str(target))[0] == 0  # ours now
    assert target.read_bytes().startswith(b"%PDF")


def test_pdf_report_on_a_full_disk_fails_and_keeps_the_old_one(
    tmp_path: Path, saved_plan: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28 item 2: the PDF export exited 0 and left a truncated file in place of the old one."""
    disk = core_hostile.small_disk(tmp_path / "disk", 512)
    try:
        target = disk / "report.pdf"
        assert run_launcher(capsys, "report", str(saved_plan), "--pdf", str(target))[0] == 0
        old = target.read_bytes()
        core_hostile.fill(disk)
        code, _, err = run_launcher(capsys, "report", str(saved_plan), "--pdf", str(target), "--title", "again")
        assert code == 2 and "No space left" in err, err
        assert target.read_bytes() == old
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "report.pdf"]
    finally:
        core_hostile.unmount(disk)


@pytest.mark.parametrize("kind", ["png", "svg"])
def test_chart_export_on_a_full_disk_keeps_the_old_picture(
    window: MainWindow, fake_dialogs: Any, tmp_path: Path, kind: str
) -> None:
    """Issue 28 item 2: PNG/SVG export wrote in place, so a full disk destroyed the existing file."""
    disk = core_hostile.small_disk(tmp_path / "disk", 512)
    try:
        target = disk / f"chart.{kind}"
        fake_dialogs.paths.append(str(target))
        assert window.export_chart(kind)
        old = target.read_bytes()
        core_hostile.fill(disk)
        fake_dialogs.paths.append(str(target))
        assert not window.export_chart(kind)
        assert "No space left" in fake_dialogs.errors()[-1]
        assert target.read_bytes() == old
        assert sorted(p.name for p in disk.iterdir()) == ["chart." + kind, "filler"]
    finally:
        core_hostile.unmount(disk)


@pytest.mark.parametrize("kind", ["png", "svg"])
def test_chart_export_onto_a_fifo_returns_at_once(
    window: MainWindow, fake_dialogs: Any, tmp_path: Path, kind: str
) -> None:
    """Issue 28 item 13: exporting the chart onto a FIFO froze the window for good."""
    fifo = core_hostile.make_target(tmp_path, "fifo")
    if fifo is None:
        pytest.skip("no FIFOs here")
    fake_dialogs.paths.append(str(fifo))
    started = time.monotonic()
    assert not window.export_chart(kind)
    assert time.monotonic() - started < 5
    assert "not a regular file" in fake_dialogs.errors()[-1]


def export_everything(window: MainWindow, fake_dialogs: Any, target: Path) -> list[Callable[[], bool]]:
    """Every way the window writes a file, each aimed at ``target``."""

    def aimed(action: Callable[[], object]) -> Callable[[], bool]:
        def run() -> bool:
            fake_dialogs.paths.append(str(target))
            return bool(action())

        return run

    compare_panel = window.plan_tools.show_compare()
    compare_panel.pin_current()
    return [
        aimed(window.document.save_as),
        aimed(lambda: window.export_chart("png")),
        aimed(lambda: window.export_chart("svg")),
        aimed(lambda: report_written(window.plan_tools.export_report())),
        aimed(compare_panel.save),
    ]


def report_written(job: Any, timeout_s: float = 60.0) -> bool:
    """Waits for a report export (built and written in the "tools" worker) to end; True if written."""
    if job is None:
        return False
    deadline = time.monotonic() + timeout_s
    while job.ok is None and time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.01)
    return bool(job.ok)


@pytest.mark.parametrize("which", range(5), ids=["plan", "png", "svg", "report", "comparison"])
def test_the_window_asks_before_replacing_a_file_it_did_not_write(
    window: MainWindow, fake_dialogs: Any, tmp_path: Path, which: int
) -> None:
    """Issue 28 item 3 in the window: refused unless the user confirms (gui.dialogs.confirm_replace)."""
    target = tmp_path / "notes.md"  # a name every one of them takes (a report needs .md, .html, ...)
    target.write_text("my notes\n")
    save = export_everything(window, fake_dialogs, target)[which]
    fake_dialogs.replace = False
    save()
    assert target.read_text() == "my notes\n"
    assert [n for n, _ in fake_dialogs.calls].count("confirm_replace") == 1
    assert not fake_dialogs.errors()
    fake_dialogs.replace = True
    save()
    assert target.read_bytes() != b"my notes\n" and target.stat().st_size > 0
    fake_dialogs.calls.clear()
    save()  # the app's own file now: replaced without a question
    assert [n for n, _ in fake_dialogs.calls].count("confirm_replace") == 0


@pytest.mark.parametrize("which", [1, 2, 3, 4], ids=["png", "svg", "report", "comparison"])
def test_the_window_asks_before_replacing_its_plan_with_another_kind(
    window: MainWindow, fake_dialogs: Any, tmp_path: Path, which: int
) -> None:
    """2026-12-04 (h38fuzz): a plan the app wrote was replaced by a chart, report or comparison
    without a question (any file the app wrote counted as replaceable); the question names both kinds."""
    target = tmp_path / "plan.md"
    saves = export_everything(window, fake_dialogs, target)
    assert saves[0]()
    plan = target.read_bytes()
    fake_dialogs.replace = False
    saves[which]()
    assert target.read_bytes() == plan and not fake_dialogs.errors()
    asked = [a for n, a in fake_dialogs.calls if n == "confirm_replace"]
    assert len(asked) == 1 and "is a VRAM Planner plan, not a" in asked[0][-1]


def test_confirm_replace_names_the_kinds_when_the_file_is_the_apps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()
    why = "is a VRAM Planner plan, not a report; it was left as it is"
    boxes = capture_boxes(lambda: dialogs.confirm_replace(None, "/tmp/p.json", why))
    assert "is a VRAM Planner plan, not a report." in boxes[0][0] and "did not write" not in boxes[0][0]


def test_confirm_replace_is_a_plain_text_question_that_defaults_to_keeping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()
    answers: list[bool] = []
    boxes = capture_boxes(lambda: answers.append(dialogs.confirm_replace(None, "/tmp/<b>x</b>")))
    assert answers == [False] and boxes[0][1] == Qt.TextFormat.PlainText and "<b>x</b>" in boxes[0][0]


# ---- issue 28 items 4 and 11: saved cards and models ----------------------------------------


def custom_card(window: MainWindow, memory_gb: float = 20.0) -> None:
    window.controller.update(
        "hardware.gpu", lambda p: p.with_hardware(gpu="custom", custom_memory_gb=memory_gb, custom_tflops=55.0)
    )


def fill_cards(settings: Settings, n: int) -> None:
    data = [{"name": f"card {i:03}", "memory_gb": 10 + i, "tflops": 50} for i in range(n)]
    settings.store.setValue("catalogue/custom_gpus", json.dumps(data))


def fill_models(settings: Settings, n: int) -> None:
    model = default_plan().model.to_dict()
    entries = [{"name": f"m {i:03}", "model": model} for i in range(n)]
    settings.store.setValue("catalogue/custom_models", json.dumps(entries))


def test_a_101st_card_is_never_saved_by_silently_dropping_the_oldest(
    window: MainWindow, settings: Settings, fake_dialogs: Any
) -> None:
    """Issue 28 item 4: saving a 101st card silently deleted the oldest one."""
    fill_cards(settings, settings_module.MAX_CUSTOM_ENTRIES)
    custom_card(window, 333.0)
    fake_dialogs.paths.append("card 100")
    fake_dialogs.confirm = False
    window.hardware_form.save_card.click()
    names = [c.name for c in settings.custom_gpus]
    assert len(names) == 100 and names[0] == "card 000" and "card 100" not in names
    questions = [a for n, a in fake_dialogs.calls if n == "confirm"]
    assert len(questions) == 1 and "card 000" in questions[0][2]
    fake_dialogs.paths.append("card 100")
    fake_dialogs.confirm = True  # the user agrees to forget the oldest
    window.hardware_form.save_card.click()
    names = [c.name for c in settings.custom_gpus]
    assert len(names) == 100 and names[0] == "card 001" and names[-1] == "card 100"


def test_a_101st_model_is_never_saved_by_silently_dropping_the_oldest(
    window: MainWindow, settings: Settings, fake_dialogs: Any
) -> None:
    fill_models(settings, settings_module.MAX_CUSTOM_ENTRIES)
    fake_dialogs.paths.append("m 100")
    window.model_form.save_model.click()
    assert next(iter(settings.custom_models)) == "m 000" and "m 100" not in settings.custom_models
    assert [n for n, _ in fake_dialogs.calls].count("confirm") == 1


def test_replacing_a_saved_entry_by_name_needs_no_room(
    window: MainWindow, settings: Settings, fake_dialogs: Any
) -> None:
    fill_cards(settings, settings_module.MAX_CUSTOM_ENTRIES)
    custom_card(window, 77.0)
    fake_dialogs.paths.append("card 050")
    window.hardware_form.save_card.click()
    assert next(c for c in settings.custom_gpus if c.name == "card 050").memory_gb == 77.0
    assert not [n for n, _ in fake_dialogs.calls if n == "confirm"]


@pytest.mark.parametrize("name", ["x" * 1001, "y" * 81, "tab\tin\x1b[31mred", "   "])
def test_a_saved_name_too_long_or_with_control_characters_is_one_message(
    window: MainWindow, settings: Settings, fake_dialogs: Any, name: str
) -> None:
    """Issue 28 item 11: "Save to my models…" with a name over 1,000 characters showed a crash dialog."""
    fake_dialogs.paths.append(name)
    window.model_form.save_model.click()
    custom_card(window)
    fake_dialogs.paths.append(name)
    window.hardware_form.save_card.click()
    assert settings.custom_models == {} and settings.custom_gpus == []
    assert not [n for n, _ in fake_dialogs.calls if n == "unexpected_error"]
    if name.strip():
        assert len(fake_dialogs.errors()) == 2 and all("Not saved" in e for e in fake_dialogs.errors())


# ---- issue 28 items 14 and 18: saved names in the lists' tooltips are text --------------------


@pytest.mark.parametrize("name", ["<img src='/dev/zero'>", "<b>bold</b> <table><tr><td>x</td></tr></table>"])
def test_saved_names_in_list_tooltips_are_text(
    window: MainWindow, settings: Settings, fake_dialogs: Any, name: str
) -> None:
    """Issue 28 item 18 (and 14: an ``<img src='FIFO'>`` tooltip froze the window on hover)."""
    fake_dialogs.paths.append(name)
    window.model_form.save_model.click()
    custom_card(window)
    fake_dialogs.paths.append(name)
    window.hardware_form.save_card.click()
    for picker in (window.model_form.picker, window.hardware_form.gpu):
        index = next(i for i in range(picker.count()) if str(picker.itemData(i)).endswith(name))
        tip = picker.itemData(index, Qt.ItemDataRole.ToolTipRole)
        assert not markup_took_effect(tip, Qt.TextFormat.AutoText), tip
        assert name in shown_tooltip(tip)


def test_an_imported_config_name_reaches_the_model_list_as_text(window: MainWindow, fake_dialogs: Any) -> None:
    """The issue's route: a hostile config.json's name, imported, saved with one OK click."""
    config = HOSTILE / "configs" / "markup_dev_zero.json"
    fake_dialogs.paths.append(str(config))
    window.model_form.importRequested.emit("file")
    suggested = window.controller.plan.model.name
    fake_dialogs.paths.append(suggested[: settings_module.MAX_ENTRY_NAME])  # OK on the suggested name
    window.model_form.save_model.click()
    picker = window.model_form.picker
    tips = [picker.itemData(i, Qt.ItemDataRole.ToolTipRole) for i in range(picker.count())]
    assert any("<img" in shown_tooltip(t) for t in tips if t)
    assert not any(markup_took_effect(t, Qt.TextFormat.AutoText) for t in tips if t)


# ---- issue 28 items 5 and 8: a damaged settings file, a broken version-3 plan ------------------

DAMAGED_SETTINGS = HOSTILE / "settings" / "damaged.ini"


def damaged_settings(folder: Path) -> Settings:
    folder.mkdir(exist_ok=True)
    path = folder / "vramplan.ini"
    path.write_bytes(DAMAGED_SETTINGS.read_bytes())
    return Settings(str(path))


def test_a_damaged_settings_file_is_repaired_told_once_and_kept_aside(
    qtbot: Any, tmp_path: Path, fake_dialogs: Any
) -> None:
    """Issue 28 item 5: nested saved cards (RecursionError) and a version-3 last plan whose
    hardware.sharding is a list (TypeError) stopped every start."""
    from gui.app import tell_repair

    settings = damaged_settings(tmp_path / "conf")
    repaired = settings.repair()
    text = repaired.message()
    for words in ("saved card", "2 saved models", "last session's plan", "theme"):
        assert words in text, text
    assert repaired.kept_aside is not None and Path(repaired.kept_aside).read_bytes() == DAMAGED_SETTINGS.read_bytes()
    window = MainWindow(settings=settings)
    qtbot.addWidget(window)
    window.restore_session()
    tell_repair(window, repaired)
    assert [n for n, _ in fake_dialogs.calls].count("info") == 1
    assert list(settings.custom_models) == ["Kept model"] and settings.unit == "GiB"  # the good entries stay
    again = Settings(settings.store.fileName()).repair()
    assert again.dropped == () and again.kept_aside is None  # told once: the next start is clean


def test_a_damaged_settings_file_never_stops_the_app_from_starting(tmp_path: Path) -> None:
    """The real start-up, in a process of its own, on the damaged file: it paints its window."""
    config = tmp_path / "config" / "VRAM Planner"
    config.mkdir(parents=True)
    (config / "vramplan.ini").write_bytes(DAMAGED_SETTINGS.read_bytes())
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "QT_QPA_PLATFORM": "offscreen",
        "VRAMPLAN_EXIT_AFTER_PAINT": "1",
    }
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "gui.launcher"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "first-paint" in done.stdout, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert list(config.glob("vramplan.ini.damaged-*"))


@pytest.mark.parametrize("path", sorted((HOSTILE / "broken").glob("v3_*.vramplan.json")), ids=lambda p: p.stem)
def test_file_open_of_a_broken_version_3_plan_is_one_message(window: MainWindow, fake_dialogs: Any, path: Path) -> None:
    """Issue 28 item 8 in the window: File → Open raised TypeError (a crash dialog)."""
    before = window.controller.plan
    assert not window.open_path(str(path))
    assert len(fake_dialogs.errors()) == 1 and "plan.hardware." in fake_dialogs.errors()[0]
    assert window.controller.plan == before


# ---- issue 28 item 6: a context-parallel plan in the window ----------------------------------


def test_export_report_of_a_context_parallel_plan(window: MainWindow, fake_dialogs: Any, tmp_path: Path) -> None:
    """Export report (which diagnoses on the spot) showed a crash dialog for any CP > 1 plan."""
    plan = default_plan().with_workload(seq_len=4096).with_parallel(gpus_per_node=4, context_parallel=2)
    assert window.controller.set_plan(plan) is None
    target = tmp_path / "cp.md"
    fake_dialogs.paths.append(str(target))
    assert report_written(window.plan_tools.export_report())  # built and written in the worker
    assert "CP 2" in target.read_text() or "context" in target.read_text().lower()
    assert not [n for n, _ in fake_dialogs.calls if n in ("unexpected_error", "error")]


# ---- issue 28, the Messages paragraph: a mistyped command, Ctrl-C during start-up ----------


@pytest.mark.parametrize("word", ["estimat", "fewest", "compar"])
def test_a_mistyped_command_is_a_usage_error_not_the_window(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, word: str
) -> None:
    """`vramplan estimat` opened the desktop app (or said "no display found")."""
    import gui.app

    monkeypatch.setattr(gui.app, "main", lambda args: pytest.fail("the window was opened"))
    code, out, err = run_launcher(capsys, word)
    assert code == 2 and out == "" and err.count("\n") == 1 and f"{word!r} is not a command" in err
    assert "did you mean `vramplan " in err


def test_ctrl_c_during_start_up_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the window's modules were still importing printed a traceback."""
    import gui.app

    def interrupted(args: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(gui.app, "main", interrupted)
    code, out, err = run_launcher(capsys)
    assert code == 130 and out == "" and err == "vramplan: interrupted\n"


def test_the_chart_svg_is_valid_xml_whatever_text_reaches_the_painter(
    window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28 item 23, the window's side: QSvgGenerator writes text as it is, so any control
    character reaching the painter made the exported SVG invalid XML. The caption escapes them
    already; the writer now refuses to emit one whatever the source."""
    from xml.etree import ElementTree

    from gui.chart import export

    monkeypatch.setattr(export, "_caption", lambda chart: ["a\x01b\x1b[2J", "c\x0bd"])
    data = export.svg_bytes(window.chart)
    ElementTree.fromstring(data)
    assert "\ufffd".encode() in data


# ---- issue 28 item 15: a training config is read off the GUI thread ------------------------

RUNCONFIGS = Path(__file__).resolve().parents[1] / "data" / "runconfigs"


def test_a_training_config_is_read_while_the_window_keeps_running(
    window: MainWindow, fake_dialogs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """YAML/TOML configs were parsed on the GUI thread (a 1 MB YAML: seconds without libyaml).
    The read here waits until a timer of the GUI thread has fired: on the GUI thread it never would."""
    import threading

    from gui.tools import open_config

    real, on_gui_thread, ticked = open_config.read_run_config, [], []
    gui_ran = threading.Event()

    def slow(path: str) -> Any:
        on_gui_thread.append(threading.current_thread() is threading.main_thread())
        ticked.append(gui_ran.wait(10))
        return real(path)

    monkeypatch.setattr(open_config, "read_run_config", slow)
    monkeypatch.setattr(open_config, "run_dialog", lambda dialog: True)
    timer = QTimer()
    timer.timeout.connect(gui_ran.set)
    timer.start(20)
    fake_dialogs.paths.append(str(RUNCONFIGS / "trl_zephyr_sft_qlora.yaml"))
    window.plan_tools.open_config_action.trigger()
    timer.stop()
    assert on_gui_thread == [False] and ticked == [True]
    assert window.controller.plan.model_id == "mistral-7b-v0.1"


def test_reading_a_training_config_can_be_cancelled(
    window: MainWindow, fake_dialogs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gui.tools import open_config

    release = threading_event()
    monkeypatch.setattr(open_config, "read_run_config", lambda path: release.wait(30))
    before = window.controller.plan

    def cancel() -> None:
        dialog = window.findChild(QProgressDialog, "configProgress")
        assert dialog is not None
        dialog.findChild(QPushButton).click()  # the user's Cancel

    QTimer.singleShot(500, cancel)
    fake_dialogs.paths.append(str(RUNCONFIGS / "trl_zephyr_sft_qlora.yaml"))
    started = time.perf_counter()
    window.plan_tools.open_config_action.trigger()
    release.set()
    assert time.perf_counter() - started < 5 and window.controller.plan == before
    assert not [n for n, _ in fake_dialogs.calls if n == "error"]


def threading_event() -> Any:
    import threading

    return threading.Event()

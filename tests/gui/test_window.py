"""The window as a whole: verdict, lesson mode, files, session, exports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QTabBar

from core.estimate import Verdict
from core.files import planfile
from core.plan import Method, Precision
from core.presets import LESSON_EXAMPLES, default_plan, lesson_plan
from gui.main_window import MainWindow
from gui.settings import Settings


def test_verdict_changes_with_the_gpu(qtbot: Any, window: MainWindow) -> None:
    assert window.controller.estimate.verdict is Verdict.FITS
    assert "Fits" in window.verdict.badge.text()
    picker = window.hardware_form.gpu
    picker.setCurrentIndex(picker.findData("rtx-3060-12gb"))
    picker.activated.emit(picker.currentIndex())
    assert window.controller.plan.hardware.gpu == "rtx-3060-12gb"
    assert window.controller.estimate.verdict is Verdict.OOM
    assert "Out of memory" in window.verdict.badge.text()
    assert "✖" in window.verdict.badge.text()  # not colour alone
    assert "over the usable memory" in window.verdict.headline.text()


def test_lesson_full_bf16_is_81_9_gb_and_does_not_fit_80gb(window: MainWindow) -> None:
    window.controller.set_plan(lesson_plan(Method.FULL, Precision.BF16))
    estimate = window.controller.estimate
    assert window.arithmetic.summary.text() == "13.4 + 13.4 + 53.6 + 1.5 = 81.9 GB"
    assert window.chart.bars()[-1].total_bytes == estimate.total_bytes
    assert window.chart._total_labels[0].toPlainText() == "81.9 GB"
    assert estimate.verdict is not Verdict.FITS
    assert "Fits" not in window.verdict.badge.text()
    assert window.lesson_action.isChecked()
    assert not window.accounting_form.activations.isHidden()


def test_lesson_qlora_bf16_is_5_1_gb_and_fits_a_3060(window: MainWindow) -> None:
    window.controller.set_plan(lesson_plan(Method.QLORA, Precision.BF16, gpu="rtx-3060-12gb"))
    assert window.arithmetic.summary.text().endswith("= 5.1 GB")
    assert window.controller.estimate.verdict is Verdict.FITS
    assert "Fits" in window.verdict.badge.text()


def test_lesson_numbers_typed_through_the_forms(qtbot: Any, window: MainWindow) -> None:
    """The lesson's 7B full fine-tune entered by hand: P = 6.7e9, pure bf16, AdamW."""
    picker = window.model_form.picker
    picker.setCurrentIndex(picker.findData("llama-2-7b"))
    picker.activated.emit(picker.currentIndex())
    window.lesson_action.trigger()
    assert not window.accounting_form.params.isHidden()
    params = window.accounting_form.params
    params.setFocus()
    qtbot.keyClicks(params, "6.7e9")
    qtbot.keyClick(params, Qt.Key.Key_Return)  # a typed value applies when committed
    method = window.method_form.method
    method.setCurrentIndex(method.findData("full"))
    precision = window.method_form.preset
    precision.setCurrentIndex(precision.findData("pure-bf16"))
    estimate = window.controller.estimate
    assert estimate.plan.model.params_override == 6_700_000_000
    assert estimate.summary_formula == "13.4 + 13.4 + 53.6 + 1.5 = 81.9 GB"
    assert params.text() == "6.7e9"  # the user's spelling is kept


def test_save_then_open_round_trip(qtbot: Any, window: MainWindow, tmp_path: Path, fake_dialogs: Any) -> None:
    window.workload_form.seq_len.setValue(3000)
    path = tmp_path / "run.vramplan.json"
    fake_dialogs.paths.append(str(path))
    window.save_action.trigger()  # untitled: asks where
    assert path.exists() and planfile.load(path) == window.controller.plan
    assert not window.isWindowModified()
    assert window.windowTitle().startswith("run.vramplan.json")
    saved = window.controller.plan
    window.new_action.trigger()
    assert window.controller.plan == default_plan()
    fake_dialogs.paths.append(str(path))
    window.open_action.trigger()
    assert window.controller.plan == saved
    assert window.workload_form.seq_len.value() == 3000
    assert window.settings.recent_files[0] == str(path.resolve())


def test_open_bad_file_keeps_the_plan(window: MainWindow, tmp_path: Path, fake_dialogs: Any) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format": "vramplan-plan", "version": 1, "plan": {"model": 3}}))
    before = window.controller.plan
    fake_dialogs.paths.append(str(path))
    window.open_action.trigger()
    assert window.controller.plan is before
    assert fake_dialogs.errors() and "bad.json" in fake_dialogs.errors()[0]


def test_modified_document_asks_before_replacing(window: MainWindow, tmp_path: Path, fake_dialogs: Any) -> None:
    path = tmp_path / "a.json"
    planfile.save(default_plan(), path)
    assert window.open_path(str(path))
    window.workload_form.micro_batch.setValue(2)
    assert window.isWindowModified()
    fake_dialogs.save_choice = "cancel"
    window.new_action.trigger()
    assert window.controller.plan.workload.micro_batch == 2
    fake_dialogs.save_choice = "save"
    window.new_action.trigger()
    assert planfile.load(path).workload.micro_batch == 2
    assert window.controller.plan == default_plan()


def test_session_is_restored(qtbot: Any, settings: Settings, tmp_path: Path) -> None:
    first = MainWindow(settings=settings)
    qtbot.addWidget(first)
    first.workload_form.micro_batch.setValue(7)
    first.unit_actions["GiB"].trigger()
    first.resize(1000, 700)
    first.save_session()
    second = MainWindow(settings=Settings(settings.store.fileName()))
    qtbot.addWidget(second)
    second.restore_session()
    assert second.controller.plan.workload.micro_batch == 7
    assert second.unit == "GiB"
    assert second.controller.undo_stack.count() == 0


def test_a_returning_window_is_built_on_its_last_plan(qtbot: Any, settings: Settings) -> None:
    """gui.app builds the window on the last session's plan: restoring the session then
    estimates and draws nothing again. Before, the window worked out and drew the default
    plan, then the restored one, before its first paint."""
    from gui.document import Document

    first = MainWindow(settings=settings)
    qtbot.addWidget(first)
    first.workload_form.micro_batch.setValue(7)
    first.save_session()
    stored = Document.stored_plan(settings)
    assert stored is not None and stored.workload.micro_batch == 7
    second = MainWindow(settings=Settings(settings.store.fileName()), plan=stored)
    qtbot.addWidget(second)
    assert second.controller.plan == stored
    redrawn: list[object] = []
    second.controller.estimateChanged.connect(redrawn.append)
    second.restore_session()
    assert redrawn == [] and second.controller.plan == stored
    assert second.controller.undo_stack.count() == 0


def test_damaged_stored_plan_falls_back_to_the_default(qtbot: Any, settings: Settings) -> None:
    settings.last_plan = '{"format": "vramplan-plan", "version": 99}'
    settings.store.setValue("display/unit", "furlongs")
    main = MainWindow(settings=settings)
    qtbot.addWidget(main)
    main.restore_session()
    assert main.controller.plan == default_plan()
    assert main.unit == "GB"


def test_export_png_and_svg(window: MainWindow, tmp_path: Path, fake_dialogs: Any) -> None:
    png, svg = tmp_path / "chart.png", tmp_path / "chart.svg"
    fake_dialogs.paths += [str(png), str(svg)]
    assert window.export_chart("png")
    assert window.export_chart("svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = svg.read_text(encoding="utf-8")
    assert "<svg" in text and "Weights" in text


def test_import_config_json(window: MainWindow, tmp_path: Path, fake_dialogs: Any) -> None:
    folder = tmp_path / "TinyLlama"
    folder.mkdir()
    config = {
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 22,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "vocab_size": 32000,
    }
    (folder / "config.json").write_text(json.dumps(config))
    fake_dialogs.paths.append(str(folder))
    window.model_form.importRequested.emit("folder")
    plan = window.controller.plan
    assert plan.model.num_layers == 22 and plan.model.num_kv_heads == 4 and plan.model_id == ""
    (folder / "config.json").write_text('{"model_type": "llama"}')
    fake_dialogs.paths.append(str(folder / "config.json"))
    window.model_form.importRequested.emit("file")
    assert window.controller.plan == plan
    assert fake_dialogs.errors()


def test_diagnosis_tab_can_be_replaced(window: MainWindow) -> None:
    titles = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    assert "Diagnosis" in titles
    panel = QLabel("remedies")
    index = window.add_panel(panel, "Diagnosis")
    assert window.tabs.widget(index) is panel
    assert window.tabs.count() == len(titles)


def test_standard_shortcuts(window: MainWindow) -> None:
    from PySide6.QtGui import QKeySequence

    assert window.save_action.shortcut() == QKeySequence(QKeySequence.StandardKey.Save)
    assert window.undo_action.shortcut() == QKeySequence(QKeySequence.StandardKey.Undo)
    assert window.open_action.shortcut() == QKeySequence(QKeySequence.StandardKey.Open)


def test_forms_are_reachable_by_keyboard(window: MainWindow) -> None:
    for form in window.forms:
        for key, widget in form.fields.items():
            assert widget.focusPolicy() & Qt.FocusPolicy.TabFocus, key


def test_lesson_examples_menu_reproduces_the_lessons_numbers(window: Any) -> None:
    # The lesson's printed totals: 3.5 (GPT-2 small), 81.9, 5.1 and 15.2 GB.
    expected = {"3.5 GB": 3.49, "81.9 GB": 81.9, "5.1 GB": 5.1, "15.2 GB": 15.2}
    actions = [a for a in window.examples_menu.actions() if a.text()]
    assert len(actions) == 4
    for action in actions:
        before = window.controller.plan
        action.trigger()
        est = window.controller.estimate
        total = next(v for k, v in expected.items() if k in action.text())
        digits = 2 if total == 3.49 else 1
        assert round(est.peak_bytes / 1e9, digits) == total
        assert window.controller.plan != before
    # The 5.1 GB example fits its 12 GB card; undo walks back through the examples.
    window.controller.undo_stack.undo()
    assert "5.1 GB" in actions[2].text()
    assert window.controller.plan == LESSON_EXAMPLES[2][1]()


def test_the_arithmetic_follows_the_mode(window: MainWindow) -> None:
    # Issue 26, item 11: in Inference mode the Arithmetic tab showed the training step's sum.
    from core.verdict import Mode

    window.display.set_mode(Mode.INFERENCE)
    inf = window.controller.estimate.inference
    assert window.arithmetic.summary.text() == inf.summary_formula and "needed at once" in inf.summary_formula
    keys = [window.arithmetic.picker.itemData(i) for i in range(window.arithmetic.picker.count())]
    assert keys == [f"serving.{b.key.value}" for b in inf.buckets]
    window.display.set_mode(Mode.TRAINING)
    assert window.arithmetic.summary.text() == window.controller.estimate.summary_formula


def test_menus_hold_no_greyed_item_without_a_reason_and_paste_has_a_shortcut(window: MainWindow) -> None:
    # The View menu ended in "Plan" and "Details", always greyed: the docks are not closable
    # (DockWidgetMovable | DockWidgetFloatable), so Qt disables their toggleViewAction. "Clear measurement"
    # stood greyed with "Clear measurement" as its tip. "Paste launch command…", the serving side's way
    # in, had no shortcut, and its tip named vLLM and SGLang only (it reads llama-server and ollama too).
    from PySide6.QtGui import QKeySequence
    from PySide6.QtWidgets import QMenu

    view = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    assert isinstance(view, QMenu)
    greyed = [a.text() for a in view.actions() if not a.isSeparator() and not a.menu() and not a.isEnabled()]
    assert greyed == []
    assert not window.clear_measure_action.isEnabled()
    assert "No measurement is loaded" in window.clear_measure_action.statusTip()
    paste = window.plan_tools.paste_command_action
    assert paste.shortcut() == QKeySequence("Ctrl+Shift+V")
    assert "llama-server" in paste.toolTip() and "ollama" in paste.toolTip()
    assert any(line.endswith("Paste launch command") for line in window.shortcut_lines())


def test_tab_never_stops_on_the_plan_column_itself_and_scrolls_to_the_field(qtbot: Any, window: MainWindow) -> None:
    # Tab round the window (the forms, the chart, the Details, back to the Model box) stopped once on the plan
    # column's scroll area itself ("Plan forms"), a stop with no visible focus, before the Model box. The column
    # is no Tab stop; each field Tab reaches in it is scrolled into view.
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication, QScrollArea

    window.resize(1366, 768)
    window.show()
    qtbot.waitExposed(window)
    column = window.plan_dock.widget()
    assert isinstance(column, QScrollArea)
    first = window.model_form.fields["model"]
    window.activateWindow()
    first.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is not None)
    stops: list[Any] = []
    for _ in range(200):
        focused = QApplication.focusWidget()
        assert focused is not None
        if stops and (focused is first or first.isAncestorOf(focused)):
            break  # round the window and back
        stops.append(focused)
        if column.isAncestorOf(focused):
            top = focused.mapTo(column.viewport(), focused.rect().topLeft()).y()
            assert 0 <= top < column.viewport().height(), focused.accessibleName()  # scrolled into view
        QTest.keyClick(focused, Qt.Key.Key_Tab)
    else:
        raise AssertionError("Tab never came back to the Model box")
    assert any(not column.isAncestorOf(w) for w in stops)  # it went round the window
    assert column not in stops


def test_every_visible_control_says_what_it_does(qtbot: Any, window: MainWindow) -> None:
    # Walked with the start-up plan, both modes and every Details tab: the Diagnosis' curve picker ("Memory
    # against micro-batch"), the Parallelism form's "Advanced" and the docks' icon-only float buttons (Qt's
    # qt_dockwidget_floatbutton) had no tooltip (the rest take theirs from core/inputs.py or their own code).
    from PySide6.QtWidgets import QAbstractButton, QAbstractSpinBox, QComboBox, QLineEdit

    window.resize(1366, 768)
    window.show()
    qtbot.waitExposed(window)
    silent: set[str] = set()
    for mode in (window.training_action, window.inference_action):
        mode.trigger()
        for index in range(window.tabs.count()):
            window.tabs.setCurrentIndex(index)
            qtbot.wait(10)
            for kind in (QAbstractButton, QComboBox, QAbstractSpinBox, QLineEdit):
                for control in window.findChildren(kind):
                    parent = control.parentWidget()
                    told = control.toolTip() or (parent is not None and parent.toolTip())
                    if control.isVisible() and not told and not isinstance(parent, QTabBar):
                        silent.add(control.accessibleName() or control.objectName() or type(control).__name__)
    assert silent == set()

"""Reports out: a four-plan comparison as HTML and PDF, the plan's report from the menu,
Markdown on the clipboard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QGuiApplication

from core.advice.compare import compare
from core.files.report import build_report, report_for_comparison
from gui.main_window import MainWindow
from gui.tools import report_export
from tests.core.test_compare import four_plans


def test_four_plan_comparison_as_html_and_pdf(qapp: Any, tmp_path: Path) -> None:
    report = report_for_comparison(compare(four_plans()), "Four plans", generated="2026-12-01T10:00:00Z")  # type: ignore[arg-type]
    pdf = tmp_path / "four.pdf"
    html = tmp_path / "four.html"
    assert report_export.write_report(report, pdf) == "pdf"
    assert report_export.write_report(report, html) == "html"
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    assert data.count(b"/Type /Page\n") + data.count(b"/Type /Page ") + data.count(b"/Type/Page") >= 2
    assert "<svg" in html.read_text()
    # What the PDF holds: the document Qt lays out, with the chart as an image resource.
    document = report_export.report_document(report)
    text = document.toPlainText()
    assert "Cheapest that fits" in text and "Lesson 7B, 16-bit full" in text
    image = report_export.chart_image(report)
    assert not image.isNull() and image.width() == 1520
    image.save(str(tmp_path / "chart.png"))


def test_bad_suffix_and_unwritable_target_are_one_line(qapp: Any, tmp_path: Path) -> None:
    from core.errors import PlanFileError

    report = build_report([("p", four_plans()[0][1])], generated="t")  # type: ignore[list-item]
    out = tmp_path / "out"
    out.mkdir()
    for target in (out / "report.docx", out / "missing" / "r.pdf", out / "missing" / "r.html"):
        try:
            report_export.write_report(report, target)
        except PlanFileError as error:
            assert "\n" not in str(error)
        else:
            raise AssertionError(f"{target} should fail")
    assert list(out.iterdir()) == []  # no half-written or temporary file left behind


def test_menu_exports_the_current_plan(window: MainWindow, fake_dialogs: Any, tmp_path: Path, qtbot: Any) -> None:
    target = tmp_path / "plan.md"
    fake_dialogs.paths.append(str(target))
    job = window.plan_tools.export_report()  # built and written in the worker process
    assert job is not None
    with qtbot.waitSignal(job.done, timeout=60_000) as done:
        pass
    assert done.args == [True]
    text = target.read_text()
    assert text.startswith("# Plan: Current plan") and window.controller.plan.model.name in text


def test_copy_as_markdown(window: MainWindow) -> None:
    window.plan_tools.copy_markdown_action.trigger()
    clip = QGuiApplication.clipboard().text()
    assert clip.startswith("# Plan:") and "| Weights |" in clip


def test_launcher_writes_pdf_through_qt(qapp: Any, tmp_path: Path) -> None:
    from core.files.planfile import save
    from gui.launcher import main

    plan_path = tmp_path / "plan.json"
    save(four_plans()[1][1], plan_path)  # type: ignore[arg-type]
    out = tmp_path / "plan.pdf"
    assert main(["report", str(plan_path), "--pdf", str(out)]) == 0
    assert out.read_bytes().startswith(b"%PDF-")


def test_inference_mode_exports_the_serving_report(
    window: MainWindow, fake_dialogs: Any, tmp_path: Path, qtbot: Any
) -> None:
    """Issue 26 item 11: in inference mode, Export report wrote the training report."""
    window.inference_action.trigger()
    target = tmp_path / "served.md"
    fake_dialogs.paths.append(str(target))
    job = window.plan_tools.export_report()
    assert job is not None
    with qtbot.waitSignal(job.done, timeout=60_000) as done:
        pass
    assert done.args == [True]
    text = target.read_text()
    inference = window.controller.estimate.inference
    assert "Serving speed" in text and inference.summary_formula in text and "Time and cost" not in text
    window.plan_tools.copy_markdown_action.trigger()
    assert "Serving speed" in QGuiApplication.clipboard().text()


@pytest.mark.parametrize("spelling", [["--pdf=OUT"], ["--pd", "OUT"], ["--p=OUT"]])
def test_launcher_writes_pdf_however_the_option_is_spelled(
    qapp: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: list[str]
) -> None:
    """argparse takes `--pdf=OUT` and the prefixes `--pd` / `--p` (no other option of `report` starts so);
    the launcher handed Qt's PDF writer over only for a separate `--pdf`, so these said "PDF reports are drawn
    with the app's Qt (PySide6), which is not available here" and exited 2 (branch h87qa)."""
    from core.cli import report as cli_report
    from core.files.planfile import save
    from gui.launcher import main

    monkeypatch.setattr(cli_report, "_pdf_writer", [])  # as in a fresh process: no writer handed over yet
    plan_path = tmp_path / "plan.json"
    save(four_plans()[1][1], plan_path)  # type: ignore[arg-type]
    out = tmp_path / "plan.pdf"
    assert main(["report", str(plan_path), *(a.replace("OUT", str(out)) for a in spelling)]) == 0
    assert out.read_bytes().startswith(b"%PDF-")

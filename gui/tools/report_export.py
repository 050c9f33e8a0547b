"""Reports out: HTML, PDF, Markdown and CSV files, and Markdown on the clipboard.

The contents come from :mod:`core.files.report`; PDF goes through Qt's own QTextDocument and
QPdfWriter (no other dependency), with the chart's SVG rasterised by QtSvg because
QTextDocument draws no SVG. Every format is made in memory and written by the one atomic
writer (:mod:`core.files.fileio`): a failed export leaves the previous file whole, and a
pipe, a device, a read-only file or a file VRAM Planner did not write is never replaced
(the last only once the user confirms, asked before any work is done).

From the window (File → Export report…, the comparison's Report button) the report is built
and written in the "tools" worker process (:func:`gui.tools.searches.write_report`: up to four
plans estimated and diagnosed, half a second on a laptop), with a progress dialog and Cancel
(:class:`ReportExport`); only a PDF's drawing, which needs Qt, comes back to the GUI thread.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMarginsF, QObject, QSize, Qt, QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QGuiApplication,
    QImage,
    QPageLayout,
    QPageSize,
    QPainter,
    QPdfWriter,
    QTextDocument,
)
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QLabel, QProgressDialog

from core.errors import PlanFileError
from core.files.fileio import NotOurFileError, save_target, write_file
from core.files.report import FORMATS, Report, build_report, chart_svg, to_html, to_markdown
from core.plan import Plan
from gui import dialogs, plaintext
from gui.tools.context import ToolContext
from gui.tools.searches import ReportAnswer, ReportRequest
from gui.tools.searches import write_report as write_report_job
from gui.worker.runner import JobFailed, LatestJobRunner

REPORT_FILTER = "HTML page (*.html);;PDF document (*.pdf);;Markdown (*.md);;CSV table (*.csv)"
CHART_RESOURCE = "vramplan-chart.png"
QT_STYLE = (
    "table{border-collapse:collapse;margin-bottom:8px} td,th{border:1px solid #bbb;padding:3px}"
    " th{text-align:left} td.n{text-align:right} tr.diff td{background-color:#fff3cd}"
    " td.f{font-family:monospace;font-size:7pt} .caption{color:#555555}"
)
SUFFIXES = {".html": "html", ".htm": "html", ".pdf": "pdf", ".md": "md", ".markdown": "md", ".csv": "csv"}
REPORT_DEADLINE_S = 120.0  # four plans' diagnoses take about a second; one stuck past this is killed
SHOW_PROGRESS_AFTER_MS = 300  # a quick export never flashes its progress dialog


def _ensure_gui_application() -> QGuiApplication | None:
    """QTextDocument lays out text with the platform's fonts, which needs a QGuiApplication;
    the command line has none, so make one (offscreen where there is no display)."""
    if QGuiApplication.instance() is not None:
        return None
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    return QGuiApplication(["vramplan"])


def chart_image(report: Report, width_px: int = 1520) -> QImage:
    svg = chart_svg(report.comparison, report.unit).encode("utf-8")
    renderer = QSvgRenderer(QByteArray(svg))
    size = renderer.defaultSize()
    scale = width_px / max(1, size.width())
    image = QImage(QSize(width_px, round(size.height() * scale)), QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    renderer.render(painter)
    painter.end()
    return image


def report_document(report: Report) -> QTextDocument:
    document = QTextDocument()
    document.addResource(QTextDocument.ResourceType.ImageResource, QUrl(CHART_RESOURCE), chart_image(report))
    html = to_html(report, chart_src=CHART_RESOURCE)
    # QTextDocument's CSS subset: drop the page's style sheet (auto margins and max-width
    # would narrow every table) and give it the few rules it understands.
    start, end = html.find("<style>"), html.find("</style>")
    if start >= 0 and end > start:
        html = html[:start] + html[end + len("</style>") :]
    document.setDefaultStyleSheet(QT_STYLE)
    document.setHtml(html)
    return document


def pdf_bytes(report: Report) -> bytes:
    """The report as an A4 PDF, in memory."""
    keep = _ensure_gui_application()
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    writer = QPdfWriter(buffer)
    writer.setPageSize(QPageSize(QPageSize.PageSizeId.A4))
    writer.setPageMargins(QMarginsF(15, 15, 15, 15), QPageLayout.Unit.Millimeter)
    writer.setTitle(report.title)
    writer.setCreator("VRAM Planner")  # what core.files.fileio recognises a PDF of ours by
    document = report_document(report)
    document.setDefaultFont(QFont("sans-serif", 9))
    document.print_(writer)
    del writer  # ends the PDF
    data = bytes(buffer.data().data())
    del keep
    return data


def write_pdf(report: Report, path: str | os.PathLike[str], force: bool = False) -> None:
    """The report as an A4 PDF at ``path``; a PlanFileError when it cannot be written."""
    save_target(path, force=force, kind="report")  # refuse before the work of drawing
    data = pdf_bytes(report)
    if not data.startswith(b"%PDF"):
        raise PlanFileError(str(path), "cannot be written (the PDF writer produced no PDF)")
    write_file(path, data, force=force)


def write_report(report: Report, path: str | os.PathLike[str], force: bool = False) -> str:
    """Write ``report`` in the format its suffix names; returns that format."""
    kind = SUFFIXES.get(Path(path).suffix.lower())
    if kind is None:
        raise PlanFileError(str(path), "needs a .html, .pdf, .md or .csv name")
    if kind == "pdf":
        write_pdf(report, path, force)
    else:
        write_file(path, FORMATS[kind](report), force=force)
    return kind


def copy_markdown(report: Report) -> str:
    text = to_markdown(report)
    clipboard = QGuiApplication.clipboard()
    clipboard.setText(text)
    return text


# ---- the window's actions -------------------------------------------------------------
def _stem(context: ToolContext, default: str) -> str:
    path = context.document.path
    return Path(path).name.removesuffix(".json").removesuffix(".vramplan") if path else default


def _current_report(context: ToolContext) -> Report:
    return build_report(
        [(_stem(context, "Current plan"), context.controller.plan)],
        unit=context.display.unit,
        mode=context.display.mode,
    )


class ReportExport(QObject):
    """One report being built and written in the worker, with a progress dialog and Cancel.
    ``done(ok)`` says how it ended (False: cancelled, or the file could not be written)."""

    done = Signal(bool)

    def __init__(self, context: ToolContext, request: ReportRequest) -> None:
        super().__init__(context.parent)
        self.context = context
        self.request = request
        self.ok: bool | None = None  # None while running
        self.jobs: LatestJobRunner[ReportRequest, ReportAnswer] = LatestJobRunner(
            write_report_job, lane="tools", deadline_s=REPORT_DEADLINE_S, parent=self
        )
        self.jobs.finished.connect(self._finished)
        self.jobs.failed.connect(self._failed)
        self.progress = QProgressDialog("", "Cancel", 0, 0, context.parent)
        self.progress.setObjectName("reportProgress")
        label = plaintext.plain_label(QLabel(f"Writing {Path(request.path).name}…"))  # the user's file name
        self.progress.setLabel(label)
        self.progress.setWindowTitle("Export report")
        self.progress.setWindowModality(Qt.WindowModality.WindowModal)
        self.progress.setMinimumDuration(SHOW_PROGRESS_AFTER_MS)
        self.progress.setAutoReset(False)
        self.progress.setAutoClose(False)
        self.progress.canceled.connect(self.cancel)
        self.jobs.submit(request)

    def cancel(self) -> None:
        if self.ok is None:
            self.jobs.cancel()
            self._end(False, "Report export cancelled")

    def _finished(self, request: ReportRequest, answer: ReportAnswer) -> None:
        if answer.error:
            self._end(False, "")
            dialogs.error(self.context.parent, "Cannot export the report", answer.error)
            return
        if answer.report is not None:  # a PDF: drawn here, with Qt
            try:
                write_pdf(answer.report, request.path, request.force)
            except PlanFileError as error:
                self._end(False, "")
                dialogs.error(self.context.parent, "Cannot export the report", str(error))
                return
        self._end(True, f"Exported {request.path}")

    def _failed(self, _request: ReportRequest, error: BaseException) -> None:
        self._end(False, "")
        if isinstance(error, JobFailed):
            dialogs.error(self.context.parent, "Cannot export the report", f"The report {error}.")
            return
        raise error  # a bug in building the report: to the crash handler

    def _end(self, ok: bool, message: str) -> None:
        if self.ok is not None:
            return
        self.ok = ok
        self.progress.close()
        self.progress.deleteLater()
        if message:
            self.context.document.message.emit(message)
        self.done.emit(ok)
        self.deleteLater()


def export_report(
    context: ToolContext, plans: Sequence[tuple[str, Plan]] | None = None, title: str = ""
) -> ReportExport | None:
    """File → Export report…: the current plan (or the ``plans`` of a comparison) as HTML, PDF,
    Markdown or CSV, built and written in the worker. None when no file was chosen."""
    named = tuple(plans) if plans is not None else ((_stem(context, "Current plan"), context.controller.plan),)
    suggested = os.path.join(context.document.folder(), f"{_stem(context, 'report')}.html")
    path = dialogs.save_file(context.parent, "Export report", REPORT_FILTER, suggested)
    if not path:
        return None
    if not Path(path).suffix:
        path += ".html"
    kind = SUFFIXES.get(Path(path).suffix.lower())
    if kind is None:
        dialogs.error(context.parent, "Cannot export the report", f"{path}: needs a .html, .pdf, .md or .csv name")
        return None
    force = False
    try:
        save_target(path, kind="report")  # refused or asked before the work of a report, not after
    except NotOurFileError as refused:
        if not dialogs.confirm_replace(context.parent, path, refused.reason):
            return None
        force = True
    except PlanFileError as error:
        dialogs.error(context.parent, "Cannot export the report", str(error))
        return None
    request = ReportRequest(named, title, context.display.unit, path, kind, context.display.mode, force)
    return ReportExport(context, request)


def copy_report_markdown(context: ToolContext, report: Report | None = None) -> str:
    text = copy_markdown(report if report is not None else _current_report(context))
    context.document.message.emit("Report copied as Markdown")
    return text

"""``vramplan report PLAN...``: a report of a plan or a comparison as HTML, PDF, Markdown or CSV.

PDF is drawn with Qt, which core never imports: the desktop entry point registers its writer
with :func:`set_pdf_writer` when Qt is there.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from core.cli.parser import UsageError, add_force_option, add_mode_option, text_arg
from core.cli.plans import load_plans_and_mode
from core.files.fileio import save_target, write_file
from core.files.report import FORMATS, Report, build_report

PdfWriter = Callable[[Report, str, bool], None]  # (report, path, force)
_pdf_writer: list[PdfWriter] = []


def set_pdf_writer(writer: PdfWriter) -> None:
    """The GUI layer registers its Qt PDF writer here (core never imports Qt)."""
    _pdf_writer[:] = [writer]


def register(sub: Any) -> None:
    report = sub.add_parser("report", help="a report of a plan or a comparison: HTML, PDF, Markdown or CSV")
    report.add_argument("plans", nargs="+", metavar="PLAN", help="plan files or a comparison file (up to 4 plans)")
    kind = report.add_mutually_exclusive_group(required=True)
    for flag, text in (("html", "a self-contained HTML page"), ("pdf", "a PDF (needs the app's Qt)"),
                       ("md", "Markdown"), ("csv", "CSV, one figure per line")):  # fmt: skip
        kind.add_argument(f"--{flag}", metavar="OUT", type=text_arg, help=f"write {text} to OUT")
    report.add_argument("--title", help="the report's title")
    report.add_argument("--gib", action="store_true", help="GiB instead of decimal GB")
    add_mode_option(report, "report on a training step or for serving (verdicts, buckets and diagnosis follow it)")
    add_force_option(report)


def run(args: argparse.Namespace) -> str:
    """Writes the report to its file; prints nothing."""
    kind, path = next((k, getattr(args, k)) for k in ("html", "pdf", "md", "csv") if getattr(args, k) is not None)
    if kind == "pdf" and not _pdf_writer:
        raise UsageError(
            "PDF reports are drawn with the app's Qt (PySide6), which is not available here; "
            "use --html and print it, or run the installed vramplan with its GUI"
        )
    save_target(path, force=args.force, kind="report")  # refuse a target before the work of a report
    named, mode = load_plans_and_mode(args.plans, args.mode)
    report = build_report(named, args.title or "", unit="GiB" if args.gib else "GB", mode=mode)
    if kind == "pdf":
        _pdf_writer[0](report, path, args.force)
    else:
        write_file(path, FORMATS[kind](report), force=args.force)
    return ""

"""``vramplan report PLAN...``: a report of a plan or a comparison as HTML, PDF, Markdown or CSV.

PDF is drawn with Qt, which core never imports: the desktop entry point registers its writer
with :func:`set_pdf_writer` when Qt is there.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from core.cli.parser import UsageError
from core.cli.plans import load_named_plans
from core.errors import PlanFileError
from core.estimate import Mode
from core.files.planfile import atomic_write_text
from core.files.report import FORMATS, Report, build_report

PdfWriter = Callable[[Report, str], None]
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
        kind.add_argument(f"--{flag}", metavar="OUT", help=f"write {text} to OUT")
    report.add_argument("--title", help="the report's title")
    report.add_argument("--gib", action="store_true", help="GiB instead of decimal GB")
    report.add_argument(
        "--mode",
        choices=["training", "inference"],
        default="training",
        help="report on a training step or for serving (verdicts, buckets and diagnosis follow it)",
    )


def run(args: argparse.Namespace) -> str:
    """Writes the report to its file; prints nothing."""
    named = load_named_plans(args.plans)
    report = build_report(named, args.title or "", unit="GiB" if args.gib else "GB", mode=Mode(args.mode))
    if args.pdf:
        if not _pdf_writer:
            raise UsageError(
                "PDF reports are drawn with the app's Qt (PySide6), which is not available here; "
                "use --html and print it, or run the installed vramplan with its GUI"
            )
        _pdf_writer[0](report, args.pdf)
        return ""
    kind, path = ("html", args.html) if args.html else ("md", args.md) if args.md else ("csv", args.csv)
    try:
        atomic_write_text(path, FORMATS[kind](report))
    except OSError as exc:
        raise PlanFileError(path, f"cannot be written ({exc.strerror or exc})") from None
    return ""

"""Reports: HTML (self-contained), Markdown and CSV of a plan or a comparison of four."""

from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from core import __version__
from core.advice.compare import compare
from core.cli.app import main
from core.estimate import VERDICT_LABELS, estimate
from core.files import report as report_module
from core.files.comparison import save as save_comparison
from core.files.planfile import save as save_plan
from core.files.report import build_report, caption, chart_svg, md_cell, to_csv, to_html, to_markdown
from core.format import duration, memory
from core.plan import Engine, Method, Plan, Precision
from core.presets import default_plan, lesson_plan
from core.units import GB, GiB
from core.verdict import Mode
from tests.core.test_compare import four_plans

HOSTILE = 'Plan <script>alert("x")</script> | *bold* =cmd'


class Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def report_of_four(**kwargs: str):  # type: ignore[no-untyped-def]
    named = four_plans()
    named[0] = (HOSTILE, named[0][1])
    return build_report(named, "Four plans", generated="2026-12-01T10:00:00Z", **kwargs)  # type: ignore[arg-type]


def test_html_is_self_contained_and_escapes_outside_text(tmp_path: Path) -> None:
    report = report_of_four()
    html = to_html(report)
    (tmp_path / "report.html").write_text(html)
    parser = Collector()
    parser.feed(html)
    assert "script" not in parser.tags  # the plan's name is text, not a tag
    assert HOSTILE.replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;") in html
    assert not re.search(r'(src|href)="(https?:|//)', html)  # nothing loaded from elsewhere
    assert "<svg" in html and "</svg>" in html
    text = "".join(parser.text)
    for item in report.plans:  # every bucket's arithmetic, the verdict, the diagnosis
        for bucket in item.estimate.buckets:
            assert bucket.formula.splitlines()[0] in text
        assert item.diagnosis.explanation in text
    assert f"VRAM Planner {__version__}" in text and "Cheapest that fits" in text


def test_the_lesson_numbers_reach_the_report() -> None:
    report = build_report([("7B", lesson_plan(Method.FULL, Precision.BF16))], generated="t")
    markdown = to_markdown(report)
    # The lesson: 16-bit full fine-tuning of the 7B model with Adam, 81.9 GB of the four buckets.
    assert "81.9 GB" in markdown and "13.4 GB" in markdown and "53.6 GB" in markdown


def test_markdown_escapes_and_marks_differences() -> None:
    markdown = to_markdown(report_of_four())
    assert "\\<script\\>" in markdown and "\\| \\*bold\\*" in markdown
    assert "| **Method** |" in markdown and "| Optimizer |" in markdown  # differs / same
    header = next(line for line in markdown.splitlines() if line.startswith("| | "))
    assert header.count(" | ") == 4  # four plans


def test_csv_one_figure_per_line_and_no_formula_injection() -> None:
    report = report_of_four()
    rows = list(csv.reader(io.StringIO(to_csv(report))))
    assert rows[0] == ["plan", "section", "item", "value", "unit", "arithmetic"]
    totals = [r for r in rows if r[2] == "nvidia-smi / lesson sum (judged)"]  # a lesson plan among them (h55ux)
    assert [int(r[3]) for r in totals] == [round(p.estimate.total_bytes) for p in report.plans]
    assert all(not r[0].startswith(("=", "+", "-", "@")) for r in rows)
    assert any(r[1] == "arithmetic" and "×" in r[5] for r in rows)
    assert rows[-1][:4] == ["", "tool", "VRAM Planner", __version__]


def test_chart_has_one_bar_per_plan_per_phase() -> None:
    report = report_of_four()
    svg = chart_svg(report.comparison)
    assert svg.count("<title>") >= len(report.comparison.phase_names()) * 3
    assert "card capacity" in svg and "<script" not in svg
    # The method by its label (core.inputs.METHOD_LABELS), not its value "qlora".
    wanted = "Llama 3.1 8B · QLoRA (quantised base) · NVIDIA GeForce RTX 3060"
    assert caption(report.plans[1].estimate).startswith(wanted)


def test_gib_unit() -> None:
    report = build_report([("7B", lesson_plan(Method.FULL, Precision.BF16))], unit="GiB", generated="t")
    assert "76.3 GiB" in to_markdown(report)  # 81.9e9 bytes / 2**30 = 76.275


def test_md_cell() -> None:
    assert md_cell("a|b\nc") == "a\\|b c"


def test_cli_report_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from core.advice.compare import compare

    path = tmp_path / "four.json"
    save_comparison(compare(four_plans()), path)  # type: ignore[arg-type]
    for flag, suffix in (("--html", "html"), ("--md", "md"), ("--csv", "csv")):
        out = tmp_path / f"r.{suffix}"
        assert main(["report", str(path), flag, str(out), "--title", "Four"]) == 0
        assert out.stat().st_size > 1000
    assert "<h1>Four</h1>" in (tmp_path / "r.html").read_text()
    single = tmp_path / "one.json"
    save_plan(lesson_plan(Method.LORA, Precision.BF16), single)
    assert main(["report", str(single), "--md", str(tmp_path / "one.md")]) == 0
    assert (tmp_path / "one.md").read_text().startswith("# Plan: one")


def test_cli_pdf_without_the_gui_writer_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from core.cli import report as cli_report

    single = tmp_path / "one.json"
    save_plan(lesson_plan(Method.LORA, Precision.BF16), single)
    saved = list(cli_report._pdf_writer)
    cli_report._pdf_writer.clear()
    try:
        assert main(["report", str(single), "--pdf", str(tmp_path / "x.pdf")]) == 2
    finally:
        cli_report._pdf_writer[:] = saved
    err = capsys.readouterr().err
    assert "Qt" in err and err.count("\n") == 1 and not (tmp_path / "x.pdf").exists()


def test_a_multi_gpu_report_carries_each_collective_with_its_arithmetic() -> None:
    from core.plan import Strategy
    from core.presets import plan_for_model

    plan = plan_for_model("llama-3.1-8b", method=Method.FULL).on_gpus(16, Strategy.FSDP)
    report = build_report([("FSDP on 16", plan)], generated="t")
    terms = report.plans[0].estimate.compute.comm_terms
    assert len(terms) == 2  # the FSDP2 all-gather and reduce-scatter
    markdown, html = to_markdown(report), to_html(report)
    for term in terms:
        assert f"| {md_cell(term.label)} | {duration(term.seconds)} |" in markdown  # "262 ms"
        assert term.formula in html


def _serves_but_cannot_train() -> Plan:
    # Full fine-tuning of Llama 3.1 8B needs ~16 bytes a parameter (the lesson's accounting:
    # weights, gradients, Adam's two states): far over an 80 GB card; serving its bf16 weights
    # (16 GB) with a few requests fits.
    # default_plan(): Llama 3.1 8B on one A100 80GB.
    return default_plan().with_method(Method.FULL).with_workload(micro_batch=16, seq_len=4096)


def test_a_serving_report_judges_and_draws_serving(tmp_path: Path) -> None:
    """Issue 26 item 11: a report exported in inference mode was the training report."""
    plan = _serves_but_cannot_train()
    est = estimate(plan)
    serving, training = est.judgement(Mode.INFERENCE), est.judgement(Mode.TRAINING)
    assert serving.fits and not training.fits  # the case that shows which one a report states
    report = build_report([("p", plan)], mode=Mode.INFERENCE, generated="2026-12-02T00:00:00Z")
    assert report.mode is Mode.INFERENCE and report.plans[0].diagnosis.mode is Mode.INFERENCE
    md = to_markdown(report)
    assert f"{VERDICT_LABELS[serving.verdict]}: {memory(serving.total_bytes)}" in md
    assert est.inference.summary_formula in md and est.inference.speed.formula in md
    assert "Time and cost" not in md and VERDICT_LABELS[training.verdict] + ":" not in md
    html = to_html(report)
    assert "Memory when serving" in html and "served by" in html and "Phases" not in html
    rows = list(csv.reader(io.StringIO(to_csv(report))))  # a cell may hold a multi-line formula, quoted
    arithmetic = [row for row in rows if row[1] == "arithmetic"]
    assert sum(int(row[3]) for row in arithmetic) == pytest.approx(serving.total_bytes, abs=len(arithmetic))
    svg = chart_svg(report.comparison)
    assert svg.count("<rect") >= len(est.inference.buckets)


def test_cli_report_and_compare_take_the_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan_path = tmp_path / "p.json"
    save_plan(_serves_but_cannot_train(), plan_path)
    out = tmp_path / "r.md"
    assert main(["report", str(plan_path), "--md", str(out), "--mode", "inference"]) == 0
    assert "Serving speed" in out.read_text() and "Time and cost" not in out.read_text()
    assert main(["compare", str(plan_path), "--json", "--mode", "inference"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "inference" and doc["cheapest_fit"] == "p"
    verdict = next(row for row in doc["rows"] if row["key"] == "verdict")
    assert verdict["values"] == ["Fits"]


def test_an_inference_report_counts_the_requests_as_the_window_does() -> None:
    # One request on an H100 with room for dozens (Hugging Face generate: a static batch). The
    # report read "62 of 1 requests at once"; the window says "1 request × 4,096 tokens · at most
    # N requests of 4,096 tokens at once" (gui/panels/verdict.py, core InferenceEstimate.limits_sentence).
    plan = default_plan().with_hardware(gpu="h100-sxm").with_inference(concurrent=1)
    est = estimate(plan)
    room = est.inference.max_concurrent
    assert room > 1
    text = to_markdown(build_report([("p", plan)], mode=Mode.INFERENCE, generated="2026-12-02T00:00:00Z"))
    line = next(
        line
        for line in text.splitlines()
        if line.startswith(VERDICT_LABELS[est.judgement(Mode.INFERENCE).verdict] + ":")
    )
    assert f"{room:,} of 1 requests" not in line
    context = plan.inference.context
    assert f"1 request × {context:,} tokens, at most {room:,} requests of {context:,} tokens at once" in line


def test_plan_numbers_stay_off_the_capacity_dashes() -> None:
    # docs/GUI.md, 2026-12-04: the four plans' numbers sat on the capacity dashes (the SVG's
    # font-size is 11: a number's box runs from its baseline up 11 px).
    svg = chart_svg(report_of_four().comparison)
    dashes = [
        (float(m[1]), float(m[2]), float(m[3]))
        for m in re.finditer(
            r'<line x1="([\d.]+)" x2="([\d.]+)" y1="([\d.]+)" y2="[\d.]+" stroke="[^"]+" '
            r'stroke-width="2" stroke-dasharray',
            svg,
        )
    ][:-1]  # the legend's sample comes last
    numbers = [
        (float(m[1]), float(m[2]))
        for m in re.finditer(r'<text x="([\d.]+)" y="([\d.]+)" text-anchor="middle">\d</text>', svg)
    ]
    assert len(numbers) == len(dashes) > 0
    for (x, baseline), (left, right, dash) in zip(numbers, dashes, strict=True):
        assert left < x < right
        assert not baseline - 11 - 1 <= dash <= baseline + 1, (x, baseline, dash)


def _drawn_capacities(svg: str) -> list[float]:
    """The GB each plan's capacity dash stands at, read back through the value axis's gridline labels."""
    ticks = [
        (float(m[1]), float(m[2].replace(",", "")))
        for m in re.finditer(r'y="([\d.]+)" text-anchor="end">([\d,]+)<', svg)
    ]
    (y0, v0), (y1, v1) = ticks[0], ticks[1]
    dashes = [
        float(m[1])
        for m in re.finditer(
            r'<line x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)" y2="[\d.]+" stroke="[^"]+" stroke-width="2" stroke-dasharray',
            svg,
        )
    ][:-1]  # the legend's sample comes last
    return [v0 + (y - (y0 - 4)) * (v1 - v0) / (y1 - y0) for y in dashes]  # a label sits 4 px below its line


def test_the_capacity_dash_is_the_verdict_s_card_in_each_mode() -> None:
    # Seen in the window at stop 65 (tests/gui/test_chart.py): on an Apple GPU llama.cpp is judged against Metal's
    # working set (96 GiB = 103.1 GB: the catalogue's memory_bytes for apple-m4-max-128gb, 3/4 of 128 GB), while
    # Estimate.capacity_bytes is PyTorch's MPS limit (the 128 GiB of RAM, 137.4 GB) that a training step meets.
    plan = default_plan().with_hardware(gpu="apple-m4-max-128gb").with_inference(engine=Engine.LLAMACPP)
    for mode in (Mode.INFERENCE, Mode.TRAINING):
        comparison = compare([("M4 Max", plan)], mode)
        judged = comparison.plans[0].estimate.judgement(mode)
        drawn = _drawn_capacities(chart_svg(comparison))  # one dash per phase group
        assert drawn and all(d == pytest.approx(judged.capacity_bytes / GB, abs=0.5) for d in drawn), drawn
    assert comparison.plans[0].estimate.judgement(Mode.INFERENCE).capacity_bytes == 96 * GiB


def test_money_in_the_table_carries_its_plans_currency() -> None:
    # The Compute tab says "$3.70 at $2.50 per GPU-hour" for the default plan (the catalogue's A100 price is a US
    # list price: core.training.compute.Compute.currency); the report's table printed "2.50" and "3.70" bare.
    # A typed price is the user's own currency and stays bare.
    catalogue = default_plan()
    typed = catalogue.with_hardware(price_per_gpu_hour=2.0)
    report = build_report([("catalogue", catalogue), ("typed", typed)], "Prices")
    cost = estimate(catalogue).compute
    assert cost.currency == "$"
    html, markdown = to_html(report), to_markdown(report)
    for text in (f"${cost.price_per_gpu_hour:,.2f}", f"${cost.cost:,.2f}"):
        assert text in html and text in markdown
    assert "| 2.00 |" in markdown  # the typed price, bare


def count_layouts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The widths core.files.report._layout is called for from now on, its last answer forgotten."""
    calls: list[int] = []
    layout = report_module._layout

    def counted(comparison: Any, width: int) -> Any:
        calls.append(width)
        return layout(comparison, width)

    monkeypatch.setattr(report_module, "_layout", counted)
    monkeypatch.setattr(report_module, "_LAST_LAYOUT", [None], raising=False)  # as after another comparison
    return calls


def test_the_chart_is_laid_out_once_for_a_comparison_and_a_width(monkeypatch: pytest.MonkeyPatch) -> None:
    # The Compare tab's redraw asks chart_least_height, then chart_svg_sized, which draws with chart_svg: each laid
    # the legend and the phase names out again (core.files.report._layout, 3 times a redraw before).
    calls = count_layouts(monkeypatch)
    comparison = report_of_four().comparison
    least = report_module.chart_least_height(comparison, 500)
    svg = report_module.chart_svg_sized(comparison, "GB", 500, least)
    assert calls == [500]
    assert f'height="{least}"' in svg  # drawn at the least height it asked for: the same layout
    report_module.chart_svg_sized(comparison, "GB", 620, 400)  # a new width: laid out for it
    assert calls == [500, 620]
    again = report_of_four().comparison  # a new comparison (the tab makes one for each change), same width
    report_module.chart_svg_sized(again, "GB", 620, 400)
    assert calls == [500, 620, 620]
    assert report_module.chart_svg(again, width=620) == chart_svg(report_of_four().comparison, width=620)

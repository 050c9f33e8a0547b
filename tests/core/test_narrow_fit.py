"""One "fits" everywhere (branch h60one): a fit whose estimate's range reaches past the usable memory is a
*narrow* fit (core.verdict), never the answer of a search where a fit with margin exists, and labelled so
in every place that says whether a plan fits.

The plan: QLoRA on Gemma 2 9B, micro-batch 4 × 1,024 tokens (the preset's sequence), on one GPU. On an
RTX PRO 6000 Blackwell its nvidia-smi figure is 89.6 GB of 92.4 GB usable (103 GB less 10 % headroom)
while its range reaches 93.0 GB: a narrow fit, at $2.20 (RunPod's $1.57 per GPU-hour, resources/gpus.json).
On a B200 (its 173 GB usable) it fits with margin, at $3.62. All figures are `vramplan estimate --model
gemma-2-9b --method qlora --micro-batch 4 --gpu rtx-pro-6000-blackwell` (and `--gpu b200`) at this branch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.advice import remedies
from core.advice.compare import compare
from core.advice.diagnosis import diagnose
from core.advice.fit import cards_for, cheapest_fit
from core.advice.remedies import RemedyKind
from core.cli.app import main
from core.estimate import estimate
from core.files.planfile import save
from core.files.report import build_report, to_html, to_markdown
from core.plan import Method, Plan
from core.presets import plan_for_model
from core.verdict import NARROW_LABEL, Verdict, judge

NARROW_CARD = "rtx-pro-6000-blackwell"
MARGIN_CARD = "b200"


def _gemma_qlora(gpu: str = NARROW_CARD) -> Plan:
    return plan_for_model("gemma-2-9b").with_method(Method.QLORA).with_workload(micro_batch=4).with_hardware(gpu=gpu)


def test_a_narrow_fit_is_named_and_labelled_by_the_one_rule() -> None:
    # Made-up figures: 100 GB card, 10 % headroom -> 90 GB usable; a total of 85 GB whose range reaches 95 GB.
    narrow = judge(85e9, 100e9, 0.1, low_bytes=80e9, high_bytes=95e9)
    assert narrow.verdict is Verdict.FITS and narrow.fits_narrowly and not narrow.fits_with_margin
    assert narrow.label == NARROW_LABEL == "Fits narrowly" and narrow.fit_rank == 1
    assert narrow.narrow_words() == (
        "fits with 5.00 GB to spare, but the estimate's range reaches 95.0 GB, past the 90.0 GB usable, "
        "into the headroom"
    )
    wide = judge(85e9, 100e9, 0.1, low_bytes=80e9, high_bytes=89e9)  # the range's top within the 90 GB usable
    assert wide.label == "Fits" and wide.fit_rank == 0 and wide.narrow_words() == ""
    assert judge(95e9, 100e9, 0.1).fit_rank == 2  # over the headroom: no fit at all


def test_the_cheapest_card_that_fits_fits_with_margin_where_one_does() -> None:
    """Before: the card finder's cheapest was the RTX PRO 6000 ($2.20), which fits narrowly, while
    `vramplan fewest-gpus` would have called it no margin; now the B200 ($3.62) that fits with margin."""
    rows = cards_for(_gemma_qlora(), counts=(1,))
    by_card = {r.gpu.id: r for r in rows}
    narrow, margin = by_card[NARROW_CARD], by_card[MARGIN_CARD]
    assert narrow.fits and narrow.fits_narrowly and narrow.label == "Fits narrowly"
    assert margin.fits and not margin.fits_narrowly and margin.cost > narrow.cost
    best = cheapest_fit(rows)
    assert best is not None and best.gpu.id == MARGIN_CARD
    # No fit with margin among the rows: the cheapest narrow fit is the answer, and reads so (below, the CLI).
    fallback = cheapest_fit(r for r in rows if not r.estimate.judgement().fits_with_margin)
    assert fallback is not None and fallback.gpu.id == NARROW_CARD


def test_the_fit_command_labels_a_narrow_fit_and_its_json_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gemma.json"
    save(_gemma_qlora(), path)
    assert main(["fit", str(path), "--max-count", "1"]) == 0
    out = capsys.readouterr().out
    pro = next(line for line in out.splitlines() if "RTX PRO 6000 Blackwell" in line and "Max-Q" not in line)
    assert "Fits narrowly" in pro and not pro.startswith("*")
    assert "* cheapest that fits: NVIDIA B200 (HGX, 1000 W) × 1" in out
    assert main(["fit", str(path), "--max-count", "1", "--json"]) == 0
    rows = {r["gpu"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[NARROW_CARD]["verdict"] == "fits" and rows[NARROW_CARD]["fits_with_margin"] is False
    assert rows[MARGIN_CARD]["fits_with_margin"] is True


def test_estimate_json_and_text_say_a_narrow_fit(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "gemma-2-9b", "--method", "qlora", "--micro-batch", "4", "--gpu", NARROW_CARD]
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "fits" and data["fits_with_margin"] is False
    assert data["range_bytes"][1] > data["usable_bytes"]
    assert main(args) == 0
    assert "Fits narrowly: 89.6 GB of 103 GB" in capsys.readouterr().out


def test_the_comparison_and_its_report_prefer_the_fit_with_margin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    named = [("pro", _gemma_qlora()), ("b200", _gemma_qlora(MARGIN_CARD))]
    comparison = compare(named)
    assert comparison.cheapest_fit() == 1 and not comparison.cheapest_fits_narrowly()
    verdicts = next(r for r in comparison.rows() if r.key == "verdict").values
    assert verdicts == ("Fits narrowly", "Fits")
    report = build_report(named, generated="2026-12-06T00:00:00Z")
    markdown = to_markdown(report)
    assert "**Cheapest that fits: 2. b200**" in markdown
    assert "Fits narrowly: 89.6 GB of 103 GB" in markdown  # the narrow plan's verdict line
    assert "Cheapest that fits: 2. b200" in to_html(report)
    # Narrow fits only (the same plan twice): the cheapest of them is the answer, said so, here and in
    # `vramplan compare`.
    narrow_only = [named[0], ("pro again", named[0][1])]
    alone = compare(narrow_only)
    assert alone.cheapest_fit() == 0 and alone.cheapest_fits_narrowly()
    assert "**Cheapest that fits narrowly (none fits with margin): 1. pro**" in to_markdown(build_report(narrow_only))
    paths = [tmp_path / "pro.json", tmp_path / "b200.json"]
    for path, (_, plan) in zip(paths, named, strict=True):
        save(plan, path)
    assert main(["compare", *map(str, paths), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cheapest_fit"] == "b200" and data["cheapest_fit_with_margin"] is True
    assert main(["compare", str(paths[0]), str(paths[0])]) == 0
    assert "cheapest that fits narrowly (none fits with margin): 1. pro" in capsys.readouterr().out


def test_the_bigger_card_remedy_prefers_a_card_that_fits_with_margin() -> None:
    """On an RTX 3060 12GB the plan is out of memory. Before, the bigger card was the RTX PRO 6000 (the cheapest
    per GPU-hour that fits, $1.57), a narrow fit; now the cheapest that fits with margin (an H200)."""
    plan = _gemma_qlora("rtx-3060-12gb")
    result = remedies._bigger_card(plan)
    assert result is not None
    changed, title = result
    assert changed.hardware.gpu != NARROW_CARD and estimate(changed).judgement().fits_with_margin
    assert title.startswith("A bigger card: NVIDIA H200")


def test_a_narrow_remedy_reads_fits_narrowly_in_the_report() -> None:
    """QLoRA on Llama 3.1 8B on an RTX 3060 12GB: the more-GPUs remedy, 32 GPUs, fits by 0.05 GB while its range
    reaches 12.6 GB, past the 11.6 GB usable (tests/core/test_remedies.py). Its report row said "fits by less than
    the estimate's uncertainty"; it now says core.verdict's word, as the remedy list's badge does."""
    plan = plan_for_model("llama-3.1-8b").with_method(Method.QLORA).with_hardware(gpu="rtx-3060-12gb")
    listed = diagnose(plan).remedies
    (more,) = [r for r in listed if r.kind is RemedyKind.MORE_GPUS]
    assert more.fits_narrowly and more.label == "Fits narrowly" and not more.fits
    # Listed after every change that fits with margin and before every one that does not fit (it was last,
    # after "Loss computed in chunks", borderline).
    at = listed.index(more)
    assert all(r.judgement.fits_with_margin for r in listed[:at])
    assert all(not r.judgement.fits for r in listed[at + 1 :]) and at < len(listed) - 1
    markdown = to_markdown(build_report([("a", plan)], generated="2026-12-06T00:00:00Z"))
    assert f"{more.title}: " in markdown
    row = next(line for line in markdown.splitlines() if more.title in line)
    assert ", fits narrowly; " in row


def test_the_changes_put_together_fit_with_margin_where_a_set_does() -> None:
    """LoRA on Llama 3.2 3B, micro-batch 4, on an RTX 4090: no single change fits. The cheapest set was
    "Loss computed in chunks + Frozen base loaded in bf16", a narrow fit; a set one step dearer (the micro-batch
    1 × 4 as well) fits with margin, and is now the one offered (found by trying catalogue models × methods × cards,
    branch h60one)."""
    plan = plan_for_model("llama-3.2-3b").with_method(Method.LORA).with_hardware(gpu="rtx-4090")
    plan = plan.with_workload(micro_batch=4)
    combination = diagnose(plan).combination
    assert combination is not None and combination.judgement.fits_with_margin and combination.label == "Fits"
    kinds = {r.kind for r in combination.remedies}
    assert {RemedyKind.MICRO_BATCH} <= kinds and len(kinds) == 3


def test_the_smaller_model_is_the_largest_that_fits_with_margin() -> None:
    """Full fine-tuning of Llama 3.1 8B, micro-batch 4, on an H100 SXM: out of memory. Llama 3.2 3B fits narrowly
    (75.8 GB of 77.0 GB usable, its range to 83.7 GB) and was the smaller model offered; Llama 3.2 1B fits with
    margin (35.9 GB, range to 39.6 GB) and is now (figures: estimate() at branch h60one)."""
    plan = plan_for_model("llama-3.1-8b").with_method(Method.FULL).with_hardware(gpu="h100-sxm")
    plan = plan.with_workload(micro_batch=4)
    result = remedies._smaller_model(plan)
    assert result is not None
    changed, title = result
    assert title == "Smaller model: Llama 3.2 1B" and estimate(changed).judgement().fits_with_margin

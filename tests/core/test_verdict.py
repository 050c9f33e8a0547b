"""One verdict rule for training and serving, and a name that says what "over headroom" is."""

from __future__ import annotations

from core.catalogue import find_model
from core.estimate import estimate
from core.plan import Hardware, Method, Plan, Precision
from core.presets import lesson_plan
from core.verdict import VERDICT_LABELS, VERDICT_MEANINGS, Mode, Verdict, judge


def test_the_lesson_7b_on_an_a100_80gb_is_over_headroom_not_tight() -> None:
    """Issue 13 item 6: 81.9 GB (the lesson) on an 80 GB A100 must not read as "fits, barely"."""
    est = estimate(lesson_plan(Method.FULL, Precision.BF16))
    assert est.total_bytes == 81.9e9  # the lesson's sum
    assert est.usable_bytes < est.total_bytes <= est.capacity_bytes
    assert est.verdict is Verdict.OVER_HEADROOM
    assert VERDICT_LABELS[est.verdict] == "Over headroom"
    assert "headroom you asked" in VERDICT_MEANINGS[est.verdict]
    judged = est.judgement()
    assert judged.margin_bytes < 0 < judged.capacity_margin_bytes


def test_judge_bands() -> None:
    # A 100-byte card with 10 % headroom: 90 usable.
    assert judge(90, 100, 0.1).verdict is Verdict.FITS
    assert judge(91, 100, 0.1).verdict is Verdict.OVER_HEADROOM
    assert judge(100, 100, 0.1).verdict is Verdict.OVER_HEADROOM
    assert judge(101, 100, 0.1).verdict is Verdict.OOM


def test_a_fit_with_margin_holds_the_estimates_whole_range_within_the_usable_memory() -> None:
    # A 100-byte card with 10 % headroom: 90 usable. A total of 85 whose range reaches 95 fits (the range's top
    # is under the capacity) by 5, less than the 10 the range rises above it: no margin (branch h59qtp).
    narrow = judge(85, 100, 0.1, low_bytes=80, high_bytes=95)
    assert narrow.verdict is Verdict.FITS and not narrow.fits_with_margin
    assert judge(85, 100, 0.1, low_bytes=80, high_bytes=90).fits_with_margin  # its top at the usable 90
    assert judge(85, 100, 0.1).fits_with_margin  # a total without a range: the total is its top
    assert not judge(91, 100, 0.1).fits_with_margin  # over headroom is no fit at all


def test_serving_is_judged_by_the_same_rule_with_three_states() -> None:
    plan = Plan(model=find_model("llama-3.1-8b").spec, hardware=Hardware(gpu="l4"))
    seen = set()
    for concurrent in range(1, 40):
        est = estimate(plan.with_inference(concurrent=concurrent, context=8192))
        inf = est.inference
        expected = judge(inf.total_bytes, est.capacity_bytes, plan.hardware.headroom)
        assert inf.verdict is expected.verdict and est.judgement(Mode.INFERENCE) == expected
        assert inf.fits == expected.fits and inf.margin_bytes == expected.margin_bytes
        seen.add(inf.verdict)
    # The serving verdict has the over-headroom band too; no borderline: an engine's total
    # carries no range (the range is the training step's, from real-GPU figures). Would-not-start is an engine
    # refusing a context past the model's limit (tests/core/test_one_answer_would_not_start.py): 8,192 is within 8B's.
    assert seen == set(Verdict) - {Verdict.BORDERLINE, Verdict.WONT_START}

"""The limits use the one "fits" rule (core.verdict, branch h60one; task h62lim): each training limit is the
largest value that fits with margin, a larger one that fits only narrowly noted in core.verdict's words, in
the Diagnosis' limits, its memory curves and the smaller-micro-batch and shorter-sequence remedies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.advice.diagnosis import diagnose, max_micro_batch, max_sequence, memory_curve, report
from core.advice.remedies import RemedyKind
from core.advice.request import AdviceKind, DiagnosisRequest
from core.cli.app import main
from core.cli.fewest import SHOWN_REMEDIES
from core.estimate import estimate
from core.files.planfile import save
from core.plan import Plan
from core.presets import default_plan, plan_for_model
from core.verdict import NARROW_LABEL, NO_MARGIN_FALLBACK, limit_parts, limit_words


def _too_big() -> Plan:
    # The start-up plan (LoRA on Llama 3.1 8B, A100 80GB) at micro-batch 17: over the card, and the largest
    # micro-batch the verdict calls FITS (13, solved on this tree) fits narrowly, its range past the usable.
    return default_plan().with_workload(micro_batch=17)


def test_each_limit_is_the_largest_with_margin_and_the_largest_at_all() -> None:
    plan = _too_big()
    limits = diagnose(plan).limits
    for axis, step in (("micro_batch", 1), ("seq_len", 1)):
        at_all, margin = limits.largest(axis), limits.with_margin(axis)
        assert 0 < margin < at_all  # the two differ for this plan: the case the task is about

        def judged(n: int, axis: str = axis) -> object:
            return estimate(plan.with_workload(**{axis: n})).judgement()

        assert judged(at_all).fits and not judged(at_all + step).fits
        assert judged(margin).fits_with_margin and not judged(margin + step).fits_with_margin
        assert judged(at_all).fits_narrowly  # what the banner would call NARROW_LABEL
        answer, note = limits.parts(axis)
        assert answer == margin and note == f"{at_all:,} {NARROW_LABEL.lower()}"
    assert limits.largest("micro_batch") == max_micro_batch(plan)
    assert limits.with_margin("micro_batch") == max_micro_batch(plan, high=max_micro_batch(plan), margin=True)
    assert limits.largest("seq_len") == max_sequence(plan)
    # Solved on this tree: 12 fits with margin, 13 narrowly (the verdict's FITS, its range top past 77.3 GB).
    assert limits.words("micro_batch") == "12 (13 fits narrowly)"


def test_the_words_of_a_limit_come_from_core_verdict() -> None:
    narrow = NARROW_LABEL.lower()
    assert limit_words(12, 13) == f"12 (13 {narrow})"
    assert limit_words(12, 12) == "12"
    assert limit_words(6_144, 8_192, " tokens") == f"6,144 tokens (8,192 {narrow})"
    assert limit_words(0, 2) == f"2 ({narrow}; {NO_MARGIN_FALLBACK})"
    assert limit_words(0, 0) == "" and limit_parts(0, 0) == (0, "")


@pytest.mark.parametrize(("with_margin", "at_all"), [(3, 2), (-1, 4)])
def test_a_limit_with_margin_past_the_limit_at_all_is_refused(with_margin: int, at_all: int) -> None:
    with pytest.raises(ValueError, match="lies between 0 and the limit at all"):
        limit_parts(with_margin, at_all)


def test_the_curves_mark_the_limit_with_margin() -> None:
    plan = _too_big()
    diagnosis_report = report(DiagnosisRequest(plan))
    limits = diagnosis_report.diagnosis.limits
    for axis, curve in diagnosis_report.curves.items():
        assert curve.crossing == limits.largest(axis) and curve.margin_crossing == limits.with_margin(axis)
        assert curve.parts == limits.parts(axis)
        alone = memory_curve(plan, axis)  # solved by itself: the same two limits
        assert (alone.crossing, alone.margin_crossing) == (curve.crossing, curve.margin_crossing)


@pytest.mark.parametrize("kind", [RemedyKind.MICRO_BATCH, RemedyKind.SHORTER_SEQUENCE])
def test_a_smaller_workload_remedy_fits_with_margin_where_a_value_does(kind: RemedyKind) -> None:
    """Before: the remedies took the largest value that fits at all, "Micro-batch 13 × 6" badged "Fits
    narrowly", though micro-batch 12 fits with margin (and a sequence of 1,600 where 1,408 does)."""
    remedy = next(r for r in diagnose(_too_big()).remedies if r.kind is kind)
    assert remedy.judgement.fits_with_margin and remedy.label != NARROW_LABEL


def test_a_narrow_fit_is_not_advised_as_a_plain_fit() -> None:
    """Audit (task h62lim): the Diagnosis' note for a fit read "The plan fits: nothing needs to change." for a
    plan the banner calls "Fits narrowly"; the advice now says which (core.advice.request.AdviceKind)."""
    at_all = max_micro_batch(_too_big())
    narrow = diagnose(default_plan().with_workload(micro_batch=at_all))
    assert narrow.judgement.fits_narrowly and narrow.advice.kind is AdviceKind.FITS_NARROWLY
    wide = diagnose(default_plan().with_workload(micro_batch=max_micro_batch(_too_big(), at_all, margin=True)))
    assert wide.judgement.fits_with_margin and wide.advice.kind is AdviceKind.FITS


def test_fewest_gpus_on_a_one_per_machine_card_says_which_change_fits_narrowly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Audit (task h62lim): `vramplan fewest-gpus` on a laptop card listed the diagnosis' changes that fit
    with no word for the one that fits narrowly (LoRA on Llama 3.2 3B, RTX 3080 Laptop 16 GB: found by a
    search over the catalogue's one-per-machine cards; its third change, ZeRO-Offload, fits narrowly)."""
    plan = plan_for_model("llama-3.2-3b").with_hardware(gpu="rtx-3080-laptop-16gb").with_workload(micro_batch=1)
    save(plan, str(tmp_path / "plan.json"))
    narrow = [r.title for r in [r for r in diagnose(plan).remedies if r.fits][:SHOWN_REMEDIES] if r.fits_narrowly]
    assert narrow  # the case: a change among those listed fits narrowly
    assert main(["fewest-gpus", "--plan", str(tmp_path / "plan.json"), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["remedies"]
    assert f"{narrow[0]} ({NARROW_LABEL.lower()})" in listed


def test_a_remedy_with_margin_under_half_of_what_fits_is_not_offered() -> None:
    """Merge review of h62lim: the golden plan gen/plan-000 (Llama 3.1 8B on an RTX 4070, context parallel 4,
    stored in tests/data/golden) fits a 384-token sequence only narrowly; with margin the search
    fell to 40 tokens, and the remedy offered "Sequence length 40". Under half of what fits, the narrow fit
    (badged) is offered instead. Since the optimizer-per-stack table (core.optimizer_stacks) that stored plan, AdamW
    8-bit under ZeRO-Offload, is refused (DeepSpeed's CPU step builds no bitsandbytes optimizer); it is read here
    with AdamW, which ZeRO-Offload builds. Since DoRA's one-layer forward transient (branch h78remeas, measured)
    the stored all-linear DoRA fits no sequence with margin on that card, so the case is read as LoRA on the same
    targets: 512 offered, 536 at all, 80 with margin (448, 464 and 0 since h95nccl, below). Its serving KV
    cache is read as fp8 (below)."""
    import gzip

    import tests.golden as golden
    from core.files.planfile import plan_from_dict

    records = (json.loads(line) for line in gzip.decompress(golden.PLANS.read_bytes()).decode().splitlines())
    stored = next(r["plan"] for r in records if r["id"] == "gen/plan-000")
    assert stored["plan"]["optimizer"] == "adamw-8bit"  # the case: refused as stored
    stored["plan"]["optimizer"] = "adamw"
    assert stored["plan"]["method"] == "dora"
    stored["plan"]["method"] = "lora"
    # Since h94kvq SGLang's --kv-cache-dtype takes no integer format in any release (its recorded choices, 0.4.0 -
    # 0.5.23), so the stored int4 KV cache is refused; read with fp8, a format SGLang takes (the training case is
    # the same: the KV format is the serving section's).
    assert stored["plan"]["inference"]["kv_dtype"] == "int4"
    stored["plan"]["inference"]["kv_dtype"] = "fp8"
    plan = plan_from_dict(stored)
    remedy = next(r for r in diagnose(plan).remedies if r.kind is RemedyKind.SHORTER_SEQUENCE)
    shorter = remedy.plan.workload.seq_len
    at_all = max_sequence(plan, high=plan.workload.seq_len - 1)
    with_margin = max_sequence(plan, high=at_all, margin=True)
    # Since h95nccl counts a communicator per process group (world, pipeline, context-parallel and data-parallel
    # groups on this ZeRO-2 x PP 2 x CP 4 layout, core.training.device.nccl_groups) no sequence fits with margin on
    # the 12 GB card (464 at all, 0 with margin): still under half, and the narrow fit is offered, not nothing.
    assert 2 * with_margin < at_all  # the case: the margin value is under half
    assert shorter > with_margin and remedy.fits_narrowly

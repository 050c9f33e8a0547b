"""Texts an estimate writes when first read (Compute.formula, ComputePart.formula, FlopTerm.formula): the same
text whenever it is read, after a pickle too (the window's worker process sends estimates), never another plan's.
The golden digests (tests/golden.py, DERIVED) pin every such text to the one written at once before."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest

from core.catalogue import find_model
from core.estimate import estimate
from core.format import duration, scientific
from core.plan import Accounting, Method, Plan, Workload
from core.training.compute import Compute
from core.training.efficiency import coefficient


def _plan(method: Method = Method.FULL, accounting: Accounting = Accounting.DETAILED) -> Plan:
    return Plan(
        model=find_model("llama-3.2-1b").spec, accounting=accounting, workload=Workload(micro_batch=2, seq_len=1024)
    ).with_method(method)


def test_the_texts_are_written_at_their_first_reading_and_kept() -> None:
    compute = estimate(_plan()).compute
    assert "formula" not in vars(compute)  # not written by the estimate
    text = compute.formula
    assert vars(compute)["formula"] is text and compute.formula is text  # written once, then read back
    for part in compute.compute_parts:
        assert "formula" not in vars(part)
        assert part.formula is part.formula
    for term in compute.flop_terms:
        assert "formula" not in vars(term)
        assert term.formula is term.formula


def test_a_text_says_its_own_figures() -> None:
    for method in (Method.FULL, Method.LORA, Method.PROMPT_TUNING):
        compute = estimate(_plan(method)).compute
        # The run's FLOPs and the step's seconds as _formula writes them (this Compute's figures, not another's).
        assert f"tokens = {scientific(compute.flops)};" in compute.formula
        assert f"= {duration(compute.step_seconds)}" in compute.formula
        for part in compute.compute_parts:
            name = part.formula.split(" (", 1)[1].split(")", 1)[0]  # "… × k (feature)": the feature it times
            ideal = part.seconds / coefficient(name)
            assert part.formula.startswith(f"{duration(ideal)} at the ideal rate × {coefficient(name):.3g} ({name})")
        block = next(t for t in compute.flop_terms if t.label == "block matmuls")
        assert "W = " in block.formula
    lesson = estimate(_plan(accounting=Accounting.LESSON)).compute
    assert [t.formula for t in lesson.flop_terms] == ["6 · P"]  # the lesson's rule for full fine-tuning


def test_the_texts_survive_a_pickle_read_or_not() -> None:
    for read_first in (False, True):
        est = estimate(_plan(Method.LORA))
        expected = estimate(_plan(Method.LORA)).compute
        if read_first:
            assert est.compute.formula
        back = pickle.loads(pickle.dumps(est))
        assert back.compute.formula == expected.formula
        assert [p.formula for p in back.compute.compute_parts] == [p.formula for p in expected.compute_parts]
        assert [t.formula for t in back.compute.flop_terms] == [t.formula for t in expected.flop_terms]


def test_two_plans_do_not_share_a_text() -> None:
    # Plans that differ only deep inside (the token budget, the LoRA rank): each text is its own plan's.
    base = _plan(Method.LORA)
    budget = base.with_changes(workload=replace(base.workload, tokens=base.workload.tokens * 3))
    rank = base.with_changes(lora=replace(base.lora, rank=base.lora.rank * 8))
    texts = [estimate(one).compute for one in (base, budget, rank)]
    assert texts[0].formula != texts[1].formula  # three times the tokens and the steps
    assert f"tokens = {scientific(texts[1].flops)};" in texts[1].formula
    adapters = [next(t for t in c.flop_terms if t.label == "LoRA adapters").formula for c in texts]
    assert adapters[0] == adapters[1] != adapters[2]  # r·(in + out) summed over the targets: 8 × the rank


def test_a_compute_built_without_its_formula_says_so() -> None:
    compute = replace(estimate(_plan()).compute, _formula_of=None)
    assert isinstance(compute, Compute)
    with pytest.raises(ValueError, match="without its formula"):
        _ = compute.formula

"""The evaluation forward an estimate works out when first read (Breakdown.evaluation, RankMemory.evaluation and
evaluation_bytes): not built by estimate() itself, the same phase whenever and wherever it is read (after a pickle
too: the window's worker process sends estimates), each rank's and each plan's own. The golden digests
(tests/golden.py, DERIVED) pin every such figure to the one built at once before."""

from __future__ import annotations

import pickle

from core.breakdown import BucketKey, StepPhase
from core.catalogue import find_model
from core.estimate import estimate
from core.plan import Accounting, Method, Plan, Workload


def _plan(method: Method = Method.LORA, accounting: Accounting = Accounting.DETAILED, eval_batch: int = 0) -> Plan:
    workload = Workload(micro_batch=2, seq_len=1024, eval_batch=eval_batch)
    return Plan(model=find_model("llama-3.2-1b").spec, accounting=accounting, workload=workload).with_method(method)


def test_the_estimate_leaves_the_evaluation_to_its_first_reading() -> None:
    for accounting in Accounting:
        rank = estimate(_plan(accounting=accounting)).ranks[0]
        assert "evaluation" not in vars(rank) and "evaluation_bytes" not in vars(rank)
        assert rank._breakdown is not None and "evaluation" not in vars(rank._breakdown)
        phase = rank.evaluation
        assert phase is not None and phase.kind is StepPhase.EVALUATION
        assert rank.evaluation is phase  # kept once read
        overhead = rank._breakdown.evaluation_overhead
        assert overhead is not None
        assert rank.evaluation_bytes == phase.allocated_bytes + overhead.bytes
        assert all(b.key is not BucketKey.GRADIENTS for b in phase.buckets)  # no backward: no gradients held


def test_the_evaluation_is_the_plans_own() -> None:
    # A larger eval batch holds more of one block's tensors and logits at a time; the step itself is unchanged.
    small, large = estimate(_plan()), estimate(_plan(eval_batch=16))
    assert large.total_bytes == small.total_bytes
    assert large.evaluation_bytes > small.evaluation_bytes
    assert estimate(_plan(eval_batch=2)).evaluation_bytes == small.evaluation_bytes  # 0: the training micro-batch


def test_the_evaluation_survives_a_pickle_read_or_not() -> None:
    for accounting in Accounting:
        expected = estimate(_plan(accounting=accounting)).evaluation_bytes
        for read_first in (False, True):
            est = estimate(_plan(accounting=accounting))
            if read_first:
                assert est.evaluation_bytes == expected
            back = pickle.loads(pickle.dumps(est))
            assert back.evaluation_bytes == expected
            phase = back.ranks[0].evaluation
            assert phase is not None and phase.allocated_bytes <= expected


def test_each_rank_reads_its_own_evaluation() -> None:
    # Four pipeline stages: the loss's logits only on the last, so the ranks' evaluations differ.
    plan = _plan(Method.FULL).with_input("parallel.gpus_per_node", 4).with_input("parallel.pipeline_parallel", 4)
    ranks = estimate(plan).ranks
    assert len(ranks) > 1
    phases = [r.evaluation for r in ranks]
    assert all(p is not None for p in phases)
    assert len({r.evaluation_bytes for r in ranks}) > 1
    assert estimate(plan).evaluation_bytes == max(r.evaluation_bytes for r in ranks)

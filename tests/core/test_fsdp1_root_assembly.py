"""FSDP1's root unit assembles its flat gradient at the very end of the backward
(core.parallel.state._fsdp1_root_assembly, core.training.detailed._root_assembled).

Sources: torch 2.13.0 wheel (git cf30153c) ``torch/distributed/fsdp/_flat_param.py``
``FlatParamHandle._get_unflat_views_unaligned`` / ``_get_unflat_views_aligned`` (the parameters are
``torch.split`` views of the flat parameter) and ``prepare_gradient_for_backward`` (an unsharded
``.grad`` from ``no_sync`` is kept); pytorch/pytorch 002ca671 ``torch/csrc/autograd/FunctionsManual.cpp``
``split_with_sizes_backward`` (``at::cat`` of every view's gradient into a new tensor);
``torch/csrc/autograd/functions/accumulate_grad.h`` ``accumulateGrad`` (steals it as ``.grad``, or adds it
in place into an existing one). At the cat the rank holds the views' gradients (the whole root: embedding,
final norm, head) and their concatenation (the whole root again) beside what it already held, the root
still gathered (``_post_backward_hook`` reshards it only after AccumulateGrad). Measured on CPU with that
wheel (FSDP1, one rank, gloo, a 4,096 × 256 embedding and head, no_sync over three micro-batches): live
bytes at the root's ``aten.cat`` are parameters + accumulated gradients + 2.0 roots (4.078 roots in all,
1.031 of them the parameters, 1.031 the accumulated gradients).

Llama 3.1 8B (meta-llama/Llama-3.1-8B config.json: hidden 4096, vocabulary 128256, 32 layers, untied
head): 8,030,261,248 parameters, the root 2 × 128,256 × 4,096 + 4,096 = 1,050,677,248, a block
(8,030,261,248 - 1,050,677,248) / 32 = 218,112,000; float32 without a mixed-precision policy (4 B)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.breakdown import BucketKey, Phase, StepPhase
from core.catalogue import find_model
from core.estimate import estimate
from core.plan import GradSync, Hardware, Method, Plan, Strategy, Workload
from tests.scripts import load_script

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "realgpu"

WHOLE = 8_030_261_248
ROOT = 2 * 128_256 * 4_096 + 4_096
BLOCK = (WHOLE - ROOT) // 32
ASSEMBLED = "FSDP1 root:"


def _plan(wrap: bool, accum: int, method: Method = Method.FULL) -> Plan:
    entry = find_model("llama-3.1-8b")
    plan = Plan(
        model=entry.spec,
        model_id=entry.id,
        method=method,
        checkpointing=True,
        workload=Workload(micro_batch=1, seq_len=256, grad_accum=accum),
        hardware=Hardware(gpu="a100-80gb-sxm"),
    ).on_gpus(4, Strategy.FSDP)
    return plan.with_parallel(fsdp1_wrap=wrap, grad_sync=GradSync.AUTO)


def _end(plan: Plan) -> Phase:
    return next(p for p in estimate(plan).worst.phases if p.kind is StepPhase.BACKWARD_END)


def _assembled(plan: Plan) -> list[float]:
    return [
        t.bytes
        for p in estimate(plan).worst.phases
        for b in p.buckets
        for t in b.terms
        if t.label.startswith(ASSEMBLED)
    ]


def test_under_no_sync_the_root_assembles_beside_every_accumulated_gradient() -> None:
    end = _end(_plan(wrap=True, accum=4))
    assert "split_with_sizes" in end.description
    # Accumulated unsharded gradients of the whole model, the views' gradients, their cat: no block's
    # reduction buffers (no_sync reduces nothing in those micro-batches).
    assert end.bucket(BucketKey.GRADIENTS).bytes == pytest.approx((WHOLE + 2 * ROOT) * 4.0)
    weights = [t.label for t in end.bucket(BucketKey.WEIGHTS).terms]
    assert any(label.startswith("root unit gathered") for label in weights)


def test_with_one_micro_batch_the_root_shard_is_not_there_yet_and_the_last_block_reduces() -> None:
    end = _end(_plan(wrap=True, accum=1))
    # Sharded gradients less the root's shard, the views' and their cat, one block's gradient and its
    # reduce-scatter input.
    expected = WHOLE * 4.0 / 4 - ROOT * 4.0 / 4 + 2 * ROOT * 4.0 + 2 * BLOCK * 4.0
    assert end.bucket(BucketKey.GRADIENTS).bytes == pytest.approx(expected)


def test_fsdp2_and_a_frozen_root_assemble_nothing() -> None:
    assert _assembled(_plan(wrap=True, accum=4)) == [pytest.approx(ROOT * 4.0)] * 2
    assert _assembled(_plan(wrap=False, accum=4)) == []  # FSDP2: one leaf per parameter, no split
    assert _assembled(_plan(wrap=True, accum=4, method=Method.LORA)) == []


def test_litgpts_fsdp1_full_fine_tune_assembles_its_root() -> None:
    """litgpt 5895df1 ``litgpt/finetune/full.py``: ``FSDPStrategy(auto_wrap_policy={Block})`` (torch FSDP1)."""
    mapping = load_script(FOLDER / "mapping.py", "realgpu_mapping_root_assembly")
    figures = {f["id"]: f for f in json.loads((FOLDER / "memory_figures.json").read_text())["figures"]}
    plan = mapping.map_figure(figures["litgpt-hub-gemma-2b-full"]).plan  # type: ignore[attr-defined]
    assert plan.parallel.fsdp1_wrap
    assert "split_with_sizes" in _end(plan).description

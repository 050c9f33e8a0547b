"""Megatron-LM's CI memory readings (benchmarks/realgpu/megatron_ci.py) as plans and as scored figures.

Every number is NVIDIA/Megatron-LM d98e8a64's: the recipes are the cases' model_config.yaml, the
readings their golden_values_dev_dgx_h100.json ("mem-allocated-bytes" after the last iteration,
"mem-max-allocated-bytes" the run's peak), written by megatron/training/training.py training_log on
the last rank (megatron/training/global_vars.py: the tensorboard writer is rank world_size - 1's).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from core.breakdown import BucketKey, StepPhase
from core.estimate import estimate
from core.plan import Attention, MegatronCeFusion, PipelineSchedule, Preset, Stack, Strategy
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "benchmarks" / "realgpu"
SOURCE = "megatron-lm-ci-golden-values"
TP4 = "megatron-ci-gpt3_7b_tp4_pp1_memory_speed-between-steps"
PP4 = "megatron-ci-gpt3_7b_tp1_pp4_memory_speed-peak"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(FOLDER / "memory.py", "realgpu_memory_megatron_ci")


@pytest.fixture(scope="module")
def figures() -> dict[str, dict]:  # type: ignore[type-arg]
    corpus = json.loads((FOLDER / "memory_figures.json").read_text())
    return {f["id"]: f for f in corpus["figures"] if f["source_id"] == SOURCE}


def test_every_case_is_two_readings_pinned_to_the_commit(figures: dict[str, dict]) -> None:  # type: ignore[type-arg]
    assert len(figures) >= 24
    for figure in figures.values():
        assert figure["metric"] in ("allocated", "resident")
        assert figure["location"]["commit"] == "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
        assert str(int(figure["value"])) in figure["quote"].replace(".0", "")
    assert figures[TP4]["value"] == 20663519232.0  # gpt3_7b_tp4_pp1_memory_speed, "25": 20663519232.0


def test_a_case_maps_to_megatrons_plan(bench: ModuleType, figures: dict[str, dict]) -> None:  # type: ignore[type-arg]
    mapped = bench.map_figure(figures[PP4])  # type: ignore[attr-defined]
    plan = mapped.plan
    assert mapped.scored and mapped.reading_rank == "last"
    assert plan.stack is Stack.MEGATRON and plan.preset is Preset.PURE_BF16
    assert plan.parallel.strategy is Strategy.ZERO1  # --use-distributed-optimizer
    # --pipeline-model-parallel-size 4, --num-layers-per-virtual-pipeline-stage 1: 32 / 4 / 1 = 8 chunks
    assert plan.parallel.pipeline_parallel == 4 and plan.parallel.virtual_stages == 8
    assert plan.parallel.schedule is PipelineSchedule.INTERLEAVED
    # --global-batch-size 8, --micro-batch-size 1, DP = 8 / 4 = 2: 4 micro-batches
    assert plan.workload.grad_accum == 4 and plan.workload.micro_batch == 1
    assert plan.attention is Attention.FLASH and not plan.parallel.sequence_parallel
    # --vocab-size 131073 padded to a multiple of 128 x TP (megatron/training/vocab_utils.py): 131,200 at TP 1
    assert plan.model.vocab_size == 131200 and plan.model.learned_positions == 8192


def test_the_7b_state_between_steps_is_megatrons_hand_count(bench: ModuleType, figures: dict[str, dict]) -> None:  # type: ignore[type-arg]
    # TP 4 x DP 2, distributed optimizer, float32 gradient buffer: per rank, the bf16 weights (2 B), the
    # whole float32 buffer (4 B), the float32 main shard (4 / 2 B) and Adam's two float32 moments (8 / 2 B)
    # = 12 B a parameter of the rank's share (core.parallel.state._megatron), and the workspaces kept for the
    # process: PyTorch's cuBLAS workspace per handle (2 × 32 MiB) and Transformer Engine's (32 MiB + 1 KiB).
    mapped = bench.map_figure(figures[TP4])  # type: ignore[attr-defined]
    rank = bench.reading_rank(mapped, estimate(mapped.plan))  # type: ignore[attr-defined]
    step = next(p for p in rank.phases if p.kind is StepPhase.OPTIMIZER)
    params = step.bucket(BucketKey.WEIGHTS).bytes / 2  # the rank's bf16 parameters
    workspaces = 2 * 32 * 2**20 + 32 * 2**20 + 1024
    assert rank.workspace_bytes == workspaces
    assert bench.between_steps(rank, mapped.plan) == pytest.approx(params * 12 + workspaces, rel=1e-3)  # type: ignore[attr-defined]
    # The published reading is within 2.5 % of it (20.36 GB estimated, 20.66 GB read).
    row = bench.score_one(mapped, 0.0)  # type: ignore[attr-defined]
    assert abs(row.error_pct) < 2.5


def test_a_megatron_run_with_a_fused_cross_entropy_maps_to_the_native_fused_loss(
    bench: ModuleType,
    figures: dict[str, dict],  # type: ignore[type-arg]
) -> None:
    # --cross-entropy-loss-fusion with Megatron-LM's default implementation, native (arguments.py
    # rejects te at d98e8a64); scored since branch h22y (tests/core/test_megatron_ce_fusion.py).
    fused = [f for f in figures.values() if f["recipe"]["fused_ce_or_liger"]]
    assert len(fused) == 2
    for figure in fused:
        mapped = bench.map_figure(figure)  # type: ignore[attr-defined]
        assert mapped.expressible and mapped.scored
        assert mapped.plan.megatron_ce_fusion is MegatronCeFusion.NATIVE

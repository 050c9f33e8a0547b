"""torchtitan pull requests' own training logs as held-out real-GPU memory evidence (issue 22 item 6, "validate on
evidence you did not tune on"; docs/REAL_GPU_MEMORY.md, "torchtitan's pull-request logs, held out (branch h83evid)").

Four sources, each a set of PR descriptions kept verbatim in pytorch/torchtitan's squash commits: Llama 3.1 8B on
8 x H100 96GB (#822, #820, #833, #996, Feb-Mar 2025), Qwen3 32B on 8-64 of them (#1690, Sept 2025) and MoE runs
(#2679: Qwen3-30B-A3B built by transformers 5 under FSDP2 + EP 8; #1610: torchtitan's DeepSeek-V3 16B): the torchtitan
team's logs, so torchtitan's family for leave-one-source-out. And NVIDIA's DeepEP integration (#2107: DeepSeek-V3 671B
on 512 H100s, FSDP 64 x EP 32 x PP 8, routing forced balanced), a family of its own. All held out of every fit.
"""

from __future__ import annotations

import pytest

from core.inputs import FsdpUnits
from tests.core.memory_corpus import FOLDER, assert_held_out, assert_rejected_with_why, corpus, recorded_figures
from tests.scripts import load_script

LLAMA = "torchtitan-pr-logs-llama3-8b-2025"
QWEN32 = "torchtitan-qwen3-32b-pr-2025-09"
MOE = "torchtitan-moe-pr-logs-2025-2026"
LLAMA_SCORED = (
    "tt822-llama31-8b-reshard-default",
    "tt822-llama31-8b-reshard-always",
    "tt822-llama31-8b-reshard-never",
    "tt822-llama31-8b-model-init",
    "tt996-llama31-8b-baseline",
    "tt996-llama31-8b-chunked-ce",
    "tt820-llama31-8b-float8-rowwise",
    "tt820-llama31-8b-float8-tensorwise",
    "tt833-llama31-8b-float8-fsdp-fp8-allgather-force-recompute",
    "tt833-llama31-8b-float8-fsdp-fp8-allgather-no-force-recompute",
)
# PR #820's run with abs() in the per-op SAC save list: the bug that PR fixes, recorded, not comparable.
LLAMA_BUG = "tt820-llama31-8b-float8-rowwise-abs-saved"
QWEN32_ONE_HOST = ("tt1690-qwen3-32b-compile-fsdp8-lbs2", "tt1690-qwen3-32b-fsdp8-lbs1", "tt1690-qwen3-32b-fsdp8-lbs2")
QWEN32_HOSTS = (
    "tt1690-qwen3-32b-fsdp16-lbs4",
    "tt1690-qwen3-32b-fsdp8-tp4-lbs16",
    "tt1690-qwen3-32b-fsdp4-tp8-lbs16",
    "tt1690-qwen3-32b-fsdp4-tp8-lbs32",
    "tt1690-qwen3-32b-fsdp8-tp8-lbs32",
)
QWEN32_BOUNDARIES = (
    "tt1690-qwen3-32b-fsdp16-max-lbs",
    "tt1690-qwen3-32b-fsdp8-tp4-max-lbs",
    "tt1690-qwen3-32b-fsdp4-tp8-max-lbs",
    "tt1690-qwen3-32b-fsdp8-tp8-max-lbs",
)
MOE_SCORED = ("tt2679-qwen3-30b-a3b-hf-ep8-step1", "tt2679-qwen3-30b-a3b-hf-ep8-step500")
MOE_MISSING = "tt1610-deepseek-v3-16b-ep8"  # torchtitan's DeepSeek-V3 16B flavor: no catalogue model
DEEPEP = "torchtitan-deepep-pr-2025-12"
DEEPEP_ALLTOALL = "tt2107-deepseek-v3-671b-512xh100-alltoall"
DEEPEP_MISSING = "tt2107-deepseek-v3-671b-512xh100-deepep"  # DeepEP's dispatch: no plan setting outside Megatron


def _plans(source: str) -> dict[str, object]:
    mapping = load_script(FOLDER / "mapping.py", "realgpu_torchtitan_prs_plans")
    return {f["id"]: mapping.map_figure(f).plan for f in corpus()["figures"] if f["source_id"] == source}


@pytest.fixture(scope="module")
def rows() -> dict[str, object]:
    bench = load_script(FOLDER / "memory.py", "realgpu_torchtitan_prs_rows")
    return {r.mapped.id: r for r in bench.run().rows}


def test_the_logs_are_recorded_as_published() -> None:
    for source in (LLAMA, QWEN32, MOE, DEEPEP):
        for figure in recorded_figures(source):
            assert figure["location"]["url"].startswith("https://github.com/pytorch/torchtitan/pull/"), figure["id"]
            if figure["metric"] == "boundary":
                # The PR's table: the largest local batch that ran, the next one tried ran out of memory.
                assert figure["unit"] == "micro_batch" and "OOM" in figure["quote"], figure["id"]
                assert figure["derived"]["first_failing"] > figure["value"], figure["id"]
                continue
            # torchtitan's DeviceMemoryMonitor: max_reserved_gib = reserved_bytes.all.peak / 2**30, printed "%.2fGiB".
            assert figure["metric"] == "reserved" and figure["unit"] == "GiB", figure["id"]
            assert figure["value_bytes"] == round(figure["value"] * 2**30), figure["id"]
            assert f"{figure['value']:.2f}GiB" in figure["quote"], figure["id"]


def test_held_out_and_scored() -> None:
    assert_held_out(LLAMA, "torchtitan", len(LLAMA_SCORED) + 1, LLAMA_SCORED, "realgpu_tt_llama")
    assert_held_out(QWEN32, "torchtitan", 12, QWEN32_ONE_HOST + QWEN32_HOSTS + QWEN32_BOUNDARIES, "realgpu_tt_qwen32")
    mine = assert_held_out(MOE, "torchtitan", 3, MOE_SCORED, "realgpu_tt_moe")
    (deepseek,) = [m for m in mine if m.id == MOE_MISSING]
    assert deepseek.missing and "catalogue" in deepseek.missing[0]
    (bug,) = [f for f in recorded_figures(LLAMA) if f["id"] == LLAMA_BUG]
    assert bug["not_comparable_reason"]
    mine = assert_held_out(DEEPEP, "nvidia-torchtitan", 2, (DEEPEP_ALLTOALL,), "realgpu_tt_deepep")
    (deepep,) = [m for m in mine if m.id == DEEPEP_MISSING]
    assert deepep.missing and "DeepEP" in deepep.missing[0]


def test_the_plans_are_the_recipes_the_commits_run() -> None:
    llama = _plans(LLAMA)
    # PR #822: fsdp_reshard_after_forward "never" keeps every block gathered; "default" / "always" reshard.
    assert not llama["tt822-llama31-8b-reshard-never"].parallel.reshard_after_forward  # type: ignore[attr-defined]
    assert llama["tt822-llama31-8b-reshard-default"].parallel.reshard_after_forward  # type: ignore[attr-defined]
    # PR #996's chunked_cross_entropy_loss (torchtitan e23bb707 components/loss.py): the plan's chunked loss;
    # run_train.sh at e23bb707 sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
    chunked = llama["tt996-llama31-8b-chunked-ce"]
    assert chunked.chunked_loss and "expandable_segments:True" in chunked.hardware.alloc_conf  # type: ignore[attr-defined]
    # PR #820's rowwise run: torchao's rowwise float8 recipe under compile.
    rowwise = llama["tt820-llama31-8b-float8-rowwise"]
    assert rowwise.float8.value == "rowwise" and rowwise.stack.value == "compile"  # type: ignore[attr-defined]
    # PR #833's command turns on FSDP2's float8 all-gather.
    assert llama["tt833-llama31-8b-float8-fsdp-fp8-allgather-force-recompute"].parallel.fsdp_float8_all_gather  # type: ignore[attr-defined]
    qwen = _plans(QWEN32)
    # d66b72a6 carves the embedding and [norm, output] into FSDP2 units (experiments/llama4/infra/parallelize.py).
    assert all(p.parallel.fsdp_units is FsdpUnits.CARVED for p in qwen.values())  # type: ignore[attr-defined]
    assert qwen["tt1690-qwen3-32b-compile-fsdp8-lbs2"].compiled_loss  # type: ignore[attr-defined]
    assert qwen["tt1690-qwen3-32b-fsdp4-tp8-lbs32"].parallel.tensor_parallel == 8  # type: ignore[attr-defined]
    moe = _plans(MOE)["tt2679-qwen3-30b-a3b-hf-ep8-step1"]
    # --parallelism.expert_parallel_degree 8 beside FSDP2 over the 8 ranks, Qwen3-30B-A3B's 128 experts.
    assert moe.parallel.expert_parallel == 8 and moe.model.num_experts == 128  # type: ignore[attr-defined]
    big = _plans(DEEPEP)[DEEPEP_ALLTOALL]
    # PR #2107's command: PP 8 Interleaved1F1B, local batch 16 cut into micro-batches of 1 (torchtitan d021aa9c
    # pipeline_parallel.py: n_microbatches = local_batch_size // pipeline_parallel_microbatch_size, default 1), two
    # stages a rank, EP 32 within FSDP 64.
    assert big.parallel.pipeline_parallel == 8 and big.parallel.schedule.value == "interleaved"  # type: ignore[attr-defined]
    assert big.parallel.virtual_stages == 2 and big.parallel.expert_parallel == 32  # type: ignore[attr-defined]
    assert (big.workload.micro_batch, big.workload.grad_accum) == (1, 16)  # type: ignore[attr-defined]


def test_the_llama_rows_are_within_the_reserved_target(rows: dict[str, object]) -> None:
    # memory.py on 2026-12-07 (branch h83evid): +1.9 ... +3.7 %, the chunked loss -6.1 %, the model build +0.1 %.
    for fid in LLAMA_SCORED:
        assert abs(rows[fid].error_pct) <= 10.0, (fid, rows[fid].error_pct)  # type: ignore[attr-defined]


def test_qwen3_32b_across_hosts_within_target_and_one_host_under(rows: dict[str, object]) -> None:
    # memory.py on 2026-12-07 (branch h83evid): the multi-host rows +1.9 ... +6.7 %; the one-host FSDP 8 rows -12.2,
    # -13.2, -16.3 % with the reserve judged at the allocated peak, the backward's end, while the reading is set
    # beside the loss with the reduce-scatter stream's cached gradients (branch h83evid's section). Since branch
    # h85resv the reserved peak is the largest moment of allocated + that cache: -8.6, -7.8, -3.6 %, still low
    # (docs/REAL_GPU_MEMORY.md "The reserved peak over every moment of the step").
    for fid in QWEN32_HOSTS:
        assert abs(rows[fid].error_pct) <= 10.0, (fid, rows[fid].error_pct)  # type: ignore[attr-defined]
    for fid in QWEN32_ONE_HOST:
        assert -10.0 < rows[fid].error_pct < 0.0, (fid, rows[fid].error_pct)  # type: ignore[attr-defined]
    for fid in QWEN32_BOUNDARIES:  # each predicted largest batch inside the PR's bracket [ran, first OOM - 1]
        assert rows[fid].error_pct == 0.0, (fid, rows[fid].predicted)  # type: ignore[attr-defined]


def test_deepseek_v3_671b_with_balanced_routing_is_within_target(rows: dict[str, object]) -> None:
    # PR #2107's 'Before' line, 60.18 GiB on rank 0 (the first stage): +0.2 % (memory.py on 2026-12-07, branch h83evid).
    assert abs(rows[DEEPEP_ALLTOALL].error_pct) <= 10.0  # type: ignore[attr-defined]


def test_the_moe_run_reads_low_once_routing_is_learnt(rows: dict[str, object]) -> None:
    # PR #2679's log: 56.95 GiB at step 1 (uniform routing from random weights, loss 12.38 = ln V), 78.57 GiB over
    # steps 491-500 on the same recipe. The plan's routing is balanced: +5.7 % and -23.4 % (memory.py, 2026-12-07).
    # Since branch h85resv the later window's reserved peak is the loss's backward with the last step's sharded
    # gradients cached (-17.1 %); step 1 follows no step, so it is scored without them (mapping.Mapped.first_step):
    # +5.7 % still.
    first, late = (rows[fid] for fid in MOE_SCORED)
    assert first.predicted < late.predicted  # type: ignore[attr-defined]
    assert abs(first.error_pct) <= 10.0 and -20.0 < late.error_pct < -10.0  # type: ignore[attr-defined]


def test_the_candidates_left_out_say_why() -> None:
    assert_rejected_with_why(
        "huggingface/trl examples/notebooks",
        "unslothai/notebooks at bdda2efc",
        "modelscope/ms-swift examples and docs",
        "axolotl-ai-cloud/axolotl examples at 067b021c",
        "NVIDIA-NeMo/Automodel PR #1948",
        "huggingface/trl PRs #6845 / #6846",
        "pytorch/torchtitan PR #2389",
        "PrimeIntellect-ai/prime-rl PRs #894 and #899",
        "NVIDIA-NeMo/Speech issue #14850",
        "foundation-model-stack/fms-acceleration scripts/benchmarks/refs/a100_80gb_moe.csv",
    )

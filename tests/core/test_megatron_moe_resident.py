"""What a Megatron-Core MoE rank keeps for the process (issue 22): Transformer Engine's grouped-GEMM
workspaces (plan setting ``moe_grouped_gemm``) and Megatron's global memory buffer.

Sources, read at the commits Megatron-LM's CI ran: NVIDIA/Megatron-LM d98e8a64 (megatron/core/utils.py
``GlobalMemoryBuffer``: one tensor per (name, dtype), replaced only by a larger request;
transformer/moe/token_dispatcher.py ``MoEAllGatherTokenDispatcher.token_dispatch``: the TP × EP
all-gather of the tokens ``use_global_buffer=True``; transformer_config.py: ``moe_token_dispatcher_type
= "allgather"``; tensor_parallel/layers.py: the sequence-parallel all-gather of a ColumnParallelLinear's
input; extensions/transformer_engine_spec_provider.py ``grouped_mlp_modules``: TEGroupedMLP under
--moe-grouped-gemm) and NVIDIA/TransformerEngine 4329ff84 (pytorch/cpp_extensions/gemm.py
``get_cublas_workspace(device, False, True)``: one 32 MiB + 1,024 B workspace per compute stream,
``tex.get_num_cublas_streams()`` = 4, common/util/multi_stream.cpp). The case: tests/functional_tests/
test_cases/moe/gpt3_mcore_te_tp2_pp1_te_8experts2parallel_overlap_grad_reduce_param_gather_groupedGEMM
(model_config.yaml: TP 2 with sequence parallelism, EP 2, 8 experts, micro-batch 4 × 1,024 tokens,
hidden 512, --moe-grouped-gemm; golden_values_dev_dgx_h100.json: 1,027,089,408 B allocated after the
last iteration)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from core.breakdown import BucketKey, StepPhase
from core.catalogue import find_model
from core.cli.app import main as cli_main
from core.estimate import estimate
from core.files import planfile
from core.files.launch import Target, export
from core.files.runconfig import loads_run_config, plan_from_run
from core.inputs import input_at
from core.plan import Parallelism, Plan, Preset, Stack, Strategy, Workload
from core.training.device import allocator_workspaces
from tests.scripts import load_script

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "realgpu"
CASE = "megatron-ci-gpt3_mcore_te_tp2_pp1_te_8experts2parallel_overlap_grad_reduce_param_gather_groupedGEMM"
TE_WORKSPACE = 32 * 2**20 + 1_024  # compute capability 9 (H100)
# The dispatcher gathers (1,024 / TP 2) × 4 tokens from each of the TP 2 × EP 2 ranks: 8,192 × 512 bf16.
DISPATCHER_BUFFER = 1_024 * 4 * 2 * 512 * 2  # 8,388,608 B


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(FOLDER / "memory.py", "realgpu_memory_megatron_moe")


@pytest.fixture(scope="module")
def case(bench: ModuleType) -> Plan:
    figures = json.loads((FOLDER / "memory_figures.json").read_text())["figures"]
    figure = next(f for f in figures if f["id"] == CASE + "-between-steps")
    plan = bench.map_figure(figure).plan
    assert plan is not None
    return plan


def _persistent(plan: Plan) -> list[tuple[str, float]]:
    phase = next(p for p in estimate(plan).worst.phases if p.kind is StepPhase.OPTIMIZER)
    return [(t.label, t.bytes) for t in phase.bucket(BucketKey.GRADIENTS).terms if "global memory buffer" in t.label]


def test_the_ci_case_runs_the_grouped_gemm_its_config_names(case: Plan) -> None:
    assert case.moe_grouped_gemm and case.stack is Stack.MEGATRON


def test_the_grouped_gemm_keeps_four_more_transformer_engine_workspaces(case: Plan) -> None:
    grouped = sum(t.bytes for t in allocator_workspaces(case))
    single = sum(t.bytes for t in allocator_workspaces(case.with_changes(moe_grouped_gemm=False)))
    assert grouped - single == 4 * TE_WORKSPACE == 134_221_824


def test_the_setting_matters_for_megatron_moe_plans_only(case: Plan) -> None:
    matters = input_at("moe_grouped_gemm").matters
    assert matters(case) and not matters(case.with_changes(stack=Stack.EAGER))
    eager = case.with_changes(stack=Stack.EAGER)
    assert allocator_workspaces(eager) == allocator_workspaces(eager.with_changes(moe_grouped_gemm=False))


def test_the_dispatchers_gathered_tokens_stay_in_megatrons_global_buffer(case: Plan) -> None:
    assert [b for _, b in _persistent(case)] == [DISPATCHER_BUFFER]
    # Without sequence parallelism and experts split there is no all-gather into it.
    alone = case.with_changes(
        parallel=replace(case.parallel, tensor_parallel=1, expert_parallel=1, sequence_parallel=False)
    )
    assert _persistent(alone) == []


def test_the_ci_cases_state_between_steps_is_read_within_one_percent(bench: ModuleType) -> None:
    # Published 1,027,089,408 B; -14.3 % before the two terms (0.88 GB: bf16 weights, the float32 gradient
    # buffer, the optimizer's shard, cuBLAS's and TE's one workspace).
    rows = {r.mapped.id: r for r in bench.run().rows}
    assert abs(rows[CASE + "-between-steps"].error_pct) < 1.0


def test_plan_files_keep_it_and_older_files_read_as_off(case: Plan) -> None:
    assert planfile.loads(planfile.dumps(case)).moe_grouped_gemm is True
    document = json.loads(planfile.dumps(case))
    del document["plan"]["moe_grouped_gemm"]
    assert planfile.loads(json.dumps(document)).moe_grouped_gemm is False


def test_the_megatron_bridge_config_carries_it_both_ways(case: Plan) -> None:
    for grouped in (True, False):
        plan = case.with_changes(moe_grouped_gemm=grouped)
        out = export(plan, Target.MEGATRON_BRIDGE)
        assert yaml.safe_load(out.text)["model"]["moe_grouped_gemm"] is grouped
        assert "method.moe_grouped_gemm" not in {u.field for u in out.unexpressed}
        run = loads_run_config(out.text.encode(), "run_config.yaml")
        assert run.settings.moe_grouped_gemm is grouped
        assert plan_from_run(run, case.with_changes(moe_grouped_gemm=not grouped)).moe_grouped_gemm is grouped


def test_the_command_line_sets_it(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "qwen3-30b-a3b", "--stack", "megatron", "--seq", "4096", "--json"]
    assert cli_main(args) == 0
    single = json.loads(capsys.readouterr().out)
    assert cli_main([*args, "--moe-grouped-gemm"]) == 0
    grouped = json.loads(capsys.readouterr().out)
    assert grouped["peak_bytes"] > single["peak_bytes"]


def test_a_dense_sequence_parallel_rank_keeps_its_output_layers_gathered_input() -> None:
    # Llama 3.1 8B (hidden 4,096) on TP 2 with sequence parallelism, 1 × 4,096 tokens: the output layer, Megatron's
    # ColumnParallelLinear, all-gathers its [s/TP, b, h] input into the buffer: 4,096 × 4,096 × 2 B.
    llama = find_model("llama-3.1-8b")
    plan = Plan(
        model=llama.spec,
        model_id=llama.id,
        preset=Preset.PURE_BF16,
        stack=Stack.MEGATRON,
        workload=Workload(micro_batch=1, seq_len=4_096),
        parallel=Parallelism(
            nodes=1, gpus_per_node=8, strategy=Strategy.ZERO1, tensor_parallel=2, sequence_parallel=True
        ),
    )
    assert [b for _, b in _persistent(plan)] == [4_096 * 4_096 * 2]
    assert _persistent(plan.with_changes(parallel=replace(plan.parallel, sequence_parallel=False))) == []

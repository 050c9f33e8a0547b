"""The plan's parallelism: GPU count, degrees, what the frameworks refuse, files and flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.catalogue import find_model
from core.cli.app import main
from core.errors import PlanError
from core.estimate import estimate
from core.files import planfile
from core.plan import Offload, Parallelism, PipelineSchedule, Strategy
from core.presets import plan_for_model

DATA = Path(__file__).resolve().parents[1] / "data"


def test_the_gpu_count_is_nodes_times_gpus_per_node_and_splits_into_degrees() -> None:
    par = Parallelism(nodes=4, gpus_per_node=8, tensor_parallel=4, pipeline_parallel=2)
    assert par.world_size == 32
    assert par.data_parallel == 4  # 32 ÷ (TP 4 × PP 2 × CP 1)


def test_degrees_that_do_not_divide_the_gpus_are_refused() -> None:
    with pytest.raises(PlanError, match=r"parallel\.tensor_parallel.*divides 8 GPUs"):
        Parallelism(gpus_per_node=8, tensor_parallel=3)


def test_virtual_stages_need_the_interleaved_schedule() -> None:
    with pytest.raises(PlanError, match="interleaved"):
        Parallelism(gpus_per_node=8, pipeline_parallel=2, virtual_stages=2)
    Parallelism(gpus_per_node=8, pipeline_parallel=2, virtual_stages=2, schedule=PipelineSchedule.INTERLEAVED)


# Llama 3.1 8B config.json: 32 attention heads, 8 KV heads, 32 layers.
def test_tensor_parallel_must_divide_the_kv_heads() -> None:
    plan = plan_for_model("llama-3.1-8b")
    assert plan.with_parallel(gpus_per_node=8, tensor_parallel=8).parallel.tensor_parallel == 8
    with pytest.raises(PlanError, match=r"divisor of the model's 8 KV heads"):
        plan.with_parallel(nodes=2, gpus_per_node=8, tensor_parallel=16)


def test_more_pipeline_chunks_than_layers_are_refused() -> None:
    plan = plan_for_model("llama-3.1-8b")
    with pytest.raises(PlanError, match="32 layers for 64 pipeline chunks"):
        plan.with_parallel(nodes=8, gpus_per_node=8, pipeline_parallel=64)


# Qwen3-14B config.json: 40 attention heads, 8 KV heads, 40 layers. vLLM refuses a TP that
# does not divide the attention heads (vllm/config/model.py verify_with_parallel_config) and
# splits the KV heads evenly or replicates them (linear.py QKVParallelLinear: divide(tp,
# kv) when TP ≥ the KV heads, divide(kv, tp) below; stored vllm-project/vllm snapshot).
def test_serving_tensor_parallel_must_split_the_heads_as_vllm_does() -> None:
    plan = plan_for_model("qwen3-14b")
    assert plan.with_inference(tensor_parallel=8).inference.tensor_parallel == 8
    with pytest.raises(PlanError, match=r"inference\.tensor_parallel.*divisor of the model's 40 attention heads"):
        plan.with_inference(tensor_parallel=3)
    with pytest.raises(PlanError, match=r"inference\.tensor_parallel.*multiple of the model's 8 KV heads"):
        plan.with_inference(tensor_parallel=5)  # divides 40 heads, not the 8 KV heads
    with pytest.raises(PlanError, match=r"inference\.tensor_parallel.*multiple of the model's 8 KV heads"):
        plan.with_inference(tensor_parallel=20)  # divides 40, but 20 is not a multiple of 8
    # Llama 3.1 8B: 32 heads, 8 KV heads; TP 16 replicates each KV head on two GPUs.
    assert plan_for_model("llama-3.1-8b").with_inference(tensor_parallel=16).inference.tensor_parallel == 16


def test_another_model_drops_a_serving_split_it_cannot_take() -> None:
    served = plan_for_model("qwen3-14b").with_inference(tensor_parallel=40)  # 40 heads, 8 KV: replicated ×5
    llama = find_model("llama-3.1-8b")  # 32 heads: 40 does not divide them
    assert served.on_model(llama.spec, llama.id).inference.tensor_parallel == 1


def test_serving_pipeline_needs_a_layer_per_stage() -> None:
    plan = plan_for_model("qwen3-14b")
    assert plan.with_inference(pipeline_parallel=40).inference.pipeline_parallel == 40
    with pytest.raises(PlanError, match=r"inference\.pipeline_parallel.*at most 40 stages"):
        plan.with_inference(pipeline_parallel=41)


def test_context_parallel_needs_the_sequence_in_two_cp_chunks() -> None:
    plan = plan_for_model("llama-3.1-8b").with_workload(seq_len=4100)
    with pytest.raises(PlanError, match=r"parallel\.context_parallel"):
        plan.with_parallel(gpus_per_node=8, context_parallel=4)  # 4100 is not a multiple of 8


def test_on_gpus_fills_nodes_of_eight_and_drops_degrees_that_no_longer_divide() -> None:
    plan = plan_for_model("llama-3.1-8b").with_parallel(gpus_per_node=8, tensor_parallel=8)
    sixteen = plan.on_gpus(16, Strategy.FSDP)
    assert (sixteen.parallel.nodes, sixteen.parallel.gpus_per_node, sixteen.parallel.tensor_parallel) == (2, 8, 8)
    two = plan.on_gpus(2)
    assert (two.world_size, two.parallel.tensor_parallel) == (2, 1)
    assert plan.on_gpus(6).parallel.nodes == 1  # not whole nodes: one node of six


def test_data_parallel_ranks_multiply_the_batch() -> None:
    plan = plan_for_model("llama-3.1-8b").with_workload(micro_batch=2, grad_accum=4)
    split = plan.with_parallel(nodes=2, gpus_per_node=8, tensor_parallel=4)
    assert split.effective_batch == 2 * 4 * 4  # 16 GPUs ÷ TP 4 = 4 data-parallel ranks


def test_a_version_3_file_moves_its_gpu_count_and_sharding_into_parallel() -> None:
    # Written by the version before this change (commit 38ff3bb): 8 GPUs, ZeRO-3.
    document = json.loads((DATA / "plans" / "v3_zero3_8gpu.json").read_text(encoding="utf-8"))
    assert document["version"] == 3 and document["plan"]["hardware"]["gpu_count"] == 8
    plan = planfile.plan_from_dict(document)
    assert (plan.world_size, plan.parallel.nodes, plan.parallel.strategy) == (8, 1, Strategy.ZERO3)
    assert plan.hardware.gpu == "h100-sxm"
    again = planfile.plan_from_dict(json.loads(planfile.dumps(plan)))
    assert again == plan


def test_a_version_3_file_without_sharding_becomes_ddp() -> None:
    document = json.loads((DATA / "plans" / "v3_zero3_8gpu.json").read_text(encoding="utf-8"))
    document["plan"]["hardware"]["sharding"] = "none"
    assert planfile.plan_from_dict(document).parallel.strategy is Strategy.DDP


def test_a_version_4_file_may_leave_out_the_frameworks_knobs() -> None:
    document = json.loads(planfile.dumps(plan_for_model("llama-3.1-8b")))
    document["plan"]["parallel"] = {"nodes": 2, "gpus_per_node": 8, "strategy": "fsdp"}
    plan = planfile.plan_from_dict(document)
    assert plan.parallel == Parallelism(nodes=2, gpus_per_node=8, strategy=Strategy.FSDP)


def _saved(tmp_path: Path, *args: str) -> Parallelism:
    out = tmp_path / "plan.json"
    assert main(["estimate", "--model", "llama-3.1-8b", *args, "--save", str(out), "--json"]) == 0
    return planfile.load(out).parallel


def test_cli_parallel_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    par = _saved(
        tmp_path,
        *("--nodes", "2", "--gpus-per-node", "8", "--strategy", "fsdp", "--tensor-parallel", "2"),
        *("--pipeline-parallel", "2", "--context-parallel", "2", "--offload", "optimizer"),
        *("--interconnect", "roce-400", "--no-reshard-after-forward", "--fsdp-param-dtype", "bf16"),
    )
    capsys.readouterr()
    assert (par.world_size, par.strategy, par.offload) == (16, Strategy.FSDP, Offload.OPTIMIZER)
    assert (par.tensor_parallel, par.pipeline_parallel, par.context_parallel, par.data_parallel) == (2, 2, 2, 2)
    assert (par.inter_link, par.reshard_after_forward) == ("roce-400", False)


def test_cli_old_flags_still_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    par = _saved(tmp_path, "--gpus", "4", "--sharding", "none")
    capsys.readouterr()
    assert (par.world_size, par.strategy) == (4, Strategy.DDP)


def test_cli_tensor_parallel_in_inference_mode_splits_the_served_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan.json"
    args = ["estimate", "--model", "llama-3.1-8b", "--mode", "inference", "--tp", "2", "--save", str(out), "--json"]
    assert main(args) == 0
    capsys.readouterr()
    plan = planfile.load(out)
    assert (plan.inference.tensor_parallel, plan.parallel.tensor_parallel) == (2, 1)


def test_cli_refuses_a_layout_the_model_cannot_take(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["estimate", "--model", "llama-3.1-8b", "--gpus-per-node", "8", "--tp", "3"])
    err = capsys.readouterr().err
    assert rc == 2 and "tensor_parallel" in err and "Traceback" not in err


def test_another_model_keeps_the_split_where_it_can_and_drops_it_where_it_cannot() -> None:
    plan = plan_for_model("llama-3.1-8b").on_gpus(8, Strategy.FSDP).with_parallel(tensor_parallel=2)
    # Qwen2.5 7B: 28 heads and 4 KV heads (config.json) take TP 2.
    qwen = find_model("qwen2.5-7b")
    assert plan.on_model(qwen.spec, qwen.id).parallel.tensor_parallel == 2
    # SmolLM2 360M: 15 heads and 5 KV heads cannot be split in two: one GPU per layer, same GPUs.
    smol = find_model("smollm2-360m")
    moved = plan.on_model(smol.spec, smol.id)
    assert (moved.parallel.tensor_parallel, moved.world_size, moved.parallel.strategy) == (1, 8, Strategy.FSDP)
    assert moved.model_id == "smollm2-360m"


def test_an_estimate_seen_from_one_rank_carries_that_ranks_figures() -> None:
    # Llama 3.1 70B on 16 GPUs in two pipeline stages: the first stage holds the embedding,
    # the last the head and the loss, so the two kinds of rank differ.
    plan = plan_for_model("llama-3.1-70b").on_gpus(16, Strategy.FSDP)
    est = estimate(plan.with_parallel(tensor_parallel=8, pipeline_parallel=2))
    assert len(est.ranks) == 2 and est.for_rank(None) is est and est.for_rank(est.worst_rank) is est
    other = 1 - est.worst_rank
    seen = est.for_rank(other)
    rank = est.ranks[other]
    assert (seen.buckets, seen.phases, seen.total_bytes, seen.verdict) == (
        rank.buckets,
        rank.phases,
        rank.total_bytes,
        rank.verdict,
    )
    assert seen.summary_formula == rank.summary_formula and seen.worst_rank == est.worst_rank
    assert est.for_rank(7) is est  # not one of its ranks

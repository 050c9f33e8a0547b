"""Hybrid sharded data parallel, HSDP (issue 24 item 4): the refusals, the memory split, the
all-reduce across replicas, the files.

The layout is IBM fms-fsdp's 7B row (foundation-model-stack/fms-fsdp@4ffb9bd README.md
"Training throughput benchmarks": "| 7b | HSDP | No AC | 2 | 3700 |", 128 A100s, 16 nodes of
8): FSDP1 ShardingStrategy.HYBRID_SHARD without a process group shards within a node and
all-reduces across nodes (torch/distributed/fsdp/_init_utils.py), so 16 replicas of 8. The
mechanism is PyTorch FSDP2's (pytorch/pytorch 8fc2039d, torch/distributed/fsdp/_fully_shard/
_fsdp_collectives.py foreach_reduce: reduce-scatter over the shard group, then
``dist.all_reduce(reduce_output, group=all_reduce_group)`` of the shard); torchtitan's degrees
(pytorch/torchtitan b5bcd76 torchtitan/distributed/parallel_dims.py: dp_replicate × dp_shard ×
cp × tp × pp = world, the "fsdp" mesh dp_shard × cp).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.dtypes import MpDtype
from core.errors import PlanError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.launch.accelerate import read_accelerate_config, read_accelerate_launch
from core.parallel.comm import CommTerm, plan_links, step_communication
from core.parallel.layout import layout
from core.params import param_counts
from core.plan import Parallelism, Plan, Strategy, Workload
from tests.core.planfile_compat import reload_and_without

LLAMA2_7B = find_model("llama-2-7b").spec


def _plan(replicas: int, nodes: int = 16, strategy: Strategy = Strategy.FSDP, accum: int = 1) -> Plan:
    return Plan(
        model=LLAMA2_7B,
        model_id="llama-2-7b",
        parallel=Parallelism(
            nodes=nodes,
            gpus_per_node=8,
            strategy=strategy,
            dp_replicate=replicas,
            fsdp_param_dtype=MpDtype.BF16,
            fsdp_reduce_dtype=MpDtype.BF16,  # fms-fsdp's bfSixteen policy (fms_fsdp/policies/mixed_precision.py)
        ),
        workload=Workload(micro_batch=2, seq_len=4096, grad_accum=accum),
    )


def _bucket(plan: Plan, key: BucketKey) -> float:
    return next(b.bytes for b in estimate(plan).buckets if b.key is key)


# ---- the refusals -------------------------------------------------------------------------
def test_hsdp_is_fsdps_and_zero3_or_ddp_are_refused() -> None:
    # PyTorch's hybrid sharding is FSDP1 HYBRID_SHARD / FSDP2 on a 2-D mesh; ZeRO++ hpZ is not it.
    for strategy in (Strategy.DDP, Strategy.ZERO1, Strategy.ZERO3):
        with pytest.raises(PlanError, match=r"^parallel\.dp_replicate: 16 .*1.*HSDP"):
            _plan(16, strategy=strategy)


def test_the_replicas_divide_dp_and_leave_a_shard_group() -> None:
    # torchtitan: dp_replicate · dp_shard · cp · tp · pp = world; a shard group of one is DDP.
    with pytest.raises(PlanError, match=r"a divisor of DP = 128"):
        _plan(3)
    with pytest.raises(PlanError, match=r"shard group of 2 or more.*DDP"):
        _plan(128)
    assert _plan(16).parallel.fsdp_shards == 8
    assert layout(_plan(16)).state_shards == 8


def test_fewer_gpus_drop_replicas_that_no_longer_divide() -> None:
    assert _plan(16).on_gpus(8).parallel.dp_replicate == 1
    assert _plan(16).on_gpus(64).parallel.dp_replicate == 16  # DP 64: shard groups of 4
    assert _plan(16).on_gpus(256, Strategy.DDP).parallel.dp_replicate == 1


# ---- the memory ---------------------------------------------------------------------------
def test_a_replica_holds_what_fsdp_over_its_shard_group_holds() -> None:
    # Parameters, gradients and optimizer state ÷ 8 (the shard group), not ÷ 128; the gathered
    # units are the same whole blocks: every bucket equals plain FSDP on one node of 8.
    hsdp, one_node = _plan(16), _plan(1, nodes=1)
    for key in (BucketKey.WEIGHTS, BucketKey.GRADIENTS, BucketKey.OPTIMIZER, BucketKey.ACTIVATIONS):
        assert _bucket(hsdp, key) == pytest.approx(_bucket(one_node, key), rel=1e-12)


def test_the_optimizer_state_is_sixteen_times_fsdps_over_all_128() -> None:
    # AdamW's two float32 moments of 6,738,415,616 parameters (the record's count), ÷ 8 vs ÷ 128.
    assert param_counts(_plan(1)).trainable == 6_738_415_616
    # (beside a few kB of per-tensor step counters, which every rank keeps whole)
    assert _bucket(_plan(16), BucketKey.OPTIMIZER) == pytest.approx(6_738_415_616 * 8 / 8, rel=1e-5)
    assert _bucket(_plan(16), BucketKey.OPTIMIZER) == pytest.approx(
        _bucket(_plan(1), BucketKey.OPTIMIZER) * 16, rel=1e-4
    )


# ---- the time -----------------------------------------------------------------------------
def _terms(plan: Plan) -> dict[str, CommTerm]:
    comm = step_communication(plan, param_counts(plan), 10.0, 1 / 3)
    return {t.label: t for t in comm.terms}


def test_gathers_stay_in_the_node_and_the_shard_is_all_reduced_across_nodes() -> None:
    terms = _terms(_plan(16, accum=4))
    gather = terms["FSDP2 parameter all-gather (forward + backward)"]
    reduce = terms["FSDP2 gradient reduce-scatter"]
    assert "8 GPUs over nvlink" in gather.formula and "8 GPUs over nvlink" in reduce.formula
    all_reduce = terms["HSDP gradient-shard all-reduce across replicas"]
    # The bf16 shard, 6,738,415,616 × 2 B ÷ 8, all-reduced (2(n−1)/n, n = 16) every micro-batch
    # (FSDP2 all-reduces every backward unless set_requires_all_reduce(False)).
    shard = 6_738_415_616 * 2 / 8
    assert all_reduce.bytes == pytest.approx(shard * 2 * 15 / 16 * 4)
    assert all_reduce.overlapped  # FSDP2's all_reduce_stream
    links = plan_links(_plan(16))
    assert f"1 per node × 16 nodes over {links.inter.id}" in all_reduce.formula


def test_one_replica_has_no_all_reduce_and_fsdp_is_unchanged() -> None:
    plain = _terms(_plan(1))
    assert not [label for label in plain if label.startswith("HSDP")]
    assert "128 GPUs" in plain["FSDP2 gradient reduce-scatter"].formula


# ---- the files ----------------------------------------------------------------------------
def test_a_plan_file_keeps_the_replicas_and_an_older_file_reads_as_one(tmp_path: Path) -> None:
    loaded, older = reload_and_without(_plan(16), tmp_path, "parallel", "dp_replicate")
    assert loaded == _plan(16)
    assert older == _plan(1)  # a file written before the field


def test_torchtitan_carries_the_replicas_and_the_others_list_them() -> None:
    titan = export(_plan(16), Target.TORCHTITAN)
    assert "data_parallel_replicate_degree = 16" in titan.text
    assert "data_parallel_shard_degree = -1" in titan.text  # world ÷ (R·cp·tp·pp) = 8
    assert "parallel.dp_replicate" not in {u.field for u in titan.unexpressed}
    trl = export(_plan(16), Target.TRL)
    assert "parallel.dp_replicate" in {u.field for u in trl.unexpressed}


def test_accelerate_writes_fsdp2_hsdp_as_its_parallelism_config_and_reads_it_back() -> None:
    # accelerate 16cb6eb8 parallelism_config.py: "dp_replicate_size > 1 and dp_shard_size > 1, we
    # obtain Hybrid Sharded Data Parallel (HSDP)"; the sizes' product is the process count (128).
    config = yaml.safe_load(export(_plan(16), Target.ACCELERATE).text)
    split = config["parallelism_config"]
    assert (split["parallelism_config_dp_replicate_size"], split["parallelism_config_dp_shard_size"]) == (16, 8)
    assert "parallel.dp_replicate" not in {u.field for u in export(_plan(16), Target.ACCELERATE).unexpressed}
    assert read_accelerate_config(export(_plan(16), Target.ACCELERATE).text)["parallel.dp_replicate"] == 16
    launch = export(_plan(4), Target.ACCELERATE_LAUNCH).text
    assert (
        "--use_parallelism_config --parallelism_config_dp_replicate_size 4 --parallelism_config_dp_shard_size 32"
        in launch
    )
    assert read_accelerate_launch(launch)["parallel.dp_replicate"] == 4


def test_accelerate_writes_fsdp1_hybrid_shard_only_for_one_node_per_shard_group() -> None:
    # fms-fsdp's 7B row ran FSDP1 HYBRID_SHARD: shard within a node of 8, one replica per node
    # (torch/distributed/fsdp/_init_utils.py _init_process_group_state_for_hybrid_shard: "we shard
    # across intra-node"). accelerate's FSDP1 plugin passes no process group, so only that split.
    fsdp1 = _plan(16).with_changes(parallel=replace(_plan(16).parallel, fsdp1_wrap=True))
    exported = export(fsdp1, Target.ACCELERATE)
    assert yaml.safe_load(exported.text)["fsdp_config"]["fsdp_reshard_after_forward"] == "HYBRID_SHARD"
    assert "parallelism_config" not in yaml.safe_load(exported.text)  # FSDP2's only (accelerate refuses it on FSDP1)
    assert read_accelerate_config(exported.text)["parallel.dp_replicate"] == 16
    kept = fsdp1.with_changes(parallel=replace(fsdp1.parallel, reshard_after_forward=False))
    assert yaml.safe_load(export(kept, Target.ACCELERATE).text)["fsdp_config"]["fsdp_reshard_after_forward"] == (
        "_HYBRID_SHARD_ZERO2"
    )
    # 4 replicas of 32 ranks span four nodes each: FSDP1's default groups cannot say it.
    wide = _plan(4).with_changes(parallel=replace(_plan(4).parallel, fsdp1_wrap=True))
    refused = export(wide, Target.ACCELERATE)
    why = {u.field: u.why for u in refused.unexpressed}
    assert "one node's 8 GPUs" in why["parallel.dp_replicate"]
    assert yaml.safe_load(refused.text)["fsdp_config"]["fsdp_reshard_after_forward"] == "FULL_SHARD"


# ---- the advice ---------------------------------------------------------------------------
def test_the_remedies_and_the_layouts_tried_keep_a_valid_plan() -> None:
    from core.advice.fit import candidate_layouts, layout_name
    from core.advice.remedies import _offload_optimizer

    assert layout_name(_plan(16)) == "HSDP (16 replicas)"
    tried = candidate_layouts(_plan(16), 128)
    assert tried[0].parallel.dp_replicate == 16  # the plan's own
    assert any(p.parallel.tensor_parallel == 8 for p in tried)  # TP 8 leaves DP 16: plain FSDP there
    moved = _offload_optimizer(_plan(16))
    assert moved is None or moved[0].parallel.dp_replicate == 1  # ZeRO-Offload: no HSDP replicas


def test_torchtitans_replicate_degree_beside_a_shard_degree_reads_as_hsdp() -> None:
    # torchtitan's own llama3_8b.toml (the fixture) with two replicas: FSDP2 with HSDP replicas.
    from core.files.runconfig import loads_run_config

    text = (Path(__file__).parent.parent / "data" / "runconfigs" / "torchtitan_llama3_8b.toml").read_text()
    text = text.replace("data_parallel_replicate_degree = 1", "data_parallel_replicate_degree = 2")
    config = loads_run_config(text.encode(), "hsdp.toml")
    assert config.settings.sharding == "fsdp"
    (note,) = [n for n in config.notes if "replicate" in n.source]
    assert note.value == 2 and "HSDP replicas" in note.source

"""The window's strategy choice and HSDP replicas (issue 24 item 4): HSDP is FSDP's
(FSDP1 ShardingStrategy.HYBRID_SHARD, FSDP2 fully_shard on a 2-D mesh), so choosing another
strategy in the Parallelism form drops the replicas to 1 instead of refusing the choice."""

from __future__ import annotations

from core.catalogue import find_model
from core.plan import Parallelism, Plan, Strategy
from gui.forms.parallel import _with_strategy


def _hsdp() -> Plan:
    # IBM fms-fsdp's 7B row: 16 nodes of 8, sharded within a node (16 replicas).
    par = Parallelism(nodes=16, gpus_per_node=8, strategy=Strategy.FSDP, dp_replicate=16)
    return Plan(model=find_model("llama-2-7b").spec, parallel=par)


def test_another_strategy_drops_the_replicas() -> None:
    assert _with_strategy(_hsdp(), Strategy.ZERO3.value).parallel.dp_replicate == 1
    assert _with_strategy(_hsdp(), Strategy.DDP).parallel.strategy is Strategy.DDP


def test_fsdp_again_keeps_them() -> None:
    assert _with_strategy(_hsdp(), Strategy.FSDP.value).parallel.dp_replicate == 16

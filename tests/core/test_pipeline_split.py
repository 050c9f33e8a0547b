"""nanotron's pipeline split by compute (parallel.stage_split "compute", core.pipeline) against its source.

huggingface/nanotron@c2528430 src/nanotron/models/base.py L190-237 ``build_model``: the pipeline blocks in order
(embedding, decoder layers, final norm, lm_head, float32 cast, loss) with ``get_block_compute_costs``
(src/nanotron/models/llama.py L913-925: a decoder layer ``4 · heads · d_qkv · h + 3 · ffn · h``, the lm_head
``vocab · h``, the rest 0), each block on the current rank, the next rank once the running sum exceeds
``total × (rank + 1) / pp``. The models are the Ultra-Scale Playbook's (nanotron scripts/scaling_benchmarks.py
e24d2483 ``model_configs``, vocab 131072), whose benchmark figure the throughput corpus holds.
"""

from __future__ import annotations

import pytest

from core.errors import PlanError
from core.model import ModelSpec
from core.parallel.layout import layout
from core.pipeline import compute_split, compute_split_costs
from core.plan import Parallelism, PipelineSchedule, PipelineSplit
from core.presets import plan_for_model


def _playbook(layers: int, hidden: int, heads: int, ffn: int) -> ModelSpec:
    return ModelSpec(
        name=f"playbook {layers}x{hidden}",
        family="llama",
        vocab_size=131072,  # scaling_benchmarks.py VOCAB_SIZES
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=heads,  # NUM_KEY_VALUE_HEADS None: MHA
        head_dim=hidden // heads,
        intermediate_size=ffn,
    )


SMALL = _playbook(16, 2048, 32, 8192)  # the 1.34B
MEDIUM = _playbook(28, 3072, 32, 8192)  # the 3.57B
EIGHT = _playbook(32, 4096, 32, 14336)  # the 8.86B
LARGE = _playbook(80, 8192, 64, 28672)  # the 80B


def test_the_costs_are_nanotrons_get_block_compute_costs() -> None:
    # 4·32·64·2048 + 3·8192·2048 = 16,777,216 + 50,331,648; the head 131,072·2048.
    assert compute_split_costs(SMALL) == (67_108_864, 268_435_456)
    # Starcoder2's ungated MLP costs 2·ffn·h (src/nanotron/models/starcoder2.py L1570-1582).
    ungated = compute_split_costs(ModelSpec(**{**SMALL.__dict__, "gated_mlp": False}))
    assert ungated == (16_777_216 + 2 * 8192 * 2048, 268_435_456)


@pytest.mark.parametrize(
    ("model", "pp", "blocks"),
    [
        # The head is 4 layers' cost: total 20 layers', half reached (not exceeded) after the 10th layer.
        (SMALL, 2, (11, 5)),
        # 113,246,208 a layer, the head 402,653,184: total 31.56 layers', past half (15.78) at the 16th.
        (MEDIUM, 2, (16, 12)),
        # 243,269,632 a layer, the head 536,870,912 (2.21 layers'): quarters at 8.55, 17.10, 25.66 layers'.
        (EIGHT, 2, (18, 14)),
        (EIGHT, 4, (9, 9, 8, 6)),
        (LARGE, 4, (21, 20, 20, 19)),
        (LARGE, 16, (6, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 3)),
    ],
)
def test_the_blocks_go_as_nanotrons_build_model_deals_them(model: ModelSpec, pp: int, blocks: tuple[int, ...]) -> None:
    assert compute_split(model, pp) == (blocks, pp - 1)  # the head on the last rank


def test_a_plan_split_by_compute_holds_those_blocks_on_each_stage() -> None:
    # Llama 3.1 8B (32 layers, h 4096, 32 heads of 128, ffn 14336, vocab 128,256): a layer 243,269,632, the head
    # 525,336,576 (2.16 layers'), quarters of 34.16 layers' at 8.54, 17.08, 25.62: 9, 9, 8 and 6 with the head.
    even = plan_for_model("llama-3.1-8b").with_parallel(gpus_per_node=4, pipeline_parallel=4)
    even = even.with_workload(grad_accum=8)
    split = even.with_parallel(stage_split=PipelineSplit.COMPUTE)
    assert [(s.layers, s.head) for s in layout(split).stages] == [(9, False), (9, False), (6, True)]
    assert [s.layers for s in layout(even).stages] == [8, 8, 8]
    # The middle ranks are taken at the most blocks any of them holds (stages 2 and 3 hold 9 and 8) with the
    # second stage's micro-batches in flight, 1F1B's p − i = 3 (an upper bound on both middle stages).
    assert layout(split).stages[1].ranks == 2 and layout(split).stages[1].in_flight == 3


def test_the_split_is_even_unless_asked() -> None:
    assert Parallelism().stage_split is PipelineSplit.EVEN


def test_a_split_that_leaves_a_stage_empty_is_refused_in_one_line() -> None:
    # The 1.34B on 4 stages: 6, 5 and 5 layers, the head on the fourth with no block of its own (0 blocks).
    assert compute_split(SMALL, 4) == ((6, 5, 5, 0), 3)
    plan = plan_for_model("llama-3.2-1b").with_parallel(gpus_per_node=8, pipeline_parallel=8)
    assert 0 in compute_split(plan.model, 8)[0]
    with pytest.raises(PlanError) as refused:
        plan.with_parallel(stage_split=PipelineSplit.COMPUTE)
    assert refused.value.field == "parallel.pipeline_parallel" and "\n" not in str(refused.value)


def test_nanotrons_split_has_no_interleaved_chunks() -> None:
    with pytest.raises(PlanError) as refused:
        Parallelism(
            gpus_per_node=4,
            pipeline_parallel=4,
            schedule=PipelineSchedule.INTERLEAVED,
            virtual_stages=2,
            stage_split=PipelineSplit.COMPUTE,
        )
    assert refused.value.field == "parallel.stage_split"

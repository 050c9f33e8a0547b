"""Tensor, pipeline and context parallelism: the per-rank split against the papers' formulas.

No measurement of TP/PP/CP is possible on this machine, so the split is checked against
the published formulas it implements:

- Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models" (arXiv:2205.05198), Table 2: activations per layer sbh(10 + 24/t + 5as/(ht))
  with tensor parallelism, sbh/t·(34 + 5as/h) with sequence parallelism as well; §4.2.3:
  with the interleaved schedule the first stage holds p·(1 + (p−1)/(p·v)) stages' worth.
- Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
  Using Megatron-LM" (arXiv:2104.04473) §2.2: GPipe keeps all m micro-batches in flight,
  1F1B (PipeDream-Flush) at most p (stage i: p − i).
"""

from __future__ import annotations

import pytest

from core.breakdown import BucketKey, LayerActs, StepPhase, Term
from core.estimate import estimate
from core.parallel.acts import block_per_rank
from core.parallel.layout import Layout, block_params_per_rank, holding, layout, stage_layer_counts
from core.params import param_counts
from core.plan import PipelineSchedule, Preset, Strategy
from core.presets import plan_for_model
from core.roles import dtypes_for
from core.training import detailed
from core.training.detailed import layer_activations

# Korthikanti Table 2's GPT: s = 2048, b = 1, h = 12288, a = 96 (their 175B-like layer).
S, B, H, A = 2048, 1, 12288, 96
SBH = S * B * H


def _korthikanti_layer() -> LayerActs:
    """One layer's saved tensors itemised as §4.1 of the paper counts them (16-bit)."""
    sbh, as2b = SBH, A * S * S * B
    replicated = [
        Term("attention layernorm input", "2sbh", 2 * sbh),
        Term("QKV input (layernorm output)", "2sbh", 2 * sbh),
        Term("attention dropout mask", "sbh", sbh),
        Term("MLP layernorm input", "2sbh", 2 * sbh),
        Term("MLP input (layernorm output)", "2sbh", 2 * sbh),
        Term("MLP dropout mask", "sbh", sbh),
    ]
    inside = [
        Term("Q, K", "4sbh", 4 * sbh),
        Term("softmax output", "2as²b", 2 * as2b),
        Term("softmax dropout mask", "as²b", as2b),
        Term("dropout output (V multiply input)", "2as²b", 2 * as2b),
        Term("V", "2sbh", 2 * sbh),
        Term("projection input", "2sbh", 2 * sbh),
        Term("first linear output (GeLU input)", "8sbh", 8 * sbh),
        Term("GeLU output (second linear input)", "8sbh", 8 * sbh),
    ]
    return LayerActs(tuple(replicated + inside), tuple(range(len(replicated))))


def _layout(tp: int, sp: bool, cp: int = 1) -> Layout:
    plan = plan_for_model("llama-3.1-8b").with_workload(seq_len=4096)
    return layout(
        plan.with_parallel(gpus_per_node=tp * cp, tensor_parallel=tp, context_parallel=cp, sequence_parallel=sp)
    )


def test_one_layer_is_34_plus_5as_over_h_sbh_on_one_gpu() -> None:
    assert _korthikanti_layer().bytes == pytest.approx(SBH * (34 + 5 * A * S / H))


@pytest.mark.parametrize("t", [2, 4, 8])
def test_tensor_parallel_alone_splits_24_and_the_attention_but_not_the_10(t: int) -> None:
    per_rank = block_per_rank(_korthikanti_layer(), _layout(t, sp=False))
    assert per_rank.bytes == pytest.approx(SBH * (10 + 24 / t + 5 * A * S / (H * t)))


@pytest.mark.parametrize("t", [2, 4, 8])
def test_sequence_parallel_splits_every_term(t: int) -> None:
    per_rank = block_per_rank(_korthikanti_layer(), _layout(t, sp=True))
    assert per_rank.bytes == pytest.approx(SBH / t * (34 + 5 * A * S / H))


def test_the_projects_own_block_terms_split_the_same_way() -> None:
    plan = plan_for_model("llama-3.1-8b").with_workload(seq_len=4096)
    block = layer_activations(plan, trainable_block=True)
    inside = block.bytes - block.replicated_bytes
    assert 0 < block.replicated_bytes < block.bytes  # norms and matmul inputs vs attention and MLP
    labels = [block.items[i].label for i in block.replicated]
    assert all("norm" in label or "input" in label for label in labels)
    assert block_per_rank(block, _layout(4, sp=False)).bytes == pytest.approx(block.replicated_bytes + inside / 4)
    assert block_per_rank(block, _layout(4, sp=True)).bytes == pytest.approx(block.bytes / 4)
    assert block_per_rank(block, _layout(1, sp=False, cp=4)).bytes == pytest.approx(block.bytes / 4)


def test_a_tensor_parallel_rank_holds_a_tth_of_each_matrix_and_whole_norms() -> None:
    model = plan_for_model("llama-3.1-8b").model
    norms = model.norms_per_layer * model.hidden_size
    assert block_params_per_rank(model, 8) == pytest.approx(norms + (model.layer_params() - norms) / 8)


def _stages(pp: int, m: int, schedule: PipelineSchedule, v: int = 1) -> list[float]:
    plan = plan_for_model("llama-3.1-8b").with_workload(grad_accum=m)
    plan = plan.with_parallel(gpus_per_node=pp, pipeline_parallel=pp, schedule=schedule, virtual_stages=v)
    return [s.in_flight for s in layout(plan).stages]


def test_gpipe_keeps_every_micro_batch_in_flight() -> None:
    assert _stages(4, 16, PipelineSchedule.GPIPE) == [16, 16, 16]


def test_one_f_one_b_keeps_at_most_p_minus_i_micro_batches() -> None:
    # stage kinds: first (i = 0), the largest middle (i = 1), last (i = p − 1)
    assert _stages(4, 16, PipelineSchedule.ONE_F_ONE_B) == [4, 3, 1]
    assert _stages(4, 2, PipelineSchedule.ONE_F_ONE_B) == [2, 2, 1]  # never more than m


@pytest.mark.parametrize(("p", "v"), [(4, 2), (8, 4), (2, 8)])
def test_interleaving_holds_one_plus_p_minus_one_over_pv_more_on_the_first_stage(p: int, v: int) -> None:
    first = _stages(p, 64, PipelineSchedule.INTERLEAVED, v)[0]
    assert first == pytest.approx(p * (1 + (p - 1) / (p * v)))


def test_layers_per_stage_give_the_remainder_to_the_first_chunks() -> None:
    assert stage_layer_counts(80, 3) == (27, 27, 26)
    assert stage_layer_counts(32, 4, 2) == (8, 8, 8, 8)
    assert stage_layer_counts(30, 4, 2) == (8, 8, 7, 7)  # 8 chunks of 4 or 3 blocks


def test_the_first_stage_keeps_p_micro_batches_of_its_blocks() -> None:
    base = plan_for_model("llama-3.1-8b").with_changes(preset=Preset.TRAINER_BF16)
    base = base.with_workload(micro_batch=1, seq_len=4096, grad_accum=8)
    piped = estimate(base.with_parallel(gpus_per_node=4, pipeline_parallel=4, strategy=Strategy.DDP))
    one = estimate(base)
    block = layer_activations(base, trainable_block=True).bytes
    first = piped.ranks[0]
    forward = next(p for p in first.phases if p.kind is StepPhase.FORWARD)
    kept = sum(t.bytes for t in forward.bucket(BucketKey.ACTIVATIONS).terms if "blocks ×" in t.label)
    assert kept == pytest.approx(8 * 4 * block)  # 32 layers ÷ 4 stages, 4 micro-batches in flight
    assert first.label.startswith("stage 1") and not any(
        "log-softmax" in t.label for t in forward.bucket(BucketKey.ACTIVATIONS).terms
    )
    assert piped.ranks[-1].peak_bytes < one.peak_bytes


def test_the_stages_hold_the_whole_model_between_them() -> None:
    plan = plan_for_model("llama-3.1-8b").with_parallel(gpus_per_node=4, pipeline_parallel=4)
    total = plan.model.total_params()
    # 32 blocks over 4 stages (8 each); the embedding on the first, norm and head on the last
    stages = [holding(plan, s) for s in layout(plan).stages]  # first, a middle one, last
    middle = stages[1].params
    assert stages[0].params + 2 * middle + stages[2].params == pytest.approx(total)
    assert stages[0].root == plan.model.embedding_params()


def test_context_parallel_splits_the_sequence_and_adds_the_ring_exchange() -> None:
    base = plan_for_model("llama-3.1-8b").with_changes(preset=Preset.TRAINER_BF16, checkpointing=True)
    base = base.with_workload(micro_batch=1, seq_len=32768)
    plain = base.with_parallel(gpus_per_node=4, strategy=Strategy.FSDP)
    split4 = base.with_parallel(gpus_per_node=4, strategy=Strategy.FSDP, context_parallel=4)
    one, cp4 = estimate(plain), estimate(split4)
    forward = [next(p for p in e.phases if p.kind is StepPhase.FORWARD) for e in (one, cp4)]
    acts = [f.bucket(BucketKey.ACTIVATIONS).bytes for f in forward]
    assert acts[1] == pytest.approx(acts[0] / 4)  # every saved tensor is per token: ÷ cp
    # Inside a block's backward: the layer gradients ÷ 4, plus the K/V chunks in flight
    # (the one used and the one received, keys and values: 2 × 2 × N/cp × kv × 2 B) and the
    # float32 output and log-sum-exp accumulators of the merge.
    model, n = base.model, 32768
    dt = dtypes_for(base)
    parts = [
        detailed._parts(p, param_counts(p), dt, detailed.Rank(layout(p), layout(p).stages[0])) for p in (plain, split4)
    ]
    kv = 2 * 2 * n / 4 * model.kv_width * 2
    acc = n / 4 * (model.q_width + model.num_heads) * 4
    forward_ring = parts[0].layer_grads.bytes / 4 + kv + acc
    # The attention backward's ring (pytorch f2127dbd _templated_ring_attention_backward) holds
    # more: per element of the rank's chunk at query width, 7 float32 (grad_query, three copies of
    # the grad K/V pair) and 2·cp + 5 in the compute dtype (K/V of all 4 ranks gathered, the step's
    # K/V concatenation, the kernel's three gradients): 28 + 13 × 2 = 54 bytes.
    backward_ring = n / 4 * model.q_width * 54
    assert backward_ring > forward_ring
    assert parts[1].layer_grads.bytes == pytest.approx(max(forward_ring, backward_ring))
    assert "ring attention backward" in parts[1].layer_grads.label


def test_fsdp_shards_the_state_over_data_and_context_parallel_ranks() -> None:
    # torchtitan parallel_dims.py: the mesh fully_shard uses is dp_shard × cp.
    base = plan_for_model("llama-3.1-8b").with_changes(preset=Preset.TRAINER_BF16).with_workload(seq_len=8192)
    plan = base.with_parallel(gpus_per_node=8, strategy=Strategy.FSDP, context_parallel=4)
    assert layout(plan).data_parallel == 2 and layout(plan).state_shards == 8
    step = next(p for p in estimate(plan).phases if p.kind is StepPhase.OPTIMIZER)
    assert step.bucket(BucketKey.WEIGHTS).bytes == pytest.approx(plan.model.total_params() * 2 / 8)

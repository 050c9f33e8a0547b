"""Expert parallelism (issue 24 item 4): the layout, the memory split, the all-to-all, the files.

The numbers are arithmetic on Qwen3-30B-A3B's own dimensions (Qwen/Qwen3-30B-A3B config.json:
hidden_size 2048, num_hidden_layers 48, num_experts 128, num_experts_per_tok 8,
moe_intermediate_size 768, a gated MLP), the rules Megatron-Core's (NVIDIA/Megatron-LM
d98e8a64: megatron/core/parallel_state.py, megatron/training/arguments.py,
megatron/core/transformer/moe/token_dispatcher.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.errors import PlanError
from core.estimate import estimate
from core.files.launch import Target, export
from core.parallel.comm import NCCL_BASE_LATENCY_S, plan_links, step_communication
from core.parallel.layout import block_params_per_rank, expert_shares, layout, weight_share
from core.params import param_counts
from core.plan import MoeDispatcher, Parallelism, Plan, Stack, Strategy, Workload
from core.training.detailed import Rank, training_breakdown
from tests.core.planfile_compat import reload_and_without

QWEN3_MOE = find_model("qwen3-30b-a3b").spec
D, LAYERS, EXPERTS, TOP_K, EXPERT_I = 2048, 48, 128, 8, 768
EXPERT_PARAMS = LAYERS * EXPERTS * 3 * D * EXPERT_I  # gate, up, down of every expert, no biases


def _plan(ep: int, strategy: Strategy = Strategy.ZERO1, nodes: int = 2, **workload: int) -> Plan:
    work = {"micro_batch": 1, "seq_len": 4096, "grad_accum": 64} | workload
    return Plan(
        model=QWEN3_MOE,
        model_id="qwen3-30b-a3b",
        parallel=Parallelism(nodes=nodes, gpus_per_node=8, strategy=strategy, expert_parallel=ep),
        workload=Workload(**work),
        stack=Stack.MEGATRON,
    )


def _bucket(plan: Plan, key: BucketKey) -> float:
    return next(b.bytes for b in estimate(plan).buckets if b.key is key)


def test_the_catalogue_model_has_the_model_cards_dimensions() -> None:
    m = QWEN3_MOE
    assert (m.hidden_size, m.num_layers, m.num_experts, m.experts_per_token) == (D, LAYERS, EXPERTS, TOP_K)
    assert m.intermediate_size == EXPERT_I and m.gated_mlp and not m.mlp_bias
    assert m.num_layers * m.num_experts * m.expert_mlp_params() == EXPERT_PARAMS


# ---- the layout ---------------------------------------------------------------------------
def test_ep_must_divide_the_data_times_context_parallel_gpus() -> None:
    # Megatron-Core: expert TP (= TP) × EP × PP divides the world size. 16 GPUs, TP 2: DP 8.
    Parallelism(nodes=2, gpus_per_node=8, tensor_parallel=2, expert_parallel=8)
    with pytest.raises(PlanError, match=r"^parallel\.expert_parallel: 16 .*a divisor of DP × CP = 8.*Megatron"):
        Parallelism(nodes=2, gpus_per_node=8, tensor_parallel=2, expert_parallel=16)
    # CP ranks count: 16 GPUs, CP 2, DP 8, EP 16 divides DP × CP.
    Parallelism(nodes=2, gpus_per_node=8, context_parallel=2, expert_parallel=16)


def test_the_experts_must_divide_by_ep_and_a_dense_model_has_none_to_split() -> None:
    with pytest.raises(PlanError, match=r"^parallel\.expert_parallel: 3 .*divisor of the model's 128 experts"):
        Plan(model=QWEN3_MOE, parallel=Parallelism(gpus_per_node=6, expert_parallel=3))
    with pytest.raises(PlanError, match=r"^parallel\.expert_parallel: 2 .*the model has no experts"):
        Plan(model=find_model("llama-3.1-8b").spec, parallel=Parallelism(gpus_per_node=2, expert_parallel=2))


def test_a_plan_moved_to_fewer_gpus_or_a_dense_model_drops_ep_to_one() -> None:
    plan = _plan(16)
    assert plan.on_gpus(8).parallel.expert_parallel == 1
    assert plan.on_gpus(32).parallel.expert_parallel == 16
    assert plan.on_model(find_model("llama-3.1-8b").spec).parallel.expert_parallel == 1


# ---- the memory ---------------------------------------------------------------------------
def test_a_rank_holds_its_share_of_the_experts_and_every_dense_parameter() -> None:
    block = block_params_per_rank(QWEN3_MOE, 1)
    expert_block = EXPERT_PARAMS / LAYERS
    assert block_params_per_rank(QWEN3_MOE, 1, 8) == pytest.approx(block - expert_block * 7 / 8)
    # TP 2 as well: the experts' matrices ÷ (TP · EP), the rest as TP alone splits it.
    assert block_params_per_rank(QWEN3_MOE, 2, 8) == pytest.approx(
        block_params_per_rank(QWEN3_MOE, 2) - expert_block / 2 * 7 / 8
    )


def test_zero1_shards_the_experts_state_over_the_expert_data_parallel_ranks() -> None:
    # 16 GPUs, ZeRO-1 (Megatron's distributed optimizer): the weights and the whole gradients a
    # rank keeps lose 7/8 of the experts; the float32 master and Adam state, sharded over DP = 16
    # for the dense part and over DP ÷ EP = 2 for the rank's 1/8 of the experts, are unchanged.
    total = QWEN3_MOE.architecture_params()
    kept = (total - EXPERT_PARAMS * 7 / 8) / total
    one, eight = _plan(1), _plan(8)
    assert _bucket(eight, BucketKey.WEIGHTS) == pytest.approx(_bucket(one, BucketKey.WEIGHTS) * kept, rel=1e-9)
    assert _gradients(eight) == pytest.approx(_gradients(one) * kept, rel=1e-9)
    assert _bucket(eight, BucketKey.OPTIMIZER) == pytest.approx(_bucket(one, BucketKey.OPTIMIZER), rel=1e-9)
    # Beside them, under Megatron-Core's own default dispatcher (allgather), Megatron's global memory buffer
    # holds the tokens gathered over the EP group (core.parallel.state._megatron_global_buffer; TP 1, no
    # sequence parallelism): s·b·EP·d × 2 B. The alltoall dispatcher (the plan's default, Megatron-Bridge's
    # recipes') never asks for the buffer (token_dispatcher.py at d98e8a64: only MoEAllGatherTokenDispatcher
    # passes use_global_buffer=True).
    gathered = eight.with_parallel(moe_dispatcher=MoeDispatcher.ALLGATHER)
    assert _global_buffer(one) == 0 and _global_buffer(gathered) == 4096 * 8 * D * 2
    assert _global_buffer(eight) == 0


def _global_buffer(plan: Plan) -> float:
    gradients = next(b for b in estimate(plan).buckets if b.key is BucketKey.GRADIENTS)
    return sum(t.bytes for t in gradients.terms if "global memory buffer" in t.label)


def _gradients(plan: Plan) -> float:
    """The gradients bucket less Megatron's global memory buffer, which the Megatron stack keeps there."""
    return _bucket(plan, BucketKey.GRADIENTS) - _global_buffer(plan)


def test_the_expert_note_gives_the_shard_as_every_expert_over_dp_times_cp() -> None:
    # The shard's divisor on 16 GPUs at EP 8 is fractional (T ÷ 2.7066...); the note must show
    # where it comes from: the dense part ÷ 16 and the rank's 1/8 of the experts ÷ 2 make the
    # whole model's trainable parameters ÷ 16, which is what Adam's two float32 moments hold at 4 B
    # each (Megatron's distributed optimizer, megatron/core/optimizer/distrib_optimizer.py; the
    # float32 parameters' shard is a view of them, ``model_param.view(-1)[...]``, no master copy).
    est = estimate(_plan(8))
    (note,) = [n for n in est.notes if n.startswith("Expert parallel 8")]
    total = QWEN3_MOE.architecture_params()
    shard = total / 16
    assert f"÷ 16 = {shard / 1e9:.4g} × 10⁹" in note  # a formula's count: core.format.sci, four digits
    optimizer = next(b for b in est.buckets if b.key is BucketKey.OPTIMIZER)
    moments = next(t for t in optimizer.terms if t.label.startswith("Adam moments"))
    assert moments.bytes == pytest.approx(shard * 2 * 4, rel=1e-9)


def test_fsdp_shards_the_same_total_and_gathers_smaller_units() -> None:
    one, eight = _plan(1, Strategy.FSDP), _plan(8, Strategy.FSDP)
    assert _bucket(eight, BucketKey.OPTIMIZER) == pytest.approx(_bucket(one, BucketKey.OPTIMIZER), rel=1e-9)
    assert _bucket(eight, BucketKey.WEIGHTS) < _bucket(one, BucketKey.WEIGHTS)


def test_the_all_to_all_adds_one_routed_copy_of_the_tokens_to_a_blocks_backward() -> None:
    # The dispatcher's permuted tokens and the all-to-all's output coexist: N·k·d × 2 B beside a
    # block's backward (a fused loss, so that the block's backward is the backward's high point).
    def block_backward(ep: int) -> float:
        plan = _plan(ep).with_changes(fused_loss=True)
        lay = layout(plan)
        phases = training_breakdown(plan, param_counts(plan), Rank(lay, lay.stages[0])).phases
        terms = [
            t for p in phases for b in p.buckets for t in b.terms if t.label.startswith("gradients through a block")
        ]
        assert ("all-to-all" in terms[0].label) is (ep > 1)
        return terms[0].bytes

    assert block_backward(8) - block_backward(1) == 4096 * TOP_K * D * 2


# ---- the time -----------------------------------------------------------------------------
def _a2a(plan: Plan, compute: float = 10.0):  # type: ignore[no-untyped-def]
    comm = step_communication(plan, param_counts(plan), compute, 1 / 3)
    return [t for t in comm.terms if t.label.startswith("expert-parallel all-to-all")]


def test_each_moe_layer_all_to_alls_twice_forward_and_twice_backward() -> None:
    (term,) = _a2a(_plan(8, nodes=1, grad_accum=4))
    count = 4 * LAYERS * 4  # 4 per layer, 4 micro-batches
    buffer = 4096 * TOP_K * D * 2  # N·k·d in bf16
    assert term.bytes == pytest.approx(buffer * 7 / 8 * count)
    assert not term.overlapped  # Megatron's overlap_moe_expert_parallel_comm is off by default
    # Full recompute runs the forward's two again.
    recomputed = _plan(8, nodes=1, grad_accum=4).with_changes(checkpointing=True)
    (again,) = _a2a(recomputed)
    assert again.bytes == pytest.approx(buffer * 7 / 8 * 6 * LAYERS * 4)


def test_the_allgather_dispatcher_gathers_the_groups_tokens_instead() -> None:
    # Megatron-Core's own default dispatcher (NVIDIA/Megatron-LM d98e8a64 token_dispatcher.py
    # MoEAllGatherTokenDispatcher): all-gather of the EP group's N·d tokens (N·EP·d gathered), a
    # reduce-scatter back; each rank sends (EP − 1)·N·d a collective, the bytes of an all-to-all of
    # N·EP·d. Qwen3-30B-A3B routes to k = 8 experts, so at EP 16 it sends twice the alltoall's.
    plan = _plan(16, nodes=2, grad_accum=4)
    gathered = plan.with_parallel(moe_dispatcher=MoeDispatcher.ALLGATHER)
    comm = step_communication(gathered, param_counts(gathered), 10.0, 1 / 3)
    (term,) = [t for t in comm.terms if t.label.startswith("expert-parallel all-gather and reduce-scatter")]
    count = 4 * LAYERS * 4
    assert term.bytes == pytest.approx(4096 * 16 * D * 2 * 15 / 16 * count)
    assert term.bytes == pytest.approx(_a2a(plan)[0].bytes * 16 / TOP_K)
    assert any("allgather dispatcher" in a for a in comm.assumptions)
    # The Megatron-Bridge export names it as Megatron-Core does.
    assert "model.moe_token_dispatcher_type=allgather" in export(gathered, Target.MEGATRON_BRIDGE).text


def test_across_nodes_the_all_to_all_waits_for_the_nics() -> None:
    # EP 8 within a node: 7/8 of each buffer over NVLink; EP 16 over two nodes: 8/16 of it leaves
    # through each GPU's own NIC (the 7/16 over NVLink meanwhile is faster), one launch's latency.
    buffer, count = 4096 * TOP_K * D * 2, 4 * LAYERS * 64
    links = plan_links(_plan(16))
    intra, inter = links.intra, links.inter
    inside, across = _a2a(_plan(8))[0], _a2a(_plan(16))[0]
    one_inside = buffer * 7 / 8 / intra.bus_bytes_per_second + NCCL_BASE_LATENCY_S + intra.latency_us * 1e-6
    one_across = buffer * 8 / 16 / inter.bus_bytes_per_second + NCCL_BASE_LATENCY_S + inter.latency_us * 1e-6
    assert inside.seconds == pytest.approx(count * one_inside)
    assert across.seconds == pytest.approx(count * one_across)
    assert "over ib-" in across.formula and "nvlink" in inside.formula


def _dp_terms(plan: Plan):  # type: ignore[no-untyped-def]
    comm = step_communication(plan, param_counts(plan), 10.0, 1 / 3)
    return {t.label: t for t in comm.terms if t.data_parallel}


def test_zero1_reduces_the_experts_gradients_over_the_expert_data_parallel_group() -> None:
    # Megatron-Core d98e8a64: the experts' buffers reduce-scatter (and all-gather) over the
    # expert-data-parallel group, world ÷ (TP · EP · PP) = 16 ÷ 8 = 2 ranks, TP · EP = 8 apart (one
    # per node); the dense buffers over DP × CP = 16. Float32 gradients (bf16-mixed), 4 B each.
    total = QWEN3_MOE.architecture_params()
    terms = _dp_terms(_plan(8))
    dense = terms["ZeRO-1 gradient reduce-scatter (dense, over DP × CP = 16)"]
    experts = terms["ZeRO-1 gradient reduce-scatter (experts, over DP × CP ÷ EP = 2)"]
    assert dense.bytes == pytest.approx((total - EXPERT_PARAMS) * 4 * 15 / 16, rel=1e-9)
    assert experts.bytes == pytest.approx(EXPERT_PARAMS / 8 * 4 * 1 / 2, rel=1e-9)
    assert "1 per node × 2 nodes" in experts.formula and "8 per node × 2 nodes" in dense.formula
    assert dense.overlapped and experts.overlapped  # both groups' buckets overlap the backward (Megatron)
    gathers = [t for label, t in terms.items() if label.startswith("ZeRO updated-parameter all-gather")]
    # Megatron gathers the bf16 model parameters (param_and_grad_buffer.py start_param_sync), 2 B each.
    assert sum(t.bytes for t in gathers) == pytest.approx((dense.bytes + experts.bytes) / 2, rel=1e-9)


def test_ep_over_every_data_parallel_rank_leaves_the_experts_nothing_to_reduce() -> None:
    # EP 16 on 16 GPUs: the expert-data-parallel group is one GPU, each expert's weights live on one
    # rank; only the dense gradients are reduced (over 16).
    total = QWEN3_MOE.architecture_params()
    terms = _dp_terms(_plan(16))
    assert set(terms) == {
        "ZeRO-1 gradient reduce-scatter (dense, over DP × CP = 16)",
        "ZeRO updated-parameter all-gather (dense, over DP × CP = 16)",
    }
    assert terms["ZeRO-1 gradient reduce-scatter (dense, over DP × CP = 16)"].bytes == pytest.approx(
        (total - EXPERT_PARAMS) * 4 * 15 / 16, rel=1e-9
    )
    assert any(
        "one GPU holds each expert" in a
        for a in step_communication(_plan(16), param_counts(_plan(16)), 10.0, 1 / 3).assumptions
    )


def test_fsdp_gathers_and_reduces_the_experts_over_torchtitans_efsdp_mesh() -> None:
    # torchtitan b5bcd76: the routed experts are fully_shard-ed on efsdp = dp_shard · cp · tp ÷ ep
    # = 16 ÷ 8 = 2 ranks; gathered as stored (float32: fsdp_param_dtype's default), reduced in float32.
    total = QWEN3_MOE.architecture_params()
    terms = _dp_terms(_plan(8, Strategy.FSDP, grad_accum=1))
    gather = next(
        t for label, t in terms.items() if "all-gather" in label and "(experts, over DP × CP ÷ EP = 2)" in label
    )
    reduce = terms["FSDP2 gradient reduce-scatter (experts, over DP × CP ÷ EP = 2)"]
    dense = terms["FSDP2 gradient reduce-scatter (dense, over DP × CP = 16)"]
    assert gather.bytes == pytest.approx(2 * EXPERT_PARAMS / 8 * 4 / 2, rel=1e-9)  # forward + backward, 1/2 sent
    assert reduce.bytes == pytest.approx(EXPERT_PARAMS / 8 * 4 / 2, rel=1e-9)
    assert dense.bytes == pytest.approx((total - EXPERT_PARAMS) * 4 * 15 / 16, rel=1e-9)
    # One collective per block for the experts (the root, embedding and head, holds none), one
    # per block and the root for the dense part; the last one's is the part no schedule hides.
    assert reduce.unhidden_seconds == pytest.approx(reduce.seconds / LAYERS)
    assert dense.unhidden_seconds == pytest.approx(dense.seconds / (LAYERS + 1))


def test_expert_shares_are_the_experts_part_of_the_ranks_share() -> None:
    # The rank's experts under EP are what EP removes from its share, once per EP − 1 others.
    plan = _plan(8)
    stage = layout(plan).stages[0]
    w, t = expert_shares(plan, stage, 1)
    split, whole = weight_share(plan, stage, 1), weight_share(plan, stage, 1, experts_split=False)
    assert w == pytest.approx(EXPERT_PARAMS / 8 / QWEN3_MOE.architecture_params(), rel=1e-12)
    assert whole - split == pytest.approx(7 * w, rel=1e-12) and t == w
    assert expert_shares(_plan(1), stage, 1) == (0.0, 0.0)


def test_ep_one_has_no_all_to_all_and_the_same_step() -> None:
    assert not _a2a(_plan(1))
    plan = _plan(1)
    assert estimate(plan).compute == estimate(plan.with_parallel(expert_parallel=1)).compute


def _permute_seconds(plan: Plan, gpu: str = "b200") -> float:
    from core.catalogue import find_gpu
    from core.training.speed import step_work

    return step_work(plan, param_counts(plan), find_gpu(gpu)).features.get("moe_permute", 0.0)


def test_each_moe_layer_moves_its_routed_tokens_to_the_experts_rows_and_back() -> None:
    # Transformer Engine's fused permutation (NVIDIA/TransformerEngine v2.9,
    # transformer_engine/pytorch/triton/permutation.py), which Megatron-Core's moe_permute_fusion
    # calls (NVIDIA/Megatron-LM b0cc2706, megatron/core/transformer/moe/moe_utils.py): the permute
    # reads each of the N tokens once and writes its k copies (N + N·k rows), the unpermute reads
    # the k copies and writes their sum (N·k + N), each the other's backward; the alltoall
    # dispatcher sorts the received copies by local expert and back (sort_chunks_by_idxs: 2·N·k
    # each), its backward the same. 48 layers forward and backward, d = 2048 in bf16.
    from core.catalogue import find_gpu

    plan = _plan(8, nodes=1, grad_accum=4)
    tokens, routed = 4096, 4096 * TOP_K
    rows = (tokens + routed) * 2 + 2 * routed * 2  # permute + unpermute, sort + unsort
    expected = rows * D * 2 * 2 * LAYERS * 4 / (find_gpu("b200").memory_bandwidth_gb_s * 1e9)
    assert _permute_seconds(plan) == pytest.approx(expected)
    # Full recompute runs the forward's again.
    assert _permute_seconds(plan.with_changes(checkpointing=True)) == pytest.approx(expected * 3 / 2)
    # Other stacks gather the copies and scatter-add them back without Megatron's chunk sort.
    eager = (tokens + routed) * 2 * D * 2 * 2 * LAYERS * 4 / (find_gpu("b200").memory_bandwidth_gb_s * 1e9)
    assert _permute_seconds(plan.with_changes(stack=Stack.COMPILE)) == pytest.approx(eager)
    # A dense model has none; the term is counted from the source, never fitted.
    dense = Plan(model=find_model("llama-3.1-8b").spec, stack=Stack.MEGATRON)
    assert _permute_seconds(dense) == 0.0
    from core.training.efficiency import FITTED, PRIORS

    assert FITTED["moe_permute"] == pytest.approx(PRIORS["moe_permute"], abs=1e-4)


def test_torchtitans_scatter_add_moe_layer_moves_its_copies_six_times_a_pass() -> None:
    # prime-rl's copy of torchtitan's MoE (PrimeIntellect-ai/prime-rl@8718eb14 src/prime_rl/trainer/models/layers/
    # moe.py MoE.forward L419-436) with torchtitan a1fdd7e's expert_parallel wrapper (distributed/expert_parallel.py
    # L352-361): gather, vstack, padded permute, unpermute, the scores' product and the scatter-add each read and
    # write the N·k copies (12 rows); zeros_like writes the N tokens and the out-of-place scatter_add clones them
    # (3 rows). One GPU (EP 1), 4 micro-batches of 4,096 tokens, 48 layers forward and backward, d = 2048 in bf16.
    from core.catalogue import find_gpu
    from core.plan import MoeLayer

    plan = Plan(
        model=QWEN3_MOE, model_id="qwen3-30b-a3b", workload=Workload(micro_batch=1, seq_len=4096, grad_accum=4),
        stack=Stack.COMPILE, moe_layer=MoeLayer.TORCHTITAN_SCATTER,
    )
    tokens, routed = 4096, 4096 * TOP_K
    bandwidth = find_gpu("h100-sxm").memory_bandwidth_gb_s * 1e9
    expected = (3 * tokens + 12 * routed) * D * 2 * 2 * LAYERS * 4 / bandwidth
    assert _permute_seconds(plan, "h100-sxm") == pytest.approx(expected)
    # transformers' own MoE layer keeps the permute pair (2 token rows, 2 copy rows) the model had before.
    pair = (2 * tokens + 2 * routed) * D * 2 * 2 * LAYERS * 4 / bandwidth
    assert _permute_seconds(plan.with_changes(moe_layer=MoeLayer.TRANSFORMERS), "h100-sxm") == pytest.approx(pair)
    # Megatron's stack runs its own dispatcher whatever the field says.
    megatron = plan.with_changes(stack=Stack.MEGATRON)
    assert _permute_seconds(megatron, "h100-sxm") == pytest.approx(
        _permute_seconds(megatron.with_changes(moe_layer=MoeLayer.TRANSFORMERS), "h100-sxm")
    )


def test_the_flex_dispatchers_move_fewer_rows_than_alltoall() -> None:
    # DeepEP's fused dispatch sends a token once to each rank holding one of its experts, and the
    # rank permutes what it received (NVIDIA/Megatron-LM 55ac7082 token_dispatcher.py
    # _DeepepManager.get_permuted_hidden_states_by_experts); no chunk sort. Under the benchmark
    # recipes' forced balancing (random logits into the top-k) a token misses a rank's 16 of 128
    # experts with probability C(112, 8) / C(128, 8): 8 ranks × 4,096 tokens × (1 − that) arrive.
    # HybridEP permutes inside its dispatch and combine kernels: nothing apart.
    from math import comb

    from core.catalogue import find_gpu
    from core.plan import MoeDispatcher
    from core.training.speed import received_tokens

    arrived = 8 * 4096 * (1 - comb(112, 8) / comb(128, 8))
    assert received_tokens(4096, EXPERTS, TOP_K, 8) == pytest.approx(arrived)
    assert 21_000 < arrived < 22_500  # about two thirds of the 32,768 routed copies
    plan = _plan(8, nodes=1, grad_accum=4)
    bandwidth = find_gpu("b200").memory_bandwidth_gb_s * 1e9
    deepep = (arrived + 4096 * TOP_K) * 2 * D * 2 * 2 * LAYERS * 4 / bandwidth
    assert _permute_seconds(plan.with_parallel(moe_dispatcher=MoeDispatcher.DEEPEP)) == pytest.approx(deepep)
    assert _permute_seconds(plan.with_parallel(moe_dispatcher=MoeDispatcher.HYBRIDEP)) == 0.0
    # At EP 1 there is no dispatch to choose: Megatron's alltoall dispatcher permutes and sorts.
    single = _plan(1, nodes=1, grad_accum=4)
    assert _permute_seconds(single.with_parallel(moe_dispatcher=MoeDispatcher.HYBRIDEP)) == _permute_seconds(single)


def test_hybridep_inside_an_nvlink5_node_runs_at_its_measured_bandwidth() -> None:
    # HybridEP sends a token once to each rank holding one of its experts; its measured algorithm
    # bandwidth on 8 B200s (the received tokens' bytes ÷ the torch API's time, 16 SMs): dispatch
    # BF16 535.94 GB/s, combine 530.86 GB/s (shifangx/DeepEP@1dddd194 Hybrid-EP_Implementation.md,
    # "B200 Platform"; tests/test_hybrid_ep.py counts ``dispatched_hidden.numel() * 2``). A layer's
    # forward dispatch and combine and their backward (a combine and a dispatch): two of each.
    from math import comb

    plan = _plan(8, nodes=1, grad_accum=4).with_hardware(gpu="b200")
    hybrid = plan.with_parallel(moe_dispatcher=MoeDispatcher.HYBRIDEP)
    comm = step_communication(hybrid, param_counts(hybrid), 10.0, 1 / 3)
    (term,) = [t for t in comm.terms if t.label.startswith("expert-parallel")]
    assert "HybridEP" in term.label
    received = 8 * 4096 * (1 - comb(112, 8) / comb(128, 8)) * D * 2  # distinct tokens × d, bf16
    per_layer = 2 * received / 535.94e9 + 2 * received / 530.86e9
    assert term.seconds == pytest.approx(per_layer * LAYERS * 4)
    # At the Megatron-Bridge B200 rows' micro-batch 4, NCCL's all-to-all of every routed copy at
    # NVLink 5's assumed bus bandwidth (0.82 × 900 GB/s) was 3.6 % faster than HybridEP measures.
    mb4 = _plan(8, nodes=1, grad_accum=4, micro_batch=4).with_hardware(gpu="b200")
    flex4 = mb4.with_parallel(moe_dispatcher=MoeDispatcher.HYBRIDEP)
    (measured,) = [
        t for t in step_communication(flex4, param_counts(flex4), 10.0, 1 / 3).terms if "HybridEP" in t.label
    ]
    assert 1.02 < measured.seconds / _a2a(mb4)[0].seconds < 1.05
    # Nothing measured across nodes or on NVLink 4: the all-to-all model stays.
    for other in (_plan(16, nodes=2, grad_accum=4).with_hardware(gpu="b200"), _plan(8, nodes=1, grad_accum=4)):
        flex = other.with_parallel(moe_dispatcher=MoeDispatcher.HYBRIDEP)
        comm = step_communication(flex, param_counts(flex), 10.0, 1 / 3)
        (kept,) = [t for t in comm.terms if t.label.startswith("expert-parallel")]
        assert kept.seconds == pytest.approx(_a2a(other)[0].seconds)


def test_megatrons_router_stays_16_bit_under_transformer_engine_fp8() -> None:
    # Megatron-Core's TopKRouter multiplies its gate with router_gating_linear (NVIDIA/Megatron-LM
    # 55ac7082 megatron/core/transformer/moe/router.py TopKRouter.gating, moe_utils.py
    # RouterGatingLinearFunction: TE's general_gemm on the 16-bit input and weight), not a TE linear
    # under fp8_autocast: its GEMM runs at the 16-bit rate and TE casts nothing for it. Before, the
    # router was timed as an fp8 linear with its input, weight and output gradient cast.
    from core.plan import Float8
    from core.training import speed
    from core.training.flops import block_gemms

    plan = _plan(8, nodes=1, grad_accum=1).with_hardware(gpu="b200").with_changes(float8=Float8.TE)
    rank = speed._Rank(plan=plan, tokens=4096, tp=1, layers=LAYERS, backward_layers=LAYERS, head=False, fp8=True)
    router = 2 * 4096 * D * EXPERTS * 3 * LAYERS  # forward, input and weight gradient; n = 128: no tile padding
    assert speed._matmuls(rank).wide_flops == pytest.approx(router)
    cast = 0.0
    for gemm in block_gemms(plan):
        if gemm.name != "router":
            m, c = speed._rows(rank, gemm)
            cast += ((m * gemm.k + gemm.k * gemm.n) * LAYERS + m * gemm.n * LAYERS) * c
    assert speed.te_cast_bytes(rank) == pytest.approx(cast * speed.TE_CAST_BYTES)
    # Another stack's TE conversion (te.Linear for every nn.Linear) casts the router too.
    eager = speed._Rank(**{**rank.__dict__, "plan": plan.with_changes(stack=Stack.EAGER)})
    assert speed.te_cast_bytes(eager) > speed.te_cast_bytes(rank)
    assert speed._matmuls(eager).wide_flops == 0.0


def test_a_plan_file_keeps_the_dispatcher_and_an_older_file_reads_alltoall(tmp_path: Path) -> None:
    from core.plan import MoeDispatcher

    plan = _plan(8).with_parallel(moe_dispatcher=MoeDispatcher.HYBRIDEP)
    loaded, older = reload_and_without(plan, tmp_path, "parallel", "moe_dispatcher")
    assert loaded == plan
    assert older == _plan(8)


def test_megatron_bridge_writes_the_flex_backend_and_the_others_list_it() -> None:
    # Megatron-Bridge's apply_flex_dispatcher_backend (v0.3.1 training/flex_dispatcher_backend.py):
    # moe_token_dispatcher_type "flex" and moe_flex_dispatcher_backend the backend.
    from core.plan import MoeDispatcher

    plan = _plan(8).with_parallel(moe_dispatcher=MoeDispatcher.DEEPEP)
    bridge = export(plan, Target.MEGATRON_BRIDGE)
    assert "model.moe_token_dispatcher_type=flex" in bridge.text
    assert "model.moe_flex_dispatcher_backend=deepep" in bridge.text
    assert "parallel.moe_dispatcher" not in {u.field for u in bridge.unexpressed}
    assert "model.moe_token_dispatcher_type=alltoall" in export(_plan(8), Target.MEGATRON_BRIDGE).text
    titan = export(plan.with_changes(stack=Stack.MEGATRON), Target.TORCHTITAN)
    assert "parallel.moe_dispatcher" in {u.field for u in titan.unexpressed}


# ---- the files ----------------------------------------------------------------------------
def test_a_plan_file_keeps_ep_and_an_older_file_reads_as_one(tmp_path: Path) -> None:
    loaded, older = reload_and_without(_plan(8), tmp_path, "parallel", "expert_parallel")
    assert loaded == _plan(8)
    assert older == _plan(1)  # a file written before the field


def test_torchtitan_carries_ep_and_the_others_list_it() -> None:
    plan = _plan(8, Strategy.FSDP)
    titan = export(plan, Target.TORCHTITAN)
    assert "expert_parallel_degree = 8" in titan.text
    assert "parallel.expert_parallel" not in {u.field for u in titan.unexpressed}
    trl = export(plan, Target.TRL)
    assert "parallel.expert_parallel" in {u.field for u in trl.unexpressed}


# ---- the host's pace ------------------------------------------------------------------------
def _host_floor(plan: Plan) -> float:
    from core.catalogue import find_gpu
    from core.training.speed import step_work

    return step_work(plan, param_counts(plan), find_gpu(plan.hardware.gpu)).host_floor


def test_a_megatron_moe_step_is_no_faster_than_the_host_issues_its_layers() -> None:
    # Megatron-LM's CI on DGX H100 (NVIDIA/Megatron-LM d98e8a64, golden_values_dev_dgx_h100.json and
    # its _2nd run, "iteration-time" medians): 12 MoE layers (EP 8) take 0.15525 s a step, the same 12
    # dense layers 0.05262 s, one micro-batch a step: 8.55 ms a MoE layer, forward and backward.
    from core.training.speed import MEGATRON_MOE_LAYER_HOST_S

    assert round(MEGATRON_MOE_LAYER_HOST_S * 1e3, 2) == 8.55
    # Megatron-Bridge's 25.11 B200 row's layout: 8 GPUs, EP 8, micro-batch 1 of 4,096 tokens, 64 a step.
    plan = _plan(8, nodes=1, grad_accum=64).with_hardware(gpu="b200")
    compute = estimate(plan).compute
    floor = 64 * LAYERS * MEGATRON_MOE_LAYER_HOST_S  # 26.3 s; the device's modelled step is ~8.8 s
    assert _host_floor(plan) == pytest.approx(floor)
    assert compute.step_seconds == pytest.approx(floor + compute.optimizer_seconds_per_step)
    assert "paced by the host" in compute.formula and "to issue the MoE layers" in compute.formula
    # 64 × 4,096 tokens on each of 8 GPUs: ~9,900 tokens/s a GPU (published: 9,299 at 25.11, 9,691 at 26.02).
    assert 9_500 < compute.tokens_per_second_per_gpu < 10_100
    # Where the device takes longer than the host (micro-batch 8: 8 × the work, the same launches) the
    # host does not pace the step; the floor is the host's issue time, so it scales with the micro-batches.
    big_plan = plan.with_workload(micro_batch=8, grad_accum=8)
    big = estimate(big_plan).compute
    assert _host_floor(big_plan) == pytest.approx(floor / 8)
    assert big.step_seconds > floor / 8 + big.optimizer_seconds_per_step
    assert "paced by the host" not in big.formula
    # Measured for Megatron-Core only: another stack and a dense model are not floored; a typed
    # utilisation is the user's figure for the whole compute.
    assert _host_floor(plan.with_changes(stack=Stack.COMPILE)) == 0.0
    dense = plan.with_parallel(expert_parallel=1).with_changes(model=find_model("qwen3-8b").spec, model_id="qwen3-8b")
    assert _host_floor(dense) == 0.0
    assert estimate(plan.with_hardware(utilisation=0.4)).compute.step_seconds < floor

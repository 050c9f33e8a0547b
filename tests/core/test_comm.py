"""Time with communication: collective volumes, the link catalogue, overlap, the pipeline
bubble, and one end-to-end check against published throughput.

Sources named where their numbers are used: the ring all-reduce volume 2(n−1)/n (NCCL
documentation, "Performance" / nccl-tests doc/PERFORMANCE.md, busbw = algbw × 2(n−1)/n for
all-reduce and × (n−1)/n for all-gather and reduce-scatter; Patarasuk & Yuan 2009), the
pipeline bubble (Narayanan et al. 2021, SC'21, sections 2.2.1-2.2.2), torchtitan's published
Llama 3.1 8B throughput (docs/performance.md at pytorch/torchtitan eaea6f6, tables 1 and 3).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from core.catalogue import LinkKind, find_gpu, find_link, intra_link_of, load_gpus, load_links
from core.cli.app import main
from core.dtypes import MpDtype
from core.errors import PlanError, PlanFileError
from core.estimate import estimate
from core.parallel.comm import (
    Collective,
    Span,
    bubble_fraction,
    group_span,
    plan_links,
    ring_factor,
    step_communication,
)
from core.params import param_counts
from core.plan import (
    CheckpointPolicy,
    Hardware,
    Method,
    Offload,
    Parallelism,
    PipelineSchedule,
    Plan,
    Stack,
    Strategy,
    Workload,
)
from core.presets import plan_for_model
from core.roles import dtypes_for
from core.training.compute import compute_estimate


def _full(model: str = "llama-3.1-8b", **workload: int) -> Plan:
    shape = {"micro_batch": 1, "seq_len": 4096, "grad_accum": 1, "tokens": 10**9} | workload
    # A typed utilisation: these tests are about what the GPUs exchange, on top of a fixed compute.
    hardware = Hardware(gpu="h100-sxm", utilisation=0.4)
    return plan_for_model(model, method=Method.FULL, workload=Workload(**shape), hardware=hardware)


def _compute(plan: Plan):  # type: ignore[no-untyped-def]
    return compute_estimate(plan, param_counts(plan), find_gpu("h100-sxm"))


# ---- the link catalogue --------------------------------------------------------------


def test_the_plan_defaults_name_links_in_the_catalogue() -> None:
    par = Parallelism()
    assert par.intra_link == "auto" and find_link(par.inter_link).kind is LinkKind.INTER
    # Issue 26, item 13: the link within a node is the card's own (datasheets): NVLink 4 on an
    # H100 SXM, NVLink 3 on an A100 SXM, PCIe 4.0 on an RTX 4090 or L40S, which have no NVLink.
    own = {gpu: intra_link_of("auto", gpu).id for gpu in ("h100-sxm", "a100-80gb-sxm", "rtx-4090", "l40s")}
    assert own == {"h100-sxm": "nvlink4", "a100-80gb-sxm": "nvlink3", "rtx-4090": "pcie4-x16", "l40s": "pcie4-x16"}
    assert intra_link_of("auto", "custom").kind is LinkKind.INTRA
    for gpu in load_gpus():
        assert intra_link_of("auto", gpu.id).kind is LinkKind.INTRA, gpu.id


def test_every_link_carries_its_sources_and_per_direction_figures() -> None:
    links = {link.id: link for link in load_links()}
    for link in links.values():
        assert link.source and link.efficiency_source
        assert 0 < link.bus_efficiency <= 1 and link.latency_us > 0
        if link.kind is LinkKind.INTRA:
            assert link.host_link in links and links[link.host_link].id.startswith("pcie")
    # Vendors quote NVLink both ways: A100 600 GB/s, H100 900 GB/s, B200 1.8 TB/s (datasheets).
    assert [links[i].bandwidth_gb_s * 2 for i in ("nvlink3", "nvlink4", "nvlink5")] == [600, 900, 1800]
    # A NIC's line rate in Gb/s over 8: HDR 200, NDR 400, XDR 800 Gb/s.
    assert [links[i].bandwidth_gb_s * 8 for i in ("ib-hdr200", "ib-ndr400", "ib-xdr800")] == [200, 400, 800]
    # What NCCL reaches on NVLink 4: 370 of 450 GB/s (S. Jeaugey, nccl-tests issue #212).
    assert links["nvlink4"].bus_bytes_per_second / 1e9 == pytest.approx(370, abs=2)


def test_an_unknown_link_is_refused_with_the_field_named() -> None:
    plan = _full().on_gpus(16).with_parallel(inter_link="token-ring")
    with pytest.raises(PlanError, match=r"parallel\.inter_link: 'token-ring'.*vramplan links"):
        estimate(plan)
    # One GPU without offload never reaches the links: the plan estimates as before.
    assert estimate(_full().with_parallel(intra_link="nothing")).compute.comm_terms == ()


def test_a_malformed_link_catalogue_is_a_file_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "links.json"
    path.write_text(json.dumps({"format": "vramplan-link-catalogue", "links": [{"id": "x"}]}))
    with pytest.raises(PlanFileError, match="link entry 0 is malformed"):
        load_links.__wrapped__(str(path))


def test_the_links_subcommand_lists_the_catalogue(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["links"]) == 0
    out = capsys.readouterr().out
    assert all(link.id in out for link in load_links())
    assert main(["links", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {row["id"] for row in rows} == {link.id for link in load_links()}


def test_the_command_line_names_an_unknown_link_in_one_line(capsys) -> None:  # type: ignore[no-untyped-def]
    code = main(["estimate", "-m", "llama-3.1-8b", "--nodes", "2", "--gpus-per-node", "8", "--interconnect", "smoke"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "parallel.inter_link" in err and "Traceback" not in err


# ---- collective volumes --------------------------------------------------------------


@pytest.mark.parametrize("ranks", [2, 4, 8, 64])
def test_ring_volumes_are_nccls(ranks: int) -> None:
    # nccl-tests PERFORMANCE.md: all-reduce busbw = algbw × 2(n-1)/n; all-gather and
    # reduce-scatter × (n-1)/n (Patarasuk & Yuan 2009: the bandwidth-optimal ring).
    assert ring_factor(Collective.ALL_REDUCE, ranks) == 2 * (ranks - 1) / ranks
    assert ring_factor(Collective.ALL_GATHER, ranks) == (ranks - 1) / ranks
    assert ring_factor(Collective.REDUCE_SCATTER, ranks) == (ranks - 1) / ranks
    assert ring_factor(Collective.ALL_REDUCE, 1) == 0


def test_ddp_all_reduces_the_gradients_once_per_step() -> None:
    plan = _full("llama-3.2-1b", grad_accum=4).on_gpus(8, Strategy.DDP)
    (term,) = _compute(plan).comm_terms
    grads = param_counts(plan).trainable * dtypes_for(plan).grad
    assert term.bytes == pytest.approx(2 * 7 / 8 * grads)
    links = plan_links(plan)
    bandwidth = links.intra.bus_bytes_per_second
    # 25 MiB buckets (DDP's bucket_cap_mb), each a NCCL launch with its latency.
    buckets = math.ceil(grads / (25 * 2**20))
    latency = links.latency(Collective.ALL_REDUCE, Span(8, 1))
    assert term.seconds == pytest.approx(term.bytes / bandwidth + buckets * latency)


def test_fsdp_gathers_twice_and_reduce_scatters_in_the_reduce_dtype() -> None:
    plan = (
        _full(grad_accum=2)
        .on_gpus(8, Strategy.FSDP)
        .with_parallel(fsdp_param_dtype=MpDtype.BF16, fsdp_reduce_dtype=MpDtype.FP32)
    )
    gather, reduce = _compute(plan).comm_terms
    params = param_counts(plan).total
    # Forward and (resharded after forward) backward, every micro-batch, in bf16.
    assert gather.bytes == pytest.approx(7 / 8 * params * 2 * 2 * 2)
    assert reduce.bytes == pytest.approx(7 / 8 * params * 4 * 2)
    kept = _compute(plan.with_parallel(reshard_after_forward=False)).comm_terms[0]
    assert kept.bytes == pytest.approx(gather.bytes / 2)


def test_zero_stages_reduce_and_regather_what_deepspeed_does() -> None:
    plan = _full(grad_accum=4).on_gpus(8, Strategy.ZERO2)
    reduce, gather = _compute(plan).comm_terms
    one = _compute(plan.with_parallel(strategy=Strategy.ZERO1)).comm_terms[0]
    assert reduce.bytes == pytest.approx(4 * one.bytes)  # ZeRO-2 every micro-batch, ZeRO-1 once
    assert not reduce.overlapped  # overlap_comm defaults to False below stage 3 (DeepSpeed 0.19.8)
    assert gather.bytes == pytest.approx(7 / 8 * param_counts(plan).trainable * dtypes_for(plan).param)


def test_megatrons_distributed_optimizer_gathers_the_bf16_model_parameters() -> None:
    # NVIDIA/Megatron-LM d98e8a64 param_and_grad_buffer.py start_param_sync: "Use param dtype (e.g.,
    # bf16), NOT grad dtype"; the model's parameters are bf16 under --bf16, the fp32 copy is the
    # optimizer's. 8 GPUs: 7/8 of the trainable parameters × 2 B; the gradients stay 4 B here.
    plan = replace(_full().on_gpus(8, Strategy.ZERO1), stack=Stack.MEGATRON)
    reduce, gather = _compute(plan).comm_terms
    trainable = param_counts(plan).trainable
    assert gather.bytes == pytest.approx(7 / 8 * trainable * 2)
    assert reduce.bytes == pytest.approx(7 / 8 * trainable * dtypes_for(plan).grad)


def test_tensor_parallel_moves_four_activations_per_layer_and_micro_batch() -> None:
    plan = _full(micro_batch=2, grad_accum=3).on_gpus(8).with_parallel(tensor_parallel=8)
    (term,) = _compute(plan).comm_terms
    activation = 2 * 4096 * plan.model.hidden_size * dtypes_for(plan).compute
    # Megatron: 2 all-reduces forward, 2 backward per layer (Korthikanti et al. 2022, section 4.2.2).
    assert term.bytes == pytest.approx(2 * 7 / 8 * activation * 4 * plan.model.num_layers * 3)
    assert not term.overlapped
    recomputed = _compute(plan.with_changes(checkpointing=True)).comm_terms[0]
    assert recomputed.bytes == pytest.approx(term.bytes * 6 / 4)


def test_a_group_across_nodes_runs_at_its_nics() -> None:
    # TP 8 fills each node: every data-parallel group has one GPU per node and one NIC.
    assert group_span(4, 8, 8) == Span(1, 4)
    assert group_span(16, 1, 8) == Span(8, 2)
    # A group can never span more nodes than the run has: on one node it stays there.
    assert group_span(2, 8, 8) == Span(1, 2) and group_span(2, 8, 8, nodes=1) == Span(2, 1)
    plan = _full().on_gpus(32, Strategy.DDP).with_parallel(tensor_parallel=8)
    links = plan_links(plan)
    nic = find_link("ib-ndr400").bus_bytes_per_second
    assert links.bus_bandwidth(Span(1, 4)) == nic
    # 8 GPUs per node bring 8 NICs: the ring runs at the slower of NVLink and 8 NICs.
    assert links.bus_bandwidth(Span(8, 2)) == min(links.intra.bus_bytes_per_second, 8 * nic)


# ---- overlap, bubble, step time -------------------------------------------------------


def test_a_ring_across_nodes_pays_nccls_network_hop_of_its_current_releases() -> None:
    # NCCL's ring / Simple latency model (src/graph/tuning.cc, NVIDIA/nccl v2.18.1-1, the release
    # torch 2.1 requires, through v2.30.7-1): baseLat 8.4 µs + (steps − inter-node steps) ×
    # hwLat[NVLINK] 3.4 µs + inter-node steps × hwLat[NET] 14.0 µs; an all-gather over 512 ranks on
    # 64 nodes takes 511 steps, 63 of them between nodes (llm-foundry's H100 1b on 512 GPUs).
    # NCCL 2.7.5 (commit 01afd20) and 2.17 had 9.6 µs for the network hop.
    links = plan_links(_full().on_gpus(512, Strategy.FSDP))
    expected = (8.4 + 448 * 3.4 + 63 * 14.0) * 1e-6
    assert links.latency(Collective.ALL_GATHER, Span(8, 64)) == pytest.approx(expected)
    assert all(link.latency_us == 14.0 for link in load_links() if link.kind is LinkKind.INTER)


def test_the_bubble_is_narayanans() -> None:
    plan = _full(grad_accum=8).on_gpus(8).with_parallel(pipeline_parallel=4)
    assert bubble_fraction(plan) == 3 / 8  # (p-1)/m
    assert bubble_fraction(plan.with_parallel(schedule=PipelineSchedule.GPIPE)) == 3 / 8
    interleaved = plan.with_parallel(schedule=PipelineSchedule.INTERLEAVED, virtual_stages=2)
    assert bubble_fraction(interleaved) == 3 / 16  # (p-1)/(v·m)
    c = _compute(plan)
    assert c.bubble_fraction == 3 / 8
    assert c.step_seconds == pytest.approx(c.compute_seconds_per_step * (1 + 3 / 8) + c.exposed_comm_seconds_per_step)
    compute_only = c.flops / (c.peak_tflops * 1e12 * 0.4 * 8)
    assert c.seconds == pytest.approx(compute_only * c.step_seconds / c.compute_seconds_per_step)


def test_overlapped_collectives_expose_only_what_the_compute_cannot_hide() -> None:
    plan = _full(micro_batch=2, seq_len=8192).on_gpus(8, Strategy.FSDP)
    c = _compute(plan)
    assert c.comm_seconds_per_step < c.compute_seconds_per_step  # NVLink keeps up
    floors = sum(t.unhidden_seconds for t in c.comm_terms)
    assert c.exposed_comm_seconds_per_step == pytest.approx(floors)
    # Slow Ethernet across 16 nodes with a tiny batch: the gathers outrun the compute.
    slow = _compute(_full(seq_len=512).on_gpus(128, Strategy.FSDP).with_parallel(inter_link="roce-100"))
    excess = slow.comm_seconds_per_step - slow.compute_seconds_per_step
    assert slow.exposed_comm_seconds_per_step >= excess > 0


def test_overlapped_data_parallel_collectives_still_cost_the_compute_their_contention_share() -> None:
    # NCCL's kernels hold SMs while they run beside the compute (core.parallel.comm._contended):
    # a share of the overlapped data-parallel time is lost even when the compute could hide it.
    plan = _full("llama-3.1-8b", micro_batch=2, seq_len=8192).on_gpus(128, Strategy.FSDP)
    counts = param_counts(plan)
    free = step_communication(plan, counts, 10.0, 1 / 3, 0.5, 0.0)
    held = step_communication(plan, counts, 10.0, 1 / 3, 0.5, 0.2)
    data_parallel = [t for t in free.terms if t.data_parallel]
    assert [t.label.split()[1] for t in data_parallel] == ["parameter", "gradient"]
    assert free.comm_seconds < 10.0  # the compute hides every byte: only the structural floors wait
    hidden = sum(t.seconds - t.unhidden_seconds for t in data_parallel)
    assert held.exposed_seconds == pytest.approx(free.exposed_seconds + 0.2 * hidden)
    assert any("20% of their time still slows it" in a for a in held.assumptions)
    assert not any("still slows it" in a for a in free.assumptions)
    # More GPUs, longer rings, more contention: the weak-scaling loss MosaicML's tables show.
    bigger = step_communication(plan.on_gpus(512, Strategy.FSDP), counts, 10.0, 1 / 3, 0.5, 0.2)
    assert bigger.exposed_seconds > held.exposed_seconds


def test_offload_adds_the_pcie_copies_even_on_one_gpu() -> None:
    plan = _full("llama-3.2-1b").with_parallel(offload=Offload.OPTIMIZER)
    c = _compute(plan)
    pcie = find_link("pcie5-x16")  # nvlink4's host link: H100 is a PCIe 5.0 device
    trainable = param_counts(plan).trainable
    dt = dtypes_for(plan)
    assert [t.bytes for t in c.comm_terms] == [trainable * dt.grad, trainable * dt.param]
    copies = trainable * (dt.grad + dt.param)
    assert c.exposed_comm_seconds_per_step == pytest.approx(copies / pcie.bus_bytes_per_second)
    # The CPU optimizer step is timed apart (tests/core/test_offload_time.py), not as communication.
    assert any("the CPU optimizer step is timed apart" in a for a in c.assumptions)


def test_one_gpu_keeps_the_single_gpu_time_exactly() -> None:
    plan = _full()
    c = _compute(plan)
    assert c.seconds == pytest.approx(c.flops / (c.peak_tflops * 1e12 * plan.hardware.utilisation), rel=1e-12)
    assert (c.comm_seconds_per_step, c.exposed_comm_seconds_per_step, c.bubble_fraction) == (0, 0, 0)
    assert "exposed" not in c.formula


def test_the_formula_shows_the_step_arithmetic() -> None:
    c = _compute(_full(grad_accum=8).on_gpus(16).with_parallel(pipeline_parallel=4))
    assert f"(1 + {c.bubble_fraction:.3g} bubble)" in c.formula and "exposed communication" in c.formula


# ---- end to end: torchtitan's published Llama 3.1 8B throughput ----------------------


def test_fsdp_scaling_from_8_to_128_h100s_matches_torchtitan_within_3_percent() -> None:
    """torchtitan docs/performance.md (commit eaea6f6; torch 1963fc8, 2024-12): Llama 3.1 8B,
    FSDP (bf16 params, fp32 reduce: torchtitan's mixed precision defaults), local batch 2,
    sequence 8192, H100 with 400 Gb/s RDMA per GPU: 5,762 tokens/s per GPU on 8 GPUs
    (table 1), 5,605 on 128 (table 3). The utilisation is set so the 8-GPU figure is met;
    the 128-GPU figure is then a prediction of what communication costs at 16 nodes.

    Result: 5,759 predicted against 5,605 published, +2.7 %: the model sees almost no
    scaling loss (the gathers hide under the compute), the run lost 2.7 %. Selective
    activation checkpointing and torchtitan's own MFU accounting are not modelled."""
    base = _full(micro_batch=2, seq_len=8192)

    def per_gpu(count: int, utilisation: float) -> float:
        plan = base.with_hardware(utilisation=utilisation).on_gpus(count, Strategy.FSDP)
        plan = plan.with_parallel(fsdp_param_dtype=MpDtype.BF16, fsdp_reduce_dtype=MpDtype.FP32, inter_link="roce-400")
        return _compute(plan).tokens_per_second / count

    utilisation = 0.4
    for _ in range(20):  # fixed point: throughput is proportional to utilisation up to the exposed part
        utilisation *= 5762 / per_gpu(8, utilisation)
    assert per_gpu(8, utilisation) == pytest.approx(5762, rel=1e-6)
    predicted = per_gpu(128, utilisation)
    assert predicted == pytest.approx(5605, rel=0.03)
    assert predicted <= per_gpu(8, utilisation)  # more nodes never speed a GPU up


def test_context_parallel_ranks_reduce_and_shard_with_the_data_parallel_ones() -> None:
    # torchtitan parallel_dims.py: fully_shard's mesh is dp_shard × cp (CP ranks hold the
    # same parameters and see other tokens of the same sequences).
    plan = _full(seq_len=8192).on_gpus(8, Strategy.FSDP).with_parallel(context_parallel=2)
    _gather, reduce, ring, ring_grads = _compute(plan).comm_terms
    grads = param_counts(plan).trainable * dtypes_for(plan).grad
    assert reduce.bytes == pytest.approx(7 / 8 * grads)  # over 4 DP × 2 CP ranks, not 4
    assert "K/V" in ring.label and "dK/dV" in ring_grads.label
    # Only context parallel (DP 1): DDP still all-reduces the gradients over the CP ranks.
    ddp = _compute(_full(seq_len=8192).on_gpus(2, Strategy.DDP).with_parallel(context_parallel=2))
    assert ddp.comm_terms[0].bytes == pytest.approx(2 * 1 / 2 * grads)


def test_pytorch_ring_attention_gathers_kv_per_call_and_waits_for_the_last_dkv_send() -> None:
    # torch.distributed.tensor.experimental._attention (pytorch/pytorch@0123248a): with the
    # "allgather" rotation torchtitan 9dec370 sets, each ring call gathers every rank's K and V
    # once; the backward sends dK/dV on in float32 after each of its CP steps and waits for the
    # last after the loop. torchtitan repeats the K/V heads before SDPA (model.py repeat_kv),
    # so both travel at the query heads' width.
    plan = _full(seq_len=32768).on_gpus(8, Strategy.FSDP).with_parallel(context_parallel=4)
    plan = replace(plan, checkpointing=True, checkpoint_policy=CheckpointPolicy.FULL)
    terms = {t.label: t for t in _compute(plan).comm_terms}
    gather = terms["context-parallel K/V all-gather"]
    grads = terms["context-parallel dK/dV ring (float32)"]
    model, layers = plan.model, plan.model.num_layers
    local = plan.workload.micro_batch * 32768 / 4 * model.q_width
    calls = 3 * layers * plan.workload.grad_accum  # forward, its recompute, backward
    assert gather.bytes == pytest.approx(3 / 4 * (2 * local * 2 * 4) * calls)
    assert grads.bytes == pytest.approx(2 * local * 4 * 4 * layers * plan.workload.grad_accum)
    assert grads.unhidden_seconds == pytest.approx(grads.seconds / 4)
    # Megatron's Transformer Engine ring keeps its point-to-point K/V sends.
    megatron = _compute(replace(plan, stack=Stack.MEGATRON)).comm_terms
    assert [t.label for t in megatron if "context" in t.label] == ["context-parallel K/V ring"]


def test_the_ring_attentions_kv_all_gather_hides_only_under_the_first_steps_kernel() -> None:
    # pytorch/pytorch@0123248a _templated_ring_attention: the all-gather is issued before the
    # first step's SDPA (exchange_buffers at i = 0) and waited for at the second
    # (_AllGatherRotater.next_buffer at i = 1): its window is the first step's attention, 1/CP
    # of the call's balanced work, not the whole step. Across nodes (TP 8 inside each node, CP 8
    # over 400 Gb/s links) part of it now waits; one node's NVLink still hides it.
    plan = _full(seq_len=262144).on_gpus(64, Strategy.FSDP).with_parallel(tensor_parallel=8, context_parallel=8)
    plan = replace(plan, checkpointing=True, checkpoint_policy=CheckpointPolicy.FULL)
    counts = param_counts(plan)
    whole = step_communication(plan, counts, 6.0, 1 / 3)
    first = step_communication(plan, counts, 6.0, 1 / 3, attention_share=0.9)
    gather = next(t for t in first.terms if t.label == "context-parallel K/V all-gather")
    assert gather.window_seconds == pytest.approx(6.0 * 0.9 / 8)
    assert gather.seconds > gather.window_seconds  # ~1 s of gathers over the 0.68 s window
    assert first.exposed_seconds > whole.exposed_seconds
    one_node = _full(seq_len=262144).on_gpus(8, Strategy.FSDP).with_parallel(context_parallel=8)
    one_node = replace(one_node, checkpointing=True, checkpoint_policy=CheckpointPolicy.FULL)
    counts = param_counts(one_node)  # its step: ~35 s of compute, 85 % attention (TRAINING_TIME.md)
    assert step_communication(one_node, counts, 35.0, 1 / 3, attention_share=0.85).exposed_seconds == pytest.approx(
        step_communication(one_node, counts, 35.0, 1 / 3).exposed_seconds
    )


# NVIDIA/nccl@d97a32fa (v2.18.1-1) src/graph/tuning.cc, the all-reduce the tuner may run as a tree:
# ncclTopoTuneModel's tree latency 2 × ((nRanks/nNodes − 1) × hwLat[NVLINK][Tree][Simple] 28 µs +
# log2i(nNodes) × hwLat[NET][Tree][Simple] 28 µs), its bandwidth the bus bandwidth × .92 × .5, and
# ncclTopoGetAlgoTime's treeCorrectionFactor[Simple] (.7 at log2i(25 MiB >> 6) = 18) and the ring's
# "Plateau effect" × 1.4 on a multi-node Simple all-reduce (sm80+).
def test_an_all_reduce_across_many_nodes_runs_as_nccls_tree() -> None:
    links = plan_links(_full().on_gpus(512, Strategy.DDP))
    bucket = 25 * 2**20
    bandwidth = links.bus_bandwidth(Span(8, 64))
    tree = 2 * (7 * 28 + 6 * 28) * 1e-6 + bucket / (bandwidth * 0.92 * 0.5 * 0.7)
    ring = 2 * 511 / 512 * bucket / bandwidth + 1.4 * links.latency(Collective.ALL_REDUCE, Span(8, 64))
    assert tree < ring
    assert links.all_reduce(bucket, Span(8, 64)) == (pytest.approx(tree), "tree")


def test_an_all_reduce_on_two_nodes_stays_a_ring_with_nccls_plateau() -> None:
    links = plan_links(_full().on_gpus(16, Strategy.DDP))
    bucket = 25 * 2**20
    plateau = 1.4 * links.latency(Collective.ALL_REDUCE, Span(8, 2))
    ring = 2 * 15 / 16 * bucket / links.bus_bandwidth(Span(8, 2)) + plateau
    assert links.all_reduce(bucket, Span(8, 2)) == (pytest.approx(ring), "ring")
    # Within a node NCCL's ring without the plateau (the multi-node test of ncclTopoGetAlgoTime).
    one_node = 2 * 7 / 8 * bucket / links.bus_bandwidth(Span(8, 1)) + links.latency(Collective.ALL_REDUCE, Span(8, 1))
    assert links.all_reduce(bucket, Span(8, 1)) == (pytest.approx(one_node), "ring")


def test_ddp_across_64_nodes_charges_each_bucket_nccls_tree_and_says_so() -> None:
    plan = _full("llama-3.2-1b").on_gpus(512, Strategy.DDP)
    (term,) = _compute(plan).comm_terms
    grads = param_counts(plan).trainable * dtypes_for(plan).grad
    buckets = math.ceil(grads / (25 * 2**20))
    one, algorithm = plan_links(plan).all_reduce(grads / buckets, Span(8, 64))
    assert algorithm == "tree" and term.seconds == pytest.approx(buckets * one)
    assert "as NCCL's tree, the faster" in term.formula


def test_sequence_parallel_collectives_across_nodes_stay_rings() -> None:
    # An all-gather and a reduce-scatter: NCCL runs neither as a tree (tuning.cc skips every
    # algorithm but the ring for them in v2.18.1-1).
    plan = _full().on_gpus(32, Strategy.DDP).with_parallel(tensor_parallel=8, gpus_per_node=4, sequence_parallel=False)

    def tensor_parallel(plan: Plan) -> str:
        return next(t.formula for t in _compute(plan).comm_terms if t.label.startswith("tensor-parallel"))

    assert "as NCCL's ring" in tensor_parallel(plan)  # a true all-reduce over 2 nodes: the tuner's pick
    sequence_parallel = tensor_parallel(plan.with_parallel(sequence_parallel=True))
    assert "NCCL's" not in sequence_parallel and "ms latency" in sequence_parallel

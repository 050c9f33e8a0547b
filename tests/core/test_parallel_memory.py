"""Per-rank memory of multi-GPU plans: what each framework keeps on a rank (core.parallel).

Numbers come from the frameworks' source (named per test) and from the project's own
single-GPU estimate, which the per-rank model must reduce to on one GPU.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from core.breakdown import BucketKey, StepPhase
from core.cli.app import main
from core.dtypes import MpDtype
from core.estimate import Estimate, estimate
from core.files import planfile
from core.plan import Accounting, Method, Offload, Plan, Preset, Strategy
from core.presets import plan_for_model

DATA = Path(__file__).resolve().parents[1] / "data" / "plans"


def _plan(model: str = "llama-3.2-1b", **parallel: object) -> Plan:
    plan = plan_for_model(model).with_changes(preset=Preset.TRAINER_BF16)
    plan = plan.with_workload(micro_batch=2, seq_len=2048)
    return plan.with_parallel(**parallel) if parallel else plan


def _phase(est: Estimate, kind: StepPhase) -> float:
    return max(p.allocated_bytes for p in est.phases if p.kind is kind)


def test_one_gpu_is_the_single_gpu_estimate_with_one_rank() -> None:
    est = estimate(_plan())
    assert len(est.ranks) == 1 and est.worst_rank == 0
    assert est.worst.peak_bytes == est.peak_bytes and est.worst.total_bytes == est.total_bytes


def test_ddp_keeps_a_second_copy_of_the_gradients_in_its_buckets() -> None:
    # reducer.cpp initialize_buckets: one flat buffer per bucket covering every trainable
    # parameter, in its dtype; gradient_as_bucket_view=False keeps param.grad apart.
    one, eight = estimate(_plan()), estimate(_plan(gpus_per_node=8, strategy=Strategy.DDP))
    grads = one.params.trainable * 2  # bf16 gradients (trainer-bf16)
    for kind in (StepPhase.FORWARD, StepPhase.OPTIMIZER):
        assert _phase(eight, kind) - _phase(one, kind) == pytest.approx(grads, rel=1e-9)


def test_fsdp_shards_weights_gradients_and_state_and_gathers_the_root() -> None:
    plan = _plan(gpus_per_node=8, strategy=Strategy.FSDP)
    est = estimate(plan)
    model, p = plan.model, est.params.total
    step = next(ph for ph in est.phases if ph.kind is StepPhase.OPTIMIZER)
    single_step = next(ph for ph in estimate(_plan()).phases if ph.kind is StepPhase.OPTIMIZER)
    assert step.bucket(BucketKey.WEIGHTS).bytes == pytest.approx(p * 2 / 8)
    assert step.bucket(BucketKey.GRADIENTS).bytes == pytest.approx(p * 2 / 8)
    assert step.bucket(BucketKey.OPTIMIZER).bytes == pytest.approx(single_step.bucket(BucketKey.OPTIMIZER).bytes / 8)
    # The root (tied embedding = head, final norm) stays gathered through the forward.
    forward = next(ph for ph in est.phases if ph.kind is StepPhase.FORWARD)
    root = sum(t.bytes for t in forward.bucket(BucketKey.WEIGHTS).terms if "root" in t.label)
    assert root == pytest.approx((model.embedding_params() + model.norm_params()) * 2)


def test_fsdp_without_resharding_keeps_every_block_gathered() -> None:
    base = _plan(gpus_per_node=8, strategy=Strategy.FSDP)
    kept = estimate(base.with_parallel(reshard_after_forward=False))
    resharded = estimate(base)
    block = base.model.layer_params() * 2
    extra = _phase(kept, StepPhase.FORWARD) - _phase(resharded, StepPhase.FORWARD)
    assert extra == pytest.approx(base.model.num_layers * block, rel=1e-9)


def test_fsdp_mixed_precision_gathers_and_computes_in_bf16() -> None:
    fp32 = plan_for_model("llama-3.2-1b").with_changes(preset=Preset.FP32).with_workload(micro_batch=2, seq_len=2048)
    plain = fp32.with_parallel(gpus_per_node=8, strategy=Strategy.FSDP)
    mixed = plain.with_parallel(fsdp_param_dtype=MpDtype.BF16, fsdp_reduce_dtype=MpDtype.FP32)
    a, b = estimate(plain), estimate(mixed)
    # The sharded state stays float32; the gathered units and the activations halve.
    step = next(ph for ph in b.phases if ph.kind is StepPhase.OPTIMIZER)
    assert step.bucket(BucketKey.WEIGHTS).bytes == pytest.approx(b.params.total * 4 / 8)
    fa = next(ph for ph in a.phases if ph.kind is StepPhase.FORWARD)
    fb = next(ph for ph in b.phases if ph.kind is StepPhase.FORWARD)
    assert fb.bucket(BucketKey.ACTIVATIONS).bytes < 0.75 * fa.bucket(BucketKey.ACTIVATIONS).bytes


def test_zero_stages_shard_one_more_kind_of_state_each() -> None:
    peaks = {s: estimate(_plan(gpus_per_node=8, strategy=s)) for s in (Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3)}
    p = peaks[Strategy.ZERO1].params.total
    # Stages 1 and 2 keep the 16-bit parameters whole, stage 3 a 1/8 partition (+ gathered modules).
    z1 = next(ph for ph in peaks[Strategy.ZERO1].phases if ph.kind is StepPhase.OPTIMIZER)
    z3 = next(ph for ph in peaks[Strategy.ZERO3].phases if ph.kind is StepPhase.OPTIMIZER)
    assert z1.bucket(BucketKey.WEIGHTS).bytes == pytest.approx(p * 2)
    assert z3.bucket(BucketKey.WEIGHTS).bytes == pytest.approx(p * 2 / 8)
    # stage_1_and_2.py: float32 master partition + float32 Adam moments + the float32
    # gradient of the partition at the step: 16 B per parameter ÷ 8.
    assert z1.bucket(BucketKey.OPTIMIZER).bytes == pytest.approx(p * 16 / 8, rel=1e-3)
    # With accumulation the forward holds what the backward accumulates into: stage 1 the
    # whole param.grad and the ipg bucket the first micro-batch's backward allocated (freed only
    # at the accumulation boundary: stage_1_and_2.py setup_buckets / _release_ipg_buffers), stage 2
    # its reduced partition (grads_in_partition), stage 3 the partition and the reduce bucket it
    # allocates at start-up (reduce_bucket_size, 5e8, whatever T: stage3.py __init__).
    held = {
        s: next(
            ph
            for ph in estimate(_plan(gpus_per_node=8, strategy=s).with_workload(grad_accum=2)).phases
            if ph.kind is StepPhase.FORWARD
        )
        .bucket(BucketKey.GRADIENTS)
        .bytes
        for s in peaks
    }
    assert held[Strategy.ZERO1] == pytest.approx(p * 2 + 5e8 * 2)
    assert held[Strategy.ZERO2] == pytest.approx(p * 2 / 8)
    assert held[Strategy.ZERO3] == pytest.approx(p * 2 / 8 + 5e8 * 2)
    # Without accumulation the peak is where the backward starts, before any gradient: stages
    # 1 and 2 peak alike there; stage 3 has sharded the parameters, but it also holds the forward's
    # tail gathered there (5.0e8 elements: core.parallel.state._zero3_forward_tail, DeepSpeed v0.11.1
    # partitioned_param_coordinator.py ``__params_to_release``) and its start-up reduce bucket (5e8
    # elements): on this 1.2B model that outweighs the 7/8 of its 2.5 GB it shards, on an 8B not.
    assert peaks[Strategy.ZERO2].peak_bytes <= peaks[Strategy.ZERO1].peak_bytes
    big = {s: estimate(_plan("llama-3.1-8b", gpus_per_node=8, strategy=s)).peak_bytes for s in peaks}
    assert big[Strategy.ZERO3] < big[Strategy.ZERO2] <= big[Strategy.ZERO1]


def test_zero1s_flattened_gradient_partition_is_labelled_at_its_own_width() -> None:
    # ZeRO-1 flattens the gradients in their own dtype (DeepSpeed edaa7221 stage_1_and_2.py,
    # the partition is a view of the flat buffer): float32 for a float32 run (bf16 not enabled),
    # bf16 under bf16, whose engine casts float32 weights to bf16 too (engine.py
    # _configure_distributed_model; core.roles.deepspeed_cast_weights). The label said "16-bit" for all.
    cases = ((Preset.FP32, "32-bit", 4), (Preset.FP32_AUTOCAST_BF16, "16-bit", 2), (Preset.TRAINER_BF16, "16-bit", 2))
    for preset, width, size in cases:
        plan = _plan(gpus_per_node=8, strategy=Strategy.ZERO1).with_changes(preset=preset)
        est = estimate(plan)
        step = next(ph for ph in est.phases if ph.kind is StepPhase.OPTIMIZER)
        (term,) = [t for t in step.bucket(BucketKey.GRADIENTS).terms if "gradient partition" in t.label]
        assert term.label.startswith(width), term.label
        assert term.bytes == pytest.approx(est.params.trainable * size / 8)


def test_optimizer_offload_moves_the_state_to_the_host() -> None:
    on_gpu = estimate(_plan(gpus_per_node=8, strategy=Strategy.FSDP))
    off = estimate(_plan(gpus_per_node=8, strategy=Strategy.FSDP, offload=Offload.OPTIMIZER))
    state = next(ph for ph in on_gpu.phases if ph.kind is StepPhase.OPTIMIZER).bucket(BucketKey.OPTIMIZER).bytes
    assert all(ph.bucket(BucketKey.OPTIMIZER).bytes == 0 for ph in off.phases)
    assert off.host is not None and on_gpu.host is not None
    offloaded = sum(t.bytes for t in off.host.terms if "Adam" in t.label)
    assert offloaded == pytest.approx(8 * state, rel=1e-6)  # eight ranks on the node


def test_optimizer_offload_on_one_gpu_moves_the_state_off_it_too() -> None:
    # One GPU with offload is DeepSpeed ZeRO-Offload with one rank (stage_1_and_2.py v0.19.6
    # edaa7221: cpu_offload puts the master and Adam state on ``self.device`` = 'cpu', line
    # 238, whatever the world size) or a CPU optimizer beside the replica: the state leaves
    # the card, as it does on eight. Before the fix it stayed on the GPU and on the host.
    for strategy in (Strategy.DDP, Strategy.ZERO2):
        plain = estimate(_plan(strategy=strategy))
        off = estimate(_plan(strategy=strategy, offload=Offload.OPTIMIZER))
        assert all(ph.bucket(BucketKey.OPTIMIZER).bytes == 0 for ph in off.phases), strategy
        assert off.host is not None and off.peak_bytes < plain.peak_bytes
    # The plain single-GPU state (DDP: AdamW's two bf16 moments of trainer-bf16) is what moved.
    ddp = estimate(_plan())
    state = next(ph for ph in ddp.phases if ph.kind is StepPhase.OPTIMIZER).bucket(BucketKey.OPTIMIZER)
    off = estimate(_plan(offload=Offload.OPTIMIZER))
    assert off.host is not None
    moved = sum(t.bytes for t in off.host.terms if "pinned" in t.label)
    assert moved >= sum(t.bytes for t in state.terms if "temporar" not in t.label)


def test_parameter_offload_leaves_only_the_gathered_units_and_buffers() -> None:
    est = estimate(_plan(gpus_per_node=8, strategy=Strategy.FSDP, offload=Offload.PARAMS))
    step = next(ph for ph in est.phases if ph.kind is StepPhase.OPTIMIZER)
    assert step.allocated_bytes == 0  # the step runs on the CPU
    forward = next(ph for ph in est.phases if ph.kind is StepPhase.FORWARD)
    assert all("gathered" in t.label or "in flight" in t.label for t in forward.bucket(BucketKey.WEIGHTS).terms)


def test_checkpoint_loading_on_every_rank_without_sharding() -> None:
    # HF from_pretrained materialises the state dict in every DDP process; with FSDP the
    # estimate assumes rank-0 loading (accelerate fsdp_cpu_ram_efficient_loading).
    plan = _plan("llama-3.1-8b", gpus_per_node=8, host_ram_gb=100.0)
    ddp, fsdp = estimate(plan), estimate(plan.with_parallel(strategy=Strategy.FSDP))
    assert ddp.host is not None and fsdp.host is not None
    load = ddp.params.total * 2
    assert any(t.bytes == pytest.approx(8 * load) for t in ddp.host.terms)
    assert any(t.bytes == pytest.approx(load) for t in fsdp.host.terms)
    assert ddp.host.verdict.value == "oom" and fsdp.host.verdict.value == "fits"


def test_pipeline_stages_are_ranks_and_the_worst_decides() -> None:
    plan = _plan("llama-3.1-8b", gpus_per_node=8, pipeline_parallel=4, strategy=Strategy.FSDP)
    plan = plan.with_workload(micro_batch=1, seq_len=4096, grad_accum=8)
    est = estimate(plan)
    assert [r.label for r in est.ranks] == ["stage 1 of 4 (first)", "stages 2-3 of 4 (middle)", "stage 4 of 4 (last)"]
    assert est.worst_rank == max(range(3), key=lambda i: est.ranks[i].total_bytes)
    assert est.total_bytes == est.ranks[est.worst_rank].total_bytes
    assert [r.count for r in est.ranks] == [2, 4, 2]  # 8 GPUs ÷ 4 stages; two middle stages


def test_the_command_line_gives_every_rank_and_the_host(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "-m", "llama-3.1-8b", "--gpus", "8", "--pp", "2", "--strategy", "fsdp", "--accum", "4"]
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in doc["ranks"]] == ["stage 1 of 2 (first)", "stage 2 of 2 (last)"]
    worst = doc["ranks"][doc["worst_rank"]]
    assert (doc["peak_bytes"], doc["total_bytes"]) == (worst["peak_bytes"], worst["total_bytes"])
    # Host RAM not given (issue 26, item 13: 2 TB was assumed even for a desktop): needed, not judged.
    assert doc["host_capacity_bytes"] is None and doc["host_bytes"] > 0
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "stage 1 of 2 (first)" in text and "stage 2 of 2 (last)" in text and "host per node" in text


def test_lesson_accounting_keeps_the_lessons_sum_on_every_ddp_gpu_and_divides_it_as_zero() -> None:
    # DDP replicates the lesson's whole sum; sharding divides it as the ZeRO paper does
    # (tests/core/test_lesson.py checks its Figure 1 figures).
    one = replace(_plan(), accounting=Accounting.LESSON)
    ddp = replace(_plan(gpus_per_node=8, strategy=Strategy.DDP), accounting=Accounting.LESSON)
    fsdp = replace(_plan(gpus_per_node=8, strategy=Strategy.FSDP), accounting=Accounting.LESSON)
    assert estimate(ddp).peak_bytes == estimate(one).peak_bytes > estimate(fsdp).peak_bytes


def test_lora_with_fsdp_gathers_the_frozen_base_but_shards_little_state() -> None:
    plan = _plan(gpus_per_node=4, strategy=Strategy.FSDP).with_changes(method=Method.LORA)
    est = estimate(plan)
    assert est.worst.verdict.value == "fits"
    assert _phase(est, StepPhase.FORWARD) < _phase(estimate(plan.with_parallel(gpus_per_node=1)), StepPhase.FORWARD)


def test_zero3_gathers_the_largest_module_and_one_prefetch_bucket() -> None:
    # stage3.py / partitioned_param_coordinator.py: modules are gathered one at a time, with
    # up to stage3_prefetch_bucket_size (5e7) elements fetched ahead, within
    # stage3_max_live_parameters (1e9). Llama 3.2 1B's largest module is the (tied)
    # embedding: 128,256 × 2,048 elements (config.json). Checkpointed: without checkpointing the
    # forward's end holds the forward's tail instead (tests/core/test_zero3_reuse.py), and a
    # checkpointed block of this model (6.1e7 elements) is smaller than the embedding.
    plan = _plan(gpus_per_node=8, strategy=Strategy.ZERO3).with_changes(checkpointing=True)
    forward = next(ph for ph in estimate(plan).phases if ph.kind is StepPhase.FORWARD)
    gathered = sum(t.bytes for t in forward.bucket(BucketKey.WEIGHTS).terms if "gathered" in t.label)
    assert gathered == pytest.approx((128_256 * 2_048 + 50_000_000) * 2)
    small = plan.with_parallel(zero3_max_live_elements=128_256 * 2_048 + 1_000)
    forward = next(ph for ph in estimate(small).phases if ph.kind is StepPhase.FORWARD)
    gathered = sum(t.bytes for t in forward.bucket(BucketKey.WEIGHTS).terms if "gathered" in t.label)
    assert gathered == pytest.approx((128_256 * 2_048 + 1_000) * 2)


def test_gradients_as_bucket_views_are_the_buckets() -> None:
    # DistributedDataParallel(gradient_as_bucket_view=True): param.grad is a view into its
    # bucket (reducer.cpp initialize_bucket_views), so one copy of the gradients, held all run.
    copy = estimate(_plan(gpus_per_node=8, strategy=Strategy.DDP))
    view = estimate(_plan(gpus_per_node=8, strategy=Strategy.DDP, ddp_bucket_view=True))
    grads = view.params.trainable * 2
    assert _phase(copy, StepPhase.OPTIMIZER) - _phase(view, StepPhase.OPTIMIZER) == pytest.approx(grads)
    step = next(ph for ph in view.phases if ph.kind is StepPhase.OPTIMIZER)
    assert step.bucket(BucketKey.GRADIENTS).bytes == pytest.approx(grads)


def test_fsdp_reduces_the_root_last() -> None:
    # _fsdp_param_group.py post_backward reshards the root, then foreach_reduce copies its
    # unsharded gradients into a reduce-scatter input in reduce_dtype before freeing them.
    from core.parallel.layout import layout
    from core.params import param_counts
    from core.roles import dtypes_for
    from core.training import detailed

    plan = _plan("llama-3.1-8b", gpus_per_node=8, strategy=Strategy.FSDP, fsdp_reduce_dtype=MpDtype.FP32)
    lay = layout(plan)
    parts = detailed._parts(plan, param_counts(plan), dtypes_for(plan), detailed.Rank(lay, lay.stages[0]))
    root = 2 * 128_256 * 4_096 + 4_096  # embedding + head + final norm (Llama 3.1 8B config.json)
    reduce = parts.extra("root_reduce")
    assert [t.bytes for t in reduce] == pytest.approx([root * 2, root * 4])  # bf16 gradients, fp32 input
    assert sum(t.bytes for t in parts.extra("root_pending")) == pytest.approx(-root * 2 / 8)


def test_fsdp_offloading_its_parameters_subtracts_no_root_gradients() -> None:
    # FSDP2's CPUOffloadPolicy keeps the sharded gradients on the host, so the GPU holds none of
    # them for the root's (reduced last) to be missing from. The root's negative term stayed, and the
    # gradients bucket read −86 MB on this plan, which the GUI monkey test reached (seed 20240611):
    # TinyLlama full fine-tuning, FSDP2 on one GPU with its parameters offloaded.
    plan = planfile.loads((DATA / "fsdp-offload-root-gradients.vramplan.json").read_text())
    assert plan.parallel.offload is Offload.PARAMS and plan.method is Method.FULL
    est = estimate(plan)
    assert all(bucket.bytes >= 0 for bucket in est.buckets)
    assert not any("root's sharded gradients" in t.label for b in est.buckets for t in b.terms)


def test_fsdp_reduces_only_the_adapters_gradients_under_lora() -> None:
    # Issue 26, item 9: FSDP2 reduce-scatters only the parameters that have a gradient
    # (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py, post_backward:
    # fsdp_params_with_grad). Llama 3.1 70B LoRA on 8 GPUs counted a whole block in float32
    # (3.4 GB) where a block's adapters are 16,384,000 / 80 = 204,800 float32 gradients.
    plan = plan_for_model("llama-3.1-70b", method=Method.LORA, preset=Preset.TRAINER_BF16).on_gpus(8, Strategy.FSDP)
    est = estimate(plan)
    terms = [t for p in est.phases for b in p.buckets for t in b.terms if t.label.startswith("reduce-scatter input")]
    assert terms and all(t.bytes == est.params.adapter / 80 * 4 for t in terms)


def test_an_offloaded_qlora_base_loads_packed_on_the_host() -> None:
    # Issue 26, item 9: the host held a QLoRA base at 2 bytes per weight while it loads quantised
    # (NF4 with double quantisation: 0.5 + 1/64 + 4/(64·256) B per block weight, Dettmers et al.
    # 2023; embeddings, head and norms stay 16-bit).
    plan = plan_for_model("llama-3.1-70b", method=Method.QLORA, preset=Preset.TRAINER_BF16).on_gpus(8, Strategy.FSDP)
    est = estimate(plan.with_parallel(offload=Offload.PARAMS))
    assert est.host is not None
    loaded = [t for t in est.host.terms if t.label.startswith("checkpoint loaded")]
    assert all(t.bytes < 0.6 * est.params.total for t in loaded)


def test_fsdp_keeps_bitsandbytes_quant_state_whole_on_every_gpu() -> None:
    # bitsandbytes 0.43.0 (4876324, bitsandbytes/nn/modules.py): Params4bit._quantize leaves the
    # QuantState (absmax per 64 weights; with double quantisation 8-bit codes plus a float32
    # absmax per 256 blocks) on the GPU as a plain attribute, and Linear4bit.forward restores it
    # from the module "when the parameter got converted. This happens for example for fsdp".
    # FSDP shards, gathers and offloads parameters' data only, so every rank holds the whole
    # state on its GPU, with CPU offload too (AnswerDotAI/fsdp_qlora e877dda train.py: "FSDP only
    # syncs parameters and buffers, so the quant_state isn't copied"). Before, it was sharded
    # with the packed weights and moved to the host under offload.
    block = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672  # Llama 2 70B config.json
    state = 80 * block * (1 / 64 + 4 / (64 * 256))  # 1.086 GB
    base = plan_for_model("llama-2-70b", method=Method.QLORA, preset=Preset.TRAINER_BF16)
    assert base.double_quant
    for gpus in (2, 8):
        for offload in (Offload.NONE, Offload.PARAMS):
            est = estimate(base.on_gpus(gpus, Strategy.FSDP).with_parallel(offload=offload))
            for phase in est.phases:
                held = [t for t in phase.bucket(BucketKey.WEIGHTS).terms if "quantisation state" in t.label]
                assert [t.bytes for t in held] == pytest.approx([state], rel=1e-9), (gpus, offload, phase.name)
            assert est.host is not None or offload is Offload.NONE
            if est.host is not None:
                assert not any("quantisation state" in t.label for t in est.host.terms)


def test_zero3_keeps_bitsandbytes_quant_state_whole_on_every_gpu() -> None:
    # transformers (modeling_utils.py _load_state_dict_into_meta_model, since v4.39) quantises each
    # weight on the GPU and, under DeepSpeed ZeRO-3, moves only its data to the CPU:
    # ``type(value)(value.data.to("cpu"), **value.__dict__)`` keeps the QuantState where it was made.
    # DeepSpeed partitions, gathers and offloads ``param.data`` and has no case for bitsandbytes
    # (deepspeedai/DeepSpeed edaa7221: no ``quant_state`` or ``Params4bit`` under deepspeed/). So, as
    # under FSDP, every rank holds the whole state on its GPU, offload_param included; the partitions
    # hold the packed data only. Llama 2 70B with double quantisation: 1.086 GB (it was halved on 2 GPUs).
    block = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672  # Llama 2 70B config.json
    quantised = 80 * block
    state = quantised * (1 / 64 + 4 / (64 * 256))
    base = plan_for_model("llama-2-70b", method=Method.QLORA, preset=Preset.TRAINER_BF16)
    for gpus in (2, 8):
        for offload in (Offload.NONE, Offload.PARAMS):
            est = estimate(base.on_gpus(gpus, Strategy.ZERO3).with_parallel(offload=offload))
            for phase in est.phases:
                terms = phase.bucket(BucketKey.WEIGHTS).terms
                held = [t for t in terms if "quantisation state" in t.label]
                assert [t.bytes for t in held] == pytest.approx([state], rel=1e-9), (gpus, offload, phase.name)
                packed = [t for t in terms if t.label.startswith("nf4 block weights")]
                expected = [] if offload is Offload.PARAMS else [quantised * 0.5 / gpus]
                assert [t.bytes for t in packed] == pytest.approx(expected, rel=1e-9), (gpus, offload, phase.name)
            if est.host is not None:
                assert not any("quantisation state" in t.label for t in est.host.terms)

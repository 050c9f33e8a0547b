"""Structure of the detailed estimate: phases, peak, sharding, quantisation, verdicts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.breakdown import BucketKey, StepPhase
from core.catalogue import find_model
from core.dtypes import Quant
from core.estimate import Estimate, Verdict, estimate
from core.plan import Attention, Hardware, Method, Optimizer, Parallelism, Plan, Precision, Strategy, Workload
from core.training.detailed import layer_activations


def plan(model: str = "llama-3.2-1b", **changes: object) -> Plan:
    return Plan(model=find_model(model).spec, workload=Workload(micro_batch=2, seq_len=1024)).with_changes(**changes)


def test_peak_is_the_largest_phase_not_the_sum() -> None:
    est = estimate(plan())
    # The allocated peak is the largest phase's tensors plus the libraries' workspaces (held throughout).
    assert est.tensor_peak_bytes == max(p.allocated_bytes for p in est.phases)
    assert est.peak_bytes == est.tensor_peak_bytes + est.worst.workspace_bytes
    full_sum = sum(p.bucket(k).bytes for p in est.phases[-1:] for k in BucketKey)
    every_bucket_max = sum(max(p.bucket(k).bytes for p in est.phases) for k in BucketKey)
    assert est.tensor_peak_bytes < every_bucket_max or est.tensor_peak_bytes == full_sum


def test_gradients_and_activations_do_not_peak_together() -> None:
    # zero_grad(set_to_none=True): the backward starts with no gradient allocated.
    est = estimate(plan())
    backward = next(p for p in est.phases if p.kind.is_backward)
    assert backward.bucket(BucketKey.GRADIENTS).bytes == 0
    step = next(p for p in est.phases if p.kind is StepPhase.OPTIMIZER)
    assert step.bucket(BucketKey.GRADIENTS).bytes > 0


def test_accumulation_keeps_gradients_through_the_backward() -> None:
    est = estimate(plan(workload=Workload(micro_batch=2, seq_len=1024, grad_accum=4)))
    backward = next(p for p in est.phases if p.kind.is_backward)
    assert backward.bucket(BucketKey.GRADIENTS).bytes > 0


def test_overhead_is_its_own_bucket_outside_the_allocator_peak() -> None:
    est = estimate(plan())
    assert est.bucket(BucketKey.OVERHEAD).bytes > 0
    # The overhead bucket carries the workspaces too (in the allocated peak, beside the phase's tensors).
    assert est.total_bytes == pytest.approx(est.tensor_peak_bytes + est.bucket(BucketKey.OVERHEAD).bytes)


def activations(est: Estimate) -> float:
    return next(p for p in est.phases if p.kind.is_backward).bucket(BucketKey.ACTIVATIONS).bytes


def test_eager_attention_keeps_quadratic_scores() -> None:
    def per_block(seq: int, attention: Attention) -> float:
        return layer_activations(plan(workload=Workload(seq_len=seq), attention=attention), trainable_block=True).bytes

    sdpa_growth = per_block(4096, Attention.SDPA) / per_block(512, Attention.SDPA)
    eager_growth = per_block(4096, Attention.EAGER) / per_block(512, Attention.EAGER)
    assert sdpa_growth == pytest.approx(8, rel=0.01)  # linear in the sequence
    assert eager_growth > 12  # the B·H·S² probabilities dominate


def test_checkpointing_cuts_activations() -> None:
    off = estimate(plan())
    on = estimate(plan(checkpointing=True))
    assert activations(on) < activations(off)

    def block_bytes(est: Estimate) -> float:
        terms = next(p for p in est.phases if p.kind.is_backward).bucket(BucketKey.ACTIVATIONS).terms
        return sum(t.bytes for t in terms if "block" in t.label)

    # 16 blocks' saved tensors become 16 block inputs plus one block being recomputed.
    assert block_bytes(on) < block_bytes(off) / 4


def test_qlora_nf4_storage_with_double_quantisation() -> None:
    # QLoRA paper §3: double quantisation: 0.5 + 8/64/8 + 32/(64·256)/8 bytes per weight.
    spec = find_model("llama-2-7b").spec
    est = estimate(Plan(model=spec, method=Method.QLORA, quant=Quant.NF4, double_quant=True))
    block = est.phases[0].bucket(BucketKey.WEIGHTS).terms[0]
    per_weight = 0.5 + 1 / 64 + 4 / (64 * 256)
    assert block.bytes == pytest.approx(spec.matmul_params() * per_weight)
    plain = estimate(Plan(model=spec, method=Method.QLORA, quant=Quant.NF4, double_quant=False))
    assert plain.phases[0].bucket(BucketKey.WEIGHTS).terms[0].bytes == pytest.approx(spec.matmul_params() * 0.5625)


def test_mixed_precision_keeps_float32_weights_and_sixteen_bit_copies() -> None:
    est = estimate(plan(precision=Precision.BF16_MIXED))
    labels = [t.label for t in est.phases[0].bucket(BucketKey.WEIGHTS).terms]
    assert any("autocast" in label for label in labels)


@pytest.mark.parametrize("stage", [Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3, Strategy.FSDP])
def test_sharding_reduces_memory_per_gpu(stage: Strategy) -> None:
    one = estimate(plan(parallel=Parallelism(gpus_per_node=8, strategy=Strategy.DDP)))
    sharded = estimate(plan(parallel=Parallelism(gpus_per_node=8, strategy=stage)))
    assert sharded.total_bytes < one.total_bytes
    step_one = next(p for p in one.phases if p.kind is StepPhase.OPTIMIZER)
    step_sharded = next(p for p in sharded.phases if p.kind is StepPhase.OPTIMIZER)
    if stage is Strategy.FSDP:  # FSDP2 shards the optimizer's own state: exactly 1/8
        assert step_sharded.bucket(BucketKey.OPTIMIZER).bytes == pytest.approx(
            step_one.bucket(BucketKey.OPTIMIZER).bytes / 8
        )
    else:  # DeepSpeed: float32 master partition + float32 Adam moments (12 B per parameter) ÷ 8, and the
        # float32 gradient partition of the step (4 B ÷ 8); the default plan keeps float32 weights. Stage 3 makes that
        # float32 copy from a flat one in the engine's bf16 (2 B ÷ 8): microsoft/DeepSpeed 38327e07 stage3.py
        # _prepare_fp32_grad_for_sub_group, ``self.flatten(self.averaged_gradients[i]).to(fp32)``.
        t = sharded.params.trainable
        per_param = 18 if stage is Strategy.ZERO3 else 16
        assert step_sharded.bucket(BucketKey.OPTIMIZER).bytes == pytest.approx(t * per_param / 8, rel=1e-3)


def test_eight_bit_optimizer_is_about_a_quarter_of_adam() -> None:
    adam = estimate(plan(optimizer=Optimizer.ADAMW)).phases[0].bucket(BucketKey.OPTIMIZER).bytes
    eight = estimate(plan(optimizer=Optimizer.ADAMW_8BIT)).phases[0].bucket(BucketKey.OPTIMIZER).bytes
    assert eight / adam == pytest.approx(2.03 / 8, rel=0.02)


# bitsandbytes 0.50.1 bitsandbytes/optim/optimizer.py, Optimizer2State.init_state (lines
# 502-510): "if p.numel() < config['min_8bit_size']: dtype = torch.float32", min_8bit_size
# defaulting to 4096 in AdamW8bit / PagedAdamW8bit; float32 state1 and state2 are 8 B per element.
BNB_MIN_8BIT_SIZE = 4096
BNB_FLOAT32_STATE_BYTES = 8


def _eight_bit_terms(p: Plan) -> dict[str, float]:
    est = estimate(replace(p, optimizer=Optimizer.ADAMW_8BIT))
    return {t.label.split(" (")[0]: t.bytes for t in est.phases[0].bucket(BucketKey.OPTIMIZER).terms}


def test_eight_bit_optimizer_keeps_small_tensors_in_float32() -> None:
    # SmolLM2-135M, trained in full: its only tensors under 4,096 elements are the RMSNorm
    # weights of hidden size 576 (30 blocks × 2, and the final one); no biases.
    p = plan("smollm2-135m", method=Method.FULL)
    assert p.model.hidden_size == 576 < BNB_MIN_8BIT_SIZE and p.model.num_layers == 30
    small = 30 * 2 * 576 + 576
    terms = _eight_bit_terms(p)
    assert terms["float32 Adam moments of tensors under 4,096 elements"] == small * BNB_FLOAT32_STATE_BYTES
    trainable = estimate(p).params.trainable
    assert terms["8-bit Adam moments + block absmax"] == (trainable - small) * 2 * (1 + 4 / 256)


def test_a_tensor_of_exactly_min_8bit_size_is_quantised() -> None:
    # Llama 3.1 8B: its norms have 4,096 elements, not fewer, and it has no biases: all 8-bit.
    p = plan("llama-3.1-8b", method=Method.FULL)
    assert p.model.hidden_size == BNB_MIN_8BIT_SIZE
    assert list(_eight_bit_terms(p)) == ["8-bit Adam moments + block absmax"]


def test_small_adapters_keep_their_whole_state_in_float32() -> None:
    # LoRA rank 4 on q and v of SmolLM2-135M: lora_A 4 × 576, lora_B 576 × 4 and 192 × 4
    # elements, every one under 4,096.
    p = plan("smollm2-135m", method=Method.LORA)
    p = replace(p, lora=replace(p.lora, rank=4, targets=("q_proj", "v_proj")))
    adapter = 30 * 4 * ((576 + 576) + (576 + 192))
    assert estimate(p).params.trainable == adapter
    assert _eight_bit_terms(p) == {
        "float32 Adam moments of tensors under 4,096 elements": adapter * BNB_FLOAT32_STATE_BYTES
    }


def test_deepspeed_hands_the_eight_bit_optimizer_flat_partitions() -> None:
    # ZeRO steps one flat float32 partition per parameter group: no tensor of it is small.
    p = plan("smollm2-135m", method=Method.FULL, parallel=Parallelism(gpus_per_node=8, strategy=Strategy.ZERO2))
    assert not any("float32 Adam moments" in label for label in _eight_bit_terms(p))


def test_verdict_follows_the_card() -> None:
    p = plan("llama-3.1-8b", method=Method.FULL, precision=Precision.BF16_MIXED)
    assert estimate(replace(p, hardware=Hardware(gpu="rtx-4090"))).verdict is Verdict.OOM
    small = plan("smollm2-135m", workload=Workload(micro_batch=1, seq_len=256))
    assert estimate(replace(small, hardware=Hardware(gpu="h100-sxm"))).verdict is Verdict.FITS


# Plans that take different paths through the estimator: one GPU, adapters, dtypes, 8-bit state, ranks.
SAME_ANSWER_PLANS = (
    lambda: plan(),
    lambda: plan(method=Method.LORA),
    lambda: plan(precision=Precision.FP32),
    lambda: plan("smollm2-135m", optimizer=Optimizer.ADAMW_8BIT),
    lambda: plan().on_gpus(8, Strategy.FSDP),
    lambda: plan().on_gpus(4, Strategy.ZERO3),
)


def test_same_plan_same_answer_whatever_came_before() -> None:
    """estimate() keeps the last plan's intermediate results by identity (core.roles.dtypes_for,
    core.training.detailed._common) and layouts by value (core.parallel.layout): none of it may
    show. Comparing estimate(p) with estimate(p) would pass through those caches and could not
    fail; here each plan is built afresh, and estimated after different predecessors."""
    forward = [estimate(build()) for build in SAME_ANSWER_PLANS]
    backward = [estimate(build()) for build in reversed(SAME_ANSWER_PLANS)][::-1]
    assert SAME_ANSWER_PLANS[0]() == SAME_ANSWER_PLANS[0]() and SAME_ANSWER_PLANS[0]() is not SAME_ANSWER_PLANS[0]()
    assert len({e.total_bytes for e in forward}) == len(forward)  # the plans really differ
    assert backward == forward

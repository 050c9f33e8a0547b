"""Recipes people run (issue 22), each read from its library's source (cited in core):
Liger's fused linear cross-entropy, bitsandbytes before 0.43.2, prepare_model_for_kbit_training,
torchtune's optimizer-in-backward and activation offloading, gradient clipping, LoRA dropout,
bitsandbytes' paged optimizers, and autocast's copies of a frozen base under checkpointing."""

from __future__ import annotations

import pytest

from core.breakdown import BucketKey, StepPhase
from core.catalogue import find_model
from core.errors import PlanError
from core.estimate import estimate
from core.plan import Method, Optimizer, Plan, Preset, Workload


def plan(model: str = "llama-3.2-1b", **changes: object) -> Plan:
    return Plan(model=find_model(model).spec, workload=Workload(micro_batch=2, seq_len=2048), **changes)  # type: ignore[arg-type]


def labels(est: object, key: BucketKey = BucketKey.ACTIVATIONS) -> list[str]:
    return [t.label for ph in est.phases for t in ph.bucket(key).terms]  # type: ignore[attr-defined]


def test_fused_loss_never_holds_the_logits() -> None:
    base = plan(method=Method.LORA)
    fused = estimate(base.with_changes(fused_loss=True))
    plain = estimate(base)
    assert not any(label.startswith("logits") for label in labels(fused))
    assert "fused loss: input gradient formed in the forward (kept)" in labels(fused)
    # Liger's chunk: next_power_of_2(⌈N / ⌈V/d⌉⌉) rows = next_power_of_2(⌈4,096 / 63⌉) = 128 rows.
    chunk = next(t for t in fused.phases[0].bucket(BucketKey.ACTIVATIONS).terms if "chunk's logits" in t.label)
    assert "128 rows" in chunk.formula
    assert fused.peak_bytes < plain.peak_bytes


def test_fused_loss_on_full_training_forms_the_head_gradient_in_the_forward() -> None:
    est = estimate(plan(method=Method.FULL, fused_loss=True))
    assert "fused loss: the head's gradient, formed in the forward" in labels(est)


def test_bitsandbytes_before_0_43_2_keeps_every_4bit_layer_input() -> None:
    base = plan(method=Method.QLORA)
    old = estimate(base.with_changes(bnb_legacy=True))
    new = estimate(base)
    kept = [label for label in labels(old) if "bitsandbytes < 0.43.2" in label]
    assert old.peak_bytes > new.peak_bytes
    assert not any("bitsandbytes < 0.43.2" in label for label in labels(new))
    # The four distinct inputs of a LLaMA block's 4-bit layers, q/v LoRA without dropout keeps
    # the attention input itself: the MLP input and down_proj's (the fused SDPA kernel keeps the
    # attention output anyway).
    assert not kept  # folded into the blocks' saved tensors; the blocks grow instead
    assert (
        estimate(base.with_changes(bnb_legacy=True, quant="int8")).peak_bytes
        == estimate(base.with_changes(quant="int8")).peak_bytes
    )  # LLM.int8 has its own matmul, untouched by the 4-bit fix


def test_prepare_model_for_kbit_training_runs_the_model_in_float32() -> None:
    base = plan(method=Method.QLORA, preset=Preset.TRAINER_BF16)
    up = estimate(base.with_changes(kbit_upcast=True))
    plain = estimate(base)
    weights = {t.label: t.bytes for t in up.bucket(BucketKey.WEIGHTS).terms}
    unq = next(v for k, v in weights.items() if k.startswith("unquantised"))
    plain_unq = next(t.bytes for t in plain.bucket(BucketKey.WEIGHTS).terms if t.label.startswith("unquantised"))
    assert unq == 2 * plain_unq  # float32 instead of bf16 (peft/utils/other.py)
    assert up.peak_bytes > plain.peak_bytes  # and float32 hidden states (bnb casts outputs back)


def test_optimizer_in_backward_never_holds_every_gradient() -> None:
    # With checkpointing the end of the backward (every gradient formed) is the peak.
    base = plan(method=Method.FULL, preset=Preset.PURE_BF16, checkpointing=True).with_workload(seq_len=512)
    inbwd = estimate(base.with_changes(optimizer_in_backward=True))
    plain = estimate(base)
    assert inbwd.peak_bytes < plain.peak_bytes
    step = next(p for p in inbwd.phases if p.kind is StepPhase.OPTIMIZER)
    assert step.bucket(BucketKey.GRADIENTS).bytes == 0
    assert "gradients" not in labels(inbwd, BucketKey.GRADIENTS)  # the whole set never exists
    assert "gradients" in labels(plain, BucketKey.GRADIENTS)


def test_optimizer_in_backward_refuses_gradient_accumulation() -> None:
    # torchtune: "Gradient accumulation is not supported with optimizer in bwd".
    with pytest.raises(PlanError) as caught:
        plan(method=Method.FULL, optimizer_in_backward=True).with_workload(grad_accum=4)
    assert caught.value.field == "optimizer_in_backward"


def test_activation_offloading_keeps_only_the_stash_on_the_gpu() -> None:
    base = plan(method=Method.FULL, preset=Preset.PURE_BF16, checkpointing=True)
    off = estimate(base.with_changes(activation_offload=True))
    on = estimate(base)
    kept = next(t for t in off.phases[0].bucket(BucketKey.ACTIVATIONS).terms if "offloaded" in t.label)
    model = base.model
    # torchtune OffloadActivations: max_fwd_stash_size 5 block inputs (N·d bf16) stay.
    assert kept.bytes == 5 * 2 * 2048 * model.hidden_size * 2
    assert off.peak_bytes < on.peak_bytes


def test_gradient_clipping_costs_a_norm_per_tensor() -> None:
    base = plan(method=Method.FULL)
    clipped = estimate(base.with_changes(grad_clip=True))
    term = next(t for t in clipped.phases[-1].bucket(BucketKey.OPTIMIZER).terms if "clipping" in t.label)
    assert term.bytes < 1e6  # no gradient-sized temporary: _foreach_norm scalars, _foreach_mul_ in place
    assert clipped.peak_bytes == estimate(base).peak_bytes  # the peak is not the step here


def test_lora_dropout_keeps_a_dropped_copy_and_a_mask_per_adapter() -> None:
    base = plan(method=Method.LORA, preset=Preset.TRAINER_BF16)
    dropped = estimate(base.with_lora(dropout=0.1))
    assert dropped.peak_bytes > estimate(base).peak_bytes


def test_paged_optimizer_state_is_outside_the_allocator() -> None:
    # bitsandbytes get_paged (cudaMallocManaged) for tensors of 1e5 elements or more.
    base = plan(method=Method.FULL, preset=Preset.PURE_BF16)
    paged = estimate(base.with_changes(optimizer=Optimizer.PAGED_ADAMW))
    plain = estimate(base)
    assert paged.bucket(BucketKey.OPTIMIZER).bytes < 0.01 * plain.bucket(BucketKey.OPTIMIZER).bytes
    assert any("CUDA managed memory" in note for note in paged.notes)


def test_frozen_float32_base_under_checkpointing_keeps_no_autocast_copies_in_the_forward() -> None:
    # Defect: a LoRA run on a float32 base with bf16 autocast and checkpointing was given a
    # 16-bit copy of every base weight in the forward. Autocast caches only leaves that need a
    # gradient (autocast_mode.cpp cached_cast); a checkpointed block keeps nothing of its
    # forward: only the head's copy is held.
    base = plan("llama-3.1-8b", method=Method.LORA, preset=Preset.FP32_AUTOCAST_BF16, checkpointing=True)
    forward = estimate(base).phases[0].bucket(BucketKey.WEIGHTS)
    copy = next(t for t in forward.terms if "working copies" in t.label)
    model = base.model
    assert copy.bytes == model.vocab_size * model.hidden_size * 2  # the head's, V·d × 2 B
    unchecked = estimate(base.with_changes(checkpointing=False)).phases[0].bucket(BucketKey.WEIGHTS)
    assert next(t for t in unchecked.terms if "working copies" in t.label).bytes > 10 * copy.bytes

"""Compute and time beyond the lesson's two figures: the FLOP terms and how time, cost,
energy, steps and MFU follow from them.

Sources: training costs about 6·P FLOPs per token (forward 2·P, backward 4·P) and a forward
pass 2·P (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", arXiv:2001.08361,
section 2.1; the lesson states both rules). With a frozen base the weight gradients of the
frozen part are skipped (2·P of the backward), and checkpointing runs the forward again.
"""

from __future__ import annotations

import math

import pytest

from core.catalogue import find_gpu, find_model
from core.dtypes import Autocast, Dtype
from core.estimate import estimate
from core.params import param_counts
from core.plan import (
    Accounting,
    CheckpointPolicy,
    Hardware,
    Method,
    Parallelism,
    Plan,
    Precision,
    Strategy,
    Workload,
)
from core.presets import plan_for_model
from core.training.activations import recomputed_share
from core.training.compute import UtilisationSource, compute_dtype, compute_estimate
from core.training.flops import block_gemms, token_flops
from core.training.speed import step_work


def _plan(model: str = "llama-3.2-1b", **changes: object) -> Plan:
    return plan_for_model(model, **changes)


def test_the_mfu_count_is_torchtitans_for_llama_3_1_8b() -> None:
    # torchtitan's flop_per_token = 6·N + 12·l·h·q·t, N without the input embedding: 57.91e9
    # for Llama 3.1 8B at 8,192 tokens (corpus record tt-202412-8b-8gpu-eager, derived).
    # Ours counts the matmuls (norms are no FLOPs): within 0.01 %.
    plan = _plan("llama-3.1-8b", method=Method.FULL, workload=Workload(seq_len=8192))
    assert token_flops(plan).model == pytest.approx(57.91e9, rel=1e-4)


def test_the_megatron_formulas_match_to_the_flop() -> None:
    # NeMo 24.07 (NVIDIA/NeMo f0bf77b nemo/utils/flops_formulas.py, llama): per token
    # l·h²·(12 + 12·g/a + 18·f/h + 12·s/h) + 6·V·h, every query against every key; Megatron-
    # Bridge (core_r0.12+) writes 6·s/h, the causal count (corpus records nemo2407-*, mbridge-*).
    plan = _plan("llama-2-7b", method=Method.FULL, workload=Workload(seq_len=4096))
    m = plan.model
    layers, h, s, v = m.num_layers, m.hidden_size, 4096, m.vocab_size
    g, a, f = m.num_kv_heads, m.num_heads, m.intermediate_size
    flops = token_flops(plan)
    full = layers * h * h * (12 + 12 * g / a + 18 * f / h + 12 * s / h) + 6 * v * h
    assert flops.model == pytest.approx(full, rel=1e-12)
    causal = layers * h * h * (12 + 12 * g / a + 18 * f / h + 6 * s / h) + 6 * v * h
    assert flops.model_causal == pytest.approx(causal, rel=1e-3)  # (s + 1)/2 keys, not s/2


def test_the_kernels_run_the_causal_count_and_full_training_is_six_times_the_weights() -> None:
    plan = _plan("llama-3.2-1b", method=Method.FULL)
    flops = token_flops(plan)
    terms = {t.label: t.per_token for t in flops.terms}
    w = sum(g.weight for g in block_gemms(plan))
    assert terms["block matmuls"] == pytest.approx(6 * w * plan.model.num_layers)
    assert terms["logits (output head)"] == 6 * plan.model.vocab_size * plan.model.hidden_size
    assert flops.hardware == pytest.approx(flops.model_causal)  # no recompute: what runs is the causal count


def test_checkpointing_policies_add_what_they_recompute() -> None:
    plain = _plan("llama-3.2-1b", method=Method.FULL)
    base = token_flops(plain).hardware
    layers = plain.model.num_layers
    w = sum(g.weight for g in block_gemms(plain))
    attention = {t.label: t.per_token for t in token_flops(plain).terms}["attention scores and values (causal)"] / (
        3 * layers
    )
    full = token_flops(plain.with_changes(checkpointing=True)).hardware
    assert full - base == pytest.approx(layers * (2 * w + attention))  # the whole forward again
    attention_only = plain.with_changes(checkpointing=True, checkpoint_policy=CheckpointPolicy.ATTENTION)
    assert token_flops(attention_only).hardware - base == pytest.approx(layers * attention)  # Megatron selective
    op = plain.with_changes(checkpointing=True, checkpoint_policy=CheckpointPolicy.OP)
    assert token_flops(op).hardware - base == pytest.approx(layers * 2 * w * recomputed_share(op))
    every4 = plain.with_changes(checkpointing=True, checkpoint_policy=CheckpointPolicy.LAYER, checkpoint_every=4)
    assert token_flops(every4).hardware - base == pytest.approx(layers // 4 * (2 * w + attention))
    # The MFU count never counts the recompute.
    assert token_flops(plain.with_changes(checkpointing=True)).model == token_flops(plain).model


def test_a_frozen_base_skips_its_weight_gradients_and_a_frozen_bottom_its_backward() -> None:
    full = _plan("llama-3.2-1b", method=Method.FULL)
    layers = full.model.num_layers
    w = sum(g.weight for g in block_gemms(full))
    vd = full.model.vocab_size * full.model.hidden_size
    lora = full.with_method(Method.LORA)
    adapters = {t.label: t.per_token for t in token_flops(lora).terms}["LoRA adapters"]
    # LoRA: no weight gradients for the frozen base or head (2·W per block, 2·V·d), adapters on top.
    assert token_flops(full).hardware - token_flops(lora).hardware == pytest.approx(2 * w * layers + 2 * vd - adapters)
    # Frozen layers: the frozen bottom blocks run their forward only (no input gradient is
    # needed below the lowest block that trains): 4·W and the attention backward less each.
    frozen = full.with_method(Method.FROZEN, frozen_layers=4)
    attention = {t.label: t.per_token for t in token_flops(full).terms}["attention scores and values (causal)"] / (
        3 * layers
    )
    # Llama 3.2 1B ties its head to the frozen embedding: the head's weight gradient goes too.
    assert full.model.tie_embeddings
    saved = 4 * (4 * w + 2 * attention) + 2 * vd
    assert token_flops(full).hardware - token_flops(frozen).hardware == pytest.approx(saved)


def test_a_mixture_of_experts_pays_for_its_routed_experts() -> None:
    plan = _plan("mixtral-8x7b-v0.1", method=Method.FULL)
    m = plan.model
    routed = next(g for g in block_gemms(plan) if g.name.startswith("experts gate"))
    assert routed.count == m.num_experts and routed.share == m.experts_per_token / m.num_experts
    # Two of eight experts per token (Mixtral's config.json): the matmuls are the active ones.
    assert routed.weight == m.experts_per_token * m.hidden_size * 2 * m.intermediate_size


def test_the_step_work_runs_the_same_flops_as_the_count() -> None:
    # core.training.speed counts the rank's matmuls and attention from the same gemms: on one
    # GPU they are the count × the tokens of a step.
    for method, ckpt in ((Method.FULL, False), (Method.LORA, True), (Method.FULL, True)):
        plan = _plan("llama-3.2-1b", method=method).with_changes(checkpointing=ckpt)
        plan = plan.with_workload(micro_batch=2, seq_len=2048, grad_accum=3)
        work = step_work(plan, param_counts(plan), find_gpu("a100-80gb-sxm"))
        tokens = 2 * 2048 * 3
        assert work.hardware_flops == pytest.approx(token_flops(plan).hardware * tokens, rel=1e-9)


def test_the_lesson_keeps_its_six_p() -> None:
    plan = Plan(model=find_model("llama-3.2-1b").spec, accounting=Accounting.LESSON)
    counts = param_counts(plan)
    assert token_flops(plan).hardware == 6 * counts.active


def test_time_cost_energy_and_steps_follow_from_the_flops() -> None:
    plan = _plan(
        method=Method.FULL,
        workload=Workload(micro_batch=4, seq_len=2048, grad_accum=8, tokens=50_000_000),
        hardware=Hardware(gpu="h100-sxm", utilisation=0.5, price_per_gpu_hour=3.0),
        parallel=Parallelism(gpus_per_node=1),
    )
    gpu = find_gpu("h100-sxm")
    counts = param_counts(plan)
    c = compute_estimate(plan, counts, gpu)
    assert c.flops == c.flops_per_token * plan.workload.tokens
    peak = gpu.peak_tflops(compute_dtype(plan))
    assert c.peak_tflops == peak
    # One GPU at a typed utilisation: the single-GPU rule, nothing exchanged, no bubble.
    assert c.seconds == pytest.approx(c.flops / (peak * 1e12 * 0.5), rel=1e-12)
    assert c.utilisation == pytest.approx(0.5) and c.utilisation_source is UtilisationSource.TYPED
    assert c.comm_terms == () and c.exposed_comm_seconds_per_step == 0 and c.bubble_fraction == 0
    assert c.step_seconds == c.compute_seconds_per_step
    assert c.hours == pytest.approx(c.seconds / 3600)
    assert c.cost == pytest.approx(c.hours * 3.0)
    assert c.energy_kwh == pytest.approx(c.hours * gpu.board_power_w / 1000)
    assert c.steps == math.ceil(50_000_000 / (4 * 8 * 2048))
    # Two GPUs (DDP): the compute per step stays and the gradient all-reduce the backward
    # cannot hide is added per step.
    two = compute_estimate(plan.with_parallel(gpus_per_node=2), counts, gpu)
    assert two.compute_seconds_per_step == pytest.approx(c.compute_seconds_per_step)  # twice the tokens per step
    assert two.exposed_comm_seconds_per_step > 0
    assert two.step_seconds == two.compute_seconds_per_step + two.exposed_comm_seconds_per_step
    assert two.cost == pytest.approx(two.hours * 2 * 3.0)
    assert two.tokens_per_second == pytest.approx(plan.workload.tokens / two.seconds)


def test_the_mfu_is_the_model_count_at_the_speed_per_gpu() -> None:
    plan = _plan("llama-3.1-8b", method=Method.FULL, hardware=Hardware(gpu="h100-sxm"))
    c = estimate(plan.with_changes(checkpointing=True)).compute
    assert c.mfu == pytest.approx(c.model_flops_per_token * c.tokens_per_second_per_gpu / (989.4e12))
    assert c.mfu < c.utilisation  # the recompute runs but is not counted
    assert c.utilisation_source is UtilisationSource.MODELLED and 0 < c.modelled_utilisation < 1


def test_the_precision_picks_the_peak_and_an_override_wins() -> None:
    gpu = find_gpu("a100-80gb-sxm")
    fp32 = _plan(method=Method.FULL, precision=Precision.FP32)
    counts = param_counts(fp32)
    assert compute_estimate(fp32, counts, gpu).peak_tflops == gpu.peak_tflops("fp32")
    bf16 = fp32.with_changes(precision=Precision.BF16)
    assert compute_estimate(bf16, counts, gpu).peak_tflops == gpu.peak_tflops("bf16")
    typed = bf16.with_hardware(peak_tflops_override=123.0)
    assert compute_estimate(typed, counts, gpu).peak_tflops == 123.0


def test_no_tokens_no_time() -> None:
    plan = Plan(model=find_model("llama-3.2-1b").spec, workload=Workload(tokens=0))
    c = compute_estimate(plan, param_counts(plan), find_gpu("a100-80gb-sxm"))
    assert c.flops == 0 and c.hours == 0 and c.steps == 0


def test_time_runs_at_the_memory_models_compute_dtype() -> None:
    # Issue 26, item 1: LoRA on a bf16 base with float32 weights and no autocast (PEFT without
    # Trainer(bf16=True)) computes in bf16; it was timed at the H100's float32 rate (66.9 TFLOP/s,
    # 6.7 h) instead of its bf16 rate (989.4 TFLOP/s, NVIDIA H100 datasheet, dense).
    plan = _plan("llama-3.1-8b", method=Method.LORA, hardware=Hardware(gpu="h100-sxm"))
    plan = plan.with_changes(base_dtype=Dtype.BF16, weight_dtype=Dtype.FP32, autocast=Autocast.NONE)
    comp = estimate(plan).compute
    assert comp.dtype == "bf16" and comp.peak_tflops == 989.4
    assert comp.hours < 1.0


def test_the_formula_says_where_the_steps_compute_came_from() -> None:
    plan = _plan(accounting=Accounting.DETAILED)
    modelled = estimate(plan).compute
    assert modelled.utilisation_source is UtilisationSource.MODELLED and ", modelled)" in modelled.formula
    typed = estimate(plan.with_hardware(utilisation=0.4)).compute  # 0.4: any typed utilisation
    assert typed.utilisation_source is UtilisationSource.TYPED and ", typed)" in typed.formula
    calibrated = estimate(plan.with_hardware(calibration=0.8)).compute  # 0.8: any factor the card can reach
    assert calibrated.utilisation_source is UtilisationSource.CALIBRATED
    assert ", calibrated × 0.8)" in calibrated.formula
    # A measured step twice the modelled one: the factor solved for it is written with the source.
    measured = estimate(plan.with_hardware(measured_step_s=2 * modelled.step_seconds)).compute
    assert measured.utilisation_source is UtilisationSource.MEASURED
    assert f", solved from your run, × {measured.calibration_factor:.3g})" in measured.formula


def test_an_mfu_above_100_percent_says_why_beside_the_hardware_utilisation() -> None:
    """h88fix (a user's session): Llama 3.1 8B at 131,072 tokens, context parallel 8 on H100s at a typed 70 %
    read "MFU 116.1%". torchtitan's count takes every query against every key (pytorch/torchtitan b5bcd76c
    torchtitan/models/utils.py L443-457: "do not account for sparsity in causal attention"), 2.51e11 FLOPs a token
    here against the 1.48e11 the causal kernels run; Megatron-LM counts the causal half (NVIDIA/Megatron-LM
    d98e8a64 megatron/training/training.py L1168 "/ 2  # causal mask", since 8873b55d, core_r0.12.0)."""
    plan = (
        _plan("llama-3.1-8b", method=Method.FULL, workload=Workload(micro_batch=1, seq_len=131072))
        .with_hardware(gpu="h100-sxm", utilisation=0.7)  # 0.7: the user's typed utilisation
        .on_gpus(8, Strategy.FSDP)
        .with_parallel(context_parallel=8)
    )
    c = estimate(plan).compute
    assert c.mfu > 1  # the case: the convention's MFU passes the card's peak
    assert c.hfu == pytest.approx(c.flops_per_token * c.tokens_per_second_per_gpu / 989.4e12)  # H100 SXM bf16 dense
    assert c.hfu <= 0.7  # the typed utilisation of the compute, less the exposed communication
    assert c.causal_mfu == pytest.approx(c.mfu * c.causal_flops_per_token / c.model_flops_per_token)
    assert c.causal_mfu == pytest.approx(c.hfu)  # no checkpointing: the kernels run the causal count
    text = c.mfu_text
    assert f"{c.mfu:.1%} at torchtitan's count" in text and f"hardware {c.hfu:.1%}" in text
    assert "passes 100%" in text and "every query against every key" in text and "no utilisation of the card" in text


def test_an_mfu_under_100_percent_names_the_counts_without_the_warning() -> None:
    plan = _plan("llama-3.1-8b", method=Method.FULL, hardware=Hardware(gpu="h100-sxm")).with_changes(checkpointing=True)
    c = estimate(plan).compute
    assert c.mfu < 1 and "passes 100%" not in c.mfu_text
    assert c.causal_mfu < c.hfu  # the recompute runs, and only the hardware figure counts it

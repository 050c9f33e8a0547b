"""An eager step is paced by the host where the device's work is shorter than the time the host takes
to issue its kernels (issue 24, item 2; core.training.speed.eager_host_kernels, docs/TRAINING_TIME.md
"Training steps the host paces")."""

from __future__ import annotations

import pytest

from core.catalogue import find_gpu, find_model
from core.estimate import estimate
from core.format import duration
from core.params import param_counts
from core.plan import Attention, Method, Plan, Quant, Stack, TransformersLoss
from core.presets import default_plan
from core.serving.fit import DEFAULT_LAUNCH, HF_HOST_LAYER
from core.training.speed import (
    DECODE_LAYER_KERNELS,
    EAGER_KERNEL_HOST_S,
    HF_HOST_LAYER_S,
    eager_block_kernels,
    step_work,
)

ALL_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _short_lora() -> Plan:
    """LoRA on q/v (PEFT's default Llama targets) of Qwen2.5 0.5B, checkpointed, SDPA, 1 × 256 tokens."""
    plan = default_plan().with_changes(model=find_model("qwen2.5-0.5b").spec, model_id="qwen2.5-0.5b")
    return plan.with_workload(micro_batch=1, seq_len=256, grad_accum=1).with_lora(targets=("q_proj", "v_proj"))


def test_the_per_kernel_host_time_comes_from_the_serving_fit_not_the_training_figures() -> None:
    # core.serving.fit: Hugging Face generate's host time per decoder layer per decode step, 0.7285 ms, fitted on the
    # Qwen team's serving speed tables; tools/measure/kernel_count.py: such a layer issues 47 ops a decode step.
    assert DEFAULT_LAUNCH[HF_HOST_LAYER] == HF_HOST_LAYER_S == pytest.approx(0.7285e-3)
    assert DECODE_LAYER_KERNELS == 47
    assert round(EAGER_KERNEL_HOST_S * 1e6, 1) == 15.5  # 0.7285 ms ÷ 47


def test_block_kernels_follow_the_measured_counts() -> None:
    # tools/measure/kernel_count.py (torch 2.13.0, transformers 5.25.0, peft 0.18.0), per block per micro-batch:
    # full fine-tuning with SDPA 45 forward, 73 backward, 42 recompute; eager attention 60 / 86 / 57.
    full = default_plan().with_changes(method=Method.FULL, attention=Attention.SDPA)
    assert eager_block_kernels(full) == (45, 73, 42)
    assert eager_block_kernels(full.with_changes(attention=Attention.EAGER)) == (60, 86, 57)
    # LoRA on all seven linears: the frozen block's 45 / 62 / 42 + 7 × (11, 10, 11); measured 122 / 132 / 116.
    lora = default_plan().with_changes(attention=Attention.SDPA).with_lora(targets=ALL_LINEARS)
    assert eager_block_kernels(lora) == (45 + 77, 62 + 70, 42 + 77)
    # QLoRA's NF4 base with double quantisation: 3 kernels a dequantisation, 7 linears, in each of the three passes
    # (bitsandbytes@aaa71d7e MatMul4Bit.forward / backward, functional.dequantize_4bit).
    qlora = lora.with_changes(method=Method.QLORA, quant=Quant.NF4, double_quant=True)
    assert eager_block_kernels(qlora) == (45 + 77 + 21, 62 + 70 + 21, 42 + 77 + 21)
    assert eager_block_kernels(qlora.with_changes(double_quant=False))[0] == 45 + 77 + 7
    # A fused q|k|v matrix is one adapted linear (GPT-2's c_attn: PEFT wraps the one nn.Module): c_attn, c_proj,
    # c_fc and the MLP's c_proj, 4 linears; an MoE block's experts count as one MLP (the expert loop is not counted).
    gpt2 = lora.with_changes(model=find_model("gpt2").spec, model_id="gpt2")
    assert eager_block_kernels(gpt2)[0] == 45 + 4 * 11
    moe = lora.with_changes(model=find_model("qwen3-30b-a3b").spec, model_id="qwen3-30b-a3b")
    # Under transformers 5 all-linear adapts Qwen3-MoE's attention alone (its experts are 3-D parameters:
    # tests/data/moe_lora/peft_transformers_5.25.0.json, qwen3_moe all-linear: self_attn q, k, v, o); under 4.x
    # the experts' gate, up and down too (peft_transformers_4.57.1.json).
    assert eager_block_kernels(moe)[0] == 45 + 4 * 11
    four = moe.with_changes(training_transformers=TransformersLoss.V4_49_TO_4_57)
    assert eager_block_kernels(four)[0] == 45 + 7 * 11


def test_a_short_sequence_small_model_lora_step_is_paced_by_the_host() -> None:
    plan = _short_lora()
    c = estimate(plan).compute
    work = step_work(plan, param_counts(plan), find_gpu(plan.hardware.gpu))
    # 24 blocks (Qwen2.5 0.5B), each 45 + 2 × 11 forward, 62 + 2 × 10 backward, 42 + 2 × 11 recomputed: 213; and
    # the embedding, head and loss outside them, frozen: 32 forward, 8 backward (kernel_count.py --step).
    assert work.host_kernels == 24 * 213 + 32 + 8
    floor = (24 * 213 + 40) * EAGER_KERNEL_HOST_S
    assert c.step_seconds == pytest.approx(floor + c.optimizer_seconds_per_step)
    assert c.host_pace.startswith("paced by the host: 5,152 kernels × 15.5 µs")
    assert c.host_pace.endswith(f"+ the optimizer step = {duration(c.step_seconds)} a step")
    # The formula gives the step once, as its own total ("= 79.9 ms a step = 79.9 ms" said it twice); the
    # default 20,000,000 tokens at 1 × 256 a step: 78,125 steps.
    assert f"paced by the host: 5,152 kernels × 15.5 µs = {duration(floor)} + the optimizer step = " in c.formula
    assert f"+ the optimizer step = {duration(c.step_seconds)}; 78,125 steps" in c.formula
    assert "a step" not in c.formula
    # The device's own work is shorter: the modelled compute alone would be faster.
    assert c.compute_seconds_per_step < floor


def test_a_long_sequence_8b_plan_is_not_host_bound() -> None:
    plan = default_plan().with_workload(micro_batch=4, seq_len=4096, grad_accum=4)
    c = estimate(plan).compute
    assert c.host_pace == "" and "paced by the host" not in c.formula
    work = step_work(plan, param_counts(plan), find_gpu(plan.hardware.gpu))
    assert 0 < work.host_floor < c.step_seconds / 10


def test_compile_and_megatron_have_no_eager_count() -> None:
    plan = _short_lora()
    eager = estimate(plan).compute
    for stack in (Stack.COMPILE, Stack.MEGATRON):
        other = plan.with_changes(stack=stack)
        work = step_work(other, param_counts(other), find_gpu(other.hardware.gpu))
        assert work.host_kernels == 0 and work.host_floor == 0.0
        assert estimate(other).compute.host_pace == ""
    assert estimate(plan.with_changes(stack=Stack.COMPILE)).compute.step_seconds < eager.step_seconds / 5


def test_a_typed_utilisation_is_not_held_to_the_host() -> None:
    c = estimate(_short_lora().with_hardware(utilisation=0.4)).compute
    assert c.host_pace == ""


def test_the_lessons_accounting_times_its_flops_alone() -> None:
    # The lesson's four buckets and its FLOPs at the modelled utilisation: no kernel count (a plan with no work to
    # time takes no time, tests/core/test_fuzz.py test_a_step_with_no_work_to_time_takes_no_time).
    from core.inputs import Accounting

    plan = _short_lora().with_changes(accounting=Accounting.LESSON)
    work = step_work(plan, param_counts(plan), find_gpu(plan.hardware.gpu))
    assert work.host_kernels == 0 and work.host_floor == 0.0
    assert estimate(plan).compute.host_pace == ""

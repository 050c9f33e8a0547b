"""DoRA's one-layer forward transient (core.training.activations.dora_forward_transient).

huggingface/peft v0.21.2 src/peft/tuners/lora/dora.py: each DoRA layer's forward builds B·A from
``torch.eye(in)`` and forms the weight norm from out × in copies, all freed when the layer returns. The three
measured cases (tools/measure, torch 2.13.0 CPU / fake CUDA, transformers 5.25.0, peft 0.21.2) are Llama 3.2 1B
at 1 × 256, where that transient, not the logits, sets the step's peak. Shapes: meta-llama/Llama-3.2-1B
config.json (hidden 2,048, intermediate 8,192, vocabulary 128,256, 16 layers).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.breakdown import StepPhase
from core.estimate import estimate
from core.files.measurement import load_measurement, plan_for_case
from core.plan import Method, Plan
from core.training.activations import dora_forward_transient

MEASURED = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "measured"
ALL_LINEAR = "llama32-1b-dora-r8-all-trainerbf16-adamw-sdpa-b1-s256"
CHECKPOINTED = "llama32-1b-dora-r8-all-trainerbf16-adamw-sdpa-ckpt-b1-s256"
HEAD = "llama32-1b-dora-r8-qv-head-trainerbf16-adamw-sdpa-b1-s256"
D, FF, V, R = 2048, 8192, 128256, 8  # config.json; the cases' rank


def _plan(case_id: str) -> Plan:
    m = load_measurement(MEASURED / f"{case_id}.json")
    return plan_for_case(m.case, None, m.torch_version)


def _doc(case_id: str) -> dict:
    return json.loads((MEASURED / f"{case_id}.json").read_text())


def test_the_widest_matrix_sets_it_and_its_bytes_follow_the_source() -> None:
    # float32 adapters (PEFT's autocast_adapter_dtype) under bf16 autocast, a bf16 base. down_proj (in 8,192,
    # out 2,048): the float32 identity, its bf16 cast for lora_A's matmul, A·eye and B·A in bf16 as B·A is made;
    # at the weight norm the identity is gone and four float32 out × in tensors exist (B·A cast to x's float32,
    # the weight cast, the scaled B·A, the sum; the bf16 B·A freed once rebound to its cast). Here the first is
    # the larger.
    term = dora_forward_transient(_plan(ALL_LINEAR))
    assert term is not None and "8192 × 2048" in term.label
    built = FF * FF * 4 + FF * FF * 2 + FF * R * 2 + FF * D * 2
    norm = FF * FF * 2 + FF * R * 2 + 4 * FF * D * 4
    assert term.bytes == built > norm
    # The head (in 2,048, out 128,256) makes the norm's four float32 V × d tensors: the largest by far.
    head = dora_forward_transient(_plan(HEAD))
    assert head is not None and head.bytes == D * D * 2 + D * R * 2 + 4 * D * V * 4
    assert dora_forward_transient(_plan(HEAD), head=False).bytes < head.bytes / 10  # q / v only


def test_it_does_not_grow_with_the_tokens_and_lora_has_none() -> None:
    plan = _plan(ALL_LINEAR)
    big = plan.with_workload(micro_batch=8, seq_len=4096)
    assert dora_forward_transient(big) == dora_forward_transient(plan)
    assert dora_forward_transient(plan.with_changes(method=Method.LORA)) is None


@pytest.mark.parametrize(
    ("case_id", "phase"),
    [(ALL_LINEAR, StepPhase.FORWARD), (CHECKPOINTED, StepPhase.BACKWARD_BLOCK), (HEAD, StepPhase.FORWARD)],
)
def test_the_measured_peaks_are_the_transient(case_id: str, phase: StepPhase) -> None:
    # Measured: the forward peak in step 2 without checkpointing (the last adapted layer's forward, the head's
    # for HEAD), the backward's with it (layer 0's recompute, 15 of 16 blocks' adapter gradients formed).
    doc = _doc(case_id)
    est = estimate(_plan(case_id))
    peak = max(est.phases, key=lambda p: p.allocated_bytes)
    assert peak.kind is phase and "DoRA" in peak.description
    assert abs(est.tensor_peak_bytes / doc["peak_allocated_bytes"] - 1) < 0.01
    # Without the transient the estimate was 1.4 %, 3.8 % and 52 % under: what is left is the transient's.
    without = max(p.allocated_bytes for p in est.phases if "DoRA" not in p.description)
    assert without < doc["peak_allocated_bytes"] * 0.99


def test_the_large_batch_dora_cases_still_peak_at_the_logits() -> None:
    # At 4 × 1,024 and 4 × 2,048 the loss's N·V tensors exceed any one layer's B·A: no measured DoRA case with
    # many tokens moved (benchmarks/accuracy.py: +0.06 %, +0.24 %, -0.01 % before and after).
    for case_id in (
        "qwen25-05b-dora-r8-all-trainerbf16-adamw-sdpa-b4-s1024",
        "llama32-1b-dora-r16-trainerbf16-adamw-sdpa-b4-s2048",
        "ho-llama32-3b-dora-r8-qkvo-trainerbf16-adamw-sdpa-ckpt-b2-s2048",
    ):
        est = estimate(_plan(case_id))
        peak = max(est.phases, key=lambda p: p.allocated_bytes)
        assert "DoRA" not in peak.description, case_id
        assert abs(est.tensor_peak_bytes / _doc(case_id)["peak_allocated_bytes"] - 1) < 0.005, case_id

"""OOM diagnosis: failing phase, ranked remedies, exact solver boundaries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from core.advice.diagnosis import (
    AdviceKind,
    Failure,
    diagnose,
    max_micro_batch,
    max_sequence,
    memory_curve,
    remedies_for_symptom,
)
from core.advice.remedies import MAX_COMBINED, RemedyKind
from core.breakdown import BucketKey, StepPhase
from core.catalogue import find_model
from core.estimate import Verdict, estimate
from core.files.report import build_report, to_markdown
from core.format import memory
from core.plan import Accounting, Hardware, Method, Plan, Precision, Preset, Strategy, Workload, precision_fields
from core.presets import default_plan, lesson_plan, plan_for_model
from core.verdict import Mode


def lesson_7b_on_24gb() -> Plan:
    # The lesson's 7B model, 16-bit full fine-tuning with Adam (81.9 GB), on a 24 GB card.
    return lesson_plan(Method.FULL, Precision.BF16, gpu="rtx-4090")


def test_lesson_7b_full_on_24gb_fails_at_the_first_step_and_qlora_fits() -> None:
    diagnosis = diagnose(lesson_7b_on_24gb())
    assert diagnosis.verdict is Verdict.OOM
    assert diagnosis.failure is Failure.FIRST_STEP
    assert diagnosis.symptom is not None and "first step" in diagnosis.symptom.symptom
    qlora = next(r for r in diagnosis.remedies if r.key == "qlora-nf4")
    assert qlora.fits
    assert qlora.plan.method is Method.QLORA
    # Those that fit are listed before those that do not.
    fits = [r.fits for r in diagnosis.remedies]
    assert fits == sorted(fits, reverse=True)


@pytest.mark.parametrize("accounting", list(Accounting))
def test_every_remedy_states_the_estimate_of_its_own_plan(accounting: Accounting) -> None:
    plan = replace(lesson_7b_on_24gb(), accounting=accounting)
    for remedy in diagnose(plan).remedies:
        assert remedy.total_bytes == estimate(remedy.plan).total_bytes
        assert remedy.plan != plan


def test_activation_bound_plan_fails_on_long_batches() -> None:
    plan = Plan(
        model=find_model("llama-3.2-1b").spec,
        method=Method.LORA,
        workload=Workload(micro_batch=16, seq_len=4096),
        hardware=Hardware(gpu="rtx-4090"),
    )
    diagnosis = diagnose(plan)
    assert diagnosis.failure is Failure.LONG_BATCHES
    keys = [r.key for r in diagnosis.remedies if r.fits]
    assert "micro-batch" in keys
    smaller = next(r for r in diagnosis.remedies if r.key == "micro-batch")
    wl = smaller.plan.workload
    assert wl.micro_batch * wl.grad_accum >= 16  # same effective batch


def test_no_single_remedy_gives_a_combination() -> None:
    plan = Plan(
        model=find_model("llama-3.1-8b").spec,
        method=Method.FULL,
        **precision_fields(Precision.BF16_MIXED),
        workload=Workload(micro_batch=8, seq_len=2048),
        hardware=Hardware(gpu="rtx-4090"),
    )
    diagnosis = diagnose(plan)
    cheap = [r for r in diagnosis.remedies if r.fits and r.cost_rank < 4]
    if not cheap and diagnosis.combination is not None:
        assert diagnosis.combination.estimate.verdict is Verdict.FITS
        assert len(diagnosis.combination.remedies) >= 2
    assert any(r.fits for r in diagnosis.remedies) or diagnosis.combination is not None


def test_fitting_plan_needs_no_remedy() -> None:
    plan = Plan(model=find_model("smollm2-135m").spec, hardware=Hardware(gpu="h100-sxm"))
    diagnosis = diagnose(plan)
    assert diagnosis.failure is Failure.NONE and diagnosis.remedies == ()


def test_micro_batch_solver_is_exact() -> None:
    plan = Plan(model=find_model("qwen2.5-0.5b").spec, hardware=Hardware(gpu="rtx-4090"))
    n = max_micro_batch(plan)
    assert n >= 1
    assert estimate(plan.with_workload(micro_batch=n)).verdict is Verdict.FITS
    assert estimate(plan.with_workload(micro_batch=n + 1)).verdict is not Verdict.FITS


def test_sequence_solver_is_exact() -> None:
    plan = Plan(model=find_model("qwen2.5-0.5b").spec, hardware=Hardware(gpu="rtx-4090"))
    n = max_sequence(plan)
    assert estimate(plan.with_workload(seq_len=n)).verdict is Verdict.FITS
    assert estimate(plan.with_workload(seq_len=n + 1)).verdict is not Verdict.FITS


def test_curve_marks_the_crossing() -> None:
    plan = Plan(model=find_model("qwen2.5-0.5b").spec, hardware=Hardware(gpu="rtx-4090"))
    curve = memory_curve(plan, "micro_batch")
    assert list(curve.total_bytes) == sorted(curve.total_bytes)
    assert curve.crossing == max_micro_batch(plan)


def test_start_from_a_symptom() -> None:
    symptom, remedies = remedies_for_symptom(lesson_7b_on_24gb(), Failure.FIRST_STEP)
    assert "optimizer" in symptom.cause
    assert remedies and all(Failure.FIRST_STEP in r.addresses for r in remedies)
    serving = Plan(model=find_model("llama-3.1-8b").spec, hardware=Hardware(gpu="l4")).with_inference(
        concurrent=64, context=8192
    )
    symptom, remedies = remedies_for_symptom(serving, Failure.SERVING)
    assert "KV cache" in symptom.cause
    assert any(r.key == "kv-fp8" for r in remedies)


def test_the_evaluation_pass_is_cut_per_rank_as_the_step_is() -> None:
    # Issue 26, item 3: Llama 3.1 8B, full fine-tuning with checkpointing, FSDP2 + TP 8 on 8 H100s,
    # micro-batch 2 × 32,768 tokens: every rank trains in 32.2 GB. The evaluation forward was
    # rebuilt outside estimate() on one whole GPU (116.5 GB, "out of memory during evaluation").
    plan = plan_for_model("llama-3.1-8b", method=Method.FULL, checkpointing=True).on_gpus(8, Strategy.FSDP)
    plan = plan.with_parallel(tensor_parallel=8).with_workload(micro_batch=2, seq_len=32768)
    d = diagnose(plan.with_hardware(gpu="h100-sxm"))
    assert d.estimate.fits and d.failure is Failure.NONE
    # A no-grad forward of the same batch holds the state and one block, never more than the step.
    assert d.eval_bytes == d.estimate.evaluation_bytes <= d.estimate.total_bytes
    evaluation = d.estimate.worst.evaluation
    assert evaluation is not None and evaluation.kind is StepPhase.EVALUATION


def test_the_advice_is_decided_in_core_with_its_counts() -> None:
    """The Diagnosis tab words one of these; it no longer picks among its own six messages."""
    oom = diagnose(lesson_7b_on_24gb())
    advice = oom.advice
    assert advice.fitting == sum(r.fits for r in oom.remedies) and advice.offered == len(oom.remedies)
    assert advice.kind in (AdviceKind.SOME_FIT, AdviceKind.TOGETHER_CHEAPEST)
    assert advice.combined_at_most == MAX_COMBINED == 3  # pairs and triples (remedies.cheapest_combination)
    assert diagnose(lesson_plan(Method.QLORA, Precision.BF16, gpu="a100-80gb-sxm")).advice.kind is AdviceKind.FITS
    # Trains on the card, but an evaluation batch of 64 does not (Llama 3.2 1B LoRA, 4,096 tokens).
    plan = Plan(
        model=find_model("llama-3.2-1b").spec,
        method=Method.LORA,
        workload=Workload(micro_batch=1, seq_len=4096, eval_batch=64),
        hardware=Hardware(gpu="rtx-4090"),
    )
    d = diagnose(plan)
    assert d.estimate.fits and d.failure is Failure.EVALUATION
    assert d.advice.kind is AdviceKind.STEP_FITS_BUT


def test_the_cause_named_is_the_one_that_fails() -> None:
    # Issue 26, item 12. Llama 3.1 70B LoRA with FSDP2 on 8 H100s fits; served as planned
    # (one GPU, bf16) its 141 GB of weights cannot load, whatever the number of users.
    fsdp = plan_for_model("llama-3.1-70b", method=Method.LORA, preset=Preset.TRAINER_BF16, checkpointing=True)
    fsdp = fsdp.on_gpus(8, Strategy.FSDP)
    d = diagnose(fsdp.with_hardware(gpu="h100-sxm"))
    assert d.estimate.fits and d.failure is Failure.SERVING_WEIGHTS
    assert d.symptom is not None and "loading" in d.symptom.when and "users" not in d.symptom.when
    kinds = {r.kind for r in remedies_for_symptom(fsdp, Failure.SERVING_WEIGHTS)[1]}
    assert kinds and kinds <= {RemedyKind.WEIGHTS_NF4, RemedyKind.MORE_TENSOR_PARALLEL}
    # Llama 3.2 3B LoRA, 4 × 8,192 tokens on an A100 80GB: the activations are 2.2 × the usable
    # memory; with fixed-length batches that fails on the first batch, not "on long batches".
    lora = plan_for_model("llama-3.2-3b", method=Method.LORA).with_workload(micro_batch=4, seq_len=8192)
    d = diagnose(lora)
    assert d.failure is Failure.LONG_BATCHES and d.symptom is not None
    assert "first batch this long" in d.symptom.symptom and "activations" in d.symptom.when


def test_serving_that_queues_requests_says_so() -> None:
    # Issue 26, item 10: vLLM on an RTX 4090, Llama 3.1 8B, 64 × 8,192 tokens: the pool holds 5
    # such requests at once; "fits, nothing needs to change" hid the 59 that wait.
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090")
    d = diagnose(plan.with_inference(engine="vllm", concurrent=64, context=8192), Mode.INFERENCE)
    assert d.judgement.fits
    assert d.advice.kind is AdviceKind.FITS_QUEUED and d.advice.queued == 59 and d.advice.at_once == 5


def test_room_to_spare_is_said_only_when_there_is_room() -> None:
    """h56mode: the diagnosis said "Fits with room to spare" with 0.21 GB to spare. The default plan
    (Llama 3.1 8B LoRA on an A100 80GB, core.presets) with the headroom set so that 0.21 GB is left:
    its range's high end lies past the usable memory, which is said with the figures."""
    from core.advice.diagnosis import diagnose
    from core.estimate import estimate
    from core.format import memory
    from core.presets import default_plan

    plan = default_plan()
    judged = estimate(plan).judgement()
    assert diagnose(plan).explanation.startswith("Fits with room to spare")  # 10 % headroom, far below
    spare = 0.21e9  # the user's figure
    tight = plan.with_hardware(headroom=1 - (judged.total_bytes + spare) / judged.capacity_bytes)
    found = diagnose(tight)
    high = found.judgement.range_bytes[1]
    assert found.judgement.fits and high > found.usable_bytes
    assert "room to spare" not in found.explanation
    assert f"Fits with {memory(found.margin_bytes)} to spare" in found.explanation
    assert f"range reaches {memory(high)}, past the {memory(found.usable_bytes)} usable" in found.explanation
    # The whole range within the usable memory, 0.5 GB past its high end, yet less spare than the headroom.
    near = plan.with_hardware(headroom=1 - (high + 0.5e9) / judged.capacity_bytes)
    text = diagnose(near).explanation
    assert text.startswith("Fits, with only ") and "beyond the" in text and "room to spare" not in text


def _on_4090(plan: Plan) -> Plan:
    return plan.with_input("hardware.gpu", "rtx-4090")


# Plans whose stored weights load on a 24 GB RTX 4090 but whose step does not fit: the window's first-start
# LoRA (core.presets.default_plan: the activations decide) and a full fine-tune in Trainer(bf16=True) and the
# lesson's 7B full fine-tune (weights, gradients and optimizer state decide).
WEIGHTS_LOAD = {
    "lora-first-start": lambda: _on_4090(default_plan()),
    "full-trainer-bf16": lambda: _on_4090(
        plan_for_model("llama-3.1-8b", method=Method.FULL, preset=Preset.TRAINER_BF16)
    ),
    "lesson-7b-full": lesson_7b_on_24gb,
}


@pytest.mark.parametrize("make", WEIGHTS_LOAD.values(), ids=WEIGHTS_LOAD.keys())
def test_the_failing_phase_is_the_phase_the_banner_names_when_the_weights_load(make: Callable[[], Plan]) -> None:
    """The Diagnosis said "fails at load / the first optimizer step" beside the banner's "peak at the
    backward" for a plan whose weights load. The phase it names is now the peak's (failing_phase)."""
    d = diagnose(make())
    assert d.failure in (Failure.FIRST_STEP, Failure.LONG_BATCHES)
    assert d.load_bytes <= d.usable_bytes  # the premise: the weights load
    assert d.phase == d.estimate.peak_phase
    assert d.when.startswith(f"at the {d.estimate.peak_phase},") and "load" not in d.when


def test_a_plan_whose_weights_do_not_load_fails_at_load() -> None:
    """LoRA on Llama 3.1 8B with float32 weights (the fp32-autocast-bf16 preset, core.plan's default) on an
    RTX 4090: the stored weights alone, 8.03e9 × 4 B, are more than the card's usable memory."""
    d = diagnose(_on_4090(plan_for_model("llama-3.1-8b", method=Method.LORA)))
    weights = d.estimate.phases[-1].bucket(BucketKey.WEIGHTS).bytes
    assert weights > d.usable_bytes and d.load_bytes >= weights
    assert d.failure is Failure.FIRST_STEP and d.phase == "load"
    assert d.when.startswith("at load:") and memory(d.load_bytes) in d.when


@pytest.mark.parametrize("make", [*WEIGHTS_LOAD.values(), lambda: plan_for_model("llama-3.1-8b", method=Method.LORA)])
def test_the_state_before_activations_says_how_it_differs_from_the_last_bar(make: Callable[[], Plan]) -> None:
    """ "State before activations" (33.0 GB for float32 LoRA on an RTX 4090) beside the chart's 32.2 GB
    optimizer-step bar: the bar is allocated memory; the state adds the overhead no activation needs. The
    sentence names both, each computed from the same estimate."""
    d = diagnose(_on_4090(make()))
    last = d.estimate.phases[-1]
    bar = last.allocated_bytes - last.bucket(BucketKey.ACTIVATIONS).bytes
    assert d.step_state_bytes == pytest.approx(bar)
    text = d.state_sentence()
    assert text.startswith(memory(d.state_bytes)) and f"{memory(bar)} ({last.name} bar" in text
    if d.state_bytes > bar:
        assert f"+ {memory(d.state_bytes - bar)} CUDA context and workspaces" in text


def test_the_report_names_the_phase_its_verdict_line_names() -> None:
    """The Markdown report's verdict line says "peak at the <phase>"; its Diagnosis names where the step fails,
    and for a plan whose weights load that is the same phase."""
    plan = _on_4090(plan_for_model("llama-3.1-8b", method=Method.FULL, preset=Preset.TRAINER_BF16))
    markdown = to_markdown(build_report([("a", plan)], generated="2026-12-01T00:00:00Z"))
    phase = estimate(plan).peak_phase
    assert f"peak at the {phase}" in markdown and f"Where it fails: at the {phase}," in markdown

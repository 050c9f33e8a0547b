"""The Diagnosis tab's pins per mode and engine (core.advice.request.pins_for) agree with the
remedies themselves: a pin is offered where some remedy of the mode would change what it keeps,
and no remedy of the mode changes what an unoffered pin would keep."""

from __future__ import annotations

import pytest

from core.advice.remedies import TRAINING_KINDS
from core.advice.request import PIN_LABELS, Pin, pin_label, pins_for
from core.advice.serving_remedies import SERVING_KINDS
from core.inputs import Engine
from core.plan import Plan
from core.presets import default_plan, plan_for_model
from core.verdict import Mode


def serving_plans(engine: Engine) -> list[Plan]:
    """Plans of Llama 3.1 8B that do not serve whole on ``engine``: many long requests on an L4
    (24 GB) and on an H100 (SGLang's pool on the L4 holds none: no context to shorten there), and
    llama.cpp with every layer on the GPU at 128k tokens."""
    llama = plan_for_model("llama-3.1-8b")
    if engine is Engine.LLAMACPP:
        return [llama.with_hardware(gpu="l4").with_inference(engine=engine, context=131072, gpu_layers=99)]
    return [
        llama.with_hardware(gpu=gpu).with_inference(engine=engine, context=32768, concurrent=16)
        for gpu in ("l4", "h100-sxm")
    ]


@pytest.mark.parametrize("engine", list(Engine))
def test_serving_offers_the_pins_its_remedies_would_break(engine: Engine) -> None:
    offered = set(pins_for(Mode.INFERENCE, engine))
    changed: set[Pin] = set()
    for plan in serving_plans(engine):
        for spec in SERVING_KINDS:
            if spec.apply(plan) is not None:
                assert spec.changes <= offered, (spec.kind, engine)
                changed |= spec.changes
    assert changed == offered
    # Before: training's pins were shown in Inference mode ("Keep the card", "No CPU offload"
    # on vLLM) though no serving remedy changes the card or, but on llama.cpp, offloads.
    assert Pin.GPU not in offered and Pin.MODEL not in offered and Pin.LAYOUT not in offered
    assert (Pin.NO_OFFLOAD in offered) == (engine is Engine.LLAMACPP)


def test_training_offers_every_pin_and_each_is_one_a_remedy_changes() -> None:
    assert set(pins_for(Mode.TRAINING, default_plan().inference.engine)) == set(Pin)
    changed = set().union(*(spec.changes for spec in TRAINING_KINDS))
    assert changed == set(Pin)


def test_serving_calls_the_sequence_the_context() -> None:
    assert pin_label(Pin.SEQUENCE, Mode.INFERENCE) == "Keep the context length"
    assert pin_label(Pin.SEQUENCE, Mode.TRAINING) == PIN_LABELS[Pin.SEQUENCE] == "Keep the sequence length"
    assert pin_label(Pin.GPU_COUNT, Mode.INFERENCE) == PIN_LABELS[Pin.GPU_COUNT]


def test_each_mode_offers_the_symptoms_its_diagnosis_can_name() -> None:
    from core.advice.diagnosis import diagnose
    from core.advice.request import symptoms_for
    from core.advice.symptoms import SYMPTOMS, Failure

    serving = symptoms_for(Mode.INFERENCE)
    assert serving == (Failure.SERVING, Failure.SERVING_WEIGHTS, Failure.SERVING_START)
    assert symptoms_for(Mode.TRAINING) == tuple(s.failure for s in SYMPTOMS)
    llama = plan_for_model("llama-3.1-8b")
    named = {
        diagnose(plan, Mode.INFERENCE).failure
        for plan in (
            # transformers' generate holds all 64 requests' KV cache at once (tests/core/test_cli.py): many users
            llama.with_hardware(gpu="rtx-4090").with_inference(engine=Engine.HF, concurrent=64, context=8192),
            # vLLM's pool on an L4 holds less than one 131,072-token request: refused at start-up (h92verd)
            llama.with_hardware(gpu="l4").with_inference(engine=Engine.VLLM, context=131072),
            plan_for_model("llama-3.1-70b").with_hardware(gpu="l4").with_inference(engine=Engine.VLLM),  # weights
        )
    }
    assert named == set(serving)

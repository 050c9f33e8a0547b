"""Ready-made plans: the app's start-up plan and the lesson's worked examples."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Final

from core.catalogue import find_model
from core.dtypes import Quant
from core.model import ModelSpec
from core.plan import (
    Accounting,
    Hardware,
    LessonSettings,
    LoraSettings,
    Method,
    Plan,
    Precision,
    Preset,
    Workload,
    default_plan_on,
    precision_fields,
)

DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_GPU = "a100-80gb-sxm"


def plan_for_model(model_id: str, **changes: object) -> Plan:
    """The default plan on the catalogue model ``model_id`` (served on vLLM where the model is planned on vLLM
    only: core.plan.default_plan_on)."""
    entry = find_model(model_id)
    plan = default_plan_on(entry.spec, entry.id)
    return plan.with_changes(**changes) if changes else plan


def default_plan() -> Plan:
    """What the app shows at first start: LoRA on Llama 3.1 8B loaded in bf16 and trained with
    Trainer(bf16=True) (adapters in float32, as PEFT keeps them; fused AdamW, the Trainer's
    default), checkpointing on, one A100 80GB."""
    return plan_for_model(
        DEFAULT_MODEL,
        method=Method.LORA,
        preset=Preset.TRAINER_BF16,
        checkpointing=True,
        workload=Workload(micro_batch=4, seq_len=2048, grad_accum=4, tokens=20_000_000),
        hardware=Hardware(gpu=DEFAULT_GPU),
    )


# The lesson's models' names, as the model picker, the reports and the command line show them.
LESSON_7B_NAME: Final = "Lesson's 7B model (6.7 billion parameters)"
LESSON_GPT2_NAME: Final = "Lesson's GPT-2 small (124.4 million parameters)"


def lesson_7b_model() -> ModelSpec:
    """The lesson's '7B model': P = 6.7·10⁹ as the lesson rounds it, on Llama-2-7B's shape
    (32 blocks of width 4,096)."""
    return replace(find_model("llama-2-7b").spec, name=LESSON_7B_NAME, params_override=6_700_000_000)


def lesson_gpt2_model() -> ModelSpec:
    """The lesson's GPT-2 small: P = 124.4·10⁶ as the lesson rounds it, on GPT-2's shape."""
    return replace(find_model("gpt2").spec, name=LESSON_GPT2_NAME, params_override=124_400_000)


# The names the lesson's models had until 2026-12 ("P = 6.7e9" read as a formula, not a name), which plan files
# written then hold: core.files.planfile reads a model of such a name, equal in every other field it stores, as
# the lesson's model of today.
FORMER_LESSON_NAMES: Final[Mapping[str, Callable[[], ModelSpec]]] = {
    "7B model (lesson, P = 6.7e9)": lesson_7b_model,
    "GPT-2 small (lesson, P = 124.4e6)": lesson_gpt2_model,
}


def lesson_plan(method: Method, precision: Precision, *, quant: Quant = Quant.NF4, gpu: str = DEFAULT_GPU) -> Plan:
    """The lesson's 7B examples in lesson mode: 1.5 GB activations, T = 32·16·4096·8 for LoRA."""
    return Plan(
        model=lesson_7b_model(),
        model_id="llama-2-7b",
        method=method,
        quant=quant,
        **precision_fields(precision),
        lora=LoraSettings(rank=8, targets=("q_proj", "k_proj", "v_proj", "o_proj")),
        accounting=Accounting.LESSON,
        lesson=LessonSettings(
            activations_gb=1.5, trainable_override=32 * 16 * 4096 * 8 if method is not Method.FULL else 0
        ),
        hardware=Hardware(gpu=gpu),
    )


def lesson_gpt2_plan() -> Plan:
    """The lesson's GPT-2 small example: P = 124.4·10⁶, float32, full fine-tuning, Adam."""
    return Plan(
        model=lesson_gpt2_model(),
        model_id="gpt2",
        method=Method.FULL,
        **precision_fields(Precision.FP32),
        accounting=Accounting.LESSON,
        hardware=Hardware(gpu=DEFAULT_GPU),
    )


# The lesson's worked examples, as the app's File → Examples menu offers them.
LESSON_EXAMPLES: tuple[tuple[str, Callable[[], Plan]], ...] = (
    ("Lesson: GPT-2 small, float32, full fine-tuning (3.5 GB)", lesson_gpt2_plan),
    ("Lesson: 7B, 16-bit, full fine-tuning with Adam (81.9 GB)", lambda: lesson_plan(Method.FULL, Precision.BF16)),
    (
        "Lesson: 7B, LoRA r=8 on a 4-bit base, on a 12 GB card (5.1 GB)",
        lambda: lesson_plan(Method.QLORA, Precision.BF16, gpu="rtx-3060-12gb"),
    ),
    ("Lesson: 7B, LoRA r=8 on a 16-bit base (15.2 GB)", lambda: lesson_plan(Method.LORA, Precision.BF16)),
)

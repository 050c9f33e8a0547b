"""The plan's loss switches read as one choice (core.losses): the window's Loss list and the
warning about a plan that turns on two."""

from __future__ import annotations

import itertools

import pytest

from core.checks import plan_warnings
from core.files import planfile
from core.inputs import INPUTS, LOSS_CODE, LOSS_KERNELS, MegatronCeFusion, Stack, own_loss_code
from core.losses import (
    LOSS_INPUTS,
    LossChoice,
    loss_choice,
    loss_conflicts,
    loss_label,
    loss_options,
    with_loss,
)
from core.plan import Plan, Preset
from core.presets import plan_for_model
from core.training.activations import loss_memory
from core.verdict import Mode

SWITCHES = [choice for choice in LossChoice if choice is not LossChoice.DEFAULT]


def _gpt2(**changes: object) -> Plan:
    return plan_for_model("gpt2").with_changes(**changes)


def _listed(plan: Plan) -> list[LossChoice]:
    return [option.choice for option in loss_options(plan)]


def _switches_on(plan: Plan) -> dict[str, object]:
    defaults = {spec.path: spec.default for spec in INPUTS if spec.path in LOSS_INPUTS}
    return {path: plan.input_value(path) for path in LOSS_INPUTS if plan.input_value(path) != defaults[path]}


def test_the_loss_inputs_are_the_tables() -> None:
    assert set(LOSS_INPUTS) <= {spec.path for spec in INPUTS}


def test_each_choice_has_one_input_and_each_input_a_choice() -> None:
    """The Loss list's switches (LOSS_INPUTS) and the loss code that makes the eager loss's settings
    moot (core.inputs.LOSS_CODE, own_loss_code) agree: the list's kernels are exactly the choices
    own_loss_code counts, and every input of the list is set by some choice, once."""
    plan = _gpt2(preset=Preset.PURE_BF16)
    sets = {choice: _switches_on(with_loss(plan, choice)) for choice in SWITCHES}
    assert {choice: list(on) for choice, on in sets.items()} == {
        LossChoice.FUSED: ["fused_loss"],
        LossChoice.CHUNKED: ["chunked_loss"],
        LossChoice.FLASH: ["flash_loss"],
        LossChoice.COMPILED: ["compiled_loss"],
        LossChoice.LOGPROB_HEAD: ["logprob_head"],
        LossChoice.MEGATRON_NATIVE: ["megatron_ce_fusion"],
        LossChoice.MEGATRON_TE: ["megatron_ce_fusion"],
        LossChoice.LOSS_16BIT: ["loss_16bit"],
    }
    assert len(set(LOSS_INPUTS)) == len(LOSS_INPUTS) == len({path for on in sets.values() for path in on})
    kernels = {choice for choice in SWITCHES if own_loss_code(with_loss(plan, choice))}
    assert {path for choice in kernels for path in sets[choice]} == set(LOSS_KERNELS)
    assert set(LOSS_INPUTS) & set(LOSS_CODE) == set(LOSS_KERNELS)


@pytest.mark.parametrize("choice", list(LossChoice))
def test_with_loss_turns_on_that_switch_only(choice: LossChoice) -> None:
    plan = _gpt2(stack=Stack.MEGATRON, fused_loss=True, chunked_loss=True, megatron_ce_fusion=MegatronCeFusion.TE)
    chosen = with_loss(plan, choice)
    assert len(_switches_on(chosen)) == (0 if choice is LossChoice.DEFAULT else 1)
    assert loss_conflicts(chosen) == ()
    # Nothing else of the plan moves.
    assert with_loss(chosen, LossChoice.DEFAULT) == with_loss(plan, LossChoice.DEFAULT)
    assert with_loss(chosen, choice) is chosen  # already so: the same plan, no edit


def test_the_default_plan_has_the_default_loss() -> None:
    plan = _gpt2()
    assert loss_choice(plan) is LossChoice.DEFAULT and loss_conflicts(plan) == ()
    assert loss_options(plan)[0].label == "Eager cross-entropy (float32)"
    assert "three float32 copies of the logits" in loss_options(plan)[0].tooltip


def test_the_list_names_only_what_applies() -> None:
    eager = _listed(_gpt2())  # eager PyTorch, bf16 autocast
    assert eager == [
        LossChoice.DEFAULT,
        LossChoice.COMPILED,
        LossChoice.FLASH,
        LossChoice.CHUNKED,
        LossChoice.LOGPROB_HEAD,
        LossChoice.FUSED,
    ]
    assert LossChoice.LOSS_16BIT in _listed(_gpt2(preset=Preset.PURE_BF16))  # no autocast: 16-bit logits
    megatron = _listed(_gpt2(stack=Stack.MEGATRON))
    assert LossChoice.MEGATRON_NATIVE in megatron and LossChoice.MEGATRON_TE in megatron
    assert loss_label(_gpt2(stack=Stack.MEGATRON), LossChoice.DEFAULT) == "Megatron unfused (float32)"
    # Unsloth and LitGPT bring their own loss: the default names it, the fused one replaces it.
    for framework, name in (("unsloth", "Unsloth's own"), ("litgpt", "LitGPT's own")):
        plan = _gpt2(**{framework: True})
        assert _listed(plan) == [LossChoice.DEFAULT, LossChoice.FUSED]
        assert loss_options(plan)[0].label.startswith(name)


def test_the_list_is_listed_whatever_loss_is_on() -> None:
    """A switch on does not hide the others (their own rows did): choosing one turns it off."""
    plan = _gpt2(preset=Preset.PURE_BF16)
    assert all(_listed(with_loss(plan, choice)) == _listed(plan) for choice in _listed(plan))


def test_every_entry_says_what_it_keeps() -> None:
    for plan in (_gpt2(preset=Preset.PURE_BF16), _gpt2(stack=Stack.MEGATRON)):
        for option in loss_options(plan):
            assert option.label and len(option.label) <= 30, option  # fits the form's column
            assert "logits" in option.tooltip or "chunk" in option.tooltip, option


PLANS = {
    "eager, pure bf16": _gpt2(preset=Preset.PURE_BF16),
    "eager, autocast": _gpt2(),
    "megatron": _gpt2(stack=Stack.MEGATRON),
}


@pytest.mark.parametrize("name", PLANS)
def test_the_choice_is_the_loss_the_estimate_counts(name: str) -> None:
    """Two switches on (a file, the command line): the choice is the one loss_memory takes, and
    the other is a conflict, named in the plan's warnings."""
    base = PLANS[name]
    megatron = {LossChoice.MEGATRON_NATIVE, LossChoice.MEGATRON_TE}
    for first, second in itertools.combinations(SWITCHES, 2):
        if {first, second} == megatron:
            continue  # two values of one input: never both on
        plan = base
        for choice in (first, second):
            plan = plan.with_changes(**_switches_on(with_loss(base, choice)))
        chosen = loss_choice(plan)
        assert loss_memory(plan) == loss_memory(with_loss(plan, chosen)), (first, second)
        if first in _listed(base) and second in _listed(base):
            assert {chosen, *loss_conflicts(plan)} == {first, second}
            (warning,) = [w for w in plan_warnings(plan) if "more than one loss" in w.text]
            assert warning.mode is Mode.TRAINING and loss_label(plan, chosen) in warning.text


def test_a_file_with_two_losses_keeps_both() -> None:
    plan = _gpt2(fused_loss=True, chunked_loss=True)
    again = planfile.loads(planfile.dumps(plan))
    assert again == plan and again.fused_loss and again.chunked_loss
    assert loss_choice(again) is LossChoice.FUSED and loss_conflicts(again) == (LossChoice.CHUNKED,)


def test_a_switch_that_does_not_apply_is_no_conflict() -> None:
    """The 16-bit loss under autocast is moot (F.cross_entropy runs in float32): kept, not listed,
    neither chosen nor a conflict, as a hidden row's value is."""
    plan = _gpt2(loss_16bit=True, chunked_loss=True)
    assert loss_choice(plan) is LossChoice.CHUNKED and loss_conflicts(plan) == ()
    assert not [w for w in plan_warnings(plan) if "more than one loss" in w.text]


def _lesson_figures(plan: Plan) -> tuple[object, ...]:
    """Every figure the window prints of a training plan: the buckets, the total, the FLOPs and the hours."""
    from core.estimate import estimate

    est = estimate(plan)
    return (est.total_bytes, tuple(b.bytes for b in est.buckets), est.compute.flops, est.compute.hours)


def _values(plan: Plan, path: str) -> list[Plan]:
    """``plan`` with each value the input at ``path`` takes (the Loss row: each choice it lists)."""
    from core.inputs import input_at

    if path == "loss":
        return [with_loss(plan, option.choice) for option in loss_options(plan)]
    spec = input_at(path)
    values = [False, True] if isinstance(spec.default, bool) else list(spec.enum)
    plans = []
    for value in values:
        try:
            plans.append(plan.with_input(path, value))
        except ValueError:  # a PlanError: a value this plan refuses (Megatron's fusion off the Megatron stack)
            continue
    return plans


def test_under_lesson_accounting_the_loss_group_moves_no_figure() -> None:
    # core.losses.LESSON_IGNORES_REASON says so in the window's tooltips: the rule is checked on the estimate.
    from core.inputs import Accounting
    from core.losses import LOSS_GROUP, lesson_ignores
    from core.plan import LoraSettings, Method, Precision
    from core.presets import lesson_plan

    lora = LoraSettings(rank=16, alpha=32, targets=("q_proj", "v_proj"))
    bases = [
        lesson_plan(Method.FULL, Precision.BF16, gpu="rtx-4090"),  # the lesson's own 7B example
        plan_for_model("qwen3-30b-a3b").with_changes(accounting=Accounting.LESSON, method=Method.LORA, lora=lora),
        # a 4-bit base whose routed experts transformers 5 leaves in 16 bits (Plan.release_moves_bnb_experts): the
        # release moves the step's time, so its row stays (the lesson's memory, P × the base's bytes, does not move)
        plan_for_model("qwen3-30b-a3b").with_changes(accounting=Accounting.LESSON, method=Method.QLORA, lora=lora),
        _gpt2(accounting=Accounting.LESSON, stack=Stack.MEGATRON),
    ]
    for base in bases:
        before = _lesson_figures(base)
        for path in LOSS_GROUP:
            figures = {_lesson_figures(changed) for changed in _values(base, path)}
            if lesson_ignores(base, path):
                assert figures == {before}, (base.model.name, path)
            else:
                assert path == "training_transformers" and base.method is Method.QLORA and len(figures) > 1
            assert not lesson_ignores(base.with_changes(accounting=Accounting.DETAILED), path)


def test_the_transformers_release_stays_where_it_moves_a_lesson_s_adapters() -> None:
    # On a mixture of experts transformers 5 keeps PEFT's MLP targets off the routed experts (core.inputs
    # training_transformers' tooltip; Plan.release_moves_adapters): the lesson's trainable count moves with it.
    from core.inputs import Accounting, TransformersLoss
    from core.losses import lesson_ignores
    from core.plan import LoraSettings, Method

    lora = LoraSettings(rank=16, alpha=32, targets=("all-linear",))
    plan = plan_for_model("qwen3-30b-a3b").with_changes(accounting=Accounting.LESSON, method=Method.LORA, lora=lora)
    assert plan.release_moves_adapters and not lesson_ignores(plan, "training_transformers")
    figures = {_lesson_figures(plan.with_input("training_transformers", v)) for v in TransformersLoss}
    assert len(figures) > 1
    assert lesson_ignores(plan, "loss") and lesson_ignores(plan, "loop_keeps_output")

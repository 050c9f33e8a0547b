"""The input table (core/inputs.py) is what the Plan enforces and what the command line offers.

Every number here is read from the table itself (its ``low``, ``high``, ``default``) or is
named where it is written; the GUI side of the same promise is tests/gui/test_input_fields.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from core.catalogue import find_model, load_links
from core.cli.app import build_parser
from core.cli.parser import given_inputs
from core.cli.plans import plan_from_args
from core.dtypes import Autocast
from core.errors import PlanError
from core.inputs import BY_PATH, INPUTS, MAX_DEGREE, Input, Kind, input_at
from core.model import LIMITS, LORA_TARGETS
from core.plan import (
    Accounting,
    Hardware,
    Inference,
    LessonSettings,
    LoraSettings,
    Method,
    Parallelism,
    PipelineSchedule,
    Plan,
    Strategy,
    Workload,
)
from core.presets import plan_for_model

NUMBERS = [i for i in INPUTS if i.kind in (Kind.INT, Kind.COUNT, Kind.FLOAT)]
GROUPS: dict[str, type] = {
    "lora": LoraSettings,
    "workload": Workload,
    "hardware": Hardware,
    "parallel": Parallelism,
    "inference": Inference,
    "lesson": LessonSettings,
}
# What an extreme of one input needs from the others to be a valid value of its part:
# a split degree of MAX_DEGREE needs that many GPUs, virtual stages the interleaved schedule.
COMPANIONS: dict[str, dict[str, Any]] = {
    "parallel.tensor_parallel": {"gpus_per_node": MAX_DEGREE},
    "parallel.pipeline_parallel": {"gpus_per_node": MAX_DEGREE},
    "parallel.context_parallel": {"gpus_per_node": MAX_DEGREE},
    "parallel.expert_parallel": {"gpus_per_node": MAX_DEGREE},
    # HSDP: FSDP's, R replicas each sharding over 2 or more GPUs (torchtitan's dp_replicate × dp_shard).
    "parallel.dp_replicate": {"strategy": Strategy.FSDP, "gpus_per_node": MAX_DEGREE, "nodes": 2},
    "parallel.virtual_stages": {"schedule": PipelineSchedule.INTERLEAVED},
}
# The deepest model the model description allows (LIMITS["num_layers"]): frozen layers up to it.
DEEP = Plan(model=replace(find_model("gpt2").spec, num_layers=LIMITS["num_layers"]))


def _built(spec: Input, value: Any) -> object:
    """The part of a plan holding ``spec`` built with ``value`` (the Plan's own validation runs)."""
    if spec.group == "model":
        return replace(DEEP.model, **{spec.attribute: value})
    if spec.group == "":
        return replace(DEEP, **{spec.attribute: value})
    return GROUPS[spec.group](**{spec.attribute: value, **COMPANIONS.get(spec.path, {})})


def _inside(spec: Input) -> list[float]:
    ends = [spec.low, spec.high] + ([0] if spec.zero_means else [])
    return [int(v) for v in ends] if spec.kind is not Kind.FLOAT else ends


def _outside(spec: Input) -> list[float]:
    if spec.kind is not Kind.FLOAT:
        return [int(spec.low) - 1, int(spec.high) + 1]
    below = spec.low / 2 if spec.low > 0 else -1e-9  # between 0 and the low end, or below 0
    return [below, spec.high * (1 + 1e-9)]


@pytest.mark.parametrize("spec", NUMBERS, ids=lambda s: s.path)
def test_each_end_of_a_range_is_accepted(spec: Input) -> None:
    for value in _inside(spec):
        _built(spec, value)


@pytest.mark.parametrize("spec", NUMBERS, ids=lambda s: s.path)
def test_just_outside_a_range_is_refused_naming_the_attribute_path(spec: Input) -> None:
    for value in _outside(spec):
        with pytest.raises(PlanError) as refused:
            _built(spec, value)
        assert str(refused.value).startswith(f"{spec.path}: "), str(refused.value)


CHOICES_AND_TEXT = [i for i in INPUTS if i.kind in (Kind.ENUM, Kind.BOOL, Kind.TEXT)]


@pytest.mark.parametrize("spec", CHOICES_AND_TEXT, ids=lambda s: s.path)
def test_a_value_of_the_wrong_kind_is_refused_naming_the_attribute_path(spec: Input) -> None:
    with pytest.raises(PlanError, match=rf"^{spec.path}: "):
        _built(spec, "no such value" if spec.kind is not Kind.TEXT else "  ")


def test_vanishing_fractions_are_refused() -> None:
    # Issue 25: a utilisation of 1e-300 was accepted (infinite hours); the low ends are sane.
    for path in ("hardware.utilisation", "inference.gpu_memory_utilization", "lora.alpha"):
        with pytest.raises(PlanError, match=rf"^{path}: 1e-300 "):
            _built(input_at(path), 1e-300)


def test_the_plan_takes_its_defaults_from_the_table() -> None:
    plan = Plan(model=find_model("gpt2").spec)
    for spec in INPUTS:
        assert plan.input_value(spec.path) == spec.default, spec.path


def test_a_split_that_does_not_divide_the_gpus_names_the_degree_that_breaks_it() -> None:
    with pytest.raises(PlanError, match=r"^parallel\.pipeline_parallel: 3 "):
        Parallelism(gpus_per_node=8, pipeline_parallel=3)
    with pytest.raises(PlanError, match=r"^parallel\.tensor_parallel: 3 "):
        Parallelism(gpus_per_node=8, tensor_parallel=3)
    with pytest.raises(PlanError, match=r"^parallel\.context_parallel: 4 "):
        Parallelism(gpus_per_node=8, tensor_parallel=2, pipeline_parallel=2, context_parallel=4)


def test_when_an_input_matters() -> None:
    full, lora = plan_for_model("gpt2"), plan_for_model("gpt2", method=Method.LORA)
    assert not input_at("lora.rank").matters(full) and input_at("lora.rank").matters(lora)
    lesson = full.with_changes(accounting=Accounting.LESSON)
    assert not input_at("lesson.activations_gb").matters(full) and input_at("lesson.activations_gb").matters(lesson)
    assert input_at("workload.micro_batch").matters(full)


# ---- the command line ---------------------------------------------------------------------
def _value_for(spec: Input) -> Any:
    """A value the flag can take that differs from the default (the low end where it does)."""
    if spec.kind is Kind.BOOL:
        return not spec.default
    if spec.kind in (Kind.INT, Kind.COUNT):
        low = int(spec.low)
        return low if low != spec.default else low + 1
    if spec.kind is Kind.FLOAT and spec.cli_factor != 1.0:
        return 1.5  # in the command line's unit (held_by_others: 1.5 GiB, within any card the tests pick)
    if spec.kind is Kind.FLOAT:
        return spec.low if spec.low != spec.default else (spec.low + spec.high) / 2
    if spec.kind is Kind.SETTING:
        return "expandable_segments:True"
    if spec.kind is Kind.ENUM:
        return next(c for c in (spec.cli_choices or [e.value for e in spec.enum]) if c != spec.default)
    if spec.kind is Kind.TARGETS:
        return "all-linear"
    if spec.path == "hardware.gpu":
        return "h100-sxm"
    if spec.path == "inference.link":  # any link: the serving GPUs may be on different nodes
        return "nvlink4"
    return next(link.id for link in load_links() if link.kind.value in spec.path and link.id != spec.default)


def _argv(spec: Input, value: Any) -> list[str]:
    flag = next(f for f in spec.flags if f.startswith("--"))
    if spec.kind is Kind.BOOL or spec.cli_switch:
        on = not spec.default if spec.kind is Kind.BOOL else False  # --no-autocast: autocast off
        return [flag if on else "--no-" + flag[2:]]
    return [flag, str(value)]


WITH_FLAGS = [i for i in INPUTS if i.flags]


def test_every_input_has_a_flag_or_takes_another_inputs_flag() -> None:
    assert {i.path for i in INPUTS if not i.flags} == {i.path for i in INPUTS if i.flag_of}
    assert all(BY_PATH[i.flag_of].flags for i in INPUTS if i.flag_of)


@pytest.mark.parametrize("spec", WITH_FLAGS, ids=lambda s: s.path)
def test_every_flag_reaches_its_input_in_the_plan(spec: Input) -> None:
    value = _value_for(spec)
    model = [] if spec.path == "model.params_override" else ["--model", "gpt2"]  # --params is a model source
    if spec.path == "parallel.expert_parallel":  # experts to split: a mixture of experts (Qwen3-30B-A3B's 128)
        model = ["--model", "qwen3-30b-a3b"]
    context = ["--gpus", "4"] if spec.path.endswith("_parallel") and spec.kind is Kind.INT else []
    if spec.path == "parallel.dp_replicate":  # HSDP replicas are FSDP's, 2 of 2 GPUs each
        context = ["--gpus", "4", "--strategy", "fsdp"]
    if spec.path in ("lora.modules_to_save", "lora.trainable_tokens"):  # PEFT config keys: a PEFT method
        context = ["--method", "lora"]
    if spec.path == "parallel.pad_to_capacity":  # Megatron pads only with a capacity factor (its ValueError)
        context = ["--capacity-factor", "1.25"]
    args = build_parser().parse_args(["estimate", *model, *context, *_argv(spec, value)])
    plan = plan_from_args(args)
    if spec.cli_switch:
        assert given_inputs(args)[spec.path] is False and plan.autocast is Autocast.NONE
    elif spec.kind is Kind.BOOL:
        assert plan.input_value(spec.path) is (not spec.default)
    elif spec.kind is Kind.TARGETS:  # the LoRA targets (all-linear kept beside its seven names), IA3's feedforward
        extra = ("all-linear",) if spec.path == "lora.targets" else ()
        assert plan.input_value(spec.path) == (*LORA_TARGETS, *extra)
    elif spec.kind is Kind.ENUM:
        assert plan.input_value(spec.path) == spec.enum(value)
    else:
        # held_by_others: GiB typed, bytes held (Input.cli_factor)
        assert plan.input_value(spec.path) == (value * spec.cli_factor if spec.cli_factor != 1.0 else value)


@pytest.mark.parametrize(("flag", "path"), [("--tp", "tensor_parallel"), ("--pp", "pipeline_parallel")])
def test_the_split_flags_serve_the_model_under_mode_inference(flag: str, path: str) -> None:
    args = build_parser().parse_args(["estimate", "--model", "llama-3.1-8b", "--mode", "inference", flag, "2"])
    plan = plan_from_args(args)
    assert plan.input_value(f"inference.{path}") == 2 and plan.input_value(f"parallel.{path}") == 1
    assert input_at(f"inference.{path}").flag_of == f"parallel.{path}"


@pytest.mark.parametrize("spec", NUMBERS, ids=lambda s: s.path)
def test_the_command_line_refuses_what_the_plan_refuses(spec: Input, capsys: pytest.CaptureFixture[str]) -> None:
    from core.cli.app import main

    if not spec.flags or spec.path == "model.params_override":  # --params: its own positive-count rule
        return
    value = _outside(spec)[1]
    assert main(["estimate", "--model", "gpt2", spec.flags[0], str(value)]) == 2
    assert f"vramplan: {spec.path}: " in capsys.readouterr().err

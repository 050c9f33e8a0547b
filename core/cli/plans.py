"""The plans a command line names: its options (on a catalogue model, a config.json, a plan
file or a training config), or plan and comparison files.

The plain inputs apply as given (each to its attribute path); the rules are here for the
options that mean more than one field: the model's source, the precision words and roles,
the checkpointing policy, the GPU count and old sharding name, the serving split under
``--mode inference``, and lesson accounting.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from core.advice.compare import MAX_PLANS
from core.catalogue import find_model
from core.cli.output import say
from core.cli.parser import UsageError, given_inputs
from core.dtypes import Autocast, Dtype
from core.errors import PlanError
from core.estimate import gpu_for
from core.files.comparison import common_mode, load_named_modes
from core.files.importer import import_model
from core.files.launch.llamacpp import CPU_MOE_ALL
from core.files.launch.vllm import text_only_limits
from core.files.model_source import NamedModel, model_named
from core.files.planfile import load as load_plan
from core.files.planfile import load_saved
from core.files.runconfig import (
    ModelChoice,
    RunConfig,
    choice_from_cache,
    choice_from_catalogue,
    load_run_config,
    plan_from_run,
    resolve_model,
)
from core.format import scientific
from core.plan import (
    Accounting,
    CheckpointPolicy,
    Method,
    PipelineSchedule,
    Plan,
    Precision,
    Preset,
    Strategy,
    check_trainable,
    preset_matching,
)
from core.presets import default_plan
from core.serving.ollama import ollama_defaults
from core.verdict import Mode

PARAMS: Final = "model.params_override"  # --params: a model source as much as an input
ROLE_PATHS: Final = ("weight_dtype", "base_dtype", "adapter_dtype")
# The inputs the rules below apply; every other one is set as given.
_BY_RULE: Final = frozenset(
    {PARAMS, "method", "preset", *ROLE_PATHS, "autocast", "checkpoint_policy", "checkpoint_every", "accounting"}
)


def mode_for(args: argparse.Namespace) -> Mode:
    """The question asked: ``--mode`` when given, else the mode ``--plan FILE`` was saved with,
    else a training step (branch h56mode: an Inference plan reopened as Training before)."""
    if args.mode is not None:
        return Mode(args.mode)
    if getattr(args, "plan", None):
        return load_saved(args.plan).mode
    return Mode.TRAINING


def base_plan(args: argparse.Namespace) -> Plan:
    """The plan before the options: ``--plan``, or Llama-2-7B's in the window's first-start precision (the model
    loaded in bf16, Trainer(bf16=True): core.presets.default_plan), on ``--model``, ``--config`` or ``--params``."""
    params = getattr(args, PARAMS)
    sources = [s for s in (args.model, args.config, params, args.plan) if s is not None]
    if len([s for s in (args.model, args.config, params) if s is not None]) > 1:
        raise UsageError("give the model once: --model, --config or --params")
    if args.plan:
        plan = load_plan(args.plan)
    else:
        plan = Plan(model=find_model("llama-2-7b").spec, model_id="llama-2-7b", preset=Preset.TRAINER_BF16)
    if not sources:
        raise UsageError("say which model: --model ID, --config PATH, --params N or --plan FILE")
    if args.model:
        named = named_model(args.model)
        plan = plan.on_model(named.spec, named.model_id)
    elif args.config:
        imported = import_model(args.config)
        plan = plan.on_model(imported.spec)
        if imported.skip_modules:  # an option given beside --config overrides it later
            plan = replace(plan, bnb_skip_modules=imported.skip_modules)
            print(f"vramplan: {imported.skip_note}", file=sys.stderr)
    elif params is not None:
        if params < 1:
            raise PlanError("--params", params, "a positive parameter count")
        # A bare count keeps the shape of the current model (Llama-2-7B unless --plan).
        plan = replace(plan, model=replace(plan.model, name=f"P = {scientific(params)}", params_override=params))
    return plan


def _with_precision(plan: Plan, args: argparse.Namespace, given: dict[str, Any]) -> Plan:
    """--precision or --preset first, then single roles on top; roles that match a named
    preset are called by its name (``--precision bf16 --autocast`` is trainer-bf16)."""
    if args.precision is not None and "preset" in given:
        raise UsageError("give --precision or --preset, not both")
    if args.precision is not None:
        plan = plan.with_changes(precision=Precision(args.precision))
    if "preset" in given:
        plan = plan.with_changes(preset=given["preset"])
    roles: dict[str, Any] = {name: given[name] for name in ROLE_PATHS if name in given}
    if "weight_dtype" in given and "base_dtype" not in given:
        roles["base_dtype"] = roles["weight_dtype"]  # the model is loaded in one dtype
    if "autocast" in given:
        stored = roles.get("weight_dtype", plan.weight_dtype)
        autocast_16 = Autocast.FP16 if stored is Dtype.FP16 else Autocast.BF16
        roles["autocast"] = autocast_16 if given["autocast"] else Autocast.NONE
    if not roles:
        return plan
    plan = plan.with_changes(**roles)
    return plan.with_changes(preset=preset_matching(plan.roles)) if plan.preset is Preset.CUSTOM else plan


def _checkpointing(given: dict[str, Any]) -> dict[str, Any]:
    """--checkpoint-policy / --checkpoint-every: either turns checkpointing on, and a
    block interval alone means the layer policy."""
    policy, every = given.get("checkpoint_policy"), given.get("checkpoint_every")
    if policy is None and every is None:
        return {}
    if given.get("checkpointing") is False:
        raise UsageError("--no-checkpointing contradicts --checkpoint-policy / --checkpoint-every")
    if every is not None and policy not in (None, CheckpointPolicy.LAYER):
        raise UsageError(f"--checkpoint-every applies to --checkpoint-policy layer, not {policy}")
    changes: dict[str, Any] = {"checkpointing": True}
    changes["checkpoint_policy"] = CheckpointPolicy.LAYER if every is not None else policy
    if every is not None:
        changes["checkpoint_every"] = every
    return changes


def _parallel(args: argparse.Namespace, parallel: dict[str, Any]) -> dict[str, Any]:
    """The GPU count's and the strategy's other spellings (--gpus, --sharding); virtual
    stages bring the interleaved schedule."""
    if args.gpus_total is not None:
        if "gpus_per_node" in parallel and parallel["gpus_per_node"] != args.gpus_total:
            raise UsageError("--gpus and --gpus-per-node disagree: give one of them")
        parallel["gpus_per_node"] = args.gpus_total
    if "strategy" in parallel and args.sharding is not None:
        raise UsageError("--sharding is the old name of --strategy: give one of them")
    if args.sharding is not None:
        parallel["strategy"] = Strategy.DDP if args.sharding == "none" else Strategy(args.sharding)
    if parallel.get("virtual_stages", 1) > 1 and "schedule" not in parallel:
        parallel["schedule"] = PipelineSchedule.INTERLEAVED
    return parallel


def _accounting(args: argparse.Namespace, given: dict[str, Any], lesson: dict[str, Any]) -> Accounting | None:
    """--accounting, or lesson accounting implied by --lesson and the lesson's own inputs."""
    implied = args.lesson or bool(lesson)
    if implied and given.get("accounting", Accounting.LESSON) is not Accounting.LESSON:
        raise UsageError("--accounting detailed contradicts --lesson, --activations-gb and --trainable")
    return Accounting.LESSON if implied else given.get("accounting")


def _method(args: argparse.Namespace, given: dict[str, Any]) -> Method | None:
    method: Method | None = given.get("method")
    if args.dora:
        if method not in (None, Method.DORA):
            raise UsageError(f"--dora contradicts --method {method}")
        method = Method.DORA
    return method


def _text_only(args: argparse.Namespace, given: dict[str, Any]) -> None:
    """``--limit-mm-per-prompt``, vLLM's spelling of text-only mode: every limit 0 sets it, other limits clear it;
    a contradicting ``--text-only`` / ``--no-text-only`` is refused."""
    limits = getattr(args, "limit_mm_per_prompt", None)
    if limits is None:
        return
    text_only = text_only_limits(limits)
    if given.get("inference.text_only", text_only) != text_only:
        raise UsageError(f"--limit-mm-per-prompt {limits} contradicts --{'no-' if text_only else ''}text-only")
    given["inference.text_only"] = text_only


def _cpu_moe(args: argparse.Namespace, given: dict[str, Any]) -> None:
    """``--cpu-moe``, llama.cpp's switch for every layer's experts in host RAM (``--n-cpu-moe`` past the
    layer count); given with ``--n-cpu-moe`` it is refused."""
    if not getattr(args, "cpu_moe", False):
        return
    if "inference.cpu_moe_layers" in given:
        raise UsageError("--cpu-moe keeps every layer's experts in RAM: give it or --n-cpu-moe N, not both")
    given["inference.cpu_moe_layers"] = CPU_MOE_ALL


def plan_from_args(args: argparse.Namespace, base: Plan | None = None) -> Plan:
    """The plan the options describe, on ``base`` (else on :func:`base_plan`)."""
    given = given_inputs(args)
    _text_only(args, given)
    _cpu_moe(args, given)
    plan = _with_precision(base if base is not None else base_plan(args), args, given)
    method = _method(args, given)
    groups: dict[str, dict[str, Any]] = {}
    for path, value in given.items():
        if path not in _BY_RULE:
            group, _, name = path.rpartition(".")
            groups.setdefault(group, {})[name] = value
    changes = groups.pop("", {})
    if "optimizer" in given and "optimizer_impl" not in given:  # RMSprop under a fused default: torch's foreach
        changes["optimizer_impl"] = plan.follow_optimizer(given["optimizer"])
    changes.update(_checkpointing(given))
    parallel = _parallel(args, groups.pop("parallel", {}))
    if args.mode == "inference":  # the split flags describe the served model
        for key in ("tensor_parallel", "pipeline_parallel"):
            if key in parallel:
                groups.setdefault("inference", {})[key] = parallel.pop(key)
    if parallel:
        groups["parallel"] = parallel
    accounting = _accounting(args, given, groups.get("lesson", {}))
    if accounting is not None:
        changes["accounting"] = accounting
    for group, values in groups.items():
        changes[group] = replace(getattr(plan, group), **values)
    # A method switch moves the targets and IA3's feedforward modules with it unless typed (a typed
    # feedforward module outside the targets is then refused, as PEFT refuses it).
    plan = (
        plan.with_method(method, typed=frozenset(given), **changes) if method is not None else replace(plan, **changes)
    )
    if "inference.ollama_version" in given:  # the release's num_ctx, parallel and flash attention
        plan = ollama_defaults(plan, gpu_for(plan), frozenset(given))
    if mode_for(args) is Mode.TRAINING:  # Llama 4, Gated DeltaNet hybrids, a hybrid's unmodelled recipe
        check_trainable(plan, "inference (--mode inference)")
    return plan


# ---- estimate --from and fewest-gpus --from: a training config ----------------------------
def named_model(text: str) -> NamedModel:
    """``--model``: a catalogue id, or a Hub id read from the local Hugging Face cache
    (:mod:`core.files.model_source`); a fall-back or a partial download is said on stderr."""
    named = model_named(text)
    if named.note:
        say(f"vramplan: note: {named.note}\n")
    return named


def _model_for(args: argparse.Namespace, run: RunConfig) -> ModelChoice | None:
    if args.model:  # a catalogue id, a Hub id or a name, by the one rule (core.files.model_source.model_named)
        named = named_model(args.model)
        if named.cached is not None:
            return choice_from_cache(named.cached, "--model")
        return choice_from_catalogue(named.model_id, "--model")
    if args.config:
        imported = import_model(args.config)
        return ModelChoice(imported.spec, "", f"--config {imported.source}", None)
    choice = resolve_model(run)
    if choice is not None and choice.spec is None:
        close = f" (closest: {', '.join(choice.candidates)})" if choice.candidates else ""
        raise UsageError(f"{run.path}: {choice.how}; give --model ID or --config PATH{close}")
    return choice


def plan_from_config(args: argparse.Namespace) -> tuple[Plan, RunConfig, ModelChoice | None]:
    """The plan a ``--from`` config describes, on top of ``--plan`` (or the default plan)."""
    if getattr(args, PARAMS) is not None:
        raise UsageError("--from takes its model from the file, --model or --config, not --params")
    run = load_run_config(args.from_file)
    choice = _model_for(args, run)
    base = load_plan(args.plan) if args.plan else default_plan()
    return plan_from_run(run, base, choice), run, choice


def without_model(args: argparse.Namespace) -> argparse.Namespace:
    """The options less the model's source: what overrides a config's plan."""
    return argparse.Namespace(**{**vars(args), "model": None, "config": None, PARAMS: None, "plan": None})


# ---- compare and report: plan files -------------------------------------------------------
def _load_modes(paths: Sequence[str]) -> list[tuple[str, Plan, Mode]]:
    named = load_named_modes(paths)
    if not 1 <= len(named) <= MAX_PLANS:
        raise UsageError(f"{len(named)} plans given; a comparison holds 1 to {MAX_PLANS}")
    return named


def load_plans_and_mode(paths: Sequence[str], mode: str | None) -> tuple[list[tuple[str, Plan]], Mode]:
    """The plans of ``compare`` / ``report`` and the question: ``--mode`` when given, else the one
    the files were saved with (files saved in different modes are refused: give --mode)."""
    # Every argument is at least one plan: too many are refused before any is read (issue 28
    # item 15: 10,000 arguments were all read, 118 s, before the count was checked).
    if len(paths) > MAX_PLANS:
        raise UsageError(f"{len(paths):,} files given; a comparison holds 1 to {MAX_PLANS} plans")
    named = _load_modes(paths)
    modes = sorted({m.value for _, _, m in named})
    if mode is None and len(modes) > 1:
        raise UsageError(f"the plans were saved in different modes ({', '.join(modes)}): give --mode to choose one")
    chosen = Mode(mode) if mode is not None else common_mode([m for _, _, m in named], "the plans")
    return [(name, plan) for name, plan, _ in named], chosen

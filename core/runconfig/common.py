"""Pieces every importer shares: target-module lists, dtype and optimizer names, odd values."""

from __future__ import annotations

import re
from typing import Any

from core.errors import PlanError
from core.model import normalise_lora_targets
from core.runconfig.mapping import DTYPES, HF_DEFAULT_OPTIM, HF_OPTIMIZERS
from core.runconfig.reading import Taker
from core.runconfig.result import ConfigKind, RunConfig, RunSettings

# Names some frameworks use for the same matrices that core.model does not list.
_EXTRA_TARGETS = {"output_proj": "o_proj"}  # torchtune's attention output


class OddValues:
    """Values of understood keys that the planner cannot represent: listed, never dropped."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, key: str, value: object, why: str) -> None:
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        self.items.append(f"{key} = {shown} ({why})")


def lora_targets(
    taker: Taker, key: str, names: tuple[str, ...] | None, odd: OddValues, setting: str = "lora_targets"
) -> tuple[str, ...] | None:
    """The module names the planner knows; the others are listed as not understood.

    A single string that is not a list may be a regular expression (PEFT matches it with
    ``re.fullmatch``): the known names it mentions are taken.
    """
    if names is None:
        return None
    if len(names) == 1 and re.search(r"[\\|()*\[\]$^]", names[0]):
        found = re.findall(r"[a-z_0-9]+", names[0])
        names = tuple(n for n in found if _known(n))
        if not names:
            odd.add(key, taker.raw(key), "a pattern naming no module the planner knows")
            return None
    known: list[str] = []
    for name in names:
        if _known(name):
            known.append(_EXTRA_TARGETS.get(name.lower(), name))
        else:
            odd.add(key, name, "not a matrix of the planner's model: q/k/v/o, gate/up/down projections")
    if not known:
        return None
    targets = normalise_lora_targets(known)
    taker.record(setting, ", ".join(targets), key)
    return targets


def _known(name: str) -> bool:
    try:
        normalise_lora_targets([_EXTRA_TARGETS.get(name.lower(), name)])
    except PlanError:
        return False
    return True


def dtype(taker: Taker, key: str, odd: OddValues) -> str | None:
    value = taker.raw(key)
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None
    name = DTYPES.get(str(value).strip().lower()) if isinstance(value, str) else None
    if name is None:
        odd.add(key, value, "not a dtype: bfloat16, float16 or float32")
        return None
    taker.record("model_dtype", name, key)
    return name


def hf_optimizer(taker: Taker, key: str, odd: OddValues, framework: str) -> tuple[str | None, str | None]:
    """A transformers ``optim`` name as (optimizer, implementation); the Trainer's default if absent."""
    value = taker.raw(key)
    source = key
    if value is None:
        value, source = (
            HF_DEFAULT_OPTIM,
            f"default: {framework} passes no optim, TrainingArguments uses {HF_DEFAULT_OPTIM}",
        )
    if not isinstance(value, str) or value.strip().lower() not in HF_OPTIMIZERS:
        odd.add(key, value, "an optimizer the planner does not model")
        return None, None
    optimizer, impl = HF_OPTIMIZERS[value.strip().lower()]
    taker.record("optimizer", optimizer.value, source)
    if impl is not None:
        taker.record("optimizer_impl", impl, source)
    return optimizer.value, impl


def finish(
    kind: ConfigKind, taker: Taker, odd: OddValues, model_ref: str | None, settings: dict[str, Any], **extra: Any
) -> RunConfig:
    """The importer's result: settings, every field read, notes, and what was not understood."""
    return RunConfig(
        kind=kind,
        path=taker.where,
        model_ref=model_ref,
        settings=RunSettings(**settings),
        fields=tuple(taker.fields),
        notes=tuple(taker.notes),
        unknown=taker.unknown() + tuple(odd.items),
        **extra,
    )

"""The model a name means: a catalogue id, or a Hugging Face Hub id read from the local cache.

One rule for every place a model is named (``--model`` on the command line, a Hub id typed in
the window's model picker, the model a training config names):

- a Hub id (``organisation/name``) is read from the local Hugging Face cache, offline
  (:func:`core.files.hfcache.resolve_hub_id`: ``config.json`` and the safetensors headers of
  the snapshot ``refs/main`` names). The files on this machine are the run's model;
- a Hub id the cache cannot answer for, whose repository the catalogue has, falls back to the
  catalogue's published config, and :attr:`NamedModel.note` says so (the caller shows it);
- a Hub id neither has is one error line: why, and the cached ids near it;
- anything else is a catalogue id or name (:func:`core.catalogue.find_model`), else the catalogue model the
  name means by the one rule for names (:func:`core.hub_names.catalogue_model_of_name`: a folder's or a
  builder's name), said in the note.

A Hub id may carry a revision (``Qwen/Qwen3-8B@main``): the cache's snapshot of that branch or commit is read.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Final

from core.catalogue import closest_models, find_model
from core.errors import PlanError, PlanFileError, one_line
from core.files.hfcache import CachedModel, NotCached, resolve_hub_id
from core.hub_names import catalogue_model_of_name, nearest_by_name
from core.model import ModelSpec
from core.plan import Plan

# A Hub id with its organisation: the catalogue's ids never hold a "/", so the two never meet.
_HUB_ID: Final = re.compile(r"[A-Za-z0-9][\w.\-]{0,95}/[A-Za-z0-9][\w.\-]{0,95}(@[\w.\-/]{1,100})?")


@dataclass(frozen=True)
class NamedModel:
    spec: ModelSpec
    model_id: str  # the catalogue id; "" for a model read from the cache
    hub_id: str  # the Hub repository the model is ("" when the catalogue does not say)
    how: str  # where it came from, in words ("Hugging Face cache: Qwen/Qwen3-8B, snapshot 0123abcd")
    note: str = ""  # what the caller should say aloud: a fall-back, a partial download
    cached: CachedModel | None = None


def is_hub_id(text: str) -> bool:
    return bool(_HUB_ID.fullmatch(text.strip()))


def cached_how(model: CachedModel) -> str:
    ref = f" ({model.ref})" if model.ref else ""
    return f"Hugging Face cache: {model.repo_id}, snapshot {model.revision[:12]}{ref}"


def not_cached_text(missing: NotCached) -> str:
    """One line: the Hub id, why the cache cannot answer, the cached ids near it."""
    text = f"{missing.hub_id} {missing.reason}"
    if missing.suggestions:
        text += "; cached models near it: " + ", ".join(missing.suggestions)
    return one_line(text)


def model_named(text: str, cache: str | os.PathLike[str] | None = None, *, headers: bool = True) -> NamedModel:
    """The model ``text`` names (see the module's rule); ``cache`` is the Hugging Face cache
    folder (:func:`core.files.hfcache.hub_cache_dir` unless given). Raises PlanError for an
    unknown catalogue id and PlanFileError for a Hub id neither the cache nor the catalogue has."""
    name = text.strip()
    if not is_hub_id(name):
        try:
            entry = find_model(name)
        except PlanError:
            matched = catalogue_model_of_name(name)
            if matched is None:
                raise
            entry = matched.entry
            note = matched.how or f"{name} is not a catalogue id: read by its name as {entry.id} ({entry.name})"
            return NamedModel(entry.spec, entry.id, entry.hf_repo, f"catalogue: {entry.name}", note)
        return NamedModel(entry.spec, entry.id, entry.hf_repo, f"catalogue: {entry.name}")
    found = resolve_hub_id(name, cache, headers=headers)
    if isinstance(found, CachedModel):
        return NamedModel(found.spec, "", found.repo_id, cached_how(found), "; ".join(found.notes), found)
    if found.catalogue_id is None:
        why = not_cached_text(found).removeprefix(found.hub_id).strip().removeprefix("is ")
        base = nearest_by_name(name)  # another organisation's upload: its base's entry, asked, never taken
        near = f"closest: {base.id}" if base is not None else closest_models(name)  # `-m meta-llama/Meta-Llama-3-8B`
        raise PlanFileError(
            name, f"{why}; nor is it a catalogue model (see `vramplan models`)" + (f"; {near}" if near else "")
        )
    entry = find_model(found.catalogue_id)
    note = f"{not_cached_text(found)}: the catalogue's {entry.id} ({entry.name}) is used"
    matched = catalogue_model_of_name(name)
    if matched is not None and matched.how:  # by the name (core.hub_names): which entry, and why
        note += f"; {matched.how}"
    return NamedModel(entry.spec, entry.id, entry.hf_repo, f"catalogue: {entry.name}", note)


def default_model_ref(plan: Plan) -> str | None:
    """The Hub id a launch config should name for ``plan``'s model, when the plan does not say
    it through the catalogue: a model read from the cache carries its Hub id as its name."""
    name = plan.model.name.strip()
    return name if not plan.model_id and is_hub_id(name) else None

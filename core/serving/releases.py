"""Ordering of an engine's release lines (vLLM, SGLang, transformers): one home for "which era
holds this release" and "is this release at or after that one". A release enum lists its members
oldest first (core.inputs VllmVersion, SglangVersion, TransformersVersion), so its declaration
order is the release order."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Protocol, TypeVar


class _Era(Protocol):
    @property
    def first(self) -> Enum: ...

    @property
    def last(self) -> Enum: ...


E = TypeVar("E", bound=_Era)


def _index(version: Enum) -> int:
    return list(type(version)).index(version)


def at_least(version: Enum, first: Enum) -> bool:
    """Whether ``version`` is ``first`` or a later release line of the same engine."""
    return _index(version) >= _index(first)


def era_of(version: Enum, eras: Iterable[E]) -> E:
    """The era whose first and last releases bracket ``version``."""
    index = _index(version)
    return next(e for e in eras if _index(e.first) <= index <= _index(e.last))

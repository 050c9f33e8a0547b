"""Identity caches for pure functions that one estimate() calls many times on the same objects,
and a cheaper ``__init__`` for the frozen records it builds (``fills_fields``, at the end).

``last_answer(fn)`` remembers the arguments of the last call *by identity* and its result. It is
only for functions of frozen dataclasses (a Plan and what it holds) whose result depends on
nothing else: a frozen object cannot change, and ``dataclasses.replace`` makes a new object, so an
argument that ``is`` the last one gives the same answer. The cache holds the arguments themselves,
so their ids cannot be reused by other objects while the answer is kept. No hashing, no equality:
the cost of a hit is one ``is`` per argument.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast, overload

F = TypeVar("F", bound=Callable[..., Any])


def last_answer(fn: F) -> F:
    """Wrap ``fn`` (its arguments all immutable) to reuse its last result when called again with
    the very same argument objects (compared by identity; keyword arguments by name too)."""
    last: list[Any] = [None]  # one (arguments, result) pair, replaced whole: a reader sees either pair
    if fn.__code__.co_argcount == 1:  # the common case (a plan): no argument tuple to walk

        @functools.wraps(fn)
        def one(arg: Any) -> Any:
            kept = last[0]
            if kept is not None and kept[0] is arg:
                return kept[1]
            result = fn(arg)
            last[0] = (arg, result)
            return result

        wrapper: Any = one
    else:

        @functools.wraps(fn)
        def many(*args: Any, **named: Any) -> Any:
            kept = last[0]
            values = (*args, *named.values()) if named else args
            if (
                kept is not None
                and kept[1] == tuple(named)
                and len(kept[0]) == len(values)
                and all(map(operator.is_, kept[0], values))
            ):
                return kept[2]
            result = fn(*args, **named)
            last[0] = (values, tuple(named), result)
            return result

        wrapper = many
    wrapper.cache_clear = lambda: last.__setitem__(0, None)
    return cast(F, wrapper)


C = TypeVar("C", bound=type)


def fills_fields(cls: C) -> C:
    """Give a frozen dataclass an ``__init__`` that fills the instance dict directly.

    A frozen dataclass's own ``__init__`` stores each field through ``object.__setattr__`` (a
    global lookup and a call per field), about three times what a store into the instance dict
    costs; an estimate builds some thirty such records (Compute alone has 37 fields). The
    ``__init__`` made here takes the same parameters in the same order with the same defaults
    (a ``default_factory`` is called for each instance that is not given the field) and stores
    them in field order, so the instance is the one the dataclass's ``__init__`` makes: frozen,
    equal, hashable and printed alike. Only for the plain case: a class with ``__post_init__``,
    ``InitVar``, ``init=False``, keyword-only fields or ``__slots__`` is refused (TypeError)."""
    fields = dataclasses.fields(cls)
    if (
        not dataclasses.is_dataclass(cls)
        or hasattr(cls, "__post_init__")
        or "__slots__" in cls.__dict__
        or len(fields) != len(cls.__dataclass_fields__)  # an InitVar or ClassVar pseudo-field
        or any(not f.init or f.kw_only is True for f in fields)
    ):
        raise TypeError(f"fills_fields: {cls.__qualname__} is not a plain dataclass (see its docstring)")
    scope: dict[str, Any] = {"_MISSING": dataclasses.MISSING}
    params, body = [], []
    for f in fields:
        if f.default is not dataclasses.MISSING:
            scope[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            body.append(f" if {f.name} is _MISSING: {f.name} = _factory_{f.name}()")
        else:
            params.append(f.name)
        body.append(f" __fields[{f.name!r}] = {f.name}")
    source = f"def __init__(__self, {', '.join(params)}):\n __fields = __self.__dict__\n" + "\n".join(body)
    exec(source, scope)
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


@functools.cache
def _plain_fields(cls: type) -> tuple[str, ...]:
    """The names of the ``__init__`` fields of a dataclass whose ``__init__`` does no more than store
    them (then ``__post_init__``), in field order; TypeError for any other class (see :func:`replaced`).
    A field with ``init=False`` is allowed only without a default: ``__init__`` leaves it to
    ``__post_init__`` (Plan's derived ``precision``)."""
    fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
    init = getattr(getattr(cls, "__init__", None), "__code__", None)
    if (
        not fields
        or "__slots__" in cls.__dict__
        or not cls.__dataclass_params__.init  # type: ignore[attr-defined]
        # An __init__ of the class's own (dataclass() keeps it): the generated one, and fills_fields', are exec'd.
        or init is None
        or init.co_filename != "<string>"
        or len(fields) != len(cls.__dataclass_fields__)  # type: ignore[attr-defined]  # an InitVar or ClassVar
        or any(
            not f.init and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)
            for f in fields
        )
    ):
        raise TypeError(f"replaced: {cls.__qualname__} is not a plain dataclass (see core.memo.replaced)")
    return tuple(f.name for f in fields if f.init)


T = TypeVar("T")


def replaced(obj: T, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)``, made without calling ``__init__``.

    ``dataclasses.replace`` reads every field, passes them all as keyword arguments to
    ``__init__``, which (frozen) stores each through ``object.__setattr__``: a Plan has some fifty
    fields, so that is ~20 µs, about half of what a prompt-learning plan's run plan costs to make
    (core.plan.as_run). Here the new instance's dict is filled from the old one's fields and the
    changes, then ``__post_init__`` runs, as ``replace`` runs it: the instance is the same (every
    check and conversion of ``__post_init__`` applies; equal, hashable and printed alike). Only for a
    dataclass whose ``__init__`` stores its fields and nothing else (the dataclass's own, or
    :func:`fills_fields`'): a class with ``__slots__``, ``InitVar``, an ``init=False`` field with a
    default, or no generated ``__init__`` is refused (TypeError), as is a change that names no
    ``__init__`` field (``replace`` refuses those too)."""
    cls: type = type(obj)
    names = _plain_fields(cls)
    unknown = changes.keys() - set(names)
    if unknown:
        raise TypeError(f"replaced: {cls.__qualname__} has no field {', '.join(sorted(unknown))}")
    new: T = object.__new__(cls)
    values = obj.__dict__
    new.__dict__.update({name: changes[name] if name in changes else values[name] for name in names})
    post = getattr(cls, "__post_init__", None)
    if post is not None:
        post(new)
    return new


V = TypeVar("V")


class Once(Generic[V]):
    """A value worked out on its first reading and kept in the instance dict, as
    ``functools.cached_property`` does but without its lock (Python 3.11 takes an RLock on every
    first reading, a measurable share of an estimate that reads ~10 of them). A non-data descriptor:
    once stored, the instance dict answers and this is not called again. For frozen classes only
    (what it works out cannot change); not for ``__slots__`` classes."""

    def __init__(self, fn: Callable[[Any], V]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Once[V]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> V: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> Once[V] | V:
        if obj is None:
            return self
        value = self.fn(obj)
        obj.__dict__[self.name] = value  # the instance dict wins from now on
        return value

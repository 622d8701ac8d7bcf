"""What the cloudpickle of a function pickled by value depends on, as a key to keep its pickle by.

A function defined in ``__main__``, a notebook or a module registered with cloudpickle travels
by value: its code, names, defaults and the globals its code reads. When each of those is
immutable -- plain constants, modules, classes and functions pickled by their importable name --
and the function has no closure and no attributes of its own, the same key means the same
pickle: :mod:`htc.executors.serialize` pickles such a function once and keeps the bytes while
its key stays the same. Anything mutable (a list, a dict, an object, a class defined by value)
gives no key, and the function is pickled afresh for every call, as it reads at that moment.
The key holds values, not identities (an id can be reused once its object is gone), each plain
value with its type (``1``, ``1.0`` and ``True`` are equal; their pickles are not).
"""

from __future__ import annotations

import sys
import types
from typing import Any

import cloudpickle

__all__ = ["function_key"]

_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})
_ABSENT = object()


def function_key(fn: Any, registrations: int = 0) -> tuple | None:
    """What a function's cloudpickle depends on, by value, when all of it is immutable: its code,
    names, defaults and each global its code reads (a plain constant, a module, or a class or
    function pickled by reference: by its name); None for any other callable.

    ``registrations`` counts the modules registered with cloudpickle to be pickled by value (one
    more can change how the function's globals pickle); so does any import (``sys.modules``).
    """
    if type(fn) is not types.FunctionType or fn.__closure__ or fn.__dict__ or \
            cloudpickle.cloudpickle._should_pickle_by_reference(fn):
        return None  # (a function pickled by reference costs little anyway)
    defaults, kwdefaults, notes = fn.__defaults__, fn.__kwdefaults__, fn.__annotations__
    if (defaults and not _plain(defaults)) or (kwdefaults and not all(_plain(v) for v in kwdefaults.values())) \
            or (notes and not all(_plain(v) or _by_reference(v) for v in notes.values())):
        return None
    scope, refs = fn.__globals__, []
    for name in cloudpickle.cloudpickle._extract_code_globals(fn.__code__):
        value = scope.get(name, _ABSENT)
        if value is _ABSENT:
            continue
        if _plain(value):
            refs.append((name, _typed(value)))
        elif isinstance(value, types.ModuleType):
            refs.append((name, types.ModuleType, value.__name__))
        elif _by_reference(value):
            refs.append((name, type(value), value.__module__, value.__qualname__))
        else:
            return None
    return (fn.__code__, _typed(defaults), tuple((k, _typed(v)) for k, v in kwdefaults.items()) if kwdefaults else None,
            tuple((k, _name_of(v)) for k, v in notes.items()) if notes else None,
            fn.__name__, fn.__qualname__, fn.__module__, fn.__doc__, tuple(refs), len(sys.modules), registrations)


def _typed(value: Any) -> Any:
    """A plain value with its type, as a key (``1``, ``1.0`` and ``True`` are equal, their pickles not)."""
    return tuple(_typed(v) for v in value) if type(value) is tuple else (type(value), value)


def _name_of(value: Any) -> Any:
    return _typed(value) if _plain(value) else (value.__module__, value.__qualname__)


def _plain(value: Any) -> bool:
    t = type(value)
    return t in _PLAIN or (t is tuple and all(_plain(v) for v in value))


def _by_reference(value: Any) -> bool:
    """A class or function cloudpickle pickles by reference (by its importable name)."""
    return isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)) and \
        cloudpickle.cloudpickle._should_pickle_by_reference(value)

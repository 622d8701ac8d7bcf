"""ClassAd values as Python objects.

Theory of operation
-------------------
A ClassAd expression evaluates to one of these Python objects:

=====================  ===========================================================
ClassAd type           Python representation
=====================  ===========================================================
undefined              ``Value.Undefined`` (singleton, also exported as ``Undefined``)
error                  ``Value.Error`` (singleton, also exported as ``Error``)
boolean                ``bool``  (check it *before* int: ``bool`` is an ``int`` subclass)
integer                ``int``   (64-bit signed; results wrap like C's ``long long``)
real                   ``float``
string                 ``str``
list                   ``list`` of values (elements may be unevaluated expressions only at the
                       API boundary; the evaluator hands builtins evaluated lists)
classad                ``htc.classad.ClassAd`` (any object registered with :func:`register_classad_type`)
absolute time          :class:`AbsTime`
relative time          :class:`RelTime`
=====================  ===========================================================

The classad2 bindings return a ``datetime`` for an absolute time and a plain float for a
relative time; the public API converts at the boundary, the evaluator keeps these two small
classes so that type tests (``isReal(relTime(5))`` is false) and printing stay exact.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


class Value(enum.Enum):
    """The two special ClassAd values, named as the classad2 bindings name them."""

    Undefined = 0
    Error = 1

    def __repr__(self) -> str:
        return f"Value.{self.name}"

    def __bool__(self) -> bool:
        # Guard against `if value:` silently treating UNDEFINED/ERROR as true.
        raise TypeError(f"the ClassAd value {self.name.upper()} has no Python truth value")


Undefined = Value.Undefined
Error = Value.Error


@dataclass(frozen=True, slots=True)
class AbsTime:
    """An absolute time: seconds since the epoch plus the zone offset (seconds east of UTC)."""

    secs: float
    tz_offset: int = 0


@dataclass(frozen=True, slots=True)
class RelTime:
    """A relative time (a duration) in seconds."""

    secs: float


class ExprList(list):
    """A list value made by a list literal; it remembers the literal's syntax tree.

    HTCondor keeps a list value as its element *expressions*: ``string({1 + 1})`` prints
    ``{ 1 + 1 }`` and classad2 hands the unevaluated elements to Python.  Builtins treat it
    as a plain ``list`` of evaluated elements and may call :meth:`unparse` for the text.
    """

    __slots__ = ("node",)

    def unparse(self) -> str:
        """The source list expression, in compact new syntax."""
        from htc.classad.printing import unparse
        return unparse(self.node)


_CLASSAD_TYPES: tuple[type, ...] = ()


def register_classad_type(cls: type) -> type:
    """Declare ``cls`` as the Python type of nested ClassAd values (used as a class decorator)."""
    global _CLASSAD_TYPES
    _CLASSAD_TYPES = _CLASSAD_TYPES + (cls,)
    return cls


def is_classad(v: object) -> bool:
    """True when ``v`` is a ClassAd value."""
    return isinstance(v, _CLASSAD_TYPES)


def wrap_int(n: int) -> int:
    """Wrap a Python int to 64-bit two's complement, as HTCondor's ``long long`` arithmetic does."""
    if INT64_MIN <= n <= INT64_MAX:
        return n
    n &= (1 << 64) - 1
    return n - (1 << 64) if n >= (1 << 63) else n


def type_name(v: object) -> str:
    """The ClassAd type name of a value, as error messages and ``typeOf``-style code use it."""
    if v is Undefined:
        return "undefined"
    if v is Error:
        return "error"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "real"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "list"
    if isinstance(v, AbsTime):
        return "absolutetime"
    if isinstance(v, RelTime):
        return "relativetime"
    if is_classad(v):
        return "classad"
    raise TypeError(f"{v!r} ({type(v).__name__}) is not a ClassAd value")

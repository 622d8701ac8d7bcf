"""The registry of strict ClassAd builtin functions.

Every function here receives a Python list of already evaluated argument values and returns
a ClassAd value (see :mod:`htc.classad.values`).  Keys are lower-case function names because
ClassAd function names are case-insensitive.  Wrong arity or argument types give ERROR (or
UNDEFINED where HTCondor propagates it), never a Python exception.

Functions that need unevaluated arguments or the evaluation context are the evaluator's:
``ifThenElse``, ``eval``, ``unparse``, ``unresolved``, ``evalInEachContext`` and
``countMatches``.

The parser needs two more entry points: ``absTime("...")`` and ``relTime("...")`` with a
single string literal are converted at parse time by :func:`parse_abstime_literal` and
:func:`parse_reltime_literal` (None means a parse error).
"""

from __future__ import annotations

from collections.abc import Callable

from htc.classad import (
    builtins_env,
    builtins_list,
    builtins_math,
    builtins_regex,
    builtins_string,
    builtins_strlist,
    builtins_time,
)
from htc.classad.builtins_common import unparse_value
from htc.classad.builtins_env import register_user_map
from htc.classad.builtins_time import parse_abstime_literal, parse_reltime_literal

FUNCTIONS: dict[str, Callable[[list], object]] = {}
for _module in (builtins_string, builtins_list, builtins_math, builtins_regex,
                builtins_strlist, builtins_time, builtins_env):
    FUNCTIONS.update(_module.FUNCTIONS)

__all__ = [
    "FUNCTIONS",
    "parse_abstime_literal",
    "parse_reltime_literal",
    "register_user_map",
    "unparse_value",
]

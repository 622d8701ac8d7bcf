"""``if`` / ``elif`` / ``else`` / ``endif`` in configuration files.

Theory of operation
-------------------
HTCondor's conditionals are deliberately simple: a condition is a number, ``true``/``false``
(also the "crufty" ``yes``/``no``/``t``/``f``), ``defined NAME``, ``defined use CATEGORY:NAME``
or ``version <op> X.Y[.Z]``, optionally negated with ``!``. A condition holding ``$`` is macro
expanded first, and one that expands to nothing is false (so ``if $(UNSET)`` is false).
Anything else -- ``$(X) == 1``, ``2 > 1`` -- is an error ("complex conditionals are not
supported"), exactly as in HTCondor, rather than a guess.

Which kind of condition a text is gets decided by :func:`characterize`, a port of HTCondor's
``Characterize_config_if_expression``: it classifies the characters the text contains
(digits, letters, comparison signs, ...) and maps the set to a kind.

:class:`IfStack` tracks nesting. Each open ``if`` has a frame with three flags: is the
current branch on, was any branch of this ``if`` on (so later ``elif``/``else`` are off), and
are we still before the ``else``. A line is live only when every frame is on.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["characterize", "test_condition", "IfStack", "ConditionError", "VERSION"]

#: the HTCondor version whose behaviour htc reproduces; ``if version >= X`` compares with it
VERSION = (25, 14, 1)

_DIGIT, _ALPHA, _IDENT, _CMP, _SUM, _LOGIC, _GROUP = 0x2, 0x4, 0x8, 0x10, 0x20, 0x40, 0x80
_SPACE, _MONEY, _COLON, _OTHER, _FLOAT, _MACRO = 0x1, 0x100, 0x200, 0x400, 0x1000, 0x2000


_AS = _ALPHA | _SPACE
#: character sets of "defined NAME", "defined 1", "defined true" (HTCondor's explicit list)
_IFDEF_KINDS = frozenset({_AS, _AS | _COLON, _AS | _IDENT, _AS | _IDENT | _COLON, _AS | _DIGIT,
                          _AS | _DIGIT | _IDENT, _AS | _DIGIT | _FLOAT,
                          _AS | _DIGIT | _IDENT | _FLOAT})


class ConditionError(ValueError):
    """A condition is not one HTCondor accepts; the message says why."""


def _lit(text: str, word: str, *, alone: bool = True) -> bool:
    """``text`` starts with ``word`` (case-insensitively, after spaces) and then ends / not alnum."""
    s = text.lstrip()
    if s[:len(word)].lower() != word:
        return False
    rest = s[len(word):]
    return not rest.strip() if alone else not (rest[:1].isalnum())


def characterize(expr: str, keyword_check: bool) -> str:
    """Classify a condition: empty, number, bool, identifier, macro, version, ifdef or complex."""
    p = expr.lstrip()
    if not p:
        return "empty"
    begin = p
    i = 1 if p[0] == "-" else 0
    kinds = 0
    n = len(p)
    while i < n:
        ch = p[i]
        i += 1
        nxt = p[i] if i < n else ""
        if "0" <= ch <= "9":
            kinds |= _DIGIT
        elif ch == ".":
            kinds |= _FLOAT if kinds == _DIGIT or not nxt or "0" <= nxt <= "9" else _IDENT
        elif ch in "eE":
            kinds |= _FLOAT if (kinds & ~_FLOAT) == _DIGIT else _ALPHA
        elif ch in "-+":
            if kinds != (_DIGIT | _FLOAT):
                kinds |= _SUM
        elif ch.isascii() and ch.isalpha():
            kinds |= _ALPHA
        elif ch in "_/":
            kinds |= _IDENT
        elif "<" <= ch <= ">" or (ch == "!" and nxt == "="):
            kinds |= _CMP
        elif ch == "$":
            kinds |= _MONEY | (_MACRO if nxt == "(" else 0)
        elif ch.isspace():
            if nxt and not nxt.isspace():
                kinds |= _SPACE
        elif ch in "&|":
            kinds |= _LOGIC
        elif ch in "{}()[]":
            kinds |= _GROUP
        elif ch == ":":
            kinds |= _COLON
        else:
            kinds |= _OTHER
    if kinds == 0:
        return "empty"
    if kinds in (_DIGIT, _DIGIT | _FLOAT):
        return "number"
    if kinds == _ALPHA:
        if _lit(expr, "false") or _lit(expr, "true"):
            return "bool"
        if keyword_check and _lit(begin, "version"):
            return "version"
        if keyword_check and _lit(begin, "defined"):
            return "ifdef"
    if kinds in (_ALPHA, _ALPHA | _DIGIT, _ALPHA | _DIGIT | _FLOAT, _ALPHA | _IDENT,
                 _ALPHA | _IDENT | _DIGIT, _ALPHA | _IDENT | _DIGIT | _FLOAT):
        return "identifier"
    if kinds in (_ALPHA | _SPACE | _CMP | _DIGIT, _ALPHA | _SPACE | _CMP | _DIGIT | _FLOAT):
        return "version" if keyword_check and _lit(begin, "version", alone=False) else "complex"
    if kinds in _IFDEF_KINDS:
        return "ifdef" if keyword_check and _lit(begin, "defined", alone=False) else "complex"
    if kinds & _MACRO and not kinds & ~(_MONEY | _IDENT | _ALPHA | _DIGIT | _MACRO | _COLON):
        return "macro"
    return "complex"


def _crufty(text: str) -> bool | None:
    for word, value in (("yes", True), ("t", True), ("no", False), ("f", False)):
        if _lit(text, word):
            return value
    return None


_VERSION = re.compile(r"\s*[vV]?\s*([-+]?\d+)\.([-+]?\d+)(?:\.([-+]?\d+))?")


def _version(rest: str) -> bool:
    ptr = rest.lstrip()
    negated = ptr.startswith("!")
    if negated:
        ptr = ptr[1:]
    op = 0
    if ptr[:1] in ("<", "=", ">"):
        op = "<=>".index(ptr[0]) - 1
        ptr = ptr[1:]
    or_equal = ptr.startswith("=")
    if or_equal:
        ptr = ptr[1:]
    m = _VERSION.match(ptr)
    if not m or int(m.group(1)) < 6:
        raise ConditionError("the version literal is invalid")
    other = (int(m.group(1)), int(m.group(2)),
             int(m.group(3)) if m.group(3) is not None else VERSION[2])
    diff = (VERSION > other) - (VERSION < other)
    result = diff == op or (or_equal and diff == 0)
    return not result if negated else result


def _evaluate(expr: str, lookup: Callable[[str], str | None],
              has_template: Callable[[str], bool]) -> bool:
    kind = characterize(expr, True)
    if kind == "number":
        try:
            return float(expr) != 0
        except ValueError:
            return False
    if kind == "bool":
        return _lit(expr, "true")
    if kind == "identifier":
        crufty = _crufty(expr)
        if crufty is not None:
            return crufty
    if kind == "version":
        return _version(expr.lstrip()[7:])
    if kind == "ifdef":
        rest = expr.lstrip()[7:].strip()
        if not rest:
            return False
        kind2 = characterize(rest, False)
        if kind2 == "identifier":
            value = lookup(rest)
            if value is None and _crufty(rest) is not None:
                value = "true"
            return bool(value)
        if kind2 in ("number", "bool"):
            return True
        if rest[:4].lower() == "use ":
            what = rest[4:].strip()
            if any(c in what for c in " \t\r"):
                raise ConditionError("defined use meta argument with internal spaces will never match")
            return has_template(what)
        raise ConditionError("defined argument must be param name, boolean, or number")
    if kind == "complex":
        raise ConditionError("complex conditionals are not supported")
    raise ConditionError("expression is not a conditional")


def test_condition(expr: str, expand: Callable[[str], str], lookup: Callable[[str], str | None],
                   has_template: Callable[[str], bool]) -> bool:
    """Decide an ``if``/``elif`` condition the way HTCondor's ``Test_config_if_expression`` does.

    Args:
        expr: the text after ``if``.
        expand: full macro expansion, used when the condition holds ``$``.
        lookup: raw value of a macro (subsystem prefixes and param-table defaults included).
        has_template: whether ``CATEGORY`` or ``CATEGORY:NAME`` names a metaknob.

    Raises:
        ConditionError: the condition is not one HTCondor accepts.
    """
    expanded = False
    if "$" in expr:
        expr = expand(expr).rstrip()
        expanded = True
    expr = expr.lstrip()
    inverted = expr.startswith("!")
    if inverted:
        expr = expr[1:].lstrip()
    value = False if expanded and not expr else _evaluate(expr, lookup, has_template)
    return not value if inverted else value


@dataclass
class _Frame:
    on: bool          # this branch is live (ignoring outer frames)
    any_on: bool      # some branch of this if was live
    before_else: bool


class IfStack:
    """The nesting state of ``if`` blocks in one source (a file or a metaknob template)."""

    MAX_DEPTH = 63

    def __init__(self) -> None:
        self.frames: list[_Frame] = []

    def enabled(self) -> bool:
        """Whether lines here are live: every enclosing branch is on."""
        return all(f.on for f in self.frames)

    def inside_if(self) -> bool:
        """Whether an if is open."""
        return bool(self.frames)

    def handle(self, line: str, condition: Callable[[str], bool]) -> bool:
        """Process ``line`` if it is an if/elif/else/endif line.

        Args:
            line: one logical line (already trimmed).
            condition: evaluates a condition text (raises ConditionError).

        Returns:
            True if the line was a conditional keyword (and was consumed).

        Raises:
            ConditionError: a misplaced keyword or a bad condition.
        """
        word = line.split(None, 1)[0].lower() if line.strip() else ""
        rest = line[len(word):].strip() if word else ""
        if word == "if":
            on = self.enabled()
            if on:
                try:
                    on = condition(rest)
                except ConditionError as exc:
                    raise ConditionError(f"{rest} is not a valid if condition because {exc}") from None
            if len(self.frames) >= self.MAX_DEPTH:
                raise ConditionError("if nesting too deep")
            self.frames.append(_Frame(on, on, True))
            return True
        if word == "elif":
            top = self.frames[-1] if self.frames else None
            if top is None or not top.before_else:
                raise ConditionError("elif is not allowed after else" if top else
                                     "elif without matching if")
            live = not top.any_on and all(f.on for f in self.frames[:-1])
            on = False
            if live:
                try:
                    on = condition(rest)
                except ConditionError as exc:
                    raise ConditionError(f"{rest} is not a valid elif condition because {exc}") from None
            top.on = on and not top.any_on
            top.any_on = top.any_on or top.on
            return True
        if word == "else":
            top = self.frames[-1] if self.frames else None
            if top is None or not top.before_else:
                raise ConditionError("else is not allowed after else" if top else
                                     "else without matching if")
            top.before_else = False
            top.on = not (top.any_on or top.on)
            return True
        if word == "endif":
            if not self.frames:
                raise ConditionError("endif without matching if")
            self.frames.pop()
            return True
        return False

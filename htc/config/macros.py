"""The macro table and lazy ``$(...)`` expansion, as HTCondor's ``config.cpp`` does it.

Theory of operation
-------------------
A configuration is a table of *raw* values: ``SPOOL = $(LOCAL_DIR)/spool`` is stored as the
text ``$(LOCAL_DIR)/spool``. Nothing is expanded when a file is read, with one exception:
a reference to the macro being defined (``LIST = $(LIST), three``) is replaced at once by
the previous value, which is how appending works. Everything else is expanded when a value
is *read*, so a later definition of ``LOCAL_DIR`` changes ``SPOOL`` too.

Expansion is HTCondor's rescanning loop, not a recursive descent: find the first macro
``$name(body)`` whose body is well formed, replace it by its (raw) value, and scan again
*from the same position*, so the substituted text is itself expanded. A body with characters
a plain ``$(NAME)`` may not contain (``$(A B)``) is not a macro and is skipped over, which is
why ``$(UNDEF:$(X))`` works: the scan tries the outer form first and, because the default part
may hold ``$`` and parentheses, accepts it. ``$$(X)`` is never expanded (submit-time syntax)
and ``$(DOLLAR)`` becomes ``$`` only at the very end.

Lookup of a name tries, in order, ``<localname>.NAME`` and ``<subsystem>.NAME`` in the table,
then ``NAME`` in the table, then ``NAME``'s default in HTCondor's param table. A name that is
nowhere expands to the empty string.

The macro functions (``$ENV``, ``$INT``, ``$REAL``, ``$STRING``, ``$EVAL``, ``$CHOICE``,
``$SUBSTR``, ``$RANDOM_CHOICE``, ``$RANDOM_INTEGER``, ``$F[flags]``, ``$BASENAME``,
``$DIRNAME``) follow the wheel's observed behaviour, quirks included (``$ENV(UNSET)`` is the
text ``UNDEFINED``; ``$SUBSTR(name, start[, length])``; format arguments are printf formats).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from htc.config import functions
from htc.config.errors import MacroError


class ClosingParens:
    """``find(q)``: the index of the first ``)`` at or after ``q`` in ``text`` (-1: none),
    remembered. Macro scans only move forwards, so looking for the close of every ``$(`` costs
    linear time in all, however many there are (the config and submit languages share it)."""

    __slots__ = ("text", "_from", "_found")

    def __init__(self, text: str):
        self.text = text
        self._from = self._found = -1

    def __call__(self, q: int) -> int:
        if not self._from <= q <= self._found:
            self._from, self._found = q, self.text.find(")", q)
            if self._found < 0:
                self._found = len(self.text)  # none: every later look is answered at once
        return self._found if self._found < len(self.text) else -1

__all__ = ["Origin", "Entry", "MacroSet", "Context", "Expander", "MacroError",
           "find_macro", "Match", "filename_parts"]

filename_parts = functions.filename_parts

#: characters of a macro name (HTCondor's ISIDCHAR: letters, digits and ``_./``)
IDCHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./")
#: characters allowed after the ``:`` of ``$(NAME:default)`` besides IDCHARS
_COLON_EXTRA = frozenset("$ ,\\:")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
#: substitutions allowed while expanding one value (nested function arguments included)
#: before we call it a reference cycle
MAX_STEPS = 20000
#: characters one expansion may copy (each substitution copies the text it edits)
MAX_WORK = 50_000_000
#: macro functions whose arguments are being expanded, one inside another
MAX_NESTING = 32


@dataclass(frozen=True)
class Origin:
    """Where a definition came from: a file line, the param-table default, the environment, ..."""

    kind: str                 # "file" | "default" | "environment" | "detected" | "override"
    file: str | None = None
    line: int | None = None
    use: str | None = None    # "ROLE:Personal" when a metaknob produced the definition

    def describe(self) -> str:
        """One line for ``config_val -v``: ``/etc/htc_config:12`` or ``default``."""
        if self.kind == "file":
            text = f"{self.file}:{self.line}"
            return f"{text}, use {self.use}" if self.use else text
        if self.kind == "environment" and self.file:
            return f"environment ({self.file})"
        return self.kind


@dataclass
class Entry:
    """One definition in the table: the name as first written, its raw value and its origin."""

    name: str
    raw: str
    origin: Origin


class MacroSet:
    """Definitions by case-insensitive name, remembering first-definition order."""

    def __init__(self) -> None:
        self._items: dict[str, Entry] = {}

    def get(self, name: str) -> Entry | None:
        """The entry of ``name`` (any case), or None."""
        return self._items.get(name.upper())

    def set(self, name: str, raw: str, origin: Origin) -> Entry:
        """Define or redefine ``name``; the first spelling of the name is kept."""
        key = name.upper()
        entry = self._items.get(key)
        if entry is None:
            entry = self._items[key] = Entry(name, raw, origin)
        else:
            entry.raw, entry.origin = raw, origin
        return entry

    def __contains__(self, name: str) -> bool:
        return name.upper() in self._items

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class Context:
    """Who is reading: the subsystem and local name, the environment, and the table defaults."""

    subsys: str | None = None
    localname: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    #: raw default of a knob from HTCondor's param table, or None
    defaults: Callable[[str], str | None] = lambda name: None
    rng: random.Random = field(default_factory=random.Random)


@dataclass(frozen=True)
class Match:
    """A macro found by :func:`find_macro`: ``value[dollar:right]`` is ``$func(body)``."""

    func: str        # "" for $(NAME); "ENV", "INT", ..., "F<flags>" for functions
    dollar: int
    body: int
    defval: int      # index of the default text after ':' (0: none)
    right: int       # one past the closing ')'

    def name(self, value: str) -> str:
        """The macro name (the body up to a ``:``)."""
        end = self.defval - 1 if self.defval else self.right - 1
        return value[self.body:end]

    def default(self, value: str) -> str | None:
        """The text after ``:``, or None when there is no default."""
        return value[self.defval:self.right - 1] if self.defval else None

    def text(self, value: str) -> str:
        """The whole body between the parentheses."""
        return value[self.body:self.right - 1]


_SPECIAL = {"ENV", "RANDOM_CHOICE", "RANDOM_INTEGER", "CHOICE", "SUBSTR", "INT", "REAL",
            "STRING", "EVAL", "BASENAME", "DIRNAME"}


def _classify(prefix: str) -> tuple[str | None, str]:
    """Map ``$`` / ``$ENV`` / ``$Fpn`` ... to (function, body rule); function None = not a macro."""
    if prefix == "$":
        return "", "idchar"
    if prefix.startswith("$$"):
        return None, ""
    if prefix[1] == "F" and all(c.lower() in functions.FILENAME_FLAGS for c in prefix[2:]):
        return prefix[1:], "anything"
    name = prefix[1:]
    if name in _SPECIAL:
        return name, ("idchar" if name == "ENV" else "anything")
    return None, ""


def _classify_meta(prefix: str) -> tuple[str | None, str]:
    return ("", "meta") if prefix == "$" else (None, "")


def find_macro(value: str, pos: int = 0, accept: Callable[[str, str], bool] | None = None,
               classify: Callable[[str], tuple[str | None, str]] = _classify) -> Match | None:
    """Find the next macro at or after ``pos`` (HTCondor's ``next_config_macro``).

    Args:
        value: the text to scan.
        pos: where to start.
        accept: ``accept(func, body) -> bool``; a rejected macro is skipped over.
        classify: maps a ``$prefix`` to (function, body rule); meta-argument expansion
            passes its own.

    Returns:
        The first acceptable :class:`Match`, or None.
    """
    n = len(value)
    scan = pos
    next_close = ClosingParens(value)

    while True:
        while True:
            dollar = value.find("$", scan)
            if dollar < 0 or next_close(dollar) < 0:  # no ')' after it: no macro either
                return None
            p = dollar + 1
            if p < n and value[p] == "$":
                p += 1
            while p < n and value[p] in _ALNUM:
                p += 1
            if p < n and value[p] == "(":
                func, rule = classify(value[dollar:p])
                if func is not None:
                    break
            scan = p
        body = p + 1
        q = body
        after_colon = 0
        ok = True
        if rule == "anything":
            q = next_close(q)
            if q < 0:
                q = n
        else:
            meta = rule == "meta"
            while q < n and value[q] != ")":
                c = value[q]
                q += 1
                if c == ":" and not after_colon:
                    after_colon = q - body
                    continue
                if after_colon:
                    if c == "(":
                        close = next_close(q)
                        if close >= 0:
                            q = close + 1
                            continue
                    elif meta or c in _COLON_EXTRA:
                        continue
                if meta:
                    if not (c.isdigit() or c in "?#+"):
                        ok = False
                        break
                elif c not in IDCHARS:
                    ok = False
                    break
        if not ok or q >= n:
            scan = body
            continue
        if accept is not None and not accept(func, value[body:q]):
            scan = q
            continue
        return Match(func, dollar, body, body + after_colon if after_colon else 0, q + 1)


class Expander:
    """Looks names up and expands values against one :class:`MacroSet` and :class:`Context`."""

    def __init__(self, macros: MacroSet, ctx: Context):
        self.macros = macros
        self.ctx = ctx
        #: names referenced but defined nowhere during the last expand() calls (for -v notes)
        self.undefined: list[str] = []
        self._calls: list[str] = []  # the macro functions being evaluated, outermost first
        self._steps = 0  # substitutions, and characters copied, by the current top-level expand
        self._work = 0
        self._counts: dict[str, int] = {}

    # -- lookup --------------------------------------------------------------------------
    def lookup_entry(self, name: str) -> tuple[str | None, Entry | None]:
        """The raw value of ``name`` and the table entry that supplied it (None: a default)."""
        for prefix in (self.ctx.localname, self.ctx.subsys):
            if prefix:
                entry = self.macros.get(f"{prefix}.{name}")
                if entry is not None:
                    return entry.raw, entry
        entry = self.macros.get(name)
        if entry is not None:
            return entry.raw, entry
        return self.ctx.defaults(name), None

    def lookup(self, name: str) -> str | None:
        """The raw value of ``name`` by HTCondor's lookup order, or None if defined nowhere."""
        return self.lookup_entry(name)[0]

    # -- expansion -----------------------------------------------------------------------
    def expand(self, text: str, *, keep_dollar: bool = False) -> str:
        """Expand every macro in ``text`` (HTCondor's ``expand_macro``).

        Raises:
            MacroError: a macro function failed or the references form a cycle.
        """
        value = text
        pos = 0
        if not self._calls:  # a top-level expansion: its budget starts afresh
            self._steps = self._work = 0
            self._counts = {}
        counts = self._counts
        while True:
            m = find_macro(value, pos, accept=_not_dollar)
            if m is None:
                break
            self._steps += 1
            self._work += len(value)
            if self._steps > MAX_STEPS or self._work > MAX_WORK:
                loop = sorted(k for k, c in counts.items() if c > MAX_STEPS // 20) or sorted(counts)
                raise MacroError("expansion does not terminate (or grows without bound): "
                                 + (", ".join(loop) + " refer to each other in a cycle" if loop else
                                    f"at {value[m.dollar:m.right][:80]}"))
            if not m.func:
                key = m.name(value).upper()
                counts[key] = counts.get(key, 0) + 1
            value = value[:m.dollar] + self._evaluate(m, value) + value[m.right:]
            pos = m.dollar
        if not keep_dollar:
            value = self._dollars(value)
        return value

    @staticmethod
    def _dollars(value: str) -> str:
        pos = 0
        while True:
            m = find_macro(value, pos, accept=_only_dollar)
            if m is None:
                return value
            value = value[:m.dollar] + "$" + value[m.right:]
            pos = m.dollar

    def expand_self(self, text: str, name: str) -> str:
        """Replace only references to ``name`` itself (``X = $(X) more``) by its current value."""
        selves = {name.upper()}
        for prefix in (self.ctx.localname, self.ctx.subsys):
            if prefix and name.upper().startswith(prefix.upper() + ".") and len(name) > len(prefix) + 1:
                selves.add(name[len(prefix) + 1:].upper())
                break

        def is_self(func: str, body: str) -> bool:
            if func and not func.startswith("F"):
                return False
            return body.split(":", 1)[0].upper() in selves

        value = text
        pos = 0
        while True:
            m = find_macro(value, pos, accept=is_self)
            if m is None:
                return value
            replacement = self._evaluate(m, value)
            value = value[:m.dollar] + replacement + value[m.right:]
            pos = m.dollar + len(replacement)

    # -- macro functions -----------------------------------------------------------------
    def _evaluate(self, m: Match, value: str) -> str:
        func = m.func
        if func == "":
            name = m.name(value)
            raw = self.lookup(name)
            if raw:
                return raw
            if raw is None:
                self.undefined.append(name)
            default = m.default(value)
            return default if default is not None else ""
        if func == "ENV":
            got = self.ctx.env.get(m.name(value))
            default = m.default(value)
            if got:
                return got
            if default is not None:
                return default
            return "UNDEFINED" if got is None else ""
        call = f"${func}({m.text(value)})"
        if call in self._calls:  # the same call inside its own argument: a definition cycle
            chain = " -> ".join(self._calls[self._calls.index(call):] + [call])
            raise MacroError(f"a macro refers to itself through a function: {chain}")
        if len(self._calls) >= MAX_NESTING:
            raise MacroError(f"macro functions nest more than {MAX_NESTING} deep: "
                             + " -> ".join(self._calls[:3] + ["..."] + self._calls[-2:]))
        self._calls.append(call)
        try:
            return functions.call(self, func, m.text(value))
        finally:
            self._calls.pop()


def _not_dollar(func: str, body: str) -> bool:
    return not (func == "" and body.upper() == "DOLLAR")


def _only_dollar(func: str, body: str) -> bool:
    return func == "" and body.upper() == "DOLLAR"

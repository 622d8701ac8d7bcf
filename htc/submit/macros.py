"""Submit macros: the case-insensitive macro set and ``$(...)`` expansion.

Theory of operation
-------------------
A submit description is a set of macros (``name = raw value``); commands are just macros
with known names.  Values are expanded lazily, when a command is used for a job, by
:class:`Expander`, a port of HTCondor's ``expand_macro`` (condor_utils/config.cpp):

* ``$(name)`` is replaced by the *raw* value of ``name`` and the result is scanned again
  from the start, so references nest to any depth.  ``$(name:default)`` uses ``default``
  when ``name`` is undefined or empty.  A body with characters that cannot be in a name
  (``$(x y)``, ``$(x-y)``) is not a macro and stays as written.
* ``$ENV(NAME)``, ``$RANDOM_CHOICE(a,b)``, ``$RANDOM_INTEGER(lo,hi[,step])``,
  ``$CHOICE(i,a,b)``, ``$SUBSTR(name,start[,len])``, ``$INT(name[,fmt])``,
  ``$REAL(name[,fmt])``, ``$STRING(name[,fmt])``, ``$EVAL(expr)``, ``$BASENAME(name)``,
  ``$DIRNAME(name)`` and the path functions ``$F[fpdnxqabwu](name)`` are evaluated in place.
* ``$$(attr)`` is late binding and is never touched here; ``$(DOLLAR)`` becomes ``$`` after
  everything else.

Lookup order is: queue loop variables, then the macros of the description, then the
built-in defaults (``Cluster``, ``Process``, ``Step``, ``ARCH``, ...), as in HTCondor where
loop variables are inserted into the macro set and the rest live in its defaults table.

The expander records which per-proc names a value touched (``touched``) and whether it
drew a random number, so the job-ad builder can tell per-proc commands from cluster-wide
ones.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping

from htc.config.macros import ClosingParens
from htc.submit.errors import SubmitError
from htc.submit.functions import FUNCTIONS

#: names whose value changes from proc to proc (lower case); loop variables are added per queue
PER_PROC_NAMES = frozenset({"process", "procid", "step", "row", "itemindex", "jobid", "item"})

_IDCHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./")
_AFTER_COLON = frozenset("$ ,\\:")
_FNAME_LETTERS = frozenset("pnxdqabfwu")
_SPECIAL = {
    "$ENV": "env", "$RANDOM_CHOICE": "random_choice", "$RANDOM_INTEGER": "random_integer",
    "$CHOICE": "choice", "$SUBSTR": "substr", "$INT": "int", "$REAL": "real",
    "$STRING": "string", "$EVAL": "eval", "$BASENAME": "basename", "$DIRNAME": "dirname",
}
#: guard against recursive definitions (``a = $(b)``, ``b = $(a)``), which HTCondor loops on:
#: substitutions in one top-level expansion, those in nested function arguments included
_MAX_EXPANSIONS = 20000
#: characters one top-level expansion may copy (each substitution copies the text it edits)
_MAX_WORK = 50_000_000
#: the longest value an expansion may produce
_MAX_LENGTH = 4_000_000
#: macro functions whose arguments are being expanded, one inside another
_MAX_NESTING = 32


class Macro:
    """One submit macro: its spelling, raw value and where it was defined."""

    __slots__ = ("name", "raw", "line", "file")

    def __init__(self, name: str, raw: str, line: int | None = None, file: str | None = None):
        self.name = name
        self.raw = raw
        self.line = line
        self.file = file

    def __repr__(self) -> str:
        return f"Macro({self.name!r}, {self.raw!r}, line={self.line})"


class MacroTable:
    """The macro set of a submit description: case-insensitive names, insertion order kept."""

    __slots__ = ("_d",)

    def __init__(self, d: dict[str, Macro] | None = None):
        self._d: dict[str, Macro] = dict(d) if d else {}

    def set(self, name: str, raw: str, line: int | None = None, file: str | None = None) -> None:
        """Define or redefine ``name``; a redefinition keeps the first spelling's position."""
        key = name.lower()
        old = self._d.get(key)
        if old is not None:
            self._d[key] = Macro(old.name if old.name.lower() == key else name, raw, line, file)
        else:
            self._d[key] = Macro(name, raw, line, file)

    def raw(self, name: str) -> str | None:
        """The raw value of ``name``, or None."""
        m = self._d.get(name.lower())
        return None if m is None else m.raw

    def macro(self, name: str) -> Macro | None:
        """The :class:`Macro` named ``name`` (any case), or None."""
        return self._d.get(name.lower())

    def names(self):
        """The defined names, lower case (a view)."""
        return self._d.keys()

    def copy(self) -> MacroTable:
        """A snapshot; later definitions do not change it."""
        return MacroTable(self._d)

    def __contains__(self, name: str) -> bool:
        return name.lower() in self._d

    def __iter__(self):
        return iter(self._d.values())

    def __len__(self) -> int:
        return len(self._d)


def find_macro(s: str, pos: int = 0, *, dollar_only: bool = False):
    """Find the next expandable macro in ``s`` at or after ``pos``.

    Ports ``next_config_macro``: a macro is ``$`` + optional function name + ``(`` + body +
    ``)``, where a plain ``$(...)`` body may hold only name characters before an optional
    ``:default``.  ``$(DOLLAR)`` is skipped unless ``dollar_only``, and then it is the only
    thing found.

    Returns:
        ``(start, body_start, body_end, colon, kind, prefix)`` with ``s[body_end] == ')'``,
        or ``None``.  ``colon`` is the index of the default's ``:`` or -1.
    """
    n = len(s)
    next_close = ClosingParens(s)  # linear in all, however many '$(' there are

    while True:
        d = s.find("$", pos)
        if d < 0 or next_close(d) < 0:  # no ')' after it: no macro either
            return None
        p = d + 1
        if p < n and s[p] == "$":
            p += 1
        while p < n and (s[p].isalnum() or s[p] == "_") and s[p].isascii():
            p += 1
        if p >= n or s[p] != "(":
            pos = p if p > d else d + 1
            continue
        prefix = s[d:p]
        kind = _classify(prefix)
        if kind is None:
            pos = p
            continue
        body = p + 1
        colon = -1
        if kind in ("normal", "env"):
            q = body
            ok = True
            while q < n and s[q] != ")":
                c = s[q]
                q += 1
                if c == ":" and colon < 0:
                    colon = q - 1
                    continue
                if colon >= 0:
                    if c == "(":
                        close = next_close(q)
                        if close >= 0:
                            q = close + 1
                            continue
                    elif c in _AFTER_COLON:
                        continue
                if c not in _IDCHARS:
                    ok = False
                    break
            if not ok or q >= n:
                pos = body
                continue
            end = q
        else:
            end = next_close(body)
            if end < 0:
                pos = body
                continue
        is_dollar = kind == "normal" and s[body:end].upper() == "DOLLAR"
        if is_dollar != dollar_only:
            pos = end if is_dollar else body
            continue
        return d, body, end, colon, kind, prefix


def _classify(prefix: str) -> str | None:
    if prefix == "$":
        return "normal"
    if prefix[1] == "$":
        return None  # $$(...) is late binding, done at match time
    if prefix[1] == "F" and all(c.lower() in _FNAME_LETTERS for c in prefix[2:]):
        return "filename"
    return _SPECIAL.get(prefix)


class Expander:
    """Expands submit macro text against one macro set, defaults and per-proc values.

    Args:
        table: the description's macros.
        defaults: built-in macros, keyed by lower-case name (Cluster, Process, ARCH, ...).
        loop: queue loop variables, keyed by lower-case name; they win over ``table``.
        env: the environment ``$ENV()`` and ``getenv`` read.
        cwd: directory ``$Ff()`` makes relative paths absolute against.
        rng: random source for ``$RANDOM_*``; seed it per proc to re-materialise alike.
    """

    def __init__(self, table: MacroTable, defaults: Mapping[str, str], loop: Mapping[str, str],
                 env: Mapping[str, str], cwd: str, rng: random.Random | None = None,
                 per_proc_names: frozenset[str] = PER_PROC_NAMES):
        self.table = table
        self.defaults = defaults
        self.loop = loop
        self.env = env
        self.cwd = cwd
        self.rng = rng or random.Random(0)
        self.per_proc_names = per_proc_names
        self.touched: set[str] = set()
        self.used_random = False
        #: a ``$F`` function made a relative path absolute against :attr:`cwd` (the job's iwd)
        self.used_cwd = False
        self._calls: list[str] = []  # the macro functions being evaluated, outermost first
        self._steps = 0  # substitutions, and characters copied, by the current top-level expand
        self._work = 0

    # -- lookups -----------------------------------------------------------------------
    def lookup(self, name: str) -> str | None:
        """Return the raw value of ``name`` (None when undefined), recording per-proc use."""
        key = name.lower()
        if key in self.per_proc_names:
            self.touched.add(key)
        v = self.loop.get(key)
        if v is not None:
            return v
        m = self.table.macro(key)
        if m is not None:
            return m.raw
        return self.defaults.get(key)

    def findable(self) -> set[str]:
        """Every name (lower case) a :meth:`lookup` finds or records as touched: a name not in
        it looks up as None with no other effect, so a caller may skip it."""
        out = set(self.table.names())
        out.update(self.loop)
        out.update(self.defaults)
        out.update(self.per_proc_names)
        return out

    def param(self, name: str, alt: str | None = None) -> str | None:
        """Expanded value of a command, like ``submit_param``: None when unset or empty."""
        raw = self.lookup(name)
        if raw is None and alt is not None:
            raw = self.lookup(alt)
        if raw is None:
            return None
        v = self.expand(raw)
        return v if v else None

    # -- expansion ---------------------------------------------------------------------
    def expand(self, text: str) -> str:
        """Expand every ``$(...)`` macro and function in ``text``.

        Raises:
            SubmitError: a macro function was misused or the definitions are recursive.
        """
        if "$" not in text:
            return text
        if not self._calls:  # a top-level expansion: its budget starts afresh
            self._steps = self._work = 0
        s = text
        pos = 0
        while True:
            # rescan from where the last substitution began (modern HTCondor's expand_macro):
            # the text before it holds no macro, so a long value is not scanned again and again
            found = find_macro(s, pos)
            if found is None:
                break
            self._steps += 1
            self._work += len(s)
            start, body, end, colon, kind, prefix = found
            if self._steps > _MAX_EXPANSIONS or self._work > _MAX_WORK or len(s) > _MAX_LENGTH:
                shown = text if len(text) <= 80 else text[:77] + "..."
                raise SubmitError(f"macro expansion of '{shown}' does not terminate or grows without "
                                  f"bound (at {s[start:end + 1][:80]}); is a macro defined in terms "
                                  "of itself?")
            s = s[:start] + self._evaluate(s, start, body, end, colon, kind, prefix) + s[end + 1:]
            pos = start
        while True:
            found = find_macro(s, 0, dollar_only=True)
            if found is None:
                return s
            s = s[:found[0]] + "$" + s[found[2] + 1:]

    def _evaluate(self, s: str, start: int, body: int, end: int, colon: int, kind: str,
                  prefix: str) -> str:
        inner = s[body:end]
        if kind == "normal":
            if colon >= 0:
                v = self.lookup(s[body:colon])
                return v if v else s[colon + 1:end]
            v = self.lookup(inner)
            return "" if v is None else v
        if kind == "env":
            name, default = (s[body:colon], s[colon + 1:end]) if colon >= 0 else (inner, None)
            v = self.env.get(name)
            if v is None:
                return default if default is not None else "UNDEFINED"
            return v
        call = f"{prefix}({inner})"
        if call in self._calls:  # the same call inside its own argument: a definition cycle
            chain = " -> ".join(self._calls[self._calls.index(call):] + [call])
            raise SubmitError(f"a macro refers to itself through a function: {chain}; "
                              "define it without referring to itself")
        if len(self._calls) >= _MAX_NESTING:
            raise SubmitError(f"macro functions nest more than {_MAX_NESTING} deep: "
                              + " -> ".join(self._calls[:3] + ["..."] + self._calls[-2:]))
        self._calls.append(call)
        try:
            return FUNCTIONS[kind](self, inner, prefix)
        except SubmitError as e:
            if self._calls[:-1]:  # an inner call: the outermost names the whole chain
                raise
            raise SubmitError(f"{call}: {e.reason}") from None
        finally:
            self._calls.pop()

    def arg_value(self, arg: str) -> str:
        """A function argument: the value of the macro it names, else the text itself."""
        v = self.lookup(arg)
        v = arg if v is None else v
        return self.expand(v) if "$" in v else v


def expand_self(raw: str, name: str, table: MacroTable) -> str:
    """Expand only references to ``name`` itself in its new value (``x = $(x) more``).

    HTCondor does this when a macro is defined so that appending to a macro works; other
    references stay for lazy expansion.
    """
    if "$" not in raw:
        return raw
    key = name.lower()
    s = raw
    pos = 0
    while True:
        found = find_macro(s, pos)
        if found is None:
            return s
        start, body, end, colon, kind, _prefix = found
        ref = s[body:colon] if colon >= 0 else s[body:end]
        if kind != "normal" or ref.lower() != key:
            pos = end
            continue
        old = table.raw(name)
        if colon >= 0 and not old:
            old = s[colon + 1:end]
        s = s[:start] + (old or "") + s[end + 1:]
        pos = start + len(old or "")


def default_macros(*, arch: str, opsys: str, opsys_and_ver: str = "", opsys_major_ver: str = "",
                   opsys_ver: str = "", submit_file: str = "", submit_time: float | None = None,
                   spool: str = "") -> dict[str, str]:
    """The built-in macro defaults of a submit description (lower-case keys).

    Per-proc entries (Process, Step, ...) hold their "unlive" values; job builders overlay
    the real ones.
    """
    import time

    t = time.localtime(submit_time if submit_time is not None else time.time())
    return {
        "arch": arch, "opsys": opsys, "opsysandver": opsys_and_ver,
        "opsysmajorver": opsys_major_ver, "opsysver": opsys_ver,
        "cluster": "1", "clusterid": "1", "process": "0", "procid": "0", "itemindex": "0",
        "row": "0", "step": "0", "node": "", "jobid": "$(ClusterId).$(ProcId)",
        "islinux": "1" if opsys.upper() == "LINUX" else "0",
        "iswindows": "1" if opsys.upper() == "WINDOWS" else "0",
        "request_cpus": "$(RequestCPUs)", "request_memory": "$(RequestMemory)",
        "vm_memory": "$(Request_Memory)", "vm_vcpus": "$(Request_CPUs)",
        "spool": spool, "submit_file": submit_file,
        "submit_time": str(int(submit_time if submit_time is not None else time.time())),
        "year": f"{t.tm_year:04d}", "month": f"{t.tm_mon:02d}", "day": f"{t.tm_mday:02d}",
    }


#: (``os.environ``'s raw bytes, their decoded copy) of the last snapshot: a DAG manager takes one
#: per node, and decoding every variable again costs more than comparing the raw bytes
_ENVIRON_LAST: tuple[dict, dict[str, str]] | None = None


def environ_snapshot(env: Mapping[str, str] | None) -> dict[str, str]:
    """The environment a description is expanded against (a copy; ``os.environ`` if None).

    ``os.environ`` is decoded again only when its raw bytes differ from the last snapshot's
    (``os.environ._data``, which every change to ``os.environ`` goes through).
    """
    global _ENVIRON_LAST
    if env is not None:
        return dict(env)
    raw = getattr(os.environ, "_data", None)
    if not isinstance(raw, dict):
        return dict(os.environ)
    last = _ENVIRON_LAST
    if last is None or last[0] != raw:
        last = _ENVIRON_LAST = (dict(raw), dict(os.environ))
    return dict(last[1])

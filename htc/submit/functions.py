"""The macro functions of the submit language: ``$INT()``, ``$CHOICE()``, ``$Fpnx()``, ...

Each ``fn_<name>(ex, inner, prefix)`` evaluates one function call for an
:class:`htc.submit.macros.Expander` ``ex``; ``inner`` is the text between the parentheses
and ``prefix`` the ``$NAME`` as written.  Semantics follow HTCondor's ``evaluate_macro_func``
(condor_utils/config.cpp) as the 25.x submit code behaves: ``$SUBSTR(name, start[, len])``,
``$RANDOM_CHOICE(one)`` looks ``one`` up as a list, ``$ENV(X)`` of an unset X is
``UNDEFINED``.
"""

from __future__ import annotations

import re

from htc.submit import exprtext
from htc.submit.errors import SubmitError


def split_list(text: str, seps: str = ", \t\r\n") -> list[str]:
    """Split like HTCondor's StringList: on any separator, trimmed, empty items dropped."""
    return [t for t in re.split("[" + re.escape(seps) + "]+", text) if t]


_PRINTF_SPEC = re.compile(r"%%|%([-+ #0]*\d*(?:\.\d+)?)(?:hh|h|ll|l|L|q|j|z|t)?([a-zA-Z])")


def _c_format(fmt: str, value, kind: str) -> str:
    """Apply a printf format with one conversion, as $INT/$REAL/$STRING do (C ``%lld`` ok)."""
    specs = [m for m in _PRINTF_SPEC.finditer(fmt) if m.group(0) != "%%"]
    allowed = {"int": "diouxX", "real": "eEfFgG", "string": "s"}[kind]
    if len(specs) != 1 or specs[0].group(2) not in allowed:
        raise SubmitError(f"'{fmt}' is not a valid format specifier")
    m = specs[0]
    spec = "%" + m.group(1) + m.group(2)
    return fmt[:m.start()].replace("%%", "%") + (spec % value) + fmt[m.end():].replace("%%", "%")


def format_real(value: float, fmt: str | None) -> str:
    """Format like HTCondor's $REAL: ``%.16G`` by default; a format result always has a '.'."""
    if fmt is None:
        return _c_format("%.16G", value, "real")
    out = _c_format(fmt, value, "real")
    return out if "." in out else out + ".0"


def fn_random_choice(ex, inner: str, prefix: str) -> str:
    """$RANDOM_CHOICE(a,b,c): one item at random; one name means the list it holds."""
    ex.used_random = True
    entries = split_list(inner, ",")
    if len(entries) == 1:
        v = ex.lookup(entries[0])
        if v is not None:
            entries = split_list(ex.expand(v) if "$" in v else v)
    if not entries:
        raise SubmitError("empty list to choose from")
    return entries[ex.rng.randrange(len(entries))]


def fn_random_integer(ex, inner: str, prefix: str) -> str:
    """$RANDOM_INTEGER(min,max[,step]): a random integer in the range."""
    ex.used_random = True
    parts = [p.strip() for p in inner.split(",")]
    try:
        lo, hi = int(parts[0]), int(parts[1])
        step = int(parts[2]) if len(parts) > 2 and parts[2] else 1
    except (ValueError, IndexError):
        raise SubmitError("expected integer min, max and optional step") from None
    if step < 1:
        raise SubmitError("invalid step")
    if lo > hi:
        raise SubmitError("min > max")
    return str(lo + ex.rng.randrange((step + hi - lo) // step) * step)


def fn_choice(ex, inner: str, prefix: str) -> str:
    """$CHOICE(index, a, b, ...) or $CHOICE(index, listname): the index-th item."""
    entries = [e.strip() for e in inner.split(",")]
    if len(entries) < 2:
        raise SubmitError("no index")
    index = exprtext.eval_int(ex.arg_value(entries[0]))
    if index is None or index < 0:
        raise SubmitError(f"{entries[0]} is an invalid index")
    items = entries[1:]
    if len(entries) == 2:
        v = ex.lookup(entries[1])
        if v is None:
            raise SubmitError(f'no list named "{entries[1]}"')
        items = [e.strip() for e in (ex.expand(v) if "$" in v else v).split(",")]
    if index >= len(items):
        raise SubmitError(f"index {index} is out of range")
    return items[index]


def fn_substr(ex, inner: str, prefix: str) -> str:
    """$SUBSTR(name, start[, length]): part of a macro's value; negatives count from the end."""
    if "," not in inner:
        raise SubmitError("no length specified")
    name, rest = inner.split(",", 1)
    start_arg, _, len_arg = rest.partition(",")
    start = exprtext.eval_int(ex.arg_value(start_arg.strip()))
    if start is None:
        raise SubmitError(f"{start_arg} is an invalid start index")
    length = None
    if _:
        length = exprtext.eval_int(ex.arg_value(len_arg.strip()))
        if length is None:
            raise SubmitError(f"{len_arg} is an invalid length")
    v = ex.lookup(name)
    if v is None:
        return ""
    v = ex.expand(v) if "$" in v else v
    n = len(v)
    if start < 0:
        start = max(0, n + start)
    start = min(start, n)
    v = v[start:]
    if length is None:
        return v
    if length < 0:
        length = max(0, len(v) + length)
    return v[:length]


def fn_int(ex, inner: str, prefix: str) -> str:
    """$INT(name[, format]): a macro's value as an integer, printf-formatted."""
    name, _, fmt = inner.partition(",")
    value = ex.arg_value(name)
    iv = exprtext.eval_int(value)
    if iv is None:
        raise SubmitError(f"{value} does not evaluate to an integer")
    return _c_format(fmt, iv, "int") if _ else str(iv)


def fn_real(ex, inner: str, prefix: str) -> str:
    """$REAL(name[, format]): a macro's value as a real (``%.16G`` by default)."""
    name, _, fmt = inner.partition(",")
    value = ex.arg_value(name)
    rv = exprtext.eval_real(value)
    if rv is None:
        raise SubmitError(f"{value} does not evaluate to a real")
    return format_real(rv, fmt if _ else None)


def fn_string(ex, inner: str, prefix: str) -> str:
    """$STRING(name[, format]): a macro's value as a string (evaluated if it is one)."""
    name, _, fmt = inner.partition(",")
    value = ex.arg_value(name)
    sv = exprtext.eval_string(value)
    value = value if sv is None else sv
    return _c_format(fmt, value, "string") if _ else value


def fn_eval(ex, inner: str, prefix: str) -> str:
    """$EVAL(expr): the value of a ClassAd expression, as text."""
    v = ex.lookup(inner)
    v = inner if v is None else v
    v = ex.expand(v) if "$" in v else v
    out = exprtext.eval_to_text(v)
    return v if out is None else out


def fn_basename(ex, inner: str, prefix: str) -> str:
    """$BASENAME(name): the file name of a path."""
    return fn_filename(ex, inner, "$Fnx")


def fn_dirname(ex, inner: str, prefix: str) -> str:
    """$DIRNAME(name): the directory of a path, with its trailing '/'."""
    return fn_filename(ex, inner, "$Fp")


def fn_filename(ex, inner: str, prefix: str) -> str:
    """$F<flags>(name): parts of a path (see :func:`path_parts`)."""
    v = ex.lookup(inner)
    v = inner if v is None else v
    v = ex.expand(v) if "$" in v else v
    if not v.startswith("/"):
        ex.used_cwd = True  # (the result depends on the iwd: htc.submit.builder traces it as a read of Iwd)
    return path_parts(v, prefix[2:], ex.cwd)


def _basename_index(path: str) -> int:
    i = max(path.rfind("/"), path.rfind("\\"))
    return i + 1


def path_parts(value: str, flags: str, cwd: str) -> str:
    """Evaluate ``$F<flags>(value)``: pieces of a path, as HTCondor's filename macro does.

    ``p`` directory with trailing '/', ``d`` parent directory name(s), ``n`` name without
    extension, ``x`` extension with its '.', ``f`` make absolute first, ``q``/``a`` quote
    (double, or single when ``a``), ``b`` bare (no trailing '/' or leading '.'),
    ``w``/``u`` convert separators.
    """
    parts = num_dirs = 0
    quoted = full = bare = arg_quote = False
    to_sep = ""
    for ch in flags.lower():
        if ch == "x":
            parts |= 1
        elif ch == "n":
            parts |= 2
        elif ch == "p":
            parts |= 4
        elif ch == "d":
            parts |= 8
            num_dirs += 1
        elif ch == "a":
            arg_quote = True
        elif ch == "b":
            bare = True
        elif ch == "f":
            full = True
        elif ch == "w":
            to_sep = "\\"
        elif ch == "u":
            to_sep = "/"
        elif ch == "q":
            quoted = True
    q = ("'" if arg_quote else '"') if quoted else ""
    v = value
    if len(v) > 1 and v[0] == v[-1] and v[0] in "\"'":
        v = v[1:-1]
    if full and not v.startswith("/") and cwd:
        v = cwd.rstrip("/") + "/" + (v[2:] if v.startswith("./") and len(v) > 2 else v)
    if to_sep:
        v = v.replace("/" if to_sep == "\\" else "\\", to_sep)
    ixn = _basename_index(v)
    dot = v.rfind(".", ixn)
    ixx = dot if dot >= 0 else len(v)
    end = len(v)
    if ixn == 0 and parts & 3:
        parts &= ~(4 | 8)
    sel = parts & 0xF
    begin = 0
    if sel == 1:
        begin = ixx + (1 if bare and ixx < end else 0)
    elif sel == 3:
        begin = ixn
    elif sel == 2:
        begin, end = ixn, ixx
    elif sel in (0, 7, 5):
        begin = 0
    elif sel == 4:
        end = ixn - 1 if bare and ixn > 0 else ixn
    elif sel == 6:
        end = ixx
    elif ixn > 0:
        seps = [i + 1 for i, c in enumerate(v) if c in "/\\"]
        seps = seps[:len(seps) - num_dirs] if num_dirs <= len(seps) else []
        begin = seps[-1] if seps else 0
        if parts & 3 == 2:
            end = ixx
        elif parts & 3 == 0:
            end = ixn - 1 if bare and ixn > 0 else ixn
    else:
        begin = end = 0
    return q + v[begin:end] + q


#: macro function name (see :func:`htc.submit.macros.find_macro`) -> implementation
FUNCTIONS = {
    "random_choice": fn_random_choice, "random_integer": fn_random_integer,
    "choice": fn_choice, "substr": fn_substr, "int": fn_int, "real": fn_real,
    "string": fn_string, "eval": fn_eval, "basename": fn_basename, "dirname": fn_dirname,
    "filename": fn_filename,
}

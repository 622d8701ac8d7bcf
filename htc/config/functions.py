"""The macro functions: ``$INT``, ``$REAL``, ``$STRING``, ``$EVAL``, ``$CHOICE``, ``$SUBSTR``,
``$RANDOM_CHOICE``, ``$RANDOM_INTEGER``, ``$F[flags]``, ``$BASENAME`` and ``$DIRNAME``.

Each takes the :class:`~htc.config.macros.Expander` (``x``: for ``lookup``, ``expand`` and the
context's random generator) and the text between the parentheses, and returns the
replacement text. An argument that names a macro is replaced by that macro's value first
(HTCondor's ``get_lookup_and_expand_macro_arg``), so ``$INT(N)`` and ``$INT(3+4)`` both work.
Bad arguments raise :class:`~htc.config.errors.MacroError`, which :class:`Config` turns into
an error naming the line that defined the value.
"""

from __future__ import annotations

import re

from htc.config import evaluate as ev
from htc.config.errors import MacroError

__all__ = ["call", "filename_parts", "FILENAME_FLAGS"]

#: letters allowed after ``$F`` (p dir, d parent, n name, x extension, q quote, a single quote,
#: b bare, f full path, w/u separators)
FILENAME_FLAGS = frozenset("pnxdqabfwu")


def call(x, func: str, body: str) -> str:
    """Evaluate ``$func(body)``; ``func`` is ``INT``, ``EVAL``, ``Fpn``, ``BASENAME``, ...

    Raises:
        MacroError: the arguments are wrong (the message says which and why).
    """
    if func.startswith("F") or func in ("BASENAME", "DIRNAME"):
        return _filename(x, func, body)
    return _FUNCTIONS[func](x, body)


def _split_items(text: str) -> list[str]:
    """Comma-separated items, empty ones kept (HTCondor's nth_list_item), each trimmed."""
    return [item.strip() for item in text.split(",")]


_PRINTF = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\d*)(?:\.(?P<prec>\d+))?"
                     r"(?P<len>hh|h|ll|l|q|j|z|t|L)?(?P<conv>[diouxXeEfFgGaAcs%])")


def _printf(fmt: str, value, kinds: str, func: str) -> str:
    """Apply one printf conversion of ``kinds`` to ``value`` (lengths like ``%lld`` accepted)."""
    convs = [m for m in _PRINTF.finditer(fmt) if m.group("conv") != "%"]
    if len(convs) > 1 or (convs and convs[0].group("conv") not in kinds):
        raise MacroError(f"${func}() error: '{fmt}' is not a valid format specifier")
    py = _PRINTF.sub(lambda m: m.group(0) if m.group("conv") == "%" else
                     "%" + m.group("flags") + m.group("width")
                     + (f".{m.group('prec')}" if m.group("prec") else "") + m.group("conv"), fmt)
    try:
        return py % value if convs else py.replace("%%", "%")
    except (ValueError, TypeError, OverflowError) as exc:
        raise MacroError(f"${func}() error: '{fmt}' cannot format {value!r}: {exc}") from None



def _arg(x, items: list[str], index: int) -> str | None:
    """Item ``index``, replaced by the macro of that name if there is one, then expanded."""
    if index >= len(items):
        return None
    item = items[index]
    raw = x.lookup(item)
    return x.expand(raw if raw is not None else item, keep_dollar=True)


def _random_choice(x, body: str) -> str:
    """``$RANDOM_CHOICE(a, b, ...)`` or ``$RANDOM_CHOICE(LISTNAME)``: one item at random."""
    if "," not in body:
        if not body.strip():
            raise MacroError("$RANDOM_CHOICE() error: no list")
        body = _arg(x, [body.strip()], 0) or ""
    items = _split_items(body)
    return items[x.ctx.rng.randrange(len(items))]


def _random_integer(x, body: str) -> str:
    """``$RANDOM_INTEGER(min, max[, step])``: a random integer of the stepped range."""
    items = _split_items(body)
    bounds = []
    for index, what in ((0, "min"), (1, "max"), (2, "step")):
        if index >= len(items) or (index == 2 and not items[2]):
            if index == 2:
                bounds.append(1)
                continue
            raise MacroError(f"$RANDOM_INTEGER() error: invalid {what}")
        m = re.match(r"[-+]?\d+", items[index])
        if not m:
            raise MacroError(f"$RANDOM_INTEGER() error: invalid {what}")
        bounds.append(int(m.group()))
    low, high, step = bounds
    if step < 1:
        raise MacroError("$RANDOM_INTEGER() error: invalid step")
    if low > high:
        raise MacroError("$RANDOM_INTEGER() error: min > max")
    return str(low + x.ctx.rng.randrange((step + high - low) // step) * step)


def _choice(x, body: str) -> str:
    """``$CHOICE(index, a, b, ...)`` or ``$CHOICE(index, LISTNAME)``: the item at ``index``."""
    items = _split_items(body)
    if len(items) < 2:
        raise MacroError("$CHOICE() error: no list")
    index_text = _arg(x, items, 0) or ""
    index = ev.to_int(index_text)
    if index is None or index < 0:
        raise MacroError(f"$CHOICE() error: '{index_text}' is invalid index")
    choices = items[1:]
    if len(choices) == 1:
        if not choices[0]:
            raise MacroError("$CHOICE() error: no list")
        raw = x.lookup(choices[0])
        if raw is None:
            raise MacroError(f"$CHOICE() error: no list named {choices[0]}")
        choices = _split_items(x.expand(raw, keep_dollar=True))
    if index >= len(choices):
        raise MacroError(f"$CHOICE() error: index {index} is out of range")
    return choices[index]


def _substr(x, body: str) -> str:
    """``$SUBSTR(name, start[, length])``: negative start/length count from the end."""
    items = _split_items(body)
    if len(items) < 2:
        raise MacroError("$SUBSTR() error: no start position given")
    raw = x.lookup(items[0])
    text = x.expand(raw, keep_dollar=True) if raw is not None else ""
    bounds = []
    for index, what in ((1, "start"), (2, "length")):
        arg = _arg(x, items, index)
        if arg is None:
            bounds.append(None)
            continue
        number = ev.to_int(arg)
        if number is None:
            raise MacroError(f"$SUBSTR() error: {arg} is invalid {what}")
        bounds.append(number)
    start, length = bounds
    size = len(text)
    start = max(0, min(size, size + start if start < 0 else start))
    rest = size - start
    if length is None:
        length = rest
    length = max(0, min(rest, rest + length if length < 0 else length))
    return text[start:start + length]


def _number_arg(x, body: str):
    """Split ``name-or-expr[,format]``; the format is everything after the first comma."""
    name, sep, fmt = body.partition(",")
    items = [name.strip()]
    text = _arg(x, items, 0) or ""
    return text, (fmt if sep else None)


def _int(x, body: str) -> str:
    """``$INT(name-or-expr[, printf-format])``."""
    text, fmt = _number_arg(x, body)
    number = ev.to_int(text)
    if number is None:
        raise MacroError(f"$INT() error: {text} does not evaluate to an integer")
    return _printf(fmt, number, "diouxXc", "INT") if fmt is not None else str(number)


def _real(x, body: str) -> str:
    """``$REAL(name-or-expr[, printf-format])``; ``%.16G`` by default, a forced ``.0`` with a format."""
    text, fmt = _number_arg(x, body)
    number = ev.to_float(text)
    if number is None:
        raise MacroError(f"$REAL() error: {text} does not evaluate to a real")
    if fmt is None:
        return "%.16G" % number
    out = _printf(fmt, number, "eEfFgGaA", "REAL")
    return out if "." in out else out + ".0"


def _string(x, body: str) -> str:
    """``$STRING(name-or-expr[, %s-format])``: a string expression's value, else the text."""
    text, fmt = _number_arg(x, body)
    try:
        value = ev.evaluate(text)
    except ev.EvalSyntaxError:
        value = None
    if isinstance(value, str):
        text = value
    return _printf(fmt, text, "s", "STRING") if fmt is not None else text


def _eval(x, body: str) -> str:
    """``$EVAL(expr-or-name)``: the ClassAd value, unparsed; text that does not parse is empty."""
    raw = x.lookup(body)
    source = raw if raw is not None else body
    expanded = x.expand(source)
    result = ev.eval_to_text(expanded)
    if result is not None:
        return result
    return expanded if "$" in source else ""


def _filename(x, func: str, body: str) -> str:
    """``$F[flags](name-or-path)``, ``$BASENAME(...)``, ``$DIRNAME(...)``."""
    raw = x.lookup(body)
    text = body if raw is None else (x.expand(raw, keep_dollar=True) if "$" in raw else raw)
    if func == "BASENAME":
        flags = "nx"
    elif func == "DIRNAME":
        flags = "p"
    else:
        flags = func[1:].lower()
    return filename_parts(text, flags)


_FUNCTIONS = {"RANDOM_CHOICE": _random_choice, "RANDOM_INTEGER": _random_integer, "CHOICE": _choice,
              "SUBSTR": _substr, "INT": _int, "REAL": _real, "STRING": _string, "EVAL": _eval}


def filename_parts(text: str, flags: str) -> str:
    """``$F[pndxqabwu](...)``: pick parts of a path (p dir, d parent dir, n name, x extension).

    ``q`` quotes the result (``a``: with single quotes), ``b`` drops the trailing ``/`` of
    directories and the ``.`` of the extension, ``w``/``u`` convert separators. ``f`` (full
    path) has no effect in configuration, where there is no current directory, as in HTCondor.
    """
    quote = ("'" if "a" in flags else '"') if "q" in flags else ""
    bare = "b" in flags
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    if "w" in flags:
        text = text.replace("/", "\\")
    elif "u" in flags:
        text = text.replace("\\", "/")
    parts = (1 if "x" in flags else 0) | (2 if "n" in flags else 0) | (4 if "p" in flags else 0) \
        | (8 if "d" in flags else 0)
    dirs = flags.count("d")
    seps = [i + 1 for i, c in enumerate(text) if c in "/\\"]
    ixn = seps[-1] if seps else 0
    dot = text.rfind(".", ixn)
    ixx = dot if dot >= 0 else len(text)
    if not ixn and parts & 3:
        parts &= ~12
    start, end = 0, len(text)
    kind = parts & 15
    if kind == 1:
        start = ixx + (1 if bare and ixx < end else 0)
    elif kind == 3:
        start = ixn
    elif kind == 2:
        start, end = ixn, ixx
    elif kind == 4:
        end = ixn - 1 if bare and ixn > 0 else ixn
    elif kind == 6:
        end = ixx
    elif kind in (0, 5, 7):
        pass
    elif ixn > 0:
        keep = seps[:len(seps) - dirs] if dirs < len(seps) else []
        start = keep[-1] if keep else 0
        if parts & 3 == 2:
            end = ixx
        elif parts & 3 == 0:
            end = ixn - 1 if bare and ixn > 0 else ixn
    else:
        start = end = 0
    return f"{quote}{text[start:end]}{quote}"

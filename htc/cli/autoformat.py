"""condor_q's custom output: ``-format FMT ATTR`` and ``-af[:jlhVrTY,tng] ATTR ...``.

Both build one *print mask* (HTCondor's ``AttrListPrintMask``): a list of columns, each an
attribute or expression with a printf-style format, plus four separators (before a row,
before a column, after a column, after a row).  ``-format`` and ``-af`` may be mixed and
repeated; the columns print in the order given, one row per job.

Rules, from ``ad_printmask.cpp`` (``parse_autoformat_args``, ``render``, ``display``):

* ``-format FMT ATTR``: FMT holds at most one conversion: ``%d %i %u %o %x %X %c`` (integer),
  ``%f %e %g %E %G`` (real), ``%s`` (string; for an attribute that is not a string its
  expression is printed unevaluated), ``%v`` (any value, strings bare), ``%V`` (strings
  quoted, as ``-long``), ``%r`` (the unevaluated expression), ``%T`` (seconds as
  ``  0+00:05:12``), ``%Y`` (a Unix time as `` 4/22 20:44``).  Backslash escapes (``\\n``,
  ``\\t``) are turned into their characters.  An ATTR that the ad lacks is evaluated as an
  expression; when the value does not suit the conversion (or cannot be had) the whole FMT
  prints nothing, so ``-format '%d\\n' Missing`` prints no line.  A FMT without a
  conversion prints as it is.  No separators are added: FMT carries its own ``\\n``.
* ``-af`` columns are ``%v`` by default, separated by a space, a newline after each job.
  Its qualifiers: ``j`` the job id first, ``l`` ``Attr = value`` labels, ``h`` a heading line
  (columns then padded to the widest value), ``V``/``r``/``T``/``Y`` the default conversion
  (``r`` also ``o``), ``,`` a comma after each field but the last, ``t`` a tab instead of the
  space, ``n`` a newline after each field but the last, ``g`` no space, a newline before each
  job.  The separators of the last ``-af`` given apply to the whole mask.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from htc.classad import ClassAd, ExprTree
from htc.classad import printing
from htc.classad.ast import AttrRef
from htc.classad.errors import ClassAdParseError
from htc.classad.values import Value
from htc.cli.formatting import value_text
from htc.errors import UsageError

__all__ = ["Column", "PrintMask", "add_autoformat", "add_format", "format_date", "format_time", "job_id_text",
           "split_af_option"]

# One printf conversion: flags, width, precision, length modifiers, the letter.
_CONVERSION = re.compile(r"%([-+ #0']*)(\*|\d+)?(?:\.(\*|\d*))?(hh|h|ll|l|L|q|j|z|t)?([diouxXeEfFgGaAcsvVrTYpn%])")
_INT, _FLOAT, _STRING, _VALUE, _RAW, _TIME, _DATE = "int", "float", "string", "value", "raw", "time", "date"
_KINDS = {**dict.fromkeys("diouxXcp", _INT), **dict.fromkeys("eEfFgGaA", _FLOAT), "s": _STRING,
          "v": _VALUE, "V": _VALUE, "r": _RAW, "T": _TIME, "Y": _DATE}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "\\": "\\", '"': '"',
            "'": "'", "?": "?"}


def collapse_escapes(text: str) -> str:
    """HTCondor's ``collapse_escapes``: ``\\n``, ``\\t``, ... and ``\\ooo``/``\\xhh`` become characters."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in "01234567":
            m = re.match(r"[0-7]{1,3}", text[i + 1:])
            out.append(chr(int(m.group(), 8)))
            i += 1 + len(m.group())
        elif nxt == "x" and re.match(r"[0-9a-fA-F]", text[i + 2:i + 3]):
            m = re.match(r"[0-9a-fA-F]+", text[i + 2:])
            out.append(chr(int(m.group(), 16) & 0xFF))
            i += 2 + len(m.group())
        else:
            out.append(nxt)
            i += 2
    return "".join(out)


def format_time(seconds: float) -> str:
    """HTCondor's ``format_time``: ``%3d+%02d:%02d:%02d`` (``  0+00:05:12``)."""
    secs = int(seconds)
    days, secs = divmod(secs, 86400)
    hours, secs = divmod(secs, 3600)
    minutes, secs = divmod(secs, 60)
    return f"{days:3d}+{hours:02d}:{minutes:02d}:{secs:02d}"


def format_date(timestamp: float) -> str:
    """HTCondor's ``format_date``: ``%2d/%-2d %02d:%02d`` in local time (`` 4/22 20:44``)."""
    import datetime

    if timestamp < 0:
        return "    ???    "
    t = datetime.datetime.fromtimestamp(int(timestamp))
    return f"{t.month:2d}/{t.day:<2d} {t.hour:02d}:{t.minute:02d}"


def job_id_text(ad: ClassAd) -> str | None:
    """``ClusterId.ProcId`` (render_job_id); None when the ad has no ClusterId."""
    cluster = _plain(ad, "ClusterId")
    if not isinstance(cluster, int) or isinstance(cluster, bool):
        return None
    proc = _plain(ad, "ProcId")
    if isinstance(proc, int) and not isinstance(proc, bool):
        return f"{cluster}.{proc}"
    return str(cluster)


def _plain(ad: ClassAd, name: str):
    try:
        return ad.eval(name)
    except KeyError:
        return Value.Undefined


@dataclass
class Column:
    """One column of the mask: ``attr`` printed with the printf-style ``fmt``."""

    attr: str
    fmt: str
    heading: str | None = None
    width: int = 0
    left: bool = False
    autowidth: bool = False
    job_id: bool = False  # the ``-af:j`` column (ClusterId.ProcId)
    no_prefix: bool = False
    no_suffix: bool = False
    truncate: bool = False
    alt: str = ""  # what an invalid value prints (print-format's OR): "" nothing, "?" one, "??" the width
    render_fn: object = None  # print-format's PRINTAS: ad -> text, or None when the value is missing

    def __post_init__(self):
        self.fmt = collapse_escapes(self.fmt)
        m = _CONVERSION.search(self.fmt.replace("%%", "\0\0"))
        self._conv = m
        if m is not None and (m.group(5) in "n%" or m.group(2) == "*" or m.group(3) == "*"):
            self._conv = None  # HTCondor treats these as "unsafe": the text is printed as it is
        self.kind = _KINDS[self._conv.group(5)] if self._conv else None
        if self._conv and not self.width and self._conv.group(2):
            self.width = int(self._conv.group(2))
            self.left = "-" in self._conv.group(1)

    def text(self, ad: ClassAd) -> str:
        """What this column prints for ``ad`` (before padding to the column's width)."""
        text = self._text(ad)
        return self._alt() if text is None else text

    def _alt(self) -> str:
        if not self.alt or self.alt == " ":
            return ""
        if len(self.alt) == 1 or self.width < 3:
            return self.alt[0]
        if self.alt[0] == "?":
            return "[" + "?" * (self.width - 2) + "]"
        return self.alt[0] * self.width

    def _text(self, ad: ClassAd) -> str | None:
        if self.render_fn is not None:
            value = self.render_fn(ad)
            if value is None:
                return None
            return self._apply(value) if self._conv is not None else str(value)
        if self.job_id:
            value = job_id_text(ad)
            return None if value is None else self._apply(value)
        if self._conv is None:
            return self.fmt.replace("%%", "%")
        kind = self.kind
        is_expr = False
        try:
            tree = ad.lookup(self.attr)
        except KeyError:
            try:
                tree = ExprTree(self.attr)
            except ClassAdParseError:
                return None
            is_expr = True
        if kind == _STRING and not is_expr:
            value = tree.eval(ad)
            if isinstance(value, str):
                return self._apply(value)
            kind = _RAW
        if kind == _RAW:
            if is_expr and isinstance(tree.node, AttrRef):
                return self._apply("undefined")
            return self._apply(printing.unparse(tree.node, old=True))
        value = tree.eval(ad)
        if kind in (_INT, _TIME, _DATE, _FLOAT):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None
            if kind == _TIME:
                return format_time(value)
            if kind == _DATE:
                return format_date(value)
            return self._apply(int(value) if kind == _INT else float(value))
        if kind == _STRING:
            return self._apply(value) if isinstance(value, str) else None
        # %v / %V: strings bare for v, quoted for V; everything else unparsed
        if isinstance(value, str) and self._conv.group(5) == "v":
            return self._apply(value)
        return self._apply(_unparse_value(value))

    def _apply(self, value) -> str:
        m = self._conv
        if m is None:  # the -af:j column with its plain "%v"
            return str(value)
        start, end = m.span()
        spec = "%" + m.group(1).replace("'", "") + (m.group(2) or "") + (
            "." + m.group(3) if m.group(3) is not None else "")
        letter = m.group(5)
        if self.kind == _INT:
            letter = {"u": "d", "p": "x"}.get(letter, letter)
            if letter == "c":
                value = chr(value & 0xFF) if value >= 0 else "?"
                letter = "s"
        elif self.kind in (_VALUE, _RAW, _STRING):
            letter = "s"
            value = str(value)
        try:
            body = (spec + letter) % value
        except (TypeError, ValueError, OverflowError):
            body = str(value)
        return self.fmt[:start].replace("%%", "%") + body + self.fmt[end:].replace("%%", "%")


def _unparse_value(value) -> str:
    if isinstance(value, str):
        return printing.quote_string(value, old=True)
    return value_text(value)


@dataclass
class PrintMask:
    """Columns and separators: HTCondor's AttrListPrintMask, for ``-format`` and ``-af``."""

    columns: list[Column] = field(default_factory=list)
    row_prefix: str = ""
    col_prefix: str = ""
    col_suffix: str = ""
    row_suffix: str = ""

    @property
    def has_headings(self) -> bool:
        return any(c.heading is not None for c in self.columns)

    def render(self, ads: Iterable[ClassAd]) -> str:
        """Every ad as a row, after a heading line when a column has a heading."""
        rows = [[col._text(ad) for col in self.columns] for ad in ads]
        for ix, col in enumerate(self.columns):
            if col.autowidth:
                col.width = max([col.width] + [len(row[ix]) for row in rows if row[ix] is not None])
        # a missing value prints as OR's character(s), filling the column's final width
        rows = [[col._alt() if text is None else text for col, text in zip(self.columns, row)] for row in rows]
        out = []
        if self.has_headings:
            out.append(self._headings())
        for row in rows:
            out.append(self._row(row))
        return "".join(out)

    def _headings(self) -> str:
        parts = [self.row_prefix]
        for ix, col in enumerate(self.columns):
            if col.heading is None:
                break
            if ix and not col.no_prefix:
                parts.append(self.col_prefix)
            parts.append(col.heading.ljust(col.width) if col.width else col.heading)
            if ix + 1 < len(self.columns) and not col.no_suffix:
                parts.append(self.col_suffix)
        return "".join(parts) + self.row_suffix

    def _row(self, texts: Sequence[str]) -> str:
        parts = [self.row_prefix]
        for ix, (col, text) in enumerate(zip(self.columns, texts)):
            if ix and not col.no_prefix:
                parts.append(self.col_prefix)
            if col.width and len(text) < col.width:
                text = text.ljust(col.width) if col.left else text.rjust(col.width)
            elif col.width and col.truncate:
                text = text[:col.width]
            parts.append(text)
            if ix + 1 < len(self.columns) and not col.no_suffix:
                parts.append(self.col_suffix)
        return "".join(parts) + self.row_suffix


def add_format(mask: PrintMask, fmt: str, attr: str) -> None:
    """``-format FMT ATTR``: one column.

    Raises:
        UsageError: ATTR is not an attribute name or ClassAd expression.
    """
    _check(attr, "-format")
    mask.columns.append(Column(attr, fmt))


def add_autoformat(mask: PrintMask, qualifiers: str, attrs: Sequence[str]) -> None:
    """``-af[:QUALIFIERS] ATTR ...``: one column per attribute (``parse_autoformat_args``).

    Raises:
        UsageError: no attribute was given, or one is not an attribute or expression.
    """
    if not attrs:
        raise UsageError("-autoformat requires at least one attribute parameter")
    label = heading = job_id = False
    row_prefix, col_prefix, col_suffix = "", " ", ""
    default = "%v"
    for ch in qualifiers:
        if ch == ",":
            col_suffix = ","
        elif ch == "n":
            col_suffix = "\n"
        elif ch == "g":
            col_prefix, row_prefix = "", "\n"
        elif ch == "t":
            col_prefix = "\t"
        elif ch == "l":
            label = True
        elif ch == "h":
            heading = True
        elif ch == "j":
            job_id = True
        elif ch in "VrTYo":
            default = {"V": "%V", "r": "%r", "o": "%r", "T": "%T", "Y": "%Y"}[ch]
    # HTCondor picks raw over V over Y over T when several are given
    for ch, fmt in (("r", "%r"), ("o", "%r"), ("V", "%V"), ("Y", "%Y"), ("T", "%T")):
        if ch in qualifiers:
            default = fmt
            break
    mask.row_prefix, mask.col_prefix, mask.col_suffix, mask.row_suffix = row_prefix, col_prefix, col_suffix, "\n"
    headings = heading or mask.has_headings
    if job_id:
        col = Column("ClusterId", "ID = %v" if label else "%v", job_id=True, left=True)
        col._conv = _CONVERSION.search(col.fmt)
        col.kind = _VALUE
        if headings:
            col.heading, col.autowidth = " ID", True
        mask.columns.append(col)
    for attr in attrs:
        tree = _check(attr, "-autoformat")
        if headings:
            text = attr
            if not heading and not isinstance(tree.node, AttrRef) and len(text) > 16:
                text = "(expr)"
            col = Column(attr, default, heading=text, width=len(text), left=True, autowidth=True)
        elif label:
            col = Column(attr, f"{attr} = {default}")
        else:
            col = Column(attr, default)
        mask.columns.append(col)


def _check(attr: str, option: str) -> ExprTree:
    try:
        return ExprTree(attr)
    except ClassAdParseError as exc:
        raise UsageError(f"{option} {attr!r} is not an attribute name or ClassAd expression: {exc}") from None


def split_af_option(word: str) -> tuple[str, str] | None:
    """``-af:jh`` -> ``("af", "jh")``; ``-autoformat`` -> ``("af", "")``; None for other words."""
    m = re.fullmatch(r"--?(af|autoformat)(?::(.*))?", word)
    if not m:
        return None
    return "af", m.group(2) or ""

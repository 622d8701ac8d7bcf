"""How the tools print ads: HTCondor's ``-af``, ``-long`` and ``-json`` forms, and tables.

The three machine-readable forms are plain text written exactly as HTCondor's tools write
them, so scripts written for ``condor_q`` work unchanged:

* :func:`autoformat` -- ``-af Attr ...``: one line per ad, values separated by one space,
  strings without quotes, a missing attribute as ``undefined``; an ``Attr`` may be any
  ClassAd expression (``-af 'RequestMemory * 2'``), evaluated in the ad.
* :func:`long_form` -- ``-long``: each ad in old ClassAd syntax (``Name = expr`` per line),
  ads separated by a blank line.
* :func:`json_form` -- ``-json``: a JSON array of objects, non-literal expressions as
  ``"\\/Expr(...)\\/"`` strings, as ``condor_q -json`` writes them.

Tables (the default views) are aligned columns printed through a :class:`rich.console.Console`:
a bold header and lines cut to the terminal's width on a terminal; whole lines, without colour
or trailing spaces, in a pipe or a file, so ``htc q | grep`` sees what it expects.
:func:`duration` and :func:`short_date` are HTCondor's ``0+00:05:12`` and ``11/22 03:29``.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Iterable, Sequence
from typing import TextIO

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from htc.classad import ClassAd, ExprTree
from htc.classad import printing
from htc.classad.errors import ClassAdParseError
from htc.classad.values import Value
from htc.errors import UsageError

__all__ = ["autoformat", "long_form", "json_form", "xml_form", "value_text", "duration", "short_date",
           "console", "print_table", "ad_value"]


def value_text(value) -> str:
    """A Python value of an ad as ``-af`` prints it (strings bare, reals HTCondor-style).

    Args:
        value: what ``ClassAd.eval`` or ``ExprTree.eval`` returned.

    Returns:
        The text: ``undefined``/``error``, ``true``/``false``, numbers, bare strings, and
        lists or nested ads in ClassAd syntax.
    """
    if value is Value.Undefined:
        return "undefined"
    if value is Value.Error:
        return "error"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return printing.format_real(value, old=True)
    if isinstance(value, str):
        return value
    if isinstance(value, datetime.datetime):
        return str(int(value.timestamp()))
    if isinstance(value, ExprTree):
        return value.unparse()
    if isinstance(value, ClassAd):
        return value.unparse()
    if isinstance(value, list):
        return "{ " + ", ".join(_list_item(v) for v in value) + " }"
    return str(value)


def _list_item(v) -> str:
    if isinstance(v, str):
        return printing.quote_string(v)
    return value_text(v)


def _compile(attrs: Sequence[str]) -> list[ExprTree]:
    out = []
    for text in attrs:
        try:
            out.append(ExprTree(text))
        except ClassAdParseError as exc:
            raise UsageError(f"-af {text!r} is not an attribute name or ClassAd expression: {exc}") from None
    return out


def ad_value(ad: ClassAd, expr: ExprTree | str):
    """Evaluate an attribute name or expression in ``ad`` (missing attribute: Undefined)."""
    tree = expr if isinstance(expr, ExprTree) else ExprTree(expr)
    return tree.eval(ad)


def autoformat(ads: Iterable[ClassAd], attrs: Sequence[str]) -> str:
    """``-af``: one line per ad with the value of each attribute (or expression).

    Args:
        ads: the ads to print.
        attrs: attribute names or ClassAd expressions, evaluated in each ad.

    Returns:
        The text, each line ending in a newline (empty for no ads).

    Raises:
        UsageError: an attribute is not a valid expression.
    """
    exprs = _compile(attrs)
    lines = [" ".join(value_text(e.eval(ad)) for e in exprs) for ad in ads]
    return "".join(line + "\n" for line in lines)


def long_form(ads: Iterable[ClassAd], attrs: Sequence[str] = ()) -> str:
    """``-long``: each ad in old syntax, one ``Name = expr`` per line, then a blank line.

    The attributes are in condor_q's order: sorted by name without regard to case (HTCondor's
    ``CondorClassAdListWriter`` prints an ad's names from a case-insensitive set).

    Args:
        ads: the ads to print.
        attrs: if given, only these attributes (``-long -attributes a,b``).

    Returns:
        The text.
    """
    out = []
    for ad in ads:
        ad = _project(ad, sorted(attrs or ad.keys(), key=str.lower))
        out.append(ad.printOld() + "\n")
    return "".join(out)


def json_form(ads: Iterable[ClassAd], attrs: Sequence[str] = ()) -> str:
    """``-json``: a JSON array of the ads (``[]`` when there are none).

    Args:
        ads: the ads to print.
        attrs: if given, only these attributes.

    Returns:
        Text that ``json.loads`` reads back as a list of objects.
    """
    objects = [(_project(ad, attrs) if attrs else ad).printJson() for ad in ads]
    if not objects:
        return "[]\n"
    return "[\n" + "\n,\n".join(objects) + "\n]\n"


def xml_form(ads: Iterable[ClassAd], attrs: Sequence[str] = ()) -> str:
    """``-xml``: the ads in HTCondor's ClassAd XML (``ClassAdXMLUnParser``, non-compact).

    Literals get their type's tag (``<i>``, ``<r>`` as ``%1.15E``, ``<s>``, ``<b v="t"/>``,
    ``<u/>``, ``<er/>``), lists ``<l>`` and nested ads ``<c>``; any other expression is
    ``<e>`` with its text, ``&``, ``<`` and ``>`` escaped.
    """
    out = ['<?xml version="1.0"?>\n<!DOCTYPE classads SYSTEM "classads.dtd">\n<classads>\n']
    for ad in ads:
        if attrs:
            ad = _project(ad, attrs)
        out.append(_xml_ad(ad._pairs(), 0) + "\n")
    out.append("</classads>\n")
    return "".join(out)


def _xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _xml_ad(pairs, indent: int) -> str:
    parts = ["<c>\n"]
    for name, node in pairs:
        parts.append(" " * (indent + 4) + f'<a n="{_xml_escape(name).replace(chr(34), "&quot;")}">'
                     + _xml_node(node, indent + 4) + "</a>\n")
    parts.append(" " * indent + "</c>")
    return "".join(parts)


def _xml_node(node, indent: int) -> str:
    from htc.classad.ast import AdExpr, ListExpr, Literal
    from htc.classad.values import AbsTime, RelTime

    if isinstance(node, Literal):
        v = node.value
        if v is Value.Undefined:
            return "<u/>"
        if v is Value.Error:
            return "<er/>"
        if isinstance(v, bool):
            return f'<b v="{"t" if v else "f"}"/>'
        if isinstance(v, int):
            return f"<i>{v}</i>"
        if isinstance(v, float):
            if v == 0.0:
                text = "-0.0" if str(v).startswith("-") else "0.0"
            elif v != v:
                text = "NaN"
            elif v in (float("inf"), float("-inf")):
                text = "INF" if v > 0 else "-INF"
            else:
                text = "%1.15E" % v
            return f"<r>{text}</r>"
        if isinstance(v, str):
            return f"<s>{_xml_escape(v)}</s>"
        if isinstance(v, (AbsTime, RelTime)):
            text = printing.unparse(node)
            tag = "at" if isinstance(v, AbsTime) else "rt"
            return f"<{tag}>{_xml_escape(text[9:-2])}</{tag}>"
    if isinstance(node, ListExpr):
        return "<l>" + "".join(_xml_node(item, indent) for item in node.items) + "</l>"
    if isinstance(node, AdExpr):
        return _xml_ad(list(node.table.values()), indent)
    return "<e>" + _xml_escape(printing.unparse(node)) + "</e>"


def _project(ad: ClassAd, attrs: Sequence[str]) -> ClassAd:
    out = ClassAd()
    for name in attrs:
        if name in ad:
            out[name] = ad.lookup(name)
    return out


def records_json(records: Iterable[dict]) -> str:
    """A list of plain records (``htc pool status -json``) as indented JSON."""
    return json.dumps(list(records), indent=2, sort_keys=False) + "\n"


def duration(seconds: float | None) -> str:
    """HTCondor's ``D+HH:MM:SS`` (``0+00:05:12``); negative or missing is ``0+00:00:00``."""
    secs = int(seconds or 0)
    if secs < 0:
        secs = 0
    days, rest = divmod(secs, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}+{hours:02d}:{minutes:02d}:{secs:02d}"


def short_date(timestamp: float | None) -> str:
    """HTCondor's ``M/D HH:MM`` in local time (`` 4/22 20:44``); missing is ``???``."""
    if not timestamp:
        return "???"
    t = datetime.datetime.fromtimestamp(float(timestamp))
    return f"{t.month:>2}/{t.day:<2} {t.hour:02d}:{t.minute:02d}"


def console(file: TextIO | None = None) -> Console:
    """A rich console for tables: the terminal's width on a terminal; unlimited width (no
    truncation, no colour) when writing to a pipe or file."""
    stream = file or sys.stdout
    interactive = getattr(stream, "isatty", lambda: False)()
    if interactive:
        return Console(file=stream, highlight=False)
    return Console(file=stream, width=100_000, highlight=False, color_system=None,
                   force_terminal=False, no_color=True)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, right: Iterable[int] = (),
                out: Console | None = None, title: str | None = None, wide: bool = False,
                width: int | None = None) -> None:
    """Print rows under headers as aligned columns, HTCondor-style: no borders, one space apart.

    On a terminal the header is bold and a line wider than the terminal is cut to fit (its
    end marked with an ellipsis); in a pipe or a file lines are whole and carry no trailing
    spaces.  Columns are laid out here rather than by :class:`rich.table.Table`, which takes
    seconds for the tens of thousands of rows ``htc q -nobatch`` may print.

    Args:
        headers: the column headings.
        rows: the cells, converted with ``str``.
        right: indexes of columns to right-align (numbers).
        out: the console (default: :func:`console` on standard output).
        title: a line printed above the table.
        wide: never cut lines (condor_q ``-wide``).
        width: cut lines to this many columns, on a terminal or not (``-wide:N``).
    """
    con = out or console()
    right = set(right)
    table = [[str(cell) for cell in row] for row in rows]
    widths = [cell_len(h) for h in headers]
    for row in table:
        for ix, cell in enumerate(row):
            n = cell_len(cell)
            if n > widths[ix]:
                widths[ix] = n

    def line(cells: Sequence[str]) -> str:
        parts = []
        for ix, cell in enumerate(cells):
            pad = " " * (widths[ix] - cell_len(cell))
            parts.append(pad + cell if ix in right else cell + pad)
        return " ".join(parts).rstrip()

    if title:
        con.print(Text(title))
    if width is None and (wide or not con.is_terminal):
        con.file.write(line(headers) + "\n" + "".join(line(row) + "\n" for row in table))
        return
    explicit = width is not None
    if width is None:
        width = con.width

    def fit(text: str) -> str:
        if cell_len(text) <= width:
            return text
        return text[:width] if explicit else text[: max(0, width - 1)] + "\u2026"

    if not con.is_terminal:
        con.file.write(fit(line(headers)) + "\n" + "".join(fit(line(row)) + "\n" for row in table))
        return
    con.print(Text(fit(line(headers)), style="bold"), soft_wrap=True)
    con.file.write("".join(fit(line(row)) + "\n" for row in table))
    con.file.flush()

"""``htc q -print-format FILE``: HTCondor's print-format tables (``make_printmask.cpp``).

A file is a ``SELECT`` line, one line per column, then optional ``WHERE``/``AND``, ``GROUP BY``
and ``SUMMARY`` lines; ``#`` starts a comment line; keywords are upper case::

    SELECT NOSUMMARY
       ClusterId  AS ' ID'  NOSUFFIX WIDTH 5 PRINTF '%4d.'
       ProcId     AS ' '    NOPREFIX WIDTH 3 PRINTF '%-3d'
       Owner      AS OWNER  WIDTH -14
       RequestMemory/1024 AS GB PRINTF %.1f OR ??
    WHERE JobStatus == 1
    GROUP BY
       Owner
       QDate DESCENDING
    SUMMARY STANDARD

What htc reads: ``SELECT`` with ``BARE``, ``NOTITLE``, ``NOHEADER``, ``NOSUMMARY``, ``LABEL
[SEPARATOR s]``, ``RECORDPREFIX``, ``RECORDSUFFIX``, ``FIELDPREFIX``, ``FIELDSUFFIX``; per
column ``AS``, ``WIDTH n|-n|AUTO``, ``LEFT``, ``RIGHT``, ``TRUNCATE``, ``FIT``, ``NOPREFIX``,
``NOSUFFIX``, ``PRINTF``, ``PRINTAS`` (the functions in :data:`PRINTAS`) and ``OR c``/``OR cc``;
``WHERE``/``AND`` (added to the query's constraint), ``GROUP BY`` keys with ``ASCENDING`` or
``DESCENDING`` (the sort order) and ``SUMMARY STANDARD|NONE`` (the totals line; none by
default, as in HTCondor).  Not read (refused with a message): ``SELECT FROM AUTOCLUSTER``,
``SELECT UNIQUE``, ``FORMATAS`` and ``PRINTAS`` functions outside :data:`PRINTAS`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from htc.classad import ClassAd, ExprTree
from htc.classad.errors import ClassAdParseError
from htc.cli import autoformat as af
from htc.cli import job_views as views
from htc.errors import UsageError
from htc.jobqueue.states import JobStatus

__all__ = ["Layout", "PRINTAS", "load", "parse"]

_COLUMN_KEYWORDS = {"AS", "WIDTH", "LEFT", "RIGHT", "TRUNCATE", "FIT", "NOPREFIX", "NOSUFFIX", "PRINTF",
                    "PRINTAS", "FORMATAS", "OR"}
_TOKEN = re.compile(r"""\s*('(?:[^'])*'|"(?:[^"\\]|\\.)*"|\S+)""")


def _status_letter(ad: ClassAd, now: float):
    status = ad.get("JobStatus")
    if not isinstance(status, int):
        return None
    try:
        return JobStatus(status).letter
    except ValueError:
        return "?"


def _value(name: str, render=None):
    def fn(ad: ClassAd, now: float):
        try:
            v = ad.eval(name)
        except KeyError:
            return None
        if v.__class__.__name__ == "Value":
            return None
        return render(v) if render else v
    return fn


def _number(render):
    return lambda v: render(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


_UNIVERSES = {1: "standard", 5: "vanilla", 7: "scheduler", 8: "MPI", 9: "grid", 10: "java", 11: "parallel",
              12: "local", 13: "vm", 14: "docker", 15: "container"}

#: PRINTAS functions htc knows: name -> (ad, now) -> value, or None when missing
PRINTAS = {
    "JOB_ID": lambda ad, now: af.job_id_text(ad),
    "JOB_STATUS": _status_letter,
    "JOB_STATUS_RAW": _value("JobStatus", lambda v: {1: "Idle", 2: "Running", 3: "Removed", 4: "Completed",
                                                     5: "Held", 6: "Transferring Output",
                                                     7: "Suspended"}.get(v, "Unk")),
    "JOB_UNIVERSE": _value("JobUniverse", lambda v: _UNIVERSES.get(v, "Unknown")),
    "QDATE": _value("QDate", _number(af.format_date)),
    "DATE": _value("QDate", _number(af.format_date)),
    "CPU_TIME": lambda ad, now: af.format_time(views.run_time(ad, now, current_run=True)),
    "RUNTIME": _value("RemoteWallClockTime", _number(af.format_time)),
    "OWNER": _value("Owner"),
    "DAG_OWNER": _value("Owner"),
    "BATCH_NAME": _value("JobBatchName"),
    "MEMORY_USAGE": lambda ad, now: views.size_mb(ad),
    "JOB_DESCRIPTION": lambda ad, now: views.command_line(ad),
    "JOB_COMMAND": lambda ad, now: views.command_line(ad),
    "REMOTE_HOST": _value("RemoteHost"),
    "READABLE_BYTES": None,  # filled per column: the column's own expression, as metric units
    "READABLE_KB": None,
    "READABLE_MB": None,
}
_SCALE = {"READABLE_BYTES": 1, "READABLE_KB": 1024, "READABLE_MB": 1024 * 1024}


@dataclass
class Layout:
    """A parsed print-format file."""

    mask: af.PrintMask
    where: str = ""
    sort: list[tuple[ExprTree, bool]] = field(default_factory=list)
    notitle: bool = False
    noheader: bool = False
    summary: bool = False
    from_type: str = ""  # SELECT FROM <AdType> (condor_status's print-format files), upper case

    def render(self, ads: Iterable[ClassAd], now: float, title: str | None = None) -> str:
        """The title line (``-- Schedd: ...``), the headings and a row per ad, sorted by GROUP BY."""
        ads = list(ads)
        for key, descending in reversed(self.sort):
            ads.sort(key=functools.cmp_to_key(lambda a, b, k=key: _compare(k.eval(a), k.eval(b))),
                     reverse=descending)
        for col in self.mask.columns:
            col.now = now
        head = f"\n-- {title}\n" if title and not self.notitle else ""
        if self.noheader:
            for col in self.mask.columns:
                col.heading = None
        return head + self.mask.render(ads)


def _compare(a, b) -> int:
    def rank(v):
        if isinstance(v, bool):
            return (1, int(v))
        if isinstance(v, (int, float)):
            return (1, v)
        if isinstance(v, str):
            return (2, v.lower())
        return (3, 0)
    ra, rb = rank(a), rank(b)
    return (ra > rb) - (ra < rb)


def _tokens(line: str) -> list[tuple[str, int, int]]:
    out, pos = [], 0
    while True:
        m = _TOKEN.match(line, pos)
        if not m or not m.group(1):
            return out
        out.append((m.group(1), m.start(1), m.end(1)))
        pos = m.end()


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return af.collapse_escapes(text)


def load(path: str, ad_types: Iterable[str] = ()) -> Layout:
    """Read and parse a print-format file.

    Raises:
        UsageError: the file cannot be read or is not a print-format table htc understands.
    """
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise UsageError(f"invalid select file {path}: {exc.strerror}") from None
    return parse(text, path, ad_types)


def parse(text: str, name: str = "<print-format>", ad_types: Iterable[str] = ()) -> Layout:
    """Parse the text of a print-format table (see the module's docstring); ``ad_types``: the
    names ``SELECT FROM`` may give (condor_status's ad types; none for htc q)."""
    ad_types = {t.upper() for t in ad_types}
    mask = af.PrintMask(col_prefix=" ", row_suffix="\n")
    layout = Layout(mask)
    label_sep: str | None = None
    section = None
    wheres: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        toks = _tokens(line)
        first = toks[0][0]
        where = f"{name}, line {number}"
        if first == "SELECT":
            section = "select"
            i = 1
            while i < len(toks):
                word = toks[i][0]
                if word == "FROM" and ad_types and i + 1 < len(toks) and toks[i + 1][0].upper() in ad_types:
                    layout.from_type = toks[i + 1][0].upper()
                    i += 2
                    continue
                if word == "FROM" and ad_types:
                    raise UsageError(f"{where}: SELECT FROM takes one of {', '.join(sorted(ad_types))}")
                if word in ("FROM", "UNIQUE"):
                    raise UsageError(f"{where}: SELECT {word} (autocluster queries) is not supported by htc q")
                if word == "BARE":
                    layout.notitle = layout.noheader = True
                elif word == "NOTITLE":
                    layout.notitle = True
                elif word == "NOHEADER":
                    layout.noheader = True
                elif word == "NOSUMMARY":
                    layout.summary = False  # the default already; a SUMMARY section turns it on
                elif word == "LABEL":
                    label_sep = " = "
                    if i + 2 < len(toks) + 1 and i + 1 < len(toks) and toks[i + 1][0] == "SEPARATOR":
                        label_sep = _unquote(toks[i + 2][0])
                        i += 2
                elif word in ("RECORDPREFIX", "RECORDSUFFIX", "FIELDPREFIX", "FIELDSUFFIX") and i + 1 < len(toks):
                    value = _unquote(toks[i + 1][0])
                    setattr(mask, {"RECORDPREFIX": "row_prefix", "RECORDSUFFIX": "row_suffix",
                                   "FIELDPREFIX": "col_prefix", "FIELDSUFFIX": "col_suffix"}[word], value)
                    i += 1
                else:
                    raise UsageError(f"{where}: unknown SELECT option {word!r}")
                i += 1
            continue
        if first in ("WHERE", "AND"):
            section = "where"
            wheres.append(line[toks[0][2]:].strip())
            continue
        if first == "GROUP" and len(toks) > 1 and toks[1][0] == "BY":
            section = "group"
            rest = line[toks[1][2]:].strip()
            if rest:
                layout.sort.append(_sort_key(rest, where))
            continue
        if first == "SUMMARY":
            section = "summary"
            layout.summary = len(toks) < 2 or toks[1][0] != "NONE"
            continue
        if section == "select":
            mask.columns.append(_column(line, toks, label_sep, where))
        elif section == "group":
            layout.sort.append(_sort_key(line, where))
        elif section == "where":
            wheres.append(line)
        else:
            raise UsageError(f"{where}: a print-format file starts with SELECT")
    for text_ in wheres:
        try:
            ExprTree(text_)
        except ClassAdParseError as exc:
            raise UsageError(f"{name}: WHERE {text_!r} is not a ClassAd expression: {exc}") from None
    layout.where = " && ".join(f"({w})" for w in wheres)
    if label_sep is not None:
        layout.noheader = True
    return layout


def _sort_key(text: str, where: str) -> tuple[ExprTree, bool]:
    descending = False
    words = text.rsplit(None, 1)
    if len(words) == 2 and words[1] in ("ASCENDING", "DESCENDING"):
        text, descending = words[0], words[1] == "DESCENDING"
    try:
        return ExprTree(text), descending
    except ClassAdParseError as exc:
        raise UsageError(f"{where}: GROUP BY {text!r} is not a ClassAd expression: {exc}") from None


def _column(line: str, toks, label_sep: str | None, where: str) -> af.Column:
    end = next((start for word, start, _ in toks if word in _COLUMN_KEYWORDS), len(line))
    expr = line[:end].strip()
    try:
        ExprTree(expr)
    except ClassAdParseError as exc:
        raise UsageError(f"{where}: {expr!r} is not a ClassAd expression: {exc}") from None
    heading, width, auto, left, right, truncate = expr, None, False, False, False, False
    no_prefix = no_suffix = False
    printf, printas, alt = None, None, ""
    words = [t[0] for t in toks if t[1] >= end]
    i = 0
    while i < len(words):
        word = words[i]
        arg = words[i + 1] if i + 1 < len(words) else None
        if word in ("AS", "PRINTF", "PRINTAS", "FORMATAS", "OR", "WIDTH") and arg is None:
            raise UsageError(f"{where}: {word} needs a value")
        if word == "AS":
            heading, i = _unquote(arg), i + 1
        elif word == "WIDTH":
            if arg == "AUTO":
                auto = True
            else:
                try:
                    width = int(arg)
                except ValueError:
                    raise UsageError(f"{where}: WIDTH takes a number or AUTO, not {arg!r}") from None
            i += 1
        elif word == "PRINTF":
            printf, i = _unquote(arg), i + 1
        elif word in ("PRINTAS", "FORMATAS"):
            if arg not in PRINTAS:
                raise UsageError(f"{where}: {word} {arg} is not a function htc q knows; it knows "
                                 f"{', '.join(sorted(PRINTAS))}")
            printas, i = arg, i + 1
        elif word == "OR":
            alt, i = _unquote(arg), i + 1
        elif word == "LEFT":
            left = True
        elif word == "RIGHT":
            right = True
        elif word == "TRUNCATE":
            truncate = True
        elif word == "NOPREFIX":
            no_prefix = True
        elif word == "NOSUFFIX":
            no_suffix = True
        elif word == "FIT":
            auto = True
        i += 1
    fmt = printf or "%v"
    if label_sep is not None:
        fmt = f"{heading}{label_sep}{fmt}"
    col = af.Column(expr, fmt, alt=alt, no_prefix=no_prefix, no_suffix=no_suffix, truncate=truncate)
    if label_sep is None:
        col.heading = heading
        if width is None:
            col.width, col.left, col.autowidth = len(heading), True, True
        else:
            col.width, col.left = abs(width), width < 0 or left
        if auto:
            col.autowidth = True
        if right:
            col.left = False
        if left:
            col.left = True
    if printas:
        fn = PRINTAS[printas]
        if fn is None:
            scale = _SCALE[printas]
            tree = ExprTree(expr)

            def fn(ad, now, tree=tree, scale=scale):
                v = tree.eval(ad)
                return views.readable_bytes(v * scale) if isinstance(v, (int, float)) \
                    and not isinstance(v, bool) else None
        col.render_fn = lambda ad, fn=fn, col=col: fn(ad, getattr(col, "now", 0.0))
        if not printf:
            col._conv = None
    return col

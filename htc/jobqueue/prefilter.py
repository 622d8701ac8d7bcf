"""SQL prefilters for ``Attr == "text"`` on attributes that procs set themselves.

Theory of operation
-------------------
A constraint such as ``Args == "--seed 17"`` names an attribute every proc overrides, so
no per-cluster decision helps: each proc's value lives in its row's JSON (``jobs.ad``,
``{"Args":"\\"--seed 17\\"",...}``). Fetching and evaluating 100,000 rows in Python is the
slow part of such a query, so :func:`drop_condition` writes SQL that is true for rows whose
stored text *proves* the conjunct false; those rows are never fetched. The rest are
evaluated exactly, so the prefilter may keep too much but must never drop a matching job.

A row of a cluster whose spelling of the attribute is ``K`` is dropped only when all hold:

1. The first occurrence of the bytes ``"K":"\\"`` is the key ``K`` with a value that starts
   with a quote. Inside a JSON string every ``"`` is escaped, so the unescaped ``"`` after
   ``K`` closes a string followed by ``:`` -- a key; that key is exactly ``K`` unless the
   ``"`` before ``K`` is an escaped one inside a key ending in ``"K``. Keys are the names
   the cluster's procs override (``ClusterAd.proc_attrs``), so the prefilter is used only
   when none of them contains a quote.
2. The value is a plain string literal ``"X"``: after the marker the first backslash
   starts ``\\""`` -- the literal's closing quote, then the end of the JSON string. So the
   text is ``"X"`` with X free of backslashes (escapes) and, for any text that parses,
   free of quotes; its value is exactly X (``node_of`` builds ``Literal(X)``). This is
   exact for every stored text that is a valid expression, which is all of them unless the
   queue was opened with ``validate=False``.
3. X is not L: the bytes after the marker do not start with L + ``\\""``. For ``==`` this is
   LIKE, which ignores the case of ASCII letters only, exactly as ClassAd string ``==``
   does; for ``=?=`` it is a byte comparison.

The job's ``K`` is then a string other than L, so the conjunct, and with it the whole
constraint, is not true. The proc scope reads the same text: a proc's own value under the
cluster's spelling ``K`` wins over any other spelling (:class:`~htc.jobqueue.expr.ProcAttributes`).
Rows without ``K``, or with any other kind of value, are kept and evaluated.

The bytes after the marker are computed once per row in a subquery
(:meth:`RowFilter.keep_sql`); sqlite spends about a microsecond per row on the test, where
building and evaluating the job's ad in Python cost some thirty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from htc.classad.ast import AttrRef, Binary, Literal, Node, Paren, Select
from htc.jobqueue.ads import HOT_ATTRS, ClusterAd

# Attribute names whose JSON and LIKE spelling is the name itself (``_`` is escaped).
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# LIKE patterns past this many bytes raise "pattern too complex" in sqlite.
_MAX_PATTERN = 40_000


@dataclass(frozen=True)
class LiteralTest:
    """A conjunct ``Attr == "value"`` (``exact``: ``Attr =?= "value"``) on a non-hot attribute."""

    lname: str
    value: str
    exact: bool


def _unwrap(node: Node) -> Node:
    while isinstance(node, Paren):
        node = node.inner
    return node


def _attribute(node: Node) -> str | None:
    node = _unwrap(node)
    if isinstance(node, AttrRef) and node.lname not in ("my", "target", "parent"):
        return node.lname
    if (isinstance(node, Select) and isinstance(node.base, AttrRef)
            and node.base.lname == "my"):
        return node.lname
    return None


def literal_test(node: Node) -> LiteralTest | None:
    """The :class:`LiteralTest` a conjunct is, or None.

    Recognises ``Attr == "s"``, ``MY.Attr == "s"``, ``=?=`` and either order, for
    attributes that are neither hot columns nor ``CurrentTime``.
    """
    node = _unwrap(node)
    if not isinstance(node, Binary) or node.op not in ("==", "is"):
        return None
    for side, other in ((node.left, node.right), (node.right, node.left)):
        name = _attribute(side)
        literal = _unwrap(other)
        if (name is not None and isinstance(literal, Literal) and literal.value.__class__ is str
                and name not in HOT_ATTRS and name != "currenttime"):
            return LiteralTest(name, literal.value, node.op == "is")
    return None


def _like_escape(text: str) -> str:
    return text.replace("^", "^^").replace("%", "^%").replace("_", "^_")


@dataclass(frozen=True)
class RowFilter:
    """SQL over the ``jobs`` rows of some clusters: ``columns`` computed once per row (as
    ``t0``, ``t1``, ...) and a ``drop`` predicate over them, true for rows to leave out."""

    columns: tuple[str, ...]
    drop: str
    params: tuple

    def keep_sql(self, cluster_ids: list[int], where: str = "1",
                 params: tuple = ()) -> tuple[str, tuple]:
        """A condition on ``jobs`` rows: the rows of ``cluster_ids`` that satisfy ``where``
        (SQL with ``params``) and are not dropped."""
        ids = ",".join(map(str, cluster_ids))
        cols = ", ".join(f"{c} AS t{i}" for i, c in enumerate(self.columns))
        # LIMIT -1 keeps sqlite from flattening the subquery, so that each column is
        # computed once per row rather than once per use in the predicate.
        return (f"(cluster_id, proc_id) IN (SELECT cluster_id, proc_id FROM (SELECT cluster_id, "
                f"proc_id, {cols} FROM jobs WHERE cluster_id IN ({ids}) AND {where} LIMIT -1) "
                f"WHERE NOT ({self.drop}))", params + self.params)


def _drop_one(key: str, test: LiteralTest, column: str) -> tuple[str, str, tuple] | None:
    """(column SQL, drop predicate over it, params) for one test and spelling ``key``."""
    try:
        value = test.value.encode("utf-8")
    except UnicodeEncodeError:
        return None  # a lone surrogate cannot be bound as sqlite text
    if b"\x00" in value:
        return None
    marker = f'"{key}":"\\"'.encode()  # "K":"\"  -- the key, then a value starting with a quote
    # The bytes after the marker: the literal's characters, then its closing \"" if plain.
    # NULL when the row has no such value (nullif), which keeps the row.
    tail = (f"substr(CAST(ad AS BLOB), nullif(instr(CAST(ad AS BLOB), X'{marker.hex()}'), 0) "
            f"+ {len(marker)})")
    plain = f"substr({column}, instr({column}, X'5c'), 3) = X'5c2222'"
    if test.exact:
        needle = value + b'\\""'
        equal, params = f"substr({column}, 1, {len(needle)}) = ?", (needle,)
    else:
        pattern = _like_escape(test.value + '\\""') + "%"
        if len(pattern.encode()) > _MAX_PATTERN:
            return None
        equal, params = f"CAST({column} AS TEXT) LIKE ? ESCAPE '^'", (pattern,)
    return tail, f"coalesce({plain} AND NOT {equal}, 0)", params


def drop_condition(cluster: ClusterAd, tests: tuple[LiteralTest, ...]) -> RowFilter | None:
    """The rows of ``cluster`` whose stored texts prove one of ``tests`` false.

    Args:
        cluster: the cluster the rows belong to (its spellings and overridden names).
        tests: conjuncts of the constraint (each a necessary condition of it).

    Returns:
        A :class:`RowFilter`, or None when no test can be checked from this cluster's rows
        (the attribute is not one procs override, or the names rule SQL out). Equal
        filters may be shared by several clusters.
    """
    if any('"' in name for name in cluster.proc_attrs):
        return None
    columns: list[str] = []
    drops: list[str] = []
    params: list = []
    for test in tests:
        key = cluster.canon.get(test.lname)
        if test.lname not in cluster.proc_attrs or key is None or not _PLAIN_NAME.match(key):
            continue
        found = _drop_one(key, test, f"t{len(columns)}")
        if found is not None:
            columns.append(found[0])
            drops.append(found[1])
            params.extend(found[2])
    if not drops:
        return None
    return RowFilter(tuple(columns), " OR ".join(drops), tuple(params))

"""Turning a ``-constraint`` into an indexed SQL prefilter plus a ClassAd check.

Theory of operation
-------------------
The hot attributes of a job (JobStatus, Owner, ClusterId, ProcId, JobPrio, QDate,
EnteredCurrentStatus, AutoClusterId) are sqlite columns with indexes. A constraint is split
at its top-level ``&&``; each conjunct of the form ``<hot attribute> <op> <literal>`` (either
side, ``MY.`` allowed) becomes a SQL condition, and the rest stays for ClassAd evaluation.

Pushing a conjunct down is only done when SQL gives exactly the ClassAd answer:

* ``==`` / ``!=`` on strings compare case-insensitively in ClassAds (``COLLATE NOCASE``);
  ``=?=`` / ``=!=`` compare exactly, and ``=!=`` is true for an undefined Owner (``IS NOT``).
* A comparison with an undefined attribute is undefined, hence not true, and SQL's NULL
  comparisons are not true either; ``=?=`` / ``=!=`` use ``IS`` / ``IS NOT`` to match.
* A literal of the wrong type (``JobStatus == "1"``) is an ERROR in ClassAds but would be
  coerced by sqlite, so such conjuncts are never pushed down.

A conjunct is a necessary condition of the whole ``&&``: if it is not true, the whole is not
true. So SQL can drop jobs safely. For the remaining candidates the pushed conjuncts are true,
and ``true && rest`` selects exactly when ``rest`` does, so only the remaining conjuncts are
evaluated -- and when none remain, SQL's answer is final.

The remaining conjuncts are decided per cluster where possible (:func:`narrow`). Jobs of
clusters whose procs override an attribute the expression reads are checked one by one,
each against a :func:`~htc.jobqueue.expr.proc_scope` that parses only what the expression
reads; before that, conjuncts ``Attr == "text"`` on such attributes drop, in SQL, the rows
whose stored text proves them false (:mod:`htc.jobqueue.prefilter`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from htc.classad.ast import AttrRef, Binary, Literal, Node, Paren, Select
from htc.classad.printing import unparse
from htc.classad.scope import compile_evaluator
from htc.jobqueue.ads import HOT_ATTRS, ClusterAd, JobAd
from htc.jobqueue.expr import (GroupedEvaluator, is_true, job_classad, now_literal, parse,
                               proc_scope, value_is_true)
from htc.jobqueue.prefilter import LiteralTest, RowFilter, drop_condition, literal_test

# Position of each hot attribute in a jobs row (the column order of every SELECT).
HOT_POSITION = {low: i for i, low in enumerate(HOT_ATTRS)}

# hot attribute (lower case) -> (column, kind)
COLUMNS = {
    "clusterid": ("cluster_id", "int"),
    "procid": ("proc_id", "int"),
    "jobstatus": ("status", "int"),
    "jobprio": ("prio", "int"),
    "owner": ("owner", "str"),
    "qdate": ("qdate", "int"),
    "enteredcurrentstatus": ("entered_status", "int"),
    "autoclusterid": ("autocluster_id", "int"),
}
_SQL_OPS = {"==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
            "is": "IS", "isnt": "IS NOT"}
_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!=",
           "is": "is", "isnt": "isnt"}


# Columns with an index of their own (or leading one): conditions a cheap count can use.
INDEXED = frozenset({"cluster_id", "owner", "status", "autocluster_id"})


@dataclass(frozen=True)
class Plan:
    """How to run one constraint: SQL conditions, and whether candidates need a ClassAd check."""

    clauses: tuple[tuple[str, str, tuple], ...]  # (column, SQL, params)
    #: the conjuncts SQL could not check, as one expression text (None: SQL decides alone)
    residual_text: str | None = None
    #: residual conjuncts ``Attr == "text"`` a per-proc prefilter can use
    tests: tuple[LiteralTest, ...] = ()

    @property
    def residual(self) -> bool:
        return self.residual_text is not None

    @property
    def sql_only(self) -> bool:
        return not self.residual

    @property
    def where(self) -> str:
        return " AND ".join(c[1] for c in self.clauses) if self.clauses else "1"

    @property
    def params(self) -> tuple:
        return tuple(p for c in self.clauses for p in c[2])

    def indexed(self) -> tuple[str, tuple] | None:
        """The part of the WHERE an index can answer alone (for a cheap count), if any."""
        parts = [c for c in self.clauses if c[0] in INDEXED]
        if not parts:
            return None
        return " AND ".join(c[1] for c in parts), tuple(p for c in parts for p in c[2])


def _unwrap(node: Node) -> Node:
    while isinstance(node, Paren):
        node = node.inner
    return node


def _conjuncts(node: Node) -> list[Node]:
    """The operands of the top-level ``&&`` chain, left to right (a loop: chains may be long)."""
    out: list[Node] = []
    todo = [node]
    while todo:
        node = _unwrap(todo.pop())
        if isinstance(node, Binary) and node.op == "&&":
            todo.extend((node.right, node.left))
        else:
            out.append(node)
    return out


def _hot_name(node: Node) -> str | None:
    node = _unwrap(node)
    if isinstance(node, AttrRef) and node.lname in COLUMNS:
        return node.lname
    if (isinstance(node, Select) and isinstance(node.base, AttrRef)
            and node.base.lname == "my" and node.lname in COLUMNS):
        return node.lname
    return None


def _literal(node: Node) -> tuple[bool, object]:
    node = _unwrap(node)
    if isinstance(node, Literal):
        return True, node.value
    return False, None


def _pushdown(node: Node) -> tuple[str, tuple] | None:
    """SQL for one conjunct, or None when it must stay a ClassAd check."""
    if not isinstance(node, Binary) or node.op not in _SQL_OPS:
        return None
    op = node.op
    name = _hot_name(node.left)
    ok, value = _literal(node.right)
    if name is None or not ok:
        name = _hot_name(node.right)
        ok, value = _literal(node.left)
        op = _MIRROR[op]
        if name is None or not ok:
            return None
    column, kind = COLUMNS[name]
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if op in ("is", "isnt") and isinstance(value, float):
            return None  # 1 =?= 1.0 is false in ClassAds (the types differ), true in SQL
    else:
        if not isinstance(value, str):
            return None
        if op in ("<", "<=", ">", ">="):
            return None  # string ordering rules differ; let ClassAds decide
    # The owner column collates NOCASE (ClassAd ==); =?= and =!= compare exactly.
    exact = " COLLATE BINARY" if kind == "str" else ""
    if op == "isnt":
        return f"{column} IS NOT ?{exact}", (value,)
    if op == "is":
        return f"{column} IS ?{exact}", (value,)
    return f"{column} {_SQL_OPS[op]} ?", (value,)


def plan(constraint: str | None) -> Plan:
    """Split a constraint into SQL conditions and a residual ClassAd check.

    A plan depends on the constraint's text alone and is immutable, so the plans of recent
    constraints are kept (the schedd asks ``JobStatus == 1`` and the like for every call it
    starts or ends: parsing it again each time cost more than the query).

    Args:
        constraint: ClassAd expression text, or None for "every job".

    Returns:
        The plan; ``where`` is ``"1"`` when nothing could be pushed down.

    Raises:
        UsageError: the constraint does not parse.
    """
    if constraint is None or not constraint.strip():
        return _EVERY_JOB
    return _plan(constraint)


@lru_cache(maxsize=256)
def _plan(constraint: str) -> Plan:
    node = parse(constraint).node
    clauses: list[tuple[str, str, tuple]] = []
    rest: list[Node] = []
    for conjunct in _conjuncts(node):
        sql = _pushdown(_unwrap(conjunct))
        if sql is None:
            literal, value = _literal(conjunct)
            if not (literal and value is True):
                rest.append(conjunct)
            continue
        clauses.append((sql[0].split()[0], sql[0], sql[1]))
    if not rest:
        return Plan(tuple(clauses))
    tests = tuple(t for t in map(literal_test, rest) if t is not None)
    if not clauses:
        return Plan((), constraint, tests)
    # Candidates already satisfy the pushed-down conjuncts, so "true && rest" -- the rest
    # alone -- decides; it usually reads fewer per-proc values than the whole constraint.
    return Plan(tuple(clauses), " && ".join(f"({unparse(n)})" for n in rest), tests)


_EVERY_JOB = Plan(())


# Past this many distinct combinations of hot values, filtering fetched rows is cheaper than
# spelling the accepted combinations out in SQL.
MAX_GROUP_TERMS = 300


def narrow(conn, where: str, params: tuple, clusters: dict[int, ClusterAd],
           evaluator: GroupedEvaluator,
           tests: tuple[LiteralTest, ...] = ()) -> tuple[str, tuple, set[int]] | None:
    """Decide as much of the residual as possible before fetching any row.

    Per cluster the residual expression is in one of three modes. It reads no per-proc
    value: decide it once for the cluster. It reads only hot columns: group the candidate
    rows by those columns in SQL and decide each combination once. It reads attributes procs
    override: those clusters' rows are fetched and checked one by one, except the rows whose
    stored texts prove one of ``tests`` false (:func:`~htc.jobqueue.prefilter.drop_condition`).

    Returns:
        ``(where, params, clusters_to_check)`` selecting only rows that may match, or None
        when no row can match.
    """
    accept: list[int] = []
    check: set[int] = set()
    hot: dict[int, tuple[str, ...]] = {}
    for cid, cluster in clusters.items():
        varying = evaluator._varying_for(cluster)
        if not varying:
            if cluster_verdict(cluster, evaluator):
                accept.append(cid)
        elif all(is_hot for _, is_hot in varying):
            hot[cid] = tuple(name for name, _ in varying)
        else:
            check.add(cid)
    terms: list[str] = []
    term_params: list = []
    if hot:
        names = sorted({n for group in hot.values() for n in group}, key=HOT_POSITION.__getitem__)
        cols = [COLUMNS[n][0] for n in names]
        groups = conn.execute(
            f"SELECT cluster_id, {', '.join(cols)} FROM jobs WHERE {where} AND cluster_id IN "
            f"({','.join(map(str, hot))}) GROUP BY cluster_id, {', '.join(cols)}", params).fetchall()
        if len(groups) > MAX_GROUP_TERMS:
            check.update(hot)
        else:
            for group in groups:
                cluster = clusters[group[0]]
                values = [cluster.cluster_id, 0, 1, 0, cluster.owner, cluster.qdate, cluster.qdate, None]
                for name, value in zip(names, group[1:]):
                    values[HOT_POSITION[name]] = value
                job = JobAd(cluster, None, tuple(values))
                if is_true(evaluator.expr.eval(job_classad(job, evaluator.now))):
                    terms.append("(cluster_id = ? AND " + " AND ".join(f"{c} IS ?" for c in cols) + ")")
                    term_params.extend(group)
    whole = list(accept)
    filtered: dict[RowFilter, list[int]] = {}
    for cid in sorted(check):
        drop = drop_condition(clusters[cid], tests) if tests else None
        if drop is None:
            whole.append(cid)
        else:
            filtered.setdefault(drop, []).append(cid)
    if whole:
        terms.append(f"cluster_id IN ({','.join(map(str, sorted(whole)))})")
    for drop, ids in filtered.items():
        sql, drop_params = drop.keep_sql(ids, where, params)
        terms.append(sql)
        term_params.extend(drop_params)
    if not terms:
        return None
    return f"{where} AND ({' OR '.join(terms)})", params + tuple(term_params), check


def select_rows(rows: list[tuple], clusters: dict[int, ClusterAd], evaluator: GroupedEvaluator,
                limit: int | None, check: set[int] | None = None) -> list[JobAd]:
    """The rows whose job satisfies the evaluator's expression, as JobAd views.

    Rows of clusters not in ``check`` (when given) were already decided by :func:`narrow`.
    For the others the per-cluster mode applies: decided once (no per-proc value read),
    once per combination of hot columns (straight from the row tuple), or per job against a
    :func:`~htc.jobqueue.expr.proc_scope` (the expression compiled once).
    """
    out: list[JobAd] = []
    modes: dict[int, tuple] = {}
    memo: dict[tuple, bool] = {}
    run = None
    now = now_literal(evaluator.now)
    for row in rows:
        cid = row[0]
        mode = modes.get(cid)
        if mode is None:
            cluster = clusters[cid]
            varying = evaluator._varying_for(cluster)
            if (check is not None and cid not in check) or not varying:
                mode = ("all", cluster)
            elif all(hot for _, hot in varying):
                mode = ("hot", cluster, tuple(HOT_POSITION[name] for name, _ in varying))
            else:
                mode = ("row", cluster)
                if run is None:
                    run = compile_evaluator(evaluator.expr)
            modes[cid] = mode
        cluster = mode[1]
        if mode[0] == "all":
            ok = True
        elif mode[0] == "hot":
            key = (cid,) + tuple(row[i] for i in mode[2])
            ok = memo.get(key)
            if ok is None:
                ok = memo[key] = is_true(evaluator.expr.eval(job_classad(JobAd(cluster, None, row), evaluator.now)))
        else:
            ok = value_is_true(run(proc_scope(cluster, row, now)))
        if ok:
            out.append(JobAd(cluster, row[8], row))
            if limit is not None and len(out) >= limit:
                break
    return out


def cluster_verdict(cluster: ClusterAd, evaluator: GroupedEvaluator) -> bool | None:
    """True/False when the expression's value is the same for every proc of the cluster
    (it reads no per-proc value); None when it must be decided per proc."""
    if evaluator._varying_for(cluster):
        return None
    representative = JobAd(cluster, None, (cluster.cluster_id, 0, 1, 0, cluster.owner,
                                           cluster.qdate, cluster.qdate, None))
    return is_true(evaluator.expr.eval(job_classad(representative, evaluator.now)))

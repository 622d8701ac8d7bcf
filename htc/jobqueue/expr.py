"""ClassAd evaluation over queue jobs: the one place the queue meets :mod:`htc.classad`.

Theory of operation
-------------------
A queue holds a few clusters of many procs, and most of a proc's ad is its cluster's ad. So
an expression -- a ``-constraint``, a ``PeriodicHold``, the PRIO knob -- usually has the same
value for many procs of a cluster. :class:`GroupedEvaluator` exploits that: per cluster it
computes which attributes the expression can reach (its references, followed transitively
through the cluster's own expressions), keeps those that vary from proc to proc (attributes
some proc overrides, and the per-proc hot columns such as JobStatus), and evaluates the
expression once per distinct combination of those values. A constraint that reads only
cluster attributes is evaluated once per cluster, however many procs it has; one that reads
JobStatus a handful of times.

Each cluster's ad is parsed into a :class:`~htc.classad.ad.ClassAd` once and cached on the
cluster (``ClusterAd.cache``); a proc's ad is a cheap copy of it with the proc's own
attributes and hot columns set on top.

``now`` is injected as ``CurrentTime`` so that policies written with ``CurrentTime`` follow a
fake clock in tests (``time()`` always reads the real clock).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

from htc.classad import ClassAd, ClassAdParseError, Error, ExprTree, Undefined
from htc.classad.ast import Literal
from htc.errors import UsageError
from htc.jobqueue.ads import HOT_ATTRS, ClusterAd, JobAd

_MISSING = object()

# Hot attributes whose value differs between procs of one cluster.
PER_PROC_HOT = frozenset({"procid", "jobstatus", "jobprio", "enteredcurrentstatus", "autoclusterid"})


@lru_cache(maxsize=8192)
def parse(text: str) -> ExprTree:
    """Parse one ClassAd expression (cached by text).

    Raises:
        UsageError: the text is not a well-formed expression; the message quotes it.
    """
    try:
        return ExprTree(text)
    except ClassAdParseError as exc:
        raise UsageError(f"{text!r} is not a valid ClassAd expression: {exc}") from None


def check_expression(attr: str, text: str) -> None:
    """Refuse an attribute value that does not parse, naming the attribute.

    Raises:
        UsageError: ``text`` is not a ClassAd expression.
    """
    try:
        parse(text)
    except UsageError as exc:
        raise UsageError(f"attribute {attr}: {exc}") from None


def cluster_classad(cluster: ClusterAd) -> ClassAd:
    """The cluster's attributes as a parsed ClassAd (built once per cluster, then cached).

    The template also holds every hot attribute's name, so that a proc's copy only swaps
    values in (see :func:`job_classad`).
    """
    ad = cluster.cache.get("classad")
    if ad is None:
        ad = ClassAd()
        for name, text in cluster.attrs.items():
            ad[name] = parse(text)
        for name in HOT_ATTRS.values():
            ad[name] = Undefined
        cluster.cache["classad"] = ad
    return ad


@lru_cache(maxsize=65536)
def _literal(value: object) -> Literal:
    # Literal nodes are immutable and carry their compiled form: share them between ads.
    return Literal(value)


_PLAIN_STRING = re.compile(r'^"[^"\\]*"$')
_PLAIN_INT = re.compile(r"^-?[0-9]{1,18}$")


def node_of(text: str):
    """The syntax tree of an expression text; plain literals skip the parser.

    Per-proc values (``Args``, ``Out``, ...) are mostly unique plain strings: parsing each
    through the full parser would dominate per-proc evaluation.
    """
    if _PLAIN_STRING.match(text):
        return Literal(text[1:-1])
    if _PLAIN_INT.match(text):
        return _literal(int(text))
    return parse(text)._node


def job_classad(job: JobAd, now: float | None = None) -> ClassAd:
    """A ClassAd of the whole job (cluster attributes, its own attributes, hot columns).

    This is the inner loop of every per-proc evaluation, so it fills the copy's node table
    directly (``_exprs``/``_names`` of :class:`htc.classad.ad.ClassAd`) with shared, cached
    nodes instead of converting values through ``__setitem__``.
    """
    ad = cluster_classad(job.cluster).copy()
    exprs = ad._exprs
    hot = job._hot
    for i, low in enumerate(HOT_ATTRS):
        value = hot[i]
        if value is not None:
            exprs[low] = _literal(value)
        else:
            del exprs[low]
            del ad._names[low]
    own = job.own
    if own:
        names = ad._names
        for name, text in own.items():
            low = name.lower()
            exprs[low] = node_of(text)
            if low not in names:
                names[low] = name
    if now is not None:
        ad["CurrentTime"] = int(now)
    return ad


def references(expr: ExprTree) -> set[str]:
    """Lower-case names of the (non-TARGET) attributes an expression reads."""
    return {r for r in expr.attributes() if not r.startswith("target.")}


def reachable(text: str, cluster: ClusterAd) -> frozenset[str]:
    """Lower-case names an expression can read, followed through the cluster's expressions.

    Attributes that procs override are followed only as the cluster defines them; the
    evaluator follows each proc's own texts separately.
    """
    key = ("reach", text)
    found = cluster.cache.get(key)
    if found is not None:
        return found
    seen: set[str] = set()
    todo = list(references(parse(text)))
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        canon = cluster.canon.get(name)
        if canon is not None and canon in cluster.attrs:
            todo.extend(references(parse(cluster.attrs[canon])))
    result = frozenset(seen)
    cluster.cache[key] = result
    return result


def is_true(value: object) -> bool:
    """HTCondor's EvalBool: true for ``true`` and non-zero numbers, false for anything else."""
    if value is True:
        return True
    if value is False or value is Undefined or value is Error or value is None:
        return False
    if isinstance(value, (int, float)):
        return value != 0
    return False


class GroupedEvaluator:
    """Evaluates one expression over many jobs, once per cluster and distinct varying values."""

    def __init__(self, text: str, now: float | None = None):
        """Prepare to evaluate ``text``.

        Raises:
            UsageError: ``text`` does not parse.
        """
        self.text = text
        self.expr = parse(text)
        self.now = now
        self._memo: dict[tuple, object] = {}
        self._varying: dict[int, tuple[tuple[str, bool], ...]] = {}
        #: how many real evaluations happened (the rest were answered from the memo)
        self.evaluations = 0

    def _varying_for(self, cluster: ClusterAd) -> tuple[tuple[str, bool], ...]:
        """(lower-case name, is_hot) of the reachable attributes that can differ between procs."""
        found = self._varying.get(cluster.cluster_id)
        if found is None:
            found = tuple(
                (name, name in PER_PROC_HOT)
                for name in sorted(reachable(self.text, cluster))
                if name in PER_PROC_HOT or name in cluster.proc_attrs
            )
            self._varying[cluster.cluster_id] = found
        return found

    def _key(self, job: JobAd) -> tuple:
        cluster = job.cluster
        own = job.own
        values: list = [cluster.cluster_id]
        overrides: list[str] = []
        for name, hot in self._varying_for(cluster):
            if hot:
                values.append(job.hot_value(name))
            else:
                text = own.get(cluster.canon.get(name, name))
                values.append(text)
                if text is not None:
                    overrides.append(text)
        if overrides:
            # This proc's own expressions may read attributes the cluster's do not: add
            # everything they reach (through own and cluster texts) to the key.
            base = {name for name, _ in self._varying_for(cluster)}
            seen: set[str] = set()
            todo = [r for text in overrides for r in references(parse(text))]
            while todo:
                name = todo.pop()
                if name in seen:
                    continue
                seen.add(name)
                canon = cluster.canon.get(name, name)
                text = own.get(canon)
                if text is None:
                    text = cluster.attrs.get(canon)
                if text is not None:
                    todo.extend(references(parse(text)))
            for name in sorted(seen - base):
                values.append((name, job.hot_value(name) if name in HOT_ATTRS
                               else own.get(cluster.canon.get(name, name))))
        return tuple(values)

    def value(self, job: JobAd) -> object:
        """The expression's value for ``job`` (a Python value, ``Undefined`` or ``Error``)."""
        key = self._key(job)
        found = self._memo.get(key, _MISSING)
        if found is not _MISSING:
            return found
        self.evaluations += 1
        result = self.expr.eval(job_classad(job, self.now))
        self._memo[key] = result
        return result

    def select(self, jobs: Iterable[JobAd]) -> Iterable[JobAd]:
        """The jobs for which the expression is true (HTCondor's EvalBool)."""
        return (job for job in jobs if is_true(self.value(job)))


def evaluate_in(job: JobAd, text: str, now: float | None = None) -> object:
    """Evaluate one expression text in one job's ad."""
    return parse(text).eval(job_classad(job, now))

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
cluster (``ClusterAd.attrs_cache``); a proc's ad is a cheap copy of it with the proc's own
attributes and hot columns set on top (:func:`job_classad`). When an expression must be
evaluated proc by proc, :func:`proc_scope` is cheaper still: a
:class:`~htc.classad.scope.LazyAd` that finds each attribute only when the expression reads
it -- ``CurrentTime``, then the proc's own attributes (decoded from their JSON and parsed on
first use), then its hot columns, then the cluster's parsed ad.

Grouping rests on knowing which attributes an expression reads. ``eval()`` of a string and
``MY`` used as a value (``MY["Args"]``, ``size(MY)``) read attributes whose names are not
written in the expression (:func:`reads_dynamically`); such expressions are treated as
reading every attribute a proc may set.

``now`` is injected as ``CurrentTime`` so that policies written with ``CurrentTime`` follow a
fake clock in tests (``time()`` always reads the real clock).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

import msgspec

from htc.classad import ClassAd, ClassAdParseError, Error, ExprTree, Undefined
from htc.classad.ad import to_python
from htc.classad.ast import AttrRef, Call, Literal, Node, Select
from htc.classad.scope import LazyAd, LazyAttributes
from htc.errors import UsageError
from htc.jobqueue.ads import HOT_ATTRS, ClusterAd, JobAd

_MISSING = object()
_OWN_KEY = object()  # memo key part: this job's value is shared with no other job

# Hot attributes whose value differs between procs of one cluster.
PER_PROC_HOT = frozenset({"procid", "jobstatus", "jobprio", "enteredcurrentstatus", "autoclusterid"})
# Position of each hot attribute in a jobs row / JobAd._hot.
_HOT_POSITION = {low: i for i, low in enumerate(HOT_ATTRS)}
_decode_own = msgspec.json.Decoder(dict[str, str]).decode


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


#: a plain integer or real literal, as the ClassAd lexer reads one (optionally negated): valid
#: without parsing (the daemons set many, such as a run's usage, each a new text)
_PLAIN_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*|[0-9]*\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)\Z")


def check_expression(attr: str, text: str) -> None:
    """Refuse an attribute value that does not parse, naming the attribute.

    Raises:
        UsageError: ``text`` is not a ClassAd expression.
    """
    if _PLAIN_NUMBER.match(text):
        return
    try:
        parse(text)
    except UsageError as exc:
        raise UsageError(f"attribute {attr}: {exc}") from None


def cluster_classad(cluster: ClusterAd) -> ClassAd:
    """The cluster's attributes as a parsed ClassAd (built once per cluster, then cached).

    The template also holds every hot attribute's name, so that a proc's copy only swaps
    values in (see :func:`job_classad`). It depends on the cluster's attributes alone, so it
    is kept in ``attrs_cache`` (a one-job cluster whose proc gets ClaimId and the like at its
    start is not parsed again). It fills the ad's table directly, as ``ad[name] = tree`` would
    (the first spelling of a name kept, its tree replaced), without converting each value.
    """
    ad = cluster.attrs_cache.get("classad")
    if ad is None:
        ad = ClassAd()
        exprs, names = ad.table, ad.spellings
        for name, text in cluster.attrs.items():
            low = name.lower()
            if low not in names:
                names[low] = name
            # a plain string (a DAG node's name and notes: a new text per cluster) is its own
            # literal, as the parser would read it; anything else through the parser's cache
            exprs[low] = Literal(text[1:-1]) if _PLAIN_STRING.fullmatch(text) else parse(text).node
        undefined = _literal(Undefined)
        for low, name in HOT_ATTRS.items():
            if low not in names:
                names[low] = name
            exprs[low] = undefined
        cluster.attrs_cache["classad"] = ad
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
    return parse(text).node


def job_classad(job: JobAd, now: float | None = None) -> ClassAd:
    """A ClassAd of the whole job (cluster attributes, its own attributes, hot columns).

    This is the inner loop of every per-proc evaluation, so it fills the copy's attribute
    table directly (:attr:`ClassAd.table` and :attr:`ClassAd.spellings`, kept in step) with
    shared, cached nodes instead of converting values through ``__setitem__``.
    """
    ad = cluster_classad(job.cluster).copy()
    exprs = ad.table
    names = ad.spellings
    hot = job._hot
    for i, low in enumerate(HOT_ATTRS):
        value = hot[i]
        if value is not None:
            exprs[low] = _literal(value)  # the template holds every hot name: a replacement
        else:
            del exprs[low]
            del names[low]
    own = job.own
    if own:
        for name, text in own.items():
            low = name.lower()
            exprs[low] = node_of(text)
            if low not in names:
                names[low] = name
    if now is not None:
        ad["CurrentTime"] = int(now)
    return ad


class ProcAttributes(LazyAttributes):
    """One proc's attributes for a :class:`~htc.classad.scope.LazyAd`, found on demand.

    Resolves a name as :func:`job_classad` builds the ad: ``CurrentTime`` (when ``now`` is
    given), the proc's own attributes, its hot columns, the cluster's attributes. The own
    attributes are decoded from the row's JSON on first use and each is parsed only when
    read. A proc's own attributes are keyed by the cluster's spelling of each name; if a
    proc also holds another spelling of the same name, the cluster's spelling wins, as in
    :class:`~htc.jobqueue.ads.JobAd` lookups.
    """

    __slots__ = ("_cluster", "_base", "_row", "_now", "_own")

    def __init__(self, cluster: ClusterAd, row: tuple, now: Literal | None = None):
        """Describe the proc of ``row`` (a jobs row: hot columns in HOT_ATTRS order, then
        the own attributes' JSON text or None); ``now`` is the ``CurrentTime`` literal."""
        super().__init__()
        self._cluster = cluster
        self._base = cluster_classad(cluster).table
        self._row = row
        self._now = now
        self._own: dict[str, str] | None = None

    def own_text(self, lname: str) -> str | None:
        """The expression text the proc sets for ``lname`` itself, or None."""
        own = self._own
        if own is None:
            raw = self._row[8]
            own = self._own = _decode_own(raw) if raw else {}
        cluster = self._cluster
        text = own.get(cluster.canon.get(lname, lname))
        if text is None and own:
            for name, value in own.items():  # a spelling the cluster does not use (rare)
                if name.lower() == lname:
                    text = value
        return text

    def resolve(self, lname: str) -> Node | None:
        if lname == "currenttime" and self._now is not None:
            return self._now
        if lname in self._cluster.proc_attrs:
            text = self.own_text(lname)
            if text is not None:
                return node_of(text)
        i = _HOT_POSITION.get(lname)
        if i is not None:
            value = self._row[i]
            return None if value is None else _literal(value)
        return self._base.get(lname)

    def listing(self) -> Iterable[tuple[str, Node]]:
        # job_classad's order: cluster attributes, hot columns, the proc's other
        # attributes, CurrentTime.
        names = list(self._cluster.attrs)
        names += [HOT_ATTRS[low] for low, i in _HOT_POSITION.items() if self._row[i] is not None]
        raw = self._row[8]
        names += list(_decode_own(raw)) if raw else []
        if self._now is not None:
            names.append("CurrentTime")
        for name in names:
            node = self.get(name.lower())
            if node is not None:
                yield name, node


def now_literal(now: float | None) -> Literal | None:
    """The ``CurrentTime`` node for :func:`proc_scope` (None: no CurrentTime)."""
    return None if now is None else _literal(int(now))


def proc_scope(cluster: ClusterAd, row: tuple, now: Literal | None = None) -> LazyAd:
    """The ad of the proc in ``row`` as a ClassAd that reads attributes on demand.

    It has the same attributes and values as :func:`job_classad` (except that the cluster's
    spelling wins when a proc holds two spellings of one name), but costs a few
    microseconds however large the ads: use it to evaluate an expression job by job.
    ``now`` comes from :func:`now_literal`.
    """
    return LazyAd(ProcAttributes(cluster, row, now))


def value_is_true(value: object) -> bool:
    """:func:`is_true` of an internal value (one from ``evaluate_internal``), converted as
    ``ExprTree.eval`` would convert it (a relative time counts as its seconds)."""
    return value is True or is_true(to_python(value))


def reads_dynamically(expr: ExprTree) -> bool:
    """True when ``expr`` may read attributes whose names it does not spell out.

    That is ``eval()`` (of a computed string) and ``MY``, ``TARGET`` or ``PARENT`` used as a
    value (``MY["Args"]``, ``size(MY)``) rather than as ``MY.Args``. Such an expression can
    read any attribute, so :func:`references` does not bound what it depends on.
    """
    stack: list[Node] = [expr.node]
    while stack:
        node = stack.pop()
        cls = node.__class__
        if cls is Call and node.lname == "eval":
            return True
        if cls is AttrRef and node.lname in ("my", "target", "parent"):
            return True
        if (cls is Select and node.base.__class__ is AttrRef
                and node.base.lname in ("my", "target", "parent")):
            continue  # MY.x names its attribute
        stack.extend(node.children())
    return False


def references(expr: ExprTree) -> set[str]:
    """Lower-case names of the (non-TARGET) attributes an expression reads."""
    return {r for r in expr.attributes() if not r.startswith("target.")}


@lru_cache(maxsize=8192)
def _text_references(text: str) -> frozenset[str]:
    """:func:`references` of an expression text (cached by text: a DAG's one-job clusters share
    their submit file's texts, and each would walk them again)."""
    return frozenset(references(parse(text)))


def reachable(text: str, cluster: ClusterAd) -> frozenset[str]:
    """Lower-case names an expression can read, followed through the cluster's expressions.

    Attributes that procs override are followed only as the cluster defines them; the
    evaluator follows each proc's own texts separately.
    """
    key = ("reach", text)
    found = cluster.attrs_cache.get(key)
    if found is not None:
        return found
    seen: set[str] = set()
    todo = list(_text_references(text))
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        canon = cluster.canon.get(name)
        if canon is not None and canon in cluster.attrs:
            todo.extend(_text_references(cluster.attrs[canon]))
    result = frozenset(seen)
    cluster.attrs_cache[key] = result  # (names procs override are followed apart: attrs alone)
    return result


@lru_cache(maxsize=8192)
def _text_reads_dynamically(text: str) -> bool:
    return reads_dynamically(parse(text))


def reaches_dynamic_read(text: str, cluster: ClusterAd) -> bool:
    """True when ``text``, or a cluster expression it reaches, reads dynamically."""
    key = ("dynamic", text)
    found = cluster.attrs_cache.get(key)
    if found is None:
        found = _text_reads_dynamically(text) or any(
            _text_reads_dynamically(cluster.attrs[cluster.canon[name]])
            for name in reachable(text, cluster)
            if cluster.canon.get(name) in cluster.attrs)
        cluster.attrs_cache[key] = found
    return found


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
            reach = reachable(self.text, cluster)
            if reaches_dynamic_read(self.text, cluster):
                # It may read any attribute: every value a proc can hold varies.
                reach = PER_PROC_HOT | cluster.proc_attrs
            found = tuple(
                (name, name in PER_PROC_HOT)
                for name in sorted(reach)
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
            if any(_text_reads_dynamically(text) for text in overrides):
                return (cluster.cluster_id, job.proc_id, _OWN_KEY)  # shares with no other job
            todo = [r for text in overrides for r in _text_references(text)]
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
                    if _text_reads_dynamically(text):
                        return (cluster.cluster_id, job.proc_id, _OWN_KEY)
                    todo.extend(_text_references(text))
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

"""Autoclusters: idle jobs that look alike to every machine are matched once, as one request.

Why this module sits in ``htc/daemons/`` and not in a daemon's folder: two daemons share it.
The negotiator computes which job attributes matter (:func:`negotiator_significant_attributes`)
and matches :class:`ResourceRequest` objects; the schedd groups its idle jobs by those
attributes (:class:`AutoclusterTable`) and answers with the requests. The two sides must agree
on one definition of "alike", so the rule lives here, once, between them.

Theory of operation
-------------------
A pool may hold 100,000 idle jobs but only a few hundred *kinds* of job. Whether a slot
accepts a job, and how the two rank each other, depends only on the attributes the expressions
involved actually read: those are the **significant attributes**. Jobs that agree on all of
them form one **autocluster**; the schedd hands the negotiator one *resource request* per
autocluster (a representative job ad and a count), and the negotiator matches that request
up to ``count`` times.

Who reads what (HTCondor's ``compute_significant_attrs`` and the schedd's autocluster code):

1. the negotiator collects every attribute the slot ads read from a job: the external
   references of every expression in every slot ad (``START``, ``Requirements``, ``Rank``,
   ...; list-valued attributes are skipped), plus those of ``PREEMPTION_REQUIREMENTS``,
   ``PREEMPTION_RANK``, ``NEGOTIATOR_PRE_JOB_RANK``, ``NEGOTIATOR_POST_JOB_RANK`` and
   ``NEGOTIATOR_JOB_CONSTRAINT``, minus per-cycle values (``CurrentTime``, ``RemoteUserPrio``,
   ``SubmitterUserPrio``, ...): :func:`negotiator_significant_attributes`;
2. the schedd adds what each job's own ``Requirements`` and ``Rank`` read from the job itself,
   and a fixed minimum (``Requirements``, ``Rank``, ``ConcurrencyLimits``, the ``Request*``
   resources, ...): :func:`job_significant_attributes`.

Attribute names compare case-insensitively, as ClassAd names do; this module reports them in
lower case. Values compare exactly (the unparsed text of an expression, the type and value of a
literal): ``"LINUX"`` and ``"linux"`` are different autoclusters, as in HTCondor.

:class:`AutoclusterTable` gives each distinct key a small integer id that stays stable while
the significant attributes stay the same, and :meth:`AutoclusterTable.resource_requests`
turns a schedd's idle jobs into the ordered request list it answers the negotiator with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from htc.daemons.tree_reads import tree_refs
from htc.errors import UsageError

#: Attributes every autocluster key includes (HTCondor's minimal set plus the resources a
#: partitionable slot carves out, which the negotiator deducts per match).
ALWAYS_SIGNIFICANT = (
    "requirements", "rank", "concurrencylimits", "niceuser", "jobuniverse",
    "requestcpus", "requestmemory", "requestdisk", "requestgpus",
)

#: Attributes that change every cycle or are inserted by the negotiator itself; keying on them
#: would split autoclusters for nothing (``compute_significant_attrs`` erases them).
NEVER_SIGNIFICANT = frozenset({
    "currenttime", "lastheardfrom", "remoteuserprio", "remoteuserresourcesinuse",
    "remotegroupresourcesinuse", "submittorprio", "submitteruserprio",
    "submitteruserresourcesinuse", "submittergroupresourcesinuse",
})

#: Job-ad attributes that order a schedd's idle jobs (HTCondor's default job order).
_ORDER_ATTRS = ("jobprio", "qdate", "clusterid", "procid")


def _expr_refs(value) -> set[str] | None:
    """Lower-case references of an expression value, or None for a literal."""
    attributes = getattr(value, "attributes", None)
    if attributes is None or isinstance(value, Mapping):
        return None
    return attributes()


def _is_list(value) -> bool:
    if isinstance(value, (list, tuple)):
        return True
    # An ExprTree whose text is a list literal ("{ ... }") counts as list-valued too.
    return _expr_refs(value) is not None and repr(value).lstrip().startswith("{")


def negotiator_significant_attributes(
    machine_ads: Iterable[Mapping],
    policy_exprs: Iterable[str] = (),
    startd_job_attrs: Iterable[str] = (),
    cache: SignificantCache | None = None,
) -> tuple[str, ...]:
    """Return the job attributes the pool's slots (and negotiator policy) read.

    Args:
        machine_ads: slot ads (``htc.classad.ClassAd`` objects; plain mappings of literals
            contribute nothing because literals read nothing).
        policy_exprs: the text of ``PREEMPTION_REQUIREMENTS``, ``PREEMPTION_RANK``,
            ``NEGOTIATOR_PRE_JOB_RANK``, ``NEGOTIATOR_POST_JOB_RANK`` and
            ``NEGOTIATOR_JOB_CONSTRAINT`` (evaluated with MY = slot, TARGET = job).
        startd_job_attrs: ``STARTD_JOB_ATTRS``: job attributes copied into slot ads, so
            policy expressions that read them read the slot, not the job.
        cache: a :class:`SignificantCache` kept from cycle to cycle (the negotiator keeps
            one), so that expressions already seen and policy texts already parsed are not
            walked or parsed again; None: a fresh one (same answer, no reuse).

    Returns:
        Sorted lower-case attribute names.

    Raises:
        UsageError: a policy expression does not parse.
    """
    return (cache if cache is not None else SignificantCache()).compute(
        machine_ads, policy_exprs, startd_job_attrs)


class SignificantCache:
    """What :func:`negotiator_significant_attributes` learnt in earlier cycles.

    A slot ad's contribution depends on its expressions and on which names it defines (an
    unqualified reference the ad lacks falls back to the job). Expression trees are immutable
    and a slot ad keeps the same trees from update to update (only literals change), so the
    references of each tree are computed once, by identity, and each ad is then checked
    against its own names on every call: an ad whose expression or names change is seen
    afresh, with no explicit invalidation. Ads of the same expression text mostly hold one
    tree (the parser shares it: "Shared trees" in :mod:`htc.classad.parser`), and one entry
    serves them all: it says what the tree reads, the same in any ad, and which of those names
    fall back to the job is asked of each ad. Policy texts are parsed once per distinct text.
    """

    #: trees remembered at most (a pool's worth of distinct expressions is far fewer); past
    #: it the memory starts again, which costs one walk per tree, never a wrong answer
    MAX_TREES = 200_000

    def __init__(self) -> None:
        # id(tree) -> (tree, skipped, TARGET.x names, unqualified names); the tree is kept so
        # that its id cannot be reused by another tree while the entry lives
        self._trees: dict[int, tuple] = {}
        #: the names a tree reads -> (its TARGET.x names, its unqualified names)
        self._splits: dict[frozenset[str], tuple[frozenset[str], frozenset[str]]] = {}
        self._policy: dict[str, frozenset[str]] = {}
        #: a bare name's lower-case name -> its entry (for ads that hold a tree of their own)
        self._bare: dict[str, tuple] = {}

    def _tree(self, node, external_refs, ast) -> tuple:
        entry = self._trees.get(id(node))
        if entry is not None and entry[0] is node:
            return entry
        if node.__class__ is ast.AttrRef:  # a bare name: by its name (see tree_reads)
            entry = self._bare.get(node.lname)
            if entry is None:
                if len(self._bare) >= self.MAX_TREES:
                    self._bare.clear()
                entry = self._bare[node.lname] = (None, *self._entry(node, external_refs, ast))
            return entry
        entry = (node, *self._entry(node, external_refs, ast))
        if len(self._trees) >= self.MAX_TREES:
            self._trees.clear()
            self._splits.clear()
        self._trees[id(node)] = entry
        return entry

    def _entry(self, node, external_refs, ast) -> tuple:
        """``(skipped, TARGET.x names, unqualified names)`` of a tree (see :meth:`_tree`)."""
        found = tree_refs(node, external_refs)
        # the text check matches _is_list: an expression whose text is a list literal (a tree
        # that reads nothing is skipped anyway)
        skipped = not found or _text_starts_a_list(node, ast)
        # (a pool's trees read a few distinct sets of names: each is split once)
        split = self._splits.get(found)
        if split is None:
            split = self._splits[found] = (
                frozenset(r[7:] for r in found if r.startswith("target.")),
                frozenset(r for r in found if not r.startswith("target.")))
        return (skipped, *split)

    def policy_refs(self, text: str) -> frozenset[str]:
        """The references of one policy expression text (parsed once per text).

        Raises:
            UsageError: the text does not parse.
        """
        refs = self._policy.get(text)
        if refs is None:
            refs = self._policy[text] = frozenset(_parse_refs(text))
        return refs

    def compute(self, machine_ads: Iterable[Mapping], policy_exprs: Iterable[str] = (),
                startd_job_attrs: Iterable[str] = ()) -> tuple[str, ...]:
        """:func:`negotiator_significant_attributes` with this cache."""
        from htc.classad import ast
        from htc.classad.ad import ClassAd, external_refs
        from htc.classad.ast import AdExpr, ListExpr, Literal

        no_refs = (Literal, ListExpr, AdExpr)
        refs: set[str] = set()
        sample_names: set[str] | None = None
        tree = self._tree
        for ad in machine_ads:
            if type(ad) is not ClassAd:
                names = _slow_refs(ad, refs)
                if sample_names is None:
                    sample_names = names
                continue
            table = ad.table  # lower-case name -> tree: the ad's names, as ClassAd keys them
            if sample_names is None:
                sample_names = set(table)
            for node in table.values():
                if node.__class__ in no_refs:
                    continue  # literals read nothing; list and nested-ad values are skipped
                _, skipped, targets, plain = tree(node, external_refs, ast)
                if skipped:
                    continue
                refs.update(targets)
                for ref in plain:
                    if ref not in table:
                        # unresolved in the slot ad: ClassAd scoping falls back to the job
                        refs.add(ref)
        if sample_names is not None:
            # HTCondor evaluates policy references against a sample slot ad that also holds
            # STARTD_JOB_ATTRS, so only genuinely job-side names count.
            sample_names |= {a.lower() for a in startd_job_attrs}
            for text in policy_exprs:
                for ref in self.policy_refs(text):
                    if ref.startswith("target."):
                        refs.add(ref[7:])
                    elif ref not in sample_names:
                        refs.add(ref)
        return tuple(sorted(refs - NEVER_SIGNIFICANT))


def _text_starts_a_list(node, ast=None) -> bool:
    """``unparse(node).lstrip().startswith("{")`` without writing the text: the first token
    the printer writes is that of the tree's leftmost operand (down the chain of left operands,
    selection and subscript bases, and conditions), and only a list writes ``{``. (``ast``:
    the module :mod:`htc.classad.ast`, when the caller has it at hand.)"""
    if ast is None:
        from htc.classad import ast
    left_link = ast.left_link
    while True:
        link = left_link(node)
        while link is not None:
            node, link = link, left_link(link)
        if node.__class__ is ast.Conditional:
            node = node.cond  # ``c ? a : b`` is written from ``c`` on
            continue
        return node.__class__ is ast.ListExpr or (
            node.__class__ is ast.Literal and isinstance(node.value, list))


def _slow_refs(ad: Mapping, refs: set[str]) -> set[str]:
    """Add what a slot ad that is not a ClassAd (a plain mapping) reads; return its names."""
    names = {str(k).lower() for k in ad}
    for name in ad:
        value = ad[name]
        if _is_list(value):
            continue
        for ref in _expr_refs(value) or ():
            if ref.startswith("target."):
                refs.add(ref[7:])
            elif ref not in names:
                refs.add(ref)
    return names


def _parse_refs(text: str) -> set[str]:
    from htc.classad import ExprTree  # the ClassAd engine is only needed for policy text

    try:
        return ExprTree(text).attributes()
    except Exception as exc:  # the engine's parse error already names the position
        raise UsageError(f"cannot read references of policy expression {text!r}: {exc}") from exc


def job_significant_attributes(job: Mapping,
                               negotiator_attrs: Iterable[str] = ()) -> tuple[str, ...]:
    """Return the attributes that make up a job's autocluster key.

    The negotiator's list, the fixed minimum, and every job attribute the job's own
    ``Requirements`` and ``Rank`` read, followed through job attributes that are themselves
    expressions (``Requirements`` reads ``RequestMemory``, which may read ``MemoryUsage``).

    Args:
        job: the job ad.
        negotiator_attrs: :func:`negotiator_significant_attributes` of this cycle.

    Returns:
        Sorted lower-case attribute names.
    """
    attrs = {a.lower() for a in negotiator_attrs} | set(ALWAYS_SIGNIFICANT)
    table = _table_of(job)
    by_lower = None if table is not None else {str(k).lower(): k for k in job}
    todo = ["requirements", "rank"]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if table is not None:
            node = table.get(name)
            if node is None:
                continue
            found = _node_refs(node)
        else:
            if name not in by_lower:
                continue
            found = _expr_refs(job[by_lower[name]])
        for ref in found or ():
            if ref.startswith("target."):
                continue
            if ref in (table if table is not None else by_lower):
                attrs.add(ref)
                todo.append(ref)
    return tuple(sorted(attrs - NEVER_SIGNIFICANT))


#: what a job ad's expression reads and its canonical key, per syntax tree: every node (a DAG's
#: thousand one-job clusters) shares the trees of its submit file's values (the job queue keeps
#: one tree per distinct text), so each is walked and printed once, not once per cluster. Keyed
#: by ``id(tree)`` with the tree kept in the entry (an id is not reused while its tree lives);
#: bounded, emptied when full.
_BY_TREE: dict[int, list] = {}
_BY_TREE_MAX = 4096
#: an entry's value not worked out yet
_MISSING = object()


def _table_of(job: Mapping) -> dict | None:
    """The lower-case name -> syntax tree table of a :class:`htc.classad.ClassAd` job, else None."""
    from htc.classad import ClassAd

    return job.table if isinstance(job, ClassAd) else None


def _tree_entry(node) -> list:
    """The cache entry ``[node, refs or missing, key or missing]`` of one syntax tree."""
    entry = _BY_TREE.get(id(node))
    if entry is None or entry[0] is not node:
        if len(_BY_TREE) >= _BY_TREE_MAX:
            _BY_TREE.clear()
        entry = _BY_TREE[id(node)] = [node, _MISSING, _MISSING]
    return entry


def _node_refs(node) -> set[str] | None:
    """:func:`_expr_refs` of the value whose syntax tree is ``node`` (cached per tree)."""
    entry = _tree_entry(node)
    if entry[1] is _MISSING:
        from htc.classad.ad import from_node

        entry[1] = _expr_refs(from_node(node))
    return entry[1]


def _node_key(node, job) -> tuple:
    """:func:`_canonical` of the value whose syntax tree is ``node`` in ``job`` (cached per
    tree: a value's key depends on its tree alone -- a literal's value, else its text)."""
    entry = _tree_entry(node)
    if entry[2] is _MISSING:
        from htc.classad.ad import from_node

        entry[2] = _canonical(from_node(node, job))
    return entry[2]


def _canonical(value) -> tuple:
    """A hashable, exact stand-in for an attribute value (type matters: 1 != 1.0 != true)."""
    if value is None:
        return ("undefined",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("real", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_canonical(v) for v in value))
    if isinstance(value, Mapping):
        return ("ad", tuple(sorted((str(k).lower(), _canonical(v)) for k, v in value.items())))
    # ExprTree, UNDEFINED/ERROR values, times: their canonical text is exact enough.
    return (type(value).__name__, repr(value))


def autocluster_key(job: Mapping, significant: Sequence[str]) -> tuple:
    """Return the key that decides a job's autocluster.

    Args:
        job: the job ad (any mapping; names compare case-insensitively).
        significant: lower-case significant attribute names.

    Returns:
        A hashable tuple; equal tuples mean the same autocluster. A missing attribute is
        part of the key too (missing differs from any value).
    """
    table = _table_of(job)
    if table is not None:   # a ClassAd: only the significant names are looked at
        return tuple((name, _node_key(table[name], job) if name in table else ("missing",))
                     for name in significant)
    lowered = {str(k).lower(): v for k, v in job.items()}
    return tuple(
        (name, _canonical(lowered[name]) if name in lowered else ("missing",))
        for name in significant
    )


def job_order_key(job: Mapping) -> tuple:
    """Return the schedd's job order key: JobPrio high first, then QDate, ClusterId, ProcId."""
    lowered = {str(k).lower(): v for k, v in job.items() if str(k).lower() in _ORDER_ATTRS}

    def num(name: str) -> float:
        v = lowered.get(name, 0)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0

    return (-num("jobprio"), num("qdate"), num("clusterid"), num("procid"))


@dataclass(frozen=True)
class ResourceRequest:
    """One autocluster of one submitter's idle jobs, as a schedd offers it to the negotiator.

    ``job`` is a representative job ad (the first job of the autocluster in the schedd's job
    order), ``count`` how many idle jobs it stands for, ``job_ids`` those jobs in order
    (``"cluster.proc"``; may be empty when the schedd keeps them to itself).
    """

    autocluster_id: int
    job: Mapping
    count: int
    job_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.count, int) or self.count <= 0:
            raise UsageError(
                f"resource request for autocluster {self.autocluster_id} has count "
                f"{self.count!r}; a request stands for at least one idle job"
            )
        if self.job_ids and len(self.job_ids) != self.count:
            raise UsageError(
                f"resource request for autocluster {self.autocluster_id} lists "
                f"{len(self.job_ids)} job ids for a count of {self.count}"
            )


@dataclass
class AutoclusterTable:
    """Stable autocluster ids for one schedd.

    Args:
        significant: the significant attribute names (any case). When a job's own
            Requirements/Rank read further attributes, :meth:`id_of` adds them per job.
    """

    significant: tuple[str, ...] = ()
    _ids: dict[tuple, int] = field(default_factory=dict, repr=False)
    _next_id: int = 1
    #: counts changes of the significant attributes (see :meth:`ids_by_cluster`)
    _generation: int = 0

    def __post_init__(self) -> None:
        self.significant = tuple(sorted({a.lower() for a in self.significant}))

    def set_significant(self, attrs: Iterable[str]) -> bool:
        """Replace the significant attributes; all ids are forgotten when the set changes.

        Returns:
            True when the set changed (the schedd must re-key its idle jobs).
        """
        new = tuple(sorted({a.lower() for a in attrs}))
        if new == self.significant:
            return False
        self.significant = new
        self._ids.clear()
        self._generation += 1   # the ids kept in the clusters' memos are void
        return True

    def id_of(self, job: Mapping) -> int:
        """Return the autocluster id of ``job``, creating one for a new kind of job."""
        return self._id_for(job, job_significant_attributes(job, self.significant))

    def _id_for(self, job: Mapping, attrs: tuple[str, ...]) -> int:
        """:meth:`id_of` with the job's significant attributes already worked out."""
        return self._id_of_key((attrs, autocluster_key(job, attrs)))

    def _id_of_key(self, key: tuple) -> int:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = self._next_id
            self._next_id += 1
        return found

    def shape_id_of(self, sample: Mapping) -> Callable[[Mapping], int]:
        """:meth:`id_of` for plain-mapping (not ClassAd) jobs of one shape: the same names as
        ``sample``, and ``Requirements`` and ``Rank`` values that read nothing (literals), as
        ``sample``'s. Such jobs all have ``sample``'s significant attributes, so those and the
        names the key reads are worked out once here, not per job; the ids are :meth:`id_of`'s.
        Valid while the significant attributes stay the same (take a new one after
        :meth:`set_significant` says they changed).

        Args:
            sample: a job ad of the shape (its values do not matter).

        Returns:
            A function from a job ad of that shape to its autocluster id; :meth:`id_of` itself
            when ``sample`` is a ClassAd, has names equal but for case, or its ``Requirements``
            or ``Rank`` reads something.
        """
        by_lower = {str(k).lower(): k for k in sample}
        if _table_of(sample) is not None or len(by_lower) != len(sample) or any(
                _expr_refs(sample[by_lower[n]]) for n in ("requirements", "rank")
                if n in by_lower):
            return self.id_of
        attrs = job_significant_attributes(sample, self.significant)
        plan = tuple((name, by_lower.get(name)) for name in attrs)
        id_of_key, missing = self._id_of_key, ("missing",)

        def id_of(job: Mapping) -> int:
            return id_of_key((attrs, tuple(
                (name, missing if key is None else _canonical(job[key])) for name, key in plan)))
        return id_of

    def ids_by_cluster(self, jobs: Iterable) -> dict[int, list]:
        """Group stored jobs (:class:`htc.jobqueue.JobAd`, in the order given) by autocluster id.

        Procs of one cluster share their autocluster unless a proc overrides an attribute
        that decides it (or differs in a hot one that does: JobPrio ...), so each cluster's
        key is worked out once, from its first proc that overrides none, and any proc that
        does override one is keyed on its own -- the same ids :meth:`id_of` gives, without
        building every idle job's ClassAd every cycle. The cluster's result is also kept in
        its :class:`~htc.jobqueue.ads.ClusterAd` memo (a cluster ad does not change while it
        is cached; the memo names this table and its significant attributes), so a queue of
        many one-job clusters -- a DAG's nodes -- is not keyed again every cycle either.
        """
        from htc.jobqueue.ads import HOT_ATTRS
        from htc.jobqueue.expr import job_classad

        groups: dict[int, list] = {}
        shared: dict[int, tuple] = {}   # cluster id -> (decides, hot names, hot values, id)
        memo_key = ("autocluster", id(self), self._generation)
        for job in jobs:
            own = {name.lower() for name in job.own}
            known = shared.get(job.cluster_id)
            if known is None:
                memo = getattr(getattr(job, "cluster", None), "cache", None)
                known = memo.get(memo_key) if memo is not None else None
            if known is not None and not own & known[0] and \
                    tuple(job.hot_value(n) for n in known[1]) == known[2]:
                ac = known[3]
            else:
                ad = job_classad(job)
                attrs = job_significant_attributes(ad, self.significant)
                ac = self._id_for(ad, attrs)
                decides = frozenset(attrs) | {"requirements", "rank"}
                if known is None and not own & decides:
                    hot = tuple(sorted(n for n in decides if n in HOT_ATTRS))
                    known = (decides, hot, tuple(job.hot_value(n) for n in hot), ac)
                    cluster = getattr(job, "cluster", None)
                    if cluster is not None:
                        cluster.cache[memo_key] = known
            if known is not None:
                shared.setdefault(job.cluster_id, known)
            groups.setdefault(ac, []).append(job)
        return groups

    def __len__(self) -> int:
        return len(self._ids)

    def resource_requests(
        self, jobs: Iterable[tuple[str, Mapping]], limit: int | None = None
    ) -> list[ResourceRequest]:
        """Group idle jobs into resource requests, best job first.

        Args:
            jobs: ``(job_id, job_ad)`` pairs of one submitter's idle jobs, in any order.
            limit: at most this many requests (the rest are offered next cycle).

        Returns:
            One :class:`ResourceRequest` per autocluster, ordered by the schedd's job order of
            each autocluster's best job; each lists its jobs in that order.
        """
        ordered = sorted(jobs, key=lambda pair: job_order_key(pair[1]))
        groups: dict[int, list[tuple[str, Mapping]]] = {}
        for job_id, job in ordered:
            groups.setdefault(self.id_of(job), []).append((job_id, job))
        requests = [
            ResourceRequest(
                autocluster_id=ac,
                job=members[0][1],
                count=len(members),
                job_ids=tuple(job_id for job_id, _ in members),
            )
            for ac, members in groups.items()
        ]
        return requests if limit is None else requests[:limit]

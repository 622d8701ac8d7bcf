"""A job's ``Requirements`` split into clauses, and what carving a slot can change of them.

Theory of operation
-------------------
The search evaluates a job's ``Requirements`` clause by clause (:func:`requirement_clauses`:
its top-level ``&&`` operands, each with the names it reads of the job and of the slot), so
that a clause's verdict can be shared by every class, base and lane that agrees on what that
clause reads.

A partitionable slot held for a request changes only in ``Cpus``, ``Memory`` and ``Disk`` as
it is carved. :func:`carve_plan` follows each clause's and rank's references through both ads
(:func:`slot_names_read`: a job attribute may read ``TARGET.Memory``, a name one ad lacks
falls back to the other) and keeps the ones that reach a carved resource: only those are
evaluated again after a carve; the rest keeps its value.

:func:`requirement_clauses` keeps its answer by the exact text of the ``Requirements`` (a
clause's text, names and tree depend on that text only: the text that pickles a tree), so
5,000 requests of two texts split two trees, not 5,000 (case 2 of
``benchmarks/negotiator_bench.py``), and the requests of one text share the clause trees (and
what is cached by a tree's identity: its references, its compiled form). Requests whose jobs
hold one tree (the parser gives one tree to one text) are answered by the tree, without
printing it (200 texts of 2 trees: 3.7 ms a cycle in case 1).
"""

from __future__ import annotations

from htc.classad import ClassAd, ExprTree
from htc.classad.ast import Binary, Paren
from htc.daemons.negotiator.slots import CARVED, closure


def requirement_clauses(job: ClassAd):
    """Split a job's Requirements into its top-level ``&&`` clauses.

    Returns:
        ``(text, expression, job names read, slot names read)`` per clause, or None when the
        Requirements is missing or a literal (then it is evaluated as a whole).
    """
    req = job.get("Requirements")
    if not isinstance(req, ExprTree):
        return None
    node = req.node
    hit = _BY_TREE.get(id(node))
    if hit is not None and hit[0] is node:  # (the tree kept in the entry: its id is its own)
        return hit[1]
    text = req.unparse(exact=True)  # (every digit of a real: a quarter of what a split costs)
    clauses = _SPLIT.get(text)
    if clauses is None:
        if len(_SPLIT) >= _SPLIT_KEPT:
            _SPLIT.clear()  # (a pool of more texts than that splits each again, as before)
        clauses = _SPLIT[text] = _split(req)
    if len(_BY_TREE) >= _SPLIT_KEPT:
        _BY_TREE.clear()  # (trees parsed afresh per request: each printed again, as before)
    _BY_TREE[id(node)] = (node, clauses)
    return clauses


#: :func:`requirement_clauses` by the Requirements' text, at most _SPLIT_KEPT of them
_SPLIT: dict[str, tuple] = {}
_SPLIT_KEPT = 4096
#: the same by the tree itself (``id(node) -> (node, clauses)``): the jobs of one text hold
#: one tree (the parser shares it), printed once, not once per request (the text of a tree
#: is its own: trees are not changed once parsed)
_BY_TREE: dict[int, tuple] = {}


def _split(req: ExprTree) -> tuple:
    """:func:`requirement_clauses` of the tree ``req``."""
    out = []
    todo = [req.node]  # the parsed tree; each clause is wrapped back into an ExprTree
    while todo:
        node = todo.pop()
        while isinstance(node, Paren):
            node = node.inner
        if isinstance(node, Binary) and node.op == "&&":
            todo.extend((node.right, node.left))
            continue
        clause = ExprTree(node)
        refs = clause.attributes()
        # a plain name the job lacks falls back to the slot: count it on both sides
        out.append((repr(clause), clause,
                    tuple(sorted(r for r in refs if not r.startswith("target."))),
                    tuple(sorted({r[7:] if r.startswith("target.") else r for r in refs}))))
    return tuple(out)


def slot_names_read(expr: ExprTree, job: ClassAd, slot: ClassAd, slot_is_my: bool) -> set[str]:
    """The slot attributes ``expr`` (evaluated with MY = the slot when ``slot_is_my``, else MY
    = the job) can reach, following both ads' own expressions back and forth (a job attribute
    may itself read ``TARGET.Memory``, a name one ad lacks falls back to the other)."""
    refs = expr.attributes()
    plain = {r for r in refs if not r.startswith("target.")}
    target = {r[7:] for r in refs if r.startswith("target.")}
    slot_todo, job_todo = (plain, target) if slot_is_my else (plain | target, plain)
    slot_seen: set[str] = set()
    job_seen: set[str] = set()
    while slot_todo or job_todo:
        names, targets = closure(slot, slot_todo)
        slot_seen |= names
        job_todo = (job_todo | targets | {n for n in names if n not in slot}) - job_seen
        names, targets = closure(job, job_todo)
        job_seen |= names
        slot_todo = (targets | {n for n in names if n not in job}) - slot_seen
        job_todo = set()
    return slot_seen


def carve_plan(rs, slot: ClassAd, ranks) -> tuple | None:
    """What of ``rs`` against a held partitionable slot a carve can change.

    Returns ``(clauses, pre, job rank, post)``: the job's ``Requirements`` clauses that read a
    carved resource (to evaluate again) and whether each rank reads one; None when the slot's
    own ``Requirements`` reads one or the job's cannot be split (then all is evaluated again).
    """
    job = rs.job
    if rs.clauses is None:
        return None
    slot_req = slot.get("Requirements")
    if slot_req.__class__ is ExprTree and slot_names_read(slot_req, job, slot, True) & CARVED:
        return None
    clauses = tuple(expr for _text, expr, _j, _s in rs.clauses
                    if slot_names_read(expr, job, slot, False) & CARVED)
    pre, post = (expr is not None and bool(slot_names_read(expr, job, slot, True) & CARVED)
                 for expr in ranks)
    job_rank = job.get("Rank")
    jr = job_rank.__class__ is ExprTree and bool(slot_names_read(job_rank, job, slot, False)
                                                  & CARVED)
    return clauses, pre, jr, post

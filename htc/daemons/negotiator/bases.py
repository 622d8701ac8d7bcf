"""What a lane can never match, decided once per slot *base* for every lane at once.

Theory of operation
-------------------
A partitionable slot passes through several slot classes as it is carved: its ``Cpus``,
``Memory`` and ``Disk`` shrink, nothing else changes. The classes it passes through share a
*base* (:meth:`htc.daemons.negotiator.slots.SlotPool._place`: the class key without those
three values), and whatever reads none of them has one value on the whole base.

So the parts of matching that read no carved resource are decided per base, and for all bases
at once, before a lane walks its classes:

* the slot's ``Requirements`` (usually ``START``), when it reads nothing of the job and none of
  the carved resources: one verdict per base for every request (:meth:`BaseVerdicts.slot_sets`);
* each top-level ``&&`` clause of a job's ``Requirements`` that reads no carved resource on a
  base: one verdict per (clause text, the job values it can read, base), shared by every lane
  whose jobs agree on those values (``TARGET.Arch == "X86_64"`` reads none of the job: one
  pass over the bases serves every lane that asks for X86_64).

A lane keeps the set of bases one of those verdicts excludes (:class:`LaneSets`); a class of
an excluded base is passed over by a set lookup, however many times the lane meets it (in its
first heap, and each time a carved slot of that base is announced again). For the other
classes only what reads a carved resource is evaluated per class: the clauses that read one,
the slot's verdict where it does, and the arithmetic of fitting. The verdicts come from the
caches of :class:`~htc.daemons.negotiator.search.IdleSearch`, keyed by exactly what they
depend on, so the decisions are those of evaluating every class in full
(``tests/unit/test_negotiator_reference.py``).
"""

from __future__ import annotations

from htc.classad.ast import AttrRef, Binary, Literal, Paren, Select

#: the verdict of a Requirements clause on a class (or a base)
_HOLDS, _FAILS, _UNSURE = "holds", "fails", "unsure"


class LaneSets:
    """What one lane has decided per base (see the module docstring).

    Attributes:
        excluded: bases no class of which can match the lane's jobs.
        full: bases where a clause could not be decided alone (an ERROR or a number): the
            whole ``Requirements`` is evaluated per class there; None for every base (the
            job's Requirements cannot be split into clauses).
        carved: ``(clause, bases where it reads a carved resource)`` per clause.
    """

    __slots__ = ("excluded", "full", "carved")

    def __init__(self, excluded: set[int], full: set[int] | None, carved: tuple):
        self.excluded = excluded
        self.full = full
        self.carved = carved

    def clauses_left(self, base: int) -> tuple:
        """The clauses a class of ``base`` must still evaluate (they read a carved resource)."""
        return tuple(clause for clause, bases in self.carved if base in bases)


class BaseVerdicts:
    """The per-base verdicts of one cycle, shared by its lanes."""

    def __init__(self, search, pool):
        self.search = search
        self.pool = pool
        #: clause text -> (info per base, job names it may read on any base, carved bases)
        self._clause_bases: dict[str, tuple] = {}
        #: (clause text, job view) -> (bases where it fails, bases where it is unsure)
        self._clause_sets: dict[tuple, tuple[set[int], set[int]]] = {}
        self._slot: tuple[set[int], set[int]] | None = None

    def slot_sets(self, rs) -> tuple[set[int], set[int]]:
        """``(bases whose slots refuse every job, bases whose verdict is per class)``."""
        if self._slot is None:
            search = self.search
            fail, check = set(), set()
            for base, rep in enumerate(self.pool.base_reps):
                if search.slot_base_side(rep):
                    # reads nothing of the job: the same verdict for every request
                    if not search.slot_accepts(rs, rep):
                        fail.add(base)
                else:
                    check.add(base)
            self._slot = (fail, check)
        return self._slot

    def _clause(self, rs, clause) -> tuple[set[int], set[int], set[int]]:
        """``(bases where the clause fails, where it is unsure, where it reads a carved
        resource)`` for ``rs``'s job."""
        search, reps = self.search, self.pool.base_reps
        text, expr = clause[0], clause[1]
        per = self._clause_bases.get(text)
        if per is None:
            infos = [search.clause_info(text, clause[2], clause[3], rep) for rep in reps]
            union: set[str] = set()
            for info in infos:
                union.update(info[0])
            carved = {base for base, info in enumerate(infos) if info[2]}
            per = self._clause_bases[text] = (infos, tuple(sorted(union)), carved)
        infos, union, carved = per
        key = (text, search.view(rs, union))
        sets = self._clause_sets.get(key)
        if sets is None:
            fail, unsure = set(), set()
            for base, (reads, slot_view, is_carved) in enumerate(infos):
                if is_carved:
                    continue
                verdict = search.clause_verdict(rs, text, expr, slot_view, reads, reps[base])
                if verdict is _FAILS:
                    fail.add(base)
                elif verdict is _UNSURE:
                    unsure.add(base)
            sets = self._clause_sets[key] = (fail, unsure)
        return sets[0], sets[1], carved

    def lane_sets(self, rs) -> LaneSets:
        """The :class:`LaneSets` of ``rs``'s lane (every request of a lane gets the same)."""
        excluded = set(self.slot_sets(rs)[0])
        if rs.clauses is None:
            return LaneSets(excluded, None, ())
        full: set[int] = set()
        carved = []
        for clause in rs.clauses:
            fail, unsure, carved_bases = self._clause(rs, clause)
            excluded |= fail  # a False or UNDEFINED clause never lets && be true
            full |= unsure
            carved.append((clause, carved_bases))
        return LaneSets(excluded, full, tuple(carved))


# ---------------------------------------------------------------------------------------------
# the clauses left per class: resource comparisons by arithmetic

_OPS = {"<": lambda x, y: x < y, "<=": lambda x, y: x <= y,
        ">": lambda x, y: x > y, ">=": lambda x, y: x >= y}
_NUMBERS = (int, float)


def _unparen(node):
    while node.__class__ is Paren:
        node = node.inner
    return node


def _operand(node):
    """``("slot", name)`` for ``TARGET.name``, ``("job", name)`` for ``name``/``MY.name``,
    ``("const", value)`` for a number; None for anything else."""
    node = _unparen(node)
    cls = node.__class__
    if cls is Literal:
        value = node.value
        return ("const", value) if value.__class__ in _NUMBERS else None
    if cls is AttrRef:
        return None if node.lname in ("my", "target") else ("job", node.lname)
    if cls is Select:
        base = _unparen(node.base)
        if base.__class__ is AttrRef and base.lname == "target":
            return ("slot", node.lname)
        if base.__class__ is AttrRef and base.lname == "my":
            return ("job", node.lname)
    return None


def _value(operand, job, slot):
    kind, what = operand
    if kind == "const":
        return what
    node = (slot if kind == "slot" else job)._exprs.get(what)
    if node is None or node.__class__ is not Literal:
        return None  # missing (a plain name would fall back to the slot) or an expression
    value = node.value
    return value if value.__class__ in _NUMBERS else None


def resource_comparison(expr):
    """For a clause ``TARGET.Memory >= RequestMemory`` (any of ``< <= > >=`` between
    ``TARGET.x``, a job attribute and a number; MY = the job, TARGET = the slot), a function
    ``(job, slot) -> True/False`` that decides it by arithmetic when both values are numeric
    literals, and None (evaluate it) otherwise; None when the clause has another form.

    ClassAd compares two integers as integers and any other pair of numbers as floats; so
    does this.
    """
    node = _unparen(expr.node)
    if node.__class__ is not Binary or node.op not in _OPS:
        return None
    left, right = _operand(node.left), _operand(node.right)
    if left is None or right is None or "slot" not in (left[0], right[0]):
        return None
    op = _OPS[node.op]

    def decide(job, slot):
        x, y = _value(left, job, slot), _value(right, job, slot)
        if x is None or y is None:
            return None
        if x.__class__ is int and y.__class__ is int:
            return op(x, y)
        return op(float(x), float(y))

    return decide

"""The slots of one negotiation cycle: views of slot ads, slot classes, partitionable carving.

Theory of operation
-------------------
Matching every request against every slot costs requests x slots ClassAd evaluations:
10 million for 1,000 autoclusters and 10,000 slots, far too many for one cycle in Python.
But most slots are interchangeable: whether a job matches a slot, and how they rank each
other, depends only on the slot attributes that the expressions involved actually read.

So each idle slot gets a **class key**: the values of the attributes reachable from the
*roots* of matching — the slot's ``Requirements``, ``Rank`` and ``SlotWeight``, its
``Cpus``/``Memory``/``Disk``, and every name the cycle's job expressions read — following the
slot's own expression attributes transitively (``Requirements = START``, ``START =
KeyboardIdle > 900`` reaches ``KeyboardIdle``). Slots with equal keys are equivalent for
``Requirements`` and the job's ``Rank``, so a request is evaluated once per **class**, not once
per slot.

The negotiator's own ``NEGOTIATOR_PRE_JOB_RANK`` / ``NEGOTIATOR_POST_JOB_RANK`` usually read
per-slot values (``SlotID``, ``KFlops``) but nothing of the job. When an expression's
references (followed through the slot) reach no job attribute, it is evaluated once per slot
per cycle ("static") and orders slots *within* a class; otherwise its references join the
class key and it is evaluated per request and class like the job's ``Rank``.

A partitionable slot is an ordinary member of a class until a request is carved out of it;
then its ad copy shrinks (``Cpus``, ``Memory``, ``Disk``) and it moves to the class of its new
key. Claimed slots are not classed: each is a preemption candidate of its own, with the
per-cycle attributes ``RemoteUserPrio`` etc. inserted into a private copy of its ad.

Classes are built on first use. Only the class search (:mod:`.search`) reads them; the vector
search (:mod:`.vsearch`) reads the slots themselves (:meth:`SlotPool.free_slots`), and in a
pool of 10,000 distinct machines computing 10,000 class keys and static ranks that nothing
reads was a tenth of the cycle. So :meth:`SlotPool.add` only lists the slot, and the first
read of ``classes``, ``base_reps`` or ``avail_log`` classes every slot not yet taken, as it is
then (a slot carved before that is classed by its carved ad, as :meth:`SlotPool.reclass` would
have moved it; a slot taken is left out, as a class drops a taken member).

Reading one slot ad's values (shortcuts for literals, numbers, ranks, weights, who claims the
slot) and the values carving writes back are :mod:`htc.daemons.negotiator.slotreads`.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable

from htc.classad import ClassAd, ExprTree
from htc.classad.ad import external_refs
from htc.classad.ast import AdExpr, ListExpr, Literal
from htc.daemons.tree_reads import tree_refs
from htc.daemons.negotiator.slotreads import SCALARS, eval_rank, fast_read, remote_user_of

#: Attributes every slot class key reads, whatever the expressions say.
BASE_ROOTS = frozenset({"requirements", "rank", "slotweight", "cpus", "memory", "disk",
                        "partitionableslot", "slottype"})

#: States in which a slot cannot take a new match (its Requirements read False there anyway).
#: Owner and Backfill slots stay: their START decides, as it does in HTCondor.
UNAVAILABLE_STATES = frozenset({"matched", "preempting", "drained"})

_MISSING = ("missing",)

#: what :class:`Slot` looks up in a plain mapping's (missing) table of syntax trees: not a
#: literal, so that each value is read by fast_read, with the mapping's ``get``
_OTHER = object()


def _not_a_table(low: str) -> object:
    return _OTHER

#: what carving a partitionable slot changes in its ad
CARVED = frozenset({"cpus", "memory", "disk"})


def expr_refs(value) -> set[str] | None:
    """Lower-case names an expression reads (``target.x`` kept qualified); None for literals."""
    if isinstance(value, ExprTree):
        return value.attributes()
    return None


def _refs_of(value: ExprTree) -> frozenset[str]:
    return _node_refs(value.node)


def _node_refs(node) -> frozenset[str]:
    """The names a syntax tree reads, remembered by identity: ``closure`` asks the same trees
    again and again, and the significant attributes asked first (:func:`.tree_refs`, shared)."""
    return tree_refs(node, external_refs)


#: syntax trees that ``ClassAd.get`` hands back as values, not as an ExprTree
_VALUE_NODES = (Literal, ListExpr, AdExpr)


def _node_of(value):
    """The syntax tree of a plain mapping's value when it is an expression, else None."""
    return value.node if value.__class__ is ExprTree else None


def closure(ad: ClassAd, roots: Iterable[str]) -> tuple[set[str], set[str]]:
    """Follow references from ``roots`` through an ad's expression attributes.

    Returns:
        ``(names, targets)``: every name of this ad reached (present or not), and the
        names read from the other ad as ``TARGET.x``.
    """
    seen: set[str] = set()
    targets: set[str] = set()
    todo = list(roots)
    exprs = getattr(ad, "_exprs", None)
    # the stored syntax trees (names are lower case): no conversion of the values
    get = exprs.get if exprs is not None else lambda name: _node_of(ad.get(name))
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        node = get(name)
        if node is not None and node.__class__ not in _VALUE_NODES:
            for ref in _node_refs(node):
                if ref.startswith("target."):
                    targets.add(ref[7:])
                elif ref not in seen:
                    todo.append(ref)
    return seen, targets


def names_and_other_reads(ad: ClassAd) -> tuple[set[str], set[str]]:
    """Every attribute name of ``ad`` (lower case), and every name its expressions can read of
    the other ad: ``TARGET.x``, and plain names ``ad`` lacks (they fall back to the other ad).
    Reads the stored syntax trees (each tree's references are cached by identity)."""
    table = ad.table
    reads: set[str] = set()
    for node in table.values():
        if node.__class__ in _VALUE_NODES:
            continue  # a value reads nothing
        for ref in _node_refs(node):
            if ref.startswith("target."):
                reads.add(ref[7:])
            elif ref not in table:
                reads.add(ref)
    return set(table), reads


def other_side_reads(ad: ClassAd, root: str = "requirements") -> tuple[str, ...]:
    """The attributes of the *other* ad that ``ad[root]`` can read.

    ``TARGET.x`` references, and plain names this ad does not define (ClassAd scoping looks
    them up in the other ad), followed through this ad's expression attributes.
    """
    names, targets = closure(ad, (root,))
    return tuple(sorted(targets | {n for n in names if n not in ad}))


def projection(ad: ClassAd, names: Iterable[str]) -> tuple:
    """A hashable key of everything ``names`` evaluate to in ``ad`` (following its expressions)."""
    reached, _ = closure(ad, names)
    return tuple((n, _value_key(ad, n)) for n in sorted(reached))


def _value_key(ad: ClassAd, name: str):
    exprs = getattr(ad, "_exprs", None)
    if exprs is not None:
        node = exprs.get(name)
        if node is None:
            return _MISSING
        if node.__class__ is Literal and node.value.__class__ in SCALARS:
            return (node.value.__class__.__name__, node.value)  # what ad.get would give
    value = ad.get(name)
    if value is None:
        return _MISSING
    # ExprTree hashes and compares structurally; lists and ads need a hashable stand-in.
    if isinstance(value, list):
        return ("list", repr(value))
    if isinstance(value, ClassAd):
        return ("ad", repr(value))
    return (type(value).__name__, value)


class Slot:
    """One slot ad as the cycle sees it (mutable: partitionable slots shrink when carved)."""

    __slots__ = ("name", "ad", "state", "activity", "remote_user", "weight", "partitionable",
                 "claim_id", "address", "pre", "post", "pre_dynamic", "post_dynamic", "cls",
                 "taken", "carves", "base", "rank_names")

    def __init__(self, ad: ClassAd, name: str):
        self.ad = ad
        self.name = name
        # fast_read of each name, inlined (a cycle makes a Slot of every slot ad): a scalar
        # literal's value as it is, anything else (a missing name too) read by fast_read
        exprs = getattr(ad, "_exprs", None)
        get = exprs.get if exprs is not None else _not_a_table
        node = get("state")
        self.state = str(node.value if node.__class__ is Literal and node.value.__class__ in SCALARS
                         else fast_read(exprs, ad, "state", "State", "Unclaimed"))
        node = get("activity")
        self.activity = str(
            node.value if node.__class__ is Literal and node.value.__class__ in SCALARS
            else fast_read(exprs, ad, "activity", "Activity", "Idle"))
        if exprs is not None and "remoteuser" not in exprs and "accountinggroup" not in exprs \
                and "preemptinguser" not in exprs and "preemptingaccountinggroup" not in exprs:
            self.remote_user = None  # (remote_user_of's answer for an idle slot's ad)
        else:
            self.remote_user = remote_user_of(ad)
        node = get("partitionableslot")
        self.partitionable = (node.__class__ is Literal and node.value is True) or fast_read(
            exprs, ad, "partitionableslot", "PartitionableSlot") is True \
            or str(fast_read(exprs, ad, "slottype", "SlotType", "")).lower() == "partitionable"
        node = get("claimid")
        claim = node.value if node.__class__ is Literal and node.value.__class__ in SCALARS \
            else fast_read(exprs, ad, "claimid", "ClaimId")
        self.claim_id = claim if isinstance(claim, str) and claim else None
        node = get("myaddress")
        address = node.value if node.__class__ is Literal and node.value.__class__ in SCALARS \
            else fast_read(exprs, ad, "myaddress", "MyAddress")
        if address is None:
            address = fast_read(exprs, ad, "startdipaddr", "StartdIpAddr", "")
        self.address = address if isinstance(address, str) else ""
        self.weight = 1.0
        self.pre = self.post = 0.0
        self.pre_dynamic = self.post_dynamic = False
        self.cls: SlotClass | None = None
        self.taken = False
        self.carves = 0
        #: the slot's *base*: its class key without Cpus, Memory and Disk (see SlotPool._place)
        self.base: int | None = None
        #: the slot names its static pre- and post-job ranks read (see SlotPool._static_rank)
        self.rank_names: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())

    @property
    def claimed(self) -> bool:
        return self.remote_user is not None

    def order_key(self) -> tuple:
        """Within a class: best static pre/post rank first, then by name (deterministic)."""
        return (-self.pre, -self.post, self.name)


class SlotClass:
    """Free slots with one class key; ``members`` is a heap by :meth:`Slot.order_key`."""

    __slots__ = ("id", "key", "base", "members", "ad", "partitionable", "pre_dynamic",
                 "post_dynamic", "job_reads", "res")

    def __init__(self, cid: int, key: tuple, rep: Slot, job_reads: tuple[str, ...] | None = None):
        self.id = cid
        self.key = key
        #: classes with one base differ only in Cpus, Memory and Disk: what reads none of
        #: those has one value for all of them (the search caches it per base)
        self.base = key[0]
        self.members: list[tuple[tuple, int, Slot]] = []
        # The ad that stands for the class in evaluations. A partitionable slot's own ad
        # shrinks when carved (and the slot moves on), so the class keeps a copy.
        self.ad = rep.ad.copy() if rep.partitionable else rep.ad
        self.partitionable = rep.partitionable
        self.pre_dynamic = rep.pre_dynamic
        self.post_dynamic = rep.post_dynamic
        #: job attributes the slot's Requirements reads: its verdict on a job depends on
        #: nothing else, so it can be shared by every request that agrees on them
        self.job_reads = other_side_reads(self.ad) if job_reads is None else job_reads
        #: (Cpus, Memory, Disk) as numbers (None: the ad does not say) when all three are
        #: numeric literals or missing, so fitting is arithmetic; None otherwise
        self.res = _resources(self.ad)

    def best(self) -> Slot | None:
        """Return the best free member, dropping members taken or moved elsewhere."""
        members = self.members
        while members:
            slot = members[0][2]
            if not slot.taken and slot.cls is self:
                return slot
            heapq.heappop(members)
        return None


def _resources(ad) -> tuple | None:
    """The ad's (Cpus, Memory, Disk) as numbers (None for a missing one), or None when one of
    them is not a numeric literal (fitting must evaluate it then); as ``IdleSearch.fits`` reads
    them."""
    exprs = getattr(ad, "_exprs", None)
    if exprs is None:
        return None
    out = []
    for name in ("cpus", "memory", "disk"):
        node = exprs.get(name)
        if node is None:
            out.append(None)
        elif node.__class__ is Literal and node.value.__class__ in (int, float):
            out.append(node.value)
        else:
            return None
    return tuple(out)


class SlotPool:
    """The idle slots of a cycle, grouped into classes, plus the claimed ones.

    Args:
        roots: names the cycle's job expressions read (added to :data:`BASE_ROOTS`).
        job_names: every attribute name some request's job ad defines; a slot expression
            reading one of them unresolved depends on the job.
        pre_rank, post_rank: the compiled NEGOTIATOR_PRE/POST_JOB_RANK (None: 0).
    """

    #: the attributes that exist once the slots are classed (see :meth:`__getattr__`)
    _CLASSED = frozenset({"classes", "base_reps", "avail_log"})

    def __init__(self, roots: Iterable[str], job_names: set[str],
                 pre_rank: ExprTree | None, post_rank: ExprTree | None):
        self.roots = BASE_ROOTS | {r.lower() for r in roots}
        self.job_names = job_names
        self.pre_rank = pre_rank
        self.post_rank = post_rank
        #: the idle slots, in the order they were added (classed on first need)
        self.slots: list[Slot] = []
        # Set by _classify, on the first read of one of them (see __getattr__):
        #   classes: list[SlotClass]
        #   base_reps: list[SlotClass], base id -> its first class (all classes of a base
        #       agree on all but the carved)
        #   avail_log: list[int], class ids in the order they (re)gained a free slot;
        #       requests replay it lazily
        self._by_key: dict[tuple, SlotClass] = {}
        self._bases: dict[tuple, int] = {}  # base key -> base id (see _place)
        self.claimed: list[Slot] = []
        self._seq = itertools.count()
        #: (pre or post, the values its names read) -> a static rank's value
        self._rank_values: dict[tuple, float] = {}
        self._uncached_ranks = {id(e) for e in (pre_rank, post_rank)
                                if e is not None and "random" in repr(e).lower()}
        self._pre_refs = pre_rank.attributes() if pre_rank is not None else set()
        self._post_refs = post_rank.attributes() if post_rank is not None else set()

    def _static_or_roots(self, slot: Slot, refs: set[str]) -> tuple[bool, set[str]]:
        """Does a negotiator rank read the job on this slot? Returns (dynamic, names read)."""
        if any(r.startswith("target.") for r in refs):
            return True, {r for r in refs if not r.startswith("target.")}
        names, targets = closure(slot.ad, refs)
        dynamic = bool(targets) or any(n not in slot.ad and n in self.job_names for n in names)
        return dynamic, names

    def __getattr__(self, name: str):
        # Called only for attributes not found the ordinary way: the classes before the first
        # read. Build them then; anything else is a real AttributeError.
        if name not in SlotPool._CLASSED:
            raise AttributeError(name)
        self._classify()
        return self.__dict__[name]

    @property
    def classed(self) -> bool:
        """Have the slots been classed (did a search read the classes)?"""
        return "classes" in self.__dict__

    @property
    def class_count(self) -> int:
        """How many slot classes were built (0 when no search read them)."""
        return len(self.__dict__.get("classes", ()))

    def add(self, slot: Slot) -> None:
        """Add an idle slot (classed now if the classes exist, else when first read)."""
        self.slots.append(slot)
        if self.classed:
            self._class_slot(slot)

    def add_all(self, slots: list[Slot]) -> None:
        """:meth:`add` each of ``slots`` in order (a cycle adds its idle slots at once)."""
        self.slots.extend(slots)
        if self.classed:
            for slot in slots:
                self._class_slot(slot)

    def free_slots(self) -> list[Slot]:
        """The idle slots not taken, each once, in the order they were added."""
        return [slot for slot in self.slots if not slot.taken]

    def _classify(self) -> None:
        """Class every idle slot not taken, in the order added (see the module docstring)."""
        self.classes, self.base_reps, self.avail_log = [], [], []
        for slot in self.slots:
            if not slot.taken:
                slot.cls = None
                self._class_slot(slot)

    def _class_slot(self, slot: Slot) -> None:
        """Compute a slot's static ranks and class."""
        roots = set(self.roots)
        pre_names = post_names = ()
        if self.pre_rank is not None:
            slot.pre_dynamic, names = self._static_or_roots(slot, self._pre_refs)
            if slot.pre_dynamic:
                roots |= names
            else:
                pre_names = tuple(sorted(names))
        if self.post_rank is not None:
            slot.post_dynamic, names = self._static_or_roots(slot, self._post_refs)
            if slot.post_dynamic:
                roots |= names
            else:
                post_names = tuple(sorted(names))
        slot.rank_names = (pre_names, post_names)
        self._static_ranks(slot)
        self._place(slot, roots)

    def _static_ranks(self, slot: Slot) -> None:
        """Evaluate the slot's static pre- and post-job ranks: once per distinct value of
        what they read (slots alike in those share it; ``random()`` is evaluated each time)."""
        ad = slot.ad
        for expr, dynamic, names, attr in ((self.pre_rank, slot.pre_dynamic, slot.rank_names[0], "pre"),
                                           (self.post_rank, slot.post_dynamic, slot.rank_names[1], "post")):
            if expr is None or dynamic:
                continue
            if id(expr) in self._uncached_ranks:
                setattr(slot, attr, eval_rank(expr, ad, None))
                continue
            key = (attr, tuple([_value_key(ad, n) for n in names]))
            value = self._rank_values.get(key)
            if value is None:
                value = self._rank_values[key] = eval_rank(expr, ad, None)
            setattr(slot, attr, value)

    def _place(self, slot: Slot, roots: set[str] | None) -> None:
        # The key is (base, Cpus, Memory, Disk): the base is everything else matching reads,
        # computed once per slot (carving changes only those three literals, so a shrunk slot
        # keeps its base and is re-keyed by arithmetic, not by following references again).
        ad = slot.ad
        if slot.base is None:
            names, _ = closure(ad, roots)
            base_key = (slot.pre_dynamic, slot.post_dynamic,
                        *((n, _value_key(ad, n)) for n in sorted(names) if n not in CARVED))
            base = self._bases.get(base_key)
            if base is None:
                base = self._bases[base_key] = len(self._bases)
            slot.base = base
        key = (slot.base, _value_key(ad, "cpus"), _value_key(ad, "memory"),
               _value_key(ad, "disk"))
        cls = self._by_key.get(key)
        if cls is None:
            # classes of one base read the same of the job (their expressions are the same)
            rep = self.base_reps[slot.base] if slot.base < len(self.base_reps) else None
            cls = SlotClass(len(self.classes), key, slot,
                            None if rep is None else rep.job_reads)
            self.classes.append(cls)
            self._by_key[key] = cls
            if rep is None:
                self.base_reps.append(cls)  # the first class of a new base stands for it
        was_empty = cls.best() is None
        slot.cls = cls
        heapq.heappush(cls.members, (slot.order_key(), next(self._seq), slot))
        if was_empty or cls.members[0][2] is slot:
            # new best member: requests must reconsider this class
            self.avail_log.append(cls.id)

    def close(self) -> None:
        """Forget every slot and class at the end of the cycle (the pool is not used again).

        A slot and its class refer to each other (``Slot.cls``, ``SlotClass.members``): unlinked,
        the cycle's slots, classes and keys go by reference counting when the cycle drops them,
        rather than in a garbage-collector pass over everything the cycle allocated."""
        for cls in self.__dict__.get("classes", ()):
            for _key, _seq, slot in cls.members:
                slot.cls = None
            cls.members = []
        for slot in self.claimed:
            slot.cls = None
        self.classes, self.base_reps, self.avail_log, self.claimed = [], [], [], []
        self.slots = []
        self._by_key, self._bases, self._rank_values = {}, {}, {}

    def take(self, slot: Slot) -> None:
        """Remove a slot from the cycle (matched)."""
        slot.taken = True
        slot.cls = None

    def reclass(self, slot: Slot) -> None:
        """Re-key a partitionable slot whose ad just shrank (its base stays)."""
        slot.cls = None
        if not self.classed:
            self._classify()  # (which classes the slot as it is now)
            return
        self._static_ranks(slot)
        self._place(slot, None)

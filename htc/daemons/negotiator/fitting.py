"""What a partitionable slot can give a job: the request, fitting, and the cost of a carve.

Theory of operation
-------------------
A job asks a partitionable slot for ``RequestCpus``, ``RequestMemory`` and ``RequestDisk``,
quantized as the startd's ``MODIFY_REQUEST_EXPR_*`` defaults do (:meth:`Fitting.fits`). When
the three are literals the request is the same against every slot and is remembered per job
(:meth:`Fitting.literal_wants`); a slot class keeps its own ``Cpus``, ``Memory`` and ``Disk``
as numbers (:attr:`~.slots.SlotClass.res`), so fitting a literal request to a class is three
comparisons (:meth:`Fitting.fits_class`), with the int/float comparison ClassAd makes. Anything
else (a request that reads the slot, a resource that is an expression) is evaluated.

:class:`Fitting` is a part of :class:`~htc.daemons.negotiator.search.IdleSearch`, which
provides ``s`` (the settings) and ``_wants`` (``id(job) -> (job, its literal request)``: the
entry keeps its job alive, so no other job can take its id while it is remembered).
"""

from __future__ import annotations

from htc.classad import ClassAd, ExprTree
from htc.classad.ast import Literal
from htc.daemons.negotiator.slotreads import number, quantize, slot_weight
from htc.daemons.negotiator.slots import Slot

_CARVED_NAMES = ("Cpus", "Memory", "Disk")
_NUMBERS = (int, float)
_REQUESTS = ("RequestCpus", "RequestMemory", "RequestDisk")


def too_small(res: tuple, wants: tuple) -> bool:
    """Does a class with resources ``res`` (None: the ad does not say) lack room for
    ``wants``?"""
    c, m, d = res
    return ((c is not None and wants[0] > c) or (m is not None and wants[1] > m)
            or (d is not None and wants[2] > d))


class Fitting:
    """Requests and fitting for the idle-slot search (see the module docstring)."""

    s: object
    _wants: dict[int, tuple[ClassAd, tuple[float, float, float]]]

    def fits(self, job: ClassAd, ad: ClassAd) -> tuple[float, float, float] | None:
        """The (cpus, memory, disk) a p-slot ``ad`` would carve for ``job``, or None if it can't."""
        hit = self._wants.get(id(job))
        wants = hit[1] if hit is not None and hit[0] is job else self._request(job, ad)
        exprs = ad._exprs
        for want, have_name in zip(wants, _CARVED_NAMES):
            node = exprs.get(have_name.lower())
            if node is None:
                continue  # a slot that does not say has enough
            if node.__class__ is Literal and node.value.__class__ in _NUMBERS:
                have = node.value
            else:
                have = number(ad, have_name)
            if have is not None and want > have:
                return None
        return wants

    def _request(self, job: ClassAd, ad: ClassAd | None) -> tuple[float, float, float]:
        """The (cpus, memory, disk) ``job`` asks of slot ``ad``, quantized; remembered when the
        job's request attributes are literals (the same against every slot)."""
        s = self.s
        cpus = max(1.0, quantize(number(job, "RequestCpus", 1.0, ad), s.cpus_quantum))
        memory = quantize(number(job, "RequestMemory", 0.0, ad), s.memory_quantum)
        disk = quantize(number(job, "RequestDisk", 0.0, ad), s.disk_quantum)
        wants = (cpus, memory, disk)
        if not any(isinstance(job.get(n), ExprTree)
                   for n in _REQUESTS):
            # literals: the same against every slot (the entry holds the job: see the module
            # docstring)
            self._wants[id(job)] = (job, wants)
        return wants

    def literal_wants(self, job: ClassAd) -> tuple[float, float, float] | None:
        """The job's (cpus, memory, disk) request when it reads no slot (else None)."""
        hit = self._wants.get(id(job))
        if hit is not None and hit[0] is job:
            return hit[1]
        if any(isinstance(job.get(n), ExprTree) for n in _REQUESTS):
            return None
        return self._request(job, None)

    def fits_class(self, job: ClassAd, cls) -> tuple[float, float, float] | None:
        """:meth:`fits` against a partitionable class's ad, by arithmetic on the numbers the
        class keeps (:attr:`~.slots.SlotClass.res`) when the job's request is literal."""
        res = cls.res
        wants = self.literal_wants(job)
        if res is None or wants is None:
            return self.fits(job, cls.ad)
        return None if too_small(res, wants) else wants

    def cost(self, slot: Slot, carve) -> float:
        """The slot weight a match costs: the slot's, or that of the dynamic slot carved."""
        if carve is None:
            return slot.weight
        if not self.s.use_slot_weights:
            return 1.0
        if "SlotWeight" not in slot.ad:
            return carve[0] if carve[0] >= 0 else 1.0  # GetSlotWeight falls back to Cpus
        dslot = slot.ad.copy()
        dslot["Cpus"], dslot["Memory"], dslot["Disk"] = carve
        return slot_weight(dslot, True)

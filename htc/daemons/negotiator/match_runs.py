"""A cycle's matches as runs: one record per request and slot, expanded into matches on demand.

Theory of operation
-------------------
A partitionable slot gives a request many jobs at once (:mod:`.runs`: case 1 of
``benchmarks/negotiator_bench.py`` makes 81,642 matches in about 13,000 runs). The matches of
one run share everything but three values: the job (the request's next job ids, in order), the
claim id the cycle mints (``<slot>#<cycle>.<n>`` for consecutive ``n``, or the slot's own claim
id for all of them) and the slot's ``Cpus``, ``Memory`` and ``Disk`` before each carve (what
each match's :class:`~.matched_ad.MatchedSlotAd` is built from). So the cycle records a
:class:`MatchRun` per run -- the shared values once, the sizes as the list the run already
computed, or for a fill's run (whole numbers, a carve apart) as a :class:`Steps` that makes them
when read -- and makes no object per job.

:meth:`MatchRun.matches` expands a run into its :class:`Match` es, exactly the values, in the
order, a match per job made before (``tests/unit/test_negotiator_match_runs.py`` compares them
on random pools). :class:`~.cycle.CycleResult` hands over the runs and expands them only when a
caller reads its ``matches``; the negotiator core hands the runs on (one
:class:`~.events.NotifyMatches` each), and the adapter makes each run's MatchNotify messages
from the run directly (:mod:`.adapter`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

from htc.classad import ClassAd
from htc.daemons.negotiator.matched_ad import MatchedSlotAd
from htc.daemons.negotiator.preemption import PreemptState

__all__ = ["Match", "MatchRun", "Steps", "expand", "new_match", "new_run"]


class Match(NamedTuple):
    """A slot given to one job of a request; the service tells the schedd and the startd.
    (A named tuple: built in one step, where a frozen dataclass set its 13 fields one by one.)"""

    submitter: str
    schedd: str
    schedd_address: str
    autocluster_id: int
    job_id: str | None
    slot_name: str
    startd_address: str
    claim_id: str
    slot_ad: ClassAd
    preemption: PreemptState
    preempted_user: str | None
    weight: float
    carved: tuple[float, float, float] | None = None  # (cpus, memory, disk) of a p-slot


#: a :class:`Match` from the tuple of all 13 of its fields in order (``carved`` too): no
#: argument binding, so half the cost of ``Match(...)``; the caller passes every field,
#: nothing checks their number
new_match = partial(tuple.__new__, Match)


class MatchRun(NamedTuple):
    """``count`` matches of one request's jobs on one slot, made one after the other (see the
    module docstring); :meth:`matches` gives them."""

    submitter: str
    schedd: str
    schedd_address: str
    autocluster_id: int
    #: the request's job ids; the run's jobs are ``job_ids[first_job:first_job + count]``
    #: (None for a match past its end: a request may count more jobs than it names)
    job_ids: Sequence[str]
    first_job: int
    count: int
    slot_name: str
    startd_address: str
    #: the slot's claim id, which every match of the run offers; when None, each mints its
    #: own: ``f"{slot_name}#{cycle}.{first_claim + i}"``
    claim_id: str | None
    cycle: int
    first_claim: int
    #: with ``sizes``: the cycle's ad of the slot, each match's ad its view at those sizes
    #: (:class:`~.matched_ad.MatchedSlotAd`); without: the ad every match offers
    slot_ad: ClassAd
    #: the slot's (cpus, memory, disk) before each match, ``count`` of them; or None
    sizes: Sequence[tuple] | None
    preemption: PreemptState
    preempted_user: str | None
    weight: float
    carved: tuple[float, float, float] | None

    def claim_ids(self) -> list[str]:
        """The claim id of each match, in order."""
        if self.claim_id is not None:
            return [self.claim_id] * self.count
        prefix, first = f"{self.slot_name}#{self.cycle}.", self.first_claim
        return [f"{prefix}{first + i}" for i in range(self.count)]

    def job_id_list(self) -> list[str | None]:
        """The job id of each match, in order."""
        first, count, ids = self.first_job, self.count, self.job_ids
        have = ids[first:first + count]
        return [*have, *[None] * (count - len(have))] if len(have) < count else list(have)

    def slot_ads(self) -> list[ClassAd]:
        """The slot ad each match offers, in order."""
        ad, sizes = self.slot_ad, self.sizes
        if sizes is None:
            return [ad] * self.count
        return [MatchedSlotAd(ad, have) for have in sizes]

    def matches(self) -> list[Match]:
        """The run's matches, one per job, in order."""
        (submitter, schedd, address, acid, _ids, _first, _count, slot_name, startd, _claim,
         _cycle, _seq, _ad, _sizes, state, victim, weight, carved) = self
        return [new_match((submitter, schedd, address, acid, job, slot_name, startd, claim, ad,
                           state, victim, weight, carved))
                for job, claim, ad in zip(self.job_id_list(), self.claim_ids(), self.slot_ads())]

    @classmethod
    def of(cls, match: Match) -> MatchRun:
        """A run of the one ``match`` (whose expansion is a match equal to it)."""
        return cls(match.submitter, match.schedd, match.schedd_address, match.autocluster_id,
                   (match.job_id,), 0, 1, match.slot_name, match.startd_address, match.claim_id,
                   0, 0, match.slot_ad, None, match.preemption, match.preempted_user,
                   match.weight, match.carved)


#: a :class:`MatchRun` from the tuple of all 18 of its fields in order (as :data:`new_match`)
new_run = partial(tuple.__new__, MatchRun)


class Steps(Sequence):
    """A run's sizes (:attr:`MatchRun.sizes`) when they are whole numbers a carve apart: the
    slot's ``(cpus, memory, disk)`` before each of ``count`` carves, ``start`` less ``j``
    times ``carve`` at step ``j``, made when read. A fill's runs (:func:`~.runs.commit_fill`)
    keep their sizes so, not as a list of tuples each; the tuples it gives (of ints when
    ``start`` and ``carve`` are ints) are equal to that list's, and it compares equal to any
    sequence of them."""

    __slots__ = ("start", "carve", "count")

    def __init__(self, start: tuple, carve: tuple, count: int):  # noqa: D107 - the class's
        self.start = start
        self.carve = carve
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        (h0, h1, h2), (k0, k1, k2), n = self.start, self.carve, self.count
        return zip(range(h0, h0 - n * k0, -k0), range(h1, h1 - n * k1, -k1),
                   range(h2, h2 - n * k2, -k2))

    def __getitem__(self, index):
        if index.__class__ is slice:
            return list(self)[index]
        j = range(self.count)[index]  # (an index out of range raises IndexError, as a list's)
        return tuple(h - j * k for h, k in zip(self.start, self.carve))

    def __eq__(self, other) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == self.count and list(self) == list(other)

    __hash__ = None  # (equal to a list: unhashable as one)

    def __repr__(self) -> str:
        return repr(list(self))


def expand(runs) -> tuple[Match, ...]:
    """The matches of ``runs``, in order."""
    out: list[Match] = []
    for run in runs:
        out.extend(run.matches())
    return tuple(out)

"""Slots a recent cycle gave away whose startds have not reported the claims yet.

Theory of operation
-------------------
HTCondor keeps cycles 20 s apart (``NEGOTIATOR_CYCLE_DELAY``) because the startds need time to
report the claims of the last cycle; a cycle that ran sooner would see a slot it just gave away
as free and give it away again. htc remembers instead: a slot matched in a cycle is *pending*
until its ad in the collector changes -- the startd carved it or claimed it -- or
``NEGOTIATOR_TIMEOUT`` passes (the match lapsed). Until then a later cycle leaves a pending
static slot out and sees a pending partitionable slot without what was carved from it
(:meth:`PendingSlots.apply`), so back-to-back cycles neither wait nor match a slot twice.

A schedd that does not take a match (it answers MatchNotify with ``MATCH_LAPSED``) gives back
what the match held at once (:meth:`PendingSlots.lapsed`).
"""

from __future__ import annotations

from htc.classad import ClassAd
from htc.classad.ast import Literal
from htc.classad.values import INT64_MAX, INT64_MIN
from htc.daemons.negotiator.slotreads import SCALARS, fast_get, fast_read, literal

__all__ = ["PendingSlots"]

#: what tells one report of a slot from the next: the startd's update counter, else (an ad
#: without one) the attributes that change when a startd claims or carves the slot; each as
#: (lower-case name, name) for fast_read
_REPORT = tuple((name.lower(), name) for name in ("DaemonStartTime", "UpdateSequenceNumber"))
_CLAIM_SIGNATURE = tuple((name.lower(), name) for name in (
    "State", "Activity", "Cpus", "Memory", "Disk", "ClaimId"))

_CARVED = (("cpus", "Cpus"), ("memory", "Memory"), ("disk", "Disk"))
_NO_TABLE = object()  # what _less looks up in a plain mapping: read with its get
_PLAIN = frozenset({int, float})  # the numbers _less writes as literal nodes (not bool)


def _less(ad, carved) -> bool:
    """Take ``carved`` (cpus, memory, disk) off the numbers of a slot ad's copy; False when
    less than a core or no memory is left. (Each value read as ``ad.get`` gives it, a scalar
    literal straight from the ad's table: the ad of each pending slot, at every cycle.)"""
    exprs = getattr(ad, "_exprs", None)
    table = ad.table if ad.__class__ is ClassAd else None  # (the class whose __setitem__ it is)
    if table is not None:
        # the usual ad: three int or float literals, their new values written as below
        cpus, memory, disk = table.get("cpus"), table.get("memory"), table.get("disk")
        if cpus.__class__ is Literal and memory.__class__ is Literal and disk.__class__ is Literal:
            c, m, d = cpus.value, memory.value, disk.value
            if c.__class__ in _PLAIN and m.__class__ in _PLAIN and d.__class__ in _PLAIN:
                less_c, less_m, less_d = carved
                c = int(c - less_c) if c.__class__ is int else c - less_c
                m = int(m - less_m) if m.__class__ is int else m - less_m
                d = int(d - less_d) if d.__class__ is int else d - less_d
                if (c.__class__ in _PLAIN and m.__class__ in _PLAIN and d.__class__ in _PLAIN
                        and INT64_MIN <= c <= INT64_MAX and INT64_MIN <= m <= INT64_MAX
                        and INT64_MIN <= d <= INT64_MAX):
                    table["cpus"], table["memory"], table["disk"] = (
                        literal(c), literal(m), literal(d))
                    return not (c < 1 or m <= 0)
    left = []
    for (low, attr), amount in zip(_CARVED, carved):
        node = exprs.get(low) if exprs is not None else _NO_TABLE
        if node is None:
            have = None  # (ad.get: a missing name)
        elif node.__class__ is Literal and node.value.__class__ in SCALARS:
            have = node.value
        else:
            have = ad.get(attr)
        if isinstance(have, (int, float)) and not isinstance(have, bool):
            have = type(have)(have - amount) if isinstance(have, int) else have - amount
            if table is not None and (have.__class__ is float or have.__class__ is int
                                      and INT64_MIN <= have <= INT64_MAX):
                table[low] = literal(have)  # (what ad[attr] = have stores, its node shared)
            else:
                ad[attr] = have  # (which ad.get reads back as the same number)
        left.append(have)
    # (None for a missing name, where ad.get's default was 1: neither is a number below one)
    cpus, memory = left[0], left[1]
    return not (isinstance(cpus, (int, float)) and cpus < 1
                or isinstance(memory, (int, float)) and memory <= 0)


class PendingSlots:
    """Slots matched by recent cycles whose startds have not reported the claims yet.

    Keyed by slot name: which report of the slot was matched (the startd's
    ``UpdateSequenceNumber``; for an ad without one, its State, Activity, resources and
    ClaimId), what was given away on it (the whole slot, or the sum of the carves from a
    partitionable slot) and until when the record holds. A newer report is the startd's
    answer: the record is dropped and the ad is taken as it is. (Content alone cannot tell: a
    p-slot whose claim came and went between two cycles looks as it did.)
    """

    def __init__(self) -> None:
        self._slots: dict[str, tuple[tuple, bool, list[float], float]] = {}
        #: slot name -> what its recorded matches gave away, a grant per run: (the slot's claim
        #: id or None, the first minted claim id's sequence number, the cycle, how many
        #: matches, autocluster, carve or None for the whole slot); a slot one of whose matches
        #: the schedd let lapse holds one per match instead, (claim id, autocluster, carve),
        #: so that the match gives back what it held (:meth:`_matches`)
        self._given: dict[str, list[tuple]] = {}

    def __len__(self) -> int:
        return len(self._slots)

    @staticmethod
    def _signature(ad) -> tuple:
        exprs = getattr(ad, "_exprs", None)
        if exprs is not None:
            # the usual ads read at once (a cycle reads the signature of every slot it matched,
            # the next one of every slot pending); anything else takes the general path
            get = exprs.get
            counter = get("updatesequencenumber")
            if counter is None:  # no update counter: six literals
                state, activity, cpus, memory, disk, claim = (
                    get("state"), get("activity"), get("cpus"), get("memory"), get("disk"),
                    get("claimid"))
                if (state.__class__ is Literal and activity.__class__ is Literal
                        and cpus.__class__ is Literal and memory.__class__ is Literal
                        and disk.__class__ is Literal and claim.__class__ is Literal):
                    out = (state.value, activity.value, cpus.value, memory.value, disk.value,
                           claim.value)
                    if set(map(type, out)) <= SCALARS:
                        return out
            elif counter.__class__ is Literal and counter.value.__class__ in SCALARS:
                # a startd's report: when the startd started, and its update counter
                start = get("daemonstarttime")
                if start is None:
                    return (None, counter.value)
                if start.__class__ is Literal and start.value.__class__ in SCALARS:
                    return (start.value, counter.value)
        return PendingSlots._read_signature(ad, exprs)

    @staticmethod
    def _read_signature(ad, exprs) -> tuple:
        """:meth:`_signature` name by name (``exprs``: the ad's table, None for a mapping)."""
        if exprs is None:  # a plain mapping
            names = _REPORT if ad.get("UpdateSequenceNumber") is not None else _CLAIM_SIGNATURE
            return tuple([ad.get(name) for _low, name in names])
        # fast_get of each name, inlined
        node = exprs.get("updatesequencenumber")
        if node is None:
            names = _CLAIM_SIGNATURE
        elif node.__class__ is Literal and node.value.__class__ in SCALARS:
            names = _REPORT
        else:
            names = _CLAIM_SIGNATURE if ad.get("UpdateSequenceNumber") is None else _REPORT
        out = []
        for low, name in names:
            node = exprs.get(low)
            if node is None:
                out.append(None)
            elif node.__class__ is Literal and node.value.__class__ in SCALARS:
                out.append(node.value)
            else:
                out.append(ad.get(name))
        return tuple(out)

    def record(self, runs, machines, until: float) -> None:
        """Remember the slots ``runs`` (:class:`~.match_runs.MatchRun`) gave away.

        ``machines``: the ads the cycle saw, or the same by name, the last ad of each name
        (:attr:`.CycleResult.ads_by_name`: the cycle read every name already)."""
        if isinstance(machines, dict):
            ads = machines
        else:
            ads = {fast_read(getattr(ad, "_exprs", None), ad, "name", "Name"): ad
                   for ad in machines}
        slots, given = self._slots, self._given
        work: dict[str, list] = {}  # slot name -> [signature, whole, cpus, memory, disk carved]
        name = entry = mine = None
        for run in runs:
            slot_name = run.slot_name
            if slot_name != name:  # (a slot's runs often come one after the other)
                name = slot_name
                entry = work.get(name)
                if entry is None:
                    ad = ads.get(name)
                    if ad is not None:
                        record = slots.get(name)
                        if record is None:  # (the signature only for a slot not seen yet)
                            entry = [self._signature(ad), False, 0.0, 0.0, 0.0]
                        else:
                            entry = [record[0], record[1], *record[2]]
                        work[name] = entry
                if entry is not None:
                    mine = given.get(name)
                    if mine is None:
                        mine = given[name] = []
            if entry is None:
                continue  # not a slot of this cycle's ads
            carved, count = run.carved, run.count
            if carved is None:
                entry[1] = True
            else:  # the carves of a slot summed one by one, in the order they were made
                cpus, memory, disk = carved
                c, m, d = entry[2], entry[3], entry[4]  # (summed in locals)
                for _ in range(count):
                    c += cpus
                    m += memory
                    d += disk
                entry[2], entry[3], entry[4] = c, m, d
            mine.append((run.claim_id, run.first_claim, run.cycle, count, run.autocluster_id,
                         carved))
        for name, (signature, whole, cpus, memory, disk) in work.items():
            slots[name] = (signature, whole, [cpus, memory, disk], until)

    def _matches(self, slot_name: str) -> list[tuple]:
        """The recorded matches of ``slot_name``, one (claim id, autocluster, carve) each, in
        the order they were made (its grants expanded, once)."""
        given = self._given.get(slot_name)
        if given is None:
            return []
        if any(len(g) == 6 for g in given):
            given[:] = [one for g in given for one in (
                [g] if len(g) == 3 else
                [(claim, g[4], g[5]) for claim in (
                    [g[0]] * g[3] if g[0] is not None else
                    [f"{slot_name}#{g[2]}.{g[1] + i}" for i in range(g[3])])])]
        return given

    def lapsed(self, slot_name: str, claim_id: str, autocluster_id: int | None) -> bool:
        """A schedd let a match of ``slot_name`` lapse: give back what it held (True: found)."""
        given = self._matches(slot_name)
        found = next((g for g in given if g[0] == claim_id and g[1] == autocluster_id), None) \
            or next((g for g in given if g[0] == claim_id), None)
        record = self._slots.get(slot_name)
        if found is None or record is None:
            return False
        given.remove(found)
        signature, whole, carved, until = record
        if found[2] is not None:
            carved = [max(0.0, have - back) for have, back in zip(carved, found[2])]
        whole = any(g[2] is None for g in given)
        if not whole and not any(amount > 0 for amount in carved):
            self._forget(slot_name)
        else:
            self._slots[slot_name] = (signature, whole, carved, until)
        return True

    def _forget(self, slot_name: str) -> None:
        self._slots.pop(slot_name, None)
        self._given.pop(slot_name, None)

    def apply(self, machines: list, now: float) -> list:
        """The slot ads as a cycle at ``now`` should see them: pending slots held back."""
        if not self._slots:
            return list(machines)  # nothing pending: every ad as it is
        out = []
        seen = set()
        for ad in machines:
            name = fast_get(ad, "Name")
            seen.add(name)
            pending = self._slots.get(name)
            if pending is None:
                out.append(ad)
                continue
            signature, whole, carved, until = pending
            if now >= until or self._signature(ad) != signature:
                self._forget(name)  # the startd reported, or the match lapsed
                out.append(ad)
                continue
            if whole:
                continue
            ad = ad.copy()
            if _less(ad, carved):
                out.append(ad)  # (else all of it is on its way to the schedds)
        for name in [n for n in self._slots if n not in seen]:
            self._forget(name)  # the slot is gone from the pool
        return out

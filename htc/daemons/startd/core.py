"""The startd core: slots, claims and the owner's policy, without I/O.

Theory of operation
-------------------
``Startd.handle(event, now)`` takes one event (:mod:`htc.daemons.startd.events`) and returns the
actions the service must carry out; ``next_deadline()`` says when to call again with a
:class:`Tick` if nothing else happens. The core never reads the clock, a file or a socket.

Slots. The machine's resources (cpus, MiB of memory, KiB of disk) are either one partitionable
slot (``slot1@host``, HTCondor's default since 23.0) or N static slots. A claim on the p-slot
carves a dynamic slot (``slot1_1@host``) of the job's RequestCpus/RequestMemory/RequestDisk,
rounded up to the quanta; when the d-slot's claim ends the d-slot is deleted and its resources
return to the p-slot. The p-slot itself never leaves Owner/Unclaimed/Drained.

Moves. Every slot is in a (state, activity) pair; it moves only through the table
(:data:`htc.daemons.startd.states.TABLE`, applied by :func:`htc.transitions.transition`).
Events move slots directly (a claim request is trigger CLAIM); after every event the core *evaluates* each slot -- policy expressions
(START, SUSPEND, ...) over the slot ad with the claim's job ad as TARGET, plus timers -- and
applies the triggers that fire, repeating until the slot is quiet (Matched->Owner->Unclaimed
happens in one evaluation, as in HTCondor). Arriving in a pair may emit process actions:
Suspended emits SuspendJob, Vacating emits VacateJob, Killing emits KillJob.

Claims. A slot advertises a claim id (privately); a schedd presents it in RequestClaim. A
claimed slot advertises a fresh id that a *better* claimant (higher startd RANK, or a
negotiator priority preemption) may present: the running claim retires and, once its job is
gone, the slot is Claimed/Idle by the newcomer (transition I). Leases: each claim expires
``lease`` seconds after the last KeepAlive; an expired claim is evicted.

Policy timers use the desktop policy's attributes: EnteredCurrentState/Activity, JobStart,
CpuBusyTime (when the non-HTCondor load last became high; 0 when it is not).

The job's own execute limit (AllowedExecuteDuration, :mod:`htc.daemons.startd.timers`): a job
that breaks it gets a :class:`HoldJob`; the slot does not move for it (the claim stays with its
schedd). Which trigger fires for a slot is :mod:`htc.daemons.startd.evaluation`'s to say.
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from htc.daemons.startd import events as ev
from htc.daemons.startd import timers
from htc.daemons.startd.evaluation import Chore, Evict, Reading, verdict
from htc.daemons.startd.settings import StartdSettings
from htc.daemons.startd.timers import execute_limit
from htc.daemons.startd.slots import (
    Claim,
    DrainRequest,
    Moved,
    Slot,
    UnknownClaim,
    build_slot_ad,
    claim_holder,
    number_attr,
    quantize,
    share,
)
from htc.daemons.startd.states import TABLE, Activity, State, Transition, Trigger, refusal
from htc.errors import UsageError
from htc.transitions import transition

# StartdSettings, UnknownClaim, Slot, Claim, Moved and execute_limit are re-exported for importers.
__all__ = ["Startd", "StartdSettings", "UnknownClaim", "Slot", "Claim", "Moved", "execute_limit"]

S, A, T = State, Activity, Trigger
_BUSY = timers.BUSY


class Startd:
    """The startd's decisions. See the module docstring for how it works.

    Args:
        settings: resources, policy and timer knobs.
        now: the time the startd starts (slots enter Owner at this time).
    """

    def __init__(self, settings: StartdSettings, now: float):
        if settings.cpus < 1 or settings.memory < 1 or settings.disk < 0:
            raise UsageError(
                f"{settings.name}: cannot build slots from cpus={settings.cpus}, memory={settings.memory} MiB, "
                f"disk={settings.disk} KiB; each must be positive (check NUM_CPUS / MEMORY / the execute dir)"
            )
        self.settings = settings
        self.policy = settings.policy
        self.slots: dict[str, Slot] = {}
        self.sensors: dict[str, Any] = {}
        self.drain: DrainRequest | None = None
        self._cpu_busy_since: float = 0.0
        self._seq = 0
        self._dirty: set[str] = set()
        self._last_advertise = now - settings.update_interval  # the first event advertises every slot
        self._last_eval = now
        #: the last steps taken, newest last: for `htc status -l`-style debugging and the tests
        self.transition_log: deque[Moved] = deque(maxlen=512)
        n = settings.static_slots
        if n <= 0:
            self._add_slot(1, "Partitionable", settings.cpus, settings.memory, settings.disk, now)
        else:
            for i in range(1, n + 1):
                self._add_slot(i, "Static", max(1, share(settings.cpus, n, i)), share(settings.memory, n, i),
                               share(settings.disk, n, i), now)

    # ------------------------------------------------------------------------ public API
    def handle(self, event: ev.CoreEvent, now: float) -> list[ev.CoreAction]:
        """Apply one event at time ``now`` and return what the service must do.

        Raises:
            IllegalTransition: the event asks a slot for a step the table forbids.
            UnknownClaim: the event names a claim this startd does not hold.
            UsageError: the event is malformed (unknown slot, unknown drain mode).
        """
        out: list[ev.CoreAction] = []
        handler = _ON_EVENT.get(type(event))
        if handler is None:
            raise UsageError(f"{self.settings.name}: the startd core has no handler for {type(event).__name__}")
        handler(self, event, now, out)
        self._evaluate(now, out)
        self._advertise(now, out)
        return out

    def next_deadline(self) -> float | None:
        """When the core next wants a :class:`Tick` (timers, policy polling, ad refresh)."""
        busy = any(s.state in (S.MATCHED, S.CLAIMED, S.PREEMPTING) for s in self.slots.values())
        times = [self._last_eval + (self.settings.polling_interval if busy else self.settings.update_interval)]
        times.append(self._last_advertise + self.settings.update_interval)
        for slot in self.slots.values():
            times += timers.slot_deadlines(slot, self.settings)
        return min(times)

    def slot(self, name: str) -> Slot:
        """The slot called ``name`` (``slot1@host`` or just ``slot1``).

        Raises:
            UsageError: there is no such slot.
        """
        found = self.slots.get(name) or self.slots.get(f"{name}@{self._slots_at}")
        if found is None:
            raise UsageError(f"{self.settings.name} has no slot {name!r}; its slots are {sorted(self.slots)}")
        return found

    def slot_ad(self, slot: Slot, now: float) -> dict[str, Any]:
        """The machine ad of ``slot`` as it stands at ``now`` (what the collector receives)."""
        return build_slot_ad(slot, self.settings, self.policy, self.sensors, self._cpu_busy_since,
                             self.drain is not None, now)

    # ----------------------------------------------------------------------- slot plumbing
    @property
    def _slots_at(self) -> str:
        """What follows the ``@`` of this startd's slot names (the host, or STARTD_NAME@host)."""
        return self.settings.slots_at or self.settings.machine

    def _new_claim_id(self, slot_name: str) -> str:
        self._seq += 1
        return f"{slot_name}#{self._seq}#{secrets.token_hex(16)}"

    def _add_slot(self, slot_id: int, kind: str, cpus: int, memory: int, disk: int, now: float,
                  parent: Slot | None = None) -> Slot:
        if parent is None:
            name = f"slot{slot_id}@{self._slots_at}"
            sub = 0
        else:
            sub = parent.next_child
            parent.next_child += 1
            name = f"slot{slot_id}_{sub}@{self._slots_at}"
        slot = Slot(name, slot_id, kind, cpus, memory, disk, now, self._new_claim_id(name), parent=parent, sub_id=sub)
        self.slots[name] = slot
        if parent is not None:
            parent.children.append(slot)
            self._dirty.add(parent.name)
        self._dirty.add(name)
        return slot

    def _step(self, slot: Slot, trigger: Trigger) -> Transition:
        """The table's row for ``trigger`` from where ``slot`` is.

        Raises:
            IllegalTransition: there is none (the message is :func:`~htc.daemons.startd.states.refusal`).
        """
        name = self.settings.name
        return transition(TABLE, f"{name}: slot {slot.name}", (slot.state, slot.activity), trigger,
                          explain=partial(refusal, name, slot.name, slot.state, slot.activity, trigger))

    def _move(self, slot: Slot, trigger: Trigger, now: float, out: list[ev.CoreAction]) -> None:
        t = self._step(slot, trigger)
        old_state, old_activity = slot.state, slot.activity
        self.transition_log.append(Moved(now, slot.name, old_state, old_activity, trigger, t))
        if t.state is not old_state:
            slot.entered_state = now
        if (t.state, t.activity) != (old_state, old_activity):
            slot.entered_activity = now
        slot.state, slot.activity = t.state, t.activity
        self._dirty.add(slot.name)
        self._on_arrival(slot, old_activity, now, out)

    def _on_arrival(self, slot: Slot, came_from: Activity, now: float, out: list[ev.CoreAction]) -> None:
        claim = slot.claim
        if slot.activity is A.SUSPENDED and claim is not None:
            claim.suspended_since = now
            out.append(ev.SuspendJob(slot.name, claim.id))
        elif came_from is A.SUSPENDED and claim is not None and slot.activity in (A.BUSY, A.RETIRING):
            self._end_suspension(claim, now)
            out.append(ev.ContinueJob(slot.name, claim.id))
        elif slot.activity is A.VACATING and claim is not None and claim.starter_running:
            if came_from is A.SUSPENDED:
                self._end_suspension(claim, now)
            out.append(ev.VacateJob(slot.name, claim.id, self._vacate_time(slot, now)))
        elif slot.activity is A.KILLING and claim is not None and claim.starter_running:
            out.append(ev.KillJob(slot.name, claim.id))
        if slot.state is S.OWNER and claim is not None:
            self._end_claim(slot, now, out)

    @staticmethod
    def _end_suspension(claim: Claim, now: float) -> None:
        if claim.suspended_since is not None:
            claim.suspended_total += now - claim.suspended_since
            claim.suspended_since = None

    def _end_claim(self, slot: Slot, now: float, out: list[ev.CoreAction]) -> None:
        claim = slot.claim
        assert claim is not None
        if not claim.released:
            out.append(ev.ClaimEnded(claim.id, claim.schedd, slot.name, claim.end_reason or "claim preempted"))
        slot.claim = None
        if slot.kind == "Dynamic" and slot.parent is not None:
            # A dynamic slot lives exactly as long as its claim; its resources go home.
            slot.parent.children.remove(slot)
            self._dirty.add(slot.parent.name)
            self._dirty.discard(slot.name)
            del self.slots[slot.name]
            out.append(ev.InvalidateSlot(slot.name))
        else:
            slot.claim_id = self._new_claim_id(slot.name)

    # ----------------------------------------------------------------------- policy reads
    def _ask(self, name: str, slot: Slot, now: float, job: bool = True, undefined: bool = False) -> bool:
        job_ad = slot.claim.job_ad if (job and slot.claim) else None
        return self.policy.evaluate(name, self.slot_ad(slot, now), job_ad, now=now, undefined=undefined)

    def _number(self, name: str, slot: Slot, job_ad: Mapping[str, Any] | None, now: float, default: float) -> float:
        value = self.policy.number(name, self.slot_ad(slot, now), job_ad, now=now)
        return default if value is None else value

    def _vacate_time(self, slot: Slot, now: float) -> float:
        job_ad = slot.claim.job_ad if slot.claim else None
        return timers.vacate_time(self._number("MachineMaxVacateTime", slot, job_ad, now, 600.0), job_ad)

    def _retirement_over(self, slot: Slot, now: float) -> bool:
        claim = slot.claim
        assert claim is not None
        if claim.job_start is None or not claim.starter_running:
            return True
        return timers.retirement_over(claim, self._number("MaxJobRetirementTime", slot, claim.job_ad, now, 0.0), now)

    def _check_execute_limit(self, slot: Slot, claim: Claim, now: float, out: list[ev.CoreAction]) -> None:
        hold = timers.execute_limit_broken(slot, claim, now)
        if hold is not None:
            claim.held = True
            out.append(hold)

    def _evict(self, slot: Slot, now: float, out: list[ev.CoreAction], reason: str, fast: bool = False) -> None:
        claim = slot.claim
        if claim is not None and not claim.end_reason:
            claim.end_reason = reason
        wants_vacate = not fast and self._ask("WANT_VACATE", slot, now)
        self._move(slot, T.EVICT_VACATE if wants_vacate else T.EVICT_KILL, now, out)

    # ----------------------------------------------------------------------- evaluation
    def _evaluate(self, now: float, out: list[ev.CoreAction]) -> None:
        self._last_eval = now
        # A slot settles in a few steps (Matched -> Owner -> Unclaimed). A policy whose
        # expressions send it round a cycle (SUSPEND and PREEMPT both true) stops when it
        # returns to a pair it already held; the next evaluation continues from there. Slots
        # see each other (drain completes when all are drained), so passes repeat until quiet.
        seen: dict[str, set[tuple[State, Activity]]] = {}
        for _ in range(4):
            moved = False
            for slot in list(self.slots.values()):
                visited = seen.setdefault(slot.name, {(slot.state, slot.activity)})
                while slot.name in self.slots and self._evaluate_slot(slot, now, out):
                    moved = True
                    if (slot.state, slot.activity) in visited:
                        break
                    visited.add((slot.state, slot.activity))
            if not moved:
                break

    def _evaluate_slot(self, slot: Slot, now: float, out: list[ev.CoreAction]) -> bool:
        """Apply what fires for ``slot`` (:func:`~htc.daemons.startd.evaluation.verdict`); True when it moved."""
        claim = slot.claim
        if slot.state is S.CLAIMED and claim is not None and now < claim.last_alive + claim.lease:
            self._check_execute_limit(slot, claim, now, out)
        read = Reading(lambda name, job=True, undefined=False: self._ask(name, slot, now, job, undefined),
                       partial(self._retirement_over, slot, now), partial(self._vacate_time, slot, now),
                       self._all_drained)
        fired = verdict(slot, self.drain, self.settings, read, now)
        if fired is None:
            return False
        if isinstance(fired, Evict):
            self._evict(slot, now, out, fired.reason)
        elif isinstance(fired, Chore):
            return _CHORES[fired](self, slot, now, out)
        else:
            if fired is T.MATCH_LOST:
                slot.matched_id, slot.claim_id = None, self._new_claim_id(slot.name)
            self._move(slot, fired, now, out)
        return True

    def _kill_starter(self, slot: Slot, now: float, out: list[ev.CoreAction]) -> bool:
        claim = slot.claim
        assert claim is not None
        claim.killed_starter = True
        out.append(ev.KillStarter(slot.name, claim.id))
        return False  # not a step: the slot stays Preempting/Killing until the starter is gone

    def _end_drain(self, slot: Slot, now: float, out: list[ev.CoreAction]) -> bool:
        self.drain = None  # finalized: the other drained slots follow (34/35)
        self._move(slot, T.DRAIN_OVER, now, out)
        return True

    def _finish_preemption(self, slot: Slot, now: float, out: list[ev.CoreAction]) -> bool:
        claim = slot.claim
        assert claim is not None
        newcomer = claim.preempting
        if newcomer is None:
            self._move(slot, T.TO_OWNER, now, out)
            return True
        # Transition I: the better claim takes the slot as soon as the old job is gone.
        if not claim.released:
            out.append(ev.ClaimEnded(claim.id, claim.schedd, slot.name, claim.end_reason or "preempted by a better claim"))
        newcomer.created = newcomer.last_alive = now
        slot.claim = newcomer
        self._move(slot, T.TO_NEW_CLAIM, now, out)
        out.append(ev.ReplyClaim(newcomer.id, True, slot.name, slot_ad=self.slot_ad(slot, now)))
        return True

    def _all_drained(self) -> bool:
        return all(s.state is S.DRAINED for s in self.slots.values())

    def _advertise(self, now: float, out: list[ev.CoreAction]) -> None:
        if now >= self._last_advertise + self.settings.update_interval:
            self._dirty.update(self.slots)
        if not self._dirty:
            return
        self._last_advertise = now if len(self._dirty) == len(self.slots) else self._last_advertise
        for name in sorted(self._dirty):
            slot = self.slots.get(name)
            if slot is not None:
                out.append(ev.AdvertiseSlot(name, self.slot_ad(slot, now), slot.claim_id))
        self._dirty.clear()

    # ----------------------------------------------------------------------- event handlers
    def _on_sensor_sample(self, e: ev.SensorSample, now: float, out: list[ev.CoreAction]) -> None:
        self.sensors = dict(e.attrs)
        any_slot = next(iter(self.slots.values()))
        busy = self.policy.evaluate("CpuBusy", self.slot_ad(any_slot, now), None, now=now)
        if busy and self._cpu_busy_since == 0:
            self._cpu_busy_since = now
        elif not busy:
            self._cpu_busy_since = 0.0

    def _on_tick(self, e: ev.Tick, now: float, out: list[ev.CoreAction]) -> None:
        return None  # evaluation after every event does the work

    def _on_match_notified(self, e: ev.MatchNotified, now: float, out: list[ev.CoreAction]) -> None:
        slot = self.slot(e.slot)
        if e.claim_id != slot.claim_id or slot.kind == "Partitionable" or slot.state is not S.UNCLAIMED:
            # A stale id or a slot no longer Unclaimed is a race with the owner or another
            # claim, not an error: the schedd's claim request is refused with the reason.
            # p-slots are never Matched (each claim carves its own dynamic slot).
            return
        slot.matched_id = e.claim_id
        self._move(slot, T.MATCH, now, out)

    def _refuse(self, e: ev.RequestClaim, slot: str, why: str, out: list[ev.CoreAction]) -> None:
        out.append(ev.ReplyClaim(e.claim_id, False, slot, reason=f"{self.settings.name}: {why}"))

    def _on_request_claim(self, e: ev.RequestClaim, now: float, out: list[ev.CoreAction]) -> None:
        slot = self.slot(e.slot)
        job_ad = dict(e.job_ad)
        lease = e.lease if e.lease else self.settings.max_claim_alives_missed * e.alive_interval
        claim = Claim(self._new_claim_id(slot.name), e.schedd, job_ad, lease, now, now,
                      priority_preemption=e.priority_preemption)
        if e.claim_id != slot.claim_id:
            self._refuse(e, slot.name, f"{slot.name} does not advertise that claim id (stale match)", out)
            return
        if slot.kind == "Partitionable":
            self._claim_partitionable(slot, e, claim, now, out)
            return
        if slot.state in (S.UNCLAIMED, S.MATCHED):
            if not self.policy.evaluate("START", self.slot_ad(slot, now), job_ad, now=now):
                self._refuse(e, slot.name, f"START is not true for this job on {slot.name}", out)
                return
            claim.id = slot.claim_id
            claim.rank = self._number("RANK", slot, job_ad, now, 0.0)
            slot.claim, slot.matched_id = claim, None
            self._move(slot, T.CLAIM, now, out)
            slot.claim_id = self._new_claim_id(slot.name)
            out.append(ev.ReplyClaim(claim.id, True, slot.name, slot_ad=self.slot_ad(slot, now)))
            return
        if slot.state is S.CLAIMED and slot.claim is not None:
            self._claim_preempting(slot, e, claim, now, out)
            return
        self._refuse(e, slot.name, f"{slot.name} is {slot.state}/{slot.activity} and takes no claims", out)

    def _claim_partitionable(self, pslot: Slot, e: ev.RequestClaim, claim: Claim, now: float,
                             out: list[ev.CoreAction]) -> None:
        if pslot.state is not S.UNCLAIMED:
            self._refuse(e, pslot.name, f"{pslot.name} is {pslot.state}/{pslot.activity} and takes no claims", out)
            return
        st, job = self.settings, claim.job_ad
        want = (quantize(number_attr(job, "RequestCpus", 1), st.cpu_quantum),
                quantize(number_attr(job, "RequestMemory", st.memory_quantum), st.memory_quantum),
                quantize(number_attr(job, "RequestDisk", st.disk_quantum), st.disk_quantum))
        left = pslot.left()
        if any(w > h for w, h in zip(want, left, strict=True)):
            self._refuse(e, pslot.name, f"the job asks for cpus={want[0]}, memory={want[1]} MiB, disk={want[2]} KiB "
                         f"but {pslot.name} has cpus={left[0]}, memory={left[1]} MiB, disk={left[2]} KiB left", out)
            return
        if not self.policy.evaluate("START", self.slot_ad(pslot, now), job, now=now):
            self._refuse(e, pslot.name, f"START is not true for this job on {pslot.name}", out)
            return
        dslot = self._add_slot(pslot.slot_id, "Dynamic", *want, now, parent=pslot)
        dslot.state, dslot.activity = S.UNCLAIMED, A.IDLE  # born free, claimed at once (transition D)
        claim.id = dslot.claim_id
        claim.rank = self._number("RANK", dslot, job, now, 0.0)
        dslot.claim = claim
        self._move(dslot, T.CLAIM, now, out)
        dslot.claim_id = self._new_claim_id(dslot.name)
        out.append(ev.ReplyClaim(claim.id, True, dslot.name, slot_ad=self.slot_ad(dslot, now)))

    def _claim_preempting(self, slot: Slot, e: ev.RequestClaim, claim: Claim, now: float,
                          out: list[ev.CoreAction]) -> None:
        current = slot.claim
        assert current is not None
        rank = self._number("RANK", slot, claim.job_ad, now, 0.0)
        better = rank > current.rank or (e.priority_preemption and rank >= current.rank)
        if current.preempting is not None or not better or slot.activity not in (A.IDLE, *_BUSY):
            self._refuse(e, slot.name, f"{slot.name} is claimed by {current.schedd} (rank {current.rank:g}); "
                         f"this request ranks {rank:g} and cannot preempt it", out)
            return
        if not self.policy.evaluate("START", self.slot_ad(slot, now), claim.job_ad, now=now):
            self._refuse(e, slot.name, f"START is not true for this job on {slot.name}", out)
            return
        claim.id, claim.rank = slot.claim_id, rank
        slot.claim_id = self._new_claim_id(slot.name)
        current.preempting = claim
        current.end_reason = "preempted by a better claim" if not e.priority_preemption else "preempted by user priority"
        if current.retire_reason is None:
            current.retire_reason = "rank"

    def _claim_of(self, claim_id: str) -> tuple[Slot, Claim]:
        slot = claim_holder(self.slots.values(), claim_id)
        if slot is not None and slot.claim is not None:
            return slot, slot.claim
        raise UnknownClaim(f"{self.settings.name} holds no claim {claim_id.split('#')[0]}#...; it ended or never "
                           "existed -- the claimant should drop it and ask the negotiator for a new match")

    def _on_activate_claim(self, e: ev.ActivateClaim, now: float, out: list[ev.CoreAction]) -> None:
        slot, claim = self._claim_of(e.claim_id)
        job_ad = dict(e.job_ad)
        why = None
        if (slot.state, slot.activity) != (S.CLAIMED, A.IDLE):
            why = f"{slot.name} is {slot.state}/{slot.activity}, not Claimed/Idle"
        elif now - claim.created > self.settings.claim_worklife:
            why = f"the claim is older than CLAIM_WORKLIFE ({self.settings.claim_worklife:g} s)"
        elif not self.policy.evaluate("START", self.slot_ad(slot, now), job_ad, now=now):
            why = f"START is not true for this job on {slot.name}"
        if why:
            out.append(ev.ReplyActivate(e.claim_id, False, f"{self.settings.name}: {why}"))
            return
        claim.job_ad = job_ad
        claim.rank = self._number("RANK", slot, job_ad, now, 0.0)
        claim.job_start, claim.starter_running = now, True
        claim.suspended_total, claim.suspended_since = 0.0, None
        claim.execute_limit, claim.held = execute_limit(job_ad), False
        self._move(slot, T.ACTIVATE, now, out)
        out.append(ev.StartStarter(slot.name, claim.id, job_ad, self.slot_ad(slot, now), e.lane))
        out.append(ev.ReplyActivate(claim.id, True))

    def _on_keep_alive(self, e: ev.KeepAlive, now: float, out: list[ev.CoreAction]) -> None:
        self._claim_of(e.claim_id)[1].last_alive = now

    def _on_job_update(self, e: ev.JobUpdate, now: float, out: list[ev.CoreAction]) -> None:
        self._claim_of(e.claim_id)[1].job_ad.update(e.attrs)

    def _on_job_exited(self, e: ev.JobExited, now: float, out: list[ev.CoreAction]) -> None:
        slot, claim = self._claim_of(e.claim_id)
        if slot.state is S.PREEMPTING and claim.starter_running:
            claim.starter_running = False
            return  # evaluation finishes the preemption
        if not claim.starter_running:
            # A duplicate report: the table has no row for it, and says so.
            self._step(slot, T.STARTER_EXITED)
        claim.starter_running = False  # before the move: arriving in Preempting must not vacate a dead job
        self._move(slot, T.STARTER_EXITED, now, out)
        claim.job_start, claim.suspended_since = None, None
        if slot.state is S.CLAIMED and claim.retire_reason == "PREEMPT":
            claim.retire_reason = None

    def _on_release_claim(self, e: ev.ReleaseClaim, now: float, out: list[ev.CoreAction]) -> None:
        for slot in self.slots.values():
            pending = slot.claim.preempting if slot.claim else None
            if pending is not None and pending.id == e.claim_id:
                slot.claim.preempting = None  # the better claim gave up; evaluation unretires (19)
                return
        slot, claim = self._claim_of(e.claim_id)
        claim.released = True
        if slot.state is S.CLAIMED:
            self._evict(slot, now, out, "released by the claimant")

    def _on_claimant_gone(self, e: ev.ClaimantGone, now: float, out: list[ev.CoreAction]) -> None:
        slot, claim = self._claim_of(e.claim_id)
        claim.released = True  # nobody to tell: the claimant is gone
        if slot.state is S.CLAIMED:
            self._evict(slot, now, out, "its schedd is gone (the claim watch closed)", fast=True)

    def _on_claim_lease_expired(self, e: ev.ClaimLeaseExpired, now: float, out: list[ev.CoreAction]) -> None:
        slot, claim = self._claim_of(e.claim_id)
        if slot.state is S.CLAIMED:
            self._evict(slot, now, out, "claim lease expired")

    def _on_vacate(self, e: ev.Vacate, now: float, out: list[ev.CoreAction]) -> None:
        targets = list(self.slots.values()) if e.slot is None else [self.slot(e.slot)]
        if e.slot is not None and targets[0].kind == "Partitionable":
            targets = list(targets[0].children)
        for slot in targets:
            if slot.state is S.MATCHED:
                slot.matched_id, slot.claim_id = None, self._new_claim_id(slot.name)
                self._move(slot, T.MATCH_LOST, now, out)
            elif slot.state is S.CLAIMED:
                self._evict(slot, now, out, "condor_vacate", fast=e.fast)
            elif slot.state is S.PREEMPTING and slot.activity is A.VACATING and e.fast:
                self._move(slot, T.KILL, now, out)

    def _on_drain(self, e: ev.Drain, now: float, out: list[ev.CoreAction]) -> None:
        if e.how not in ("graceful", "quick", "fast"):
            raise UsageError(f"{self.settings.name}: drain how={e.how!r}; use 'graceful', 'quick' or 'fast'")
        self.drain = DrainRequest(e.how, e.resume_on_completion, e.reason)
        for slot in list(self.slots.values()):
            claim = slot.claim
            if slot.state is not S.CLAIMED or claim is None or slot.activity is A.IDLE:
                continue
            claim.end_reason = f"draining: {e.reason or 'condor_drain'}"
            if e.how == "fast":
                self._evict(slot, now, out, claim.end_reason, fast=True)
                continue
            claim.retire_reason = "drain"
            if e.how == "quick":
                claim.retirement_cap = 0.0

    def _on_cancel_drain(self, e: ev.CancelDrain, now: float, out: list[ev.CoreAction]) -> None:
        self.drain = None
        for slot in self.slots.values():
            claim = slot.claim
            if claim is not None and claim.retire_reason == "drain" and slot.state is S.CLAIMED:
                claim.retire_reason, claim.retirement_cap, claim.end_reason = None, None, ""
                if slot.activity is A.RETIRING:
                    self._move(slot, T.UNRETIRE, now, out)


#: the core's work for each chore of the evaluation; True when the slot moved
_CHORES: dict[Chore, Callable[[Startd, Slot, float, list[ev.CoreAction]], bool]] = {
    Chore.FINISH_PREEMPTION: Startd._finish_preemption,
    Chore.KILL_STARTER: Startd._kill_starter,
    Chore.END_DRAIN: Startd._end_drain,
}

#: the core's handler of each event it takes
_ON_EVENT: dict[type, Callable[[Startd, Any, float, list[ev.CoreAction]], None]] = {
    ev.SensorSample: Startd._on_sensor_sample,
    ev.Tick: Startd._on_tick,
    ev.MatchNotified: Startd._on_match_notified,
    ev.RequestClaim: Startd._on_request_claim,
    ev.ActivateClaim: Startd._on_activate_claim,
    ev.KeepAlive: Startd._on_keep_alive,
    ev.JobUpdate: Startd._on_job_update,
    ev.JobExited: Startd._on_job_exited,
    ev.ReleaseClaim: Startd._on_release_claim,
    ev.ClaimantGone: Startd._on_claimant_gone,
    ev.ClaimLeaseExpired: Startd._on_claim_lease_expired,
    ev.Vacate: Startd._on_vacate,
    ev.Drain: Startd._on_drain,
    ev.CancelDrain: Startd._on_cancel_drain,
}

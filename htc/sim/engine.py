"""The discrete-event loop: owners, jobs and the real negotiator on one simulated clock.

Theory of operation
-------------------
Time is a :class:`~htc.daemons.clock.FakeClock` (the clock every daemon service takes); the
loop advances it to the next thing that happens, which is either an event of the heap (a batch
arrives, an owner comes or goes, a job finishes, the startd polls a suspended slot, a sample is
taken) or the negotiator core's own ``next_deadline()``. The negotiator is the real
:class:`~htc.daemons.negotiator.core.Negotiator` with its real accountant, driven through its
events as its service drives it: ``Wakeup`` at its deadline, ``Reschedule`` after a submit or a
finished job, and the answers to its actions (``FetchPoolAds`` is answered with the machines'
slot ads and the schedd's submitter ads, ``AskResourceRequests`` with the schedd's requests;
every match of a ``NotifyMatches`` starts the job, preempting the slot's job when the match
says so). The answers come back at once (no network), so a cycle takes no simulated time.

What is modelled rather than run is listed in docs/fair-share.md ("What is real"); in short:
the schedd is :mod:`htc.sim.schedd`, the startd is :mod:`htc.sim.pool` (its real policy object
decides START, SUSPEND, CONTINUE and PREEMPT), jobs checkpoint for free (no work is lost when
they move) and placement takes no time.
"""

from __future__ import annotations

import heapq
import itertools
import random
import time as _time
from collections.abc import Callable

from htc.daemons.clock import FakeClock
from htc.daemons.negotiator.core import Negotiator
from htc.daemons.negotiator.events import (AskResourceRequests, CycleFinished, FetchPoolAds,
                                           NotifyMatches, PoolAds, RequestsReceived, Reschedule,
                                           Wakeup)
from htc.daemons.negotiator.preemption import PreemptState
from htc.daemons.startd.policy import ClassAdPolicy
from htc.errors import UsageError
from htc.sim.pool import Machine
from htc.sim.scenario import POLICIES, Scenario, negotiator_settings
from htc.sim.schedd import SCHEDD, Job, Schedd
from htc.sim.workload import generate

__all__ = ["Simulation", "run"]

#: a Monday, 00:00 UTC: simulated time 0 (only its weekday matters to the owner model)
EPOCH = 1_704_067_200.0  # 2024-01-01

# event kinds, in the order they run when simultaneous
_ARRIVAL, _OWNER, _FINISH, _POLL, _SAMPLE = range(5)


class Simulation:
    """One run of a scenario (build it, then :meth:`run`)."""

    def __init__(self, scenario: Scenario):
        self.sc = scenario
        self.clock = FakeClock(start=EPOCH)
        rng = random.Random(scenario.seed)
        # separate streams: the workload and the owners do not depend on the policy
        self.work_rng = random.Random(rng.random())
        self.owner_rng = random.Random(rng.random())
        settings = negotiator_settings(scenario.policy, scenario.negotiator)
        self.negotiator = Negotiator(settings, now=EPOCH)
        # a full pool (every slot claimed or its owner's) matches nothing unless slots can be
        # preempted: by priority, or by a startd RANK that is not a constant
        self._trim_when_full = (settings.never_priority_preempts
                                and "NEGOTIATOR_POLICY" not in scenario.negotiator
                                and not POLICIES[scenario.policy][0].get("NEGOTIATOR_POLICY")
                                and _constant(scenario.startd.get("RANK", "0")))
        self.schedd = Schedd(fifo=POLICIES[scenario.policy][1])
        policy = ClassAdPolicy(scenario.startd)
        self.machines = [Machine(f"slot1@ws{i:05d}", scenario.owner.station(self.owner_rng), policy)
                         for i in range(scenario.machines)]
        self.by_name = {m.name: m for m in self.machines}
        self.specs = generate(list(scenario.users), scenario.horizon, self.work_rng)
        self._heap: list = []
        self._seq = itertools.count()
        self.end = scenario.horizon + scenario.drain
        self.remote_seconds = 0.0  # CPU delivered inside the horizon
        self.cycles = 0
        self.priority_preemptions = 0
        self.owner_vacates = 0
        self.samples: list[tuple] = []
        self.wall = 0.0

    # ------------------------------------------------------------------ time

    @property
    def now(self) -> float:
        """Simulated seconds since the start (Monday 00:00)."""
        return self.clock.time() - EPOCH

    def _at(self, t: float, kind: int, *payload) -> None:
        heapq.heappush(self._heap, (t, kind, next(self._seq), payload))

    def _in_horizon(self, t0: float, t1: float) -> float:
        return max(0.0, min(t1, self.sc.horizon) - max(t0, 0.0))

    # ------------------------------------------------------------------ the run

    def run(self, progress: Callable[[str], None] | None = None) -> Simulation:
        """Run to the end of the drain period, or until every job is done after the horizon."""
        started = _time.perf_counter()
        for spec in self.specs:
            self._at(spec.submit, _ARRIVAL, spec)
        for m in self.machines:
            busy = m.station.starts_busy
            m.owner_busy = busy
            m.settle_idle(0.0)
            if self.sc.owner.enabled:
                self._at(m.station.next_interval(self.owner_rng, busy, 0.0), _OWNER, m)
        self._at(0.0, _SAMPLE)
        negotiator, heap = self.negotiator, self._heap
        while True:
            t_event = heap[0][0] if heap else float("inf")
            t_neg = negotiator.next_deadline()
            t_neg = float("inf") if t_neg is None else t_neg - EPOCH
            t = min(t_event, t_neg)
            if t > self.end or (t >= self.sc.horizon and self._all_done()):
                break
            self.clock.advance(max(0.0, t - self.now))
            if t_event <= t_neg:
                _, kind, _, payload = heapq.heappop(heap)
                _HANDLERS[kind](self, *payload)
            else:
                self._negotiator_actions(negotiator.handle(Wakeup(), self.clock.time()))
        for m in self.machines:  # close the owners' last available stretch
            if not m.owner_busy:
                m.available_seconds += self._in_horizon(m.owner_since, self.sc.horizon)
        self.wall = _time.perf_counter() - started
        return self

    def _all_done(self) -> bool:
        return all(job.finished is not None for job in self.schedd.jobs.values()) \
            and len(self.schedd.jobs) == len(self.specs)

    # ------------------------------------------------------------------ the negotiator

    def _negotiator_actions(self, actions: list) -> None:
        negotiator = self.negotiator
        for action in actions:
            now = self.clock.time()
            if isinstance(action, FetchPoolAds):
                ads = self._pool_ads()
                self._negotiator_actions(negotiator.handle(
                    PoolAds(action.cycle, ads, self.schedd.submitter_ads()), now))
            elif isinstance(action, AskResourceRequests):
                requests = self.schedd.requests(action.submitter, action.significant_attributes)
                self._negotiator_actions(negotiator.handle(RequestsReceived(
                    action.cycle, action.schedd, action.submitter, requests), now))
            elif isinstance(action, NotifyMatches):
                for match in action.matches:  # (a run's: one request's jobs on one slot)
                    self._matched(match)
            elif isinstance(action, CycleFinished):
                self.cycles += 1
            # SaveAccountant, PublishAccounting, Log: nothing to persist or advertise here

    def _pool_ads(self) -> tuple:
        """The collector's answer: every slot ad; or the claimed ones only when no match can
        come of the cycle -- no job is idle, or (under a policy that never preempts) no slot is
        Unclaimed -- since the claimed ones are all the accountant reconciles then: the same
        cycle, without building a pool nothing can match."""
        now = self.now
        for m in self.machines:
            if m.job is not None:
                m.refresh_runtime(now)
        if self.schedd.idle_count() and (not self._trim_when_full or any(
                m.state == "Unclaimed" for m in self.machines)):
            return tuple(m.ad for m in self.machines)
        return tuple(m.ad for m in self.machines if m.job is not None)

    def _matched(self, match) -> None:
        now = self.now
        machine = self.by_name.get(match.slot_name)
        job = self.schedd.jobs.get(match.job_id or "")
        if machine is None or job is None or job.machine is not None or job.finished is not None:
            raise UsageError(f"negotiator matched {match.job_id} to {match.slot_name}, which the "
                             "simulation cannot place (a simulator bug)")
        if machine.job is not None:
            if match.preemption is PreemptState.NONE:
                raise UsageError(f"negotiator gave busy {machine.name} away without preemption")
            victim = machine.job
            victim.preemptions += 1
            self.priority_preemptions += 1
            self._stop(victim, now, done=False)
        self._start(job, machine, now)

    # ------------------------------------------------------------------ jobs on machines

    def _start(self, job: Job, machine: Machine, now: float) -> None:
        self.schedd.started(job)
        job.machine = machine
        job.placements += 1
        if job.first_start is None:
            job.first_start = now
        job.placed_at = job.run_start = now
        machine.job = job
        machine.set_activity("Claimed", "Busy", now)
        job.epoch += 1
        self._at(now + job.remaining, _FINISH, job, job.epoch)

    def _pause(self, job: Job, now: float) -> None:
        """Stop the job's clock (suspend or leave): what it ran is delivered, for good."""
        if job.run_start is not None:
            ran = now - job.run_start
            job.delivered += ran
            job.remaining -= ran
            self.remote_seconds += self._in_horizon(job.run_start, now)
            job.run_start = None
        job.epoch += 1

    def _stop(self, job: Job, now: float, done: bool) -> None:
        machine = job.machine
        self._pause(job, now)
        job.machine = None
        job.placed_at = None
        if done:
            job.remaining = 0.0
            job.finished = now
        self.schedd.stopped(job, done)
        machine.settle_idle(now)
        if self.schedd.idle_count():
            self.negotiator.handle(Reschedule("a slot came free"), self.clock.time())

    # ------------------------------------------------------------------ events

    def _on_arrival(self, spec) -> None:
        self.schedd.submit(spec)
        # the schedd asks for a cycle after a submit (condor_reschedule)
        self.negotiator.handle(Reschedule("submit"), self.clock.time())

    def _on_finish(self, job: Job, epoch: int) -> None:
        if epoch == job.epoch:
            self._stop(job, self.now, done=True)

    def _on_owner(self, m: Machine) -> None:
        now = self.now
        if m.owner_busy:  # the owner leaves
            m.owner_busy = False
            m.owner_since = now
        else:  # the owner comes back
            m.available_seconds += self._in_horizon(m.owner_since, now)
            m.owner_busy = True
        if self.sc.owner.enabled:  # (a test may move an owner of a dedicated pool by hand)
            self._at(now + m.station.next_interval(self.owner_rng, m.owner_busy, now), _OWNER, m)
        job = m.job
        m.publish(now)
        if job is None:
            m.settle_idle(now)
        elif m.owner_busy and m.activity == "Busy":
            if m.ask("WANT_SUSPEND", now) and m.ask("SUSPEND", now):
                self._pause(job, now)
                m.set_activity("Claimed", "Suspended", now)
                self._at(now + self.sc.startd_poll, _POLL, m, job)
            elif m.ask("PREEMPT", now):
                self._vacate(m, job, now)

    def _on_poll(self, m: Machine, job: Job) -> None:
        """The startd's periodic look at a suspended slot: continue, vacate, or wait."""
        if m.job is not job or m.activity != "Suspended":
            return
        now = self.now
        if m.ask("CONTINUE", now):
            job.run_start = now
            job.epoch += 1
            m.set_activity("Claimed", "Busy", now)
            self._at(now + job.remaining, _FINISH, job, job.epoch)
        elif m.ask("PREEMPT", now):
            self._vacate(m, job, now)
        else:
            self._at(now + self.sc.startd_poll, _POLL, m, job)

    def _vacate(self, m: Machine, job: Job, now: float) -> None:
        job.vacates += 1
        self.owner_vacates += 1
        self._stop(job, now, done=False)

    def _on_sample(self) -> None:
        now = self.now
        if now > self.sc.horizon:
            return
        busy_owner = sum(m.owner_busy for m in self.machines)
        running = sum(m.job is not None and m.activity == "Busy" for m in self.machines)
        idle: dict[str, int] = {}
        for jobs in self.schedd.idle.values():
            for job in jobs.values():
                idle[job.spec.cls] = idle.get(job.spec.cls, 0) + 1
        in_system: dict[str, int] = {}
        for job in self.schedd.jobs.values():
            if job.finished is None:
                in_system[job.spec.cls] = in_system.get(job.spec.cls, 0) + 1
        self.samples.append((now, busy_owner, running, idle, in_system))
        self._at(now + self.sc.sample_every, _SAMPLE)


_HANDLERS = {
    _ARRIVAL: Simulation._on_arrival,
    _OWNER: Simulation._on_owner,
    _FINISH: Simulation._on_finish,
    _POLL: Simulation._on_poll,
    _SAMPLE: Simulation._on_sample,
}


def _constant(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def run(scenario: Scenario) -> Simulation:
    """Build and run one simulation of ``scenario``."""
    return Simulation(scenario).run()

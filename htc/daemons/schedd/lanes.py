"""Call lanes: function calls run one after another by a worker that stays up on a claim.

Theory of operation
-------------------
A function call of :class:`htc.executors.HTCExecutor` is a job like any other: it is submitted
into the durable queue, negotiated for, started, logged and retired. Starting a starter for each
call (sandbox, cgroup, a fork of a pre-imported Python, file transfer, an exit report) costs
more than most calls do, so a claim that is to run a call becomes a *call lane* instead:

1. Starting a job whose ad says ``HTCLane = true`` (:func:`~htc.daemons.schedd.lane_calls.lane_key`) (the executor sets it for calls that
   need nothing a lane lacks: no time limit, checkpoint, streaming or custom output files)
   activates the claim with ``ActivateClaim(lane=True)``: the startd runs the worker
   ``python -m htc.executors.lane`` in a sandbox and cgroup of its own, under the slot's policy
   like any job.
2. Once the activation is acknowledged the schedd feeds the lane: it takes idle calls with the
   same *lane key* (owner, interpreter, arguments, environment, resource requests and
   requirements: what makes two calls interchangeable on one worker), marks each Running (with
   ``RemoteHost`` and an EXECUTE event, as a shadow would), reads its input files and sends
   them in one :class:`~htc.wire.messages.RunCalls`. A lane of quick calls (under 100 ms)
   holds the next one too, and about 300 ms of work if that is more (up to 65 calls), so the
   worker never waits for the wire and the startd can send several results in one CallsDone
   (it holds a result while a call waits behind the running one) -- but only while every other
   lane of its kind is busy too and its current call is not running long, since a call sent
   to a lane can neither run elsewhere nor be cancelled. With several lanes of a kind, each
   takes at most its share of the idle calls at a time, so that they finish a map together.
3. The startd answers with :class:`~htc.wire.messages.CallsDone` batches; the schedd's answer
   (:class:`~htc.wire.messages.MoreCalls`) carries the lane's next calls, so a lane that keeps
   busy costs one message each way per batch. Each result's files (``htc_result.pkl``, ...)
   and output go into the call's ``Iwd`` (as file transfer would have put them), then the call
   ends exactly as a shadow's job ends -- usage, the job's own ``on_exit`` policy and
   ``max_retries``, the TERMINATED event, history -- in one transaction per batch, committed
   without an fsync of its own: the next durable commit (a submit's) covers it, and a power
   cut before then runs those calls again. The files are written after that commit, so the
   same transaction keeps their bytes -- and the batch's user-log events -- in one entry of the
   queue's outbox until they are (:mod:`htc.daemons.schedd.owed`): a schedd killed in between
   writes them when it starts.
4. A lane that runs dry lingers ``SCHEDD_CLAIM_LINGER`` seconds while nothing else is idle
   (the next submit of the same user runs on it at once); then, or at once when other jobs
   wait, the schedd vacates it, which ends the claim (other jobs get the slot through the
   negotiator).
5. When the lane's worker ends without being asked (the owner came back, the claim was lost, a
   call killed its process), its calls in flight become idle again with an EVICTED event. A
   worker that died by itself names no culprit, so those calls leave the lane
   (``HTCLane = false``) and run on starters of their own, where what kills them is reported
   as for any job. A lane that could not start at all sends calls with its key to starters
   for a minute.

A schedd that restarts does not reconnect to lanes: their calls go back to idle and run again,
unless a result the startd sends again arrives first (:mod:`htc.daemons.schedd.lane_restart`);
a call runs at least once, not exactly once (docs/executor.md says so).

Calls in a lane are not shadows: ``htc rm``, ``htc hold`` or ``htc vacate`` of a call the
lane holds stops the whole worker, as it would stop a job's process; the lane's other calls
become idle again (EVICTED) and run elsewhere. ``htc suspend`` does not reach a lane call.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping

from htc.daemons import core as c
from htc.daemons.calls import Call, CallDone, CallFailed
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.ends import record_end
from htc.daemons.schedd.callfiles import call_inputs, reading_as
from htc.daemons.schedd.events import Answer, WriteCallFiles
from htc.daemons.schedd.lane_calls import LANE_ARGUMENTS, Lane, call_file, lane_key, lane_outputs
from htc.daemons.schedd.owed import owe
from htc.daemons.schedd.shadow import Shadow, parse_job_id
from htc.daemons.schedd.states import ClaimEvent, ShadowState
from htc.jobqueue import JobStatus
from htc.jobqueue.ads import quote
from htc.jobqueue.records import JobId
from htc.wire import messages as m
from htc.wire.messages.schema import built_here

__all__ = ["LANE_ARGUMENTS", "Lane", "Lanes", "lane_key"]

#: a lane whose worker could not start sends its key's calls to starters this long (s)
_BROKEN_FOR = 60.0


class Lanes(Mapping):
    """The schedd's call lanes (claim id -> :class:`Lane`), the idle calls by lane key, and what
    the schedd does with them.

    Args:
        schedd: the core it belongs to (its queue, settings, reserved jobs, claims, and
            ``read_input``, which reads a call's input file as its owner).
    """

    def __init__(self, schedd):
        self.schedd = schedd
        self._by_claim: dict[str, Lane] = {}
        self.idle: dict[tuple, list] = {}       # idle calls by lane key, a heap each
        self.broken: dict[tuple, float] = {}    # lane keys sent to starters until then
        #: holds an owner's rights while a batch of its calls' inputs is read (schedd.read_input)
        self.reading_as = reading_as

    def __getitem__(self, claim_id: str) -> Lane:
        return self._by_claim[claim_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_claim)

    def __len__(self) -> int:
        return len(self._by_claim)

    # (the dict's own look-ups: these are on every message's path)
    def __contains__(self, claim_id) -> bool:
        return claim_id in self._by_claim

    def get(self, claim_id, default=None):
        return self._by_claim.get(claim_id, default)

    def values(self):
        return self._by_claim.values()

    def all_in_flight(self, jobs) -> bool:
        """Whether every one of ``jobs`` runs on a lane (they are then none of them idle)."""
        flights = [lane.in_flight for lane in self._by_claim.values() if lane.in_flight]
        return bool(flights) and all(any(job.job_id in f for f in flights) for job in jobs)

    # -- the idle calls, by lane key --------------------------------------------------------

    def enqueue(self, job) -> None:
        """``job`` is idle: a candidate for the lanes of its key (if it is a lane call)."""
        if not self.schedd.settings.call_lanes or job.status != JobStatus.IDLE:
            return
        key = lane_key(job)
        if key is not None:
            heapq.heappush(self.idle.setdefault(key, []), (-job.prio, job.cluster_id, job.proc_id))

    def index(self, now: float) -> None:
        """Start-up: every idle call is a lane candidate."""
        if self.schedd.settings.call_lanes:
            for job in self.schedd.queue.query("JobStatus == 1 && HTCLane =?= true", now=now):
                self.enqueue(job)

    def _next_job(self, lane: Lane):
        sd = self.schedd
        heap = self.idle.get(lane.key)
        while heap:
            _, cluster, proc = heapq.heappop(heap)
            job_id = (cluster, proc)
            if job_id in sd.reserved:
                continue
            job = sd.job(job_id)
            if job is not None and job.status == JobStatus.IDLE and lane_key(job) == lane.key:
                return job
        return None

    def wants_lane(self, job, now: float) -> tuple | None:
        """The lane key ``job`` runs on (None: it runs on a starter of its own)."""
        if not self.schedd.settings.call_lanes:
            return None
        key = lane_key(job)
        if key is None or self.broken.get(key, 0.0) > now:
            return None
        return key

    # -- starting and feeding ----------------------------------------------------------------

    def start(self, claim, job, key: tuple, now: float, out: list) -> bool:
        """Activate ``claim`` as a call lane for calls like ``job`` (which runs first)."""
        sd = self.schedd
        lane = Lane(claim.id, key, job.job_id, first=job.job_id)
        self._by_claim[claim.id] = lane
        sd.reserved.add(job.job_id)  # runs first, once the worker is up
        claim.job = None
        sd.claims.step(claim, ClaimEvent.ACTIVATE)
        ad = {k: v for k, v in job.items() if k != "ClaimId"}
        ad["Arguments"] = quote(LANE_ARGUMENTS)
        ad.pop("Args", None)
        text = "[ " + "; ".join(f"{k} = {v}" for k, v in ad.items()) + " ]"
        out.append(Call(claim.startd, m.ActivateClaim(claim_id=claim.id, job_ad=text,
                                                      shadow_address=sd.settings.address, lane=True),
                        cookie=(Answer.LANE, claim.id)))
        out.append(c.Log(f"claim on {claim.slot_name}: starting a call lane for job {job.cluster_id}.{job.proc_id}"))
        return True

    def answered(self, event: CallDone | CallFailed, now: float, out: list) -> None:
        """The startd answered (or did not) a lane's activation, RunCalls or Vacate."""
        kind, claim_id = event.cookie[0], event.cookie[1]
        lane, claim = self._by_claim.get(claim_id), self.schedd.claims.get(claim_id)
        if lane is None or claim is None:
            return
        _ON_ANSWER[kind](self, lane, claim, event, now, out)

    def _activation_outcome(self, lane: Lane, claim, event, now: float, out: list) -> None:
        if getattr(event, "reply", None) is not None:
            lane.active = True
            claim.last_alive = now
            self._feed(lane, claim, now, out)
            self.feed_all(now, out)
            return
        out.append(c.Log(f"claim on {claim.slot_name}: the call lane did not start ({event.error}); calls "
                         f"like job {lane.job_id[0]}.{lane.job_id[1]} run on starters for {_BROKEN_FOR:g} s"))
        self.broken[lane.key] = now + _BROKEN_FOR
        self._end(lane, claim, now, out, reason=f"the call lane did not start: {event.error}", release=True)

    def _calls_outcome(self, lane: Lane, claim, event, now: float, out: list) -> None:
        if getattr(event, "reply", None) is not None:
            return
        if event.refused:
            self._end(lane, claim, now, out, reason=f"the startd refused the calls: {event.error}", release=True)
        elif not lane.stopping:
            # Unanswered: the calls may never have got there. Stop the worker; its end (or the
            # claim's lease, if the startd is gone) puts every call it held back in the queue.
            self._stop(lane, claim, out, f"the startd did not take calls ({event.error})")

    def _vacate_outcome(self, lane: Lane, claim, event, now: float, out: list) -> None:
        if getattr(event, "reply", None) is None and event.refused:
            self._end(lane, claim, now, out, reason=f"the startd no longer holds the claim ({event.error})")

    def _ahead(self, lane: Lane, now: float) -> int:
        """How many calls ``lane`` should hold now (see :meth:`Lane.ahead`).

        With other lanes of its kind, it takes at most its share of the idle calls at a time
        (that many more than it holds): at the end of a map the lanes then finish together,
        instead of one running the last calls it took while the others have nothing to do.
        """
        peers = [other for other in self._by_claim.values()
                 if other.key == lane.key and other is not lane and other.active and not other.stopping]
        want = lane.ahead(now, all(other.in_flight for other in peers))
        if want > 1 and peers:
            idle = len(self.idle.get(lane.key, ()))  # (the heap may hold a few stale entries)
            want = min(want, len(lane.in_flight) + max(1, -(-idle // (len(peers) + 1))))
        return want

    def feed_all(self, now: float, out: list) -> None:
        """Give idle calls to the lanes without one: first one to each, then more to quick
        lanes (see :meth:`Lane.ahead`), all of a lane's in one RunCalls. A lane with calls
        gets its next ones in the answer to its CallsDone, not in a RunCalls of their own
        (a message each way less per call). A lane kept idle that none of the idle jobs
        fits ends, so that its slot can go to them (as a lingering claim would)."""
        claims = self.schedd.claims
        fed: dict[str, tuple[object, list[m.LaneCall]]] = {}
        for prefetch in (False, True):
            for lane in list(self._by_claim.values()):
                claim = claims.get(lane.claim_id)
                if claim is None or (not self.idle.get(lane.key) and lane.first is None):
                    continue
                if not prefetch and not lane.in_flight:
                    fed[lane.claim_id] = (claim, [])
                elif lane.claim_id not in fed:
                    continue  # busy: its next CallsDone's answer brings it more
                self._feed(lane, claim, now, out, self._ahead(lane, now) if prefetch else 1,
                           into=fed[lane.claim_id][1])
        for claim_id, (claim, calls) in fed.items():
            if calls:
                with built_here():  # of LaneCalls built here
                    out.append(Call(claim.startd, m.RunCalls(claim_id=claim_id, calls=tuple(calls)),
                                    cookie=(Answer.LANE_CALLS, claim_id)))
        lingering = [lane for lane in self._by_claim.values()
                     if lane.idle_until is not None and not lane.in_flight and not lane.stopping]
        if lingering and self.schedd.queue.exists("JobStatus == 1"):
            for lane in lingering:
                claim = claims.get(lane.claim_id)
                if claim is not None:
                    self._stop(lane, claim, out, "other jobs wait for slots")

    def _feed(self, lane: Lane, claim, now: float, out: list, want: int = 1,
              into: list[m.LaneCall] | None = None, logs: list | None = None) -> None:
        """Send the lane calls until it holds ``want`` (in a RunCalls, or added to ``into``: the
        answer to its CallsDone); a lane with nothing to do runs dry. Their EXECUTE events go
        into the queue's outbox with their start (or onto ``logs``, for a caller that keeps
        them there with its own, in the same transaction)."""
        if not lane.active or lane.stopping:
            return
        sd = self.schedd
        queue = sd.queue
        room = want - len(lane.in_flight)
        calls, events = [], {}
        if room > 0:
            # Bookkeeping: the next durable commit covers it. No savepoint (two statements) when it
            # joins the caller's transaction: should it fail, the caller's fails with it.
            with queue.transaction(durable=False, savepoint=False):
                while room > 0 and (picked := self._pick(lane, room)):
                    for job, files in self._inputs(picked):
                        if job.job_id in lane.in_flight:
                            continue  # named twice by the heap: started a moment ago
                        if files is None:
                            queue.set_attributes(job.job_id, {"HTCLane": "false"})
                            sd.reserved.discard(job.job_id)
                            sd.adverts.reschedule_due = True  # a starter of its own: the negotiator places it
                            continue
                        self._start(lane, claim, job, files, now, calls, events)
                        room -= 1
                written = [ul.WriteUserLog(path, tuple(evs), who) for (path, who), evs in events.items()]
                if logs is not None:
                    logs += written
                else:
                    out += owe(queue, written)
        if calls:
            if into is not None:
                into += calls
            else:
                with built_here():
                    out.append(Call(claim.startd, m.RunCalls(claim_id=claim.id, calls=tuple(calls)),
                                    cookie=(Answer.LANE_CALLS, claim.id)))
            sd.changed()
        elif not lane.in_flight:
            self._ran_dry(lane, claim, now, out)

    def _pick(self, lane: Lane, n: int) -> list:
        """Up to ``n`` idle calls for ``lane``, its first call first (the heap may name a job
        twice: the caller starts it once)."""
        picked = []
        while len(picked) < n:
            job = self._first(lane) or self._next_job(lane)
            if job is None:
                break
            picked.append(job)
        return picked

    def _inputs(self, jobs: list) -> list[tuple]:
        """``(job, its input files)`` for each of ``jobs`` (None: it cannot run on a lane),
        read with their owner's rights taken once for them all: the calls of one lane have one
        owner, the first part of its key (:func:`~htc.daemons.schedd.lane_calls.lane_key`)."""
        read = self.schedd.read_input
        if len(jobs) == 1:
            return [(jobs[0], call_inputs(jobs[0], read))]  # (the read takes the owner's rights itself)
        with self.reading_as(ul.owner(jobs[0])):
            return [(job, call_inputs(job, read)) for job in jobs]

    def _start(self, lane: Lane, claim, job, files: dict, now: float, calls: list, events: dict) -> None:
        """``job`` runs on ``lane`` now: Running, in flight, its LaneCall and EXECUTE event."""
        sd = self.schedd
        sd.queue.set_status(job.job_id, JobStatus.RUNNING, now=now,
                            attrs={"RemoteHost": quote(claim.slot_name), "StartdIpAddr": quote(claim.startd),
                                   "ClaimId": quote(claim.id), "HTCLaneRun": "true"})
        lane.in_flight[job.job_id] = now
        lane.idle_until = None
        with built_here():  # an int pair and the bytes read: the startd validates it on receipt
            calls.append(m.LaneCall(job_id=f"{job.cluster_id}.{job.proc_id}", files=files))
        path = ul.log_path(job)
        if path:
            events.setdefault((path, ul.owner(job)), []).append(
                ul.execute_event(job, claim.startd, claim.slot_name, claim.slot_values, now))

    def _first(self, lane: Lane):
        job_id, lane.first = lane.first, None
        if job_id is None:
            return None
        self.schedd.reserved.discard(job_id)
        job = self.schedd.job(job_id)
        return job if job is not None and job.status == JobStatus.IDLE else None

    def _ran_dry(self, lane: Lane, claim, now: float, out: list) -> None:
        settings = self.schedd.settings
        if settings.claim_linger > 0 and not self.schedd.queue.exists("JobStatus == 1"):
            if lane.idle_until is None:
                lane.idle_until = now + settings.claim_linger
            return
        self._stop(lane, claim, out, "no more calls for it")

    @staticmethod
    def _stop(lane: Lane, claim, out: list, why: str) -> None:
        lane.stopping = True
        lane.idle_until = None
        out.append(Call(claim.startd, m.Vacate(claim_id=claim.id, fast=True, reason=f"call lane ends: {why}"),
                        cookie=(Answer.LANE_VACATE, claim.id)))

    def stop_call(self, job_id: JobId, why: str, out: list) -> bool:
        """Take a call off its lane (remove, hold, vacate): the worker is stopped, as a job's
        process would be, and the lane's other calls become idle again (False: on no lane)."""
        for lane in self._by_claim.values():
            if job_id in lane.in_flight:
                claim = self.schedd.claims.get(lane.claim_id)
                if claim is not None and not lane.stopping:
                    self._stop(lane, claim, out, f"job {job_id[0]}.{job_id[1]}: {why}")
                return True
        return False

    # -- results --------------------------------------------------------------------------------

    def calls_done(self, event: c.Received, msg: m.CallsDone, now: float, out: list) -> None:
        """A batch of results: end those calls, and answer with the lane's next ones."""
        sd = self.schedd
        lane, claim = self._by_claim.get(msg.claim_id), sd.claims.get(msg.claim_id)
        if lane is None or claim is None:
            sd.orphans.late_results(msg, now, out)
            out.append(c.Reply(event.conn_id, m.MoreCalls()))
            return
        writes, events, repeated = [], {}, False
        # One transaction for the ends and the next starts: each commit writes the pages it
        # touched to the WAL, and the two share most of theirs.
        with sd.queue.transaction(durable=False):
            for result in msg.results:
                job_id = parse_job_id(result.job_id)
                sent = lane.in_flight.pop(job_id, None)
                if sent is None:
                    repeated = True  # a CallsDone sent again: our last answer may not have arrived
                    continue
                lane.ran += 1
                took = max(result.finished - result.started, 0.0)
                lane.pace = took if lane.pace is None else 0.8 * lane.pace + 0.2 * took
                job = sd.job(job_id)
                if job is None:
                    continue  # removed while it ran
                # Its run began when the worker took it, not when it was sent: a call queued
                # behind another one on the lane counts only its own time (RemoteWallClockTime).
                began = max(sent, now - took)
                shadow = Shadow(job_id, claim.id, ShadowState.RUNNING, started=began, executed=True)
                self.end_call(shadow, claim, job, result, now, writes, events)
            # The results go into the queue with the ends that announce them (the files are
            # written after the commit, at the end of the turn: htc.daemons.schedd.owed), so
            # that a schedd killed in between writes them when it starts again.
            # No fsync of its own: the next durable commit (the next submit's) covers these ends;
            # a power cut before it runs the calls again -- their results are files not fsynced
            # either -- while a crash of the schedd alone loses nothing (WAL).
            logs = [ul.WriteUserLog(path, tuple(evs), who) for (path, who), evs in events.items()]
            claim.last_alive = now
            sd.changed()
            # The answer brings the lane its next calls (one message, not a RunCalls and its Ack).
            # The startd sends one CallsDone at a time, so a fresh one means it had our last answer;
            # a repeated one may mean it did not: those calls go again (it runs none twice).
            more = [call for call in lane.answered if parse_job_id(call.job_id) in lane.in_flight] \
                if repeated else []
            mark = len(out)
            self._feed(lane, claim, now, out, self._ahead(lane, now), into=more, logs=logs)  # or it runs dry
            # The files and events of the batch (TERMINATED, then the next calls' EXECUTE): one
            # outbox entry, in the transaction of the ends and starts they announce.
            out[mark:mark] = owe(sd.queue, [*writes, *logs])
            lane.answered = more
            with built_here():  # of LaneCalls built here
                out.append(c.Reply(event.conn_id, m.MoreCalls(calls=tuple(more))))
            self.feed_all(now, out)

    def end_call(self, shadow: Shadow, claim, job, result, now: float, writes: list, events: dict) -> None:
        """Record the end of one lane call whose run is ``shadow`` (inside the caller's
        transaction): its usage and end (history or retry), its user-log events into ``events``
        (by log and owner), its result files into ``writes`` (with the owner's rights)."""
        sd = self.schedd
        shadow.usage.update(RemoteUserCpu=result.user_cpu, RemoteSysCpu=result.sys_cpu)
        recorded = record_end(sd.queue, shadow, claim, job, "exited", now, "", result.exit_code, None, False, 0, 0)
        path = ul.log_path(job)
        if path and recorded:
            events.setdefault((path, ul.owner(job)), []).extend(recorded)
        again = None if shadow.left_queue else sd.job(shadow.job_id)
        if again is not None and again.status == JobStatus.IDLE:
            self.enqueue(again)  # max_retries: it runs again
            sd.adverts.reschedule_due = True
        iwd = ul.literal(job, "Iwd")
        if isinstance(iwd, str) and iwd:
            # Gone from the queue: the call will not run again, its call file may go.
            writes.append(WriteCallFiles(iwd, lane_outputs(job, result),
                                         recycle=call_file(job) if again is None else None,
                                         owner=ul.owner(job)))

    # -- the end of a lane ------------------------------------------------------------------------

    def exited(self, event: c.Received, msg: m.JobExited, now: float, out: list) -> None:
        """The lane's worker ended (vacated, died, or could not start)."""
        lane, claim = self._by_claim.get(msg.claim_id), self.schedd.claims.get(msg.claim_id)
        out.append(c.Reply(event.conn_id, m.Ack()))
        if lane is None:
            return
        # A vacated lane (by the schedd, or the startd's policy) ended its claim with it; a worker
        # that ended by itself leaves the claim to the next job, as a job that exited does.
        if msg.vacated:
            reason = "the call worker was taken off its slot"
        elif msg.exit_signal is not None:
            reason = f"the call worker died of signal {msg.exit_signal}"
        else:
            reason = f"the call worker exited with status {msg.exit_code}"
        if "StarterError" in msg.usage_ad:
            self.broken[lane.key] = now + _BROKEN_FOR
            reason = f"the call worker could not start ({msg.usage_ad})"
            self._end(lane, claim, now, out, reason=reason, release=True)
            return
        self._end(lane, claim, now, out, reason=reason, reusable=not msg.vacated, culprit=not msg.vacated)

    def _end(self, lane: Lane, claim, now: float, out: list, *, reason: str, reusable: bool = False,
             release: bool = False, culprit: bool = False) -> None:
        """The lane is gone: its calls in flight are idle again; the claim goes the usual way
        (``reusable``: for the next job; ``release``: given back; neither: it ended with the lane).

        ``culprit``: the worker ended by itself, perhaps because of a call: those calls run on
        starters of their own from now on.
        """
        sd = self.schedd
        queue = sd.queue
        self._by_claim.pop(lane.claim_id, None)
        if lane.first is not None:
            sd.reserved.discard(lane.first)
            lane.first = None
        if lane.in_flight:
            evicted: list = []
            with queue.transaction(durable=False):
                for job_id in lane.in_flight:
                    job = sd.job(job_id)
                    if job is None:
                        continue
                    if job.status == JobStatus.REMOVED:
                        queue.retire(job_id, now=now)  # its ABORTED event was written when removed
                        continue
                    if job.status not in (JobStatus.RUNNING, JobStatus.SUSPENDED):
                        continue  # held while it ran
                    attrs = {"HTCLane": "false"} if culprit else {}
                    attrs["LastRemoteHost"] = quote(claim.slot_name if claim else "")
                    queue.set_attributes(job_id, attrs)
                    queue.set_status(job_id, JobStatus.IDLE, now=now)
                    evicted += ul.write(job, ul.evicted_event(job, {}, f"{reason}; the call runs again", now))
                    again = sd.job(job_id)
                    if again is not None:
                        self.enqueue(again)
                out += owe(queue, evicted)  # kept with the change (htc.daemons.schedd.owed)
            queue.sync()
            sd.adverts.reschedule_due = True
            lane.in_flight.clear()
        out.append(c.Log(f"call lane on {claim.slot_name if claim else lane.claim_id.split('#')[0]} ended after {lane.ran} calls: "
                         f"{reason}"))
        sd.changed()
        if claim is not None and claim.id in sd.claims:
            sd.claims.done(claim, reusable=reusable, release=release, now=now, out=out)

    def claim_lost(self, claim, why: str, now: float, out: list) -> None:
        """The claim of a lane is lost: the lane ends (the caller drops the claim itself)."""
        lane = self._by_claim.get(claim.id)
        if lane is not None:
            self._end(lane, None, now, out, reason=why)

    # -- timers ---------------------------------------------------------------------------------

    def deadline(self) -> float | None:
        """When the next lane kept idle has lingered long enough."""
        return min((lane.idle_until for lane in self._by_claim.values() if lane.idle_until is not None),
                   default=None)

    def timers(self, now: float, out: list) -> None:
        """Stop lanes that lingered idle for SCHEDD_CLAIM_LINGER."""
        for lane in list(self._by_claim.values()):
            if lane.idle_until is not None and now >= lane.idle_until and not lane.in_flight:
                claim = self.schedd.claims.get(lane.claim_id)
                if claim is not None:
                    self._stop(lane, claim, out, f"idle for SCHEDD_CLAIM_LINGER ({self.schedd.settings.claim_linger:g} s)")


#: what a call's answer is for -> the lanes' handler of it
_ON_ANSWER = {
    Answer.LANE: Lanes._activation_outcome,
    Answer.LANE_CALLS: Lanes._calls_outcome,
    Answer.LANE_VACATE: Lanes._vacate_outcome,
}

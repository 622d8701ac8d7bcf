"""Call lanes: function calls run one after another by a worker that stays up on a claim.

Theory of operation
-------------------
A function call of :class:`htc.executors.HTCExecutor` is a job like any other: it is submitted
into the durable queue, negotiated for, started, logged and retired. Starting a starter for each
call (sandbox, cgroup, a fork of a pre-imported Python, file transfer, an exit report) costs
more than most calls do, so a claim that is to run a call becomes a *call lane* instead:

1. ``_start_job`` on a job whose ad says ``HTCLane = true`` (the executor sets it for calls that
   need nothing a lane lacks: no time limit, checkpoint, streaming or custom output files)
   activates the claim with ``ActivateClaim(lane=True)``: the startd runs the worker
   ``python -m htc.executors.lane`` in a sandbox and cgroup of its own, under the slot's policy
   like any job.
2. Once the activation is acknowledged the schedd feeds the lane: it takes idle calls with the
   same *lane key* (owner, interpreter, arguments, environment, resource requests and
   requirements: what makes two calls interchangeable on one worker), marks each Running (with
   ``RemoteHost`` and an EXECUTE event, as a shadow would), reads its input files and sends
   them in one :class:`~htc.wire.messages.RunCalls`. A lane of quick calls (under 100 ms)
   holds the next one too, and about 300 ms of work if that is more (up to 33 calls), so the
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

A schedd that restarts does not reconnect to lanes: their calls go back to idle (a shadow
exception event says so) and run again, and it gives the lanes' claims back (each call
records its lane's claim, hidden like any ``ClaimId``), so the startd ends the orphaned
workers. It waits ``_ORPHAN_GRACE`` (2 s) before it does: a startd sends again, every half
second, the results the dead schedd did not take, and a call whose result so arrives while it
is still idle, on the record of that claim, ends with it instead of running a second time
(:meth:`LaneHandling._late_results`). The calls the lane had not finished run again: a call
runs at least once, not exactly once (docs/executor.md says so).

Calls in a lane are not shadows: ``htc rm``, ``htc hold`` or ``htc vacate`` of a call the
lane holds stops the whole worker, as it would stop a job's process; the lane's other calls
become idle again (EVICTED) and run elsewhere. ``htc suspend`` does not reach a lane call.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from htc.daemons import core as c
from htc.daemons.schedd import userlog as ul
from htc.daemons.starter.sandbox import TransferError, parse_remaps, split_list
from htc.daemons.schedd.callfiles import WriteCallFiles
from htc.daemons.calls import Call
from htc.daemons.schedd.owed import owe
from htc.daemons.schedd.shadow import Shadow, ShadowState, parse_job_id
from htc.wire.callfile import RESULT_FILE, is_call_file
from htc.wire.lane_frames import plain_name
from htc.jobqueue import JobStatus
from htc.jobqueue.ads import ClusterAd, quote
from htc.jobqueue.records import JobId
from htc.wire import messages as m

__all__ = ["LANE_ARGUMENTS", "Lane", "LaneHandling", "lane_key"]

#: the lane worker's arguments (the interpreter is the call's own ``Cmd``)
LANE_ARGUMENTS = "-m htc.executors.lane"
#: attributes that must be equal for two calls to share one worker (the owner first)
_KEY_ATTRS = ("Owner", "AccountingGroup", "Cmd", "Arguments", "Environment", "Env", "JobUniverse", "RequestCpus",
              "RequestMemory", "RequestDisk", "RequestGpus", "Requirements", "HTCSession")
#: features a lane does not provide; a call that asks for one runs on a starter of its own
_CLASSIC_ONLY = ("AllowedExecuteDuration", "AllowedJobDuration", "StreamOut", "StreamErr", "TransferOutput",
                 "OutputDestination")
#: the attributes of a lane key that a cluster usually shares (lower case; not the owner, a
#: column of each job, nor TransferOutputRemaps, which an executor sets per call)
_SHARED_NAMES = frozenset(n.lower() for n in ("HTCLane", *_CLASSIC_ONLY, *_KEY_ATTRS[1:]))
_LANE_KEY_MEMO = "htc.schedd.lane_key"
_UNSET = object()
#: a lane whose worker could not start sends its key's calls to starters this long (s)
_BROKEN_FOR = 60.0
#: seconds of work a lane holds ahead of its worker (within 1 .. _MAX_AHEAD calls)
_AHEAD_SECONDS = 0.300
_MAX_AHEAD = 32
#: calls quicker than this (s) get the next one queued behind them
_QUICK_CALL = 0.1
#: seconds a restarted schedd waits before it gives back its predecessor's lane claims (the
#: startd sends the results it holds again every 0.5 s: htc.daemons.startd.lanes.RETRY)
_ORPHAN_GRACE = 2.0


def lane_key(job) -> tuple | None:
    """What makes ``job`` interchangeable with other calls on one worker (None: not a lane call)."""
    cluster = getattr(job, "cluster", None)
    if isinstance(cluster, ClusterAd) and cluster.proc_attrs.isdisjoint(_SHARED_NAMES):
        # No proc sets any of them: worked out once per cluster ad (a cluster that changes is
        # read into a new ClusterAd, with an empty cache).
        shared = cluster.cache.get(_LANE_KEY_MEMO, _UNSET)
        if shared is _UNSET:
            shared = cluster.cache[_LANE_KEY_MEMO] = _shared_key(job)
    else:
        shared = _shared_key(job)
    if shared is None or output_remaps(job) is None:
        return None
    return (job.get("Owner"), *shared)


def _shared_key(job) -> tuple | None:
    """The lane key but the owner, from the attributes a cluster usually shares (None: not a
    lane call)."""
    if ul.literal(job, "HTCLane") is not True:
        return None
    for name in _CLASSIC_ONLY:
        value = ul.literal(job, name)
        if value not in (None, False, ""):
            return None
    return tuple(job.get(name) for name in _KEY_ATTRS[1:])


def output_remaps(job) -> dict[str, str] | None:
    """The job's ``TransferOutputRemaps`` when a lane can apply them: plain names renamed to
    plain names in the ``Iwd`` (None: remaps a lane leaves to the starter's file transfer)."""
    try:
        remaps = parse_remaps(ul.literal(job, "TransferOutputRemaps"))
    except TransferError:
        return None
    if not all(plain_name(k) and plain_name(v) for k, v in remaps.items()):
        return None
    return remaps


@dataclass(eq=False)
class Lane:
    """A call lane on one claim, as the schedd follows it."""

    claim_id: str
    key: tuple
    job_id: JobId                 # the job whose ad activated the lane (its JobExited names it)
    first: JobId | None = None    # that job, until the lane runs it
    active: bool = False          # the startd acknowledged the activation
    stopping: bool = False        # the schedd vacated it
    in_flight: dict[JobId, float] = field(default_factory=dict)  # sent, no result yet -> when sent
    pace: float | None = None     # recent seconds per call on the worker
    answered: list = field(default_factory=list)  # the calls of our last MoreCalls (sent again if it was lost)
    idle_until: float | None = None
    ran: int = 0                  # calls finished on it

    def ahead(self, now: float, others_busy: bool) -> int:
        """How many calls the lane should hold now.

        One, unless its calls are quick (under ``_QUICK_CALL``: then the next one too, and
        about ``_AHEAD_SECONDS`` of them, so the worker never waits for the wire), every other
        lane of its kind is busy too (an idle lane takes the next call instead) and the call it
        runs is not taking much longer than its pace (a call queued behind a slow one could
        neither run elsewhere nor be cancelled).
        """
        if self.pace is None or not others_busy or self.pace > _QUICK_CALL:
            return 1
        oldest = min(self.in_flight.values(), default=now)
        if now - oldest > max(10 * self.pace, 2 * _AHEAD_SECONDS):
            return 1
        return 1 + max(1, min(_MAX_AHEAD, math.ceil(_AHEAD_SECONDS / max(self.pace, 1e-5))))


class LaneHandling:
    """The schedd core's call lanes. A mixin of :class:`htc.daemons.schedd.core.Schedd`.

    It uses the core's ``queue``, ``claims``, ``reserved``, ``settings``, the claim and shadow
    helpers (``_claim_step``, ``_claim_done``, ``_record_end``) and keeps ``lanes`` (claim id
    -> :class:`Lane`), ``lane_idle`` (lane key -> a heap of idle calls, best first) and
    ``lane_broken`` (lane key -> until when it runs on starters), and after a restart
    ``lane_orphans`` (the predecessor's lane claims -> their startds, given back at
    ``_orphans_release_at``).
    """

    read_input: Callable[[str], bytes]

    # -- the idle calls, by lane key --------------------------------------------------------

    def _lane_enqueue(self, job) -> None:
        if not self.settings.call_lanes or job.status != JobStatus.IDLE:
            return
        key = lane_key(job)
        if key is not None:
            heapq.heappush(self.lane_idle.setdefault(key, []), (-job.prio, job.cluster_id, job.proc_id))

    def _lane_index(self, now: float) -> None:
        """Start-up: every idle call is a lane candidate."""
        if self.settings.call_lanes:
            for job in self.queue.query("JobStatus == 1 && HTCLane =?= true", now=now):
                self._lane_enqueue(job)

    def _next_lane_job(self, lane: Lane):
        heap = self.lane_idle.get(lane.key)
        while heap:
            _, cluster, proc = heapq.heappop(heap)
            job_id = (cluster, proc)
            if job_id in self.reserved:
                continue
            job = self._job(job_id)
            if job is not None and job.status == JobStatus.IDLE and lane_key(job) == lane.key:
                return job
        return None

    def _wants_lane(self, job, now: float) -> tuple | None:
        if not self.settings.call_lanes:
            return None
        key = lane_key(job)
        if key is None or self.lane_broken.get(key, 0.0) > now:
            return None
        return key

    # -- starting and feeding ----------------------------------------------------------------

    def _start_lane(self, claim, job, key: tuple, now: float, out: list) -> bool:
        lane = Lane(claim.id, key, job.job_id, first=job.job_id)
        self.lanes[claim.id] = lane
        self.reserved.add(job.job_id)  # runs first, once the worker is up
        claim.job = None
        self._claim_step(claim, "activate")
        ad = {k: v for k, v in job.items() if k != "ClaimId"}
        ad["Arguments"] = quote(LANE_ARGUMENTS)
        ad.pop("Args", None)
        text = "[ " + "; ".join(f"{k} = {v}" for k, v in ad.items()) + " ]"
        out.append(Call(claim.startd, m.ActivateClaim(claim_id=claim.id, job_ad=text,
                                                      shadow_address=self.settings.address, lane=True),
                        cookie=("lane", claim.id)))
        out.append(c.Log(f"claim on {claim.slot_name}: starting a call lane for job {job.cluster_id}.{job.proc_id}"))
        return True

    def _lane_answered(self, event, now: float, out: list) -> None:
        kind, claim_id = event.cookie[0], event.cookie[1]
        lane, claim = self.lanes.get(claim_id), self.claims.get(claim_id)
        if lane is None or claim is None:
            return
        if getattr(event, "reply", None) is not None:
            if kind == "lane":
                lane.active = True
                claim.last_alive = now
                self._feed_lane(lane, claim, now, out)
                self._feed_lanes(now, out)
            return
        if kind == "lane":
            out.append(c.Log(f"claim on {claim.slot_name}: the call lane did not start ({event.error}); calls "
                             f"like job {lane.job_id[0]}.{lane.job_id[1]} run on starters for {_BROKEN_FOR:g} s"))
            self.lane_broken[lane.key] = now + _BROKEN_FOR
            self._end_lane(lane, claim, now, out, reason=f"the call lane did not start: {event.error}", release=True)
        elif kind == "lanecalls" and event.refused:
            self._end_lane(lane, claim, now, out, reason=f"the startd refused the calls: {event.error}", release=True)
        elif kind == "lanecalls" and not lane.stopping:
            # Unanswered: the calls may never have got there. Stop the worker; its end (or the
            # claim's lease, if the startd is gone) puts every call it held back in the queue.
            self._stop_lane(lane, claim, out, f"the startd did not take calls ({event.error})")
        elif kind == "lanevacate" and event.refused:
            self._end_lane(lane, claim, now, out, reason=f"the startd no longer holds the claim ({event.error})")

    def _ahead(self, lane: Lane, now: float) -> int:
        """How many calls ``lane`` should hold now (see :meth:`Lane.ahead`).

        With other lanes of its kind, it takes at most its share of the idle calls at a time
        (that many more than it holds): at the end of a map the lanes then finish together,
        instead of one running the last calls it took while the others have nothing to do.
        """
        peers = [other for other in self.lanes.values()
                 if other.key == lane.key and other is not lane and other.active and not other.stopping]
        want = lane.ahead(now, all(other.in_flight for other in peers))
        if want > 1 and peers:
            idle = len(self.lane_idle.get(lane.key, ()))  # (the heap may hold a few stale entries)
            want = min(want, len(lane.in_flight) + max(1, -(-idle // (len(peers) + 1))))
        return want

    def _feed_lanes(self, now: float, out: list) -> None:
        """Give idle calls to the lanes without one: first one to each, then more to quick
        lanes (see :meth:`Lane.ahead`), all of a lane's in one RunCalls. A lane with calls
        gets its next ones in the answer to its CallsDone, not in a RunCalls of their own
        (a message each way less per call). A lane kept idle that none of the idle jobs
        fits ends, so that its slot can go to them (as a lingering claim would)."""
        fed: dict[str, tuple[object, list[m.LaneCall]]] = {}
        for prefetch in (False, True):
            for lane in list(self.lanes.values()):
                claim = self.claims.get(lane.claim_id)
                if claim is None or (not self.lane_idle.get(lane.key) and lane.first is None):
                    continue
                if not prefetch and not lane.in_flight:
                    fed[lane.claim_id] = (claim, [])
                elif lane.claim_id not in fed:
                    continue  # busy: its next CallsDone's answer brings it more
                self._feed_lane(lane, claim, now, out, self._ahead(lane, now) if prefetch else 1,
                                into=fed[lane.claim_id][1])
        for claim_id, (claim, calls) in fed.items():
            if calls:
                out.append(Call(claim.startd, m.RunCalls(claim_id=claim_id, calls=tuple(calls)),
                                cookie=("lanecalls", claim_id)))
        lingering = [lane for lane in self.lanes.values()
                     if lane.idle_until is not None and not lane.in_flight and not lane.stopping]
        if lingering and self.queue.count("JobStatus == 1"):
            for lane in lingering:
                claim = self.claims.get(lane.claim_id)
                if claim is not None:
                    self._stop_lane(lane, claim, out, "other jobs wait for slots")

    def _feed_lane(self, lane: Lane, claim, now: float, out: list, want: int = 1,
                   into: list[m.LaneCall] | None = None, logs: list | None = None) -> None:
        """Send the lane calls until it holds ``want`` (in a RunCalls, or added to ``into``: the
        answer to its CallsDone); a lane with nothing to do runs dry. Their EXECUTE events go
        into the queue's outbox with their start (or onto ``logs``, for a caller that keeps
        them there with its own, in the same transaction)."""
        if not lane.active or lane.stopping:
            return
        room = want - len(lane.in_flight)
        calls, events = [], {}
        if room > 0:
            with self.queue.transaction(durable=False):  # bookkeeping: the next durable commit covers it
                while room > 0:
                    job = self._lane_first(lane) or self._next_lane_job(lane)
                    if job is None:
                        break
                    files = self._lane_inputs(job)
                    if files is None:
                        self.queue.set_attributes(job.job_id, {"HTCLane": "false"})
                        self.reserved.discard(job.job_id)
                        self._reschedule_due = True  # a starter of its own: the negotiator places it
                        continue
                    self.queue.set_status(job.job_id, JobStatus.RUNNING, now=now,
                                          attrs={"RemoteHost": quote(claim.slot_name),
                                                 "StartdIpAddr": quote(claim.startd),
                                                 "ClaimId": quote(claim.id), "HTCLaneRun": "true"})
                    lane.in_flight[job.job_id] = now
                    lane.idle_until = None
                    room -= 1
                    calls.append(m.LaneCall(job_id=f"{job.cluster_id}.{job.proc_id}", files=files))
                    path = ul.log_path(job)
                    if path:
                        events.setdefault((path, ul.owner(job)), []).append(
                            ul.execute_event(job, claim.startd, claim.slot_name, claim.slot_values, now))
                written = [ul.WriteUserLog(path, tuple(evs), who) for (path, who), evs in events.items()]
                if logs is not None:
                    logs += written
                else:
                    out += owe(self.queue, written)
        if calls:
            if into is not None:
                into += calls
            else:
                out.append(Call(claim.startd, m.RunCalls(claim_id=claim.id, calls=tuple(calls)),
                                cookie=("lanecalls", claim.id)))
            self._changed()
        elif not lane.in_flight:
            self._lane_ran_dry(lane, claim, now, out)

    def _lane_first(self, lane: Lane):
        job_id, lane.first = lane.first, None
        if job_id is None:
            return None
        self.reserved.discard(job_id)
        job = self._job(job_id)
        return job if job is not None and job.status == JobStatus.IDLE else None

    def _lane_inputs(self, job) -> dict[str, bytes] | None:
        """The call's input files by name (None: it cannot run on a lane)."""
        iwd = ul.literal(job, "Iwd")
        if not isinstance(iwd, str):
            return None
        files, total = {}, 0
        for source in split_list(ul.literal(job, "TransferInput")):
            name = os.path.basename(source)
            if "://" in source or not name or name in files:
                return None
            try:
                data = self.read_input(os.path.join(iwd, source), ul.owner(job))
            except OSError:
                return None  # a directory, or missing: the starter's transfer says what is wrong
            total += len(data)
            if total > m.MAX_LANE_CALL_BYTES:
                return None
            files[name] = data
        return files

    def _lane_ran_dry(self, lane: Lane, claim, now: float, out: list) -> None:
        if self.settings.claim_linger > 0 and not self.queue.count("JobStatus == 1"):
            if lane.idle_until is None:
                lane.idle_until = now + self.settings.claim_linger
            return
        self._stop_lane(lane, claim, out, "no more calls for it")

    def _stop_lane(self, lane: Lane, claim, out: list, why: str) -> None:
        lane.stopping = True
        lane.idle_until = None
        out.append(Call(claim.startd, m.Vacate(claim_id=claim.id, fast=True, reason=f"call lane ends: {why}"),
                        cookie=("lanevacate", claim.id)))

    def _stop_lane_call(self, job_id: JobId, why: str, out: list) -> bool:
        """Take a call off its lane (remove, hold, vacate): the worker is stopped, as a job's
        process would be, and the lane's other calls become idle again (False: on no lane)."""
        for lane in self.lanes.values():
            if job_id in lane.in_flight:
                claim = self.claims.get(lane.claim_id)
                if claim is not None and not lane.stopping:
                    self._stop_lane(lane, claim, out, f"job {job_id[0]}.{job_id[1]}: {why}")
                return True
        return False

    # -- results --------------------------------------------------------------------------------

    def _calls_done(self, event: c.Received, msg: m.CallsDone, now: float, out: list) -> None:
        lane, claim = self.lanes.get(msg.claim_id), self.claims.get(msg.claim_id)
        if lane is None or claim is None:
            self._late_results(msg, now, out)
            out.append(c.Reply(event.conn_id, m.MoreCalls()))
            return
        writes, events, repeated = [], {}, False
        # One transaction for the ends and the next starts: each commit writes the pages it
        # touched to the WAL, and the two share most of theirs.
        with self.queue.transaction(durable=False):
            for result in msg.results:
                job_id = parse_job_id(result.job_id)
                sent = lane.in_flight.pop(job_id, None)
                if sent is None:
                    repeated = True  # a CallsDone sent again: our last answer may not have arrived
                    continue
                lane.ran += 1
                took = max(result.finished - result.started, 0.0)
                lane.pace = took if lane.pace is None else 0.8 * lane.pace + 0.2 * took
                job = self._job(job_id)
                if job is None:
                    continue  # removed while it ran
                # Its run began when the worker took it, not when it was sent: a call queued
                # behind another one on the lane counts only its own time (RemoteWallClockTime).
                began = max(sent, now - took)
                shadow = Shadow(job_id, claim.id, ShadowState.RUNNING, started=began, executed=True)
                self._end_call(shadow, claim, job, result, now, writes, events)
            # The results go into the queue with the ends that announce them (the files are
            # written after the commit, at the end of the turn: htc.daemons.schedd.owed), so
            # that a schedd killed in between writes them when it starts again.
            # No fsync of its own: the next durable commit (the next submit's) covers these ends;
            # a power cut before it runs the calls again -- their results are files not fsynced
            # either -- while a crash of the schedd alone loses nothing (WAL).
            logs = [ul.WriteUserLog(path, tuple(evs), who) for (path, who), evs in events.items()]
            claim.last_alive = now
            self._changed()
            # The answer brings the lane its next calls (one message, not a RunCalls and its Ack).
            # The startd sends one CallsDone at a time, so a fresh one means it had our last answer;
            # a repeated one may mean it did not: those calls go again (it runs none twice).
            more = [call for call in lane.answered if parse_job_id(call.job_id) in lane.in_flight] \
                if repeated else []
            mark = len(out)
            self._feed_lane(lane, claim, now, out, self._ahead(lane, now), into=more, logs=logs)  # or it runs dry
            # The files and events of the batch (TERMINATED, then the next calls' EXECUTE): one
            # outbox entry, in the transaction of the ends and starts they announce.
            out[mark:mark] = owe(self.queue, [*writes, *logs])
            lane.answered = more
            out.append(c.Reply(event.conn_id, m.MoreCalls(calls=tuple(more))))
            self._feed_lanes(now, out)

    def _end_call(self, shadow: Shadow, claim, job, result, now: float, writes: list, events: dict) -> None:
        """Record the end of one lane call whose run is ``shadow`` (inside the caller's
        transaction): its usage and end (history or retry), its user-log events into ``events``
        (by log and owner), its result files into ``writes`` (with the owner's rights)."""
        shadow.usage.update(RemoteUserCpu=result.user_cpu, RemoteSysCpu=result.sys_cpu)
        recorded = self._record_end(shadow, claim, job, "exited", now, "", result.exit_code, None, False, 0, 0)
        path = ul.log_path(job)
        if path and recorded:
            events.setdefault((path, ul.owner(job)), []).extend(recorded)
        again = None if shadow.left_queue else self._job(shadow.job_id)
        if again is not None and again.status == JobStatus.IDLE:
            self._lane_enqueue(again)  # max_retries: it runs again
            self._reschedule_due = True
        iwd = ul.literal(job, "Iwd")
        if isinstance(iwd, str) and iwd:
            # Gone from the queue: the call will not run again, its call file may go.
            writes.append(WriteCallFiles(iwd, self._lane_outputs(job, result),
                                         recycle=self._call_file(job) if again is None else None,
                                         owner=ul.owner(job)))

    def _late_results(self, msg: m.CallsDone, now: float, out: list) -> None:
        """Results of a lane the schedd no longer follows -- its predecessor's, sent again by the
        startd after a restart, or one whose claim it gave up: a call that is idle again, waiting
        to run a second time, and whose record names that lane's claim ends with this run's
        result instead (its files and end as in :meth:`_calls_done`). Others are dropped: the
        call runs, or ran, again."""
        writes, events = [], {}
        with self.queue.transaction(durable=False):
            for result in msg.results:
                job_id = parse_job_id(result.job_id)
                job = None if job_id in self.reserved else self._job(job_id)
                if job is None or job.status != JobStatus.IDLE or ul.literal(job, "ClaimId") != msg.claim_id:
                    continue
                self.queue.set_status(job_id, JobStatus.RUNNING, now=now)
                job = self._job(job_id)
                took = max(result.finished - result.started, 0.0)
                shadow = Shadow(job_id, msg.claim_id, ShadowState.RUNNING, started=now - took, executed=True)
                self._end_call(shadow, None, job, result, now, writes, events)
            if writes:
                out += owe(self.queue, [*writes, *(ul.WriteUserLog(path, tuple(evs), who)
                                                   for (path, who), evs in events.items())])
        if writes:
            out.append(c.Log(f"took {len(writes)} result(s) of the call lane on claim "
                             f"{msg.claim_id.split('#')[0]} that the schedd no longer follows; those calls do "
                             "not run again"))
            self._changed()

    @staticmethod
    def _call_file(job) -> str | None:
        names = [os.path.basename(source) for source in split_list(ul.literal(job, "TransferInput"))]
        return next((name for name in names if is_call_file(name)), None)

    @staticmethod
    def _lane_outputs(job, result: m.LaneResult) -> tuple[tuple[str, bytes], ...]:
        remaps = output_remaps(job) or {}
        plain = sorted(((name, data) for name, data in result.files.items() if plain_name(name)),
                       key=lambda item: item[0] != RESULT_FILE)  # the result first: it may take the call file's place
        files = [(remaps.get(name, name), data) for name, data in plain]
        # Empty output empties a file an earlier run left; on a first run there is none to look for.
        first_run = ul.number(job, "NumJobStarts") <= 1
        for attr, data in (("Out", result.stdout), ("Err", result.stderr)):
            target = ul.literal(job, attr)
            if (data or not first_run) and isinstance(target, str) and target and target != "/dev/null" \
                    and "/" not in target:
                files.append((target, data))
        return tuple(files)

    # -- the end of a lane ------------------------------------------------------------------------

    def _lane_exited(self, event: c.Received, msg: m.JobExited, now: float, out: list) -> None:
        lane, claim = self.lanes.get(msg.claim_id), self.claims.get(msg.claim_id)
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
            self.lane_broken[lane.key] = now + _BROKEN_FOR
            reason = f"the call worker could not start ({msg.usage_ad})"
            self._end_lane(lane, claim, now, out, reason=reason, release=True)
            return
        self._end_lane(lane, claim, now, out, reason=reason, reusable=not msg.vacated, culprit=not msg.vacated)

    def _end_lane(self, lane: Lane, claim, now: float, out: list, *, reason: str, reusable: bool = False,
                  release: bool = False, culprit: bool = False) -> None:
        """The lane is gone: its calls in flight are idle again; the claim goes the usual way
        (``reusable``: for the next job; ``release``: given back; neither: it ended with the lane).

        ``culprit``: the worker ended by itself, perhaps because of a call: those calls run on
        starters of their own from now on.
        """
        self.lanes.pop(lane.claim_id, None)
        if lane.first is not None:
            self.reserved.discard(lane.first)
            lane.first = None
        if lane.in_flight:
            evicted: list = []
            with self.queue.transaction(durable=False):
                for job_id in lane.in_flight:
                    job = self._job(job_id)
                    if job is None:
                        continue
                    if job.status == JobStatus.REMOVED:
                        self.queue.retire(job_id, now=now)  # its ABORTED event was written when removed
                        continue
                    if job.status not in (JobStatus.RUNNING, JobStatus.SUSPENDED):
                        continue  # held while it ran
                    attrs = {"HTCLane": "false"} if culprit else {}
                    attrs["LastRemoteHost"] = quote(claim.slot_name if claim else "")
                    self.queue.set_attributes(job_id, attrs)
                    self.queue.set_status(job_id, JobStatus.IDLE, now=now)
                    evicted += ul.write(job, ul.evicted_event(job, {}, f"{reason}; the call runs again", now))
                    again = self._job(job_id)
                    if again is not None:
                        self._lane_enqueue(again)
                out += owe(self.queue, evicted)  # kept with the change (htc.daemons.schedd.owed)
            self.queue.sync()
            self._reschedule_due = True
            lane.in_flight.clear()
        out.append(c.Log(f"call lane on {claim.slot_name if claim else lane.claim_id} ended after {lane.ran} calls: "
                         f"{reason}"))
        self._changed()
        if claim is not None and claim.id in self.claims:
            self._claim_done(claim, reusable=reusable, release=release, now=now, out=out)

    # -- a restart ------------------------------------------------------------------------------

    def _lanes_after_restart(self, jobs, now: float, out: list) -> list:
        """Start-up: calls that were on lanes run again, and their lanes' claims are given
        back (the startd ends the orphaned worker at once instead of when the lease runs
        out). Returns the running jobs that are not lane calls."""
        others, claims = [], {}
        for job in jobs:
            if ul.literal(job, "HTCLaneRun") is not True or JobStatus(job.status) not in (
                    JobStatus.RUNNING, JobStatus.SUSPENDED, JobStatus.REMOVED):
                others.append(job)
                continue
            claim_id, startd = ul.literal(job, "ClaimId"), ul.literal(job, "StartdIpAddr")
            if isinstance(claim_id, str) and isinstance(startd, str):
                claims[claim_id] = startd
            if job.status == JobStatus.REMOVED:
                self.queue.retire(job.job_id, now=now)
                continue
            with self.queue.transaction():  # the event is kept with the change (htc.daemons.schedd.owed)
                self.queue.set_status(job.job_id, JobStatus.IDLE, now=now, attrs={"HTCLaneRun": "false"})
                out += owe(self.queue, ul.write(job, ul.shadow_exception_event(
                    job, "the schedd restarted while the call ran on a call lane; it runs again", now)))
        # The claims go back a moment later (_ORPHAN_GRACE): meanwhile the startds send again the
        # results they could not deliver to the dead schedd, and _late_results keeps those calls
        # from running a second time.
        self.lane_orphans.update(claims)
        if claims:
            self._orphans_release_at = now + _ORPHAN_GRACE
        return others

    def _release_orphans(self, out: list) -> None:
        claims, self.lane_orphans = self.lane_orphans, {}
        self._orphans_release_at = None
        for claim_id, startd in claims.items():
            out.append(c.Send(startd, m.ReleaseClaim(claim_id=claim_id, reason="the schedd restarted; its call "
                                                                               "lane ends")))
        if claims:
            out.append(c.Log(f"gave back {len(claims)} call lane claim(s) after the restart"))

    # -- timers ---------------------------------------------------------------------------------

    def _lanes_deadline(self) -> float | None:
        times = [lane.idle_until for lane in self.lanes.values() if lane.idle_until is not None]
        if self._orphans_release_at is not None:
            times.append(self._orphans_release_at)
        return min(times, default=None)

    def _lane_timers(self, now: float, out: list) -> None:
        if self._orphans_release_at is not None and now >= self._orphans_release_at:
            self._release_orphans(out)
        for lane in list(self.lanes.values()):
            if lane.idle_until is not None and now >= lane.idle_until and not lane.in_flight:
                claim = self.claims.get(lane.claim_id)
                if claim is not None:
                    self._stop_lane(lane, claim, out, f"idle for SCHEDD_CLAIM_LINGER ({self.settings.claim_linger:g} s)")

    def _lane_claim_lost(self, claim, why: str, now: float, out: list) -> None:
        lane = self.lanes.get(claim.id)
        if lane is not None:  # the caller drops the claim itself
            self._end_lane(lane, None, now, out, reason=why)

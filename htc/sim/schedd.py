"""The simulated schedd: the job queue, and the answers it gives the negotiator.

What is the schedd's own code: the autocluster ids (:class:`htc.daemons.autocluster.
AutoclusterTable`, re-keyed when the negotiator's significant attributes change), the job order
(:func:`htc.daemons.autocluster.job_order_key`: JobPrio, then QDate, ClusterId, ProcId) and the
request objects (:class:`~htc.daemons.autocluster.ResourceRequest`). What is modelled: the queue
itself (jobs in memory, no job log), shadows (a match starts the job at once), and the
submitter ads (one per submitter with jobs, its idle and running counts).

A job's autocluster id is kept on the job and recomputed only when the significant attributes
change (the real schedd caches per cluster the same way, ``AutoclusterTable.ids_by_cluster``),
so that a queue of 100,000 idle jobs costs no key computation in a cycle. Every job ad has one
shape (the names of :class:`Job`'s ad, literal ``Requirements`` and ``Rank``), so ids come from
:meth:`AutoclusterTable.shape_id_of`, which works out the significant attributes once per set,
not once per job. A submitter's requests are kept from cycle to cycle and built again only
when its idle jobs change (a submit, a start, a job back to idle) or the ids do: in a dedicated
pool most cycles follow a few jobs' ends, and most submitters' queues did not move.

``fifo = True`` is the FIFO control policy: every job is submitted under one submitter name, so
the negotiator sees one queue in the schedd's order (oldest job first, whoever owns it) and fair
share has nothing to divide. The negotiator has no FIFO mode of its own.
"""

from __future__ import annotations

from htc.daemons.autocluster import AutoclusterTable, ResourceRequest, job_order_key
from htc.daemons.negotiator.submitters import SubmitterAd
from htc.sim.workload import JobSpec

__all__ = ["FIFO_SUBMITTER", "Job", "Schedd", "SCHEDD"]

SCHEDD = "sim-schedd"
FIFO_SUBMITTER = "fifo@sim"


def _job_ad(cluster: int, owner: str, qdate: int) -> dict:
    """A job's ad: every job's has these names, and the same literal Requirements and Rank."""
    return {"ClusterId": cluster, "ProcId": 0, "Owner": owner, "JobPrio": 0, "QDate": qdate,
            "JobUniverse": 5, "Requirements": True, "Rank": 0.0, "RequestCpus": 1,
            "RequestMemory": 128, "RequestDisk": 1024, "ImageSize": 1024}


#: the shape of every job ad (:meth:`AutoclusterTable.shape_id_of`)
_SHAPE = _job_ad(0, "", 0)


class Job:
    """One job and its history (times are simulated seconds)."""

    __slots__ = ("job_id", "spec", "submitter", "ad", "autocluster", "remaining", "delivered",
                 "first_start", "placed_at", "run_start", "finished", "machine", "epoch",
                 "vacates", "preemptions", "placements", "order")

    def __init__(self, job_id: str, spec: JobSpec, submitter: str, cluster: int):
        self.job_id = job_id
        self.spec = spec
        self.submitter = submitter
        self.ad = _job_ad(cluster, spec.user, int(spec.submit))
        self.autocluster = 0
        self.order = job_order_key(self.ad)  # the schedd's job order (constant: nothing edits the ad)
        self.remaining = spec.demand
        self.delivered = 0.0
        self.first_start: float | None = None
        self.placed_at: float | None = None  # start of the current placement
        self.run_start: float | None = None  # start of the current running (not suspended) stretch
        self.finished: float | None = None
        self.machine = None
        self.epoch = 0  # bumped whenever a scheduled completion stops being valid
        self.vacates = 0  # owner came back and stayed: checkpointed and requeued
        self.preemptions = 0  # the negotiator gave its machine to another user
        self.placements = 0


class Schedd:
    """The queue of one schedd (the whole pool submits through it)."""

    def __init__(self, fifo: bool = False):
        self.fifo = fifo
        self.table = AutoclusterTable()
        self.jobs: dict[str, Job] = {}
        self.idle: dict[str, dict[str, Job]] = {}  # submitter -> idle jobs by id
        self.running: dict[str, int] = {}
        self._next_cluster = 1
        #: the table's id function for this schedd's jobs (one shape), for the current set
        self._id_of = self.table.shape_id_of(_SHAPE)
        #: submitter -> its requests, while its idle jobs and their ids stay the same
        self._requests: dict[str, tuple[ResourceRequest, ...]] = {}

    def submit(self, spec: JobSpec) -> Job:
        """Queue one job; returns it (idle)."""
        cluster = self._next_cluster
        self._next_cluster += 1
        submitter = FIFO_SUBMITTER if self.fifo else f"{spec.user}@sim"
        job = Job(f"{cluster}.0", spec, submitter, cluster)
        job.autocluster = self._id_of(job.ad)
        self._requests.pop(submitter, None)
        self.jobs[job.job_id] = job
        self.idle.setdefault(submitter, {})[job.job_id] = job
        self.running.setdefault(submitter, 0)
        return job

    def started(self, job: Job) -> None:
        """A match started ``job``: it leaves the idle set."""
        del self.idle[job.submitter][job.job_id]
        self._requests.pop(job.submitter, None)
        self.running[job.submitter] += 1

    def stopped(self, job: Job, done: bool) -> None:
        """``job`` left its machine: finished (``done``), or back to idle (vacated, preempted)."""
        self.running[job.submitter] -= 1
        if not done:
            self.idle[job.submitter][job.job_id] = job
            self._requests.pop(job.submitter, None)

    def idle_count(self) -> int:
        """How many jobs are idle in the whole queue."""
        return sum(len(jobs) for jobs in self.idle.values())

    def submitter_ads(self) -> tuple[SubmitterAd, ...]:
        """One Submitter ad per submitter with jobs in the queue."""
        return tuple(SubmitterAd(name=name, schedd=SCHEDD, schedd_address="<sim:schedd>",
                                 idle_jobs=len(idle), running_jobs=self.running[name])
                     for name, idle in self.idle.items() if idle or self.running[name])

    def requests(self, submitter: str, significant: tuple[str, ...]) -> tuple[ResourceRequest, ...]:
        """The submitter's idle jobs as resource requests, best job first (the schedd's answer)."""
        if self.table.set_significant(significant):
            self._id_of = id_of = self.table.shape_id_of(_SHAPE)
            self._requests.clear()
            for job in self.jobs.values():
                if job.finished is None:
                    job.autocluster = id_of(job.ad)
        kept = self._requests.get(submitter)
        if kept is not None:
            return kept
        ordered = sorted(self.idle.get(submitter, {}).values(), key=lambda j: j.order)
        groups: dict[int, list[Job]] = {}
        for job in ordered:
            groups.setdefault(job.autocluster, []).append(job)
        made = self._requests[submitter] = tuple(
            ResourceRequest(autocluster_id=ac, job=members[0].ad, count=len(members),
                            job_ids=tuple(j.job_id for j in members))
            for ac, members in groups.items())
        return made

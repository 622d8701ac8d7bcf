"""``htc checkpoint``: the schedd has a running standard-universe job checkpointed now (sans-IO).

Theory of operation
-------------------
A tool sends :class:`~htc.wire.messages.CheckpointJobs` naming jobs (``cluster.proc``, or a
whole cluster). For each job :func:`checkpoint_jobs` decides, in this order:

* the job exists (else "no such job");
* the peer is the job's owner or an administrator, as for ``htc vacate_job``
  (:meth:`htc.daemons.schedd.access.Access.may_change`);
* it is a standard-universe job (``JobUniverse`` 1): only the runtime can checkpoint a process
  it did not write (else "not a standard-universe job");
* it is Running with a shadow on a claim (else "not running").

A job that passes is *requested*: the schedd sends ``CheckpointClaim`` to the claim's startd,
whose starter signals the job (:meth:`htc.daemons.starter.standard.StandardJob.checkpoint`); the
job keeps running, and its image comes back to the shadow like a periodic one, where
:mod:`htc.daemons.schedd.checkpoints` records it (``NumCkpts``, the 003 event). The tool gets its
answer as soon as every request is sent (as condor_checkpoint's "Sent checkpoint command");
the startd's refusal, if any, is logged by :func:`checkpoint_answered`.
"""

from __future__ import annotations

from htc.daemons import core as c
from htc.daemons.calls import Call, CallFailed
from htc.daemons.schedd.access import denied_log
from htc.daemons.schedd.checkpoints import is_standard
from htc.daemons.schedd.events import Answer
from htc.jobqueue import JobStatus
from htc.wire import messages as m

__all__ = ["checkpoint_answered", "checkpoint_jobs"]


def _jobs_named(sd, text: str, now: float) -> list:
    cluster, _, proc = text.partition(".")
    constraint = f"ClusterId == {int(cluster)}" + (f" && ProcId == {int(proc)}" if proc else "")
    return sd.queue.query(constraint, now=now)


def _refusal(sd, event: c.Received, job) -> str | None:
    """Why ``job`` cannot be checkpointed for this peer (None: it can)."""
    if not sd.access.may_change(event, job):
        return f"permission denied: only the owner ({job.owner}) or an administrator may checkpoint it"
    if not is_standard(job):
        return "not a standard-universe job: only universe = standard jobs are checkpointed by htc"
    shadow = sd.shadows.get(job.job_id)
    claim = sd.claims.get(shadow.claim_id) if shadow is not None else None
    if JobStatus(job.status) != JobStatus.RUNNING or claim is None:
        return f"not running (status {JobStatus(job.status).name}); only a running job is checkpointed"
    return None


def checkpoint_jobs(sd, event: c.Received, msg: m.CheckpointJobs, now: float, out: list) -> None:
    """Answer CheckpointJobs (see the module docstring)."""
    requested: list[str] = []
    refused: dict[str, str] = {}
    for text in msg.ids:
        jobs = _jobs_named(sd, text, now)
        if not jobs:
            refused[text] = "no such job in the queue"
        for job in jobs:
            name = f"{job.cluster_id}.{job.proc_id}"
            why = _refusal(sd, event, job)
            if why is not None:
                refused[name] = why
                if why.startswith("permission denied"):
                    out.append(denied_log(event, f"CheckpointJobs {name}", why))
                continue
            claim = sd.claims.get(sd.shadows.get(job.job_id).claim_id)
            out.append(Call(claim.startd, m.CheckpointClaim(claim_id=claim.id),
                            cookie=(Answer.CHECKPOINT, job.job_id, claim.id)))
            out.append(c.Log(f"job {name}: checkpoint requested from {claim.startd}"))
            requested.append(name)
    out.append(c.Reply(event.conn_id, m.CheckpointJobsReply(requested=tuple(requested), refused=refused)))


def checkpoint_answered(sd, event, now: float, out: list) -> None:
    """The startd's answer to CheckpointClaim: logged when it refused or could not be reached."""
    _kind, job_id, _claim_id = event.cookie
    if isinstance(event, CallFailed):
        out.append(c.Log(f"job {job_id[0]}.{job_id[1]}: the startd did not take the checkpoint request: "
                         f"{event.error}"))

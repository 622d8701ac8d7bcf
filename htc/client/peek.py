"""A running job's files through the startd that runs it: ``htc tail -pool HOST`` (condor_tail).

Theory of operation
-------------------
On its own host ``htc tail`` reads the sandbox itself (:mod:`htc.client.sandbox`). From another
machine it cannot: the sandbox is on the execute host. So, as HTCondor's condor_tail asks the
starter, :func:`peek` asks the schedd where the job runs (the job ad's ``StartdIpAddr``, the
startd's sinful address) and sends that startd a :class:`~htc.wire.messages.PeekJob` over the
same transport (:class:`~htc.client.remote.RemotePool`: SSH through the execute host's shared
port, with the user's token). The startd lets only the job's owner or an administrator read
(:mod:`htc.daemons.startd.peek`). ``-follow`` asks again from where the last answer ended.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from htc.client import jobs, request
from htc.errors import UsageError
from htc.wire import messages as m
from htc.wire.transport import Transport

__all__ = ["RemoteJob", "find_remote_job", "peek"]

_JOB_ID = re.compile(r"^(\d+)(?:\.(\d+))?$")
_RUNNING = (2, 6, 7)  # running, transferring output, suspended


class RemoteJob:
    """A running job as the schedd sees it: its id and the startd running it."""

    def __init__(self, job_id: str, startd: str):
        self.job_id = job_id
        self.startd = startd


def find_remote_job(job: str, *, transport: Transport) -> RemoteJob:
    """The running job ``job`` (``CLUSTER[.PROC]``) and its startd's address, from the schedd.

    Raises:
        UsageError: not a job id, not in the queue, or not running.
    """
    found = _JOB_ID.match(job.strip())
    if not found:
        raise UsageError(f"{job!r} is not a job id; give CLUSTER.PROC (as htc q shows it)")
    constraint = f"ClusterId == {found.group(1)}" + (f" && ProcId == {found.group(2)}" if found.group(2) else "")
    ads = jobs.query(constraint, ("ClusterId", "ProcId", "JobStatus", "StartdIpAddr"), transport=transport)
    if not ads:
        raise UsageError(f"job {job} is not in the queue (htc history {job} shows finished jobs)")
    running = [ad for ad in ads if ad.get("JobStatus") in _RUNNING and isinstance(ad.get("StartdIpAddr"), str)]
    if not running:
        raise UsageError(f"job {job} is not running; there is no sandbox to look at")
    ad = running[0]
    return RemoteJob(f"{ad['ClusterId']}.{ad['ProcId']}", ad["StartdIpAddr"])


def peek(job: RemoteJob, names: Sequence[str], *, transport: Transport, max_bytes: int,
         offsets: Sequence[int] | None = None) -> m.PeekReply:
    """The asked bytes of ``names`` of ``job`` from its startd (``offsets``: -1 or None = the end).

    Raises:
        RemoteError: the startd refused (not the owner; no such file) or the job ended there.
        DaemonUnreachable: the execute host cannot be reached.
    """
    msg = m.PeekJob(job_id=job.job_id, names=tuple(names), offsets=tuple(offsets or ()),
                    max_bytes=min(max_bytes, m.MAX_PEEK_BYTES))
    return request.send_command(job.startd, msg, transport=transport)

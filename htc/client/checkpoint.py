"""``htc checkpoint``'s request: ask the schedd to checkpoint running standard-universe jobs now.

Theory of operation
-------------------
One :class:`~htc.wire.messages.CheckpointJobs` names the jobs; the schedd checks each
(owner or administrator, ``universe = standard``, running) and asks its startd, and answers with
the jobs it asked for and why it refused the others (:mod:`htc.daemons.schedd.checkpoint_now`).
The checkpoint itself is asynchronous: the job's ``NumCkpts`` grows and its user log gets a
003 event once the image is stored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from htc.client import request
from htc.client.request import SCHEDD
from htc.errors import UsageError
from htc.wire import messages as m
from htc.wire.transport import DEFAULT_TIMEOUT, Transport

__all__ = ["checkpoint"]

_JOB_ID = re.compile(r"^\d{1,10}(\.\d{1,10})?$")


def checkpoint(job_ids: Sequence[str], *, transport: Transport | None = None,
               timeout: float = DEFAULT_TIMEOUT) -> m.CheckpointJobsReply:
    """Ask the schedd to checkpoint the jobs ``job_ids`` (``cluster`` or ``cluster.proc``).

    Returns:
        The schedd's answer: ``requested`` job ids, and ``refused`` (job id -> why).

    Raises:
        UsageError: no job named, or a name that is not ``cluster[.proc]``.
        DaemonUnreachable, RemoteError: as for :func:`~htc.client.submit`.
    """
    ids = tuple(text.strip() for text in job_ids)
    if not ids:
        raise UsageError("htc checkpoint: name the jobs to checkpoint (cluster or cluster.proc)")
    bad = [text for text in ids if not _JOB_ID.match(text)]
    if bad:
        raise UsageError(f"htc checkpoint: {', '.join(map(repr, bad))} is not a job id; give cluster or "
                         "cluster.proc (e.g. 12 or 12.0)")
    reply = request.send_command(SCHEDD, m.CheckpointJobs(ids=ids), transport=transport, timeout=timeout)
    assert isinstance(reply, m.CheckpointJobsReply)
    return reply

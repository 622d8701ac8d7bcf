"""Spooling: a submitter that shares no file system with the schedd sends the jobs' input over
the connection (``htc submit -spool``) and fetches their output the same way
(``htc transfer_data``), as condor_submit -spool and condor_transfer_data do.

Theory of operation
-------------------
:data:`SPOOL_COMMANDS` are appended to the description: the jobs are queued on hold with
HoldReasonCode 16 (SpoolingInput, "Spooling input data files") and stay in the queue for ten
days after they complete (HTCondor's ``LeaveJobInQueue`` for spooled jobs). Then
:func:`spool_input` reads each job's ad back and sends ``SpoolInput`` with a file stream of its
input (:mod:`htc.daemons.file_stream`), read here with the submitter's own rights; the schedd
stores it in its spool, runs the job from there and releases it
(:mod:`htc.daemons.schedd.spool`).

:func:`transfer_data` asks for the output of each selected job that completed and was
spooled (``FetchOutput``) and writes the stream where the submit description said, relative to
the submit directory (``SUBMIT_Iwd``), never through a link at a destination, the user log's
new events appended to the submitter's log rather than replacing it (:mod:`htc.client.spool_log`);
once it has it all, it says so and the job leaves the queue.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from htc.classad import ClassAd
from htc.client.request import SCHEDD, default_transport, send_command_async
from htc.client.selection import JobSelection
from htc.errors import HTCError, UsageError
from htc.wire import messages as m
from htc.wire.errors import RemoteError
from htc.wire.transport import DEFAULT_TIMEOUT, Transport

__all__ = ["SPOOL_COMMANDS", "Fetched", "spool_input", "transfer_data"]

#: submit commands that make a submission a spooled one (appended to the description)
SPOOL_COMMANDS = (
    "hold = true",
    "+HoldReasonCode = 16",
    '+HoldReason = "Spooling input data files"',
    "leave_in_queue = JobStatus == 4 && (CompletionDate =?= UNDEFINED || CompletionDate == 0 || "
    "((time() - CompletionDate) < 864000))",
)


def _values(text: str) -> dict:
    ad = ClassAd(text)
    out = {}
    for key in ad:
        value = ad[key]
        out[key] = value if isinstance(value, (str, int, float, bool)) else ad.eval(key)
    return out


async def _jobs(constraint: str, transport: Transport, timeout: float) -> list[dict]:
    reply = await send_command_async(SCHEDD, m.QueryJobs(constraint=constraint), transport=transport,
                                     timeout=timeout)
    return [_values(text) for text in reply.ads]


async def _spool_one(ad: dict, transport: Transport, timeout: float) -> None:
    from htc.daemons.file_stream import send_stream
    from htc.daemons.schedd.transfers import input_source

    job_id = f"{ad['ClusterId']}.{ad['ProcId']}"
    conn = await transport.open_connection(SCHEDD, timeout=timeout)
    try:
        await conn.send(m.SpoolInput(job_id=job_id))
        await send_stream(conn, input_source(ad, None, job_id))
        await conn.read_reply(m.SpoolInput(job_id=job_id), timeout=timeout)
    finally:
        await conn.aclose()


def spool_input(cluster_id: int, *, transport: Transport | None = None, timeout: float = DEFAULT_TIMEOUT) -> int:
    """Send the input of every job of ``cluster_id`` (submitted with :data:`SPOOL_COMMANDS`) that
    waits for it (held with code 16) to the schedd's spool; the schedd then releases them. Call
    it again for the procs a late-materialization cluster (``max_materialize``) adds later: they
    wait for their input the same way, and the jobs spooled already are left alone.

    Returns:
        The number of jobs spooled.

    Raises:
        TransferError: an input file is missing or unreadable (the text names it).
        RemoteError: the schedd refused (not your job, not waiting for input...).
    """
    transport = transport or default_transport()

    async def run() -> int:
        waiting = f"ClusterId == {cluster_id} && JobStatus == 5 && HoldReasonCode == 16"
        ads = await _jobs(waiting, transport, timeout)
        for ad in ads:
            await _spool_one(ad, transport, timeout)
        return len(ads)

    return asyncio.run(run())


@dataclass(frozen=True)
class Fetched:
    """One job's output fetch: ``error`` is None when it arrived."""

    job_id: str
    error: str | None = None


async def _fetch_one(ad: dict, transport: Transport, timeout: float) -> Fetched:
    from htc.client.spool_log import SpoolFetchSink
    from htc.daemons.file_stream import receive_stream

    job_id = f"{ad['ClusterId']}.{ad['ProcId']}"
    log = ad.get("SUBMIT_UserLog")
    sink = SpoolFetchSink(Path(str(ad["SUBMIT_Iwd"])), job_id, log if isinstance(log, str) and log else None)
    conn = await transport.open_connection(SCHEDD, timeout=timeout)
    try:
        await conn.send(m.FetchOutput(job_id=job_id))
        try:
            await receive_stream(conn, sink, peer=f"the schedd ({job_id})")
        except HTCError as exc:
            return Fetched(job_id, str(exc))
        await conn.request(m.Ack(detail="output written"), timeout=timeout, expect=m.Ack)
        return Fetched(job_id)
    except RemoteError as exc:
        return Fetched(job_id, exc.remote_message)
    finally:
        sink.close()
        await conn.aclose()


def transfer_data(selection: JobSelection, *, transport: Transport | None = None,
                  timeout: float = DEFAULT_TIMEOUT) -> list[Fetched]:
    """condor_transfer_data: fetch the spooled output of the selected jobs that completed.

    Returns:
        One :class:`Fetched` per job whose output was asked for (empty: none had any).

    Raises:
        DaemonUnreachable: no schedd is running.
    """
    transport = transport or default_transport()
    constraint = f"({selection.constraint_for_all()}) && JobStatus == 4 && SUBMIT_Iwd =!= undefined"

    async def run() -> list[Fetched]:
        return [await _fetch_one(ad, transport, timeout) for ad in await _jobs(constraint, transport, timeout)]

    if selection.empty:
        raise UsageError("no jobs selected; name jobs (CLUSTER or CLUSTER.PROC), an owner, -constraint EXPR, or -all")
    return asyncio.run(run())

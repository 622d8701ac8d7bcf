"""Spooled jobs: input that a client sends to the schedd's spool (``htc submit -spool``), and
output it fetches back from there (``htc transfer_data``), over the connection.

Theory of operation
-------------------
HTCondor's ``condor_submit -spool`` submits the jobs on hold (HoldReasonCode 16,
SpoolingInput, "Spooling input data files"), with ``LeaveJobInQueue`` true for ten days after
completion, then sends their input to the schedd. Here each job's input arrives as
``SpoolInput(job_id)`` and a file stream (:mod:`htc.daemons.file_stream`; the layout
:func:`htc.daemons.schedd.transfers.input_source` makes: the executable as
``condor_exec.exe``, inputs and stdin under their base names). :class:`SpoolService`

* checks that the peer may act on the job (its owner or an administrator) and that the job is
  waiting for its input (held with code 16);
* writes the stream, as the job's owner, into the job's spool directory
  ``$(SPOOL)/<cluster % 10000>/<proc % 10000>/cluster<C>.proc<P>.subproc0`` (HTCondor's
  layout; made owned by the owner);
* rewrites the job to run from there, keeping what the submitter wrote as ``SUBMIT_<attr>``
  (as HTCondor does): ``Iwd`` becomes the spool directory; ``Cmd``, ``TransferInput``,
  ``In``, ``Out``, ``Err`` and ``UserLog`` name the spooled copies; ``TransferOutputRemaps``
  is applied only when the output is fetched; ``HTCSpooledInput`` lists what came in;
* writes the job's SUBMIT event into the spool's copy of its user log, in the rewrite's
  transaction (owed in the queue's outbox, :mod:`htc.daemons.schedd.owed`): the log the
  submitter named is a file on the submitter's machine, which the schedd never creates or
  writes -- it wrote no SUBMIT event there when the job was queued waiting for its input,
  submitted or materialized later by a late-materialization cluster
  (:func:`htc.daemons.schedd.userlog.submit_writes`), and ``htc transfer_data``
  brings this one back with the run's (:mod:`htc.client.spool_log`). A ``DAGManNodesLog``
  is not rewritten (nor is it by HTCondor's ``rewriteSpooledJobAd``): it had the SUBMIT event
  when the job entered the queue, and gets the run's events where the job names it;
* releases the job (an ActOnJobs release, as ``htc release`` would, with the peer's rights),
  with no RELEASED event in its logs: HTCondor's schedd releases a spooled job with
  ``releaseJob(..., write_to_user_log=false)`` (:class:`htc.daemons.schedd.actions.JobActions`).

The job then runs like any other, its output lands in the spool directory, and it stays in
the queue, Completed. ``FetchOutput(job_id)`` of a completed spooled job streams back every
top-level entry of the spool directory that was not spooled in, named as the submitter asked
(``SUBMIT_Out``, ``SUBMIT_Err``, ``SUBMIT_UserLog``, ``SUBMIT_TransferOutputRemaps``; other
names relative to ``SUBMIT_Iwd``, where the client writes them with its own rights). Once the
client acknowledges that it wrote them all, the job leaves the queue for the history and its
spool directory is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from htc.daemons import core as c
from htc.daemons import owner_files as ofs
from htc.daemons.file_stream import Outgoing, receive_stream, relative_parts, send_stream
from htc.daemons.job_files import CONDOR_EXEC, TransferError, parse_remaps
from htc.config.hostname import sinful
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.events import WriteUserLog
from htc.daemons.schedd.owed import owe
from htc.daemons.schedd.shadow import ad_text, ad_values, parse_job_id
from htc.daemons.schedd.transfers import OwnerSink, open_as, tree_entries
from htc.errors import HTCError
from htc.jobqueue import HoldReasonCode, JobStatus
from htc.jobqueue.ads import quote
from htc.wire import messages as m

__all__ = ["SpoolService", "SpoolSink", "spool_directory", "spooled_output"]

#: the attributes a spooled job's rewrite keeps as SUBMIT_<name>
_KEPT = ("Iwd", "Cmd", "TransferInput", "In", "Out", "Err", "UserLog", "TransferOutputRemaps")


def spool_directory(spool: str | os.PathLike, cluster: int, proc: int) -> Path:
    """Where job ``cluster.proc`` keeps its spooled files (HTCondor's layout)."""
    return Path(spool) / str(cluster % 10000) / str(proc % 10000) / f"cluster{cluster}.proc{proc}.subproc0"


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and value and value != "/dev/null" else None


def _rewrite(ad: Mapping[str, Any], directory: Path, names: list[str]) -> dict[str, str]:
    """The job's new attributes once its input is in ``directory`` (``names``: what came in)."""
    attrs: dict[str, str] = {}
    for attr in _KEPT:
        if _name(ad.get(attr)) is not None:
            attrs[f"SUBMIT_{attr}"] = quote(ad[attr])
    attrs["Iwd"] = quote(str(directory))
    stdin = _name(ad.get("In"))
    stdin_name = Path(stdin).name if stdin and ad.get("TransferIn", True) is not False else None
    if CONDOR_EXEC in names:
        attrs["Cmd"] = quote(CONDOR_EXEC)
    inputs = [n for n in names if n not in (CONDOR_EXEC, stdin_name)]
    # (set, never dropped: a dropped proc attribute would fall back to the cluster's value)
    attrs["TransferInput"] = quote(",".join(inputs))
    if stdin_name:
        attrs["In"] = quote(stdin_name)
    for attr in ("Out", "Err"):
        if _name(ad.get(attr)):
            attrs[attr] = quote(Path(ad[attr]).name)
    if _name(ad.get("UserLog")):
        attrs["UserLog"] = quote(str(directory / Path(ad["UserLog"]).name))
    attrs["TransferOutputRemaps"] = quote("")
    attrs["HTCSpooledInput"] = quote(",".join(names))
    return attrs


def _submit_event(core, job, attrs: Mapping[str, str]) -> list[WriteUserLog]:
    """The SUBMIT event of a job whose input just arrived, for the spool's copy of its log
    (``attrs``: its rewrite). It was not written at submit time: the log the submitter named
    is a file on the submitter's machine (:func:`htc.daemons.schedd.userlog.awaits_spooled_input`),
    and ``htc transfer_data`` appends this event to it with the run's
    (:mod:`htc.client.spool_log`). Dated when the job entered the queue, as HTCondor, which
    writes it then: when the cluster was submitted, or when late materialization made the proc
    (:func:`htc.daemons.schedd.userlog.entered_queue`). Its DAG nodes log has it already
    (:func:`htc.daemons.schedd.userlog.submit_writes`)."""
    path = ul.literal(attrs, "UserLog")
    if not isinstance(path, str) or not path:
        return []
    host = sinful(core.settings.address, core.settings.machine)
    merged = {**job, **attrs}
    return [WriteUserLog(path, (ul.submit_event(merged, host, ul.entered_queue(job)),), ul.owner(job))]


def spooled_output(ad: Mapping[str, Any], directory: Path, owner: ofs.Identity | None,
                   job: str) -> Iterator[Outgoing]:
    """The output of a completed spooled job as a file stream, named as its submitter asked
    (see the module docstring), read as ``owner``."""
    spooled = set(str(ad.get("HTCSpooledInput") or "").split(",")) | {CONDOR_EXEC}
    targets = dict(parse_remaps(ad.get("SUBMIT_TransferOutputRemaps")))
    for attr in ("Out", "Err", "UserLog"):
        name, asked = _name(ad.get(attr)), _name(ad.get(f"SUBMIT_{attr}"))
        if name and asked:
            targets[Path(name).name] = asked
    with ofs.acting_as(owner):
        names = sorted(os.listdir(directory))
    for name in names:
        if name in spooled:
            continue
        target = targets.get(name, name)
        path = directory / name
        if path.is_symlink():
            yield Outgoing(m.FileEntry(name=target, kind="link", mode=0o777, target=os.readlink(path)))
            continue
        fd, st = open_as(path, owner, "output file", job)
        if os.path.isdir(path):
            try:
                yield Outgoing(m.FileEntry(name=target, kind="dir", mode=st.st_mode & 0o777 | 0o700))
                yield from tree_entries(target, fd, owner, job)
            finally:
                os.close(fd)
        else:
            yield Outgoing(m.FileEntry(name=target, kind="file", mode=st.st_mode & 0o777, size=st.st_size,
                                       mtime_ns=st.st_mtime_ns), fd)


def _make_directory(directory: Path, owner: ofs.Identity | None) -> None:
    """Make the job's spool directory afresh, owned by the owner (when we are root)."""
    if directory.exists():
        shutil.rmtree(directory)  # a spool sent again starts over
    directory.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    directory.mkdir(mode=0o700)
    if owner is not None and owner.uid is not None and os.geteuid() == 0:
        os.chown(directory, owner.uid, owner.gid if owner.gid is not None else -1)


class SpoolSink(OwnerSink):
    """An :class:`OwnerSink` that keeps every spooled name beneath the job's spool directory."""

    def begin(self, entry: m.FileEntry) -> int | None:
        """Refuse a name that leaves the spool directory; else as :meth:`OwnerSink.begin`."""
        relative_parts(entry.name, "spooled input")
        return super().begin(entry)


class SpoolService:
    """Serves SpoolInput and FetchOutput for the schedd's service (see the module docstring)."""

    def __init__(self, service):
        self.service = service

    def _job(self, msg: m.SpoolInput | m.FetchOutput, peer) -> tuple[Any, dict[str, Any], str]:
        """The stored job, its values and ``cluster.proc``, when ``peer`` may act on it.

        Raises:
            TransferError: no such job, or the peer may not act on it.
        """
        core = self.service.core
        job_id = parse_job_id(msg.job_id)
        job = core.job(job_id)
        label = f"{job_id[0]}.{job_id[1]}"
        if job is None:
            raise TransferError(f"job {label} is not in the queue")
        if not core.access.may_change(c.Received(msg=msg, peer=peer), job):
            raise TransferError(f"job {label} is not yours; only its owner or an administrator may move its files")
        return job, ad_values(ad_text(job)), label

    def _directory(self, job_id: str) -> Path:
        cluster, proc = parse_job_id(job_id)
        spool = self.service.core.settings.spool
        if not spool:
            raise TransferError("the schedd has no SPOOL directory configured; set SPOOL")
        return spool_directory(spool, cluster, proc)

    async def spool_input(self, conn, msg: m.SpoolInput, peer) -> None:
        """Receive a job's input into its spool directory, run it from there, release it."""
        log = self.service.log
        try:
            job, ad, label = self._job(msg, peer)
            if job.status != JobStatus.HELD or ad.get("HoldReasonCode") != int(HoldReasonCode.SpoolingInput):
                raise TransferError(f"job {label} is not waiting for spooled input (it was not submitted with "
                                    "-spool, or its input is spooled already)")
            owner = ofs.Identity.owner(ad.get("Owner"))
            directory = self._directory(msg.job_id)
            await asyncio.to_thread(_make_directory, directory, owner)
            sink = SpoolSink(directory, owner, label)
            counts = await receive_stream(conn, sink, peer=f"the submitter of job {label}")
            names = sorted({str(p.relative_to(directory)).split("/")[0] for p in sink.written})
            core = self.service.core
            attrs = _rewrite(ad, directory, names)
            with core.queue.transaction():
                core.queue.set_attributes(parse_job_id(msg.job_id), attrs)
                writes = owe(core.queue, _submit_event(core, job, attrs))
            self.service.execute(writes)  # (before the release's RELEASED event, in the same write)
            # released as `htc release` would be, with the peer's rights (its answer has no connection)
            self.service.feed(c.Received(msg=m.ActOnJobs(action=m.JobAction.Release, ids=(msg.job_id,),
                                                         reason="input data files spooled"), peer=peer))
            log.info("job %s: %d input entries (%d bytes) spooled into %s", label, counts.files, counts.bytes,
                     directory)
            await conn.send(m.Ack(detail=f"{counts.files} entries, {counts.bytes} bytes spooled"))
        except (TransferError, ofs.OwnerFileError) as exc:
            log.warning("spooling the input of job %s failed: %s", msg.job_id, exc)
            await conn.send_error("bad_request", str(exc))
        except HTCError as exc:
            log.info("spooling the input of job %s stopped: %s", msg.job_id, exc)

    async def fetch_output(self, conn, msg: m.FetchOutput, peer) -> None:
        """Send a completed spooled job's output; once the client has it, retire the job."""
        log = self.service.log
        try:
            job, ad, label = self._job(msg, peer)
            if job.status != JobStatus.COMPLETED or "SUBMIT_Iwd" not in ad:
                raise TransferError(f"job {label} has no spooled output to fetch (only completed jobs submitted "
                                    "with -spool have)")
            owner = ofs.Identity.owner(ad.get("Owner"))
            directory = self._directory(msg.job_id)
            counts = await send_stream(conn, spooled_output(ad, directory, owner, label))
            reply = await conn.recv(timeout=120.0)
            if not isinstance(reply, m.Ack):
                log.warning("job %s: the client did not take its output: %s", label, getattr(reply, "message", reply))
                return
            core = self.service.core
            with contextlib.suppress(HTCError):  # (removed meanwhile: nothing to retire)
                core.queue.retire(parse_job_id(msg.job_id))
            core.changed()
            await asyncio.to_thread(shutil.rmtree, directory, True)
            log.info("job %s: its spooled output (%d entries, %d bytes) was fetched; it left the queue", label,
                     counts.files, counts.bytes)
            await conn.send(m.Ack(detail=f"{counts.files} entries, {counts.bytes} bytes"))
        except (TransferError, ofs.OwnerFileError) as exc:
            log.warning("fetching the output of job %s failed: %s", msg.job_id, exc)
            await conn.send_error("bad_request", str(exc))
        except HTCError as exc:
            log.info("fetching the output of job %s stopped: %s", msg.job_id, exc)

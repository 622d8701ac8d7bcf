"""The schedd's service: the asyncio shell that opens the job queue and runs the schedd core.

It adds executors to :class:`~htc.daemons.service.DaemonService` for the actions of
:mod:`htc.daemons.schedd.events` and for :class:`~htc.daemons.calls.Call` (requests whose
refusals the core tells apart from silence): :class:`WriteUserLog` (append events to a job's log
with :class:`~htc.eventlog.writer.EventLogWriter`), :class:`WriteCallFiles` (a lane call's result
and output, :mod:`htc.daemons.schedd.callfiles`), :class:`WriteJobOutput` (a chunk of a streamed
stdout/stderr written at its offset, :mod:`htc.daemons.schedd.output`), :class:`Owed`, and the
processes of scheduler- and local-universe jobs (:class:`StartLocalJob`, :class:`SignalLocalJob`:
:mod:`htc.daemons.schedd.local_runner`). A starter on another file system fetches a job's input and
sends its output over a connection of its own (FetchInput, SendOutput:
:mod:`htc.daemons.schedd.transfers`); a client spools a job's input and fetches its output the
same way (SpoolInput, FetchOutput: :mod:`htc.daemons.schedd.spool`). A log or output file
that cannot be written -- a deleted directory, a full disk -- costs that event or chunk and a
line in the SchedLog, never the schedd.

User-log events and call files are written at the end of the loop's turn, after the replies
and requests the same events produced have gone out, all files before all events and one
fsynced write per log for the whole turn: a burst of calls costs a few fsyncs, not three per
call, and a lane's next call does not wait for the log of the last one. The call files are
in the job queue's outbox from the commit that ended their calls, and so are the user-log
events of a committed change of a job -- its SUBMIT, EXECUTE, TERMINATED, ABORTED, HELD...
(:mod:`htc.daemons.schedd.owed`); once the files and events are written the service takes
them out (:class:`~htc.daemons.schedd.events.Owed`) with the queue's next commit, whatever
it is for (the next turn's, as a rule), or within :data:`PAY_WITHIN` when none comes: a
commit of their own per turn cost a lone executor call two of its four commits. A schedd
that starts writes what is left, and of the user-log events only those the log's end does
not hold (:func:`~htc.daemons.schedd.owed.unwritten`): a kill -9 after the write and before
the take-out writes no event twice (a take-out deferred so without that check, tried on
28 Nov, let a kill -9 write a job's SUBMIT event twice, tests/system/test_pool_scheduler_universe.py).

The service takes a clock (:mod:`htc.daemons.clock`): the core's ``now`` and every wait of the
service come from it, so a test can drive the schedd with a :class:`~htc.daemons.clock.FakeClock`.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from htc.config.hostname import daemon_name, full_hostname
from htc.daemons.network import pool_addresses, service_transport
from htc.daemons.schedd.flock import flock_pools
from htc.daemons import core as c
from htc.daemons import owner_files as ofs
from htc.daemons.calls import install_calls
from htc.daemons.clock import REAL, Clock
from htc.daemons.schedd.callfiles import write_call_files
from htc.daemons.schedd.job_io import JobIOService
from htc.daemons.schedd.checkpoint_files import CheckpointService
from htc.daemons.schedd.core import Schedd
from htc.daemons.schedd.events import Owed, SignalLocalJob, StartLocalJob, WriteCallFiles, WriteJobOutput, WriteUserLog
from htc.daemons.schedd.leverage import CoreMeter
from htc.daemons.schedd.local_runner import LocalRunner
from htc.daemons.schedd.output import write_job_output
from htc.daemons.schedd.owed import unwritten
from htc.daemons.schedd.settings import ScheddSettings
from htc.daemons.schedd.sessions import SessionService
from htc.daemons.schedd.spool import SpoolService
from htc.daemons.schedd.transfers import TransferService
from htc.daemons.schedd.userlog import open_log
from htc.daemons.service import DaemonPaths, DaemonService, load_daemon_config
from htc.daemons.settings import from_config
from htc.errors import HTCError
from htc.eventlog.events import EventType
from htc.jobqueue import JobQueue, QueueStorageError, SystemPolicy
from htc.wire import messages as m

#: environment variable for tests: the path of a flag file; a schedd that is about to write
#: call files while it exists removes it and kills itself with SIGKILL (a crash between the
#: commit of a lane batch and its files, in a real process)
CRASH_BEFORE_CALL_FILES_ENV = "HTC_TEST_SCHEDD_CRASH_BEFORE_CALL_FILES"
#: the same, when it is about to write user-log events of which one is a TERMINATED (the job's
#: end is committed, its log does not say so yet)
CRASH_BEFORE_TERMINATED_EVENT_ENV = "HTC_TEST_SCHEDD_CRASH_BEFORE_TERMINATED_EVENT"
#: the same, when it has just written user-log events of which one is a TERMINATED (written, not
#: yet taken out of the queue's outbox: the restarted schedd must not write them again)
CRASH_AFTER_TERMINATED_EVENT_ENV = "HTC_TEST_SCHEDD_CRASH_AFTER_TERMINATED_EVENT"
#: the same, when it is about to write user-log events of which one is a SUBMIT (the jobs are
#: committed -- a submit's, or the procs a late-materialization cluster added -- their log does
#: not say so yet)
CRASH_BEFORE_SUBMIT_EVENT_ENV = "HTC_TEST_SCHEDD_CRASH_BEFORE_SUBMIT_EVENT"
#: the same, when it is about to send a SubmitReply or SubmitClustersReply (the clusters are
#: committed, the client will never hear so)
CRASH_BEFORE_SUBMIT_REPLY_ENV = "HTC_TEST_SCHEDD_CRASH_BEFORE_SUBMIT_REPLY"

#: seconds within which written outbox entries are taken out of the queue when no commit of the
#: schedd's own takes them along sooner
PAY_WITHIN = 1.0
#: the most bytes at the end of a user log read to find the events a replayed outbox entry wrote
_REPLAY_TAIL = 4 * 1024 * 1024


def settings_from_config(config, address: str = "schedd") -> ScheddSettings:
    """Build the schedd's settings from the configuration (SCHEDD subsystem): the knobs of
    :class:`~htc.daemons.schedd.settings.ScheddSettings` through the param table, and what
    comes from the host (the name, the machine, UID_DOMAIN's default) and the pool-wide
    periodic policy.

    Raises:
        UsageError: a knob has a value the schedd cannot use (the message names it).
    """
    host = full_hostname(config)
    name = daemon_name(config.param("SCHEDD_NAME"), host)  # HTCondor's: the host, or SCHEDD_NAME@host

    def text(knob: str) -> str | None:
        value = config.param(knob)
        return str(value) if value not in (None, "") else None

    from htc.submit.settings import settings_from_config as submit_settings

    net = pool_addresses(config, address)  # network mode: <ip:9618?sock=schedd> and <cm:9618>
    return from_config(
        ScheddSettings, config, name=name, address=net.own, collector=net.collector, negotiator=net.negotiator,
        machine=host, flock_pools=flock_pools(config),
        uid_domain=str(config.param("UID_DOMAIN") or host), submit=submit_settings(config),
        filesystem_domain=str(config.param("FILESYSTEM_DOMAIN") or host), spool=str(config.param("SPOOL") or ""),
        system_policy=SystemPolicy(periodic_hold=text("SYSTEM_PERIODIC_HOLD"),
                                   periodic_release=text("SYSTEM_PERIODIC_RELEASE"),
                                   periodic_remove=text("SYSTEM_PERIODIC_REMOVE")),
    )


class ScheddService(DaemonService):
    """Runs a :class:`Schedd` core: user-log writes, calls, and the queue's lifetime.

    Args:
        core: the schedd core (its queue is closed when the service ends).
        paths: the pool's directories.
        reload_settings: builds fresh settings on reconfiguration.
        clock: where the time comes from (:mod:`htc.daemons.clock`).
    """

    def __init__(self, core: Schedd, paths: DaemonPaths, reload_settings, *, clock: Clock = REAL, transport=None):
        super().__init__("schedd", core, transport or paths.transport(), log_file=paths.log_file("schedd"),
                         reload_settings=reload_settings, clock=clock)
        CoreMeter(core)  # each job's share of the handlers' CPU, for its Leverage (htc.daemons.schedd.leverage)
        install_calls(self)
        self._pending_logs: list[WriteUserLog] = []
        self._pending_files: list[WriteCallFiles] = []
        self._pending_owed: list[int] = []
        self._flush_due = False
        self._pay_due = False
        self._crash_flag = os.environ.get(CRASH_BEFORE_CALL_FILES_ENV) or None
        self._reply_crash_flag = os.environ.get(CRASH_BEFORE_SUBMIT_REPLY_ENV) or None
        self._log_crash_flag = os.environ.get(CRASH_BEFORE_TERMINATED_EVENT_ENV) or None
        self._logged_crash_flag = os.environ.get(CRASH_AFTER_TERMINATED_EVENT_ENV) or None
        self._submit_crash_flag = os.environ.get(CRASH_BEFORE_SUBMIT_EVENT_ENV) or None
        if self._reply_crash_flag is not None:
            self.register_action(c.Reply, self._reply_or_crash)
        self.register_action(WriteUserLog, self._write_user_log)
        self.register_action(WriteJobOutput, self._write_job_output)
        self.register_action(WriteCallFiles, self._write_call_files)
        self.register_action(Owed, self._owed)
        transfers = TransferService(self)  # a job's files over the connection (htc.daemons.schedd.transfers)
        self.register_conversation(m.FetchInput, transfers.serve)
        self.register_conversation(m.SendOutput, transfers.serve)
        spool = SpoolService(self)  # htc submit -spool, htc transfer_data (htc.daemons.schedd.spool)
        self.register_conversation(m.SpoolInput, spool.spool_input)
        self.register_conversation(m.FetchOutput, spool.fetch_output)
        # executor sessions of clients on other machines (htc.daemons.schedd.sessions)
        self.sessions = SessionService(self)
        self.register_conversation(m.OpenSession, self.sessions.serve)
        checkpoints = CheckpointService(self)  # checkpoint_exit_code (htc.daemons.schedd.checkpoint_files)
        self.register_conversation(m.SendCheckpoint, checkpoints.store)
        self.register_conversation(m.FetchCheckpoint, checkpoints.fetch)
        # a standard-universe job's file calls from another FileSystemDomain (htc.daemons.schedd.job_io)
        self.register_conversation(m.RelayJobIO, JobIOService(self).relay)
        self.local_runner = LocalRunner(self)
        self.register_action(StartLocalJob, self.local_runner.start)
        self.register_action(SignalLocalJob, self.local_runner.signal)

    def feed(self, event: c.Event) -> None:
        """One turn of the loop, its reads of the queue asking once whether another process
        changed the file (the schedd is its only writer: htc.jobqueue.reads)."""
        with self.core.queue.one_look():
            super().feed(event)

    def _write_user_log(self, action: WriteUserLog) -> None:
        self._pending_logs.append(action)
        self._flush_soon()

    def _flush_soon(self) -> None:
        """Write the pending call files and user-log events once this turn's replies and
        requests are out (``call_later(0)`` runs after the tasks this turn started): a log
        write is an fsync, and the next call of a lane should not wait for it."""
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_later(0, self._flush)

    def _flush(self) -> None:
        """Every pending call file first (a result is on disk before the event that announces
        it), then the events, one locked, fsynced write per log for all of them, in order; then
        the outbox entries that held them are paid."""
        self._flush_due = False
        files, self._pending_files = self._pending_files, []
        logs, self._pending_logs = self._pending_logs, []
        owed, self._pending_owed = self._pending_owed, []
        if files and self._crash_flag is not None:
            self._crash_if_asked()
        failed = False
        written = []
        for action in files:
            try:
                write_call_files(action)
                written.append(action)
            except OSError as exc:
                failed = True
                names = ", ".join(name for name, _ in action.files)
                self.log.error("cannot write the call's files (%s) to %s: %s", names, action.directory, exc)
        if logs and self._log_crash_flag is not None and any(
                event.type == EventType.JOB_TERMINATED for action in logs for event in action.events):
            self._crash_if_asked(self._log_crash_flag)
        if logs and self._submit_crash_flag is not None and any(
                event.type == EventType.SUBMIT for action in logs for event in action.events):
            self._crash_if_asked(self._submit_crash_flag)
        by_path: dict[tuple[str, str | None], list] = {}
        for action, events in zip(logs, _to_write(logs)):
            if events:
                by_path.setdefault((action.path, action.owner), []).extend(events)
        for (path, owner), events in by_path.items():
            try:
                with open_log(path, owner) as writer:
                    writer.write(*events)
            except (HTCError, OSError) as exc:
                names = ", ".join(f"{e.type.name} {e.job_id}" for e in events)
                self.log.error("cannot write %s to the user log %s: %s", names, path, exc)
        if by_path and self._logged_crash_flag is not None and any(
                event.type == EventType.JOB_TERMINATED for events in by_path.values() for event in events):
            self._crash_if_asked(self._logged_crash_flag)
        self.sessions.written(written, by_path)  # remote executor sessions: their news at once
        if owed and not failed:
            # Written: the queue's outbox may forget them (a call file failed: they all stay,
            # and the next start of the schedd tries them again; a user log that cannot be
            # written is not retried, as before the events were kept). The next commit takes
            # them out (a crash before it writes the files again, and of the events only those
            # the log does not hold); _pay makes one when no other comes.
            self.core.queue.paid(owed, later=True)
            self._pay_soon()

    def _pay_soon(self) -> None:
        if self._pay_due:
            return
        try:
            self.start_task(self._pay(), "take written entries out of the job queue's outbox")
        except RuntimeError:
            return  # the service is stopping (its last flush): closing the queue takes them out
        self._pay_due = True

    async def _pay(self) -> None:
        """Within :data:`PAY_WITHIN`, take the written outbox entries out, if no commit of the
        queue took them along meanwhile."""
        await self.clock.sleep(PAY_WITHIN)
        self._pay_due = False
        try:
            self.core.queue.pay_now()
        except QueueStorageError as exc:
            self.log.error("cannot take %d written batches (results, user-log events) out of the job "
                           "queue's outbox: %s", self.core.queue.paid_later, exc)

    def _write_job_output(self, action: WriteJobOutput) -> None:
        try:
            write_job_output(action)
        except OSError as exc:
            what = "truncate" if action.truncate else f"write {len(action.data)} streamed bytes at {action.offset} to"
            self.log.error("cannot %s the job output file %s: %s", what, action.path, exc)

    def _write_call_files(self, action: WriteCallFiles) -> None:
        self._pending_files.append(action)
        self._flush_soon()

    def _owed(self, action: Owed) -> None:
        self._pending_owed.append(action.seq)
        self._flush_soon()

    def _crash_if_asked(self, flag: str | None = None) -> None:
        """The tests' kill -9 between a lane batch's commit and its files: when the file that
        :data:`CRASH_BEFORE_CALL_FILES_ENV` names exists, remove it and die of SIGKILL here."""
        try:
            os.unlink(flag or self._crash_flag)
        except OSError:
            return
        os.kill(os.getpid(), signal.SIGKILL)

    def _reply_or_crash(self, action: c.Reply) -> None:
        """(Only with :data:`CRASH_BEFORE_SUBMIT_REPLY_ENV`) die of SIGKILL instead of sending
        a SubmitReply (or SubmitClustersReply) while its flag file exists."""
        if isinstance(action.msg, (m.SubmitReply, m.SubmitClustersReply)):
            self._crash_if_asked(self._reply_crash_flag)
        self._do_reply(action)

    async def run(self) -> int:
        """Serve until the core exits; the job queue is closed on the way out."""
        try:
            return await super().run()
        finally:
            self._flush()  # what the last turn left to write
            self.local_runner.kill_all()  # scheduler/local universe jobs do not outlive the schedd
            self.core.queue.close()


def _to_write(logs: list[WriteUserLog]) -> list[tuple]:
    """The events of each of ``logs`` to write: all of them, but for writes replayed from the
    outbox at start-up (perhaps written before the crash), those their log's end does not
    hold (:func:`~htc.daemons.schedd.owed.unwritten`)."""
    out = [action.events for action in logs]
    replayed: dict[tuple[str, str | None], list[int]] = {}
    for i, action in enumerate(logs):
        if action.replayed:
            replayed.setdefault((action.path, action.owner), []).append(i)
    for (path, owner), indexes in replayed.items():
        for i, events in zip(indexes, unwritten([logs[i] for i in indexes], _log_tail(path, owner))):
            out[i] = events
    return out


def _log_tail(path: str, owner: str | None) -> bytes:
    """The last :data:`_REPLAY_TAIL` bytes of the user log at ``path``, read with the owner's
    rights (nothing: it cannot be read, and every replayed event is written)."""
    try:
        fd, _ = ofs.open_read(path, ofs.Identity.owner(owner), what="user log", follow=False)
    except (HTCError, OSError):
        return b""
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, _REPLAY_TAIL, max(0, size - _REPLAY_TAIL))
    except OSError:
        return b""
    finally:
        os.close(fd)


def make_service(paths: DaemonPaths, clock: Clock = REAL) -> ScheddService:
    """The schedd's service for the pool at ``paths`` (``python -m htc.daemons schedd``), from
    the configuration (SCHEDD subsystem).

    Raises:
        UsageError: the configuration is broken.
        QueueFileError: the job queue file (JOB_QUEUE_DB) is damaged or not a job queue.
    """
    def settings():
        return settings_from_config(load_daemon_config("SCHEDD"))

    config = load_daemon_config("SCHEDD")
    queue_path = Path(str(config.param("JOB_QUEUE_DB")))
    queue_path.parent.mkdir(parents=True, exist_ok=True)
    queue = JobQueue.open(str(queue_path))
    try:
        core = Schedd(settings_from_config(config), queue)
    except BaseException:
        queue.close()
        raise
    return ScheddService(core, paths, settings, clock=clock, transport=service_transport(paths.sockets, config))


__all__ = ["CRASH_AFTER_TERMINATED_EVENT_ENV", "CRASH_BEFORE_CALL_FILES_ENV", "CRASH_BEFORE_SUBMIT_EVENT_ENV",
           "CRASH_BEFORE_SUBMIT_REPLY_ENV", "CRASH_BEFORE_TERMINATED_EVENT_ENV", "PAY_WITHIN", "ScheddService",
           "make_service", "settings_from_config"]

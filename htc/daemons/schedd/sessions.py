"""Executor sessions for clients on other machines: calls, results and events over one connection.

Theory of operation
-------------------
An :class:`~htc.executors.HTCExecutor` on the submit host keeps its session in its own
directory: the jobs' ``Iwd`` holds the calls' pickles, the shadows and lanes write the results
there, and the schedd appends the session's event log there. A client on another machine
(``HTCExecutor(pool="cm")``) shares no file system with the submit host, so the schedd keeps
that directory for it and the client mirrors it (:mod:`htc.wire.messages.sessions` has the
conversation; :mod:`htc.executors.remote` is the client):

* ``OpenSession`` names the session; its directory is
  ``$(SPOOL)/executor/<who>/<session>/`` (``<who>`` the peer's identity, ``alice@pool``, or
  its local account), with ``calls/`` and ``jobs.log``, owned by the job owner the peer maps to
  (:class:`~htc.daemons.schedd.access.Access`: the identity's user part, as for a submit), so
  the shadows and lanes that write there as the owner can, and no other user can read it.
* ``SubmitCalls`` writes a batch's pickles into ``calls/`` as the owner, never through a link,
  then hands its ``Submit`` to the core as a request of the same peer (which sets ``Owner``
  from the same identity; the submission id makes a retry idempotent) and, before it answers
  the ``SubmitReply``, follows each new job as its call: one round trip per batch. Pickles
  beyond one message come ahead in ``PutCallFiles`` (written the same way, answered ``Ack``).
* The schedd follows ``jobs.log`` (inotify on the directory; a look every 200 ms as well) and
  pushes ``SessionNews``: every complete event past the client's offset, and, before an event
  that ends a call (a JOB_TERMINATED, 005, of a job the client named in ``FollowCalls``), the
  call's ``<id>.result``, ``<id>.out`` and ``<id>.err``, read as the owner in chunks
  (:data:`~htc.wire.messages.sessions.MAX_SESSION_CHUNK`), each message sent with the
  connection's flow control. The schedd writes a result before the event that announces it;
  an event whose job or result is not known yet is held back (and then sent without files
  after :data:`HOLD_SECONDS`), so the client never sees a call end without its result. News of
  quiet events only (a job's SUBMIT and EXECUTE) waits up to :data:`QUIET_SECONDS` for more,
  so a short call's events and result cross the network in one message, not three. A few
  events and a small result are read in the loop's own thread (a thread hand-off costs more);
  a longer stretch of the log in a worker thread.
* The schedd's own writes come with a shortcut (:meth:`SessionService.written`, called by the
  service once a turn's call files and user-log events are written): a lane call's outputs
  are kept for the session whose ``calls/`` they went to, so the news of its end carries them
  without opening them again as the owner, and an event that ends something wakes the
  session's loop at once rather than through inotify. What is not told so (a shadow's job,
  a call that ended before the client reconnected, a result too big for one chunk) is found
  in the log and read from the files as before; the owner's credentials are taken only when
  a file must be opened. The outputs kept are bounded (:data:`_KEEP_BYTES`), dropped once
  sent, and only ever what was written to disk.
* ``NewsTaken`` says the client's mirror holds the log up to an offset and every file sent with
  it: the files of the calls whose ending event lies before that offset (``<id>.call``,
  ``.result``, ``.out``, ``.err``) are removed from ``calls/`` and the calls forgotten, so a
  session that runs for days keeps only the files of calls the client does not have yet (a
  result is never removed before the client said it has it: a client that sends no
  ``NewsTaken`` keeps them all until ``CloseSession``, as before). The files are removed
  through the directory's descriptor, never through a link.
* ``CloseSession`` ends the conversation and removes the directory when asked (an unnamed
  session); a named one stays for the client that attaches later (``OpenSession`` with the
  offset its mirror holds).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import re
import shutil
import threading
import time
from pathlib import Path

from htc.daemons import core as c
from htc.daemons import owner_files as ofs
from htc.daemons.job_files import TransferError
from htc.daemons.schedd.access import Denied
from htc.errors import HTCError
from htc.eventlog.dirwatch import DirWatch
from htc.wire import callfile as cf
from htc.wire import messages as m
from htc.wire.errors import ConnectionClosed, WireError

__all__ = ["HOLD_SECONDS", "QUIET_SECONDS", "SessionService", "complete_events"]

#: seconds an ending event waits for its job's call id or result before it is sent without them
HOLD_SECONDS = 5.0
#: seconds the news of a job's submit and start (events that end nothing) may wait for more news,
#: so that a short call's three events and result go to the client in one message
QUIET_SECONDS = 0.1
#: the events that may wait so (SUBMIT, EXECUTE)
_QUIET = frozenset({0, 1})
#: the most log bytes past the client's offset read in the loop's own thread (more: a worker thread)
_INLINE_LOG_BYTES = 64 * 1024
#: the most call-file bytes of a request written in the loop's own thread (more: a worker thread)
_INLINE_PUT_BYTES = 256 * 1024
#: the most bytes of files one SessionNews carries (more go in the next message)
_NEWS_BYTES = 4 * 1024 * 1024
_LOOK_EVERY = 0.2
#: the most bytes of written call outputs a session keeps for its next news (more: the oldest go,
#: and are read from their files when their call's end is sent)
_KEEP_BYTES = 16 * 1024 * 1024
#: ... and the most files
_KEEP_FILES = 10_000
_HEADER = re.compile(rb"(\d{3}) \((\d+)\.(\d+)\.\d+\)")
_END = b"\n...\n"
_OUTPUT_SUFFIXES = (".result", ".out", ".err")
#: a call's files in ``calls/``: its pickle and its outputs
_CALL_SUFFIXES = (cf.CALL_SUFFIX, *_OUTPUT_SUFFIXES)
#: the most calls whose files a NewsTaken removes in the loop's own thread (more: a worker thread)
_INLINE_REMOVALS = 16


def complete_events(data: bytes) -> list[tuple[int, int | None, str | None]]:
    """The complete events at the start of ``data`` (user-log text) as ``(end, code, job)``:
    the byte just past each event's ``...`` line, its event number and ``cluster.proc``."""
    out: list[tuple[int, int | None, str | None]] = []
    start = 0
    while True:
        end = data.find(_END, start)
        if end < 0:
            return out
        end += len(_END)
        found = _HEADER.match(data, start)
        if found:
            out.append((end, int(found.group(1)), f"{int(found.group(2))}.{int(found.group(3))}"))
        else:
            out.append((end, None, None))
        start = end


class _Session:
    """One served session: where it lives, whose it is, and how far the client has the log."""

    def __init__(self, directory: Path, owner: ofs.Identity | None, offset: int):
        self.directory = directory
        self.calls = directory / "calls"
        self.log = directory / "jobs.log"
        self.owner = owner
        self.offset = offset
        self.jobs: dict[str, str] = {}
        self.held_since: float | None = None
        #: when the oldest news not sent yet, of quiet events only, was first seen (None: none is waiting)
        self.quiet_since: float | None = None
        #: the log, kept open (:func:`_read_from`), and its inode
        self.log_fd: int | None = None
        self.log_inode = 0
        #: call outputs the schedd just wrote into ``calls/`` (name -> bytes), and the calls whose
        #: written outputs these are in full (any other output of theirs was not written)
        self.outputs: dict[str, bytes] = {}
        self.outputs_bytes = 0
        self.told: set[str] = set()
        self._outputs_lock = threading.Lock()  # (a long plan runs in a worker thread)
        #: wakes the session's loop (set while it serves)
        self.kick = None
        #: ``(log offset past its end, job, call)`` of each call whose end was sent, in log order:
        #: its files go once the client says its mirror holds that offset (``NewsTaken``)
        self.ended: collections.deque[tuple[int, str, str]] = collections.deque()

    def remember(self, files) -> None:
        """Keep a lane call's written outputs (``(name, bytes)``, its result first) for the news
        of its end; a result bigger than a chunk is streamed from its file instead."""
        if not files or not files[0][0].endswith(_OUTPUT_SUFFIXES[0]):
            return
        call = files[0][0][:-len(_OUTPUT_SUFFIXES[0])]
        if any(len(data) > m.MAX_SESSION_CHUNK for _, data in files):
            return
        with self._outputs_lock:
            for name, data in files:
                if name.startswith(call) and name[len(call):] in _OUTPUT_SUFFIXES:
                    self.outputs_bytes += len(data) - len(self.outputs.pop(name, b""))
                    self.outputs[name] = data
            self.told.add(call)
            while (self.outputs_bytes > _KEEP_BYTES or len(self.outputs) > _KEEP_FILES) and self.outputs:
                name = next(iter(self.outputs))  # the oldest
                self.outputs_bytes -= len(self.outputs.pop(name))
                self.told.discard(name.rsplit(".", 1)[0])

    def take(self, call: str) -> dict[str, bytes] | None:
        """The written outputs of ``call`` (forgotten here), or None when not told of them."""
        with self._outputs_lock:
            if call not in self.told:
                return None
            self.told.discard(call)
            out = {}
            for name in (f"{call}{suffix}" for suffix in _OUTPUT_SUFFIXES):
                data = self.outputs.pop(name, None)
                if data is not None:
                    self.outputs_bytes -= len(data)
                    out[name] = data
            return out

    def close(self) -> None:
        """Close the log's descriptor (the session's loop ends, or the path names another file)."""
        if self.log_fd is not None:
            os.close(self.log_fd)
            self.log_fd = None


def _wait(session: _Session, now: float) -> float:
    """How long the session's loop may sleep when nothing wakes it."""
    if session.held_since is not None:
        return 0.005
    if session.quiet_since is not None:
        return max(0.0, min(_LOOK_EVERY, session.quiet_since + QUIET_SECONDS - now))
    return _LOOK_EVERY


def _make(directory: Path, owner: ofs.Identity | None) -> None:
    """The session's directory, ``calls/`` and an empty log, owned by ``owner`` (when we are root)."""
    directory.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    chown = owner is not None and owner.uid is not None and os.geteuid() == 0
    for path in (directory, directory / "calls"):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        st = os.lstat(path)
        if not os.path.isdir(path) or os.path.islink(path):
            raise TransferError(f"{path} is not a directory; remove it")
        if chown and st.st_uid != owner.uid:
            os.chown(path, owner.uid, owner.gid if owner.gid is not None else -1)
    log = directory / "jobs.log"
    if not log.exists():
        fd = ofs.open_write(log, owner if chown else None, what="session event log", mode=0o600)
        if chown:
            os.fchown(fd, owner.uid, owner.gid if owner.gid is not None else -1)
        os.close(fd)


class SessionService:
    """Serves ``OpenSession`` conversations for the schedd's service (see the module docstring)."""

    def __init__(self, service):
        self.service = service
        #: the sessions served, by their ``calls/`` and by their log (normalized paths)
        self._by_calls: dict[str, list[_Session]] = {}
        self._by_log: dict[str, list[_Session]] = {}

    def written(self, files, logs) -> None:
        """What the service has just written (called once a turn's writes are done): ``files``,
        the :class:`~htc.daemons.schedd.events.WriteCallFiles` that succeeded; ``logs``, the
        events appended by log path (``{(path, owner): events}``). A served session keeps its
        calls' outputs and is woken when an event that ends something reached its log."""
        if not self._by_log:
            return
        for action in files:
            for session in self._by_calls.get(os.path.normpath(action.directory), ()):
                session.remember(action.files)
        for (path, _), events in logs.items():
            if all(int(event.type) in _QUIET for event in events):
                continue  # its news waits anyway (QUIET_SECONDS): inotify's wake-up is soon enough
            for session in self._by_log.get(os.path.normpath(path), ()):
                if session.kick is not None:
                    session.kick()

    def _track(self, session: _Session, on: bool) -> None:
        for index, key in ((self._by_calls, os.path.normpath(session.calls)),
                           (self._by_log, os.path.normpath(session.log))):
            served = index.setdefault(key, [])
            if on:
                served.append(session)
            else:
                served.remove(session)
                if not served:
                    del index[key]

    def _open(self, msg: m.OpenSession, peer) -> _Session:
        """The peer's session directory, made when missing.

        Raises:
            Denied: the peer may not submit (it proved no identity, or has no account).
            TransferError, OwnerFileError: no SPOOL, or the directory cannot be made.
        """
        core = self.service.core
        owner_name = core.access.owner(c.Received(msg=msg, peer=peer), None)
        owner = ofs.Identity.owner(owner_name)
        spool = core.settings.spool
        if not spool:
            raise TransferError("the schedd has no SPOOL directory configured; set SPOOL")
        who = peer.identity if peer.host is not None and peer.identity else owner_name
        if "/" in who or who in (".", ".."):
            raise Denied(f"the identity {who!r} cannot name a session directory")
        directory = Path(spool) / "executor" / who / msg.session
        _make(directory, owner)
        return _Session(directory, owner, msg.offset)

    async def serve(self, conn, msg: m.OpenSession, peer) -> None:
        """Serve one session until the client closes it or goes away."""
        log = self.service.log
        try:
            session = await asyncio.to_thread(self._open, msg, peer)
        except (Denied, TransferError, ofs.OwnerFileError, OSError) as exc:
            log.warning("executor session %s for %s refused: %s", msg.session, peer.identity or peer.user, exc)
            code = "denied" if isinstance(exc, Denied) else "bad_request"
            with contextlib.suppress(HTCError, OSError):
                await conn.send_error(code, str(exc))
            return
        await conn.send(m.SessionOpened(directory=str(session.directory), calls=str(session.calls),
                                        log=str(session.log)))
        log.info("executor session %s served for %s in %s", msg.session, peer.identity or peer.user,
                 session.directory)
        watch = DirWatch(session.log)
        wake = asyncio.Event()  # the log changed, or the client said something
        loop = asyncio.get_running_loop()
        if watch.active:
            loop.add_reader(watch.fileno(), lambda: watch.drain() and wake.set())

        def kick() -> None:  # told by the service: the log has news (what inotify queued meanwhile is the same)
            watch.drain()
            wake.set()

        session.kick = kick
        self._track(session, True)
        receiving: asyncio.Task | None = None
        try:
            while True:
                await self._push(conn, session)
                if receiving is None:
                    receiving = asyncio.ensure_future(conn.recv(timeout=None))
                    receiving.add_done_callback(lambda _: wake.set())
                if not receiving.done():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(_wait(session, time.monotonic())):
                            await wake.wait()
                    wake.clear()
                    if not receiving.done():
                        continue
                request, receiving = receiving.result(), None
                if isinstance(request, m.CloseSession):
                    if request.remove:
                        await asyncio.to_thread(shutil.rmtree, session.directory, True)
                    await conn.send(m.Ack(detail="session closed"))
                    log.info("executor session %s closed%s", msg.session, " and removed" if request.remove else "")
                    return
                await self._answer(conn, session, request, peer)
        except (ConnectionClosed, WireError, HTCError, OSError) as exc:
            log.info("executor session %s ended: %s", msg.session, exc)
        finally:
            self._track(session, False)
            session.kick = None
            if receiving is not None:
                receiving.cancel()
            if watch.active:
                loop.remove_reader(watch.fileno())
            watch.close()
            session.close()

    async def _answer(self, conn, session: _Session, request: m.Message, peer) -> None:
        if isinstance(request, m.FollowCalls):
            session.jobs.update(request.jobs)
        elif isinstance(request, m.SubmitCalls):
            await self._submit(conn, session, request, peer)
        elif isinstance(request, m.NewsTaken):
            calls = _taken(session, request.offset)
            if len(calls) <= _INLINE_REMOVALS:
                _remove_call_files(session, calls)
            else:
                await asyncio.to_thread(_remove_call_files, session, calls)
        elif isinstance(request, m.PutCallFiles):
            if await _put(conn, session, request.chunks):
                await conn.send(m.Ack())
        else:
            await conn.send_error("bad_request", f"{type(request).__name__} is not part of an executor session")

    async def _submit(self, conn, session: _Session, request: m.SubmitCalls, peer) -> None:
        """The batch's pickles, then its cluster through the core, then the jobs followed."""
        if request.chunks and not await _put(conn, session, request.chunks):
            return
        submit = m.Submit(cluster_ad=request.cluster_ad, proc_ads=request.proc_ads,
                          submission_id=request.submission_id)  # (checked as SubmitCalls on receipt)
        reply = await self.service.ask_core(submit, peer)
        if isinstance(reply, m.SubmitReply):
            session.jobs.update({f"{reply.cluster_id}.{reply.first_proc + i}": call
                                 for i, call in enumerate(request.calls[:reply.num_procs])})
        await conn.send(reply)

    async def _push(self, conn, session: _Session) -> None:
        """Send what the log has past the client's offset (see the module docstring): each turn
        is planned, and its small files read, in one call (in a worker thread when the log has
        much to read); a file bigger than a chunk is streamed after it, a chunk at a time."""
        while True:
            try:
                small_log = os.stat(session.log).st_size - session.offset <= _INLINE_LOG_BYTES
            except OSError:
                small_log = True  # (gone: _plan finds nothing)
            # A short read (the usual few events and a result) costs less than a thread hand-off.
            plan = _plan(session) if small_log else await asyncio.to_thread(_plan, session)
            if plan is None:
                return
            log, small, big, held = plan
            for name in big:
                await self._stream(conn, session, name)
            await conn.send(m.SessionNews(offset=session.offset, log=log, chunks=small))
            session.offset += len(log)
            if held:
                return

    async def _stream(self, conn, session: _Session, name: str) -> None:
        """A file of more than one chunk, in messages of about :data:`_NEWS_BYTES`, never whole in memory."""
        try:
            fd, _ = await asyncio.to_thread(ofs.open_read, session.calls / name, session.owner,
                                            what="call output", follow=False)
        except (FileNotFoundError, ofs.OwnerFileError):
            return  # gone meanwhile: the client reads no result and says so
        chunks: list[m.FileChunk] = []
        held = 0
        try:
            offset = 0
            while True:
                data = await asyncio.to_thread(os.pread, fd, m.MAX_SESSION_CHUNK, offset)
                last = len(data) < m.MAX_SESSION_CHUNK
                chunks.append(m.FileChunk(name=name, data=data, first=offset == 0, last=last))
                offset += len(data)
                held += len(data)
                if held >= _NEWS_BYTES or last:
                    await conn.send(m.SessionNews(offset=session.offset, chunks=tuple(chunks)))
                    chunks, held = [], 0
                if last:
                    return
        finally:
            os.close(fd)


async def _put(conn, session: _Session, chunks: tuple[m.FileChunk, ...]) -> bool:
    """Write the client's chunks (a few small pickles in the loop's thread, more in a worker
    thread); False when they could not be, and the client was told why."""
    try:
        if sum(len(chunk.data) for chunk in chunks) <= _INLINE_PUT_BYTES:
            _write_chunks(session, chunks)
        else:
            await asyncio.to_thread(_write_chunks, session, chunks)
    except (ofs.OwnerFileError, OSError) as exc:
        await conn.send_error("bad_request", f"writing call files into {session.calls}: {exc}")
        return False
    return True


def _taken(session: _Session, offset: int) -> list[str]:
    """The calls whose end the client's mirror holds (their news lies before ``offset``),
    forgotten here."""
    calls = []
    ended = session.ended
    while ended and ended[0][0] <= offset:
        _, job, call = ended.popleft()
        session.jobs.pop(job, None)
        calls.append(call)
    return calls


def _remove_call_files(session: _Session, calls: list[str]) -> None:
    """Remove the files of ``calls`` from ``calls/`` (opened without following a link; each
    name removed relative to it): the pickle and the outputs (:data:`_CALL_SUFFIXES`)."""
    if not calls:
        return
    try:
        fd = os.open(session.calls, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # (gone, or not a directory any more: nothing of ours to remove)
    try:
        for call in calls:
            for suffix in _CALL_SUFFIXES:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{call}{suffix}", dir_fd=fd)
    finally:
        os.close(fd)


class _AsOwner:
    """The owner's credentials, taken at the first file to open and then kept for the rest of a
    plan (a switch costs seven system calls; a plan whose log is open and whose outputs the
    schedd told of opens nothing)."""

    def __init__(self, owner: ofs.Identity | None):
        self.owner = owner
        self._stack = contextlib.ExitStack()
        self._taken = False

    def need(self) -> None:
        """Take the owner's credentials now, if not taken yet."""
        if not self._taken:
            self._taken = True
            self._stack.enter_context(ofs.acting_as(self.owner))

    def __enter__(self) -> _AsOwner:
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()


def _plan(session: _Session) -> tuple[bytes, tuple[m.FileChunk, ...], list[str], bool] | None:
    """The next news: the log's complete events to send, the small files that go with them (as
    the schedd told of them, or read here as the owner), the bigger files to stream first, and
    whether an ending event is held back (None: nothing to send)."""
    with _AsOwner(session.owner) as owner:
        return _plan_as_owner(session, owner)


def _plan_as_owner(session: _Session, owner: _AsOwner) -> tuple[bytes, tuple[m.FileChunk, ...], list[str], bool] | None:
    data = _read_from(session, owner)
    sent, size, held, quiet = 0, 0, False, True
    small: list[m.FileChunk] = []
    big: list[str] = []
    now = time.monotonic()
    for end, code, job in complete_events(data):
        if code == 5 and job is not None:
            call = session.jobs.get(job)
            told = session.take(call) if call is not None else None
            if told is None and (call is None or not _exists(session.calls / f"{call}.result", owner)):
                session.held_since = session.held_since or now
                if now - session.held_since < HOLD_SECONDS:
                    held = True
                    break
            if told is not None:
                small += [m.FileChunk(name=name, data=data) for name, data in told.items()]
                size += sum(len(data) for data in told.values())
            elif call is not None:
                for name in (f"{call}{suffix}" for suffix in _OUTPUT_SUFFIXES):
                    size += _read_small(session, name, small, big, owner)
            session.held_since = None
            if call is not None:
                session.ended.append((session.offset + end, job, call))
        quiet = quiet and code in _QUIET
        sent = end
        if size >= _NEWS_BYTES:
            break
    if not sent:
        return None
    if quiet:  # only a submit or a start: wait a little for the call's end to go with them
        session.quiet_since = session.quiet_since or now
        if now - session.quiet_since < QUIET_SECONDS:
            return None
    session.quiet_since = None
    return data[:sent], tuple(small), big, held


def _exists(path: Path, owner: _AsOwner) -> bool:
    owner.need()
    return path.exists()


def _read_small(session: _Session, name: str, small: list[m.FileChunk], big: list[str], owner: _AsOwner) -> int:
    """Add ``name`` to ``small`` (read whole) when it fits one chunk, else to ``big``; its size."""
    owner.need()
    try:
        fd, st = ofs.open_read(session.calls / name, session.owner, what="call output", follow=False)
    except (FileNotFoundError, ofs.OwnerFileError):
        return 0  # (no output on that stream)
    try:
        data = os.pread(fd, m.MAX_SESSION_CHUNK + 1, 0)
    finally:
        os.close(fd)
    if len(data) > m.MAX_SESSION_CHUNK:
        big.append(name)
        return st.st_size if st is not None else len(data)
    small.append(m.FileChunk(name=name, data=data))
    return len(data)


def _read_from(session: _Session, owner: _AsOwner) -> bytes:
    """The log's bytes from the client's offset (at most 4 MiB), read as the owner through a
    descriptor kept open while the path names the same file (opened again when it does not)."""
    try:
        inode = os.stat(session.log, follow_symlinks=False).st_ino
    except FileNotFoundError:
        return b""
    if session.log_fd is None or inode != session.log_inode:
        session.close()
        owner.need()
        try:
            fd, st = ofs.open_read(session.log, session.owner, what="session event log", follow=False)
        except FileNotFoundError:
            return b""
        session.log_fd, session.log_inode = fd, st.st_ino if st is not None else inode
    return os.pread(session.log_fd, _NEWS_BYTES, session.offset)


def _write_chunks(session: _Session, chunks: tuple[m.FileChunk, ...]) -> None:
    """Write the client's chunks into ``calls/`` as the owner, never through a link."""
    owner = session.owner if session.owner is not None and session.owner.switch else None
    with ofs.acting_as(owner):  # once for the batch (open_write's own switch is then free)
        _write_chunks_as(session, chunks, owner)


def _write_chunks_as(session: _Session, chunks: tuple[m.FileChunk, ...], owner: ofs.Identity | None) -> None:
    for chunk in chunks:
        part = session.calls / f".{chunk.name}.part"
        fd = ofs.open_write(part, owner, what="call file", truncate=chunk.first, append=not chunk.first,
                            mode=0o600)
        try:
            view = memoryview(chunk.data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        if chunk.last:
            os.rename(part, session.calls / chunk.name)

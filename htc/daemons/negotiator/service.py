"""The negotiator's service: the :class:`~htc.daemons.negotiator.core.Negotiator` core on real sockets.

Theory of operation
-------------------
The core already speaks the shared vocabulary (``Started``, ``Tick``, ``Received`` with the
wire's ``Reschedule``, ``StopRequested``, ``Reconfigured``). Its wire adapter,
:class:`~htc.daemons.negotiator.adapter.NegotiatorDaemon`, turns the core's publishing actions into
wire sends (MatchNotify, the Accounting and Negotiator ads); :class:`NegotiatorService` teaches
:class:`~htc.daemons.service.DaemonService` the actions that need I/O:

============================  ====================================================================
``FetchPoolAds``              query the collector for every Machine ad and every Submitter ad;
                              feed ``PoolAds`` (or ``PoolAdsFailed``)
``AskResourceRequests``       ``GetResourceRequests`` to the submitter's schedd; feed
                              ``RequestsReceived`` (or ``RequestsFailed``)
``SaveAccountant``            write the accountant's snapshot to ACCOUNTANT_DATABASE_FILE as JSON,
                              atomically (temporary file, fsync, rename); the text is made here,
                              from the state the core saved (``SavedAccountant.text``)
``Send`` of a ``MatchNotify`` queued per destination (below); any other ``Send`` as every
                              service sends it
============================  ====================================================================

Each I/O action runs as a task of the service's TaskGroup and comes back as one event, so the
core sees the world one event at a time. Answers that arrive after NEGOTIATOR_TIMEOUT belong
to a finished cycle; the core counts and ignores them.

**A cycle's MatchNotify messages are queued per destination.** A cycle of a large pool makes
tens of thousands at once (81,642 to 10 schedds in case 1 of ``benchmarks/negotiator_bench.py``).
Sent as every service sends, a task each, they are all in flight together, and since a
connection carries one request at a time (:mod:`htc.wire.peers`) each opens its own: in case 1
the negotiator ran out of file descriptors after 19,989 connections and 70,779 of the matches
were never told (``benchmarks/negotiator_service_cpu.py --send``, fake schedds; 126 us of the
negotiator's CPU per match). Instead each destination (a schedd; a startd with
NEGOTIATOR_INFORM_STARTD) has a queue, taken in the order the core made it by at most
:data:`MATCH_LANES` tasks, each on a connection of its own: a lane writes up to
:data:`MATCH_WINDOW` messages at once, then reads their answers, which the peer sends in order
(its service handles a connection's requests one after the other); at most
:data:`MATCH_LANES_IN_ALL` lanes run at once, a destination beyond them waiting for the next
lane free (so that telling thousands of startds does not open thousands of connections at once).
All 81,642 were told over 40
connections, at 19 us per match (41 us when a lane waited for each answer before the next
request). HTCondor too tells a schedd its matches one after the other, on its negotiation
connection. Each answer or failure still comes back as its own ``SendDone`` or ``SendFailed``:
an ``ErrorReply`` fails its message alone; a connection closed or broken fails the messages it
left unanswered (they may or may not have been acted on, as for any request) and the lane goes
on with a new one; when a destination lets a MatchNotify time out, the rest of its queue fails
at once (one NEGOTIATOR_TIMEOUT, not one per message held behind it).

When: every NEGOTIATOR_INTERVAL, and 10 ms after a ``Reschedule`` message (a schedd sends one
after a submit, as condor_reschedule does; a startd when a slot became free); the core
coalesces a burst of them into one cycle (see :mod:`htc.daemons.negotiator.core`, "When cycles
happen"). The service reads the time and waits only through its clock
(:mod:`htc.daemons.clock`, real by default), so a test that passes a FakeClock decides when a
cycle is due.

**The pool's ads are parsed once, not every cycle.** Each cycle asks the collector for every
slot ad and every Submitter ad, and between two cycles most come back byte for byte the same
(a startd reports every UPDATE_INTERVAL, 300 s by default, or on a change; cycles are
NEGOTIATOR_INTERVAL apart, 60 s). :class:`ParsedAds` keeps the last reply's ads by their text
and parses only the texts it has not seen (a 10,000-slot pool: ~0.6 s of CPU a cycle parsed
whole, ~10 ms when nothing changed; ``benchmarks/negotiator_service_cpu.py --parse``). A reused
ad is handed to the core as it is, not copied: the core writes only into copies of the ads it is
given (``PendingSlots.apply`` takes the carves of pending slots off a copy, the cycle carves a
copy of each partitionable slot's ad, the claimed and fitting views are copies), so an ad is
still what its text parses to when the next cycle gets it
(``tests/service/test_negotiator_parsed_ads.py`` runs cycles on reused ads against fresh parses).

On start the accountant is restored from ACCOUNTANT_DATABASE_FILE (user priorities survive a
restart); a file that is not a snapshot stops the daemon with advice rather than silently
resetting everybody's priority.
"""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path

from htc.classad import ClassAd, ClassAdParseError
from htc.config.hostname import full_hostname
from htc.daemons import core as c
from htc.daemons import settings as knobs
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.clock import REAL, Clock
from htc.daemons.network import pool_addresses, service_transport
from htc.daemons.negotiator.accountant import Accountant, SavedAccountant
from htc.daemons.negotiator.core import Negotiator
from htc.daemons.negotiator.events import (AskResourceRequests, FetchPoolAds, PoolAds, PoolAdsFailed,
                                           RequestsFailed, RequestsReceived, SaveAccountant)
from htc.daemons.negotiator.settings import NegotiatorServiceSettings, NegotiatorSettings
from htc.daemons.negotiator.adapter import NegotiatorDaemon
from htc.daemons.service import DaemonPaths, DaemonService, load_daemon_config
from htc.errors import HTCError, UsageError
from htc.wire import messages as m
from htc.wire.errors import FrameTooLarge, RemoteError, RequestTimeout
from htc.wire.transport import Connection

__all__ = ["MATCH_LANES", "MATCH_LANES_IN_ALL", "MATCH_WINDOW", "NegotiatorService", "ParsedAds",
           "load_accountant", "save_accountant", "make_service", "settings_from_config"]

#: tasks taking one destination's MatchNotify queue, each on a connection of its own
MATCH_LANES = 4
#: MatchNotify messages a lane writes before it reads their answers (one write for them all)
MATCH_WINDOW = 16
#: lanes at once to all destinations together (a connection each: with NEGOTIATOR_INFORM_STARTD
#: a cycle tells thousands of startds, whose queues wait for a lane free)
MATCH_LANES_IN_ALL = 128


def load_accountant(path: Path, settings: NegotiatorSettings, now: float) -> Accountant:
    """The accountant saved at ``path``, or a fresh one when there is no file.

    Raises:
        UsageError: the file is not an accountant snapshot (it says to move it aside).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Accountant(settings.accountant, now=now)
    except OSError as exc:
        raise UsageError(f"cannot read the accountant's file {path}: {exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"the accountant's file {path} is not JSON ({exc}); move it aside to start with "
                         "fresh user priorities") from None
    try:
        return Accountant.restore(data, settings.accountant)
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None


def save_accountant(path: Path, snapshot: dict | SavedAccountant) -> None:
    """Write ``snapshot`` (or the saved accountant's, :meth:`SavedAccountant.text`) to
    ``path`` so that a crash leaves the old file or the new one, never half.

    Raises:
        OSError: the directory is not writable or the disk is full.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    # (dumps, not dump: json.dump writes chunk by chunk from the pure-Python encoder, 5x slower
    # on a large pool's 80,000 match records; the text is the same)
    text = (snapshot.text() if isinstance(snapshot, SavedAccountant)
            else json.dumps(snapshot, sort_keys=True))
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class ParsedAds:
    """The ads of one kind of collector reply, parsed: the last reply's ads kept by their text,
    so that a text seen in the last reply is not parsed again (see the module docstring).

    It holds one reply's ads at most: each :meth:`parse` keeps the ads of its own texts alone.
    """

    def __init__(self) -> None:
        self._last: dict[str, ClassAd] = {}
        #: ads parsed and ads reused by the last :meth:`parse` (statistics, for tests)
        self.parsed = self.reused = 0

    def parse(self, texts) -> list[ClassAd]:
        """The ads of ``texts``, in order: the last reply's ad of the same text, else a fresh
        parse. Each position gets an ad of its own (a text twice in one reply is parsed twice).

        Raises:
            ClassAdParseError: a text is not a ClassAd (what was kept stays kept).
        """
        last = self._last.get
        kept: dict[str, ClassAd] = {}
        out = []
        parsed = 0
        for text in texts:
            ad = last(text) if text not in kept else None  # (a text's second time: parsed)
            if ad is None:
                ad = ClassAd(text)
                parsed += 1
            kept[text] = ad
            out.append(ad)
        self._last = kept
        self.parsed, self.reused = parsed, len(out) - parsed
        return out


class NegotiatorService(DaemonService):
    """The negotiator's asyncio shell (see the module docstring).

    Args:
        settings: the service's settings.
        transport: how to listen and reach the collector, schedds and startds.
        log_file: the NegotiatorLog.
        reload_settings: fresh :class:`NegotiatorServiceSettings` after SIGHUP / Reconfig.
        accountant: the accountant to start with (default: restored from ``settings.accountant_file``).
        clock: where the time comes from (:mod:`htc.daemons.clock`; a test passes a FakeClock).

    Raises:
        UsageError: the accountant's file is damaged.
    """

    def __init__(self, settings: NegotiatorServiceSettings, transport, *, log_file: Path | None = None,
                 reload_settings=None, accountant: Accountant | None = None, clock: Clock = REAL):
        now = clock.time()
        if accountant is None:
            accountant = load_accountant(settings.accountant_file, settings.core, now)
        self.daemon_core = NegotiatorDaemon(settings, accountant, now)
        super().__init__("negotiator", self.daemon_core, transport, address=settings.address, log_file=log_file,
                         reload_settings=reload_settings, clock=clock)
        self.register_action(FetchPoolAds, self._do_fetch)
        self.register_action(AskResourceRequests, self._do_ask)
        self.register_action(SaveAccountant, self._do_save)
        self.register_action(c.Send, self._do_send_or_queue)
        #: the last reply's ads of each kind, by text (parsed once: see the module docstring)
        self._parsed = {m.AdType.Startd: ParsedAds(), m.AdType.Submitter: ParsedAds()}
        #: destination -> its MatchNotify sends not yet taken by a lane, and its lanes running
        self._match_queues: dict[str, collections.deque[c.Send]] = {}
        self._match_lanes: dict[str, int] = {}
        #: connections the MatchNotify lanes opened (statistics)
        self.match_connections = 0
        self._lanes_in_all = 0
        #: destinations with matches queued and no lane, waiting for one (in order; a dict as a set)
        self._waiting: dict[str, None] = {}

    @property
    def negotiator(self) -> Negotiator:
        """The core (for statistics)."""
        return self.daemon_core.negotiator

    @property
    def settings(self) -> NegotiatorServiceSettings:
        """The settings in force (replaced on reconfig)."""
        return self.daemon_core.settings

    # --- collector --------------------------------------------------------------------------

    def _do_fetch(self, action: FetchPoolAds) -> None:
        self.start_task(self._fetch(action.cycle), f"cycle {action.cycle}: query the collector")

    async def _fetch(self, cycle: int) -> None:
        try:
            machines = await self._query(m.AdType.Startd)
            submitters = await self._query(m.AdType.Submitter)
        except (HTCError, ClassAdParseError) as exc:
            self.feed(PoolAdsFailed(cycle, f"{self.settings.collector}: {exc}"))
            return
        self.feed(PoolAds(cycle, tuple(machines), tuple(submitters)))

    async def _query(self, ad_type: m.AdType) -> list[ClassAd]:
        reply = await self.peers.request(self.settings.collector, m.QueryAds(ad_type=ad_type, private=ad_type is m.AdType.Startd),
                                         timeout=self.settings.core.timeout)
        return self._parsed[ad_type].parse(reply.ads)

    # --- schedds ------------------------------------------------------------------------------

    def _do_ask(self, action: AskResourceRequests) -> None:
        self.start_task(self._ask(action), f"cycle {action.cycle}: requests of {action.submitter}")

    async def _ask(self, a: AskResourceRequests) -> None:
        address = a.schedd_address or a.schedd
        try:
            reply = await self.peers.request(
                address, m.GetResourceRequests(submitter=a.submitter, significant_attributes=a.significant_attributes,
                                           pool=self.settings.collector),
                timeout=self.settings.core.timeout)
            if reply.submitter != a.submitter:
                raise UsageError(f"asked for {a.submitter!r} but the answer is about {reply.submitter!r}")
            requests = []
            for r in reply.requests:
                try:
                    job = ClassAd(r.job_ad)
                except ClassAdParseError as exc:  # one bad job ad costs its request, not the schedd's
                    self.log.warning("cycle %d: schedd %s: skipped autocluster %d of %s, whose job ad "
                                     "does not parse: %s", a.cycle, a.schedd, r.autocluster_id, a.submitter, exc)
                    continue
                requests.append(ResourceRequest(autocluster_id=r.autocluster_id, job=job, count=r.count))
        except HTCError as exc:
            self.log.warning("cycle %d: schedd %s (%s) gave no requests for %s: %s", a.cycle, a.schedd, address,
                             a.submitter, exc)
            self.feed(RequestsFailed(a.cycle, a.schedd, a.submitter, str(exc)))
            return
        self.feed(RequestsReceived(a.cycle, a.schedd, a.submitter, tuple(requests)))

    # --- matches ------------------------------------------------------------------------------

    def _do_send_or_queue(self, action: c.Send) -> None:
        if action.msg.__class__ is not m.MatchNotify:
            self._do_send(action)
            return
        to = action.to
        queue = self._match_queues.get(to)
        if queue is None:
            queue = self._match_queues[to] = collections.deque()
        queue.append(action)
        lanes = self._match_lanes.get(to, 0)
        if lanes >= MATCH_LANES:
            return  # (its lanes take it)
        if self._lanes_in_all < MATCH_LANES_IN_ALL:
            self._match_lanes[to] = lanes + 1
            self._lanes_in_all += 1
            task = self.start_task(self._lane(to), f"MatchNotify to {to}")
            self._sends.add(task)  # (as DaemonService._do_send: waited for on exit, up to flush_timeout)
            task.add_done_callback(self._sends.discard)
        elif lanes == 0:
            self._waiting[to] = None  # the next lane free takes it

    async def _lane(self, to: str | None) -> None:
        """A lane: ``to``'s queue, then a waiting destination's, until none waits."""
        try:
            while to is not None:
                await self._drain_matches(to, self._match_queues[to])
                to = None
                while self._waiting and to is None:
                    waiting = next(iter(self._waiting))
                    del self._waiting[waiting]
                    lanes = self._match_lanes.get(waiting, 0)
                    if self._match_queues.get(waiting) and lanes < MATCH_LANES:
                        self._match_lanes[waiting] = lanes + 1
                        to = waiting
        finally:
            self._lanes_in_all -= 1

    async def _drain_matches(self, to: str, queue: collections.deque[c.Send]) -> None:
        """A lane's work on ``to``'s queue, on a connection of its own: until the queue is empty,
        write up to :data:`MATCH_WINDOW` of its messages, then read their answers in order."""
        conn: Connection | None = None
        try:
            while queue:
                window = [queue.popleft() for _ in range(min(MATCH_WINDOW, len(queue)))]
                if conn is None:
                    try:
                        conn = await self.peers.transport.open_connection(to, timeout=window[0].timeout)
                    except HTCError as exc:
                        self._failed(to, window, str(exc))
                        continue
                    self.match_connections += 1
                conn = await self._notify_window(conn, to, window, queue)
        finally:
            if conn is not None:
                conn.close_nowait()
            left = self._match_lanes[to] - 1
            if left or queue:
                self._match_lanes[to] = left
            else:  # (a startd's queue goes when its few matches are told)
                del self._match_lanes[to], self._match_queues[to]

    async def _notify_window(self, conn: Connection, to: str, window: list[c.Send],
                             queue: collections.deque[c.Send]) -> Connection | None:
        """Write ``window``'s messages on ``conn``, read their answers in order and feed each
        outcome; return the connection to go on with (None: it was closed, broken or silent)."""
        sent: list[c.Send] = []
        refused: list[c.Send] = []
        try:
            for action in window:
                try:
                    conn.send_nowait(action.msg)
                except FrameTooLarge as exc:  # (that message alone: nothing of it was written)
                    refused.append(action)
                    self.feed(c.SendFailed(to, action.msg, str(exc), action.cookie))
                    continue
                sent.append(action)
            await conn.drain()
        except HTCError as exc:  # the connection is gone: what was written may or may not have arrived
            conn.close_nowait()
            self._failed(to, [a for a in window if not any(a is r for r in refused)], str(exc))
            return None
        for i, action in enumerate(sent):
            try:
                reply = await conn.read_reply(action.msg, timeout=action.timeout)
            except RemoteError as exc:  # an ErrorReply: a whole answer, the connection is in step
                self.feed(c.SendFailed(to, action.msg, str(exc), action.cookie))
            except RequestTimeout as exc:
                conn.close_nowait()
                self.feed(c.SendFailed(to, action.msg, str(exc), action.cookie))
                held = [*sent[i + 1:], *queue]
                queue.clear()  # (behind an unanswered one: each would wait as long)
                self._failed(to, held, f"an earlier MatchNotify to {to} had no answer ({exc})")
                return None
            except HTCError as exc:  # closed or broken: the rest of the window has no answer either
                conn.close_nowait()
                self._failed(to, sent[i:], str(exc))
                return None
            else:
                self.feed(c.SendDone(to, action.msg, reply, action.cookie))
        return conn

    def _failed(self, to: str, actions: list[c.Send], error: str) -> None:
        for action in actions:
            self.feed(c.SendFailed(to, action.msg, error, action.cookie))

    # --- the accountant's file ------------------------------------------------------------------

    def _do_save(self, action: SaveAccountant) -> None:
        path = self.settings.accountant_file
        try:
            save_accountant(path, action.state)
        except OSError as exc:
            # Priorities stay in memory; the next cycle tries again.
            self.log.error("cannot save the accountant to %s: %s", path, exc)


# --- configuration --------------------------------------------------------------------------------


def settings_from_config(config, home: Path) -> NegotiatorServiceSettings:
    """Build the negotiator's settings from the configuration (NEGOTIATOR subsystem).

    Raises:
        UsageError: a knob has a value the negotiator cannot use (the message names it).
    """
    core = NegotiatorSettings.from_config(config)
    host = full_hostname(config)
    path = config.param("ACCOUNTANT_DATABASE_FILE") or str(home / "spool" / "Accountantnew.log")
    net = pool_addresses(config, "negotiator")  # network mode: <ip:9618?sock=negotiator> and <cm:9618>
    return knobs.from_config(
        NegotiatorServiceSettings, config, core=core, accountant_file=Path(path), address=net.own,
        collector=net.collector,
        name=f"negotiator@{host}", machine=host, pid=os.getpid(),
        ad_lifetime=int(max(config.param("CLASSAD_LIFETIME"), 3 * core.interval)))


def make_service(paths: DaemonPaths, clock: Clock = REAL) -> NegotiatorService:
    """The negotiator's service for the pool at ``paths`` (used by ``python -m htc.daemons``).

    Args:
        paths: the pool's directories and transport.
        clock: where the time comes from (a test or the simulator passes a FakeClock).

    Raises:
        UsageError: the configuration or the accountant's file is broken.
    """
    def settings() -> NegotiatorServiceSettings:
        return settings_from_config(load_daemon_config("NEGOTIATOR"), paths.home)

    transport = service_transport(paths.sockets, load_daemon_config("NEGOTIATOR"))
    return NegotiatorService(settings(), transport, log_file=paths.log_file("negotiator"),
                             reload_settings=settings, clock=clock)

"""Connections a daemon keeps open to the daemons it talks to.

Theory of operation
-------------------
A daemon sends requests to a few peers all the time (the startd and the schedd update the
collector; the schedd claims and activates slots at the startd; the startd reports job exits to
the schedd; the negotiator asks schedds for requests).  Opening a Unix-socket connection per
request costs a connect, an accept, a server task and a close on both sides, so a daemon keeps
its connections: :class:`PeerConnections` holds, per address, a short list of *idle*
connections.

``await peers.request(address, msg, timeout=...)`` takes the most recently used idle connection
for ``address`` (or opens one through the :class:`~htc.wire.transport.Transport`, which stays
the only thing that knows how bytes travel), sends ``msg``, reads the reply and puts the
connection back.  A connection carries one request at a time, strictly request then reply, so
several requests in flight to one peer use several connections; a request never waits for
another to finish.  When a request is done and ``max_idle`` connections to that peer are
already idle, its connection is closed instead of kept, so bursts leave at most ``max_idle``
connections per peer behind.  (There is deliberately no cap on connections *in flight*: a
startd holds a RequestClaim unanswered while the slot's job retires, and a capped pool would
then make the schedd's ReleaseClaim withdrawing it wait behind it.)

An idle connection is closed after ``idle_timeout`` seconds (default 60), well before a
daemon's server closes a silent client (``DaemonService.idle_timeout``, 300 s), so normally the
client closes first.  A connection is put back only when the conversation is known to be in
step: after a reply, including an ``ErrorReply`` (a :class:`~htc.wire.errors.RemoteError` is a
whole answer).  After a timeout, a broken or malformed reply, or a cancellation it is closed: a
late reply must never be read as the answer to the next request.

**When a request is sent again.**  A peer may have closed an idle connection while we were not
looking: it restarted (killed, then started again by its master), it was stopping, or it timed
the connection out.  Two checks make that transparent, and neither can deliver a request twice:

1. before reuse, a connection whose stream has ended (the peer's close has arrived as an EOF),
   whose reading failed or that holds unexpected bytes is discarded unused;
2. if *sending* on a reused connection fails (EPIPE / ECONNRESET: the peer's end is already
   closed), the request is sent once more on a fresh connection.  A failed send means some
   bytes of the frame never reached the peer, and a peer acts only on a complete frame, so the
   first attempt cannot have been processed.

Anything that goes wrong after the request was sent in full -- the peer closes the connection
or dies before answering, or stays silent past ``timeout`` -- is raised to the caller and never
retried here: the peer may have processed the request, and only the caller knows whether doing
it twice is harmless.  A failure on a fresh connection is raised too.

Fire-and-forget messages (those whose ``reply_type`` is None) go through :meth:`send`, on a
connection of their own that is closed at once: a peer that answers one anyway (an
``ErrorReply`` for a message it does not handle) must not leave a stray reply on a connection
that is used again.
"""

from __future__ import annotations

import asyncio
import logging

from htc.wire import messages
from htc.wire.errors import ConnectionClosed, RemoteError
from htc.wire.transport import DEFAULT_TIMEOUT, Connection, Transport

log = logging.getLogger("htc.wire")

#: seconds an idle connection is kept; below DaemonService.idle_timeout so the client closes first
PEER_IDLE_TIMEOUT = 60.0

#: idle connections kept per peer address
PEER_MAX_IDLE = 4


class PeerConnections:
    """A daemon's reusable connections to its peers; see the module header.

    Args:
        transport: how to reach peers by address.
        max_idle: idle connections kept per address (0: close every connection after use).
        idle_timeout: seconds an idle connection is kept before it is closed.
    """

    def __init__(self, transport: Transport, *, max_idle: int = PEER_MAX_IDLE,
                 idle_timeout: float = PEER_IDLE_TIMEOUT):
        self.transport = transport
        self.max_idle = max_idle
        self.idle_timeout = idle_timeout
        self._idle: dict[str, list[tuple[Connection, asyncio.TimerHandle]]] = {}
        self._busy: set[Connection] = set()
        self._closed = False
        #: connections opened so far (statistics and tests)
        self.opened = 0
        #: requests sent a second time because a reused connection turned out to be closed
        self.resent = 0

    async def request(self, address: str, msg: messages.Message, *, timeout: float | None = DEFAULT_TIMEOUT,
                      expect: type[messages.Message] | None = None) -> messages.Message:
        """Send the request ``msg`` to ``address`` and return the reply, reusing a connection.

        Args:
            address: the peer's name.
            msg: the request.
            timeout: seconds for connecting, and again for the reply.
            expect: the reply class wanted (default: ``msg.reply_type``).

        Returns:
            The reply.

        Raises:
            DaemonUnreachable: nobody listens at ``address``.
            RemoteError: the peer answered with an ErrorReply.
            ConnectionClosed, RequestTimeout, WireError: the peer went away, stayed silent or
                broke the protocol; the request may or may not have been processed.
        """
        if self._closed:
            raise ConnectionClosed(f"cannot send {type(msg).__name__} to {address}: this daemon is shutting down")
        conn = self._take(address)
        reused = conn is not None
        if conn is None:
            conn = await self._open(address, timeout)
        try:
            try:
                await conn.send(msg)
            except ConnectionClosed as exc:
                if not reused:
                    raise
                # The peer had closed this idle connection: nothing of msg can have been acted on.
                log.debug("resending %s to %s on a fresh connection: %s", type(msg).__name__, address, exc)
                self._discard(conn)
                self.resent += 1
                conn = await self._open(address, timeout)
                await conn.send(msg)
            reply = await conn.read_reply(msg, timeout=timeout, expect=expect)
        except RemoteError:
            self._give_back(address, conn)
            raise
        except BaseException:
            self._discard(conn)
            raise
        self._give_back(address, conn)
        return reply

    async def send(self, address: str, msg: messages.Message, *, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        """Deliver ``msg``, which expects no reply, on a connection of its own (see the module header).

        Raises:
            DaemonUnreachable, ConnectionClosed: the peer cannot be reached or went away.
        """
        async with await self.transport.open_connection(address, timeout=timeout) as conn:
            await conn.send(msg)

    def idle_count(self, address: str) -> int:
        """How many idle connections to ``address`` are kept now."""
        return len(self._idle.get(address, ()))

    async def aclose(self) -> None:
        """Close every connection, idle or busy; later requests fail (idempotent)."""
        self._closed = True
        conns = [conn for idle in self._idle.values() for conn, _ in idle] + list(self._busy)
        for idle in self._idle.values():
            for _, timer in idle:
                timer.cancel()
        self._idle.clear()
        self._busy.clear()
        await asyncio.gather(*(conn.aclose() for conn in conns), return_exceptions=True)

    # --- internals ---------------------------------------------------------------------------

    async def _open(self, address: str, timeout: float | None) -> Connection:
        conn = await self.transport.open_connection(address, timeout=timeout)
        self.opened += 1
        self._busy.add(conn)
        return conn

    def _take(self, address: str) -> Connection | None:
        idle = self._idle.get(address)
        while idle:
            conn, timer = idle.pop()
            timer.cancel()
            if conn.reusable:
                self._busy.add(conn)
                return conn
            conn.close_nowait()  # the peer closed it (restart, idle timeout) while it sat here
        return None

    def _discard(self, conn: Connection) -> None:
        self._busy.discard(conn)
        conn.close_nowait()

    def _give_back(self, address: str, conn: Connection) -> None:
        self._busy.discard(conn)
        idle = self._idle.setdefault(address, [])
        if self._closed or len(idle) >= self.max_idle or not conn.reusable:
            conn.close_nowait()
            return
        timer = asyncio.get_running_loop().call_later(self.idle_timeout, self._expire, address, conn)
        idle.append((conn, timer))

    def _expire(self, address: str, conn: Connection) -> None:
        idle = self._idle.get(address, [])
        for i, (held, _) in enumerate(idle):
            if held is conn:
                del idle[i]
                break
        conn.close_nowait()


__all__ = ["PEER_IDLE_TIMEOUT", "PEER_MAX_IDLE", "PeerConnections"]

"""A request/reply connection for a thread without an event loop: a client's fast path.

:class:`~htc.wire.transport.Connection` needs an asyncio loop; a client that runs one on a
thread of its own pays two thread hand-offs per request (to the loop and back), which on a
2-core VM costs more than the request itself. :func:`connect` opens a plain blocking socket
to a daemon of a :class:`~htc.wire.transport.UnixTransport` instead; :class:`BlockingConnection`
sends the same frames and raises the same errors as ``Connection.request``, so a caller can
use either. Other transports (SSH) have no blocking form: :func:`connect` returns None and the
caller keeps its event loop.
"""

from __future__ import annotations

import socket
import time

from htc.wire import messages
from htc.wire.errors import ConnectionClosed, RequestTimeout, WireError
from htc.wire.framing import HEADER_SIZE, body_length, frame
from htc.wire.transport import DEFAULT_TIMEOUT, Transport, UnixTransport, checked_reply, unreachable

__all__ = ["BlockingConnection", "connect"]


class BlockingConnection:
    """Requests to one daemon over a blocking socket (not thread-safe: one caller at a time)."""

    def __init__(self, sock: socket.socket, label: str, max_frame: int):
        self._sock = sock
        self.label = label
        self.max_frame = max_frame
        self.closed = False

    def request(self, msg: messages.Message, *, timeout: float | None = DEFAULT_TIMEOUT,
                expect: type[messages.Message] | None = None) -> messages.Message:
        """Send ``msg`` and return the reply (as ``Connection.request``).

        Raises:
            RemoteError, WireError: as ``Connection.request``.
            ConnectionClosed: the daemon went away (the connection is closed).
            RequestTimeout: no whole reply within ``timeout`` s (the connection is closed: a
                late reply must not be read as the next request's).
        """
        if self.closed:
            raise ConnectionClosed(f"the connection to {self.label} is closed")
        data = frame(messages.encode(msg), self.max_frame)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self._sock.settimeout(timeout)
            self._sock.sendall(data)
            length = body_length(self._read(HEADER_SIZE, deadline, msg), self.max_frame)
            body = self._read(length, deadline, msg)
        except TimeoutError:
            self.close()
            raise RequestTimeout(f"{self.label} did not answer {type(msg).__name__} within {timeout:g} s") from None
        except (ConnectionError, OSError) as exc:
            self.close()
            raise ConnectionClosed(f"connection to {self.label} broke: {exc}") from None
        except WireError:
            self.close()
            raise
        return checked_reply(self.label, msg, messages.decode(body), expect)

    def _read(self, n: int, deadline: float | None, msg: messages.Message) -> bytes:
        chunks, got = [], 0
        while got < n:
            if deadline is not None:
                self._sock.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = self._sock.recv(n - got)
            if not chunk:
                self.close()
                raise ConnectionClosed(f"{self.label} closed the connection instead of answering "
                                       f"{type(msg).__name__}; see its log")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks) if len(chunks) > 1 else chunks[0]

    def close(self) -> None:
        """Close the socket (idempotent)."""
        if not self.closed:
            self.closed = True
            self._sock.close()


def connect(transport: Transport, address: str, *, timeout: float | None = DEFAULT_TIMEOUT
            ) -> BlockingConnection | None:
    """A blocking connection to the daemon ``address`` (None: ``transport`` has no blocking form).

    Raises:
        DaemonUnreachable: nobody is listening there (is the pool running?).
        BadAddress: ``address`` is not a valid daemon name.
    """
    if not isinstance(transport, UnixTransport):
        return None
    path = transport.path_of(address)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.settimeout(timeout)
        sock.connect(str(path))
    except OSError as exc:
        sock.close()
        raise unreachable(address, path, exc, timeout) from None
    return BlockingConnection(sock, address, transport.max_frame)

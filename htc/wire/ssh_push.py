"""Messages handed to a callback as an SSH channel's bytes arrive, instead of read by a task.

Theory of operation
-------------------
A :class:`~htc.wire.transport.Connection` is read with ``await recv()``: asyncssh's stream
session buffers the channel's bytes and wakes the reading task, which takes the frame header and
the body out with two ``readexactly`` calls and decodes the message -- one more pass of the event
loop, a future and the stream's bookkeeping for every message. A reader that only ever waits for
the next message (the executor session's pump, :class:`htc.executors.remote.SessionChannel`)
can instead be *pushed* to: :meth:`SshConnection.push` takes the channel's data in the same
callback asyncssh delivers it in, splits it into frames (a length above the limit is refused
before its body is read, as by ``recv``), decodes and checks
each message (:func:`htc.wire.messages.decode`, as ``recv`` does) and calls ``deliver`` with it.
The stream's end -- EOF, a lost channel, a bad frame or message, or ``deliver`` raising -- is
reported once to ``ended`` with the exception ``recv`` would have raised, and nothing is
delivered after it.

The switch replaces three methods of asyncssh's stream session object (``data_received``,
``eof_received``, ``connection_lost``) and first takes what its buffer already holds, so no byte
is lost or reordered. It uses attributes asyncssh does not document (the session's receive
buffer); when they are missing (another asyncssh), :meth:`SshConnection.push` says so and the
caller goes on reading with ``recv``. After a push, ``recv`` must not be called.
"""

from __future__ import annotations

from collections.abc import Callable

from htc.wire import messages
from htc.wire.errors import ConnectionClosed
from htc.wire.framing import HEADER_SIZE, body_length
from htc.wire.transport import Connection

__all__ = ["SshConnection"]


class SshConnection(Connection):
    """A :class:`~htc.wire.transport.Connection` over an asyncssh channel that can also push
    its messages to a callback (module docstring)."""

    def push(self, deliver: Callable[[messages.Message], None],
             ended: Callable[[BaseException], None]) -> bool:
        """From now on call ``deliver`` with each message as it arrives, and ``ended`` once with
        the exception that ended the stream (``ConnectionClosed``, a ``WireError``, or what
        ``deliver`` raised). Runs on the connection's loop.

        Returns:
            False when this asyncssh cannot push (nothing changed: read with ``recv``).
        """
        session = getattr(getattr(self._reader, "_reader", None), "_session", None)
        buffers = getattr(session, "_recv_buf", None)
        if not isinstance(buffers, dict) or None not in buffers or not hasattr(session, "_recv_buf_len"):
            return False
        buffer = bytearray()
        limit = self.max_frame
        done = False
        label = self.label

        def finish(exc: BaseException) -> None:
            nonlocal done
            if not done:
                done = True
                ended(exc)

        def data_received(data: bytes, datatype) -> None:
            if done or datatype is not None:
                return  # (extended data, stderr: none on a daemon's channel)
            buffer.extend(data)
            try:
                # Each frame as it completes, so that the messages ahead of a bad frame are
                # delivered before the error (as recv gives them).
                while len(buffer) >= HEADER_SIZE and not done:
                    end = HEADER_SIZE + body_length(bytes(buffer[:HEADER_SIZE]), limit)
                    if len(buffer) < end:
                        return
                    body = bytes(buffer[HEADER_SIZE:end])
                    del buffer[:end]
                    deliver(messages.decode(body))
            except Exception as exc:  # noqa: BLE001 - a bad frame or message, or deliver's error, ends the stream
                finish(exc)

        def eof_received() -> bool:
            finish(ConnectionClosed(f"{label} closed the connection"))
            return False

        lost = session.connection_lost

        def connection_lost(exc: Exception | None) -> None:
            lost(exc)
            finish(ConnectionClosed(f"connection to {label} broke: {exc}" if exc else f"{label} closed the connection"))

        held = buffers[None]
        buffers[None] = []
        session._recv_buf_len = 0
        session.data_received = data_received
        session.eof_received = eof_received
        session.connection_lost = connection_lost
        resume = getattr(session, "_maybe_resume_reading", None)
        if resume is not None:
            resume()  # (paused while its buffer was full: it is empty now)
        for item in held:
            if isinstance(item, Exception):  # a lost channel, queued for the reader
                finish(ConnectionClosed(f"connection to {label} broke: {item}"))
            else:
                data_received(item, None)
        if getattr(session, "_eof_received", False):
            finish(ConnectionClosed(f"{label} closed the connection"))
        return True


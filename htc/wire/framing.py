"""Length-prefixed frames: how one message's bytes are delimited on a byte stream.

A frame is a 4-byte big-endian unsigned length followed by that many bytes of body (one
MessagePack-encoded message, see :mod:`htc.wire.messages`)::

    +--------+--------+--------+--------+=========================+
    |        body length (uint32, BE)   |  body (length bytes)     |
    +--------+--------+--------+--------+=========================+

The receiver refuses a length above its limit *before* reading the body, so a peer cannot make
a daemon allocate gigabytes by sending four bytes.  After a refused or truncated frame the stream
is out of step and the connection must be closed; nothing here tries to resynchronise.

Two readers share these rules: :func:`read_frame` awaits any stream with ``readexactly`` (an
asyncio ``StreamReader``, an asyncssh ``SSHReader``), and :class:`FrameDecoder` is the sans-IO
version for code that is handed bytes (protocol callbacks, tests).
"""

from __future__ import annotations

import asyncio
import struct
from typing import Protocol

from htc.wire.errors import FrameTooLarge, WireError

_HEADER = struct.Struct(">I")
HEADER_SIZE = _HEADER.size

#: default limit on a frame body: large enough for a query answering with tens of thousands of
#: slot ads, small enough that a garbage length cannot exhaust memory
DEFAULT_MAX_FRAME = 64 * 1024 * 1024


def frame(body: bytes, max_size: int = DEFAULT_MAX_FRAME) -> bytes:
    """Return ``body`` with its length header.

    Args:
        body: the encoded message.
        max_size: the largest body the receiver accepts.

    Returns:
        The bytes to write on the stream.

    Raises:
        FrameTooLarge: the body is longer than ``max_size``; send less (a smaller query, a limit).
    """
    if len(body) > max_size:
        raise FrameTooLarge(
            f"refusing to send a {len(body)}-byte frame: the limit is {max_size} bytes; "
            "ask for fewer ads (a constraint, a projection or a limit)"
        )
    return _HEADER.pack(len(body)) + body


def _check_length(length: int, max_size: int) -> None:
    if length > max_size:
        raise FrameTooLarge(
            f"peer announced a {length}-byte frame, above the limit of {max_size} bytes; "
            "closing the connection"
        )


def body_length(header: bytes, max_size: int = DEFAULT_MAX_FRAME) -> int:
    """The body length a frame's ``HEADER_SIZE``-byte header announces.

    Raises:
        FrameTooLarge: it is above ``max_size``.
    """
    (length,) = _HEADER.unpack(header)
    _check_length(length, max_size)
    return length


class ByteReader(Protocol):
    """The one method :func:`read_frame` needs from a stream."""

    async def readexactly(self, n: int) -> bytes: ...


async def read_frame(reader: ByteReader, max_size: int = DEFAULT_MAX_FRAME) -> bytes | None:
    """Read one frame body from ``reader``.

    Args:
        reader: a stream with ``readexactly``.
        max_size: the largest body accepted.

    Returns:
        The body, or None if the stream ended cleanly between frames.

    Raises:
        FrameTooLarge: the announced length is above ``max_size``.
        WireError: the stream ended inside a frame.
    """
    try:
        header = await reader.readexactly(HEADER_SIZE)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise WireError(f"stream ended inside a frame header ({len(exc.partial)} of 4 bytes)") from None
    (length,) = _HEADER.unpack(header)
    _check_length(length, max_size)
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise WireError(
            f"stream ended inside a frame: got {len(exc.partial)} of {length} announced bytes"
        ) from None


class FrameDecoder:
    """Sans-IO frame splitter: feed it bytes, take complete bodies out.

    Args:
        max_size: the largest body accepted.
    """

    def __init__(self, max_size: int = DEFAULT_MAX_FRAME):
        self.max_size = max_size
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return every body now complete, in order.

        Raises:
            FrameTooLarge: a header announced a body above the limit (close the stream).
        """
        self._buffer += data
        bodies = []
        while len(self._buffer) >= HEADER_SIZE:
            (length,) = _HEADER.unpack_from(self._buffer)
            _check_length(length, self.max_size)
            end = HEADER_SIZE + length
            if len(self._buffer) < end:
                break
            bodies.append(bytes(self._buffer[HEADER_SIZE:end]))
            del self._buffer[:end]
        return bodies

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a complete frame."""
        return len(self._buffer)

    def close(self) -> None:
        """Declare the stream ended.

        Raises:
            WireError: the stream ended inside a frame.
        """
        if self._buffer:
            raise WireError(f"stream ended inside a frame ({len(self._buffer)} bytes left over)")

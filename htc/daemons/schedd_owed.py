"""Call lane results the schedd owes to disk: kept in the job queue until they are files.

Theory of operation
-------------------
A lane call's result comes to the schedd as bytes in a :class:`~htc.wire.messages.CallsDone`,
and the transaction that ends the call (its TERMINATED, its history entry) commits before the
service writes the files (:class:`~htc.daemons.schedd_callfiles.WriteCallFiles`, at the end
of the loop's turn). A schedd killed between the two would leave a job in the history whose
result exists nowhere. So the same transaction keeps the writes in the queue's outbox
(:meth:`htc.jobqueue.JobQueue.owe`, see :mod:`htc.jobqueue.promises`): a result the queue
counts as delivered is in the queue file, as durable as the call's end.

The core returns the :class:`WriteCallFiles` actions followed by :class:`Owed`, naming the
outbox entry; the service writes the files and then drops the entry (``JobQueue.paid``). A
schedd that starts writes every entry its predecessor left (:func:`owed_writes`) before it
serves anybody: writing a result twice writes the same bytes, and a call file already
turned into its result is simply not there to reuse.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from htc.daemons import core as c
from htc.daemons.schedd_callfiles import WriteCallFiles

__all__ = ["Owed", "encode_writes", "owed_writes"]

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[WriteCallFiles])


@dataclass(frozen=True)
class Owed(c.Action):
    """The outbox entry ``seq`` is paid once the :class:`WriteCallFiles` before it are written."""

    seq: int


def encode_writes(writes: list[WriteCallFiles]) -> bytes:
    """The outbox entry for ``writes`` (MessagePack, every field of each action)."""
    return _encoder.encode(writes)


def owed_writes(queue) -> tuple[list[c.Action], int]:
    """Start-up: the writes every outbox entry of ``queue`` still owes, each entry's followed by
    its :class:`Owed` (an empty list: nothing owed); and how many entries could not be read
    (dropped: the caller logs them)."""
    out: list[c.Action] = []
    unreadable = 0
    for seq, entry in queue.owed():
        try:
            out += _decoder.decode(entry)
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError):
            unreadable += 1
        out.append(Owed(seq))
    return out, unreadable

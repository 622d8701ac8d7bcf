"""Files and user-log events the schedd owes to disk: kept in the job queue until written.

Theory of operation
-------------------
The core changes the job queue and commits before the service writes what the change
produced: a lane call's result files (:class:`~htc.daemons.schedd.events.WriteCallFiles`)
and the user-log events that announce it (:class:`~htc.daemons.schedd.events.WriteUserLog`:
a job's TERMINATED, JOB_ABORTED, HELD...), at the end of the loop's turn. A schedd killed
between the two would leave a job in the history whose result exists nowhere and whose log
never says it ended -- ``htc wait`` and ``htcondor2.JobEventLog`` would wait forever. So the
transaction of the change also keeps those writes in the queue's outbox (:func:`owe`, through
:meth:`htc.jobqueue.JobQueue.owe`, see :mod:`htc.jobqueue.promises`): what the queue counts
as done is in the queue file, as durable as the change itself.

:func:`owe` returns the write actions followed by :class:`Owed`, naming the outbox entry --
one entry for all the files and events of a lane's batch, so that the lane's fast path pays
one row. The service writes the files, then the events, then drops the entry
(``JobQueue.paid``). A schedd that starts writes every entry its predecessor left
(:func:`owed_writes`) before it serves anybody.

Repeats: an entry is dropped only after its writes -- by the next commit of the queue, whatever
it is for, or within :data:`~htc.daemons.schedd.service.PAY_WITHIN` (a lone executor call
then costs two commits, not four) -- so a schedd killed between the writes and the drop
meets the entry again when it starts. A result file is written again, the same bytes (a
call file already turned into its result is simply not there to reuse). The user-log events
come back marked ``replayed``, and the service writes only those the log's end does not
hold already (:func:`unwritten`): an entry's events went into the log in one write, in
order, so finding their text there, byte for byte (job ids, times to the second and all),
means they were written (and an identical event of the same job from an earlier run, in the
same second, is told apart by what follows it). Events whose write was lost are written: no
event is written twice, and in doubt one is written twice rather than lost.

An entry is MessagePack: ``{"files": [WriteCallFiles...], "logs": [[path, owner,
[[event number, fields], ...]], ...]}``; entries from before the events were kept are a bare
list of ``WriteCallFiles`` and are still read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import msgspec

from htc.daemons import core as c
from htc.daemons.schedd.events import Owed, WriteCallFiles, WriteUserLog
from htc.eventlog import events as ev
from htc.eventlog.writer import format_event

__all__ = ["Owed", "encode_writes", "owe", "owed_writes", "unwritten"]

_encoder = msgspec.msgpack.Encoder()


def encode_writes(writes: Sequence[WriteCallFiles], logs: Sequence[WriteUserLog] = ()) -> bytes:
    """The outbox entry for ``writes`` and ``logs`` (MessagePack, every field of each)."""
    return _encoder.encode({
        "files": writes,
        "logs": [(log.path, log.owner, [(int(event.type), event) for event in log.events]) for log in logs],
    })


def owe(queue, actions: Iterable[c.Action]) -> list[c.Action]:
    """Inside the transaction of the change they go with: keep the :class:`WriteCallFiles` and
    :class:`WriteUserLog` of ``actions`` in one outbox entry of ``queue``; returns ``actions``
    followed by its :class:`Owed` (nothing to keep: ``actions`` alone)."""
    actions = list(actions)
    writes = [a for a in actions if isinstance(a, WriteCallFiles)]
    logs = [a for a in actions if isinstance(a, WriteUserLog)]
    if not writes and not logs:
        return actions
    return [*actions, Owed(queue.owe(encode_writes(writes, logs)))]


def decode_entry(entry: bytes) -> list[c.Action]:
    """The writes of one outbox entry: its call files, then its user-log events.

    Raises:
        msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError, KeyError: not an
            entry this schedd can read.
    """
    data = msgspec.msgpack.decode(entry)
    if isinstance(data, list):  # written before user-log events were kept
        return list(msgspec.convert(data, list[WriteCallFiles]))
    out: list[c.Action] = list(msgspec.convert(data["files"], list[WriteCallFiles]))
    for path, owner, events in data["logs"]:
        out.append(WriteUserLog(path, tuple(msgspec.convert(fields, ev.EVENT_CLASSES[ev.EventType(number)])
                                            for number, fields in events), owner, replayed=True))
    return out


def owed_writes(queue) -> tuple[list[c.Action], int]:
    """Start-up: the writes every outbox entry of ``queue`` still owes, each entry's followed by
    its :class:`Owed` (an empty list: nothing owed); and how many entries could not be read
    (dropped: the caller logs them)."""
    out: list[c.Action] = []
    unreadable = 0
    for seq, entry in queue.owed():
        try:
            out += decode_entry(entry)
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError, ValueError, KeyError):
            unreadable += 1
        out.append(Owed(seq))
    return out, unreadable


#: an event's first line in a user log: its number and its job
_HEADER = re.compile(rb"^\d{3} \((\d+)\.(\d+)\.\d+\) ", re.MULTILINE)


def unwritten(actions: Sequence[WriteUserLog], tail: bytes) -> list[tuple[ev.Event, ...]]:
    """Of the replayed writes ``actions`` to one log (in the order of their entries), the
    events each still has to write, given ``tail``, the end of that log.

    An entry's events for a log went into it in one write, after those of the entries before
    it, and a crash loses the writes of the last entries, never of one in the middle. So, from
    the last entry back: its events were written when their text, as the schedd writes it,
    lies in one piece before the matches of the entries after it, and no other event of their
    jobs follows it (but those matches): an identical event of the same job from an earlier
    run, in the same second, is then not taken for this one. Not found so: all of its events
    are written (an entry is written whole or not at all); in doubt, an event is written twice
    rather than lost."""
    out: list[tuple[ev.Event, ...]] = [action.events for action in actions]
    end = len(tail)
    matched: list[tuple[int, int]] = []
    for k in range(len(actions) - 1, -1, -1):
        action = actions[k]
        if not action.replayed or not action.events:
            continue
        text = "".join(format_event(event) for event in action.events).encode("utf-8")
        at = tail.rfind(text, 0, end)
        if at < 0:
            continue
        jobs = {(event.cluster, event.proc) for event in action.events}
        later = (found for found in _HEADER.finditer(tail, at + len(text))
                 if (int(found.group(1)), int(found.group(2))) in jobs)
        if any(not any(a <= found.start() < b for a, b in matched) for found in later):
            continue  # its job has events after it that no later entry wrote: another run's
        out[k] = ()
        matched.append((at, at + len(text)))
        end = at
    return out

"""How a read outside a transaction knows its cached cluster ads are still the file's.

Theory of operation
-------------------
Reads hand out :class:`~htc.jobqueue.ads.JobAd` views over a per-cluster cache of parsed
cluster ads (``JobQueue._clusters``). Another connection -- another process -- may change the
file between two reads, so a read outside a transaction first asks sqlite's ``PRAGMA
data_version`` (a number that moves when another connection commits) and drops the cache when
it moved; a transaction asks once, under its write lock (:meth:`JobQueue.transaction`).

That question is one SQL statement, and a busy schedd reads the queue many times in one turn
of its loop (every job of a burst it submits, say) while nothing else writes the file: the
schedd is the queue's only writer while it runs. Inside :meth:`QueueReads.one_look` the first
read asks and the others of the same thread trust its answer, as if the block's reads were
one. A commit of another process in the middle of the block is seen by the block's next
transaction, or by the first read after it -- as a commit just after a read always was: a
read outside a transaction was never atomic with the next one.

The block's reads of one job by its id (``get_job``) also keep the job's row for the next
read of the same job in the block: the schedd reads a job it is starting or ending several
times in one turn. Every transaction -- every write of this queue -- starts and ends without
rows, and a read that asks ``data_version`` (the block's first, or any read outside a block)
drops them, so a kept row is never older than the block's last write or its look at the file.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator

from htc.jobqueue.store import translate_errors


class QueueReads:
    """The reading half of ``JobQueue``'s cache checks (it relies on the queue's connection and lock)."""

    _looking: int = 0  # depth of one_look blocks (of the thread in _looker)
    _looker: int | None = None
    _looked: bool = False  # a read of the current one_look block asked data_version

    @contextlib.contextmanager
    def one_look(self) -> Iterator[None]:
        """Reads of this thread inside the block ask whether another process changed the file
        once, at the first (see the module docstring): for one turn of a daemon's loop.
        Blocks nest; another thread's reads meanwhile ask as usual."""
        me = threading.get_ident()
        with self._lock:
            mine = not self._looking or self._looker == me
            if mine:
                self._looking += 1
                self._looker = me
        if not mine:
            yield  # another thread's block holds the flag: this one's reads ask as usual
            return
        try:
            yield
        finally:
            with self._lock:
                self._looking -= 1
                if not self._looking:
                    self._looker, self._looked = None, False

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._lock, translate_errors(self.path):
            if not self._depth:
                mine = self._looking and self._looker == threading.get_ident()
                if not (mine and self._looked):
                    if self._rows:
                        self._rows.clear()  # the job rows of an earlier look (_load): read again
                    version = self._conn.execute("PRAGMA data_version").fetchone()[0]
                    if version != self._data_version:
                        self._clusters.clear()  # another process changed the queue
                        self._data_version = version
                    self._looked = mine
            yield self._conn


__all__ = ["QueueReads"]

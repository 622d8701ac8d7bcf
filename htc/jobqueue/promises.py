"""What the queue remembers beyond jobs: submissions already answered, and results owed to disk.

Theory of operation
-------------------
Two small tables of the queue's file (see :mod:`htc.jobqueue.store`) make two promises of the
schedd hold across a crash. Both are written in the same transaction as the change they go
with, so they are exactly as durable as it is.

**Submissions** (``submissions``): a client may name a submission (``Submit.submission_id``,
chosen by the client, unique per submission). The cluster it made is recorded under
``(owner, submission id)`` together with a digest of what was submitted, in the cluster's
own transaction. When the reply is lost and the client sends the same Submit again -- to the
same schedd, or to one restarted after a crash -- :meth:`QueuePromises.find_submission` finds
the cluster and the schedd answers the original ``SubmitReply`` without queueing anything.
The table keeps submissions for :data:`SUBMISSION_LIFETIME` seconds and at most
:data:`SUBMISSION_LIMIT` of them (the oldest go first), pruned as new ones arrive: a retry
comes seconds or minutes after its first try, not days.

**Results and events owed to disk** (``outbox``): a call lane's results arrive at the schedd
as bytes (:class:`~htc.wire.messages.CallsDone`) and become files in the call's ``Iwd`` only
after the transaction that ends the calls has committed (the schedd's service writes them at
the end of its turn), and so do the user-log events of every change of a job (its end, a
removal, a hold...). So that a crash in between cannot lose a result the queue already counts
as delivered, or the TERMINATED event that tells a job's log it ended, they go into the
outbox in that same transaction
(:meth:`QueuePromises.owe`); the service takes the entry out once the files are written
(:meth:`QueuePromises.paid`; with ``later=True`` the deletion rides on the next transaction's
commit instead of making one of its own -- the schedd's way, since a schedd that starts writes
again only the user-log events its predecessor's log does not hold: :mod:`htc.daemons.schedd.owed`),
and a schedd that starts writes whatever its predecessor still owed (:meth:`QueuePromises.owed`). An entry is opaque bytes to the queue (the schedd encodes
it); it usually lives for one turn of the schedd's loop.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

#: seconds a submission id is remembered
SUBMISSION_LIFETIME = 7 * 24 * 3600.0
#: at most this many submission ids are remembered (the newest)
SUBMISSION_LIMIT = 100_000

#: the tables this module keeps (created in an older queue file when it is opened)
TABLES = """
CREATE TABLE IF NOT EXISTS submissions (
    owner          TEXT NOT NULL,
    submission_id  TEXT NOT NULL,
    cluster_id     INTEGER NOT NULL,
    num_procs      INTEGER NOT NULL,
    digest         TEXT NOT NULL,        -- of what was submitted: the same id for other jobs is refused
    created        REAL NOT NULL,
    PRIMARY KEY (owner, submission_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS submissions_by_time ON submissions (created);

CREATE TABLE IF NOT EXISTS outbox (
    seq    INTEGER PRIMARY KEY,
    entry  BLOB NOT NULL                 -- what the schedd still has to write (its own encoding)
);
"""
TABLE_NAMES = ("submissions", "outbox")
#: the submissions table's size and oldest time are read again after this many submissions
_STATS_EVERY = 1024
#: outbox entries one DELETE takes out (sqlite allows 32,766 parameters a statement)
_PAID_PER_STATEMENT = 500


def submission_digest(parts: Iterable[str]) -> str:
    """A digest of a submission's texts (the cluster ad, then each proc ad)."""
    h = hashlib.blake2b(digest_size=16)
    for text in parts:
        data = text.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


class QueuePromises:
    """Submissions and owed results (mixed into :class:`~htc.jobqueue.queue.JobQueue`)."""

    #: [rows, oldest created, submissions remembered since read] of the submissions table
    _submission_stats: list | None = None

    # -- submissions ------------------------------------------------------------------------

    def find_submission(self, owner: str, submission_id: str) -> tuple[int, int, str] | None:
        """The ``(cluster_id, num_procs, digest)`` of ``owner``'s submission of that id (None: none
        is remembered)."""
        with self._reading() as conn:
            row = conn.execute("SELECT cluster_id, num_procs, digest FROM submissions "
                               "WHERE owner = ? AND submission_id = ?", (owner, submission_id)).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def remember_submission(self, owner: str, submission_id: str, cluster_id: int, num_procs: int, digest: str,
                            *, now: float) -> None:
        """Record a submission in the current transaction (the cluster's own) and forget the
        ones past :data:`SUBMISSION_LIFETIME` or beyond :data:`SUBMISSION_LIMIT`."""
        with self.transaction(savepoint=False):
            conn = self._conn
            conn.execute("INSERT OR REPLACE INTO submissions (owner, submission_id, cluster_id, num_procs, digest, "
                         "created) VALUES (?, ?, ?, ?, ?, ?)",
                         (owner, submission_id, cluster_id, num_procs, digest, now))
            # The table's size and oldest time are known (read once, then counted along), so
            # that a submit prunes only when something is due: one statement per submit, where
            # asking by age and by count took three, the count's an index walk of
            # SUBMISSION_LIMIT entries once the table is full. The figures are read again
            # every _STATS_EVERY submissions (a rolled-back transaction leaves them off).
            stats = self._submission_stats
            if stats is None or stats[2] >= _STATS_EVERY:
                stats = self._submission_stats = self._read_submission_stats()
            else:
                stats[0] += 1
                stats[1] = min(stats[1], now)
                stats[2] += 1
            if stats[1] < now - SUBMISSION_LIFETIME:
                conn.execute("DELETE FROM submissions WHERE created < ?", (now - SUBMISSION_LIFETIME,))
                stats = self._submission_stats = self._read_submission_stats()
            if stats[0] > SUBMISSION_LIMIT:
                edge = conn.execute("SELECT created FROM submissions ORDER BY created DESC LIMIT 1 OFFSET ?",
                                    (SUBMISSION_LIMIT,)).fetchone()
                if edge is not None:
                    conn.execute("DELETE FROM submissions WHERE created <= ?", (edge[0],))
                self._submission_stats = self._read_submission_stats()

    def _read_submission_stats(self) -> list:
        """``[rows, oldest created, submissions since]`` of the submissions table."""
        rows, oldest = self._conn.execute("SELECT count(*), min(created) FROM submissions").fetchone()
        return [rows, float("inf") if oldest is None else oldest, 0]

    # -- results and user-log events owed to disk ----------------------------------------------

    def owe(self, entry: bytes) -> int:
        """Keep ``entry`` in the current transaction until :meth:`paid`; returns its number."""
        with self.transaction(savepoint=False):
            return self._conn.execute("INSERT INTO outbox (entry) VALUES (?)", (entry,)).lastrowid

    def owed(self) -> list[tuple[int, bytes]]:
        """Every entry not yet paid, oldest first."""
        with self._reading() as conn:
            later = set(self._paid_later)
            return [(seq, bytes(entry)) for seq, entry in conn.execute("SELECT seq, entry FROM outbox ORDER BY seq")
                    if seq not in later]

    def paid(self, seqs: Sequence[int], *, later: bool = False) -> None:
        """The entries are written: forget them (a commit without an fsync of its own: should it
        be lost, the entries are written once more: the same file bytes, and the same user-log
        events a second time).

        ``later``: no commit of its own; the next transaction's commit takes them out (a busy
        schedd's next turn makes one anyway), or :meth:`pay_now`. Until then a crash writes
        them once more, as above.
        """
        if not seqs:
            return
        with self._lock:
            self._paid_later.extend(seqs)
        if not later:
            self.pay_now()

    def pay_now(self) -> None:
        """Commit the entries :meth:`paid` left for a later commit (nothing when none wait).

        Outside a transaction this is one statement, sqlite's own transaction around it (no
        BEGIN, no cache check, no COMMIT of ours: the schedd takes written entries out this way
        when no commit of its own came within a second); inside one, the commit of the
        outermost block takes them out."""
        with self._lock:
            if not self._paid_later:
                return
            if self._depth:
                return  # the running transaction's commit takes them out (_commit)
            from htc.jobqueue.store import translate_errors  # (store imports this module)

            n = len(self._paid_later)
            with translate_errors(self.path):
                self._delete_paid(n)
            del self._paid_later[:n]
            self._unsynced = True
            self._commits += 1

    def _delete_paid(self, n: int) -> None:
        """DELETE the first ``n`` entries paid later, in the statements the limit on a
        statement's parameters allows (one, but for thousands of entries)."""
        seqs = self._paid_later
        for start in range(0, n, _PAID_PER_STATEMENT):
            chunk = seqs[start:min(n, start + _PAID_PER_STATEMENT)]
            if len(chunk) == 1:
                self._conn.execute("DELETE FROM outbox WHERE seq = ?", chunk)
            else:
                self._conn.execute(f"DELETE FROM outbox WHERE seq IN ({','.join('?' * len(chunk))})", chunk)

    def _commit(self) -> None:
        """COMMIT the outermost transaction, deleting in it the entries paid later (they stay
        on the list should the commit fail: the transaction is rolled back), and writing the
        history rows of the jobs it moved there (:mod:`htc.jobqueue.history`)."""
        self._flush_history()
        n = len(self._paid_later)
        if n:
            self._delete_paid(n)
        self._conn.execute("COMMIT")
        del self._paid_later[:n]

    @property
    def paid_later(self) -> int:
        """How many paid entries wait for a commit to take them out."""
        return len(self._paid_later)

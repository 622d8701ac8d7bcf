"""A Submit costs the schedd one fsync, also when a kept claim starts the new job at once (a DAG
chain's next node): the cluster's commit is made durable by the start's durable commit, or by a
sync when nothing starts -- always before the SubmitReply and the SUBMIT event go out."""

from __future__ import annotations

import contextlib

from htc.daemons import core as c
from htc.jobqueue import JobQueue, JobStatus
from htc.wire import messages as m
from tests.unit.test_schedd_core import Harness, job, run_first_job


class FsyncCount:
    """Counts the queue's fsyncs: outermost commits made with ``synchronous = FULL`` (sqlite
    fsyncs the WAL at them), and syncs that had something to do."""

    def __init__(self, queue: JobQueue):
        self.queue = queue
        self.fsyncs = 0
        inner, inner_sync = queue.transaction, queue.sync

        @contextlib.contextmanager
        def transaction(*, durable: bool = True, savepoint: bool = True):
            outermost = queue._depth == 0
            with inner(durable=durable, savepoint=savepoint):
                yield
                full = queue._conn.execute("PRAGMA synchronous").fetchone()[0] >= 2   # FULL or EXTRA
            self.fsyncs += outermost and full

        def sync() -> None:
            self.fsyncs += queue._unsynced
            inner_sync()

        queue.transaction, queue.sync = transaction, sync


def _submit(h: Harness, fsyncs: FsyncCount, text: str) -> tuple[int, list[c.Action]]:
    before, count = len(h.actions), fsyncs.fsyncs
    h.submit(text)
    out = h.actions[before:]
    assert any(isinstance(a, c.Reply) and isinstance(a.msg, m.SubmitReply) for a in out)
    assert not h.queue._unsynced, "the cluster must be durable before the reply goes out"
    return fsyncs.fsyncs - count, out


def test_a_submit_is_one_fsync_with_or_without_a_kept_claim_starting_it(tmp_path):
    h = Harness(JobQueue.open(str(tmp_path / "job_queue.db")))
    fsyncs = FsyncCount(h.queue)
    h.start()
    spent, _ = _submit(h, fsyncs, job("keep_claim_idle = 20"))
    assert spent == 1          # nothing to start it on: the sync made it durable
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    h.exited(claim_id, "1.0", exit_code=0)
    spent, out = _submit(h, fsyncs, job())   # the kept claim starts it within the same request
    assert h.calls(m.ActivateClaim, out) and h.status(2) is JobStatus.RUNNING
    assert spent == 1, f"a submit that starts its job on a kept claim cost {spent} fsyncs"

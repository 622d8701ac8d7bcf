"""A real schedd under a real master: the job queue over the wire, with no job running yet.

The :class:`~poolutil.Pool` starts ``python -m htc.daemons master`` in a temporary HTC_HOME and
guarantees that no process it started survives the test, even when an assertion fails. Waiting
is for events -- a daemon answering, an event in a user log read by ``htcondor2.JobEventLog`` --
never for a fixed time.
"""

from __future__ import annotations

import socket
import struct

import htcondor2
import msgspec
import pytest

from htc.client import query_collector
from htc.config.hostname import full_hostname
from htc.wire import messages as m
from htc.wire.errors import RemoteError
from poolutil import Pool, echo_job, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pool():
    p = Pool()
    try:
        yield p.start()
    finally:
        p.stop()


def test_submit_query_and_act_over_the_wire(pool):
    reply = pool.submit(echo_job(pool, queue="queue 3"))
    cluster = reply.cluster_id
    assert reply.num_procs == 3
    ads = pool.jobs(f"ClusterId == {cluster}", "ProcId", "Args", "JobStatus", "Owner")
    assert [(a["ProcId"], a["Args"], a["JobStatus"]) for a in ads] == [(p, f"{cluster}.{p}", 1) for p in range(3)]
    assert pool.send(m.ActOnJobs(action=m.JobAction.Hold, ids=(f"{cluster}.1",), reason="by test")).success == 1
    assert pool.send(m.EditJobs(attributes={"JobPrio": "7"}, ids=(f"{cluster}.2",))).matched == 1
    assert pool.send(m.ActOnJobs(action=m.JobAction.Remove, ids=(f"{cluster}.0",))).success == 1
    events = pool.log_events(pool.work / f"job.{cluster}.log", 6)
    kinds = [(e.type, e.proc) for e in events]
    assert kinds == [(htcondor2.JobEventType.SUBMIT, 0), (htcondor2.JobEventType.SUBMIT, 1),
                     (htcondor2.JobEventType.SUBMIT, 2), (htcondor2.JobEventType.JOB_HELD, 1),
                     (htcondor2.JobEventType.ATTRIBUTE_UPDATE, 2), (htcondor2.JobEventType.JOB_ABORTED, 0)]
    assert events[3]["HoldReason"] == "by test" and events[3]["HoldReasonCode"] == 1
    # The submitter's ad reaches the collector with its counts.
    def submitter():
        ads = query_collector(m.AdType.Submitter, transport=pool.transport, timeout=5)
        return [a for a in ads if a.get("IdleJobs") == 1 and a.get("HeldJobs") == 1]
    [ad] = wait_for(submitter, what="the Submitter ad")
    assert ad["ScheddName"] == full_hostname() and ad["MyAddress"] == "schedd"
    # History is the queue file's history table, readable without the schedd.
    from htc.client import history
    rows = history(f"ClusterId == {cluster}", path=pool.home / "spool" / "job_queue.db")
    assert [r["ProcId"] for r in rows] == [0] and rows[0]["JobStatus"] == 3


QUEUE_VIEW = ("ClusterId", "ProcId", "JobStatus", "Args", "Owner", "QDate", "JobPrio", "HoldReason")


def queue_snapshot(pool: Pool) -> list[str]:
    """Every job of the queue, as the attributes a user sees (the queue "intact" means these)."""
    return [str(ad) for ad in pool.jobs("", *QUEUE_VIEW)]


def test_a_malformed_submit_file_gets_a_clear_error_and_queues_nothing(pool):
    pool.submit(echo_job(pool, queue="queue 2"))
    before = queue_snapshot(pool)
    with pytest.raises(RemoteError) as err:
        pool.submit("executable = /bin/echo\nrequest_memory = 12 XB\nqueue\n", filename="bad.sub")
    assert err.value.code == "bad_request"
    assert "submit file bad.sub" in err.value.remote_message and "request_memory" in err.value.remote_message
    with pytest.raises(RemoteError) as err:  # half-good: nothing of it may be queued
        pool.submit("executable = /bin/echo\nqueue 2\narguments = \"unterminated\nqueue\n", filename="half.sub")
    assert err.value.code == "bad_request" and "half.sub" in err.value.remote_message
    with pytest.raises(RemoteError, match="is not a valid ClassAd expression"):
        pool.send(m.QueryJobs(constraint="Owner == == 3"))
    with pytest.raises(RemoteError) as err:
        pool.send(m.Submit(cluster_ad="[ Cmd = ", proc_ads=("[]",)))
    assert err.value.code in ("bad_request", "malformed")
    assert queue_snapshot(pool) == before


def raw_request(path, payload: bytes) -> bytes | None:
    """Send bytes as they are; return the body of the one frame answered (None: closed unanswered)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        header = sock.recv(4, socket.MSG_WAITALL)
        if len(header) < 4:
            return None
        (size,) = struct.unpack(">I", header)
        return sock.recv(size, socket.MSG_WAITALL)


def test_malformed_wire_messages_get_errors_and_the_daemons_keep_serving_an_intact_queue(pool):
    pool.submit(echo_job(pool, queue="queue 2"))
    before = queue_snapshot(pool)
    schedd, collector = pool.home / "sockets" / "schedd.sock", pool.home / "sockets" / "collector.sock"

    def error(path, payload: bytes) -> m.ErrorReply:
        reply = m.decode(raw_request(path, payload))
        assert isinstance(reply, m.ErrorReply), reply
        return reply

    def framed(body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + body

    for path in (schedd, collector):
        assert error(path, framed(b"\xc1\xc1\xc1\xc1\xc1")).code == "malformed"
        assert error(path, framed(msgspec.msgpack.encode({"no": "type"}))).code == "malformed"
        assert error(path, struct.pack(">I", 1 << 30)).code == "too_large"  # over the frame size limit
        cut = error(path, struct.pack(">I", 100) + b"short")  # the sender stopped inside a frame
        assert cut.code == "malformed" and "got 5 of 100" in cut.message
    wrong = msgspec.msgpack.encode({"type": "ActOnJobs", "action": "Explode", "ids": ["1.0"]})
    assert "action" in error(schedd, framed(wrong)).message
    unknown = msgspec.msgpack.encode({"type": "QueryAds", "ad_type": "Machine"})
    assert error(schedd, framed(unknown)).code == "unknown_request"
    remove_all = msgspec.msgpack.encode({"type": "ActOnJobs", "action": "Remove", "constraint": "=="})
    assert error(schedd, framed(remove_all)).code == "bad_request"

    # Nothing changed, nothing restarted, and both still do their work.
    assert queue_snapshot(pool) == before
    assert pool.status("SCHEDD").restarts == 0 and pool.status("COLLECTOR").restarts == 0
    assert pool.submit(echo_job(pool)).num_procs == 1
    assert query_collector(m.AdType.Collector, transport=pool.transport, timeout=5)


def test_the_job_tools_library_works_against_the_real_schedd(pool, monkeypatch):
    from htc import client as tools

    monkeypatch.setenv("HTC_HOME", str(pool.home))
    result = tools.submit("executable = /bin/echo\narguments = hello\nqueue 2\n", cwd=pool.work,
                          transport=pool.transport)
    assert result.num_procs == 2
    ads = tools.query(f"ClusterId == {result.cluster_id}", ("ProcId", "Args"), transport=pool.transport)
    assert [(a["ProcId"], a["Args"]) for a in ads] == [(0, "hello"), (1, "hello")]
    done = tools.act("Hold", tools.parse_selection([str(result.cluster_id)]), transport=pool.transport)
    assert done.ok
    held = tools.query(f"ClusterId == {result.cluster_id} && JobStatus == 5", ("ProcId",), transport=pool.transport)
    assert len(held) == 2

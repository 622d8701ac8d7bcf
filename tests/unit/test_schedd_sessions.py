"""The schedd's side of an executor session for a client on another machine
(htc.daemons.schedd.sessions): what it pushes from the session's log and calls/ directory."""

from __future__ import annotations

import asyncio
import os

import pytest

from htc.daemons.schedd import sessions as s
from htc.wire import messages as m
from session_news import EXECUTE, TERMINATED, FakeConn


def session(tmp_path, log: bytes) -> s._Session:
    (tmp_path / "calls").mkdir()
    (tmp_path / "jobs.log").write_bytes(log)
    return s._Session(tmp_path, None, 0)


def push(service_session) -> list[m.Message]:
    conn = FakeConn()
    asyncio.run(s.SessionService(None)._push(conn, service_session))
    return conn.sent


def test_complete_events_end_at_their_dots_and_name_code_and_job():
    events = s.complete_events(EXECUTE + TERMINATED + b"001 (008.000.000) half an event")
    assert [(code, job) for _, code, job in events] == [(1, "7.0"), (5, "7.0")]
    assert events[-1][0] == len(EXECUTE + TERMINATED)


def test_an_ending_event_comes_after_its_calls_result_and_output(tmp_path):
    sess = session(tmp_path, EXECUTE + TERMINATED)
    sess.jobs["7.0"] = "abc"
    (tmp_path / "calls" / "abc.result").write_bytes(b"R" * (m.MAX_SESSION_CHUNK + 10))
    (tmp_path / "calls" / "abc.out").write_bytes(b"printed\n")
    sent = push(sess)
    chunks = [c for msg in sent for c in msg.chunks]
    assert [(c.name, c.first, c.last) for c in chunks] == [
        ("abc.result", True, False), ("abc.result", False, True), ("abc.out", True, True)]
    assert b"".join(c.data for c in chunks if c.name == "abc.result") == b"R" * (m.MAX_SESSION_CHUNK + 10)
    assert b"".join(msg.log for msg in sent) == EXECUTE + TERMINATED
    assert sess.offset == len(EXECUTE + TERMINATED)
    assert push(sess) == []  # nothing new


def test_an_ending_event_waits_for_its_result_and_for_the_clients_word_on_its_call(tmp_path, monkeypatch):
    monkeypatch.setattr(s, "QUIET_SECONDS", 0.0)  # (a start alone goes at once)
    sess = session(tmp_path, EXECUTE + TERMINATED)
    sent = push(sess)  # the job's call is not known yet: only what comes before its end goes
    assert [msg.log for msg in sent] == [EXECUTE] and sess.held_since is not None
    sess.jobs["7.0"] = "abc"
    assert push(sess) == []  # known, but its result is not written yet
    (tmp_path / "calls" / "abc.result").write_bytes(b"value")
    sent = push(sess)
    assert [(c.name, c.data) for msg in sent for c in msg.chunks] == [("abc.result", b"value")]
    assert sent[-1].log == TERMINATED and sess.held_since is None


def test_an_ending_event_without_a_result_goes_after_the_hold(tmp_path):
    sess = session(tmp_path, TERMINATED)
    assert push(sess) == []
    sess.held_since -= s.HOLD_SECONDS + 1
    sent = push(sess)
    assert [msg.log for msg in sent] == [TERMINATED] and not sent[0].chunks


SUBMIT = b"000 (007.000.000) 2026-11-28 03:59:59 Job submitted from host: <10.0.0.1:9618>\n...\n"


def test_a_submit_and_a_start_wait_a_little_to_go_with_the_calls_end(tmp_path):
    sess = session(tmp_path, SUBMIT + EXECUTE)
    sess.jobs["7.0"] = "abc"
    assert push(sess) == [] and sess.quiet_since is not None
    assert 0 < s._wait(sess, sess.quiet_since) <= s.QUIET_SECONDS + 1e-6  # (float sums of monotonic times)
    with open(tmp_path / "jobs.log", "ab") as log:
        log.write(TERMINATED)
    (tmp_path / "calls" / "abc.result").write_bytes(b"value")
    [news] = push(sess)  # all three events and the result in one message
    assert news.log == SUBMIT + EXECUTE + TERMINATED and [c.name for c in news.chunks] == ["abc.result"]
    assert sess.quiet_since is None


def test_a_start_goes_alone_once_it_has_waited(tmp_path):
    sess = session(tmp_path, SUBMIT + EXECUTE)
    assert push(sess) == []
    sess.quiet_since -= s.QUIET_SECONDS
    [news] = push(sess)
    assert news.log == SUBMIT + EXECUTE and sess.offset == len(SUBMIT + EXECUTE)


def test_call_files_are_written_whole_from_their_chunks_and_never_through_a_link(tmp_path):
    sess = session(tmp_path, b"")
    s._write_chunks(sess, (m.FileChunk(name="a.call", data=b"12", last=False), m.FileChunk(name="a.call", data=b"34",
                                                                                          first=False)))
    assert (tmp_path / "calls" / "a.call").read_bytes() == b"1234"
    os.symlink("/etc/passwd", tmp_path / "calls" / ".b.call.part")
    with pytest.raises(OSError, match="b.call"):
        s._write_chunks(sess, (m.FileChunk(name="b.call", data=b"x"),))
    assert not (tmp_path / "calls" / "b.call").exists()


class FakeService:
    """Answers the core's part of a SubmitCalls: what was asked, and whether the pickles were there."""

    def __init__(self, calls_dir):
        self.calls_dir = calls_dir
        self.asked: list[tuple[m.Message, object, bool]] = []

    def ask_core(self, msg, peer):
        self.asked.append((msg, peer, (self.calls_dir / "c1.call").exists()))
        reply = asyncio.get_running_loop().create_future()
        reply.set_result(m.SubmitReply(cluster_id=9, first_proc=0, num_procs=2))
        return reply


def test_submit_calls_writes_the_pickles_then_submits_and_follows_each_job_before_answering(tmp_path):
    sess = session(tmp_path, b"")
    service = FakeService(tmp_path / "calls")
    conn = FakeConn()
    request = m.SubmitCalls(chunks=(m.FileChunk(name="c1.call", data=b"p1"), m.FileChunk(name="c2.call", data=b"p2")),
                            cluster_ad='[Cmd = "x"]', proc_ads=('[HTCCallId = "c1"]', '[HTCCallId = "c2"]'),
                            calls=("c1", "c2"), submission_id="htcx-1")
    asyncio.run(s.SessionService(service)._answer(conn, sess, request, "the peer"))
    [(submit, peer, pickles_first)] = service.asked
    assert isinstance(submit, m.Submit) and submit.submission_id == "htcx-1" and submit.proc_ads == request.proc_ads
    assert peer == "the peer" and pickles_first
    assert sess.jobs == {"9.0": "c1", "9.1": "c2"}
    assert conn.sent == [m.SubmitReply(cluster_id=9, first_proc=0, num_procs=2)]


def test_submit_calls_needs_one_call_per_proc_ad():
    with pytest.raises(Exception, match="calls names 1 calls for 2 proc ads"):
        m.SubmitCalls(chunks=(), cluster_ad='[Cmd = "x"]', proc_ads=("[A = 1]", "[A = 2]"), calls=("c1",))


def test_the_log_stays_open_between_pushes_and_is_opened_again_when_replaced(tmp_path, monkeypatch):
    monkeypatch.setattr(s, "QUIET_SECONDS", 0.0)
    sess = session(tmp_path, EXECUTE)
    assert [msg.log for msg in push(sess)] == [EXECUTE]
    kept = sess.log_fd
    assert kept is not None
    with open(tmp_path / "jobs.log", "ab") as log:
        log.write(EXECUTE)
    assert [msg.log for msg in push(sess)] == [EXECUTE] and sess.log_fd == kept
    (tmp_path / "jobs.log").unlink()
    (tmp_path / "jobs.log").write_bytes(EXECUTE * 2 + TERMINATED)  # another file at the same path
    sess.jobs["7.0"] = "abc"
    (tmp_path / "calls" / "abc.result").write_bytes(b"value")
    assert [msg.log for msg in push(sess)] == [TERMINATED]
    sess.close()
    assert sess.log_fd is None

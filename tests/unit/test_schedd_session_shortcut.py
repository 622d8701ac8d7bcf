"""The schedd's shortcut for remote executor sessions (htc.daemons.schedd.sessions): what its
service wrote is told to the session, which then sends a call's outputs without opening them
again as the owner, and is woken at once by an event that ends something."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace

from htc.daemons import owner_files as ofs
from htc.daemons.schedd import sessions as s
from htc.daemons.schedd.events import WriteCallFiles
from htc.eventlog.events import EventType
from htc.wire import messages as m
from session_news import EXECUTE, TERMINATED, FakeConn


def served(tmp_path, log: bytes) -> tuple[s.SessionService, s._Session]:
    (tmp_path / "calls").mkdir()
    (tmp_path / "jobs.log").write_bytes(log)
    service = s.SessionService(None)
    sess = s._Session(tmp_path, None, 0)
    service._track(sess, True)
    return service, sess


def push(service: s.SessionService, sess: s._Session) -> list[m.Message]:
    conn = FakeConn()
    asyncio.run(service._push(conn, sess))
    return conn.sent


def event(kind: EventType):
    return SimpleNamespace(type=kind)


def test_told_outputs_go_with_the_calls_end_without_reading_its_files(tmp_path):
    service, sess = served(tmp_path, EXECUTE + TERMINATED)
    sess.jobs["7.0"] = "abc"
    # The files on disk say otherwise: what was told is what goes (and no .err is looked for).
    (tmp_path / "calls" / "abc.result").write_bytes(b"on disk")
    (tmp_path / "calls" / "abc.err").write_bytes(b"stale")
    service.written([WriteCallFiles(str(tmp_path / "calls"), (("abc.result", b"told"), ("abc.out", b"hi\n")))], {})
    [news] = push(service, sess)
    assert [(c.name, c.data) for c in news.chunks] == [("abc.result", b"told"), ("abc.out", b"hi\n")]
    assert news.log == EXECUTE + TERMINATED
    assert not sess.outputs and not sess.told and sess.outputs_bytes == 0  # forgotten once sent


def test_a_call_not_told_of_is_read_from_its_files(tmp_path):
    service, sess = served(tmp_path, TERMINATED)
    sess.jobs["7.0"] = "abc"
    (tmp_path / "calls" / "abc.result").write_bytes(b"on disk")
    service.written([WriteCallFiles(str(tmp_path / "elsewhere"), (("abc.result", b"told"),))], {})
    [news] = push(service, sess)
    assert [(c.name, c.data) for c in news.chunks] == [("abc.result", b"on disk")]


def test_a_result_bigger_than_a_chunk_is_not_kept_but_streamed_from_its_file(tmp_path):
    service, sess = served(tmp_path, TERMINATED)
    sess.jobs["7.0"] = "abc"
    big = b"R" * (m.MAX_SESSION_CHUNK + 1)
    (tmp_path / "calls" / "abc.result").write_bytes(big)
    service.written([WriteCallFiles(str(tmp_path / "calls"), (("abc.result", big),))], {})
    assert not sess.outputs
    sent = push(service, sess)
    assert b"".join(c.data for msg in sent for c in msg.chunks) == big


def test_kept_outputs_are_bounded_oldest_first(tmp_path, monkeypatch):
    monkeypatch.setattr(s, "_KEEP_BYTES", 10)
    service, sess = served(tmp_path, b"")
    calls = str(tmp_path / "calls")
    service.written([WriteCallFiles(calls, (("a.result", b"123456"),)), WriteCallFiles(calls, (("b.result", b"7890"),)),
                     WriteCallFiles(calls, (("c.result", b"x"),))], {})
    assert list(sess.outputs) == ["b.result", "c.result"] and sess.outputs_bytes == 5
    assert sess.take("a") is None and sess.take("c") == {"c.result": b"x"}


def test_an_ending_event_wakes_the_session_and_quiet_ones_do_not(tmp_path):
    service, sess = served(tmp_path, b"")
    kicks = []
    sess.kick = lambda: kicks.append(1)
    log = str(tmp_path / "jobs.log")
    service.written([], {(log, None): [event(EventType.SUBMIT), event(EventType.EXECUTE)]})
    assert kicks == []
    service.written([], {(log, None): [event(EventType.JOB_TERMINATED)], (str(tmp_path / "other.log"), None):
                         [event(EventType.JOB_TERMINATED)]})
    assert kicks == [1]
    service._track(sess, False)
    service.written([], {(log, None): [event(EventType.JOB_TERMINATED)]})
    assert kicks == [1] and not service._by_log and not service._by_calls


def test_the_owners_rights_are_taken_only_to_open_a_file(tmp_path, monkeypatch):
    taken = []

    @contextlib.contextmanager
    def acting_as(who):
        taken.append(who)
        yield

    monkeypatch.setattr(ofs, "acting_as", acting_as)
    service, sess = served(tmp_path, EXECUTE)
    sess.jobs["7.0"] = "abc"
    sess.quiet_since = -1e9  # (the start has waited)
    push(service, sess)
    assert len(taken) == 1  # the log's first open
    with open(tmp_path / "jobs.log", "ab") as log:
        log.write(TERMINATED)
    service.written([WriteCallFiles(str(tmp_path / "calls"), (("abc.result", b"told"),))], {})
    [news] = push(service, sess)
    assert news.log == TERMINATED and len(taken) == 1  # the log was open, the result told: no switch

"""User-log events are kept in the job queue's outbox with the change they announce (issue 14):
core and unit tests. (tests/system/test_durable_promises.py kills a real schedd with -9 between the
commit of a job's end and its TERMINATED event.)"""

from __future__ import annotations

import dataclasses

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.test_schedd_core import Harness, job, run_first_job

from htc.daemons.schedd.events import Owed, WriteCallFiles, WriteUserLog
from htc.daemons.schedd.owed import decode_entry, encode_writes, owe, owed_writes
from htc.eventlog import events as ev
from htc.eventlog.writer import format_event
from htc.jobqueue import JobQueue
from htc.wire import messages as m


def _sample(cls: type[ev.Event]) -> ev.Event:
    """One event of ``cls`` with every field set to something other than its default."""
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in ("cluster", "proc", "subproc"):
            values[f.name] = 7
        elif f.name == "timestamp":
            values[f.name] = 1_700_000_000.25
        elif "str" in str(f.type) and f.default in (None, ""):
            values[f.name] = f"the {f.name} ü"
    return cls(**values)


RICH = [
    ev.JobTerminatedEvent(cluster=3, proc=1, timestamp=1.5, terminated_normally=False, signal=9, core_file="core",
                          run_remote_usage=ev.Rusage(1.25, 0.5), total_remote_usage=ev.Rusage(2.0, 1.0),
                          resources=(ev.ResourceRow("Cpus", None, 1.0, 1.0), ev.ResourceRow("Memory", 12.0, 128.0, 256.0))),
    ev.ExecuteEvent(cluster=3, execute_host="<startd>", slot_name="slot1@exec", props={"Cpus": "1", "Memory": "256"}),
    ev.JobHeldEvent(cluster=3, reason="held: ü ☃", code=46, subcode=2),
    ev.FileTransferEvent(cluster=3, transfer_type=ev.FileTransferType.OUT_FINISHED, host="h"),
    ev.AttributeUpdateEvent(cluster=3, attribute="JobPrio", value="5", old_value=None),
]


@pytest.mark.parametrize("cls", list(ev.EVENT_CLASSES.values()), ids=lambda cls: cls.__name__)
def test_every_event_type_goes_through_the_outbox_unchanged(cls):
    event = _sample(cls)
    [log] = decode_entry(encode_writes([], [WriteUserLog("/l/job.log", (event,), "alice")]))
    assert log == WriteUserLog("/l/job.log", (event,), "alice")
    assert type(log.events[0]) is cls and format_event(log.events[0]) == format_event(event)


def test_an_entry_keeps_files_then_events_in_order():
    files = WriteCallFiles("/work", (("htc_result.pkl", b"\x00R"), ("stdout", b"")), recycle="htc_call.pkl",
                           owner="alice")
    logs = [WriteUserLog("/l/a.log", tuple(RICH[:2]), "alice"), WriteUserLog("/l/b.log", tuple(RICH[2:]), None)]
    assert decode_entry(encode_writes([files], logs)) == [files, *logs]


def test_an_entry_written_before_events_were_kept_is_still_read():
    files = WriteCallFiles("/work", (("htc_result.pkl", b"R"),), recycle=None, owner="alice")
    old = msgspec.msgpack.encode([files])  # the outbox's format before this change
    assert decode_entry(old) == [files]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.builds(ev.JobAbortedEvent, cluster=st.integers(0, 2**31), proc=st.integers(0, 2**20),
                          timestamp=st.floats(0, 4e9), reason=st.none() | st.text(max_size=40)),
                min_size=1, max_size=5),
       st.text(min_size=1, max_size=30), st.none() | st.text(min_size=1, max_size=10))
def test_any_aborted_events_round_trip(events, path, owner):
    log = WriteUserLog(path, tuple(events), owner)
    assert decode_entry(encode_writes([], [log])) == [log]


def test_garbage_in_the_outbox_is_dropped_and_counted(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        with q.transaction():
            q.owe(b"\xc1 not msgpack")
            q.owe(msgspec.msgpack.encode({"files": [], "logs": [["/l", None, [[999, {}]]]]}))  # no such event
            owe(q, [WriteUserLog("/l/job.log", (RICH[0],), "alice")])
        actions, unreadable = owed_writes(q)
    assert unreadable == 2
    assert [type(a).__name__ for a in actions] == ["Owed", "Owed", "WriteUserLog", "Owed"]


def test_owe_with_nothing_to_write_keeps_nothing():
    q = JobQueue.open(":memory:")
    assert owe(q, []) == [] and q.owed() == []
    log_line = [m.Ack()]  # not a write: passed through, nothing kept
    assert owe(q, log_line) == log_line and q.owed() == []


# --- the core: the events are in the queue file with the change ----------------------------------


def _owed_events(path: str) -> list[tuple[str, ev.EventType]]:
    """What another process reading the queue file now would write: (job, event type)."""
    with JobQueue.open(path) as other:
        actions, unreadable = owed_writes(other)
    assert unreadable == 0
    return [(e.job_id, e.type) for a in actions if isinstance(a, WriteUserLog) for e in a.events]


def _pay(h: Harness) -> None:
    """What the service does once it has written the turn's files and events."""
    h.queue.paid([a.seq for a in h.actions if isinstance(a, Owed)])


def test_a_jobs_terminated_event_is_in_the_queue_file_with_its_end_and_written_by_the_next_schedd(tmp_path):
    path = str(tmp_path / "q.db")
    h = Harness(JobQueue.open(path))
    h.start()
    h.submit(job())
    assert _owed_events(path) == [("1.0", ev.EventType.SUBMIT)]  # with the cluster's commit
    _pay(h)
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    _pay(h)
    assert _owed_events(path) == []
    before = len(h.actions)
    h.exited(claim_id, "1.0", exit_code=3)
    out = h.actions[before:]
    [owed] = [a for a in out if isinstance(a, Owed)]
    [log] = [a for a in out if isinstance(a, WriteUserLog)]
    assert out.index(log) < out.index(owed) and log.path == "/logs/job.log" and log.owner == "alice"
    # Killed here, before the service wrote it: the queue file has the end and its event.
    assert _owed_events(path) == [("1.0", ev.EventType.JOB_TERMINATED)]
    assert [hist["ProcId"] for hist in h.queue.history()] == ["0"]
    h.queue.close()
    again = Harness(JobQueue.open(path))
    started = again.start()
    kept = [a for a in started if isinstance(a, (WriteUserLog, Owed))]
    assert kept == [log, owed]  # before anything else is answered
    assert kept[0].events[0].return_value == 3
    again.queue.paid([owed.seq])
    assert again.queue.owed() == []
    again.queue.close()


def test_remove_hold_release_and_edit_keep_their_events_with_the_change(tmp_path):
    path = str(tmp_path / "q.db")
    h = Harness(JobQueue.open(path))
    h.start()
    h.submit(job(queue="queue 2"))
    _pay(h)
    for action, kind in ((m.JobAction.Hold, ev.EventType.JOB_HELD), (m.JobAction.Release, ev.EventType.JOB_RELEASED),
                         (m.JobAction.Remove, ev.EventType.JOB_ABORTED)):
        reply = h.request(m.ActOnJobs(action=action, ids=("1.0",), reason="because"))
        assert reply.success == 1
        assert _owed_events(path) == [("1.0", kind)]
        _pay(h)
    assert isinstance(h.request(m.EditJobs(ids=("1.1",), attributes={"Foo": "1"})), m.EditReply)
    assert _owed_events(path) == [("1.1", ev.EventType.ATTRIBUTE_UPDATE)]
    h.queue.close()


# --- a repeat after a crash, as the readers see it ------------------------------------------------


def test_an_event_written_again_after_a_crash_is_read_twice_by_htcondor_and_counted_once_by_htc_wait(tmp_path):
    """A schedd killed after it wrote an entry's events and before it took the entry out of the
    outbox writes them again when it starts: the log holds the TERMINATED twice. HTCondor's
    reader returns both (as it does for its own schedd's repeats); ``htc wait`` counts the
    job's end once and returns."""
    import subprocess
    import sys

    import htcondor2

    from htc.eventlog.writer import EventLogWriter

    log = tmp_path / "job.log"
    end = ev.JobTerminatedEvent(cluster=5, timestamp=1.7e9, terminated_normally=True, return_value=0)
    owed = encode_writes([], [WriteUserLog(str(log), (end,), None)])
    with EventLogWriter(str(log)) as writer:
        writer.write(ev.SubmitEvent(cluster=5, timestamp=1.7e9, submit_host="<h>"), end)  # written, not paid
        writer.write(*decode_entry(owed)[0].events)  # the next schedd writes the entry again
    reader = htcondor2.JobEventLog(str(log))
    try:
        seen = [(e.type, e.cluster, e.proc) for e in reader.events(stop_after=0)]
    finally:
        reader.close()
    terminated = (htcondor2.JobEventType.JOB_TERMINATED, 5, 0)
    assert seen == [(htcondor2.JobEventType.SUBMIT, 5, 0), terminated, terminated]
    done = subprocess.run([sys.executable, "-m", "htc.cli.main", "wait", "-wait", "60", "-status", str(log)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("5.0.0 completed") == 1 and "All jobs done." in done.stdout


def test_a_periodic_policy_hold_keeps_its_event_with_the_change(tmp_path):
    path = str(tmp_path / "q.db")
    h = Harness(JobQueue.open(path))
    h.start()
    h.submit(job("periodic_hold = true"))
    _pay(h)
    h.tick(h.now + 61)  # PERIODIC_EXPR_INTERVAL
    assert _owed_events(path) == [("1.0", ev.EventType.JOB_HELD)]
    h.queue.close()



def _replayed(*events: ev.Event) -> WriteUserLog:
    [log] = decode_entry(encode_writes([], [WriteUserLog("/l/a.log", tuple(events), "alice")]))
    assert log.replayed
    return log


def _text(*events: ev.Event) -> bytes:
    return "".join(format_event(e) for e in events).encode()


def test_a_replayed_entry_writes_only_events_the_logs_end_does_not_hold():
    from htc.daemons.schedd.owed import unwritten

    events = tuple(RICH[:2])
    entry = _replayed(*events)
    other = _text(ev.SubmitEvent(cluster=9, proc=0, timestamp=5.0))  # another job's
    assert unwritten([entry], b"") == [events]  # nothing in the log: all of them
    assert unwritten([entry], other + _text(*events) + other) == [()]  # written before the crash: none again
    assert unwritten([entry], other + _text(*events)[:-10]) == [events]  # not in one piece: all
    assert unwritten([entry], _text(events[0])) == [events]  # an entry is written whole or not at all
    # A fresh write is never looked up, whatever the log holds.
    assert unwritten([WriteUserLog("/l/a.log", events, "alice")], _text(*events)) == [events]


def test_an_identical_event_of_an_earlier_run_is_not_taken_for_the_replayed_one():
    from htc.daemons.schedd.owed import unwritten

    execute = ev.ExecuteEvent(cluster=4, proc=0, timestamp=100.0, execute_host="<startd>", slot_name="slot1@x")
    evicted = ev.JobEvictedEvent(cluster=4, proc=0, timestamp=100.0)
    ended = ev.JobTerminatedEvent(cluster=4, proc=0, timestamp=100.0, terminated_normally=True, return_value=0)
    # The job ran, was evicted and started again in the same second; the schedd died before it
    # wrote the second EXECUTE, whose text is the first's, byte for byte.
    log = _text(execute, evicted)
    assert unwritten([_replayed(execute)], log) == [(execute,)]
    # Written: the last of its job's events (or followed only by what later entries wrote).
    assert unwritten([_replayed(execute)], log + _text(execute)) == [()]
    assert unwritten([_replayed(execute), _replayed(ended)], log + _text(execute, ended)) == [(), ()]
    # The last entry's write lost, the one before it written.
    assert unwritten([_replayed(execute), _replayed(ended)], log + _text(execute)) == [(), (ended,)]

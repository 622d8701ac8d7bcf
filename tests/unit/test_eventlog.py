"""The job event log reader and writer on their own: round trips, the reference sample log,
growing and half-written logs, logs shared by many clusters and writers, damage, dates."""

from __future__ import annotations

import os
import threading
import time

import pytest

from htc.errors import UsageError
from htc.eventlog import (EventLogReader, EventLogWriter, events as ev, format_event, parse_time,
                          read_events)
from htc.eventlog.parsing import parse_event, split_header

# htcondor-semantics.md 1.6: a hand-written log the real reader parses into 30 events.
SAMPLE_LOG = """000 (123.000.000) 2024-01-01 12:00:00 Job submitted from host: <10.0.0.1:9618?addrs=10.0.0.1-9618&alias=submit.example.net>
...
040 (123.000.000) 2024-01-01 12:00:05 Started transferring input files
	Transferring to host: <10.0.0.2:9618?addrs=10.0.0.2-9618>
...
040 (123.000.000) 2024-01-01 12:00:06 Finished transferring input files
...
001 (123.000.000) 2024-01-01 12:00:07 Job executing on host: <10.0.0.2:9618?addrs=10.0.0.2-9618&alias=exec.example.net>
	SlotName: slot1_1@exec.example.net
	CondorScratchDir = "/var/lib/condor/execute/dir_1234"
	Cpus = 1
	Disk = 1048576
	Memory = 2048
...
006 (123.000.000) 2024-01-01 12:05:07 Image size of job updated: 2500
	3  -  MemoryUsage of job (MB)
	2312  -  ResidentSetSize of job (KB)
...
010 (123.000.000) 2024-01-01 12:06:00 Job was suspended.
	Number of processes actually suspended: 1
...
011 (123.000.000) 2024-01-01 12:07:00 Job was unsuspended.
...
022 (123.000.000) 2024-01-01 12:08:00 Job disconnected, attempting to reconnect
    Socket between submit and execute hosts closed unexpectedly
    Trying to reconnect to slot1_1@exec.example.net <10.0.0.2:9618?addrs=10.0.0.2-9618>
...
023 (123.000.000) 2024-01-01 12:08:30 Job reconnected to slot1_1@exec.example.net
    startd address: <10.0.0.2:9618?addrs=10.0.0.2-9618>
    starter address: <10.0.0.2:9618?addrs=10.0.0.2-9618&sock=starter_1>
...
004 (123.000.000) 2024-01-01 12:10:00 Job was evicted.
	(0) CPU times
		Usr 0 00:01:00, Sys 0 00:00:02  -  Run Remote Usage
		Usr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage
	0  -  Run Bytes Sent By Job
	1024  -  Run Bytes Received By Job
	Partitionable Resources :    Usage  Request Allocated
	   Cpus                 :                 1         1
	   Disk (KB)            :       30  1048576   1048576
	   Memory (MB)          :        3     2048      2048
...
012 (123.000.000) 2024-01-01 12:11:00 Job was held.
	via condor_hold (by user alice)
	Code 1 Subcode 0
...
013 (123.000.000) 2024-01-01 12:12:00 Job was released.
	via condor_release (by user alice)
...
001 (123.000.000) 2024-01-01 12:13:00 Job executing on host: <10.0.0.3:9618?addrs=10.0.0.3-9618>
...
007 (123.000.000) 2024-01-01 12:13:30 Shadow exception!
	Error from slot1_2@exec2.example.net: Failed to execute '/bin/foo': (errno=2: 'No such file or directory')
	0  -  Run Bytes Sent By Job
	0  -  Run Bytes Received By Job
...
001 (123.000.000) 2024-01-01 12:14:00 Job executing on host: <10.0.0.3:9618?addrs=10.0.0.3-9618>
...
005 (123.000.000) 2024-01-01 12:20:00 Job terminated.
	(1) Normal termination (return value 0)
		Usr 0 00:05:00, Sys 0 00:00:03  -  Run Remote Usage
		Usr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage
		Usr 0 00:05:00, Sys 0 00:00:03  -  Total Remote Usage
		Usr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage
	23  -  Run Bytes Sent By Job
	113  -  Run Bytes Received By Job
	23  -  Total Bytes Sent By Job
	113  -  Total Bytes Received By Job
	Partitionable Resources :    Usage  Request Allocated
	   Cpus                 :     0.50        1         1
	   Disk (KB)            :       30  1048576   1048576
	   Memory (MB)          :        3     2048      2048

	Job terminated of its own accord at 2024-01-01T12:20:00Z with exit-code 0.
...
000 (124.000.000) 2024-01-01 12:30:00 Job submitted from host: <10.0.0.1:9618>
    DAG Node: A
...
005 (124.000.000) 2024-01-01 12:40:00 Job terminated.
	(0) Abnormal termination (signal 9)
	(0) No core file
		Usr 0 00:00:00, Sys 0 00:00:00  -  Run Remote Usage
		Usr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage
		Usr 0 00:00:00, Sys 0 00:00:00  -  Total Remote Usage
		Usr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage
	0  -  Run Bytes Sent By Job
	0  -  Run Bytes Received By Job
	0  -  Total Bytes Sent By Job
	0  -  Total Bytes Received By Job
...
000 (125.000.000) 2024-01-01 13:00:00 Job submitted from host: <10.0.0.1:9618>
...
002 (125.000.000) 2024-01-01 13:00:10 (1) Job file not executable.
...
009 (125.000.000) 2024-01-01 13:00:20 Job was aborted.
	via condor_rm (by user alice)
...
016 (126.000.000) 2024-01-01 13:01:00 POST Script terminated.
	(1) Normal termination (return value 1)
    DAG Node: B
...
024 (127.000.000) 2024-01-01 13:02:00 Job reconnection failed
    Job lease expired
    Can not reconnect to slot1_1@exec.example.net, rescheduling job
...
003 (128.000.000) 2024-01-01 13:03:00 Job was checkpointed.
		Usr 0 00:00:10, Sys 0 00:00:01  -  Run Remote Usage
		Usr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage
	0  -  Run Bytes Sent By Job For Checkpoint
...
021 (129.000.000) 2024-01-01 13:04:00 Error from starter on slot1_1@exec.example.net:
	Failed to open '/nonexistent' as standard input: No such file or directory (errno 2)
	Code 13 Subcode 2
...
028 (130.000.000) 2024-01-01 13:05:00 Job ad information event triggered.
JobStatus = 2
Owner = "alice"
...
033 (131.000.000) 2024-01-01 13:06:00 Changing job attribute JobPrio from 0 to 10
...
034 (132.000.000) 2024-01-01 13:07:00 PRE script return value is PRE_SKIP value
    DAG Node: C
...
035 (133.000.000) 2024-01-01 13:08:00 Cluster submitted from host: <10.0.0.1:9618>
...
036 (133.000.000) 2024-01-01 13:09:00 Cluster removed
	Materialized 10 jobs from 10 items.	Complete
...
"""

T = 1704110400.0  # 2024-01-01 12:00:00 UTC (the tests run with TZ=UTC)
R = ev.Rusage(3723, 61)
TABLE = (ev.ResourceRow("Cpus", 0.5, 1, 1), ev.ResourceRow("Disk", 30, 1048576, 1048576),
         ev.ResourceRow("Memory", 3, 2048, 2048))


def every_event(cluster: int = 7) -> list[ev.Event]:
    """One of every event type htc writes (several variants of the rich ones)."""
    base = {"cluster": cluster, "proc": 0, "timestamp": T}
    fac = {"cluster": cluster, "proc": -1, "timestamp": T}
    return [
        ev.SubmitEvent(**base, submit_host="<10.0.0.1:9618>", log_notes="DAG Node: A", user_notes="notes"),
        ev.ExecuteEvent(**base, execute_host="<10.0.0.2:9618>", slot_name="slot1_1@exec",
                        props={"Cpus": "1", "Memory": "2048", "CondorScratchDir": '"/scratch/dir_1"'}),
        ev.ExecutableErrorEvent(**base, error_type=1),
        ev.CheckpointedEvent(**base, run_remote_usage=R, sent_bytes=4096),
        ev.JobEvictedEvent(**base, checkpointed=True, run_remote_usage=R, sent_bytes=5,
                           received_bytes=1024, resources=TABLE),
        ev.JobEvictedEvent(**base, reason="Preempted by startd", reason_code=1011, reason_subcode=4,
                           run_local_usage=R),
        ev.JobEvictedEvent(**base, terminated_and_requeued=True, terminated_normally=False,
                           return_value=None, signal=11, core_file="/tmp/core.7",
                           reason="The job attribute OnExitRemove expression 'false' evaluated to FALSE"),
        ev.JobEvictedEvent(**base, terminated_and_requeued=True, terminated_normally=True, return_value=3,
                           reason="requeued"),
        ev.JobTerminatedEvent(**base, return_value=42, run_remote_usage=R, total_remote_usage=R,
                              sent_bytes=23, received_bytes=113, total_sent_bytes=23,
                              total_received_bytes=113, resources=TABLE,
                              toe="Job terminated of its own accord at 2024-01-01T12:00:00Z with exit-code 42."),
        ev.JobTerminatedEvent(**base, terminated_normally=False, return_value=None, signal=9,
                              core_file="/tmp/core.9"),
        ev.ImageSizeEvent(**base, size=2500, memory_usage=3, resident_set_size=2312, proportional_set_size=2100),
        ev.ShadowExceptionEvent(**base, message="Error from slot1@exec: boom", sent_bytes=1, received_bytes=2),
        ev.GenericEvent(**base, info="a generic line"),
        ev.JobAbortedEvent(**base, reason="via condor_rm (by user alice)"),
        ev.JobSuspendedEvent(**base, num_pids=3),
        ev.JobUnsuspendedEvent(**base),
        ev.JobHeldEvent(**base, reason="via condor_hold (by user alice)", code=1, subcode=0),
        ev.JobReleasedEvent(**base, reason="via condor_release (by user alice)"),
        ev.PostScriptTerminatedEvent(**base, return_value=1, dag_node_name="B"),
        ev.PostScriptTerminatedEvent(**base, terminated_normally=False, return_value=None, signal=15,
                                     dag_node_name="B"),
        ev.RemoteErrorEvent(**base, daemon="starter", execute_host="slot1_1@exec",
                            error_msg="Failed to open '/nonexistent'\nsecond line", hold_code=13, hold_subcode=2),
        ev.RemoteErrorEvent(**base, daemon="starter", execute_host="slot1_1@exec", error_msg="just saying",
                            critical=False),
        ev.JobDisconnectedEvent(**base, reason="Socket closed", startd_name="slot1_1@exec",
                                startd_addr="<10.0.0.2:9618>"),
        ev.JobReconnectedEvent(**base, startd_name="slot1_1@exec", startd_addr="<10.0.0.2:9618>",
                               starter_addr="<10.0.0.2:9618?sock=starter_1>"),
        ev.JobReconnectFailedEvent(**base, reason="Job lease expired", startd_name="slot1_1@exec"),
        ev.JobAdInformationEvent(**base, attrs={"JobStatus": "2", "Owner": '"alice"'}),
        ev.AttributeUpdateEvent(**base, attribute="JobPrio", old_value="0", value="10"),
        ev.PreSkipEvent(**base, dag_node_name="C"),
        ev.ClusterSubmitEvent(**fac, submit_host="<10.0.0.1:9618>"),
        ev.FactoryPausedEvent(**fac, reason="cluster held", pause_code=1, hold_code=1),
        ev.FactoryResumedEvent(**fac, reason="cluster released"),
        ev.ClusterRemoveEvent(**fac, next_proc_id=10, next_row=10, completion=1, notes="all done"),
        ev.ClusterRemoveEvent(**fac, next_proc_id=4, next_row=4, completion=-3),
        *[ev.FileTransferEvent(**base, transfer_type=t, queueing_delay=5 if t == 1 else None,
                               host="<10.0.0.2:9618>" if t == 2 else None)
          for t in ev.FileTransferType],
    ]


def test_every_event_class_is_exercised():
    assert {type(e) for e in every_event()} == set(ev.EVENT_CLASSES.values())


def test_every_event_round_trips_through_our_reader(tmp_path):
    path = tmp_path / "all.log"
    written = every_event()
    with EventLogWriter(path, fsync=True) as w:
        w.write(*written)
    read = read_events(path)
    assert len(read) == len(written)
    for a, b in zip(written, read):
        assert type(a) is type(b)
        assert b == a, f"{a}\n!=\n{b}"


def test_the_reference_sample_log(tmp_path):
    path = tmp_path / "sample.log"
    path.write_text(SAMPLE_LOG)
    events = read_events(path)
    assert len(events) == 30
    assert [e.type for e in events[:4]] == [ev.EventType.SUBMIT, ev.EventType.FILE_TRANSFER,
                                             ev.EventType.FILE_TRANSFER, ev.EventType.EXECUTE]
    execute = events[3]
    assert execute.slot_name == "slot1_1@exec.example.net" and execute.props["Memory"] == "2048"
    terminated = next(e for e in events if isinstance(e, ev.JobTerminatedEvent))
    assert (terminated.cluster, terminated.terminated_normally, terminated.return_value) == (123, True, 0)
    assert terminated.run_remote_usage == ev.Rusage(300, 3) and terminated.received_bytes == 113
    assert {r.name: (r.usage, r.request, r.allocated) for r in terminated.resources} == {
        "Cpus": (0.5, 1, 1), "Disk": (30, 1048576, 1048576), "Memory": (3, 2048, 2048)}
    assert terminated.toe.startswith("Job terminated of its own accord")
    signalled = [e for e in events if isinstance(e, ev.JobTerminatedEvent)][1]
    assert (signalled.cluster, signalled.terminated_normally, signalled.signal) == (124, False, 9)
    held = next(e for e in events if isinstance(e, ev.JobHeldEvent))
    assert (held.reason, held.code, held.subcode) == ("via condor_hold (by user alice)", 1, 0)
    assert next(e for e in events if isinstance(e, ev.SubmitEvent) and e.cluster == 124).log_notes == "DAG Node: A"
    post = next(e for e in events if isinstance(e, ev.PostScriptTerminatedEvent))
    assert (post.return_value, post.dag_node_name) == (1, "B")
    remote = next(e for e in events if isinstance(e, ev.RemoteErrorEvent))
    assert (remote.daemon, remote.execute_host, remote.hold_code, remote.hold_subcode) == (
        "starter", "slot1_1@exec.example.net", 13, 2)
    update = next(e for e in events if isinstance(e, ev.AttributeUpdateEvent))
    assert (update.attribute, update.old_value, update.value) == ("JobPrio", "0", "10")
    remove = events[-1]
    assert isinstance(remove, ev.ClusterRemoveEvent) and (remove.next_proc_id, remove.completion) == (10, 1)
    assert events[0].timestamp == parse_time("2024-01-01 12:00:00")
    assert [e.cluster for e in read_events(path, cluster=125)] == [125, 125, 125]


def test_a_half_written_last_event_is_not_returned_until_it_is_complete(tmp_path):
    path = tmp_path / "grow.log"
    done = format_event(ev.SubmitEvent(cluster=1, timestamp=T, submit_host="<h>"))
    partial = format_event(ev.JobHeldEvent(cluster=1, timestamp=T, reason="r", code=1))
    reader = EventLogReader(path)
    assert reader.read_nowait() == []  # no file yet
    for cut in (len(partial) - 4, len(partial) - 1, 10, 3):
        path.write_text(done + partial[:cut])
        reader = EventLogReader(path)
        assert [e.type for e in reader.read_nowait()] == [ev.EventType.SUBMIT]
        assert reader.read_nowait() == []
        with open(path, "a") as f:
            f.write(partial[cut:])
        [held] = reader.read_nowait()
        assert (held.reason, held.code) == ("r", 1)
        assert reader.skipped == 0


def test_follow_a_log_while_another_thread_writes_it(tmp_path):
    path = tmp_path / "follow.log"
    reader = EventLogReader(path)

    def writer():
        with EventLogWriter(path, fsync=False) as w:
            for i in range(50):
                w.write(ev.GenericEvent(cluster=i, timestamp=T, info=f"event {i}"))
                time.sleep(0.001)

    t = threading.Thread(target=writer)
    t.start()
    seen = []
    deadline = time.monotonic() + 10
    while len(seen) < 50 and time.monotonic() < deadline:
        seen += reader.wait_events(0.5, poll=0.005)
    t.join()
    assert [e.info for e in seen] == [f"event {i}" for i in range(50)]
    assert reader.wait_events(0.05) == []


def test_many_writers_share_one_log_without_interleaving(tmp_path):
    path = tmp_path / "shared.log"
    writers = []
    for w in range(4):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child process
            try:
                with EventLogWriter(path, fsync=False) as log:
                    for i in range(200):
                        log.write(ev.JobHeldEvent(cluster=100 + w, proc=i, timestamp=T,
                                                  reason="x" * (i % 300), code=w))
            finally:
                os._exit(0)
        writers.append(pid)
    for pid in writers:
        assert os.waitpid(pid, 0)[1] == 0
    reader = EventLogReader(path)
    events = reader.read_nowait()
    assert len(events) == 800 and reader.skipped == 0
    for w in range(4):
        mine = [e for e in events if e.cluster == 100 + w]
        assert [e.proc for e in mine] == list(range(200))
        assert all(e.code == w and e.reason == "x" * (e.proc % 300) for e in mine if e.proc % 300)
    assert len(read_events(path, cluster=102)) == 200


def test_damage_is_skipped_and_counted(tmp_path):
    path = tmp_path / "damaged.log"
    good = format_event(ev.JobAbortedEvent(cluster=5, timestamp=T, reason="gone"))
    cut = format_event(ev.JobHeldEvent(cluster=5, timestamp=T, reason="cut", code=3))[:40] + "\n"
    path.write_text("garbage line\nmore garbage\n" + good + cut + good +
                    "099 (5.000.000) 2024-01-01 12:00:00 Something new\n\tdetail\n...\n")
    reader = EventLogReader(path)
    events = reader.read_nowait()
    assert [type(e).__name__ for e in events] == ["JobAbortedEvent", "JobAbortedEvent", "UnknownEvent"]
    assert reader.skipped == 2  # the garbage, and the held event cut off by the next header
    unknown = events[-1]
    assert (unknown.number, unknown.head, unknown.body) == (99, "Something new", ("\tdetail",))


def test_a_reader_that_keeps_the_log_open_follows_growth_truncation_and_replacement(tmp_path):
    path = tmp_path / "kept.log"
    one = format_event(ev.GenericEvent(cluster=1, timestamp=T, info="one"))
    two = format_event(ev.GenericEvent(cluster=2, timestamp=T, info="two"))
    reader = EventLogReader(path, keep_open=True)
    assert reader.read_nowait() == []  # no file yet
    path.write_text(one + two[:10])
    assert [e.info for e in reader.read_nowait()] == ["one"]
    assert reader.read_nowait() == []  # half an event: nothing yet
    with open(path, "a") as f:
        f.write(two[10:])
    assert [e.info for e in reader.read_nowait()] == ["two"]
    path.write_text(two)  # truncated, then written again
    assert [e.info for e in reader.read_nowait()] == ["two"]
    fresh = tmp_path / "fresh.log"
    fresh.write_text(one + one + one)  # longer than what was read: only a new inode tells
    os.replace(fresh, path)
    assert [e.info for e in reader.read_nowait()] == ["one"] * 3
    reader.close()
    with open(path, "a") as f:
        f.write(two)
    assert [e.info for e in reader.read_nowait()] == ["two"]  # reopened where it was
    reader.close()
    with pytest.raises(UsageError, match="cannot read the job event log"):
        EventLogReader(tmp_path, keep_open=True).read_nowait()


def test_a_truncated_log_is_read_again_from_the_start(tmp_path):
    path = tmp_path / "t.log"
    event = format_event(ev.GenericEvent(cluster=1, timestamp=T, info="one"))
    path.write_text(event * 3)
    reader = EventLogReader(path)
    assert len(reader.read_nowait()) == 3
    path.write_text(event)
    assert len(reader.read_nowait()) == 1


@pytest.mark.parametrize("text,expected", [
    ("2024-01-02 03:04:05", 1704164645.0),
    ("2024-01-02 03:04:05.250", 1704164645.25),
    ("2024-01-02 03:04:05Z", 1704164645.0),
    ("2024-01-02T03:04:05", 1704164645.0),
])
def test_header_dates(text, expected):
    assert parse_time(text) == expected


def test_header_dates_are_remembered_within_a_bound(monkeypatch):
    from htc.eventlog import parsing

    kept = parsing._iso_time.cache_info().maxsize
    count = kept + 500
    texts = [f"2024-03-{1 + i // 1440:02d} {i // 60 % 24:02d}:{i % 60:02d}:07" for i in range(count)]
    fresh = [time.mktime(time.strptime(t, "%Y-%m-%d %H:%M:%S")) for t in texts]
    assert [parse_time(t) for t in texts] == fresh
    assert [parse_time(t) for t in texts] == fresh  # read again, some remembered, some not
    assert 0 < parsing._iso_time.cache_info().currsize <= kept
    parse_time("01/02 03:04:05")
    real = time.localtime
    later = real(time.mktime((2031, 6, 1, 0, 0, 0, 0, 0, -1)))
    monkeypatch.setattr(time, "localtime", lambda *args: real(*args) if args else later)
    assert time.localtime(parse_time("01/02 03:04:05")).tm_year == 2031  # no year in it: never kept


def test_a_reader_can_skip_the_event_types_it_does_not_want(tmp_path):
    path = tmp_path / "types.log"
    with EventLogWriter(path, fsync=False) as w:
        w.write(ev.SubmitEvent(cluster=1, timestamp=T, submit_host="<h>"),
                ev.ExecuteEvent(cluster=1, timestamp=T, execute_host="<e>"),
                ev.JobHeldEvent(cluster=1, timestamp=T, reason="r", code=1),
                ev.SubmitEvent(cluster=2, timestamp=T, submit_host="<h>"))
    reader = EventLogReader(path)
    wanted = {ev.EventType.EXECUTE, ev.EventType.JOB_HELD}
    assert [(e.type, e.cluster) for e in reader.read_nowait(types=wanted)] == [
        (ev.EventType.EXECUTE, 1), (ev.EventType.JOB_HELD, 1)]
    assert reader.offset == path.stat().st_size  # the skipped events are consumed all the same
    assert reader.read_nowait() == []
    with open(path, "a") as f:
        f.write(format_event(ev.SubmitEvent(cluster=3, timestamp=T, submit_host="<h>")))
    assert reader.read_nowait(types=wanted) == []
    assert reader.read_nowait(types=wanted, cluster=1) == [] and reader.skipped == 0


def test_legacy_dates_assume_the_current_year():
    year = time.localtime().tm_year
    assert time.localtime(parse_time("01/02 03:04:05"))[:6] == (year, 1, 2, 3, 4, 5)
    with pytest.raises(ValueError):
        parse_time("yesterday")


def test_utc_and_sub_second_headers_round_trip(tmp_path):
    path = tmp_path / "utc.log"
    with EventLogWriter(path, utc=True, sub_second=True) as w:
        w.write(ev.GenericEvent(cluster=1, timestamp=T + 0.125, info="x"))
    assert "2024-01-01 12:00:00.125Z" in path.read_text()
    assert read_events(path)[0].timestamp == T + 0.125


def test_writer_errors_are_clear(tmp_path):
    with pytest.raises(UsageError, match="cannot open the job event log"):
        EventLogWriter(tmp_path / "no" / "such" / "dir.log")
    w = EventLogWriter(tmp_path / "x.log")
    w.close()
    with pytest.raises(UsageError, match="closed"):
        w.write(ev.GenericEvent(cluster=1))
    with pytest.raises(UsageError, match="DAG node name"):
        format_event(ev.PreSkipEvent(cluster=1))
    with pytest.raises(UsageError, match="cannot write"):
        format_event(ev.UnknownEvent(cluster=1))


def test_free_text_never_breaks_the_format(tmp_path):
    path = tmp_path / "text.log"
    with EventLogWriter(path) as w:
        w.write(ev.JobHeldEvent(cluster=1, timestamp=T, reason="line one\nline two\r\n...", code=3))
    [held] = read_events(path)
    assert held.reason == "line one|line two |..."


def _line_by_line(reader: EventLogReader, data: bytes, codes=None):
    """The reader's rules, one line at a time (its first implementation): what the quicker
    split of ``_parse`` must give, events, consumed bytes and damage counted alike."""
    import re
    header_re = re.compile(rb"^(\d{3}) \((-?\d+)\.(-?\d+)\.(-?\d+)\) ")
    events, pos, consumed, current, skipped = [], 0, 0, None, 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        line, line_start, pos = data[pos:nl], pos, nl + 1
        if line.endswith(b"\r"):
            line = line[:-1]
        header = header_re.match(line)
        if header:
            if current is not None or line_start > consumed:
                skipped += 1
            current = (header, [line])
            continue
        if current is None:
            if line == b"...":
                consumed = pos
            continue
        if line == b"...":
            if codes is None or int(current[0].group(1)) in codes:
                text = [l.decode("utf-8", "replace") for l in current[1]]
                code, cluster, proc, subproc = (int(g) for g in current[0].groups())
                try:
                    stamp, first = split_header(text[0][current[0].end():])
                    events.append(parse_event(code, cluster, proc, subproc, stamp, first, text[1:]))
                except ValueError:
                    skipped += 1
            current, consumed = None, pos
            continue
        current[1].append(line)
    return events, consumed, skipped


@pytest.mark.parametrize("seed", range(60))
def test_the_reader_splits_damaged_logs_exactly_as_reading_them_line_by_line(seed):
    import random
    rnd = random.Random(seed)
    kinds = [ev.ExecuteEvent(cluster=3, proc=1, timestamp=T, execute_host="<1.2.3.4:5>", slot_name="slot1@h"),
             ev.JobTerminatedEvent(cluster=3, proc=2, timestamp=T, return_value=7),
             ev.JobHeldEvent(cluster=4, timestamp=T, reason="held", code=3),
             ev.JobAbortedEvent(cluster=5, timestamp=T, reason="gone")]
    parts = []
    for _ in range(rnd.randrange(1, 12)):
        text = format_event(rnd.choice(kinds))
        damage = rnd.random()
        if damage < 0.15:
            text = text[:rnd.randrange(len(text))] + "\n"  # cut off
        elif damage < 0.25:
            text = "junk " * rnd.randrange(1, 3) + "\n" + text
        elif damage < 0.35:
            text = text.replace("\n", "\r\n")
        elif damage < 0.4:
            text = "...\n" + text  # a stray terminator
        elif damage < 0.45:
            text = text.replace("...\n", "")  # never terminated
        parts.append(text)
    data = "".join(parts).encode()
    data = data[:rnd.randrange(len(data) // 2, len(data) + 1)]  # still being written
    codes = rnd.choice([None, frozenset({int(ev.EventType.EXECUTE), int(ev.EventType.JOB_TERMINATED)})])
    reader = EventLogReader("/nonexistent")
    events, consumed = reader._parse(data, codes)
    assert (events, consumed, reader.skipped) == _line_by_line(EventLogReader("/nonexistent"), data, codes)

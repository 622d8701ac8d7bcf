"""Our event logs read by a real client: HTCondor's own reader, ``htcondor2.JobEventLog``.

Every event type htc writes is read back by the wheel with the right type, cluster, proc,
time and fields; and the reference sample log reads the same through both readers.
"""

from __future__ import annotations

import htcondor2  # the test oracle (a test dependency: pip install -e .[test])

from htc.eventlog import EventLogWriter, events as ev, read_events
from tests.unit.test_eventlog import SAMPLE_LOG, T, every_event


def _rusage(r: ev.Rusage) -> str:
    def dhms(s):
        s = int(s)
        return f"{s // 86400} {s % 86400 // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"Usr {dhms(r.user)}, Sys {dhms(r.system)}"


def _termination(e) -> dict:
    if e.terminated_normally:
        return {"TerminatedNormally": True, "ReturnValue": e.return_value}
    return {"TerminatedNormally": False, "TerminatedBySignal": e.signal}


def expected_fields(e: ev.Event) -> dict:
    """The attributes htcondor2.JobEvent must show for one of our events."""
    match e:
        case ev.SubmitEvent():
            return {"SubmitHost": e.submit_host, "LogNotes": e.log_notes, "UserNotes": e.user_notes}
        case ev.ExecuteEvent():
            return {"ExecuteHost": e.execute_host, "SlotName": e.slot_name}
        case ev.ExecutableErrorEvent():
            return {"ExecuteErrorType": e.error_type}
        case ev.CheckpointedEvent():
            return {"SentBytes": e.sent_bytes, "RunRemoteUsage": _rusage(e.run_remote_usage),
                    "RunLocalUsage": _rusage(e.run_local_usage)}
        case ev.JobEvictedEvent():
            out = {"Checkpointed": e.checkpointed, "TerminatedAndRequeued": e.terminated_and_requeued,
                   "SentBytes": e.sent_bytes, "ReceivedBytes": e.received_bytes,
                   "RunRemoteUsage": _rusage(e.run_remote_usage), "RunLocalUsage": _rusage(e.run_local_usage)}
            if e.terminated_and_requeued:
                out.update(_termination(e))
                if e.core_file:
                    out["CoreFile"] = e.core_file
            if e.reason:
                out["Reason"] = e.reason
            if e.reason_code is not None:
                out["ReasonCode"] = e.reason_code
                if e.reason_subcode:  # the real reader only reports a non-zero sub-code
                    out["ReasonSubCode"] = e.reason_subcode
            return out
        case ev.JobTerminatedEvent():
            out = {**_termination(e), "RunRemoteUsage": _rusage(e.run_remote_usage),
                   "TotalRemoteUsage": _rusage(e.total_remote_usage), "SentBytes": e.sent_bytes,
                   "ReceivedBytes": e.received_bytes, "TotalSentBytes": e.total_sent_bytes,
                   "TotalReceivedBytes": e.total_received_bytes}
            for row in e.resources:
                out.update({f"{row.name}Usage": row.usage, f"Request{row.name}": row.request,
                            row.name: row.allocated})
            return out
        case ev.ImageSizeEvent():
            return {"Size": e.size, "MemoryUsage": e.memory_usage, "ResidentSetSize": e.resident_set_size,
                    "ProportionalSetSize": e.proportional_set_size}
        case ev.ShadowExceptionEvent():
            return {"Message": e.message, "SentBytes": e.sent_bytes, "ReceivedBytes": e.received_bytes}
        case ev.GenericEvent():
            return {"Info": e.info}
        case ev.JobAbortedEvent() | ev.JobReleasedEvent() | ev.FactoryResumedEvent():
            return {"Reason": e.reason}
        case ev.JobSuspendedEvent():
            return {"NumberOfPIDs": e.num_pids}
        case ev.JobUnsuspendedEvent():
            return {}
        case ev.JobHeldEvent():
            return {"HoldReason": e.reason, "HoldReasonCode": e.code, "HoldReasonSubCode": e.subcode}
        case ev.PostScriptTerminatedEvent():
            return {**_termination(e), "DAGNodeName": e.dag_node_name}
        case ev.RemoteErrorEvent():
            out = {"Daemon": e.daemon, "ExecuteHost": e.execute_host, "ErrorMsg": e.error_msg}
            if e.hold_code:
                out.update(HoldReasonCode=e.hold_code, HoldReasonSubCode=e.hold_subcode)
            return out
        case ev.JobDisconnectedEvent():
            return {"DisconnectReason": e.reason, "StartdName": e.startd_name, "StartdAddr": e.startd_addr}
        case ev.JobReconnectedEvent():
            return {"StartdName": e.startd_name, "StartdAddr": e.startd_addr, "StarterAddr": e.starter_addr}
        case ev.JobReconnectFailedEvent():
            return {"Reason": e.reason, "StartdName": e.startd_name}
        case ev.JobAdInformationEvent():
            return {"JobStatus": 2, "Owner": "alice"}
        case ev.AttributeUpdateEvent():
            return {"Attribute": e.attribute, "Value": e.value}
        case ev.PreSkipEvent():
            return {"SkipEventLogNotes": f"DAG Node: {e.dag_node_name}"}
        case ev.ClusterSubmitEvent():
            return {"SubmitHost": e.submit_host}
        case ev.FactoryPausedEvent():
            return {"Reason": e.reason, "PauseCode": e.pause_code, "HoldCode": e.hold_code}
        case ev.ClusterRemoveEvent():
            out = {"NextProcId": e.next_proc_id, "NextRow": e.next_row, "Completion": e.completion}
            if e.notes:
                out["Notes"] = e.notes
            return out
        case ev.FileTransferEvent():
            out = {"Type": int(e.transfer_type)}
            if e.queueing_delay is not None:
                out["QueueingDelay"] = e.queueing_delay
            if e.host:
                out["Host"] = e.host
            return out
    raise AssertionError(f"no expectation for {type(e).__name__}")


def test_the_real_reader_reads_every_event_we_write(tmp_path):
    path = tmp_path / "ours.log"
    ours = every_event(cluster=4321)
    with EventLogWriter(path) as w:
        w.write(*ours)
    theirs = list(htcondor2.JobEventLog(str(path)).events(stop_after=0))
    assert len(theirs) == len(ours)
    for mine, real in zip(ours, theirs):
        assert int(real.type) == int(mine.type), type(mine).__name__
        assert (real.cluster, real.proc) == (mine.cluster, mine.proc)
        assert real.timestamp == int(mine.timestamp)
        for name, value in expected_fields(mine).items():
            if value is None:
                assert name not in real, (type(mine).__name__, name)
            else:
                assert real[name] == value, (type(mine).__name__, name, real[name], value)
        if isinstance(mine, ev.ExecuteEvent):
            assert real["ExecuteProps"]["Memory"] == 2048
            assert real["ExecuteProps"]["CondorScratchDir"] == "/scratch/dir_1"


def test_both_readers_agree_on_the_reference_sample(tmp_path):
    path = tmp_path / "sample.log"
    path.write_text(SAMPLE_LOG)
    theirs = list(htcondor2.JobEventLog(str(path)).events(stop_after=0))
    ours = read_events(path)
    assert [(int(e.type), e.cluster, e.proc, e.timestamp) for e in theirs] == [
        (int(e.type), e.cluster, e.proc, int(e.timestamp)) for e in ours]
    for mine, real in zip(ours, theirs):
        if isinstance(mine, (ev.UnknownEvent, ev.PreSkipEvent)):
            continue
        for name, value in expected_fields(mine).items():
            if name in real and not isinstance(mine, ev.JobAdInformationEvent):
                assert real[name] == value, (type(mine).__name__, name, real[name], value)


def test_a_cluster_larger_than_three_digits_and_cluster_level_events(tmp_path):
    path = tmp_path / "big.log"
    with EventLogWriter(path) as w:
        w.write(ev.SubmitEvent(cluster=1234567, proc=12345, timestamp=T, submit_host="<h>"),
                ev.ClusterRemoveEvent(cluster=1234567, proc=-1, timestamp=T, next_proc_id=3, next_row=3))
    real = list(htcondor2.JobEventLog(str(path)).events(stop_after=0))
    assert [(e.cluster, e.proc) for e in real] == [(1234567, 12345), (1234567, -1)]
    assert [(e.cluster, e.proc) for e in read_events(path)] == [(1234567, 12345), (1234567, -1)]

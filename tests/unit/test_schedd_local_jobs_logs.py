"""What the schedd writes for DAGMan: the Submit event's notes lines (``SubmitEventNotes``,
``SubmitEventUserNotes``) and a job's events copied to its DAG nodes log (``dagman_log`` ->
``DAGManNodesLog``, filtered by ``DAGManNodesMask``), as HTCondor's WriteUserLog does."""

from __future__ import annotations

from htc.daemons import core as c
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.core import Schedd, ScheddSettings
from htc.daemons.schedd.events import WriteUserLog
from htc.daemons.schedd.requests import description_message
from htc.eventlog.events import EventType
from htc.jobqueue import JobQueue
from htc.wire import messages as m
from htc.wire.transport import PeerInfo


def submit(text: str) -> tuple[Schedd, list[c.Action]]:
    core = Schedd(ScheddSettings(), JobQueue.open(":memory:"), user_of_uid={1000: "alice"}.get, own_uid=0)
    core.handle(c.Started(), 1000.0)
    out = core.handle(c.Received(description_message(text, "/work", "job.sub"), 1, PeerInfo(uid=1000)), 1000.0)
    return core, out


def test_submit_event_carries_the_notes_lines():
    _, out = submit("executable = /bin/true\nlog = /logs/a.log\nsubmit_event_notes = DAG Node: A\n"
                    "submit_event_user_notes = my notes\nqueue\n")
    [write] = [a for a in out if isinstance(a, WriteUserLog)]
    [event] = write.events
    assert (event.log_notes, event.user_notes) == ("DAG Node: A", "my notes")


def test_a_submit_without_notes_has_none():
    _, out = submit("executable = /bin/true\nlog = /logs/a.log\nqueue\n")
    [write] = [a for a in out if isinstance(a, WriteUserLog)]
    assert (write.events[0].log_notes, write.events[0].user_notes) == (None, None)


def test_dagman_log_gets_the_events_too_once_per_log():
    _, out = submit("executable = /bin/true\nlog = /logs/a.log\ndagman_log = /logs/dag.nodes.log\nqueue 2\n")
    writes = {a.path: [e.type for e in a.events] for a in out if isinstance(a, WriteUserLog)}
    assert writes == {"/logs/a.log": [EventType.SUBMIT] * 2, "/logs/dag.nodes.log": [EventType.SUBMIT] * 2}


def test_a_job_with_only_a_dagman_log_writes_there():
    _, out = submit("executable = /bin/true\ndagman_log = /logs/dag.nodes.log\nqueue\n")
    assert [a.path for a in out if isinstance(a, WriteUserLog)] == ["/logs/dag.nodes.log"]


def test_the_mask_filters_the_nodes_log_not_the_job_log():
    job = {"ClusterId": "3", "ProcId": "0", "UserLog": '"/l/a.log"', "DAGManNodesLog": '"/l/n.log"',
           "DAGManNodesMask": '"0,1,2,4,5,7,9,10,11,12,13,16,17,24,27"', "Owner": '"alice"'}
    held = ul.held_event(job, "why", 1, 0, 5.0)
    update = ul.attribute_update_event(job, "Foo", "1", None, 5.0)
    writes = {a.path: [e.type for e in a.events] for a in ul.write(job, held, update)}
    assert writes == {"/l/a.log": [EventType.JOB_HELD, EventType.ATTRIBUTE_UPDATE], "/l/n.log": [EventType.JOB_HELD]}


def test_same_nodes_log_as_the_job_log_is_written_once():
    job = {"ClusterId": "3", "ProcId": "0", "UserLog": '"/l/a.log"', "DAGManNodesLog": '"/l/a.log"'}
    assert len(ul.write(job, ul.aborted_event(job, "x", 1.0))) == 1


def test_mask_tokens_are_read_as_htcondor_reads_them():
    assert ul.nodes_mask({"DAGManNodesMask": '" 5, 9 ,x"'}) == frozenset({5, 9, 0})
    assert ul.nodes_mask({"DAGManNodesMask": '""'}) is None
    assert ul.nodes_mask({}) is None


def test_the_reply_still_comes():
    _, out = submit("executable = /bin/true\nqueue\n")
    assert any(isinstance(a, c.Reply) and isinstance(a.msg, m.SubmitReply) for a in out)

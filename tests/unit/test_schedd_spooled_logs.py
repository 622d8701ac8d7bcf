"""The logs of spooled jobs (``htc submit -spool``) in the schedd core, with a fake clock.

A spooled job's ``UserLog`` is a file on the submitter's machine: the schedd writes none of its
events there, neither when the cluster is submitted nor when late materialization adds a proc
later; the SUBMIT event goes to the spool's copy of the log when the job's input arrives
(:mod:`htc.daemons.schedd.spool`), dated when the job entered the queue. Its ``DAGManNodesLog``
is not rewritten (as HTCondor's ``rewriteSpooledJobAd`` leaves it): it gets the SUBMIT event
when the job enters the queue, where the job names it.
"""

from __future__ import annotations

from test_schedd_core import Harness

from htc.client.spool import SPOOL_COMMANDS
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.events import WriteUserLog
from htc.daemons.schedd.spool import _submit_event
from htc.eventlog.events import EventType
from htc.wire import messages as m

LOG, NODES = "/sub/job.log", "/dags/d.nodes.log"


def spooled(queue: str, *extra: str) -> str:
    return "\n".join(("executable = /bin/echo", f"log = {LOG}", *extra, *SPOOL_COMMANDS, queue)) + "\n"


def written(out, path: str) -> list[tuple[EventType, int, int, float]]:
    return [(e.type, e.cluster, e.proc, e.timestamp) for a in out if isinstance(a, WriteUserLog) and a.path == path
            for e in a.events]


def started() -> Harness:
    h = Harness()
    h.start()
    return h


def test_a_spooled_clusters_later_procs_get_no_event_at_the_submitters_log_path():
    h = started()
    h.submit(spooled("queue 3", "max_materialize = 1"))
    assert [j.proc_id for j in h.queue.query("true")] == [0]
    h.request(m.ActOnJobs(action=m.JobAction.Remove, ids=("1.0",)))  # room for the next proc
    h.actions.clear()
    h.tick(h.now + 30.0)
    [later] = h.queue.query("true")
    assert later.proc_id == 1 and ul.awaits_spooled_input(later)  # held 16, as the first proc was
    assert written(h.actions, LOG) == []


def test_the_spooled_submit_event_is_dated_when_the_proc_entered_the_queue():
    h = started()
    h.submit(spooled("queue 2", "max_materialize = 1"))
    submitted = h.now
    h.request(m.ActOnJobs(action=m.JobAction.Remove, ids=("1.0",)))
    h.tick(h.now + 30.0)
    [later] = h.queue.query("true")
    assert later.qdate == int(submitted)  # the cluster's QDate: not when this proc came
    assert ul.entered_queue(later) == submitted + 30.0
    [action] = _submit_event(h.core, later, {"UserLog": '"/spool/1/1/cluster1.proc1.subproc0/job.log"'})
    [event] = action.events
    assert action.path.endswith("/job.log") and (event.type, event.proc, event.timestamp) == (
        EventType.SUBMIT, 1, submitted + 30.0)


def test_a_spooled_jobs_nodes_log_gets_its_submit_event_where_the_job_names_it():
    h = started()
    h.submit(spooled("queue 2", f"dagman_log = {NODES}", "max_materialize = 1"))
    assert [(t, p) for t, _, p, _ in written(h.actions, NODES)] == [(EventType.SUBMIT, 0)]
    assert written(h.actions, LOG) == []
    h.request(m.ActOnJobs(action=m.JobAction.Remove, ids=("1.0",)))
    h.actions.clear()
    h.tick(h.now + 30.0)
    assert [(t, p, when) for t, _, p, when in written(h.actions, NODES)] == [(EventType.SUBMIT, 1, h.now)]
    assert written(h.actions, LOG) == []


def test_a_nodes_log_that_is_the_spooled_jobs_own_log_gets_nothing_at_submit():
    h = started()
    h.submit(spooled("queue", f"dagman_log = {LOG}"))
    assert [a for a in h.actions if isinstance(a, WriteUserLog)] == []


def test_the_release_from_the_spooling_hold_writes_no_released_event():
    """HTCondor's schedd releases a job whose input was spooled with ``write_to_user_log``
    false; a job held for any other reason gets its RELEASED event as ever."""
    h = started()
    h.submit(spooled("queue", f"dagman_log = {NODES}"))
    h.submit(f"executable = /bin/echo\nlog = {LOG}\ndagman_log = {NODES}\nhold = true\nqueue\n")
    h.queue.set_attributes((1, 0), {"HTCSpooledInput": '"condor_exec.exe"'})  # as schedd.spool's rewrite
    h.actions.clear()
    reply = h.request(m.ActOnJobs(action=m.JobAction.Release, ids=("1.0", "2.0"), reason="input data files spooled"))
    assert reply.success == 2
    assert [(t, c) for t, c, _, _ in written(h.actions, LOG)] == [(EventType.JOB_RELEASED, 2)]
    assert [(t, c) for t, c, _, _ in written(h.actions, NODES)] == [(EventType.JOB_RELEASED, 2)]


def test_a_job_waiting_for_its_spooled_input_cannot_be_released():
    """As HTCondor's condor_release (AR_BAD_STATUS for HoldReasonCode 16): released, the job
    would run without its input, with the submitter's log as its UserLog."""
    h = started()
    h.submit(spooled("queue"))
    h.actions.clear()
    reply = h.request(m.ActOnJobs(action=m.JobAction.Release, ids=("1.0",)))
    assert (reply.success, reply.bad_status) == (0, 1)
    [job] = h.queue.query("true")
    assert ul.awaits_spooled_input(job) and [a for a in h.actions if isinstance(a, WriteUserLog)] == []

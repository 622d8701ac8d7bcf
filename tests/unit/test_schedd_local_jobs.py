"""The schedd core's scheduler- and local-universe jobs, with a fake clock and an in-memory
queue: the core asks its service to start and signal processes and hears how they end."""

from __future__ import annotations

import signal

import pytest

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.schedd.core import Schedd, ScheddSettings
from htc.daemons.schedd.events import (LocalJobExited, LocalJobFailed, LocalJobStarted, SignalLocalJob, StartLocalJob,
                                       WriteUserLog)
from htc.daemons.schedd.requests import description_message
from htc.eventlog.events import EventType as E
from htc.jobqueue import JobNotFound, JobQueue, JobStatus
from htc.wire import messages as m
from htc.wire.transport import PeerInfo


class Harness:
    def __init__(self, queue: JobQueue | None = None, **settings):
        self.queue = queue or JobQueue.open(":memory:")
        knobs = dict(min_interval=1.0, interval=300.0, periodic_interval=60.0, local_kill_timeout=10.0)
        knobs.update(settings)
        self.core = Schedd(ScheddSettings(**knobs), self.queue, user_of_uid={1000: "alice"}.get, own_uid=0)
        self.now = 1000.0
        self.conn = 0
        self.actions: list[c.Action] = []

    def feed(self, event: c.Event) -> list[c.Action]:
        out = self.core.handle(event, self.now)
        self.actions += out
        return out

    def request(self, msg: m.Message) -> m.Message:
        self.conn += 1
        out = self.feed(c.Received(msg, self.conn, PeerInfo(uid=1000)))
        [reply] = [a.msg for a in out if isinstance(a, c.Reply) and a.conn_id == self.conn]
        return reply

    def submit(self, text: str) -> int:
        reply = self.request(description_message(text, "/work", "job.sub"))
        assert isinstance(reply, m.SubmitReply), reply
        return reply.cluster_id

    def act(self, action: m.JobAction, cluster: int) -> m.ActOnJobsReply:
        return self.request(m.ActOnJobs(action=action, ids=(f"{cluster}.0",)))

    def settle(self) -> list[c.Action]:
        """Let the clock reach the core's next deadline (the prompt ads: new local jobs start)."""
        deadline = self.core.next_deadline()
        self.now = max(self.now, deadline if deadline is not None else self.now)
        return self.feed(c.Tick())

    def status(self, cluster: int) -> JobStatus | None:
        try:
            return JobStatus(self.queue.get_job((cluster, 0)).status)
        except JobNotFound:
            return None


def of(kind: type, out: list[c.Action]) -> list:
    return [a for a in out if isinstance(a, kind)]


def events(out: list[c.Action], path: str = "/work/s.log") -> list[E]:
    return [e.type for a in of(WriteUserLog, out) if a.path == path for e in a.events]


SCHED = "universe = scheduler\nexecutable = run.sh\nlog = s.log\n"


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.feed(c.Started())
    return harness


def start(h: Harness, text: str = SCHED + "queue\n") -> tuple[int, StartLocalJob]:
    cluster = h.submit(text)
    [action] = of(StartLocalJob, h.settle())
    assert action.job_id == (cluster, 0) and h.status(cluster) is JobStatus.RUNNING
    h.feed(LocalJobStarted((cluster, 0), 4242))
    return cluster, action


def test_a_scheduler_job_is_never_idle_work_for_the_negotiator(h):
    h.core.settings = ScheddSettings(start_scheduler_universe="false")  # they stay idle
    h.submit(SCHED + "queue 2\n")
    out = h.settle()
    assert of(StartLocalJob, out) == [] and h.status(1) is JobStatus.IDLE
    ads = {msg.ad_type: ClassAd(msg.ad_text) for msg in (a.msg for a in out if isinstance(a, c.Send))
           if isinstance(msg, m.UpdateAd)}
    assert ads[m.AdType.Submitter]["IdleJobs"] == 0
    assert ads[m.AdType.Schedd]["TotalSchedulerJobsIdle"] == 2 and ads[m.AdType.Schedd]["TotalIdleJobs"] == 0
    assert not [a for a in out if isinstance(a, c.Send) and isinstance(a.msg, m.Reschedule)]
    reply = h.request(m.GetResourceRequests(submitter="alice@localhost", significant_attributes=()))
    assert reply.requests == ()


def test_it_starts_with_its_arguments_environment_and_files_and_completes(h):
    cluster, action = start(h, SCHED + 'arguments = "a \'b c\'"\nenvironment = "X=1"\ninput = in\n'
                               "output = out\nqueue\n")
    assert action.argv == ("/work/run.sh", "a", "b c") and action.cwd == "/work"
    assert dict(action.env) == {"X": "1", "CONDOR_ID": f"{cluster}.0"}
    assert (action.stdin, action.stdout, action.stderr) == ("/work/in", "/work/out", "/dev/null")
    assert events(h.actions) == [E.SUBMIT, E.EXECUTE]
    h.now += 5
    out = h.feed(LocalJobExited((cluster, 0), 7, user_cpu=1.5))
    assert events(out) == [E.JOB_TERMINATED] and h.status(cluster) is None
    [row] = h.queue.history(f"ClusterId == {cluster}")
    assert (row["ExitCode"], float(row["RemoteWallClockTime"]), float(row["RemoteUserCpu"])) == ("7", 5.0, 1.5)


def test_start_scheduler_universe_limits_how_many_run(h):
    h.core.settings = ScheddSettings(start_scheduler_universe="TotalSchedulerJobsRunning < 1")
    first = h.submit(SCHED + "queue\n")
    second = h.submit(SCHED + "queue\n")
    assert [a.job_id for a in of(StartLocalJob, h.settle())] == [(first, 0)]
    h.feed(LocalJobStarted((first, 0), 1))
    out = h.feed(LocalJobExited((first, 0), 0))
    out += h.settle()
    assert [a.job_id for a in of(StartLocalJob, out)] == [(second, 0)]


def test_on_exit_remove_false_requeues_and_starts_again_after_its_cool_down(h):
    cluster, _ = start(h, SCHED + "on_exit_remove = ExitCode <= 2\nqueue\n")
    exited = h.now
    out = h.feed(LocalJobExited((cluster, 0), 3))
    assert events(out) == [E.JOB_EVICTED] and h.status(cluster) is JobStatus.IDLE
    job = h.queue.get_job((cluster, 0))
    assert (job["NumJobCoolDowns"], job["JobCoolDownExpiration"]) == ("1", str(int(exited + 300)))
    out = h.settle()
    assert of(StartLocalJob, out) == []
    while h.now < exited + 300 and not of(StartLocalJob, out):
        out = h.settle()
    assert h.now >= exited + 300 and [a.job_id for a in of(StartLocalJob, out)] == [(cluster, 0)]


def test_disable_cool_down_or_a_zero_duration_start_it_again_at_once():
    for knobs, extra in (({}, "+DisableCoolDown = true\n"), ({"scheduler_cool_down": 0}, "")):
        h = Harness(**knobs)
        h.feed(c.Started())
        cluster, _ = start(h, SCHED + extra + "on_exit_remove = false\nqueue\n")
        h.feed(LocalJobExited((cluster, 0), 3))
        assert [a.job_id for a in of(StartLocalJob, h.settle())] == [(cluster, 0)]


def test_rm_signals_then_kills_and_the_job_leaves_once_its_process_is_gone(h):
    cluster, _ = start(h, SCHED + "remove_kill_sig = SIGUSR1\nqueue\n")
    assert h.act(m.JobAction.Remove, cluster).success == 1
    assert of(SignalLocalJob, h.actions) == [SignalLocalJob((cluster, 0), int(signal.SIGUSR1))]
    assert h.status(cluster) is JobStatus.REMOVED and E.JOB_ABORTED not in events(h.actions)
    h.now += 9.9
    assert of(SignalLocalJob, h.feed(c.Tick())) == []
    h.now += 0.1
    assert of(SignalLocalJob, h.feed(c.Tick())) == [SignalLocalJob((cluster, 0), int(signal.SIGKILL))]
    out = h.feed(LocalJobExited((cluster, 0), None, int(signal.SIGKILL)))
    assert events(out) == [E.JOB_EVICTED, E.JOB_ABORTED] and h.status(cluster) is None


def test_hold_uses_the_hold_kill_sig_and_release_runs_it_again(h):
    cluster, _ = start(h, SCHED + "hold_kill_sig = SIGINT\nqueue\n")
    assert h.act(m.JobAction.Hold, cluster).success == 1
    assert of(SignalLocalJob, h.actions)[-1].signal == int(signal.SIGINT)
    out = h.feed(LocalJobExited((cluster, 0), None, int(signal.SIGINT)))
    assert events(out) == [] and h.status(cluster) is JobStatus.HELD
    assert h.act(m.JobAction.Release, cluster).success == 1
    assert [a.job_id for a in of(StartLocalJob, h.settle())] == [(cluster, 0)]


def test_a_start_that_fails_holds_the_job_with_the_reason(h):
    cluster = h.submit(SCHED + "queue\n")
    h.settle()
    out = h.feed(LocalJobFailed((cluster, 0), "File '/work/run.sh' is missing or not executable", 13))
    assert events(out) == [E.JOB_HELD] and h.status(cluster) is JobStatus.HELD
    job = h.queue.get_job((cluster, 0))
    assert job["HoldReasonCode"] == "6" and job["HoldReasonSubCode"] == "13"


def test_arguments_that_do_not_parse_hold_the_job(h):
    cluster = h.submit(SCHED + "queue\n")
    h.queue.set_attributes((cluster, 0), {"Arguments": '"a \'b"'})
    h.core.settings = ScheddSettings()
    out = h.settle()
    assert of(StartLocalJob, out) == [] and h.status(cluster) is JobStatus.HELD


def test_a_restarted_schedd_runs_the_running_job_again(h):
    cluster, _ = start(h)
    h2 = Harness(h.queue)
    out = h2.feed(c.Started())
    assert [a.job_id for a in of(StartLocalJob, out)] == [(cluster, 0)]
    assert h2.queue.get_job((cluster, 0))["NumJobStarts"] == "2"


def test_a_restarted_schedd_finishes_a_removal_its_predecessor_began(h):
    cluster, _ = start(h)
    h.act(m.JobAction.Remove, cluster)
    h2 = Harness(h.queue)
    out = h2.feed(c.Started())  # (the outbox of this in-memory queue was never paid: its events come again)
    assert events(out)[-1] == E.JOB_ABORTED and events(out).count(E.JOB_ABORTED) == 1
    assert h2.status(cluster) is None


def test_other_job_remove_requirements_remove_the_matching_jobs(h):
    dag, _ = start(h, SCHED + '+OtherJobRemoveRequirements = "DAGManJobId =?= $(Cluster)"\nqueue\n')
    node = h.submit(f"executable = /bin/true\nlog = n.log\n+DAGManJobId = {dag}\nqueue 2\n")
    other = h.submit("executable = /bin/true\nqueue\n")
    h.act(m.JobAction.Remove, dag)
    assert events(h.actions, "/work/n.log") == [E.SUBMIT, E.SUBMIT, E.JOB_ABORTED, E.JOB_ABORTED]
    assert h.queue.query(f"ClusterId == {node}") == [] and h.status(other) is JobStatus.IDLE


def test_a_job_killed_by_a_signal_it_was_not_sent_terminates_by_that_signal(h):
    cluster, _ = start(h)
    out = h.feed(LocalJobExited((cluster, 0), None, int(signal.SIGSEGV), core_dumped=True))
    [event] = [e for a in of(WriteUserLog, out) for e in a.events]
    assert event.type == E.JOB_TERMINATED and event.signal == int(signal.SIGSEGV) and not event.terminated_normally
    [row] = h.queue.history(f"ClusterId == {cluster}")
    assert (row["ExitBySignal"], row["ExitSignal"]) == ("true", str(int(signal.SIGSEGV)))


def test_vacate_makes_it_idle_and_it_runs_again(h):
    cluster, _ = start(h, SCHED + "kill_sig = SIGHUP\nqueue\n")
    assert h.act(m.JobAction.Vacate, cluster).success == 1
    assert of(SignalLocalJob, h.actions)[-1].signal == int(signal.SIGHUP)
    out = h.feed(LocalJobExited((cluster, 0), 0))
    assert events(out) == [E.JOB_EVICTED] and h.status(cluster) is JobStatus.IDLE
    assert [a.job_id for a in of(StartLocalJob, h.settle())] == [(cluster, 0)]


def test_suspend_does_not_apply(h):
    cluster, _ = start(h)
    assert h.act(m.JobAction.Suspend, cluster).bad_status == 1


def test_periodic_hold_and_remove_stop_the_process(h):
    held, _ = start(h, SCHED + "periodic_hold = true\nqueue\n")
    removed = h.submit(SCHED + "periodic_remove = JobStatus == 2\nqueue\n")
    h.settle()
    h.feed(LocalJobStarted((removed, 0), 2))
    h.now += 60.0
    out = h.feed(c.Tick())
    assert {a.job_id for a in of(SignalLocalJob, out)} == {(held, 0), (removed, 0)}
    assert h.status(held) is JobStatus.HELD and h.status(removed) is JobStatus.REMOVED
    out = h.feed(LocalJobExited((removed, 0), None, int(signal.SIGTERM)))
    assert events(out).count(E.JOB_ABORTED) == 0 and h.status(removed) is None  # written when it fired
    assert events(h.actions).count(E.JOB_ABORTED) == 1


def test_max_running_scheduler_jobs_per_owner():
    h = Harness(max_scheduler_jobs_per_owner=1)
    h.feed(c.Started())
    first = h.submit(SCHED + "queue 2\n")
    local = h.submit("universe = local\nexecutable = /bin/true\nqueue\n")
    assert [a.job_id for a in of(StartLocalJob, h.settle())] == [(first, 0), (local, 0)]
    h = Harness(max_scheduler_jobs_per_owner=0)
    h.feed(c.Started())
    h.submit(SCHED + "queue\n")
    assert of(StartLocalJob, h.settle()) == []

"""The schedd core with a fake clock: a list of events, a number for ``now``, and an in-memory queue.

The harness plays every other party: the tool that submits, the negotiator that matches, the
startd that answers claims and activations, and the starter that reports. Each test follows
one story from submit to the job's end and checks the replies, the requests the schedd sends,
the queue, and the user-log events it asks to write.
"""

from __future__ import annotations

import pytest

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.core import IllegalTransition
from htc.daemons.schedd.core import Schedd, ScheddSettings
from htc.daemons.calls import Call, CallDone, CallFailed
from htc.daemons.schedd.requests import description_message
from htc.daemons.schedd.events import Owed, WriteUserLog
from htc.daemons.schedd.owed import owed_writes
from htc.daemons.schedd.shadow import Shadow
from htc.daemons.schedd.states import SHADOW, ClaimState, ShadowEvent, ShadowState
from htc.eventlog.events import EventType
from htc.jobqueue import JobNotFound, JobQueue, JobStatus
from htc.wire import messages as m
from htc.wire.transport import PeerInfo

ALICE, BOB = 1000, 1001
USERS = {ALICE: "alice", BOB: "bob"}
SLOT_AD = ('[ Name = "slot1@exec"; Cpus = 4; Memory = 8192; Disk = 1000000; Arch = "X86_64"; OpSys = "LINUX"; '
           'Requirements = true; MyAddress = "startd"; HasFileTransfer = true; '
           'CondorVersion = "$CondorVersion: 25.14.1 2026-01-01 BuildID: htc $" ]')
DSLOT_AD = ('[ Name = "slot1_1@exec"; Cpus = 1; Memory = 128; Disk = 2048; Arch = "X86_64"; OpSys = "LINUX"; '
            'Requirements = true; MyAddress = "startd"; HasFileTransfer = true; '
           'CondorVersion = "$CondorVersion: 25.14.1 2026-01-01 BuildID: htc $" ]')


def job(text: str = "", queue: str = "queue", log: str = "/logs/job.log") -> str:
    return f"executable = /bin/echo\narguments = $(Cluster).$(Process)\nlog = {log}\n{text}\n{queue}\n"


class Harness:
    """One schedd core and the clock; ``send`` feeds an event and keeps the actions."""

    def __init__(self, queue: JobQueue | None = None, **settings):
        self.queue = queue or JobQueue.open(":memory:")
        knobs = dict(min_interval=1.0, interval=300.0, alive_interval=60.0, periodic_interval=60.0,
                     reconnect_retry=2.0)
        knobs.update(settings)
        self.core = Schedd(ScheddSettings(**knobs), self.queue, user_of_uid=USERS.get, own_uid=0)
        self.now = 1000.0
        self.conn = 0
        self.actions: list[c.Action] = []

    def feed(self, event: c.Event) -> list[c.Action]:
        out = self.core.handle(event, self.now)
        self.actions += out
        return out

    def start(self) -> list[c.Action]:
        return self.feed(c.Started())

    def request(self, msg: m.Message, uid: int = ALICE) -> m.Message:
        self.conn += 1
        out = self.feed(c.Received(msg, self.conn, PeerInfo(uid=uid)))
        replies = [a.msg for a in out if isinstance(a, c.Reply) and a.conn_id == self.conn]
        assert len(replies) == 1, f"expected one reply to {type(msg).__name__}, got {out}"
        return replies[0]

    def tick(self, to: float) -> list[c.Action]:
        self.now = to
        return self.feed(c.Tick())

    def submit(self, text: str, uid: int = ALICE) -> int:
        reply = self.request(description_message(text, "/work", "job.sub"), uid)
        assert isinstance(reply, m.SubmitReply), reply
        return reply.cluster_id

    def calls(self, kind: type, out: list[c.Action] | None = None) -> list[Call]:
        return [a for a in (self.actions if out is None else out) if isinstance(a, Call) and isinstance(a.msg, kind)]

    def events(self, out: list[c.Action] | None = None) -> list[EventType]:
        return [e.type for a in (self.actions if out is None else out) if isinstance(a, WriteUserLog) for e in a.events]

    def status(self, cluster: int, proc: int = 0) -> JobStatus | None:
        """The job's status in the queue; None only when it is not there (retired or never
        submitted): any other failure is the test's to see."""
        try:
            return JobStatus(self.queue.get_job((cluster, proc)).status)
        except JobNotFound:
            return None

    # -- playing the negotiator and the startd -----------------------------------------------------

    def match(self, submitter: str = "alice@localhost", claim_id: str = "slot1@exec#1#aa") -> Call:
        reqs = self.request(m.GetResourceRequests(submitter=submitter, significant_attributes=("RequestMemory",)))
        assert isinstance(reqs, m.ResourceRequests) and reqs.requests
        out_before = len(self.actions)
        assert isinstance(self.request(m.MatchNotify(
            claim_id=claim_id, submitter=submitter, slot_name="slot1@exec", startd_address="startd",
            slot_ad=SLOT_AD, autocluster_id=reqs.requests[0].autocluster_id)), m.Ack)
        [call] = self.calls(m.RequestClaim, self.actions[out_before:])
        return call

    def grant(self, call: Call, new_id: str = "slot1_1@exec#2#bb") -> list[c.Action]:
        reply = m.ClaimReply(claim_id=new_id, accepted=True, slot_ad=DSLOT_AD)
        return self.feed(CallDone(call.to, call.msg, reply, call.cookie))

    def ack(self, call: Call, reply: m.Message | None = None) -> list[c.Action]:
        return self.feed(CallDone(call.to, call.msg, reply or m.Ack(), call.cookie))

    def fail(self, call: Call, code: str, error: str = "no") -> list[c.Action]:
        return self.feed(CallFailed(call.to, call.msg, code, error, call.cookie))

    def exited(self, claim_id: str, job_id: str, **fields) -> m.Message:
        return self.request(m.JobExited(claim_id=claim_id, job_id=job_id, **fields))


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.start()
    return harness


# --- stage 1: the queue over the wire ------------------------------------------------------------


def test_submit_description_is_expanded_in_the_schedd_and_logged_after_commit(h):
    out_before = len(h.actions)
    cluster = h.submit(job(queue="queue 3"))
    out = h.actions[out_before:]
    jobs = h.queue.query(f"ClusterId == {cluster}")
    assert [j["Args"] for j in jobs] == [f'"{cluster}.{p}"' for p in range(3)]  # $(Cluster) is the real id
    assert {j["Owner"] for j in jobs} == {'"alice"'} and {j["User"] for j in jobs} == {'"alice@localhost"'}
    assert h.events(out) == [EventType.SUBMIT] * 3
    # The reply comes last: after the log write that follows the commit.
    assert isinstance(out[-1], c.Reply) and isinstance(out[-1].msg, m.SubmitReply)
    assert out[-1].msg.num_procs == 3


def test_malformed_description_names_file_line_and_queues_nothing(h):
    reply = h.request(description_message("executable = /bin/echo\nthis is wrong\nqueue\n", "/work", "bad.sub"))
    assert isinstance(reply, m.ErrorReply) and reply.code == "bad_request"
    assert "Line 2 of submit file bad.sub" in reply.message and "No jobs were queued" in reply.message
    assert h.queue.statistics().jobs == 0
    reply = h.request(description_message("executable = /bin/echo\n", "/work", "noqueue.sub"))
    assert isinstance(reply, m.ErrorReply) and "queue" in reply.message
    assert h.queue.statistics().jobs == 0


def test_ads_submit_gets_ids_and_owner_from_the_schedd(h):
    msg = m.Submit(cluster_ad='[ ClusterId = 1; Cmd = "/bin/true"; JobStatus = 1; Owner = "alice" ]',
                   proc_ads=('[ ProcId = 7; Args = "a" ]', '[ Args = "b" ]'))
    reply = h.request(msg)
    assert reply.cluster_id == 1 and reply.num_procs == 2
    jobs = h.queue.query("true")
    assert [(j.proc_id, j["Args"], j["JobLeaseDuration"]) for j in jobs] == [(0, '"a"', "2400"), (1, '"b"', "2400")]
    bad = h.request(m.Submit(cluster_ad='[ Cmd = "/bin/true"; Owner = "bob" ]', proc_ads=("[ ]",)), uid=ALICE)
    assert isinstance(bad, m.ErrorReply) and bad.code == "denied"
    assert "alice may not submit jobs owned by bob" in bad.message
    broken = h.request(m.Submit(cluster_ad='[ Cmd = ]', proc_ads=("[ ]",)))
    assert isinstance(broken, m.ErrorReply) and "cluster_ad is not ClassAd text" in broken.message


def test_a_submit_sent_again_with_its_submission_id_queues_once_and_gets_the_original_reply(h):
    # The client lost the first reply and sends the very same Submit again.
    msg = m.Submit(cluster_ad='[ Cmd = "/bin/true" ]', proc_ads=('[ Args = "a" ]', '[ Args = "b" ]'),
                   submission_id="client-7:batch-1")
    first = h.request(msg)
    before = len(h.actions)
    again = h.request(msg)
    assert isinstance(first, m.SubmitReply) and again == first
    assert h.queue.statistics().jobs == 2 and h.events(h.actions[before:]) == []  # no SUBMIT event either
    # The same id with other jobs is refused, not answered with the first cluster.
    other = h.request(m.Submit(cluster_ad='[ Cmd = "/bin/false" ]', proc_ads=("[ ]",),
                               submission_id="client-7:batch-1"))
    assert isinstance(other, m.ErrorReply) and other.code == "bad_request" and "new id" in other.message
    # Ids are per owner: bob's submission of the same id is his own; without an id nothing is remembered.
    bobs = h.request(m.Submit(cluster_ad='[ Cmd = "/bin/true" ]', proc_ads=('[ Args = "a" ]', '[ Args = "b" ]'),
                              submission_id="client-7:batch-1"), uid=BOB)
    assert bobs.cluster_id == first.cluster_id + 1
    plain = m.Submit(cluster_ad='[ Cmd = "/bin/true" ]', proc_ads=("[ ]",))
    assert h.request(plain).cluster_id != h.request(plain).cluster_id
    assert h.queue.statistics().jobs == 6


def test_a_remembered_submission_survives_a_restart_and_is_forgotten_in_time(tmp_path):
    from htc.jobqueue import promises

    path = str(tmp_path / "q.db")
    h = Harness(JobQueue.open(path))
    h.start()
    msg = description_message(job(queue="queue 3"), "/work", "job.sub")
    msg = m.Submit(cluster_ad=msg.cluster_ad, proc_ads=msg.proc_ads, submission_id="s1")
    first = h.request(msg)
    h.queue.close()
    h = Harness(JobQueue.open(path))  # the schedd restarted: the submission is in the file
    h.start()
    assert h.request(msg) == first and h.queue.statistics().jobs == 3
    # A week later it is forgotten (when a newer submission prunes the table).
    h.now += promises.SUBMISSION_LIFETIME + 1
    h.request(m.Submit(cluster_ad='[ Cmd = "/bin/true" ]', proc_ads=("[ ]",), submission_id="s2"))
    assert h.queue.find_submission("alice", "s1") is None
    assert h.queue.find_submission("alice", "s2") is not None
    h.queue.close()


def test_query_projects_and_hides_the_claim_id(h):
    h.submit(job(queue="queue 2"))
    h.queue.set_attributes((1, 0), {"ClaimId": '"secret"'})
    reply = h.request(m.QueryJobs(constraint="ProcId == 0"))
    [ad] = [ClassAd(t) for t in reply.ads]
    assert ad["ProcId"] == 0 and "ClaimId" not in ad
    reply = h.request(m.QueryJobs(projection=("ProcId",)))
    assert [ClassAd(t).get("ProcId") for t in reply.ads] == [0, 1]
    bad = h.request(m.QueryJobs(constraint="ProcId =="))
    assert isinstance(bad, m.ErrorReply) and bad.code == "bad_request"


def test_hold_release_remove_idle_jobs_with_outcomes_and_events(h):
    h.submit(job(queue="queue 2"))
    out_before = len(h.actions)
    r = h.request(m.ActOnJobs(action=m.JobAction.Hold, ids=("1.0",), reason="wait"))
    assert (r.success, r.already_done) == (1, 0) and h.status(1, 0) is JobStatus.HELD
    r = h.request(m.ActOnJobs(action=m.JobAction.Hold, ids=("1",)))
    assert (r.success, r.already_done) == (1, 1)
    r = h.request(m.ActOnJobs(action=m.JobAction.Release, constraint="ProcId == 0"))
    assert r.success == 1 and h.status(1, 0) is JobStatus.IDLE
    r = h.request(m.ActOnJobs(action=m.JobAction.Release, ids=("1.0",)))
    assert r.bad_status == 1
    r = h.request(m.ActOnJobs(action=m.JobAction.Remove, ids=("1", "9.9")))
    assert (r.success, r.not_found) == (2, 1) and h.queue.statistics().jobs == 0
    assert h.events(h.actions[out_before:]) == [EventType.JOB_HELD, EventType.JOB_HELD, EventType.JOB_RELEASED,
                                                EventType.JOB_ABORTED, EventType.JOB_ABORTED]
    assert [row["ProcId"] for row in h.queue.history()] == ["1", "0"]


def test_only_owners_act_on_and_edit_their_jobs(h):
    h.submit(job())
    r = h.request(m.ActOnJobs(action=m.JobAction.Hold, ids=("1.0",)), uid=BOB)
    assert (r.success, r.permission_denied) == (0, 1) and h.status(1, 0) is JobStatus.IDLE
    bad = h.request(m.EditJobs(attributes={"JobPrio": "3"}, ids=("1",)), uid=BOB)
    assert isinstance(bad, m.ErrorReply) and bad.code == "denied" and "alice" in bad.message
    assert h.request(m.ActOnJobs(action=m.JobAction.Hold, ids=("1.0",)), uid=0).success == 1  # root may


def test_edit_sets_attributes_and_priority_or_changes_nothing(h):
    h.submit(job(queue="queue 2"))
    r = h.request(m.EditJobs(attributes={"JobPrio": "5", "Night": '"yes"'}, ids=("1",)))
    assert r.matched == 2
    assert [(j.prio, j["Night"]) for j in h.queue.query("true")] == [(5, '"yes"'), (5, '"yes"')]
    assert h.events().count(EventType.ATTRIBUTE_UPDATE) == 4
    bad = h.request(m.EditJobs(attributes={"Night": '"no"', "Owner": '"bob"'}, ids=("1",)))
    assert isinstance(bad, m.ErrorReply) and "protected" in bad.message
    assert {j["Night"] for j in h.queue.query("true")} == {'"yes"'}  # all or nothing


def sent(out: list[c.Action], kind: type) -> list[m.Message]:
    return [a.msg for a in out if isinstance(a, c.Send) and isinstance(a.msg, kind)]


def test_new_jobs_are_advertised_with_a_reschedule_at_once_other_changes_after_min_interval(h):
    # A burst of submits: one ad update and one Reschedule, 5 ms after the first submit,
    # whatever SCHEDD_MIN_INTERVAL (1 s here) says.
    h.submit(job(queue="queue 2"))
    h.now += 0.001
    h.submit(job(), uid=BOB)
    assert h.core.next_deadline() == 1000.005
    out = h.tick(1000.005)
    ads = {msg.name: ClassAd(msg.ad_text) for msg in sent(out, m.UpdateAd)}
    assert ads["alice@localhost"]["IdleJobs"] == 2 and ads["bob@localhost"]["IdleJobs"] == 1
    assert ads["schedd@localhost"]["TotalIdleJobs"] == 3
    assert len(sent(out, m.Reschedule)) == 1
    assert h.core.next_deadline() == 1060.0  # nothing changed: the periodic policy is next, not an ad
    # A change that adds no work waits for SCHEDD_MIN_INTERVAL after the last update.
    h.request(m.ActOnJobs(action=m.JobAction.Remove, ids=("2",)), uid=BOB)
    assert h.core.next_deadline() == 1001.005
    out = h.tick(1001.005)
    ads = {msg.name: ClassAd(msg.ad_text) for msg in sent(out, m.UpdateAd)}
    assert ads["bob@localhost"]["IdleJobs"] == 0  # a vanished submitter is told once it has nothing
    out = h.tick(1003.0)
    assert not [a for a in out if isinstance(a, c.Send)]
    # A release is new work, and so is a tool's Reschedule (condor_reschedule) even without
    # changes: fresh ads, then the negotiator is asked.
    h.request(m.ActOnJobs(action=m.JobAction.Hold, ids=("1",)))
    assert sent(h.tick(1003.0), m.Reschedule) == []  # nothing idle: nothing to negotiate
    h.request(m.ActOnJobs(action=m.JobAction.Release, ids=("1.0",)))
    assert h.core.next_deadline() == 1003.005
    assert len(sent(h.tick(1003.005), m.Reschedule)) == 1
    assert h.request(m.Reschedule()) == m.Ack(detail="negotiation requested")
    out = h.tick(1003.01)
    assert sent(out, m.UpdateAd) and len(sent(out, m.Reschedule)) == 1


# --- stage 2 and 3: claim, run, finish, reuse ----------------------------------------------------


def run_first_job(h: Harness) -> tuple[str, Call]:
    """Match, claim and activate; return the claim id and the ActivateClaim call."""
    claim_call = h.match()
    assert claim_call.msg.lease_duration == float(h.queue.get_job((1, 0))["JobLeaseDuration"])
    out = h.grant(claim_call)
    [activate] = h.calls(m.ActivateClaim, out)
    assert activate.msg.claim_id == "slot1_1@exec#2#bb" and activate.msg.shadow_address == "schedd"
    assert "ClaimId" not in ClassAd(activate.msg.job_ad)
    return activate.msg.claim_id, activate


def test_job_runs_completes_and_the_claim_is_reused_then_released(h):
    h.submit(job(queue="queue 2"))
    claim_id, activate = run_first_job(h)
    assert h.status(1, 0) is JobStatus.RUNNING and h.queue.get_job((1, 0))["RemoteHost"] == '"slot1_1@exec"'
    assert h.events()[-1] is not EventType.EXECUTE  # not before the startd said yes
    out = h.ack(activate)
    assert h.events(out) == [EventType.EXECUTE]
    update = '[ ImageSize = 2048; MemoryUsage = 2; JobState = "Running" ]'
    assert h.request(m.StarterUpdate(claim_id=claim_id, job_id="1.0", update_ad=update)) == m.Ack()
    assert h.events()[-1] is EventType.IMAGE_SIZE
    out_before = len(h.actions)
    assert h.exited(claim_id, "1.0", exit_code=0, usage_ad="[ RemoteUserCpu = 1.5; RemoteSysCpu = 0.5 ]") == m.Ack()
    out = h.actions[out_before:]
    assert h.events(out) == [EventType.JOB_TERMINATED]
    [done] = h.queue.history("ProcId == 0")
    assert done["JobStatus"] == "4" and done["ExitCode"] == "0" and float(done["RemoteUserCpu"]) == 1.5
    # The claim is reused at once for the next idle job, without the negotiator.
    [again] = h.calls(m.ActivateClaim, out)
    assert again.msg.claim_id == claim_id and ClassAd(again.msg.job_ad)["ProcId"] == 1
    h.ack(again)
    h.now += 5
    out_before = len(h.actions)
    h.exited(claim_id, "1.1", exit_signal=9)
    out = h.actions[out_before:]
    [term] = [e for a in out if isinstance(a, WriteUserLog) for e in a.events]
    assert term.type is EventType.JOB_TERMINATED and not term.terminated_normally and term.signal == 9
    assert [a.msg for a in out if isinstance(a, c.Send) and isinstance(a.msg, m.ReleaseClaim)]
    assert h.core.claims == {} and h.core.shadows == {}


def _released(out: list[c.Action]) -> list[m.ReleaseClaim]:
    return [a.msg for a in out if isinstance(a, c.Send) and isinstance(a.msg, m.ReleaseClaim)]


def test_a_lingering_claim_starts_the_next_submit_at_once_then_is_released_when_unused():
    h = Harness(claim_linger=10.0)
    h.start()
    h.submit(job())
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    out = h.feed(c.Received(m.JobExited(claim_id=claim_id, job_id="1.0", exit_code=0), 99, PeerInfo(uid=0)))
    assert not _released(out) and h.core.claims[claim_id].state is ClaimState.IDLE
    # The same user's next submit starts on the kept claim: no negotiator, no new claim.
    h.now += 2
    before = len(h.actions)
    h.submit(job())
    out = h.actions[before:]
    [again] = h.calls(m.ActivateClaim, out)
    assert again.msg.claim_id == claim_id and ClassAd(again.msg.job_ad)["ClusterId"] == 2
    assert not h.calls(m.RequestClaim, out) and h.status(2) is JobStatus.RUNNING
    h.ack(again)
    h.exited(claim_id, "2.0", exit_code=0)
    # Unused for SCHEDD_CLAIM_LINGER seconds: released.
    assert h.core.next_deadline() <= h.now + 10.0
    assert not _released(h.tick(h.now + 9.0))
    out = h.tick(h.now + 1.5)
    assert [r.claim_id for r in _released(out)] == [claim_id] and h.core.claims == {}


def test_a_claim_is_not_kept_for_another_user_nor_while_other_jobs_wait():
    h = Harness(claim_linger=10.0)
    h.start()
    h.submit(job(queue="queue 2"))
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    # 1.1 is still idle when 1.0 ends: it takes the claim at once (plain reuse)...
    before = len(h.actions)
    h.exited(claim_id, "1.0", exit_code=0)
    [again] = h.calls(m.ActivateClaim, h.actions[before:])
    h.ack(again)
    # ...and when it ends nothing waits: the claim lingers.
    before = len(h.actions)
    h.exited(claim_id, "1.1", exit_code=0)
    assert not _released(h.actions[before:]) and claim_id in h.core.claims
    # Bob's job cannot use alice's claim: it is given back for the negotiator at once.
    before = len(h.actions)
    h.submit(job(), uid=BOB)
    out = h.actions[before:]
    assert not h.calls(m.ActivateClaim, out) and h.status(2) is JobStatus.IDLE
    assert [r.claim_id for r in _released(out)] == [claim_id] and h.core.claims == {}


def test_claim_linger_zero_releases_at_once(h):
    h.submit(job())
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    before = len(h.actions)
    h.exited(claim_id, "1.0", exit_code=0)
    assert [r.claim_id for r in _released(h.actions[before:])] == [claim_id]


def test_two_carves_of_one_partitionable_slot_are_two_claims(h):
    """Both matches of a p-slot in a cycle carry its one claim id; the second is no duplicate."""
    h.submit(job(queue="queue 2"))
    reqs = h.request(m.GetResourceRequests(submitter="alice@localhost", significant_attributes=("RequestMemory",)))
    pslot = SLOT_AD.replace("Cpus = 4;", "Cpus = 4; PartitionableSlot = true; SlotType = \"Partitionable\";")
    match = m.MatchNotify(claim_id="slot1@exec#1#aa", submitter="alice@localhost", slot_name="slot1@exec",
                          startd_address="startd", slot_ad=pslot, autocluster_id=reqs.requests[0].autocluster_id)
    h.request(match)
    h.request(match)
    first, second = h.calls(m.RequestClaim)
    assert first.msg.claim_id == second.msg.claim_id == "slot1@exec#1#aa" and first.cookie != second.cookie
    assert {ClassAd(c_.msg.job_ad)["ProcId"] for c_ in (first, second)} == {0, 1}
    for call, dslot in ((first, "slot1_1@exec#2#bb"), (second, "slot1_2@exec#3#cc")):
        [activate] = h.calls(m.ActivateClaim, h.grant(call, new_id=dslot))
        assert activate.msg.claim_id == dslot
    assert h.status(1, 0) is h.status(1, 1) is JobStatus.RUNNING
    # A static slot's match told twice is one claim.
    h.submit(job())
    h.request(m.MatchNotify(claim_id="slot2@exec#1#dd", submitter="alice@localhost", slot_name="slot2@exec",
                            startd_address="startd", slot_ad=SLOT_AD, autocluster_id=reqs.requests[0].autocluster_id))
    h.request(m.MatchNotify(claim_id="slot2@exec#1#dd", submitter="alice@localhost", slot_name="slot2@exec",
                            startd_address="startd", slot_ad=SLOT_AD, autocluster_id=reqs.requests[0].autocluster_id))
    assert len(h.calls(m.RequestClaim)) == 3


def test_max_retries_requeues_then_completes(h):
    h.submit(job("max_retries = 1"))
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    out_before = len(h.actions)
    h.exited(claim_id, "1.0", exit_code=3)
    out = h.actions[out_before:]
    [evicted] = [e for a in out if isinstance(a, WriteUserLog) for e in a.events]
    assert evicted.type is EventType.JOB_EVICTED and evicted.terminated_and_requeued and evicted.return_value == 3
    # Requeued, and the still-good claim takes it again at once (claim reuse).
    [again] = h.calls(m.ActivateClaim, out)
    assert h.status(1, 0) is JobStatus.RUNNING and h.queue.get_job((1, 0))["NumJobCompletions"] == "1"
    h.ack(again)
    h.exited(claim_id, "1.0", exit_code=3)
    [done] = h.queue.history()
    assert done["NumJobCompletions"] == "2" and done["JobStatus"] == "4"


def test_on_exit_hold_holds_the_job(h):
    h.submit(job("on_exit_hold = ExitCode != 0"))
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    h.exited(claim_id, "1.0", exit_code=2)
    assert h.status(1, 0) is JobStatus.HELD and h.events()[-1] is EventType.JOB_HELD
    assert h.queue.get_job((1, 0))["HoldReasonCode"] == "3"


def test_hold_and_remove_of_running_jobs_vacate_them_first(h):
    h.submit(job(queue="queue 2"))
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    out_before = len(h.actions)
    assert h.request(m.ActOnJobs(action=m.JobAction.Hold, ids=("1.0",))).success == 1
    [vacate] = h.calls(m.Vacate, h.actions[out_before:])
    assert vacate.msg.claim_id == claim_id and h.status(1, 0) is JobStatus.HELD
    h.ack(vacate)
    h.exited(claim_id, "1.0", vacated=True)
    assert h.status(1, 0) is JobStatus.HELD and h.core.shadows == {}
    assert claim_id not in h.core.claims  # a vacated claim ends at the startd: not reused

    h2 = Harness()
    h2.start()
    h2.submit(job())
    claim_id, activate = run_first_job(h2)
    h2.ack(activate)
    assert h2.request(m.ActOnJobs(action=m.JobAction.Remove, ids=("1.0",))).success == 1
    assert h2.status(1, 0) is JobStatus.REMOVED  # stays until its starter is gone
    h2.exited(claim_id, "1.0", exit_code=0)  # it finished before the vacate: still removed
    assert h2.status(1, 0) is None and h2.queue.history()[0]["JobStatus"] == "3"
    assert h2.events().count(EventType.JOB_TERMINATED) == 0


def test_vacate_job_makes_it_idle_with_an_evicted_event(h):
    h.submit(job())
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    assert h.request(m.ActOnJobs(action=m.JobAction.Vacate, ids=("1.0",))).success == 1
    assert h.status(1, 0) is JobStatus.RUNNING
    h.exited(claim_id, "1.0", vacated=True, usage_ad='[ VacateReason = "owner came back" ]')
    assert h.status(1, 0) is JobStatus.IDLE
    [evicted] = [e for a in h.actions if isinstance(a, WriteUserLog) for e in a.events
                 if e.type is EventType.JOB_EVICTED]
    assert evicted.reason == "owner came back"


def test_suspend_and_continue_follow_the_startd(h):
    h.submit(job())
    claim_id, activate = run_first_job(h)
    assert h.request(m.ActOnJobs(action=m.JobAction.Continue, ids=("1.0",))).bad_status == 1
    h.ack(activate)
    assert h.request(m.ActOnJobs(action=m.JobAction.Suspend, ids=("1.0",))).success == 1
    [suspend] = h.calls(m.Suspend)
    assert suspend.msg.claim_id == claim_id and h.status(1, 0) is JobStatus.RUNNING
    out = h.ack(suspend)
    assert h.status(1, 0) is JobStatus.SUSPENDED and h.events(out) == [EventType.JOB_SUSPENDED]
    assert h.request(m.ActOnJobs(action=m.JobAction.Continue, ids=("1.0",))).success == 1
    [resume] = h.calls(m.Continue)
    out = h.ack(resume)
    assert h.status(1, 0) is JobStatus.RUNNING and h.events(out) == [EventType.JOB_UNSUSPENDED]
    h.request(m.StarterUpdate(claim_id=claim_id, job_id="1.0", update_ad='[ JobState = "Suspended"; NumPids = 2 ]'))
    assert h.status(1, 0) is JobStatus.SUSPENDED  # the startd's own SUSPEND policy is followed too
    h.exited(claim_id, "1.0", exit_code=0)
    assert h.queue.history()[0]["JobStatus"] == "4"


def test_an_update_overtaken_by_a_continues_answer_does_not_suspend_the_job_again(h):
    """The startd sends an update at each suspension and answers the Suspend/Continue on another
    connection: the "Suspended" update of a suspension can arrive after the continue's answer.
    Its JobStateSequence is older than the answer's, so it changes nothing (it used to log a
    second SUSPENDED and UNSUSPENDED pair: test_pool_jobs' suspend test failed so on a busy machine)."""
    h.submit(job())
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    assert h.request(m.ActOnJobs(action=m.JobAction.Suspend, ids=("1.0",))).success == 1
    [suspend] = h.calls(m.Suspend)
    assert h.events(h.ack(suspend, m.Ack(sequence=1))) == [EventType.JOB_SUSPENDED]
    assert h.request(m.ActOnJobs(action=m.JobAction.Continue, ids=("1.0",))).success == 1
    [resume] = h.calls(m.Continue)
    assert h.events(h.ack(resume, m.Ack(sequence=2))) == [EventType.JOB_UNSUSPENDED]
    before = len(h.actions)
    stale = '[ JobState = "Suspended"; NumPids = 1; JobStateSequence = 1 ]'
    assert h.request(m.StarterUpdate(claim_id=claim_id, job_id="1.0", update_ad=stale)) == m.Ack()
    assert h.status(1, 0) is JobStatus.RUNNING and h.events(h.actions[before:]) == []
    fresh = '[ JobState = "Running"; NumPids = 1; JobStateSequence = 2 ]'
    assert h.request(m.StarterUpdate(claim_id=claim_id, job_id="1.0", update_ad=fresh)) == m.Ack()
    assert h.status(1, 0) is JobStatus.RUNNING and h.events(h.actions[before:]) == []
    policy = '[ JobState = "Suspended"; NumPids = 1; JobStateSequence = 3 ]'  # the startd's own SUSPEND
    h.request(m.StarterUpdate(claim_id=claim_id, job_id="1.0", update_ad=policy))
    assert h.status(1, 0) is JobStatus.SUSPENDED and h.events(h.actions[before:]) == [EventType.JOB_SUSPENDED]


def test_a_job_that_cannot_start_is_held_with_the_starters_reason(h):
    h.submit(job())
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    h.exited(claim_id, "1.0", vacated=True,
             usage_ad='[ StarterError = "Error from starter on slot1_1@exec: cannot start /bin/nope"; '
                      'HoldReasonCode = 6 ]')
    job_ad = h.queue.get_job((1, 0))
    assert h.status(1, 0) is JobStatus.HELD and job_ad["HoldReasonCode"] == "6"
    assert "cannot start /bin/nope" in job_ad["HoldReason"]


def starter_failed(h: Harness, claim_id: str, job_id: str, code: int, why: str) -> list[c.Action]:
    out_before = len(h.actions)
    assert h.exited(claim_id, job_id, vacated=True,
                    usage_ad=f'[ StarterError = "{why}"; HoldReasonCode = {code} ]') == m.Ack()
    return h.actions[out_before:]


def test_a_claim_whose_job_could_not_start_is_reused_or_released_never_dropped(h):
    """The startd keeps a claim Claimed/Idle after a failed start; forgetting it silently left
    the slot claimed by nobody until its lease ended, and the pool stalled."""
    h.submit(job(queue="queue 3"))
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    # The job's own input is missing (13): the job is held, the slot is fine -- the next job runs on it.
    out = starter_failed(h, claim_id, "1.0", 13, "cannot transfer missing.txt: no such file")
    assert h.status(1, 0) is JobStatus.HELD and h.queue.get_job((1, 0))["HoldReasonCode"] == "13"
    [again] = h.calls(m.ActivateClaim, out)
    assert again.msg.claim_id == claim_id and ClassAd(again.msg.job_ad)["ProcId"] == 1
    assert not sent(out, m.ReleaseClaim)
    h.ack(again)
    # Any other failed start may be the slot's fault (EXECUTE unreachable): the claim goes back
    # to the startd, and the negotiator is asked at once to place the job still idle.
    out = starter_failed(h, claim_id, "1.1", 6, "slot user 'nobody' cannot reach its sandbox")
    assert h.status(1, 1) is JobStatus.HELD and h.calls(m.ActivateClaim, out) == []
    [release] = sent(out, m.ReleaseClaim)
    assert release.claim_id == claim_id and "could not start" in release.reason
    assert h.core.claims == {} and h.status(1, 2) is JobStatus.IDLE
    assert h.core.next_deadline() == h.now + 0.005
    assert len(sent(h.tick(h.now + 0.005), m.Reschedule)) == 1


def test_duplicate_exit_reports_change_nothing(h):
    h.submit(job(queue="queue 2"))
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    h.exited(claim_id, "1.0", exit_code=0)
    history = h.queue.history()
    reply = h.exited(claim_id, "1.0", exit_code=0)
    assert reply == m.Ack(detail="already recorded") and h.queue.history() == history
    assert h.events().count(EventType.JOB_TERMINATED) == 1


def test_refused_claims_and_activations_put_jobs_back(h):
    h.submit(job())
    claim_call = h.match()
    h.feed(CallDone(claim_call.to, claim_call.msg,
                    m.ClaimReply(claim_id=claim_call.msg.claim_id, accepted=False, reason="START is false"),
                    claim_call.cookie))
    assert h.core.claims == {} and h.core.reserved == set() and h.status(1, 0) is JobStatus.IDLE
    claim_id, activate = run_first_job(h)
    out = h.fail(activate, "bad_request", "startd refused the request (bad_request): START is not true")
    assert h.status(1, 0) is JobStatus.IDLE and h.events(out) == [EventType.SHADOW_EXCEPTION]
    assert [c_.msg for c_ in out if isinstance(c_, c.Send) and isinstance(c_.msg, m.ReleaseClaim)]


def test_a_job_refused_three_times_is_held(h):
    h.submit(job())
    for attempt in range(3):
        claim_id, activate = run_first_job(h)
        h.fail(activate, "bad_request", "the starter could not run job 1.0: no such input file")
    job_ad = h.queue.get_job((1, 0))
    assert h.status(1, 0) is JobStatus.HELD and job_ad["HoldReasonCode"] == "6"
    assert "no such input file" in job_ad["HoldReason"] and job_ad["NumShadowExceptions"] == "3"


def test_a_claim_the_startd_ended_is_not_reused(h):
    h.submit(job(queue="queue 2"))
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    assert h.request(m.ReleaseClaim(claim_id=claim_id, reason="the owner came back")) == m.Ack()
    out_before = len(h.actions)
    h.exited(claim_id, "1.0", exit_code=0)
    out = h.actions[out_before:]
    assert h.calls(m.ActivateClaim, out) == [] and h.core.claims == {}
    assert not [a for a in out if isinstance(a, c.Send) and isinstance(a.msg, m.ReleaseClaim)]


def test_keepalives_follow_alive_interval_and_a_dropped_claim_requeues(h):
    h.submit(job())
    claim_id, activate = run_first_job(h)
    out = h.ack(activate)
    out += h.tick(h.now + 0.01)
    # A claim watch: the startd holds the answer (ALIVE_INTERVAL, at most 60 s), then it goes again.
    [alive] = h.calls(m.ClaimKeepAlive, out)
    assert alive.msg.watch == 60.0 and alive.timeout >= 90.0
    assert h.calls(m.ClaimKeepAlive, h.tick(h.now + 60.0)) == []  # one at a time
    out = h.ack(alive)
    [alive] = h.calls(m.ClaimKeepAlive, out)  # answered: the next watch goes at once
    out = h.fail(alive, "not_found", "startd holds no claim")
    assert h.status(1, 0) is JobStatus.IDLE and h.events(out) == [EventType.JOB_RECONNECT_FAILED]


def test_late_materialization_adds_jobs_as_others_finish(h):
    h.submit(job("max_materialize = 2", queue="queue 4"))
    assert [j.proc_id for j in h.queue.query("true")] == [0, 1]
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    h.exited(claim_id, "1.0", exit_code=0)  # the claim is reused for 1.1
    out = h.tick(h.now + 1.0)
    assert [j.proc_id for j in h.queue.query("true")] == [1, 2]
    assert h.events(out) == [EventType.SUBMIT]


def test_materialized_procs_submit_events_are_owed_with_them(h):
    # Committed with the procs, kept in the queue's outbox: a schedd killed before the service
    # writes them leaves them to the next one (schedd.owed), as a submit's SUBMIT events.
    h.submit(job("max_materialize = 2", queue="queue 4"))
    h.queue.paid([seq for seq, _ in h.queue.owed()])  # the service wrote 1.0's and 1.1's SUBMIT
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    h.exited(claim_id, "1.0", exit_code=0)
    h.queue.paid([seq for seq, _ in h.queue.owed()])  # and 1.0's end
    out = h.tick(h.now + 1.0)
    [write] = [a for a in out if isinstance(a, WriteUserLog) and a.events[0].type == EventType.SUBMIT]
    [owed] = [a for a in out if isinstance(a, Owed)]
    assert [e.job_id for e in write.events] == ["1.2"] and out.index(write) < out.index(owed)
    assert [seq for seq, _ in h.queue.owed()] == [owed.seq]
    again, _ = owed_writes(h.queue)  # what a restarted schedd would write
    assert again == [write, owed]


# --- stage 4: a restarted schedd reconnects within the lease --------------------------------------


def restarted(h: Harness, **settings) -> Harness:
    """A new schedd core over the same queue, as after kill -9 and a restart."""
    again = Harness(h.queue, **settings)
    again.now = h.now + 5
    again.start()
    return again


def running_job(h: Harness, submit_text: str = "") -> str:
    h.submit(job(submit_text))
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    return claim_id


def test_restart_reconnects_to_running_jobs_instead_of_requeueing(h):
    claim_id = running_job(h)
    h2 = restarted(h)
    # The startd confirmed this run before the crash: a keep-alive is the whole reconnect (an
    # ActivateClaim could start the job twice if it finished while the schedd was away).
    assert h2.calls(m.ActivateClaim) == []
    [reconnect] = h2.calls(m.ClaimKeepAlive)
    assert reconnect.msg.claim_id == claim_id and reconnect.to == "startd"
    assert h2.status(1, 0) is JobStatus.RUNNING
    assert EventType.JOB_DISCONNECTED in h2.events()
    reqs = h2.request(m.GetResourceRequests(submitter="alice@localhost"))
    assert reqs.requests == ()  # it is not idle: nobody matches it again
    out = h2.ack(reconnect)
    assert h2.events(out) == [EventType.JOB_RECONNECTED]
    out_before = len(h2.actions)
    h2.exited(claim_id, "1.0", exit_code=0)  # the starter's retried report reaches the new schedd
    assert h2.events(h2.actions[out_before:]) == [EventType.JOB_TERMINATED]
    assert h2.queue.history()[0]["JobStatus"] == "4"


def test_restart_requeues_a_job_whose_claim_is_gone(h):
    running_job(h)
    h2 = restarted(h)
    [reconnect] = h2.calls(m.ClaimKeepAlive)
    out = h2.fail(reconnect, "not_found", "startd holds no claim slot1_1@exec#...")
    assert h2.status(1, 0) is JobStatus.IDLE and h2.events(out) == [EventType.JOB_RECONNECT_FAILED]
    assert h2.core.claims == {}


def test_restart_keeps_trying_an_unreachable_startd_until_the_lease_ends(h):
    running_job(h, "+JobLeaseDuration = 30")
    h2 = restarted(h)
    [reconnect] = h2.calls(m.ClaimKeepAlive)
    h2.fail(reconnect, "unreachable", "no startd")
    assert h2.core.shadows[(1, 0)].state is ShadowState.RECONNECTING
    assert h2.core.next_deadline() == h2.now + 2.0
    out = h2.tick(h2.now + 2.0)
    [retry] = h2.calls(m.ClaimKeepAlive, out)
    h2.fail(retry, "timeout", "no answer")
    assert h2.status(1, 0) is JobStatus.RUNNING
    out = h2.tick(h2.now + 30.0)
    assert h2.status(1, 0) is JobStatus.IDLE and EventType.JOB_RECONNECT_FAILED in h2.events(out)


def test_restart_activates_again_a_run_the_startd_never_confirmed(h):
    h.submit(job())
    claim_id, activate = run_first_job(h)  # the schedd dies before the startd's answer arrives
    h2 = restarted(h)
    [again] = h2.calls(m.ActivateClaim)
    assert again.msg.claim_id == claim_id
    h2.ack(again)
    assert h2.core.shadows[(1, 0)].state is ShadowState.RUNNING
    assert h2.queue.get_job((1, 0))["JobCurrentStartExecutingDate"] == str(int(h2.now))


def test_restart_follows_a_busy_claim_when_the_startd_says_it_already_runs_a_job(h):
    h.submit(job())
    run_first_job(h)
    h2 = restarted(h)
    [again] = h2.calls(m.ActivateClaim)
    h2.fail(again, "bad_request", "claim slot1_1@exec#2#... is already running a job")
    assert h2.core.shadows[(1, 0)].state is ShadowState.RUNNING and h2.status(1, 0) is JobStatus.RUNNING


def test_restart_finishes_the_removal_of_a_job_removed_while_running(h):
    claim_id = running_job(h)
    h.request(m.ActOnJobs(action=m.JobAction.Remove, ids=("1.0",)))
    h2 = restarted(h)
    [vacate] = h2.calls(m.Vacate)
    assert vacate.msg.claim_id == claim_id
    h2.fail(vacate, "not_found", "gone already")
    assert h2.status(1, 0) is None and h2.queue.history()[0]["JobStatus"] == "3"


# --- the tables -------------------------------------------------------------------------------


def test_shadow_table_refuses_steps_it_does_not_have():
    shadow = Shadow((1, 0), "c", ShadowState.DONE, 0.0)
    with pytest.raises(IllegalTransition, match="shadow 1.0: no transition from state DONE"):
        from htc.daemons import core
        shadow.state = core.transition(SHADOW, shadow.label, shadow.state, ShadowEvent.ACTIVATED)
    assert all((state, ShadowEvent.ENDED) in SHADOW for state in ShadowState if state is not ShadowState.DONE)


def test_docs_tables_are_current():
    import re
    from pathlib import Path

    from htc.daemons.schedd.states import machine_table

    doc = (Path(__file__).resolve().parents[2] / "docs" / "pool.md").read_text()
    found = re.search(r"<!-- BEGIN shadow-claim-tables -->\n(.*?)<!-- END shadow-claim-tables -->", doc, re.S)
    assert found and found.group(1).strip() == machine_table().strip(), (
        "docs/pool.md's tables are stale; regenerate them with "
        "python -c 'from htc.daemons.schedd.states import machine_table; print(machine_table())'")


def test_a_kept_claim_is_not_given_to_a_smaller_job_that_would_waste_its_cpus():
    h = Harness(claim_linger=10.0)
    h.start()
    h.submit(job("request_cpus = 2"))
    claim_call = h.match()
    big = ('[ Name = "slot1_1@exec"; Cpus = 2; Memory = 128; Disk = 2048; Arch = "X86_64"; OpSys = "LINUX"; '
           'Requirements = true; MyAddress = "startd"; HasFileTransfer = true ]')
    out = h.feed(CallDone(claim_call.to, claim_call.msg, m.ClaimReply(claim_id="slot1_1@exec#2#bb", accepted=True,
                                                                      slot_ad=big), claim_call.cookie))
    [activate] = h.calls(m.ActivateClaim, out)
    h.ack(activate)
    h.exited("slot1_1@exec#2#bb", "1.0", exit_code=0)
    assert "slot1_1@exec#2#bb" in h.core.claims  # kept
    before = len(h.actions)
    h.submit(job())  # one CPU: would leave the other idle on the kept 2-CPU slot
    out = h.actions[before:]
    assert not h.calls(m.ActivateClaim, out) and h.status(2) is JobStatus.IDLE
    assert [r.claim_id for r in _released(out)] == ["slot1_1@exec#2#bb"]


def test_a_job_that_ends_while_others_wait_does_not_ask_for_a_cycle_but_a_requeued_one_does():
    # Every job start or end changes the ads; asking the negotiator for a cycle each time would
    # have it re-read all idle jobs after every job. Only new idle work asks.
    h = Harness()
    h.start()
    h.submit(job("max_retries = 1\non_exit_remove = ExitCode == 0", queue="queue 3"))
    h.tick(h.now + 0.01)  # the submit's own Reschedule
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    before = len(h.actions)
    h.exited(claim_id, "1.0", exit_code=0)  # done; 1.1 starts on the claim, 1.2 still waits
    [again] = h.calls(m.ActivateClaim, h.actions[before:])
    h.ack(again)
    out = h.tick(h.now + 2.0)
    assert sent(out, m.UpdateAd) and not sent(out, m.Reschedule)
    # 1.1 fails and is requeued by max_retries: idle work again (the claim takes one of 1.1 and
    # 1.2, the other waits), so the next ad update asks.
    h.exited(claim_id, "1.1", exit_code=1)
    assert h.queue.count("JobStatus == 1") == 1
    out = h.tick(h.now + 2.0)
    assert len(sent(out, m.Reschedule)) == 1


def test_a_match_without_an_idle_job_for_it_is_answered_as_lapsed():
    h = Harness()
    h.start()
    h.submit(job())
    h.match()  # the one idle job takes the first match
    reply = h.request(m.MatchNotify(claim_id="slot1@exec#1#cc", submitter="alice@localhost", slot_name="slot1@exec",
                                    startd_address="startd", slot_ad=SLOT_AD, autocluster_id=1))
    # (the negotiator, told so, gives the slot back to its next cycle)
    assert isinstance(reply, m.Ack) and reply.detail == m.MATCH_LAPSED + "no idle job left for it"


def test_resource_requests_charge_each_job_to_its_own_group_also_when_one_job_of_a_cluster_sets_it():
    h = Harness()
    h.start()
    cid = h.submit(job("accounting_group = physics\naccounting_group_user = alice\n", "queue 3"))
    name = "physics.alice@localhost"
    before = h.request(m.GetResourceRequests(submitter=name, significant_attributes=("RequestMemory",)))
    assert sum(r.count for r in before.requests) == 3
    # One job moved to another group: the cluster's answer is no longer everyone's.
    h.queue.set_attributes((cid, 1), {"AccountingGroup": '"chemistry.alice"'})
    after = h.request(m.GetResourceRequests(submitter=name, significant_attributes=("RequestMemory",)))
    other = h.request(m.GetResourceRequests(submitter="chemistry.alice@localhost",
                                            significant_attributes=("RequestMemory",)))
    assert sum(r.count for r in after.requests) == 2 and sum(r.count for r in other.requests) == 1

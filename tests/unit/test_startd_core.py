"""The startd core: pure, fake clock, no event loop.

Most tests drive the state table through :class:`Switches`, a tiny policy whose knobs are plain
values the test flips; the desktop-policy timelines at the end use real ClassAd expressions.
"""

from __future__ import annotations

import re

import pytest

from htc.daemons.startd import events as ev
from htc.daemons.startd.core import Startd, StartdSettings, UnknownClaim
from htc.daemons.startd.states import TABLE, Activity, State, Trigger, refusal, state_diagram
from htc.transitions import IllegalTransition, transition
from htc.errors import UsageError

T0 = 1_700_000_000.0
MACHINE = "node1.example.net"


class Switches:
    """A policy of plain values: ``Switches(SUSPEND=True)``; flip ``policy.v["SUSPEND"]`` mid-test.

    A value may be a callable ``(slot_ad, job_ad) -> value`` for knobs that depend on the job.
    """

    def __init__(self, **values):
        self.v = {"START": True, "IS_OWNER": False, "SUSPEND": False, "CONTINUE": False, "PREEMPT": False,
                  "KILL": False, "WANT_SUSPEND": False, "WANT_VACATE": True, "RANK": 0,
                  "MaxJobRetirementTime": 0, "MachineMaxVacateTime": 600, "CpuBusy": False}
        self.v.update(values)

    def _get(self, name, slot_ad, job_ad):
        value = self.v[name]
        return value(slot_ad, job_ad) if callable(value) else value

    def evaluate(self, name, slot_ad, job_ad, *, now, undefined=False):
        value = self._get(name, slot_ad, job_ad)
        return undefined if value is None else bool(value)

    def number(self, name, slot_ad, job_ad, *, now):
        value = self._get(name, slot_ad, job_ad)
        return None if value is None else float(value)

    def advertised(self, partitionable):
        return {"Start": True, "Requirements": True, "Rank": 0}


def make(policy=None, static=1, cpus=4, memory=8192, disk=1_000_000, **kw):
    settings = StartdSettings(name=f"startd@{MACHINE}", machine=MACHINE, policy=policy or Switches(), cpus=cpus,
                              memory=memory, disk=disk, static_slots=static, **kw)
    startd = Startd(settings, T0)
    startd.handle(ev.SensorSample({"KeyboardIdle": 3600, "LoadAvg": 0.0, "CondorLoadAvg": 0.0}), T0)
    return startd


def of(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def steps(startd):
    """(letter or number) labels of every step taken, oldest first."""
    return [(m.to.letter, m.to.number) for m in startd.transition_log]


def where(startd, slot="slot1"):
    s = startd.slot(slot)
    return (s.state, s.activity)


JOB = {"ClusterId": 7, "ProcId": 0, "Owner": "alice", "User": "alice@example.net", "JobUniverse": 5,
       "RequestCpus": 1, "RequestMemory": 1000, "RequestDisk": 2000, "ImageSize": 1000}


def claim(startd, now=T0, slot="slot1", job=JOB, **kw):
    s = startd.slot(slot)
    out = startd.handle(ev.RequestClaim(s.name, s.claim_id, job, "schedd@submit", **kw), now)
    (reply,) = of(out, ev.ReplyClaim)
    assert reply.accepted, reply.reason
    return reply.claim_id, reply.slot, out


def run_job(startd, now=T0, slot="slot1", job=JOB):
    cid, name, _ = claim(startd, now, slot, job)
    out = startd.handle(ev.ActivateClaim(cid, job), now)
    assert of(out, ev.StartStarter) and of(out, ev.ReplyActivate)[0].accepted
    return cid, name, out


# --------------------------------------------------------------------------- Owner / Unclaimed
def test_a_owner_to_unclaimed_when_is_owner_turns_false_and_b_back():
    p = Switches(IS_OWNER=True)
    s = make(p)
    assert where(s) == (State.OWNER, Activity.IDLE)
    p.v["IS_OWNER"] = False
    out = s.handle(ev.Tick(), T0 + 300)
    assert where(s) == (State.UNCLAIMED, Activity.IDLE)
    (ad,) = [a.ad for a in of(out, ev.AdvertiseSlot)]
    assert ad["State"] == "Unclaimed" and ad["EnteredCurrentState"] == int(T0 + 300)
    p.v["IS_OWNER"] = True
    s.handle(ev.Tick(), T0 + 600)
    assert where(s) == (State.OWNER, Activity.IDLE)
    assert steps(s) == [("A", 1), ("B", 2)]


def test_c_match_then_g_claim_and_the_slot_lies_while_matched():
    s = make()
    slot = s.slot("slot1")
    out = s.handle(ev.MatchNotified(slot.name, slot.claim_id), T0 + 1)
    assert where(s) == (State.MATCHED, Activity.IDLE)
    assert of(out, ev.AdvertiseSlot)[0].ad["Requirements"] is False
    claim(s, T0 + 2)
    assert where(s) == (State.CLAIMED, Activity.IDLE)
    assert [x for x in steps(s) if x[0] in "CG"] == [("C", 6), ("G", 9)]


def test_f_match_timeout_returns_to_owner_then_a_at_once():
    s = make(match_timeout=120)
    slot = s.slot("slot1")
    s.handle(ev.MatchNotified(slot.name, slot.claim_id), T0 + 1)
    assert s.next_deadline() == T0 + 6  # polling while matched; the match timer is later
    s.handle(ev.Tick(), T0 + 120)
    assert where(s) == (State.MATCHED, Activity.IDLE)
    s.handle(ev.Tick(), T0 + 121)
    assert where(s) == (State.UNCLAIMED, Activity.IDLE)
    assert steps(s)[-2:] == [("F", 8), ("A", 1)]


def test_d_claim_without_match_and_11_12_activate_and_exit_keep_the_claim():
    s = make()
    cid, name, out = run_job(s, T0 + 5)
    assert where(s) == (State.CLAIMED, Activity.BUSY)
    start = of(out, ev.StartStarter)[0]
    assert start.job_ad["ClusterId"] == 7 and start.slot_ad["Activity"] == "Busy"
    assert start.slot_ad["JobId"] == "7.0" and start.slot_ad["RemoteOwner"] == "alice"
    s.handle(ev.JobExited(cid), T0 + 50)
    assert where(s) == (State.CLAIMED, Activity.IDLE)
    assert [x for x in steps(s) if x != ("A", 1)] == [("D", 5), (None, 11), (None, 12)]
    # the claim is reused for the next job of the same schedd
    out = s.handle(ev.ActivateClaim(cid, dict(JOB, ProcId=1)), T0 + 60)
    assert of(out, ev.StartStarter)[0].slot_ad["JobId"] == "7.1"


# --------------------------------------------------------------------------- Claimed/Busy paths
def test_13_preempt_retires_then_18_vacates_then_22_to_owner():
    p = Switches()
    s = make(p)
    cid, name, _ = run_job(s)
    p.v["PREEMPT"] = True
    out = s.handle(ev.Tick(), T0 + 5)
    assert where(s) == (State.PREEMPTING, Activity.VACATING)
    (vac,) = of(out, ev.VacateJob)
    assert vac.claim_id == cid and vac.grace == 600
    out = s.handle(ev.JobExited(cid), T0 + 8)
    assert where(s) == (State.UNCLAIMED, Activity.IDLE)  # J to Owner, then A (IS_OWNER false)
    assert of(out, ev.ClaimEnded)[0].reason == "retired (PREEMPT)"
    assert steps(s)[-5:] == [(None, 11), (None, 13), ("H", 18), ("J", 22), ("A", 1)]


def test_14_suspend_15_continue_and_the_process_actions():
    p = Switches(WANT_SUSPEND=True)
    s = make(p)
    cid, _, _ = run_job(s)
    p.v["SUSPEND"] = True
    out = s.handle(ev.Tick(), T0 + 5)
    assert where(s) == (State.CLAIMED, Activity.SUSPENDED) and of(out, ev.SuspendJob)
    p.v["SUSPEND"], p.v["CONTINUE"] = False, True
    out = s.handle(ev.Tick(), T0 + 20)
    assert where(s) == (State.CLAIMED, Activity.BUSY) and of(out, ev.ContinueJob)
    assert steps(s)[-2:] == [(None, 14), (None, 15)]


def test_16_preempt_while_suspended_retires_and_20_suspends_again_in_retirement():
    p = Switches(WANT_SUSPEND=True, SUSPEND=True, MaxJobRetirementTime=3600)
    s = make(p)
    run_job(s)
    s.handle(ev.Tick(), T0 + 1)
    assert where(s) == (State.CLAIMED, Activity.SUSPENDED)
    p.v["PREEMPT"], p.v["SUSPEND"] = True, False
    out = s.handle(ev.Tick(), T0 + 10)
    assert where(s) == (State.CLAIMED, Activity.RETIRING) and of(out, ev.ContinueJob)
    p.v["SUSPEND"], p.v["PREEMPT"] = True, False
    s.handle(ev.Tick(), T0 + 20)
    assert where(s) == (State.CLAIMED, Activity.SUSPENDED)
    assert steps(s)[-3:] == [(None, 14), (None, 16), (None, 20)]


def test_17_retirement_over_while_suspended_evicts():
    p = Switches(WANT_SUSPEND=True, SUSPEND=True, PREEMPT=True, MaxJobRetirementTime=3600)
    s = make(p)
    run_job(s)
    s.handle(ev.Tick(), T0 + 1)  # 14, then PREEMPT: 16 to Retiring, then SUSPEND again: 20
    assert where(s) == (State.CLAIMED, Activity.SUSPENDED)
    p.v["MaxJobRetirementTime"] = 0  # HTCondor: only possible when the retirement time drops
    s.handle(ev.Tick(), T0 + 2)
    assert where(s) == (State.PREEMPTING, Activity.VACATING)
    assert steps(s)[-1] == ("H", 17)


def test_retirement_counts_running_time_not_suspended_time():
    p = Switches(WANT_SUSPEND=True, MaxJobRetirementTime=100)
    s = make(p)
    cid, _, _ = run_job(s)
    s.handle(ev.Drain("graceful"), T0 + 10)
    assert where(s) == (State.CLAIMED, Activity.RETIRING)
    p.v["SUSPEND"] = True
    s.handle(ev.Tick(), T0 + 50)  # suspended after 50 s of running
    p.v["SUSPEND"], p.v["CONTINUE"] = False, True
    s.handle(ev.Tick(), T0 + 250)  # 200 s suspended, back to retiring (16)
    assert where(s) == (State.CLAIMED, Activity.RETIRING)
    s.handle(ev.Tick(), T0 + 299)  # ran 99 s
    assert where(s) == (State.CLAIMED, Activity.RETIRING)
    out = s.handle(ev.Tick(), T0 + 300)
    assert where(s) == (State.PREEMPTING, Activity.VACATING) and of(out, ev.VacateJob)


def test_21_vacate_time_over_kills_then_killing_timeout_kills_the_starter_then_25():
    s = make(killing_timeout=30)
    cid, _, _ = run_job(s)
    out = s.handle(ev.Vacate(), T0 + 10)
    assert where(s) == (State.PREEMPTING, Activity.VACATING) and of(out, ev.VacateJob)
    assert steps(s)[-1] == ("H", None)
    assert not of(s.handle(ev.Tick(), T0 + 609), ev.KillJob)
    out = s.handle(ev.Tick(), T0 + 610)
    assert where(s) == (State.PREEMPTING, Activity.KILLING) and of(out, ev.KillJob)
    assert s.next_deadline() <= T0 + 640
    assert of(s.handle(ev.Tick(), T0 + 640), ev.KillStarter)
    assert not of(s.handle(ev.Tick(), T0 + 645), ev.KillStarter)  # once
    out = s.handle(ev.JobExited(cid), T0 + 650)
    assert of(out, ev.ClaimEnded)[0].reason == "condor_vacate"
    assert (None, 21) in steps(s) and ("J", 25) in steps(s)


def test_21_kill_expression_and_job_max_vacate_time_shortens_the_grace():
    p = Switches()
    s = make(p)
    cid, _, out = run_job(s, job=dict(JOB, JobMaxVacateTime=30))
    out = s.handle(ev.Vacate(), T0 + 1)
    assert of(out, ev.VacateJob)[0].grace == 30
    p.v["KILL"] = True
    out = s.handle(ev.Tick(), T0 + 2)
    assert where(s) == (State.PREEMPTING, Activity.KILLING) and of(out, ev.KillJob)


def test_10_vacate_of_an_idle_claim_and_fast_vacate_of_a_busy_one():
    p = Switches(WANT_VACATE=False)
    s = make(p, static=2)
    cid1, _, _ = claim(s, slot="slot1")
    cid2, _, _ = run_job(s, slot="slot2")
    out = s.handle(ev.Vacate("slot1"), T0 + 1)
    assert where(s, "slot1") == (State.UNCLAIMED, Activity.IDLE)  # no starter: straight through
    assert [m.to.number for m in s.transition_log if m.slot.startswith("slot1")][-3:] == [10, 25, 1]
    assert of(out, ev.ClaimEnded)[0].claim_id == cid1
    out = s.handle(ev.Vacate("slot2", fast=True), T0 + 2)
    assert where(s, "slot2") == (State.PREEMPTING, Activity.KILLING) and of(out, ev.KillJob)


def test_evictions_from_suspended_and_retiring_and_exits_there():
    p = Switches(WANT_SUSPEND=True, SUSPEND=True)
    s = make(p, static=3)
    a, _, _ = run_job(s, slot="slot1")
    b, _, _ = run_job(s, slot="slot2")
    s.handle(ev.Tick(), T0 + 1)
    assert where(s, "slot1") == where(s, "slot2") == (State.CLAIMED, Activity.SUSPENDED)
    s.handle(ev.Vacate("slot1"), T0 + 2)  # EVICT_VACATE from Suspended (17)
    s.handle(ev.Vacate("slot2", fast=True), T0 + 2)  # EVICT_KILL from Suspended (17)
    assert where(s, "slot1") == (State.PREEMPTING, Activity.VACATING)
    assert where(s, "slot2") == (State.PREEMPTING, Activity.KILLING)
    # a job that dies while suspended leaves the claim idle
    p.v["SUSPEND"] = False
    c, _, _ = run_job(s, slot="slot3", now=T0 + 3)
    p.v["SUSPEND"] = True
    s.handle(ev.Tick(), T0 + 4)
    s.handle(ev.JobExited(c), T0 + 5)
    assert where(s, "slot3") == (State.CLAIMED, Activity.IDLE)


def test_retiring_job_exit_and_retiring_eviction_without_vacate():
    p = Switches(MaxJobRetirementTime=1000)
    s = make(p, static=2)
    a, _, _ = run_job(s, slot="slot1")
    b, _, _ = run_job(s, slot="slot2")
    s.handle(ev.Drain("graceful"), T0 + 1)
    assert where(s, "slot1") == where(s, "slot2") == (State.CLAIMED, Activity.RETIRING)
    s.handle(ev.JobExited(a), T0 + 10)  # STARTER_EXITED from Retiring (18), then J, then N
    assert where(s, "slot1") == (State.DRAINED, Activity.RETIRING)
    p.v["WANT_VACATE"] = False
    out = s.handle(ev.Vacate("slot2"), T0 + 20)  # EVICT_KILL from Retiring
    assert where(s, "slot2") == (State.PREEMPTING, Activity.KILLING) and of(out, ev.KillJob)
    s.handle(ev.JobExited(b), T0 + 21)
    assert where(s, "slot1") == where(s, "slot2") == (State.DRAINED, Activity.IDLE)
    assert [n for n in steps(s) if n[1] in (36, 33)]


# --------------------------------------------------------------------------- preemption by RANK
def _ranked_policy(**kw):
    return Switches(RANK=lambda slot_ad, job_ad: (job_ad or {}).get("Prio", 0), **kw)


def test_i_23_better_ranked_claim_takes_the_slot_after_the_job_vacates():
    s = make(_ranked_policy())
    old, name, _ = run_job(s, job=dict(JOB, Prio=1))
    slot = s.slot("slot1")
    out = s.handle(ev.RequestClaim(name, slot.claim_id, dict(JOB, Prio=5), "schedd@other"), T0 + 10)
    assert not of(out, ev.ReplyClaim)  # answered when the slot is free
    assert where(s) == (State.PREEMPTING, Activity.VACATING) and of(out, ev.VacateJob)
    out = s.handle(ev.JobExited(old), T0 + 20)
    assert where(s) == (State.CLAIMED, Activity.IDLE)
    (ended,) = of(out, ev.ClaimEnded)
    (reply,) = of(out, ev.ReplyClaim)
    assert ended.claim_id == old and reply.accepted and reply.slot == name
    assert s.slot("slot1").claim.schedd == "schedd@other"
    assert steps(s)[-1] == ("I", 23)


def test_i_24_better_claim_after_a_kill_and_a_worse_one_is_refused():
    s = make(_ranked_policy(WANT_VACATE=False))
    old, name, _ = run_job(s, job=dict(JOB, Prio=3))
    slot = s.slot("slot1")
    out = s.handle(ev.RequestClaim(name, slot.claim_id, dict(JOB, Prio=3), "schedd@other"), T0 + 5)
    assert not of(out, ev.ReplyClaim)[0].accepted and "cannot preempt" in of(out, ev.ReplyClaim)[0].reason
    out = s.handle(ev.RequestClaim(name, slot.claim_id, dict(JOB, Prio=3), "schedd@other",
                                   priority_preemption=True), T0 + 6)
    assert where(s) == (State.PREEMPTING, Activity.KILLING)
    s.handle(ev.JobExited(old), T0 + 7)
    assert steps(s)[-1] == ("I", 24)


def test_19_preempting_claim_withdrawn_during_retirement_unretires():
    s = make(_ranked_policy(MaxJobRetirementTime=3600))
    old, name, _ = run_job(s, job=dict(JOB, Prio=1))
    slot = s.slot("slot1")
    newcomer_id = slot.claim_id
    s.handle(ev.RequestClaim(name, newcomer_id, dict(JOB, Prio=9), "schedd@other"), T0 + 10)
    assert where(s) == (State.CLAIMED, Activity.RETIRING)
    s.handle(ev.ReleaseClaim(newcomer_id), T0 + 20)
    assert where(s) == (State.CLAIMED, Activity.BUSY)
    assert steps(s)[-2:] == [(None, 13), (None, 19)]


# --------------------------------------------------------------------------- drain
def test_n_p_drain_33_all_drained_34_resume_on_completion():
    p = Switches(IS_OWNER=True)
    s = make(p, static=2)
    p.v["IS_OWNER"] = lambda slot_ad, job_ad: slot_ad["Name"].startswith("slot1")
    s.handle(ev.Tick(), T0 + 1)
    assert where(s, "slot1")[0] is State.OWNER and where(s, "slot2")[0] is State.UNCLAIMED
    s.handle(ev.Drain("graceful", resume_on_completion=True), T0 + 2)
    labels = steps(s)
    assert ("N", 36) in labels and ("P", 37) in labels and (None, 33) in labels and ("O", 34) in labels
    assert where(s, "slot1")[0] is State.OWNER and s.drain is None


def test_35_cancel_drain_and_drained_ads_refuse_matches():
    p = Switches(MaxJobRetirementTime=3600)
    s = make(p, static=2)
    run_job(s, slot="slot2")
    out = s.handle(ev.Drain("graceful", reason="defrag"), T0 + 1)
    assert where(s, "slot1") == (State.DRAINED, Activity.RETIRING)
    assert where(s, "slot2") == (State.CLAIMED, Activity.RETIRING)
    assert all(a.ad["Requirements"] is False for a in of(out, ev.AdvertiseSlot))
    s.handle(ev.CancelDrain(), T0 + 2)
    assert where(s, "slot1") == (State.UNCLAIMED, Activity.IDLE)
    assert where(s, "slot2") == (State.CLAIMED, Activity.BUSY)
    assert ("O", 35) in steps(s) and (None, 19) in steps(s)


def test_quick_drain_ignores_retirement_and_fast_drain_kills():
    s = make(Switches(MaxJobRetirementTime=3600), static=2)
    run_job(s, slot="slot1")
    s.handle(ev.Drain("quick"), T0 + 1)
    assert where(s, "slot1") == (State.PREEMPTING, Activity.VACATING)
    s2 = make(Switches(MaxJobRetirementTime=3600))
    run_job(s2)
    out = s2.handle(ev.Drain("fast"), T0 + 1)
    assert where(s2) == (State.PREEMPTING, Activity.KILLING) and of(out, ev.KillJob)
    with pytest.raises(UsageError, match="graceful"):
        s2.handle(ev.Drain("slowly"), T0 + 2)


# --------------------------------------------------------------------------- partitionable slot
def test_partitionable_slot_splits_by_request_and_merges_back():
    s = make(static=0, cpus=4, memory=8192, disk=1_000_000)
    p = s.slot("slot1")
    assert p.kind == "Partitionable" and where(s) == (State.UNCLAIMED, Activity.IDLE)
    cid1, d1, out = claim(s, job=dict(JOB, RequestCpus=1, RequestMemory=1000, RequestDisk=2000))
    assert d1 == f"slot1_1@{MACHINE}"
    ads = {a.slot: a.ad for a in of(out, ev.AdvertiseSlot)}
    assert ads[d1]["Memory"] == 1024 and ads[d1]["Cpus"] == 1 and ads[d1]["Disk"] == 2048  # quantized
    assert ads[d1]["DynamicSlot"] and ads[d1]["State"] == "Claimed"
    pad = ads[p.name]
    assert (pad["Cpus"], pad["Memory"], pad["Disk"]) == (3, 7168, 1_000_000 - 2048)
    assert pad["ChildCpus"] == [1] and pad["State"] == "Unclaimed"
    cid2, d2, _ = claim(s, job=dict(JOB, RequestCpus=3, RequestMemory=4096))
    assert d2 == f"slot1_2@{MACHINE}"
    out = s.handle(ev.RequestClaim(p.name, p.claim_id, dict(JOB, RequestCpus=1), "schedd@submit"), T0)
    (no,) = of(out, ev.ReplyClaim)
    assert not no.accepted and "cpus=1" in no.reason and "cpus=0" in no.reason
    # release: the d-slot disappears and its resources return to the p-slot
    out = s.handle(ev.ReleaseClaim(cid1), T0 + 10)
    assert of(out, ev.InvalidateSlot)[0].slot == d1 and d1 not in s.slots
    assert not of(out, ev.ClaimEnded)  # the claimant released it itself
    pad = {a.slot: a.ad for a in of(out, ev.AdvertiseSlot)}[p.name]
    assert (pad["Cpus"], pad["Memory"]) == (1, 8192 - 4096)
    cid3, d3, _ = claim(s, now=T0 + 11)
    assert d3 == f"slot1_3@{MACHINE}"


def test_dynamic_slot_job_runs_and_is_deleted_after_eviction():
    s = make(static=0)
    cid, d, _ = run_job(s)
    out = s.handle(ev.Vacate(), T0 + 1)
    assert of(out, ev.VacateJob)[0].slot == d
    out = s.handle(ev.JobExited(cid), T0 + 2)
    assert of(out, ev.InvalidateSlot) and list(s.slots) == [f"slot1@{MACHINE}"]


# --------------------------------------------------------------------------- claims and leases
def test_claim_refusals_name_the_reason():
    p = Switches(IS_OWNER=True)
    s = make(p)
    slot = s.slot("slot1")
    out = s.handle(ev.RequestClaim(slot.name, slot.claim_id, JOB, "schedd@x"), T0)
    assert "Owner/Idle" in of(out, ev.ReplyClaim)[0].reason
    p.v["IS_OWNER"], p.v["START"] = False, (lambda slot_ad, job_ad: job_ad is None or job_ad["Owner"] == "bob")
    s.handle(ev.Tick(), T0 + 1)
    out = s.handle(ev.RequestClaim(slot.name, "slot1#forged", JOB, "schedd@x"), T0 + 2)
    assert "stale" in of(out, ev.ReplyClaim)[0].reason
    out = s.handle(ev.RequestClaim(slot.name, slot.claim_id, JOB, "schedd@x"), T0 + 3)
    assert "START is not true" in of(out, ev.ReplyClaim)[0].reason
    with pytest.raises(UsageError, match="no slot 'slot9'"):
        s.handle(ev.RequestClaim("slot9", "x", JOB, "schedd@x"), T0)


def test_lease_expires_without_keepalives_and_keepalive_extends_it():
    s = make()
    cid, _, _ = run_job(s, job=JOB)  # lease None: 6 * 300 s
    assert s.next_deadline() <= T0 + 1800
    s.handle(ev.KeepAlive(cid), T0 + 1000)
    s.handle(ev.Tick(), T0 + 1800)
    assert where(s) == (State.CLAIMED, Activity.BUSY)
    out = s.handle(ev.Tick(), T0 + 2800)
    assert where(s) == (State.PREEMPTING, Activity.VACATING)
    s.handle(ev.JobExited(cid), T0 + 2801)
    assert any(m.trigger is Trigger.TO_OWNER for m in s.transition_log)


def test_job_lease_duration_sets_the_lease():
    s = make()
    cid, _, _ = claim(s, lease=60)
    out = s.handle(ev.Tick(), T0 + 60)
    assert of(out, ev.ClaimEnded)[0].reason == "claim lease expired"


def test_activation_refusals_and_claim_worklife():
    s = make(claim_worklife=1200)
    cid, _, _ = run_job(s)
    out = s.handle(ev.ActivateClaim(cid, JOB), T0 + 1)
    assert "Claimed/Busy, not Claimed/Idle" in of(out, ev.ReplyActivate)[0].reason
    s.handle(ev.KeepAlive(cid), T0 + 1100)
    out = s.handle(ev.JobExited(cid), T0 + 1300)  # job ends after the worklife: the claim goes
    assert of(out, ev.ClaimEnded)[0].reason == "claim worklife over"
    with pytest.raises(UnknownClaim, match="ended or never existed"):
        s.handle(ev.ActivateClaim(cid, JOB), T0 + 1301)


# --------------------------------------------------------------------------- illegal steps, table, ads
def test_illegal_step_names_daemon_slot_state_and_event():
    s = make()
    cid, _, _ = claim(s)
    with pytest.raises(IllegalTransition) as exc:
        s.handle(ev.JobExited(cid), T0 + 1)
    msg = str(exc.value)
    assert f"startd@{MACHINE}" in msg and f"slot1@{MACHINE}" in msg and "Claimed/Idle" in msg
    assert "STARTER_EXITED" in msg and "ACTIVATE" in msg  # and what would have been legal
    with pytest.raises(IllegalTransition, match="Owner/Idle and cannot take 'claim activated'"):
        transition(TABLE, "startd@x: slot slot1@x", (State.OWNER, Activity.IDLE), Trigger.ACTIVATE,
                   explain=lambda: refusal("startd@x", "slot1@x", State.OWNER, Activity.IDLE, Trigger.ACTIVATE))


ALL_SCENARIOS = [v for k, v in dict(globals()).items() if k.startswith("test_") and k[5].isalnum()]


def test_every_row_of_the_table_is_taken_by_some_test(monkeypatch):
    taken = set()
    real_move = Startd._move

    def spy(self, slot, trigger, now, out):
        taken.add((slot.state, slot.activity, trigger))
        return real_move(self, slot, trigger, now, out)

    monkeypatch.setattr(Startd, "_move", spy)
    for scenario in ALL_SCENARIOS:
        if scenario.__code__.co_argcount == 0:
            scenario()
    missing = set(TABLE) - taken
    assert not missing, sorted((s.value, a.value, t.name) for s, a, t in missing)


def test_table_uses_htcondor_names_and_every_letter_of_the_manual_we_implement():
    letters = {t.letter for t in TABLE.values() if t.letter}
    assert letters == set("ABCDFGHIJNOP")  # E, K, L, M are Backfill
    numbers = {t.number for t in TABLE.values() if t.number}
    assert numbers == set(range(1, 26)) - {3, 4, 7} | {33, 34, 35, 36, 37}
    assert {s.value for s in State} == {"Owner", "Unclaimed", "Matched", "Claimed", "Preempting", "Drained"}


def test_state_diagram_is_generated_from_the_table():
    mermaid = state_diagram("mermaid")
    assert mermaid.startswith("stateDiagram-v2")
    assert "Owner_Idle --> Unclaimed_Idle: A/1 not_owner" in mermaid
    assert len(re.findall("-->", mermaid)) >= len({(k[0], k[1], v.state, v.activity) for k, v in TABLE.items()})
    states_only = state_diagram("mermaid", activities=False)
    assert "Preempting --> Claimed: I" in states_only and "Claimed --> Preempting: H" in states_only
    dot = state_diagram("dot")
    assert dot.startswith("digraph startd {") and '"Claimed_Busy" -> "Claimed_Suspended" [label="14' in dot
    with pytest.raises(UsageError):
        state_diagram("svg")


def test_ads_are_sent_on_change_and_refreshed_every_update_interval():
    s = make(update_interval=300)
    out = s.handle(ev.Tick(), T0 + 10)
    assert not of(out, ev.AdvertiseSlot)
    out = s.handle(ev.SensorSample({"KeyboardIdle": 5, "LoadAvg": 0.25, "CondorLoadAvg": 0.0}), T0 + 301)
    (adv,) = of(out, ev.AdvertiseSlot)
    assert adv.ad["KeyboardIdle"] == 5 and adv.ad["LoadAvg"] == 0.25 and adv.claim_id == s.slot("slot1").claim_id
    for key in ("State", "Activity", "EnteredCurrentState", "EnteredCurrentActivity", "Start", "Requirements",
                "Rank", "Cpus", "Memory", "Disk", "TotalCpus", "Name", "Machine", "SlotID", "MyType"):
        assert key in adv.ad, key


def test_cpu_busy_is_latched_with_the_time_it_started():
    p = Switches(CpuBusy=lambda slot_ad, job_ad: slot_ad["LoadAvg"] - slot_ad["CondorLoadAvg"] >= 0.5)
    s = make(p)
    s.handle(ev.SensorSample({"LoadAvg": 1.0, "CondorLoadAvg": 0.0}), T0 + 5)
    s.handle(ev.SensorSample({"LoadAvg": 1.2, "CondorLoadAvg": 0.0}), T0 + 10)
    ad = s.slot_ad(s.slot("slot1"), T0 + 10)
    assert ad["CpuBusyTime"] == int(T0 + 5) and ad["CpuBusyValue"] == 1
    s.handle(ev.SensorSample({"LoadAvg": 1.0, "CondorLoadAvg": 1.0}), T0 + 15)
    assert s.slot_ad(s.slot("slot1"), T0 + 15)["CpuBusyValue"] == 0


# --------------------------------------------------------------------------- desktop policy, real ClassAds
def desktop(**kw):
    from htc.daemons.startd.policy import DESKTOP, ClassAdPolicy

    settings = StartdSettings(name=f"startd@{MACHINE}", machine=MACHINE, policy=ClassAdPolicy(DESKTOP), cpus=1,
                              memory=2048, disk=1_000_000, static_slots=1, **kw)
    return Startd(settings, T0)


def owner(keyboard_idle, load=0.0, condor_load=0.0):
    return ev.SensorSample({"KeyboardIdle": keyboard_idle, "ConsoleIdle": keyboard_idle, "LoadAvg": load,
                            "CondorLoadAvg": condor_load})


def test_desktop_waits_for_15_idle_minutes_and_low_owner_load():
    s = desktop()
    s.handle(owner(0), T0)
    assert where(s)[0] is State.OWNER
    s.handle(owner(900), T0 + 900)
    assert where(s)[0] is State.OWNER  # KeyboardIdle > 15 * 60 is strict
    s.handle(owner(901, load=0.6, condor_load=0.2), T0 + 901)
    assert where(s)[0] is State.OWNER  # 0.4 of load is not ours
    s.handle(owner(905, load=1.2, condor_load=1.0), T0 + 905)
    assert where(s)[0] is State.UNCLAIMED  # the load is our own job's
    s.handle(owner(10), T0 + 910)
    assert where(s)[0] is State.OWNER and steps(s)[-1] == ("B", 2)


def test_desktop_owner_returns_suspend_then_vacate_after_10_minutes_then_kill():
    s = desktop()
    s.handle(owner(2000), T0)
    cid, _, _ = run_job(s, T0 + 10)
    assert of(s.handle(owner(2100), T0 + 100), ev.SuspendJob) == []
    out = s.handle(owner(3), T0 + 200)  # the owner touches the keyboard
    assert where(s) == (State.CLAIMED, Activity.SUSPENDED) and of(out, ev.SuspendJob)
    s.handle(owner(5), T0 + 700)
    assert where(s) == (State.CLAIMED, Activity.SUSPENDED)
    out = s.handle(owner(7), T0 + 801)  # suspended for more than MaxSuspendTime (600 s)
    assert where(s) == (State.PREEMPTING, Activity.VACATING)
    assert of(out, ev.ContinueJob) and of(out, ev.VacateJob)[0].grace == 600  # 16 then 18
    out = s.handle(ev.Tick(), T0 + 801 + 600)  # MachineMaxVacateTime
    assert where(s) == (State.PREEMPTING, Activity.KILLING) and of(out, ev.KillJob)
    out = s.handle(ev.JobExited(cid), T0 + 1410)
    assert where(s) == (State.OWNER, Activity.IDLE) and of(out, ev.ClaimEnded)
    assert [m.to.number for m in s.transition_log][-6:] == [11, 14, 16, 18, 21, 25]


def test_desktop_owner_leaves_again_and_the_job_continues():
    s = desktop()
    s.handle(owner(2000), T0)
    cid, _, _ = run_job(s, T0 + 10)
    s.handle(owner(1), T0 + 100)
    assert where(s) == (State.CLAIMED, Activity.SUSPENDED)
    s.handle(owner(300), T0 + 400)
    assert where(s) == (State.CLAIMED, Activity.SUSPENDED)  # CONTINUE needs KeyboardIdle > 300
    out = s.handle(owner(301), T0 + 401)
    assert where(s) == (State.CLAIMED, Activity.BUSY) and of(out, ev.ContinueJob)


def test_desktop_sustained_owner_cpu_load_suspends_a_job_running_over_90_s():
    s = desktop()
    s.handle(owner(5000), T0)
    cid, _, _ = run_job(s, T0 + 10)
    s.handle(owner(5000, load=1.6, condor_load=1.0), T0 + 200)  # 0.6 non-HTCondor load: CpuBusy
    assert where(s) == (State.CLAIMED, Activity.BUSY)
    s.handle(ev.Tick(), T0 + 320)
    assert where(s) == (State.CLAIMED, Activity.BUSY)  # busy for 120 s, SUSPEND wants more
    s.handle(ev.Tick(), T0 + 321)
    assert where(s) == (State.CLAIMED, Activity.SUSPENDED)


def test_desktop_slot_ad_publishes_the_policy_as_expressions():
    from htc.classad import ExprTree

    s = desktop()
    out = s.handle(owner(2000), T0)
    ad = of(out, ev.AdvertiseSlot)[-1].ad
    assert isinstance(ad["Start"], ExprTree) and "KeyboardIdle > 15 * 60" in str(ad["Start"])
    assert isinstance(ad["Requirements"], ExprTree) and str(ad["Requirements"]) == "START"
    assert ad["State"] == "Unclaimed" and ad["KeyboardIdle"] == 2000


def test_docs_show_the_diagrams_generated_from_the_table():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "startd.md").read_text()
    for diagram in (state_diagram("mermaid"), state_diagram("mermaid", activities=False)):
        assert diagram.rstrip() in doc, "regenerate the diagrams in docs/startd.md from state_diagram()"


def test_fixed_policy_defaults_vanilla_twins_and_unknown_knobs():
    from htc.daemons.startd.policy import FixedPolicy

    p = FixedPolicy(START=lambda slot_ad, job_ad, now: slot_ad["KeyboardIdle"] > 900, SUSPEND_VANILLA=True)
    busy, idle = {"KeyboardIdle": 5}, {"KeyboardIdle": 1000}
    assert p.evaluate("IS_OWNER", busy, None, now=T0) and not p.evaluate("IS_OWNER", idle, None, now=T0)
    assert p.evaluate("SUSPEND", idle, {"JobUniverse": 5}, now=T0)
    assert not p.evaluate("SUSPEND", idle, {"JobUniverse": 7}, now=T0)
    assert p.number("MachineMaxVacateTime", idle, None, now=T0) == 600.0 and p.evaluate("WANT_VACATE", idle, None, now=T0)
    with pytest.raises(UsageError, match="unknown knob"):
        FixedPolicy(STRAT=True)


def test_classad_policy_pins_time_to_the_core_clock_and_names_bad_knobs():
    from htc.daemons.startd.policy import ClassAdPolicy

    p = ClassAdPolicy({"KILL": "(time() - EnteredCurrentActivity) > 30", "START": 'Note != "time()"'})
    ad = {"EnteredCurrentActivity": int(T0), "Note": "time()"}
    assert not p.evaluate("KILL", ad, None, now=T0 + 30) and p.evaluate("KILL", ad, None, now=T0 + 31)
    assert not p.evaluate("START", ad, None, now=T0)  # time() inside a string literal is text
    assert p.evaluate("START", {}, None, now=T0, undefined=True)  # UNDEFINED is "not false"
    assert not p.evaluate("START", {}, None, now=T0)
    with pytest.raises(UsageError, match="SUSPEND = .* is not a valid ClassAd expression"):
        ClassAdPolicy({"SUSPEND": "KeyboardIdle <"})

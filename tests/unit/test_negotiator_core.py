"""Negotiator core: matchmaking with real ClassAds, fair share, packing, preemption, timing.

Core tests: no event loop, a number for ``now``.
"""

from __future__ import annotations

import random

import pytest

from htc.classad import ClassAd, ExprTree
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator.accountant import Accountant, AccountantSettings
from htc.daemons.negotiator.core import Negotiator
from htc.daemons.negotiator.events import (AskResourceRequests, CycleFinished, FetchPoolAds, NotifyMatches,
                                           PoolAds, PoolAdsFailed, PublishAccounting, Reschedule,
                                           RequestsFailed, RequestsReceived, ResetUsage, SaveAccountant,
                                           SetPriorityFactor, SetRealPriority, Wakeup)
from htc.daemons.negotiator.preemption import (PreemptState, Rejection, decide_preemption,
                                               submitter_limit_permits)
from htc.daemons.negotiator.settings import (DEFAULT_POST_JOB_RANK, DEFAULT_PRE_JOB_RANK,
                                             UWCS_PREEMPTION_REQUIREMENTS, NegotiatorSettings)
from htc.daemons.negotiator.slotreads import claimed_resources
from htc.daemons.negotiator.states import TABLE, Phase, Step, step
from htc.daemons.negotiator.submitters import SubmitterAd, submitter_from_ad
from htc.errors import UsageError
from htc.transitions import IllegalTransition
from tests.negotiator_cycles import claimed, make_job, make_slot, matched, run_cycle

# ----------------------------------------------------------------- matchmaking with ClassAds


def test_both_requirements_decide_the_match():
    slots = [
        make_slot("slot1@win", OpSys="WINDOWS"),
        make_slot("slot1@small", Memory=512),
        make_slot("slot1@picky", exprs={"Start": 'TARGET.Owner != "alice"'}),
        make_slot("slot1@ok"),
    ]
    result, _ = run_cycle(slots, {"alice@x": [(make_job("alice"), 4)]})
    assert matched(result) == [("alice@x", "slot1@ok")]
    assert result.statistics.rejections_by_reason == {"no match": 1}


def test_job_rank_picks_the_fastest_slot():
    slots = [make_slot(f"slot1@n{i}", Mips=m) for i, m in enumerate([300, 900, 100])]
    job = make_job(exprs={"Rank": "TARGET.Mips"})
    result, _ = run_cycle(slots, {"alice@x": [(job, 2)]})
    assert [s for _, s in matched(result)] == ["slot1@n1", "slot1@n0"]


def test_post_job_rank_prefers_fast_benchmarks_then_low_slot_ids():
    slots = [make_slot("slot2@a"), make_slot("slot1@a"), make_slot("slot3@b", KFlops=5000)]
    result, _ = run_cycle(slots, {"alice@x": [(make_job(), 3)]})
    assert [s for _, s in matched(result)] == ["slot3@b", "slot1@a", "slot2@a"]


def test_pre_job_rank_puts_machine_rank_before_job_rank_and_fits_best():
    slots = [
        make_slot("slot1@fast", Mips=1000),
        make_slot("slot1@likes-alice", exprs={"Rank": 'TARGET.Owner == "alice"'}),
        make_slot("slot1@big", Memory=8192, Mips=1000),
    ]
    job = make_job(exprs={"Rank": "TARGET.Mips"})
    result, _ = run_cycle(slots, {"alice@x": [(job, 3)]})
    # the machine that ranks alice highest first; then the smaller of the equal-Mips slots
    assert [s for _, s in matched(result)] == ["slot1@likes-alice", "slot1@fast", "slot1@big"]


def _brute_force(slots, jobs, classad2):
    """HTCondor's ordering computed with HTCondor's own ClassAd engine, slot by slot."""
    pre, post = classad2.ExprTree(DEFAULT_PRE_JOB_RANK), classad2.ExprTree(DEFAULT_POST_JOB_RANK)
    theirs = [classad2.ClassAd(repr(s)) for s in slots]
    free = set(range(len(slots)))
    picks = []
    for job in jobs:
        j = classad2.ClassAd(repr(job))
        best = None
        for i in sorted(free):
            s = theirs[i]
            if not j.symmetricMatch(s):
                continue

            def num(v):
                return float(v) if isinstance(v, (int, float)) else -3.4028234663852886e38

            jr = classad2.ExprTree("MY.Rank").eval(j, s)
            key = (num(pre.eval(s, j)), float(jr) if isinstance(jr, (int, float)) else 0.0,
                   num(post.eval(s, j)))
            name = slots[i]["Name"]
            if best is None or key > best[0] or (key == best[0] and name < best[1]):
                best = (key, name, i)
        if best is not None:
            free.discard(best[2])
            picks.append(best[1])
    return picks


@pytest.mark.parametrize("seed", [1988, 7, 42])
def test_class_search_picks_what_htcondor_ordering_picks(seed):
    import classad2

    classad2.parseOne("[a = 1]")
    rnd = random.Random(seed)
    slots = []
    for n in range(80):
        exprs = {}
        if rnd.random() < 0.2:
            exprs["Rank"] = 'TARGET.Owner == "alice" ? 10 : 0'
        if rnd.random() < 0.2:
            exprs["Start"] = "TARGET.RequestMemory <= Memory / 2"
        slots.append(make_slot(
            f"slot{rnd.randint(1, 4)}@host{n:02d}", exprs,
            Memory=rnd.choice([1024, 2048, 4096]), Cpus=rnd.choice([1, 2]),
            Mips=rnd.choice([100, 200, 300]), KFlops=rnd.choice([1000, 2000]),
            OpSys=rnd.choice(["LINUX", "LINUX", "WINDOWS"])))
    jobs = []
    for _ in range(40):
        jobs.append(make_job(rnd.choice(["alice", "bob"]),
                             {"Rank": rnd.choice(["0.0", "TARGET.Mips", "TARGET.Memory"])},
                             RequestMemory=rnd.choice([512, 1024, 3000])))
    result, _ = run_cycle(slots, {"alice@x": [(job, 1) for job in jobs]})
    assert [s for _, s in matched(result)] == _brute_force(slots, jobs, classad2)
    assert result.statistics.slot_classes < len(slots)


@pytest.mark.parametrize("requirements", [
    'TARGET.Arch == "X86_64" && TARGET.Memory >= RequestMemory',
    "TARGET.NoSuchAttr == 1 && TARGET.Memory >= 1",  # an UNDEFINED clause
    "TARGET.Cpus && TARGET.Memory >= 1",  # a number where a boolean belongs
    '(TARGET.Arch == "ARM64" || TARGET.Memory > 3000) && (TARGET.Cpus >= RequestCpus)',
    'TARGET.OpSys == "LINUX" && (TARGET.Arch == Arch) && Arch =!= undefined',
    "TARGET.Memory / 0 > 1 && true",  # an ERROR clause
])
def test_clause_by_clause_matching_agrees_with_htcondor(requirements):
    import classad2

    classad2.parseOne("[a = 1]")
    slots = [make_slot(f"slot1@{arch}{mem}", Arch=arch, Memory=mem, Cpus=cpus)
             for arch, mem, cpus in [("X86_64", 2048, 1), ("X86_64", 4096, 2),
                                      ("ARM64", 1024, 4), ("ARM64", 8192, 0)]]
    jobs = [make_job(exprs={"Requirements": requirements}, RequestMemory=m, Arch=a)
            for m, a in [(1000, "X86_64"), (4000, "ARM64")]]
    result, _ = run_cycle(slots, {"alice@x": [(job, 4) for job in jobs]})
    ours = {(m.autocluster_id, m.slot_name) for m in result.matches}
    for i, job in enumerate(jobs, start=1):
        theirs = {s["Name"] for s in slots
                  if classad2.ClassAd(repr(job)).symmetricMatch(classad2.ClassAd(repr(s)))}
        got = {name for ac, name in ours if ac == i}
        # the first request may take slots the second would also match, never others
        assert got <= theirs
        if i == 1:
            assert got == theirs


@pytest.mark.parametrize("seed", range(12))
def test_random_cycles_keep_the_invariants(seed):
    """Every match is a real match; no slot is given twice; no p-slot is overdrawn."""
    import classad2

    classad2.parseOne("[a = 1]")
    rnd = random.Random(seed)
    slots = []
    for n in range(rnd.randint(5, 25)):
        kind = rnd.random()
        slot = make_slot(f"slot{rnd.randint(1, 3)}@m{n}", Memory=rnd.choice([1024, 4096, 16384]),
                         Cpus=rnd.choice([1, 4, 8]), OpSys=rnd.choice(["LINUX", "WINDOWS"]))
        if kind < 0.3:
            slot["PartitionableSlot"] = True
        elif kind < 0.5:
            slot = claimed(slot, rnd.choice(["a@x", "b@x", "c@x"]))
        slots.append(slot)
    users = rnd.sample(["a@x", "b@x", "c@x"], rnd.randint(1, 3))
    requests = {u: [(make_job(u.split("@")[0], RequestCpus=rnd.choice([1, 2]),
                              RequestMemory=rnd.choice([512, 1500, 5000])), rnd.randint(1, 6))
                    for _ in range(rnd.randint(1, 3))] for u in users}
    settings = NegotiatorSettings(preemption_requirements=rnd.choice(["False", "True"]))
    result, _ = run_cycle(slots, requests, settings=settings)
    by_name = {s["Name"]: s for s in slots}
    static_used, carved = set(), {}
    for m in result.matches:
        original = by_name[m.slot_name]
        job = requests[m.submitter][m.autocluster_id - 1][0]
        assert classad2.ClassAd(repr(job)).symmetricMatch(classad2.ClassAd(repr(m.slot_ad)))
        if m.carved is None:
            assert m.slot_name not in static_used
            static_used.add(m.slot_name)
        else:
            total = carved.setdefault(m.slot_name, [0, 0])
            total[0] += m.carved[0]
            total[1] += m.carved[1]
            assert total[0] <= original["Cpus"] and total[1] <= original["Memory"]
        if m.preemption is PreemptState.NONE:
            assert original["State"] == "Unclaimed"
    for user, items in requests.items():
        for ac, (_, count) in enumerate(items, start=1):
            assert sum(m.submitter == user and m.autocluster_id == ac
                       for m in result.matches) <= count


# ----------------------------------------------------------------- partitionable slots


def test_partitionable_slot_takes_jobs_until_its_cores_run_out():
    pslot = make_slot("slot1@big", Cpus=8, Memory=32768, PartitionableSlot=True,
                      SlotType="Partitionable", ClaimId="claim-of-slot1@big")
    job = make_job(RequestCpus=2, RequestMemory=1000)
    result, acct = run_cycle([pslot], {"alice@x": [(job, 10)]})
    assert len(result.matches) == 4  # 8 cores / 2
    assert {m.claim_id for m in result.matches} == {"claim-of-slot1@big"}
    assert [m.carved for m in result.matches] == [(2, 1024, 1024)] * 4  # memory rounded to 128
    assert [m.weight for m in result.matches] == [2.0] * 4
    assert acct.weighted_resources_used("alice@x") == 8.0
    assert pslot["Cpus"] == 8  # the caller's ad is not modified


def test_partitionable_slot_packs_until_memory_runs_out_and_serves_other_requests():
    pslot = make_slot("slot1@big", Cpus=16, Memory=8192, PartitionableSlot=True)
    big = make_job(RequestCpus=1, RequestMemory=3000)  # 3072 after rounding
    small = make_job(RequestCpus=1, RequestMemory=1024)
    result, _ = run_cycle([pslot], {"alice@x": [(big, 5), (small, 5)]})
    carved = [m.carved[1] for m in result.matches]
    # two big carves leave 2048 MiB: the big request stops fitting, two small ones fit, and
    # then the slot is used up (the remaining small jobs are not even tried)
    assert carved == [3072, 3072, 1024, 1024]
    assert result.statistics.rejections_by_reason == {"no match": 1}


def test_dynamic_slots_of_a_partitionable_slot_are_charged_next_cycle():
    pslot = make_slot("slot1@big", Cpus=4, Memory=8192, PartitionableSlot=True)
    result, acct = run_cycle([pslot], {"alice@x": [(make_job(RequestCpus=2), 1)]})
    assert acct.weighted_resources_used("alice@x") == 2.0
    # next cycle the startd reports the dynamic slot; the pseudo-match is replaced by it
    dslot = claimed(make_slot("slot1_1@big", Cpus=2), "alice@x")
    shrunk = make_slot("slot1@big", Cpus=2, Memory=7168, PartitionableSlot=True)
    run_cycle([shrunk, dslot], {}, acct=acct, now=60.0)
    assert acct.match_of("slot1_1@big") == ("alice@x", 2.0)
    assert acct.weighted_resources_used("alice@x") == 2.0


# ----------------------------------------------------------------- fair share


def test_shares_follow_effective_priority():
    acct = Accountant(now=0.0)
    acct.set_priority_factor("b@x", 2000.0)  # EUP 1000 against a@x's 500: half the share
    slots = [make_slot(f"slot1@n{i:02d}") for i in range(30)]
    result, _ = run_cycle(slots, {"a@x": [(make_job("a"), 100)], "b@x": [(make_job("b"), 100)]},
                          acct=acct)
    got = [s for s, _ in matched(result)]
    assert got.count("a@x") == 20 and got.count("b@x") == 10
    assert result.shares == pytest.approx({"a@x": 2 / 3, "b@x": 1 / 3})


def test_light_user_goes_first_and_the_heavy_user_gets_the_rest_in_another_spin():
    acct = Accountant(now=0.0)
    acct.set_real_priority("heavy@x", 75.0)
    slots = [make_slot(f"slot1@n{i}") for i in range(10)]
    result, _ = run_cycle(slots, {"heavy@x": [(make_job("heavy"), 100)],
                                  "light@x": [(make_job("light"), 3)]}, acct=acct)
    got = [s for s, _ in matched(result)]
    assert got[:3] == ["light@x"] * 3
    assert got.count("heavy@x") == 7
    assert result.statistics.pie_spins >= 2


def test_a_slot_split_between_fractional_limits_is_not_left_idle():
    # 3 slots, 2 equal submitters: limits 1.5 each; the last slot is a "crumb"
    slots = [make_slot(f"slot1@n{i}") for i in range(3)]
    result, _ = run_cycle(slots, {"a@x": [(make_job("a"), 5)], "b@x": [(make_job("b"), 5)]})
    got = [s for s, _ in matched(result)]
    assert len(got) == 3 and {got.count("a@x"), got.count("b@x")} == {1, 2}


def test_nice_user_gets_only_what_others_leave():
    slots = [make_slot(f"slot1@n{i}") for i in range(10)]
    nice = "nice-user.carol@x"
    result, _ = run_cycle(slots, {"bob@x": [(make_job("bob"), 20)],
                                  nice: [(make_job("carol"), 20)]})
    assert [s for s, _ in matched(result)] == ["bob@x"] * 10
    result, _ = run_cycle(slots, {"bob@x": [(make_job("bob"), 3)],
                                  nice: [(make_job("carol"), 20)]})
    got = [s for s, _ in matched(result)]
    assert got.count("bob@x") == 3 and got.count(nice) == 7


def test_one_submitter_at_two_schedds_shares_one_slice():
    acct = Accountant(now=0.0)
    slots = [make_slot(f"slot1@n{i}") for i in range(12)]
    result, _ = run_cycle(slots, {("s1", "a@x"): [(make_job("a"), 20)],
                                  ("s2", "a@x"): [(make_job("a"), 20)],
                                  ("s1", "b@x"): [(make_job("b"), 20)]}, acct=acct)
    got = [s for s, _ in matched(result)]
    assert got.count("a@x") == 6 and got.count("b@x") == 6


def test_submitter_limit_rejections_are_counted():
    acct = Accountant(now=0.0)
    slots = [make_slot(f"slot1@n{i}") for i in range(4)]
    busy = [claimed(make_slot(f"slot1@busy{i}"), "a@x") for i in range(4)]
    # a@x already holds 4 of 8 slots = its half: it gains nothing while b@x wants 1
    result, _ = run_cycle(slots + busy, {"a@x": [(make_job("a"), 10)],
                                          "b@x": [(make_job("b"), 1)]}, acct=acct)
    got = [s for s, _ in matched(result)]
    assert got.count("b@x") == 1
    # once b@x is done, a@x may take the leftovers in a later spin
    assert got.count("a@x") == 3
    assert result.statistics.rejections_by_reason.get("submitter limit", 0) >= 1
    assert "a@x" in result.statistics.submitters_share_limited


def _simulate(hours: float, halflife: float, light_batches=()):
    """A 20-slot pool: heavy user A holds everything, B arrives; one-hour jobs, 10-min cycles.

    Returns (per-cycle running counts, accountant, light-job wait times).
    """
    acct = Accountant(AccountantSettings(priority_halflife=halflife), now=0.0)
    acct.set_real_priority("a@x", 20.0)  # A has used the whole pool for a long time
    settings = NegotiatorSettings()
    slots = {f"slot1@n{i:02d}": ("a@x", 3600.0 * (i + 1) / 20) for i in range(20)}
    pending = {"a@x": 10_000, "b@x": 10_000}
    light_waiting: list[float] = []
    waits: list[float] = []
    history = []
    t = 0.0
    batches = list(light_batches)
    while t <= hours * 3600:
        while batches and batches[0][0] <= t:
            light_waiting.extend([batches[0][0]] * batches[0][1])
            batches.pop(0)
        for name, held in list(slots.items()):
            if held and held[1] <= t:
                slots[name] = None
        ads = [make_slot(name) if held is None else claimed(make_slot(name), held[0])
               for name, held in slots.items()]
        requests = {u: [(make_job(u.split("@")[0]), pending[u])] for u in pending}
        if light_waiting:
            requests["light@x"] = [(make_job("light"), len(light_waiting))]
        result, _ = run_cycle(ads, requests, acct=acct, settings=settings, now=t)
        for m in result.matches:
            slots[m.slot_name] = (m.submitter, t + 3600.0)
            if m.submitter == "light@x":
                waits.append(t - light_waiting.pop(0))
        running = [held[0] for held in slots.values() if held]
        history.append((t, running.count("a@x"), running.count("b@x")))
        t += 600.0
    return history, acct, waits


def test_fair_share_converges_to_equal_halves():
    history, acct, _ = _simulate(hours=72, halflife=6 * 3600)
    # B starts at the floor (EUP 500 against A's 20000): it gets nearly every slot that frees
    _, a_first, b_first = next(h for h in history if h[0] == 3600.0)
    assert b_first >= 17
    # ... and the two converge to half the pool each, with real priorities to match
    tail = history[-36:]  # the last six hours
    assert all(abs(a - b) <= 4 for _, a, b in tail)
    assert sum(a for _, a, _ in tail) / len(tail) == pytest.approx(10, abs=1.5)
    assert acct.real_priority("a@x") == pytest.approx(acct.real_priority("b@x"), rel=0.25)


def test_light_user_barely_waits_while_heavy_users_fill_the_pool():
    # fair-share.md §5: the 1988 result: light jobs start in the next cycle that has a free slot
    _, _, waits = _simulate(hours=24, halflife=86400,
                            light_batches=[(8 * 3600.0, 3), (14 * 3600.0 + 300, 2)])
    assert len(waits) == 5
    assert max(waits) <= 600.0


# ----------------------------------------------------------------- preemption


@pytest.mark.parametrize(
    "remote, new_rank, current, preq, retire, early, only_rank, expected",
    [
        (None, 0.0, 0.0, False, 0, False, False, PreemptState.NONE),
        (None, 0.0, 0.0, False, 0, False, True, Rejection.SUBMITTER_LIMIT),
        ("b@x", 5.0, 1.0, False, 0, False, False, PreemptState.RANK),
        ("a@x", 5.0, 1.0, False, 0, False, False, PreemptState.RANK),  # even one's own job
        ("b@x", 5.0, 1.0, False, 0, False, True, PreemptState.RANK),  # limits don't apply
        ("b@x", 1.0, 1.0, True, 0, False, False, PreemptState.PRIORITY),
        ("b@x", 1.0, 1.0, False, 0, False, False, Rejection.PREEMPTION_REQUIREMENTS),
        ("b@x", 0.0, 1.0, True, 0, False, False, Rejection.MACHINE_RANK),
        ("a@x", 1.0, 1.0, True, 0, False, False, Rejection.SAME_SUBMITTER),
        ("b@x", 1.0, 1.0, True, 0, False, True, Rejection.SUBMITTER_LIMIT),
        ("b@x", 5.0, 1.0, True, 30, False, False, Rejection.RETIREMENT),
        ("b@x", 1.0, 1.0, True, 30, True, False, PreemptState.PRIORITY),
        ("b@x", None, 1.0, True, 0, False, False, Rejection.MACHINE_RANK),  # undefined rank
    ],
)
def test_preemption_decision_table(remote, new_rank, current, preq, retire, early, only_rank,
                                   expected):
    verdict = decide_preemption(
        submitter="a@x", remote_user=remote, new_rank=new_rank, current_rank=current,
        preemption_requirements=lambda: preq, retirement_remaining=retire,
        consider_early_preemption=early, only_rank=only_rank)
    got = verdict.state if verdict.state is not None else verdict.rejection
    assert got == expected


def test_preemption_requirements_is_evaluated_only_when_needed():
    calls = []
    decide_preemption(submitter="a", remote_user="b", new_rank=2.0, current_rank=1.0,
                      preemption_requirements=lambda: calls.append(1) or True)
    assert calls == []


def test_submitter_limit_rounds_up_once():
    assert submitter_limit_permits(0.0, 0.5, 1.0)
    assert not submitter_limit_permits(1.0, 1.5, 1.0)
    assert submitter_limit_permits(1.0, 2.0, 1.0)
    assert not submitter_limit_permits(0.0, 0.0, 1.0)


def _busy_pool(acct):
    acct.set_real_priority("heavy@x", 50.0)
    slots = [claimed(make_slot(f"slot1@n{i}"), "heavy@x", EnteredCurrentState=0)
             for i in range(4)]
    acct.check_matches(claimed_resources(slots), 0.0)
    return slots


def test_default_policy_never_preempts_for_priority():
    acct = Accountant(now=0.0)
    slots = _busy_pool(acct)
    result, _ = run_cycle(slots, {"light@x": [(make_job("light"), 2)]}, acct=acct, now=7200.0)
    assert result.matches == ()


def test_priority_preemption_when_the_policy_allows_it():
    acct = Accountant(now=0.0)
    slots = _busy_pool(acct)
    settings = NegotiatorSettings(preemption_requirements=UWCS_PREEMPTION_REQUIREMENTS)
    result, acct = run_cycle(slots, {"light@x": [(make_job("light"), 2)]}, acct=acct,
                             settings=settings, now=7200.0)
    assert [m.preemption for m in result.matches] == [PreemptState.PRIORITY] * 2
    assert {m.preempted_user for m in result.matches} == {"heavy@x"}
    assert result.statistics.priority_preemptions == 2
    assert acct.weighted_resources_used("light@x") == 2.0
    assert acct.weighted_resources_used("heavy@x") == 2.0


def test_policy_reads_claim_age_so_young_claims_are_safe():
    acct = Accountant(now=0.0)
    slots = _busy_pool(acct)
    settings = NegotiatorSettings(
        preemption_requirements="(CurrentTimeNow - EnteredCurrentState) > 3600 && "
                                "RemoteUserPrio > TARGET.SubmitterUserPrio * 1.2")
    young = [s.copy() for s in slots]
    for s in young:
        s["CurrentTimeNow"] = 600
    result, _ = run_cycle(young, {"light@x": [(make_job("light"), 1)]}, acct=acct,
                          settings=settings, now=600.0)
    assert result.matches == ()
    assert result.statistics.rejections_by_reason == {"preemption requirements": 1}


def test_rank_preemption_needs_no_policy_and_ignores_the_submitter_limit():
    acct = Accountant(now=0.0)
    acct.set_real_priority("boss@x", 100.0)  # a terrible priority does not matter
    slot = claimed(make_slot("slot1@lab", exprs={"Rank": 'TARGET.Owner == "boss" ? 10 : 0'}),
                   "student@x", CurrentRank=0.0)
    result, _ = run_cycle([slot], {"boss@x": [(make_job("boss"), 1)]}, acct=acct)
    assert [m.preemption for m in result.matches] == [PreemptState.RANK]
    assert (result.statistics.rank_preemptions, result.statistics.priority_preemptions) == (1, 0)
    assert result.matches[0].preempted_user == "student@x"


def test_retiring_jobs_are_left_alone_unless_early_preemption_is_on():
    slot = claimed(make_slot("slot1@lab", exprs={"Rank": 'TARGET.Owner == "boss" ? 10 : 0'}),
                   "student@x", RetirementTimeRemaining=600)
    jobs = {"boss@x": [(make_job("boss"), 1)]}
    result, _ = run_cycle([slot], jobs)
    assert result.matches == ()
    assert result.statistics.rejections_by_reason == {"retirement": 1}
    result, _ = run_cycle([slot], jobs,
                          settings=NegotiatorSettings(consider_early_preemption=True))
    assert len(result.matches) == 1


def test_idle_slots_are_preferred_to_preemption():
    acct = Accountant(now=0.0)
    slots = _busy_pool(acct) + [make_slot("slot9@free")]
    settings = NegotiatorSettings(preemption_requirements="True")
    result, _ = run_cycle(slots, {"light@x": [(make_job("light"), 1)]}, acct=acct,
                          settings=settings, now=7200.0)
    assert matched(result) == [("light@x", "slot9@free")]


def test_no_preemption_considered_skips_claimed_slots():
    acct = Accountant(now=0.0)
    slots = _busy_pool(acct)
    settings = NegotiatorSettings(preemption_requirements="True", consider_preemption=False)
    result, _ = run_cycle(slots, {"light@x": [(make_job("light"), 1)]}, acct=acct,
                          settings=settings, now=7200.0)
    assert result.matches == ()


# ----------------------------------------------------------------- the core: events and actions


def pool_ads(n_slots=3, idle=2):
    slots = tuple(make_slot(f"slot{i + 1}@h") for i in range(n_slots))
    subs = (ClassAd({"Name": "alice@x", "ScheddName": "s1", "MyAddress": "<s1>",
                     "IdleJobs": idle, "RunningJobs": 0}),)
    return slots, subs


def test_a_cycle_from_wakeup_to_matches():
    neg = Negotiator(now=100.0)
    assert neg.next_deadline() == 100.0
    assert neg.handle(Wakeup(), 99.0) == []  # early timer: nothing due
    assert neg.handle(Wakeup(), 100.0) == [FetchPoolAds(1)]
    assert neg.phase is Phase.FETCHING
    slots, subs = pool_ads()
    asks = neg.handle(PoolAds(1, slots, subs), 101.0)
    assert len(asks) == 1 and isinstance(asks[0], AskResourceRequests)
    assert (asks[0].schedd, asks[0].submitter, asks[0].schedd_address) == ("s1", "alice@x", "<s1>")
    assert asks[0].significant_attributes == ("offline", "remoteowner", "totaljobruntime")
    assert neg.next_deadline() == 131.0  # NEGOTIATOR_TIMEOUT
    req = ResourceRequest(7, make_job(), 2, ("3.0", "3.1"))
    actions = neg.handle(RequestsReceived(1, "s1", "alice@x", (req,)), 102.0)
    notes = [x for a in actions if isinstance(a, NotifyMatches) for x in a.matches]
    assert [(m.slot_name, m.job_id, m.autocluster_id) for m in notes] == [
        ("slot1@h", "3.0", 7), ("slot2@h", "3.1", 7)]
    save, publish = actions[-3], actions[-2]
    assert isinstance(save, SaveAccountant)
    assert save.snapshot["customers"]["alice@x"]["weighted_resources_used"] == 2.0
    assert isinstance(publish, PublishAccounting)
    (ad,) = publish.ads
    assert (ad["Name"], ad["Priority"], ad["WeightedResourcesUsed"], ad["SubmitterShare"]) == (
        "alice@x", 500.0, 2.0, 1.0)
    stats = actions[-1].statistics
    assert isinstance(actions[-1], CycleFinished)
    assert (stats.matches, stats.duration, stats.started) == (2, 2.0, 100.0)
    summary = neg.statistics()
    assert (summary.phase, summary.cycles_completed, summary.total_matches) == ("idle", 1, 2)
    assert summary.last_cycle == stats
    assert neg.next_deadline() == 160.0  # NEGOTIATOR_INTERVAL after the start


def test_schedds_are_told_what_the_slots_read_from_jobs():
    neg = Negotiator(NegotiatorSettings(post_job_rank=None, preemption_rank=None), now=0.0)
    neg.handle(Wakeup(), 0.0)
    slots = (make_slot("slot1@h", exprs={"Start": 'TARGET.Owner != "mallory"',
                                         "Rank": "TARGET.Department == \"physics\""}),)
    _, subs = pool_ads()
    (ask,) = neg.handle(PoolAds(1, slots, subs), 0.0)
    assert ask.significant_attributes == ("department", "owner", "remoteowner")


def test_no_idle_jobs_means_no_schedd_is_asked():
    neg = Negotiator(now=0.0)
    neg.handle(Wakeup(), 0.0)
    slots, subs = pool_ads(idle=0)
    actions = neg.handle(PoolAds(1, slots, subs), 1.0)
    assert [type(a) for a in actions] == [SaveAccountant, PublishAccounting, CycleFinished]


def test_a_trigger_pulls_the_next_cycle_forward_and_bursts_coalesce():
    settings = NegotiatorSettings(interval=300, cycle_delay=20, min_interval=5, trigger_delay=2)
    neg = Negotiator(settings, now=0.0)
    neg.handle(Wakeup(), 0.0)
    slots, subs = pool_ads(idle=0)
    neg.handle(PoolAds(1, slots, subs), 1.0)  # cycle ends at t=1
    assert neg.next_deadline() == 300.0
    neg.handle(Reschedule("submit"), 50.0)
    assert neg.next_deadline() == 52.0
    for t in (50.5, 51.0, 51.9):  # more submits: still one cycle at 52
        neg.handle(Reschedule("submit"), t)
    assert neg.next_deadline() == 52.0
    assert neg.handle(Wakeup(), 52.0) == [FetchPoolAds(2)]


def test_a_trigger_right_after_a_cycle_skips_the_cycle_delay_but_keeps_the_min_interval():
    # Periodic cycles keep NEGOTIATOR_CYCLE_DELAY after the end of the last one ...
    settings = NegotiatorSettings(interval=10, cycle_delay=20, trigger_delay=0.02)
    neg = Negotiator(settings, now=0.0)
    neg.handle(Wakeup(), 0.0)
    slots, subs = pool_ads(idle=0)
    neg.handle(PoolAds(1, slots, subs), 3.0)
    assert neg.next_deadline() == 23.0
    # ... a Reschedule starts one after the coalescing gap, with no cycle-delay penalty.
    neg.handle(Reschedule("submit"), 4.0)
    assert neg.next_deadline() == 4.02
    # NEGOTIATOR_MIN_INTERVAL (HTCondor's 5 s, when set) still spaces cycle starts.
    neg = Negotiator(NegotiatorSettings(interval=300, cycle_delay=20, min_interval=5, trigger_delay=0.02),
                     now=0.0)
    neg.handle(Wakeup(), 0.0)
    neg.handle(PoolAds(1, slots, subs), 1.0)
    neg.handle(Reschedule("submit"), 2.0)
    assert neg.next_deadline() == 5.0


def test_a_trigger_during_a_cycle_schedules_the_next_one_right_after_it():
    settings = NegotiatorSettings(interval=300, cycle_delay=10, trigger_delay=1)
    neg = Negotiator(settings, now=0.0)
    neg.handle(Wakeup(), 0.0)
    neg.handle(Reschedule("submit"), 0.5)  # while fetching
    slots, subs = pool_ads(idle=0)
    neg.handle(PoolAds(1, slots, subs), 2.0)
    assert neg.next_deadline() == 3.0


def test_back_to_back_cycles_do_not_match_a_slot_twice_before_its_startd_reports():
    """A slot matched in one cycle is pending until its ad changes (or NEGOTIATOR_TIMEOUT)."""
    neg = Negotiator(NegotiatorSettings(timeout=30, trigger_delay=0.25), now=0.0)
    static = make_slot("slot1@a")
    pslot = make_slot("slot1@p", Cpus=2, Memory=4096, PartitionableSlot=True, ClaimId="p#1#x")
    subs = (SubmitterAd("alice@x", "s1", "<s1>", 5, 0),)
    job = ResourceRequest(1, make_job(), 5)

    def cycle(n: int, t: float, slots) -> list[str]:
        if n > 1:  # a submit asks for it
            neg.handle(Reschedule("submit"), t - 0.25)
            assert neg.next_deadline() == t
        assert neg.handle(Wakeup(), t) == [FetchPoolAds(n)]
        neg.handle(PoolAds(n, tuple(slots), subs), t)
        actions = neg.handle(RequestsReceived(n, "s1", "alice@x", (job,)), t)
        return sorted(x.slot_name for a in actions if isinstance(a, NotifyMatches) for x in a.matches)

    assert cycle(1, 0.0, [static, pslot]) == ["slot1@a", "slot1@p", "slot1@p"]
    # The collector still has the old ads (no startd has reported): nothing is matched again.
    assert cycle(2, 0.5, [static, pslot]) == []
    # The p-slot carved one dynamic slot so far; its fresh ad says so and is taken as it is.
    carved_once = make_slot("slot1@p", Cpus=1, Memory=3968, PartitionableSlot=True, ClaimId="p#1#x")
    assert cycle(3, 1.0, [static, carved_once]) == ["slot1@p"]
    # A match that lapsed (the schedd had no job left) frees the static slot after NEGOTIATOR_TIMEOUT.
    assert cycle(4, 29.9, [static]) == []
    assert cycle(5, 30.0, [static]) == ["slot1@a"]
    assert len(neg.pending) == 1


def test_a_match_the_schedd_let_lapse_frees_what_it_held_for_the_next_cycle():
    neg = Negotiator(NegotiatorSettings(timeout=30, trigger_delay=0.25), now=0.0)
    static = make_slot("slot1@a")
    pslot = make_slot("slot1@p", Cpus=2, Memory=4096, PartitionableSlot=True, ClaimId="p#1#x")
    subs = (SubmitterAd("alice@x", "s1", "<s1>", 5, 0),)

    def cycle(n: int, t: float, wanted: int) -> list:
        if n > 1:
            neg.handle(Reschedule("submit"), t - 0.25)
        neg.handle(Wakeup(), t)
        neg.handle(PoolAds(n, (static, pslot), subs), t)
        actions = neg.handle(RequestsReceived(n, "s1", "alice@x", (ResourceRequest(1, make_job(), wanted),)), t)
        return [x for a in actions if isinstance(a, NotifyMatches) for x in a.matches]

    matches = cycle(1, 0.0, 3)
    assert sorted(x.slot_name for x in matches) == ["slot1@a", "slot1@p", "slot1@p"]
    assert cycle(2, 1.0, 3) == []  # all of it on its way to the schedd
    # The schedd took the static slot and one carve, and let the other carve lapse.
    carve = next(x for x in matches if x.slot_name == "slot1@p")
    assert neg.match_lapsed("slot1@p", carve.claim_id, carve.autocluster_id) is True
    assert [x.slot_name for x in cycle(3, 2.0, 3)] == ["slot1@p"]  # one carve's worth again, at once
    assert neg.match_lapsed("slot1@zz", "no#such#claim", 1) is False


def test_silent_schedd_is_skipped_after_the_timeout_and_its_late_answer_ignored():
    neg = Negotiator(NegotiatorSettings(timeout=30), now=0.0)
    neg.handle(Wakeup(), 0.0)
    slots = tuple(make_slot(f"slot{i}@h") for i in range(1, 4))
    subs = (SubmitterAd("a@x", "s1", "<s1>", 1, 0), SubmitterAd("b@x", "s2", "<s2>", 1, 0))
    assert len(neg.handle(PoolAds(1, slots, subs), 0.0)) == 2
    neg.handle(RequestsReceived(1, "s1", "a@x", (ResourceRequest(1, make_job("a"), 1),)), 1.0)
    assert neg.handle(Wakeup(), 29.0) == []
    actions = neg.handle(Wakeup(), 30.0)
    stats = actions[-1].statistics
    assert stats.matches == 1 and stats.failed_schedds == ("s2",)
    late = RequestsReceived(1, "s2", "b@x", (ResourceRequest(1, make_job("b"), 1),))
    assert neg.handle(late, 31.0) == []
    assert neg.statistics().stale_replies == 1


def test_failed_schedd_does_not_hold_up_the_others():
    neg = Negotiator(now=0.0)
    neg.handle(Wakeup(), 0.0)
    slots = tuple(make_slot(f"slot{i}@h") for i in range(1, 4))
    subs = (SubmitterAd("a@x", "s1", "<s1>", 1, 0), SubmitterAd("b@x", "s2", "<s2>", 1, 0))
    neg.handle(PoolAds(1, slots, subs), 0.0)
    neg.handle(RequestsFailed(1, "s2", "b@x", "connection refused"), 0.5)
    actions = neg.handle(
        RequestsReceived(1, "s1", "a@x", (ResourceRequest(1, make_job("a"), 1),)), 1.0)
    assert actions[-1].statistics.failed_schedds == ("s2",)
    assert actions[-1].statistics.matches == 1


def test_collector_failures_abort_the_cycle():
    neg = Negotiator(NegotiatorSettings(timeout=10), now=0.0)
    neg.handle(Wakeup(), 0.0)
    (finished,) = neg.handle(PoolAdsFailed(1, "connection refused"), 1.0)
    assert "connection refused" in finished.statistics.aborted
    neg.handle(Wakeup(), neg.next_deadline())
    (finished,) = neg.handle(Wakeup(), neg.next_deadline())
    assert "did not answer within NEGOTIATOR_TIMEOUT (10 s)" in finished.statistics.aborted
    assert neg.statistics().cycles_aborted == 2
    # a reply to the abandoned cycle is stale, not an error
    assert neg.handle(PoolAds(2, (), ()), 20.0) == []


def test_the_cycle_moves_only_by_its_state_table():
    assert step(Phase.IDLE, Step.CYCLE_DUE) is Phase.FETCHING
    assert {TABLE[key] for key in TABLE if key[0] is not Phase.IDLE} == {Phase.REQUESTING, Phase.IDLE}
    with pytest.raises(IllegalTransition, match="negotiator: no transition from state IDLE on event MATCHED"):
        step(Phase.IDLE, Step.MATCHED)
    # a core run through a cycle visits the phases the table allows, in order
    neg = Negotiator(NegotiatorSettings(timeout=10), now=0.0)
    seen = [neg.phase]
    (fetch,) = neg.handle(Wakeup(), 0.0)
    seen.append(neg.phase)
    neg.handle(PoolAds(fetch.cycle, (make_slot("slot1@a"),), (SubmitterAd("a@x", "s1", "<s1>", 1, 0),)), 1.0)
    seen.append(neg.phase)
    neg.handle(RequestsReceived(fetch.cycle, "s1", "a@x", (ResourceRequest(1, make_job("a"), 1),)), 2.0)
    seen.append(neg.phase)
    assert seen == [Phase.IDLE, Phase.FETCHING, Phase.REQUESTING, Phase.IDLE]


def test_unknown_events_are_refused_with_advice():
    neg = Negotiator(now=0.0)
    with pytest.raises(UsageError, match="negotiator in phase idle got 'tick'.*event classes"):
        neg.handle("tick", 0.0)


def test_matches_are_charged_and_reconciled_across_cycles():
    neg = Negotiator(now=0.0)
    neg.handle(Wakeup(), 0.0)
    slots, subs = pool_ads(n_slots=2, idle=2)
    neg.handle(PoolAds(1, slots, subs), 0.0)
    neg.handle(RequestsReceived(1, "s1", "alice@x", (ResourceRequest(1, make_job(), 2),)), 0.0)
    assert neg.accountant.weighted_resources_used("alice@x") == 2.0
    # next cycle: one claim ended (the slot is Unclaimed again), one is running
    neg.handle(Wakeup(), 60.0)
    now_slots = (claimed(slots[0], "alice@x"), slots[1])
    neg.handle(PoolAds(2, now_slots, (SubmitterAd("alice@x", "s1", "<s1>", 0, 1),)), 60.0)
    assert neg.accountant.weighted_resources_used("alice@x") == 1.0
    assert neg.accountant.real_priority("alice@x") > 0.5


def test_the_shared_service_events_are_understood():
    from htc.daemons import core as c
    from htc.wire import messages

    settings = NegotiatorSettings(interval=300, cycle_delay=0, trigger_delay=2)
    neg = Negotiator(settings, now=0.0)
    assert neg.handle(c.Started(), 0.0) == []
    neg.handle(Wakeup(), 0.0)
    slots, subs = pool_ads(idle=0)
    neg.handle(PoolAds(1, slots, subs), 0.0)
    # a schedd's condor_reschedule over the wire: acknowledged, and the cycle comes soon
    reply, = neg.handle(c.Received(messages.Reschedule(), conn_id=7), 10.0)
    assert reply == c.Reply(7, messages.Ack(detail="negotiation cycle scheduled"))
    assert neg.next_deadline() == 12.0
    (refused,) = neg.handle(c.Received(messages.Ping(), conn_id=8), 10.0)
    assert refused.msg.code == "unknown_request" and "negotiator" in refused.msg.message
    # a reconfig with a shorter interval takes effect from the last cycle's start
    neg.handle(c.Reconfigured(NegotiatorSettings(interval=5, trigger_delay=2)), 11.0)
    assert neg.next_deadline() == 5.0
    with pytest.raises(UsageError, match="must pass NegotiatorSettings"):
        neg.handle(c.Reconfigured({"NEGOTIATOR_INTERVAL": 5}), 11.0)
    save, leave = neg.handle(c.StopRequested(), 12.0)
    assert isinstance(save, SaveAccountant) and leave == c.Exit(0)


def test_admin_events_change_the_accountant_and_save_it():
    neg = Negotiator(now=0.0)
    save, publish = neg.handle(SetPriorityFactor("a@x", 5.0), 0.0)
    assert save.snapshot["customers"]["a@x"]["factor"] == 5.0
    assert publish.ads[0]["PriorityFactor"] == 5.0  # htc userprio sees it at once
    neg.handle(SetRealPriority("a@x", 3.0), 0.0)
    assert neg.accountant.effective_priority("a@x") == 15.0
    neg.handle(ResetUsage("a@x"), 0.0)
    assert neg.accountant.real_priority("a@x") == 0.5
    with pytest.raises(UsageError, match=">= 1"):
        neg.handle(SetPriorityFactor("a@x", 0.0), 0.0)


def test_submitter_ads_are_read_with_helpful_errors():
    ad = ClassAd({"Name": "a@x", "ScheddName": "s1", "ScheddIpAddr": "<s>", "IdleJobs": 3})
    assert submitter_from_ad(ad) == SubmitterAd("a@x", "s1", "<s>", 3, 0)
    with pytest.raises(UsageError, match="ScheddName"):
        submitter_from_ad(ClassAd({"Name": "a@x"}))


def test_settings_come_from_the_param_table(tmp_path):
    from htc.config import load_config

    cfg = tmp_path / "htc_config"
    cfg.write_text("NEGOTIATOR_INTERVAL = 30\nPRIORITY_HALFLIFE = 3600\n"
                   "PREEMPTION_REQUIREMENTS = RemoteUserPrio > SubmitterUserPrio * 1.2\n"
                   "GROUP_NAMES = group_a, group_b\n")
    config = load_config("NEGOTIATOR", env={"HTC_CONFIG": str(cfg),
                                            "HTC_HOME": str(tmp_path)})
    settings = NegotiatorSettings.from_config(config, trigger_delay=0.5)
    assert (settings.interval, settings.cycle_delay, settings.timeout) == (30.0, 20.0, 30.0)
    assert settings.trigger_delay == 0.5
    assert not settings.never_priority_preempts
    assert settings.pre_job_rank == DEFAULT_PRE_JOB_RANK
    assert settings.accountant.priority_halflife == 3600.0
    assert settings.accountant.default_prio_factor == 1000.0
    assert settings.accountant.group_names == ("group_a", "group_b")
    assert settings.accountant.local_domain is None


def test_settings_are_checked_at_start_up():
    with pytest.raises(UsageError, match="PREEMPTION_REQUIREMENTS = .* is not a ClassAd"):
        NegotiatorSettings(preemption_requirements="RemoteUserPrio >")
    with pytest.raises(UsageError, match="NEGOTIATOR_INTERVAL must be a positive"):
        NegotiatorSettings(interval=0)
    assert NegotiatorSettings().never_priority_preempts
    assert not NegotiatorSettings(preemption_requirements="True").never_priority_preempts

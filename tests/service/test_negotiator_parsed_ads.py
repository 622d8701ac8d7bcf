"""The negotiator service parses the pool's ads once (:class:`ParsedAds`): a text of the last
reply is not parsed again, and the ad it hands back is what a fresh parse of the text gives,
even after cycles whose pending carves and matches read and copied it."""

from __future__ import annotations

import pytest

from htc.classad import ClassAd, ClassAdParseError
from htc.daemons import core as c
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator import events as n
from htc.daemons.negotiator.adapter import NegotiatorDaemon
from htc.daemons.negotiator.service import ParsedAds
from htc.daemons.negotiator.settings import NegotiatorServiceSettings, NegotiatorSettings
from htc.wire import messages as m

T0 = 1_800_000_000.0


def p_slot(i: int, seq: int = 1, cpus: int = 8) -> str:
    return (f'[ Name = "slot1@p{i}"; MyAddress = "<startd-p{i}>"; State = "Unclaimed"; Activity = "Idle"; '
            f'Cpus = {cpus}; Memory = {cpus * 1024}; Disk = 8000000; PartitionableSlot = true; '
            f'SlotType = "Partitionable"; Arch = "X86_64"; OpSys = "LINUX"; LoadAvg = 0.25; '
            f'KeyboardIdle = {100 + i}; UpdateSequenceNumber = {seq}; DaemonStartTime = 1700000000; '
            f'Start = KeyboardIdle > 60 && LoadAvg < 0.5; Requirements = START; Rank = 0.0; '
            f'ClaimId = "<claim-p{i}>" ]')


def s_slot(i: int, seq: int = 1) -> str:
    return (f'[ Name = "slot1@s{i}"; MyAddress = "<startd-s{i}>"; State = "Unclaimed"; Activity = "Idle"; '
            f'Cpus = 1; Memory = 2048; Disk = 1000000; Arch = "X86_64"; OpSys = "LINUX"; '
            f'UpdateSequenceNumber = {seq}; Requirements = true; Rank = 0.0; ClaimId = "s{i}#1#secret" ]')


def c_slot(i: int) -> str:
    return (f'[ Name = "slot1@c{i}"; MyAddress = "<startd-c{i}>"; State = "Claimed"; Activity = "Busy"; '
            f'RemoteUser = "bob@test"; RemoteOwner = "bob@test"; Cpus = 1; Memory = 2048; Disk = 1000000; '
            f'Arch = "X86_64"; OpSys = "LINUX"; UpdateSequenceNumber = 1; Requirements = true; Rank = 0.0; '
            f'CurrentRank = 0.0; ClaimId = "c{i}#1#secret" ]')


SUBMITTER = '[ Name = "alice@test"; ScheddName = "schedd@test"; MyAddress = "<schedd>"; IdleJobs = 9; RunningJobs = 0 ]'
JOB = ('[ Owner = "alice"; User = "alice@test"; RequestCpus = 2; RequestMemory = 1024; RequestDisk = 1000; '
       'Requirements = TARGET.Arch == "X86_64" && TARGET.Memory >= RequestMemory; Rank = TARGET.KeyboardIdle ]')


def same_as_parsed(ad: ClassAd, text: str) -> bool:
    fresh = ClassAd(text)
    return ad.unparse(exact=True) == fresh.unparse(exact=True) and ad.spellings == fresh.spellings


# --------------------------------------------------------------------------- ParsedAds alone


def test_a_text_of_the_last_reply_is_not_parsed_again_and_nothing_older_is_kept():
    parsed = ParsedAds()
    a, b, c1 = s_slot(1), s_slot(2), s_slot(3)
    first = parsed.parse([a, b])
    assert (parsed.parsed, parsed.reused) == (2, 0)
    second = parsed.parse([b, c1, a])  # (texts equal, not the same str objects: as from the wire)
    assert (parsed.parsed, parsed.reused) == (1, 2)
    assert second[0] is first[1] and second[2] is first[0] and same_as_parsed(second[1], c1)
    parsed.parse([c1])
    third = parsed.parse([a, c1])  # a was not in the last reply: parsed again
    assert (parsed.parsed, parsed.reused) == (1, 1)
    assert third[0] is not first[0] and same_as_parsed(third[0], a)


def test_a_text_twice_in_one_reply_gives_two_ads_and_a_bad_text_keeps_what_was_kept():
    parsed = ParsedAds()
    a = s_slot(1)
    one, two = parsed.parse([a, a])
    assert one is not two and one == two
    with pytest.raises(ClassAdParseError):
        parsed.parse([a, "[ Name = "])
    (again,) = parsed.parse([a])
    assert again is two and parsed.reused == 1


# --------------------------------------------------------------------------- cycles on reused ads


def settings() -> NegotiatorServiceSettings:
    # cycles 5 s apart, matches pending for 30 s: the second and third cycles see the first's
    # carves held back (PendingSlots.apply) on the very ads the first cycle was given; the
    # claimed slot may be preempted, so each cycle gives it its per-cycle attributes (a view)
    core = NegotiatorSettings(interval=5.0, cycle_delay=0.0, min_interval=0.0, timeout=30.0,
                              preemption_requirements="True")
    return NegotiatorServiceSettings(core=core, accountant_file=None, name="negotiator@test")


def cycle(daemon: NegotiatorDaemon, now: float, machines: list, count: int) -> list[tuple]:
    """One cycle on ``machines``; the MatchNotify sends it made: (to, slot, claim id, slot ad)."""
    (fetch,) = [a for a in daemon.handle(c.Tick(), now) if isinstance(a, n.FetchPoolAds)]
    (ask,) = daemon.handle(n.PoolAds(fetch.cycle, tuple(machines), (ClassAd(SUBMITTER),)), now)
    out = daemon.handle(n.RequestsReceived(fetch.cycle, ask.schedd, ask.submitter,
                                           (ResourceRequest(7, ClassAd(JOB), count),)), now + 1)
    return [(a.to, a.msg.slot_name, a.msg.claim_id, a.msg.slot_ad) for a in out
            if isinstance(a, c.Send) and isinstance(a.msg, m.MatchNotify)]


def test_cycles_on_reused_ads_decide_as_on_fresh_parses_and_leave_the_ads_as_parsed():
    replies = [
        [p_slot(1), p_slot(2, cpus=4), s_slot(1), s_slot(2), c_slot(1)],
        # the second: the same texts (pending carves and a taken static slot on reused ads)
        [p_slot(1), p_slot(2, cpus=4), s_slot(1), s_slot(2), c_slot(1)],
        # the third: p2's startd reported its carve (a new text), the rest as before
        [p_slot(1), p_slot(2, seq=2, cpus=2), s_slot(1), s_slot(2), c_slot(1)],
    ]
    kept, fresh = NegotiatorDaemon(settings(), None, T0), NegotiatorDaemon(settings(), None, T0)
    parsed = ParsedAds()
    now = T0
    reused = []
    for texts in replies:
        ads = parsed.parse(texts)
        reused.append(parsed.reused)
        got = cycle(kept, now, ads, count=3)
        assert got == cycle(fresh, now, [ClassAd(t) for t in texts], count=3)
        assert got, "each cycle matches (else it tests nothing)"
        assert all(same_as_parsed(ad, text) for ad, text in zip(ads, texts))
        now += 5.0
    assert reused == [0, 5, 4]
    # the second cycle saw the first's carves held back: p1 had 8 cores, 3 jobs of 2 took 6
    assert kept.negotiator.pending._slots, "the first cycle's matches are pending"

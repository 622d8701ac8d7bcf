"""The adapter's translation of a cycle's NotifyMatches actions (NegotiatorDaemon._notify_matches):
one MatchNotify per match of each run, exactly the message an ordinary (checked) build makes, sent to the
schedd and, with NEGOTIATOR_INFORM_STARTD, to the startd; one log line per run of matches of
one request on one slot."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.negotiator.adapter import NegotiatorDaemon
from htc.daemons.negotiator.events import NotifyMatches
from htc.daemons.negotiator.match_runs import Match, MatchRun
from htc.daemons.negotiator.preemption import PreemptState
from htc.daemons.negotiator.settings import NegotiatorServiceSettings, NegotiatorSettings
from htc.wire import messages as m
from htc.wire.errors import MessageInvalid


def daemon(inform_startd: bool = False) -> NegotiatorDaemon:
    settings = NegotiatorServiceSettings(core=NegotiatorSettings(), accountant_file=Path("/nonexistent"),
                                         inform_startd=inform_startd, collector="<cm:9618>")
    return NegotiatorDaemon(settings, None, 0.0)


def match(slot="slot1@n1", ac=1, submitter="alice@x", claim="c1", preempted=None, cpus=4, **kw) -> Match:
    fields = dict(submitter=submitter, schedd="schedd@x", schedd_address="<schedd>", autocluster_id=ac,
                  job_id="1.0", slot_name=slot, startd_address=f"<{slot}>", claim_id=claim,
                  slot_ad=ClassAd({"Name": slot, "Cpus": cpus, "Memory": 1024}),
                  preemption=PreemptState.NONE, preempted_user=preempted, weight=1.0)
    fields.update(kw)
    return Match(**fields)


def NotifyMatch(x: Match) -> NotifyMatches:  # noqa: N802 - a run of one, as the action was
    return NotifyMatches(MatchRun.of(x))


def checked(x: Match) -> m.MatchNotify:
    """The message as any code builds it, converted and checked by msgspec."""
    return m.MatchNotify(claim_id=x.claim_id, submitter=x.submitter, slot_name=x.slot_name,
                         startd_address=x.startd_address or "startd", slot_ad=str(x.slot_ad),
                         autocluster_id=x.autocluster_id, pool="<cm:9618>")


def test_each_match_is_one_checked_message_and_a_run_is_one_log_line():
    run = [match(claim=f"c{i}", cpus=4 - i) for i in range(3)]  # one request's jobs on one slot
    others = [match(slot="slot1@n2"), match(slot="slot1@n2", submitter="bob@x"),
              match(slot="slot1@n2", submitter="bob@x", preempted="carol@x")]
    matches = [*run, *others]
    out = daemon()._translate([c.Log("before"), *map(NotifyMatch, matches), c.Log("after")])
    sends = [a for a in out if isinstance(a, c.Send)]
    assert [s.msg for s in sends] == [checked(x) for x in matches]
    assert all(s.to == "<schedd>" and s.timeout == NegotiatorSettings().timeout for s in sends)
    assert [a.text if isinstance(a, c.Log) else a.msg.claim_id for a in out] == [
        "before",
        "match: alice@x (autocluster 1 at schedd@x) -> slot1@n1 (3 matches)", "c0", "c1", "c2",
        "match: alice@x (autocluster 1 at schedd@x) -> slot1@n2", "c1",
        "match: bob@x (autocluster 1 at schedd@x) -> slot1@n2", "c1",
        "match: bob@x (autocluster 1 at schedd@x) -> slot1@n2, preempting carol@x", "c1",
        "after"]


def test_with_inform_startd_each_match_goes_to_its_startd_too():
    matches = [match(claim="c1"), match(claim="c2", startd_address="")]
    out = daemon(inform_startd=True)._translate(list(map(NotifyMatch, matches)))
    assert [(a.to, a.msg.claim_id) for a in out if isinstance(a, c.Send)] == [
        ("<schedd>", "c1"), ("<slot1@n1>", "c1"), ("<schedd>", "c2"), ("startd", "c2")]
    assert [a.text for a in out if isinstance(a, c.Log)] == [
        "match: alice@x (autocluster 1 at schedd@x) -> slot1@n1 (2 matches)"]
    assert [a.msg for a in out if isinstance(a, c.Send)][3] == checked(matches[1])


@pytest.mark.parametrize("bad", [dict(claim_id=""), dict(slot_name=""), dict(submitter=""),
                                 dict(autocluster_id=-1), dict(claim_id=7)])
def test_a_value_the_wire_refuses_raises_as_an_ordinary_build_does(bad):
    with pytest.raises(MessageInvalid) as ordinary:
        checked(match(**bad))
    with pytest.raises(MessageInvalid) as translated:
        daemon()._translate([NotifyMatch(match(**bad))])
    assert str(translated.value) == str(ordinary.value)


def test_the_collector_is_held_off_while_the_matches_are_translated():
    """As for the cycle (gc_pause): each slot ad is printed, and each message built, with the
    automatic collector off; it is on again afterwards."""
    seen = []

    class Ad:
        def __str__(self):
            seen.append(gc.isenabled())
            return "[ Name = 1 ]"

    assert gc.isenabled()
    out = daemon()._translate([NotifyMatch(match(slot_ad=Ad())), NotifyMatch(match(slot_ad=Ad()))])
    assert seen == [False, False] and gc.isenabled()
    assert [a.msg.slot_ad for a in out if isinstance(a, c.Send)] == ["[ Name = 1 ]"] * 2

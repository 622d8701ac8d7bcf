"""The negotiator and one hostile job (issue #14, part 4): the cycle goes on for everybody else.

Core tests: a real cycle with real ClassAds, no event loop. The real-process twin of these is
tests/system/test_hostile_messages.py (a pool whose negotiator must survive such a job).
"""

from __future__ import annotations

import logging

import pytest
from tests.negotiator_cycles import make_job, make_slot, run_cycle

from htc.classad import ClassAd, builtins
from htc.daemons import core as c
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator.core import Negotiator
from htc.daemons.negotiator.events import CycleFinished, FetchPoolAds, PoolAds, RequestsReceived
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.submitters import SubmitterAd

LONG_OR = " || ".join(f'TARGET.Name == "slot{i}@nowhere"' for i in range(699)) + ' || TARGET.OpSys == "LINUX"'


def test_a_job_whose_requirements_is_a_700_term_or_matches_like_any_other():
    slots = [make_slot("slot1@a"), make_slot("slot2@a")]
    result, _ = run_cycle(slots, {"alice": [(make_job("alice", {"Requirements": LONG_OR}), 1)],
                                  "bob": [(make_job("bob"), 1)]})
    assert sorted(m.submitter for m in result.matches) == ["alice", "bob"]
    assert result.skipped == ()


@pytest.fixture
def boom(monkeypatch):
    """A builtin that raises (a bug evaluation does not turn into ERROR), for one test."""
    def explode(args):
        raise ZeroDivisionError("a builtin with a bug")
    monkeypatch.setitem(builtins.FUNCTIONS, "htcboom", explode)


def test_a_job_whose_expression_raises_is_skipped_and_the_cycle_goes_on(boom):
    slots = [make_slot("slot1@a"), make_slot("slot2@a")]
    bad = make_job("alice", {"Requirements": 'htcboom() || TARGET.OpSys == "LINUX"'})
    result, _ = run_cycle(slots, {"alice": [(bad, 1), (make_job("alice"), 1)],
                                  "bob": [(make_job("bob"), 1)]})
    assert sorted(m.submitter for m in result.matches) == ["alice", "bob"]
    [line] = result.skipped
    assert "alice" in line and "autocluster 1" in line and "ZeroDivisionError: a builtin with a bug" in line


def test_a_job_whose_rank_raises_is_skipped_too(boom):
    slots = [make_slot("slot1@a")]
    bad = make_job("alice", {"Rank": "htcboom()"})
    result, _ = run_cycle(slots, {"alice": [(bad, 1)], "bob": [(make_job("bob"), 1)]})
    assert [m.submitter for m in result.matches] == ["bob"]
    assert len(result.skipped) == 1


def test_the_negotiator_logs_the_skipped_request_and_keeps_cycling(boom):
    neg = Negotiator(NegotiatorSettings())
    now = 1000.0
    actions = neg.handle(c.Started(), now)
    for _ in range(3):  # the same bad job, cycle after cycle
        now = max(now, neg.next_deadline() or now) + 0.01
        actions = neg.handle(c.Tick(), now)
        fetch = next(a for a in actions if isinstance(a, FetchPoolAds))
        slot = make_slot("slot1@a")
        submitter = SubmitterAd("alice", "schedd1", "schedd1", 2, 0)
        ad = ClassAd({"MyType": "Submitter", "Name": "alice", "ScheddName": "schedd1",
                      "MyAddress": "schedd1", "IdleJobs": 2, "RunningJobs": 0})
        actions = neg.handle(PoolAds(fetch.cycle, (slot,), (ad,)), now)
        reqs = (ResourceRequest(1, make_job("alice", {"Requirements": "htcboom()"}), 1),
                ResourceRequest(2, make_job("alice"), 1))
        actions = neg.handle(RequestsReceived(fetch.cycle, submitter.schedd, "alice", reqs), now)
        logs = [a for a in actions if isinstance(a, c.Log) and a.level == logging.WARNING]
        assert len(logs) == 1 and "skipped the request of alice" in logs[0].text
        assert any(isinstance(a, CycleFinished) for a in actions)
        assert sum(a.run.count for a in actions if type(a).__name__ == "NotifyMatches") == 1

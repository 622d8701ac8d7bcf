"""ClassAd evaluation reads the "now" a caller supplies (htc.classad.clock)."""

from __future__ import annotations

from htc.classad import ClassAd, ExprTree
from htc.classad.clock import evaluation_time, now_seconds


def test_time_and_current_time_read_the_supplied_now():
    ad = ClassAd({"Entered": 1000})
    ad["Age"] = ExprTree("time() - Entered")
    with evaluation_time(4600.0):
        assert ExprTree("time()").eval() == 4600
        assert ad.eval("Age") == 3600
        assert ExprTree("CurrentTime").eval(ad) == 4600
        assert ExprTree("int(currentTime())").eval() == 4600


def test_supplied_times_nest_and_are_restored():
    with evaluation_time(100.0):
        with evaluation_time(200.0):
            assert now_seconds() == 200.0
        assert now_seconds() == 100.0
        with evaluation_time(None):  # None: the real clock again
            assert now_seconds() > 1_000_000_000
    # outside any block: the real clock (no wall-clock comparison, only "not the fake one")
    assert ExprTree("time()").eval() > 1_000_000_000

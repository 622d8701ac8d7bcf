"""The negotiation cycle runs with Python's cyclic garbage collector paused
(``htc.daemons.negotiator.gc_pause``) and leaves it as it found it, also when the cycle raises."""

from __future__ import annotations

import gc

import pytest

from htc.daemons.negotiator import cycle as cycle_module
from htc.daemons.negotiator.gc_pause import collector_paused
from htc.daemons.negotiator.search import IdleSearch
from htc.daemons.negotiator.vsearch import VectorSearch
from tests.unit.test_negotiator_core import make_job, make_slot, run_cycle


@pytest.fixture
def gc_state():
    """Restore the collector's state whatever a test does to it."""
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def _seen_during_search(monkeypatch) -> list[bool]:
    seen: list[bool] = []
    for search in (IdleSearch, VectorSearch):
        original = search.best

        def spy(self, *args, _original=original, **kwargs):
            seen.append(gc.isenabled())
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(search, "best", spy)
    return seen


def test_the_cycle_runs_without_automatic_collections_and_restores_them(monkeypatch, gc_state):
    gc.enable()
    seen = _seen_during_search(monkeypatch)
    result, _ = run_cycle([make_slot("slot1@a"), make_slot("slot2@a")],
                          {"alice@x": [(make_job("alice"), 2)]})
    assert len(result.matches) == 2
    assert seen and not any(seen)  # every search ran with the collector paused
    assert gc.isenabled()


def test_a_collector_disabled_by_the_caller_stays_disabled(monkeypatch, gc_state):
    gc.disable()
    run_cycle([make_slot("slot1@a")], {"alice@x": [(make_job("alice"), 1)]})
    assert not gc.isenabled()


def test_the_collector_is_restored_when_the_cycle_raises(monkeypatch, gc_state):
    gc.enable()

    def boom(*args, **kwargs):
        assert not gc.isenabled()
        raise RuntimeError("boom")

    monkeypatch.setattr(cycle_module, "_negotiate_cycle", boom)
    with pytest.raises(RuntimeError):
        run_cycle([make_slot("slot1@a")], {"alice@x": [(make_job("alice"), 1)]})
    assert gc.isenabled()


def test_nested_pauses_restore_the_outer_state(gc_state):
    gc.enable()
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause is still in force
    assert gc.isenabled()

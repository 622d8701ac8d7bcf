"""The daemons' shared vocabulary: the clock, settings from the param table, state tables."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from htc.config import load_config
from htc.daemons.clock import REAL, FakeClock
from htc.daemons.settings import from_config, knob, knobs_of
from htc.errors import UsageError
from htc.transitions import IllegalTransition, legal_events, transition


def test_real_clock_reads_the_system_clocks():
    before = time.time()
    assert before <= REAL.time() <= time.time()
    assert REAL.monotonic() <= time.monotonic()


def test_fake_clock_moves_only_when_advanced_and_wakes_waits_in_time_order():
    clock = FakeClock(start=1000.0)
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.monotonic()))

    async def main() -> None:
        tasks = [asyncio.create_task(sleeper("late", 10)), asyncio.create_task(sleeper("early", 3))]
        await clock.settle()
        assert woke == [] and clock.time() == 1000.0
        assert clock.next_wakeup() == 3
        clock.advance(5)
        await clock.settle()
        assert woke == [("early", 5.0)]
        clock.advance(5)
        await asyncio.gather(*tasks)
        assert woke == [("early", 5.0), ("late", 10.0)]
        assert clock.time() == 1010.0

    asyncio.run(main())


def test_fake_clock_wait_for_returns_on_the_event_or_on_the_fake_timeout():
    clock = FakeClock()

    async def main() -> None:
        event = asyncio.Event()
        waiting = asyncio.create_task(clock.wait_for(event, 30))
        await clock.settle()
        clock.advance(29)
        await clock.settle()
        assert not waiting.done()
        clock.advance(1)
        assert await waiting is False
        setter = asyncio.create_task(clock.wait_for(event, 30))
        await clock.settle()
        event.set()
        assert await setter is True
        assert clock.next_wakeup() is None  # the timer of the finished wait is gone

    asyncio.run(main())


def test_fake_clock_refuses_to_go_back_and_blocking_sleep_advances_it():
    clock = FakeClock()
    with pytest.raises(ValueError, match="cannot go back"):
        clock.advance(-1)
    clock.sleep_blocking(2.5)
    assert clock.monotonic() == 2.5


@dataclasses.dataclass(frozen=True)
class _Settings:
    lifetime: float = knob("CLASSAD_LIFETIME", 1.0)
    name: str = knob("COLLECTOR_NAME", "x", convert=lambda v: f"<{v}>")
    pid: int = 0


def test_settings_come_from_the_param_table_and_given_values_win(tmp_path, monkeypatch):
    cfg = tmp_path / "htc_config"
    cfg.write_text("CLASSAD_LIFETIME = 77\n")
    monkeypatch.setenv("HTC_CONFIG", str(cfg))
    config = load_config()
    built = from_config(_Settings, config, pid=42)
    assert built == _Settings(lifetime=77.0, name=f"<{config.param('COLLECTOR_NAME')}>", pid=42)
    assert from_config(_Settings, config, lifetime=3.0).lifetime == 3.0
    assert knobs_of(_Settings) == {"lifetime": "CLASSAD_LIFETIME", "name": "COLLECTOR_NAME"}


def test_a_knob_the_field_cannot_take_names_the_knob():
    @dataclasses.dataclass(frozen=True)
    class Bad:
        n: int = knob("CLASSAD_LIFETIME", 0, convert=lambda v: int("not a number"))

    class Config:
        def param(self, name):
            return 5

    with pytest.raises(UsageError, match="CLASSAD_LIFETIME"):
        from_config(Bad, Config())


def test_one_transition_for_single_and_composite_states():
    table = {("A", "go"): "B", ("Owner", "Idle", "claim"): ("Claimed", "Idle")}
    assert transition(table, "m", "A", "go") == "B"
    assert transition(table, "slot1", ("Owner", "Idle"), "claim") == ("Claimed", "Idle")
    with pytest.raises(IllegalTransition, match="m: no transition from state B on event go") as info:
        transition(table, "m", "B", "go")
    assert (info.value.machine, info.value.state, info.value.event) == ("m", "B", "go")
    with pytest.raises(IllegalTransition, match="^custom$"):
        transition(table, "m", "B", "go", explain=lambda: "custom")
    assert legal_events(table, ("Owner", "Idle")) == ["claim"]
    assert legal_events(table, "A") == ["go"]

"""The negotiator's service tells each destination its matches through a queue (service.py,
"A cycle's MatchNotify messages are queued per destination"): each once, on at most MATCH_LANES
connections, each outcome fed back as its own event; a destination that lets one time out
fails the rest of its queue at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from htc.daemons import core as c
from htc.daemons.negotiator.service import MATCH_LANES, MATCH_WINDOW, NegotiatorService
from htc.daemons.negotiator.settings import NegotiatorServiceSettings, NegotiatorSettings
from htc.daemons.service import DaemonPaths
from htc.wire import messages as m
from htc.wire.errors import ConnectionClosed
from htc.wire.transport import UnixTransport


def notify(i: int) -> m.MatchNotify:
    return m.MatchNotify(claim_id=f"c{i}", submitter="alice@x", slot_name=f"slot{i}@n", startd_address="startd",
                         slot_ad=f'[ Name = "slot{i}@n" ]', autocluster_id=1)


class FakeSchedd:
    """Answers each MatchNotify with an Ack (or never, ``silent``; an ErrorReply to every
    ``refuse``-th; closes the connection after its ``hang_up``-th message); counts its connections."""

    def __init__(self, silent: bool = False, refuse: int = 0, hang_up: int = 0):
        self.silent, self.refuse, self.hang_up = silent, refuse, hang_up
        self.got: list[str] = []
        self.connections = 0

    async def handle(self, conn) -> None:
        self.connections += 1
        try:
            while True:
                msg = await conn.recv()
                self.got.append(getattr(msg, "claim_id", type(msg).__name__))
                if self.hang_up and len(self.got) == self.hang_up:
                    await conn.aclose()
                    return
                if self.silent:
                    continue
                if self.refuse and len(self.got) % self.refuse == 0:
                    conn.send_nowait(m.ErrorReply(code="bad_request", message="refused"))
                else:
                    conn.send_nowait(m.Ack(detail=""))
                await conn.drain()
        except ConnectionClosed:
            return


def run_sends(home: Path, schedds: dict[str, FakeSchedd], sends: list[c.Send], settle) -> list[c.Event]:
    """Start the negotiator's service, execute ``sends`` as the core's actions are, and return
    the SendDone/SendFailed events of their messages fed back once ``settle(events)`` holds
    (not those of its own sends: the Negotiator ad to a collector that is not there)."""
    t = DaemonPaths(home).transport()
    settings = NegotiatorServiceSettings(core=NegotiatorSettings(interval=3600.0), accountant_file=home / "acct.json")
    service = NegotiatorService(settings, t)
    fed: list[c.Event] = []
    feed = service.feed
    ours = {id(send.msg) for send in sends}
    service.feed = lambda event: (fed.append(event) if isinstance(event, (c.SendDone, c.SendFailed))
                                  and id(event.msg) in ours else None, feed(event))[1]

    async def main():
        async with asyncio.TaskGroup() as tg:
            servers = [await t.start_server(name, schedd.handle, task_group=tg) for name, schedd in schedds.items()]
            run = tg.create_task(service.run())
            async with asyncio.timeout(20):  # (only a broken queue takes this long)
                while service._tg is None:
                    await asyncio.sleep(0.01)
                service.execute(sends)
                while not settle(fed):
                    await asyncio.sleep(0.01)
            service.feed(c.StopRequested(fast=True))
            await run
            for server in servers:
                await server.aclose()

    asyncio.run(main())
    return fed


def test_each_destination_gets_its_matches_in_order_on_a_few_connections(home):
    schedds = {f"schedd{k}": FakeSchedd() for k in range(3)}
    sends = [c.Send(f"schedd{i % 3}", notify(i), timeout=5.0) for i in range(90)]
    fed = run_sends(home, schedds, sends, lambda fed: len(fed) == 90)
    assert all(isinstance(e, c.SendDone) and e.reply == m.Ack(detail="") for e in fed)
    assert sorted(e.msg.claim_id for e in fed) == sorted(f"c{i}" for i in range(90))
    for k, schedd in enumerate(schedds.values()):
        assert sorted(schedd.got) == sorted(f"c{i}" for i in range(k, 90, 3))  # each once
        assert 1 <= schedd.connections <= MATCH_LANES  # (a task each opened 30)


def test_a_destination_that_does_not_answer_fails_the_rest_of_its_queue(home):
    schedds = {"quiet": FakeSchedd(silent=True), "fine": FakeSchedd()}
    sends = [c.Send("quiet", notify(i), timeout=0.3) for i in range(200)]
    sends += [c.Send("fine", notify(1000 + i), timeout=5.0) for i in range(5)]
    fed = run_sends(home, schedds, sends, lambda fed: len(fed) == 205)
    failed = [e for e in fed if isinstance(e, c.SendFailed)]
    assert sorted(e.msg.claim_id for e in failed) == sorted(f"c{i}" for i in range(200))
    assert len(schedds["quiet"].got) <= MATCH_LANES * MATCH_WINDOW  # the rest were never sent
    held = [e for e in failed if e.error.startswith("an earlier MatchNotify to quiet had no answer")]
    assert len(held) >= 200 - MATCH_LANES
    assert sorted(e.msg.claim_id for e in fed if isinstance(e, c.SendDone)) == [f"c{1000 + i}" for i in range(5)]


def test_other_messages_are_sent_as_every_service_sends_them(home):
    schedds = {"schedd9": FakeSchedd()}
    fed = run_sends(home, schedds, [c.Send("schedd9", m.Reschedule(), timeout=5.0)], lambda fed: len(fed) == 1)
    assert [type(e) for e in fed] == [c.SendDone] and schedds["schedd9"].got == ["Reschedule"]


def test_an_error_reply_fails_its_message_alone_and_a_broken_connection_its_unanswered_ones(home):
    schedds = {"picky": FakeSchedd(refuse=3), "flaky": FakeSchedd(hang_up=5)}
    sends = [c.Send("picky", notify(i), timeout=5.0) for i in range(30)]
    sends += [c.Send("flaky", notify(100 + i), timeout=5.0) for i in range(40)]
    fed = run_sends(home, schedds, sends, lambda fed: len(fed) == 70)
    picky = [e for e in fed if e.to == "picky"]
    assert len(picky) == 30 and len(schedds["picky"].got) == 30
    assert sum(isinstance(e, c.SendFailed) and "refused" in e.error for e in picky) == 10  # every 3rd
    flaky = [e for e in fed if e.to == "flaky"]
    assert sorted(e.msg.claim_id for e in flaky) == sorted(f"c{100 + i}" for i in range(40))  # each told once
    lost = [e for e in flaky if isinstance(e, c.SendFailed)]
    assert 1 <= len(lost) <= MATCH_LANES * MATCH_WINDOW  # what was in flight when it hung up
    assert sum(isinstance(e, c.SendDone) for e in flaky) == 40 - len(lost)  # the rest on new connections
    assert schedds["flaky"].connections > 1


def test_lanes_at_once_are_capped_and_waiting_destinations_get_the_next_free(home, monkeypatch):
    from htc.daemons.negotiator import service

    monkeypatch.setattr(service, "MATCH_LANES_IN_ALL", 2)
    held = {"now": 0, "most": 0}  # the negotiator's connections to the startds open at once
    real_open = UnixTransport.open_connection

    async def open_connection(self, address, *, timeout=None):
        conn = await real_open(self, address, timeout=timeout)
        if address.startswith("startd"):
            held["now"] += 1
            held["most"] = max(held["most"], held["now"])
            close = conn.close_nowait

            def close_nowait():
                held["now"] -= 1
                close()
            conn.close_nowait = close_nowait
        return conn

    monkeypatch.setattr(UnixTransport, "open_connection", open_connection)
    schedds = {f"startd{k}": FakeSchedd() for k in range(6)}
    sends = [c.Send(f"startd{i % 6}", notify(i), timeout=5.0) for i in range(60)]
    fed = run_sends(home, schedds, sends, lambda fed: len(fed) == 60)
    assert all(isinstance(e, c.SendDone) for e in fed)
    assert all(sorted(s.got) == sorted(f"c{i}" for i in range(k, 60, 6)) for k, s in enumerate(schedds.values()))
    assert held == {"now": 0, "most": 2}  # (without the cap: a lane or more per startd at once)

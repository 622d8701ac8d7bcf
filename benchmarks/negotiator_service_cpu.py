"""Benchmark: the negotiator daemon's CPU per match after the core has decided it (issue #19).

``benchmarks/negotiator_bench.py`` times the core alone. The real daemon then turns each match
of the core's ``NotifyMatches`` actions (one per run of matches of a request on a slot) into
wire work (:mod:`htc.daemons.negotiator.adapter`): a ``MatchNotify`` carrying the slot ad's
text, a log line per run, a ``Send`` to the schedd (and one to the startd with
NEGOTIATOR_INFORM_STARTD); its service writes each log line to the NegotiatorLog and each Send's
message as one frame. This runs one cycle of ``negotiator_bench``'s pool and jobs (case 1 by
default: 10,000 partitionable slots, 100,000 idle jobs in 50 autoclusters) through the real
:class:`~htc.daemons.negotiator.adapter.NegotiatorDaemon` and times each phase in CPU seconds
of this process (``time.process_time``, so a loaded machine distorts it little):

========== ===========================================================================================
core       the core's handling of the last schedd's answer: the whole matchmaking (its first half of
           ``NegotiatorDaemon._to_core``)
translate  the adapter turning the core's actions into the service's (its second half)
encode     every Send's message encoded and framed as :meth:`htc.wire.transport.Connection.send`
           does (:func:`htc.wire.messages.encode`, :func:`htc.wire.framing.frame`)
log        every Log action written as the service's ``_do_log`` does, through a logger with the
           daemon's format and a FileHandler (to a temporary file)
========== ===========================================================================================

No sockets: what a Send costs after its frame is made (the service's task per Send, the
connection, the kernel's copy, the peer's reply) is not in these figures. They are the CPU the
daemon spends per match on its own side, which is what the daemon alone can save.

``--send`` then measures that rest on real Unix sockets: the cycle's MatchNotify sends executed
by a running :class:`~htc.daemons.negotiator.service.NegotiatorService` against ten fake schedds
in a child process (each answers every message with an Ack), once as every service sends (a task
and a request each, ``DaemonService._do_send``) and once through the negotiator's queues per
destination (its Send executor), until every answer has been fed back to the daemon. It prints
the negotiator's CPU per match, the connections it opened, the outcomes, and the fake schedds' CPU.

It also prints the cycle's matches digest (as ``negotiator_bench``: case 1 ``f86d4da46be5b753``)
and a digest of every MatchNotify Send (destination and frame bytes, in order): the same wire
digest before and after a change means the schedds and startds receive exactly the same bytes.

Usage::

    python benchmarks/negotiator_service_cpu.py                        # case 1, twice
    python benchmarks/negotiator_service_cpu.py --machines 1000 --jobs 10000 --repeat 3   # quick
    python benchmarks/negotiator_service_cpu.py --inform-startd        # MatchNotify to startds too
    python benchmarks/negotiator_service_cpu.py --profile 25           # cProfile of translate+encode
    python benchmarks/negotiator_service_cpu.py --parse                # the collector's reply, parsed
    python benchmarks/negotiator_service_cpu.py --machines 1000 --jobs 8000 --repeat 1 --send
    python benchmarks/negotiator_service_cpu.py --machines 1000 --jobs 8000 --repeat 1 --schedd 2000

``--parse`` measures the service's reading of the collector's answer instead (no cycle): the
10,000 slot ads' texts as the collector keeps them, decoded from an ``AdsReply`` frame as the
service receives it, then parsed as the service did (``ClassAd(text)`` of each) and as it does
(:class:`~htc.daemons.negotiator.service.ParsedAds`): a first cycle, then later ones where 20%
of the ads changed (a new ``KeyboardIdle``, ``LoadAvg`` and ``UpdateSequenceNumber``) and one
where none did; CPU seconds of each, the two ways alternating in one process.

``--schedd N`` measures the other side: N of the cycle's MatchNotify messages (p-slot ads as the
adapter printed them), renamed to one submitter's one autocluster, handled by a real schedd core
(:class:`~htc.daemons.schedd.core.Schedd`, an in-memory job queue of N idle jobs): its CPU per
MatchNotify, from the Received event to its Ack and RequestClaim (no sockets either), and a digest of
the actions (the Acks, RequestClaims and log lines) it answered them with: the same digest before and
after a change means the schedd sends the same.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import hashlib
import logging
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import negotiator_bench as nb  # noqa: E402 - the same pool and jobs

from htc.daemons import core as c  # noqa: E402
from htc.daemons.negotiator.adapter import NegotiatorDaemon  # noqa: E402
from htc.daemons.negotiator.events import NotifyMatches, PoolAds, RequestsReceived, Wakeup  # noqa: E402
from htc.daemons.negotiator.settings import NegotiatorServiceSettings, NegotiatorSettings  # noqa: E402
from htc.daemons.service import _FORMAT  # noqa: E402 - the daemons' log format
from htc.wire import messages as m  # noqa: E402
from htc.wire.framing import DEFAULT_MAX_FRAME, frame  # noqa: E402


def one_cycle(slots, subs, requests, *, inform_startd: bool, log: logging.Logger, profile=None) -> dict:
    """One cycle through the daemon; returns each phase's CPU seconds, counts and digests."""
    settings = NegotiatorServiceSettings(core=NegotiatorSettings(), accountant_file=Path(os.devnull),
                                         inform_startd=inform_startd)
    daemon = NegotiatorDaemon(settings, None, 0.0)
    daemon.handle(Wakeup(), 0.0)
    asks = daemon.handle(PoolAds(1, tuple(slots), tuple(subs)), 0.0)
    *first, last = [RequestsReceived(1, a.schedd, a.submitter, tuple(requests[(a.schedd, a.submitter)]))
                    for a in asks]
    for event in first:
        assert daemon.handle(event, 1.0) == [], "the cycle ended before the last schedd answered"
    t0 = time.process_time()
    core_actions = daemon.negotiator.handle(last, 1.0)  # NegotiatorDaemon._to_core, first half
    t1 = time.process_time()
    if profile is not None:
        profile.enable()
    actions = daemon._translate(core_actions)  # ... and second half
    t2 = time.process_time()
    sends = [a for a in actions if a.__class__ is c.Send]
    frames = [(a.to, frame(m.encode(a.msg), DEFAULT_MAX_FRAME)) for a in sends]
    t3 = time.process_time()
    if profile is not None:
        profile.disable()
    logs = [a for a in actions if a.__class__ is c.Log]
    for a in logs:  # as DaemonService._do_log
        log.log(a.level, "%s", a.text)
    t4 = time.process_time()
    matches = [x for a in core_actions if a.__class__ is NotifyMatches for x in a.matches]
    wire = hashlib.sha256()
    for a, (to, data) in zip(sends, frames):
        if a.msg.__class__ is m.MatchNotify:  # (the Negotiator ad's figures vary run to run)
            wire.update(to.encode())
            wire.update(data)
    return {
        "sends_made": [(a.to.strip("<>"), a.msg) for a in sends if a.msg.__class__ is m.MatchNotify],
        "core": t1 - t0, "translate": t2 - t1, "encode": t3 - t2, "log": t4 - t3,
        "matches": len(matches), "sends": len(frames), "logs": len(logs),
        "bytes": sum(len(d) for _, d in frames), "wire": wire.hexdigest()[:16],
        "digest": hashlib.sha256("\n".join(
            f"{x.submitter} {x.autocluster_id} {x.job_id} {x.slot_name} {x.carved}"
            for x in matches).encode()).hexdigest()[:16],
    }


async def _fake_schedds(sockets: str) -> None:
    """The child of ``--send``: schedd0..schedd9 answer every message with an Ack until stdin
    gives a line; then print this process's CPU seconds."""
    from htc.wire.errors import ConnectionClosed
    from htc.wire.transport import UnixTransport

    async def answer(conn) -> None:
        try:
            while True:
                await conn.recv()
                conn.send_nowait(m.Ack(detail=""))
                await conn.drain()
        except ConnectionClosed:
            return

    t = UnixTransport(sockets)
    async with asyncio.TaskGroup() as tg:
        for i in range(10):
            await t.start_server(f"schedd{i}", answer, task_group=tg)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        print(f"{time.process_time():.2f}", flush=True)
        os._exit(0)


def send_path(sends: list, queued: bool, home: Path) -> str:
    """Execute ``sends`` (destination, MatchNotify) in a running NegotiatorService; one line of figures."""
    from htc.daemons.negotiator.service import NegotiatorService
    from htc.wire.transport import UnixTransport

    sockets = home / "sockets"
    child = subprocess.Popen([sys.executable, __file__, "--serve", str(sockets)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        if child.stdout.readline().strip() != "ready":
            raise SystemExit("the fake schedds did not start")
        settings = NegotiatorServiceSettings(core=NegotiatorSettings(interval=3600.0), accountant_file=home / "acct")
        service = NegotiatorService(settings, UnixTransport(sockets))
        actions = [c.Send(to, msg, timeout=settings.core.timeout) for to, msg in sends]
        ours = {id(a.msg) for a in actions}
        outcomes: collections.Counter = collections.Counter()
        errors: list[str] = []
        feed = service.feed

        def counting(event) -> None:
            if event.__class__ in (c.SendDone, c.SendFailed) and id(event.msg) in ours:
                outcomes["answered" if event.__class__ is c.SendDone else "failed"] += 1
                if event.__class__ is c.SendFailed and not errors:
                    errors.append(event.error)
            feed(event)

        service.feed = counting

        async def main() -> tuple[float, float]:
            async with asyncio.TaskGroup() as tg:
                run = tg.create_task(service.run())
                while service._tg is None:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.2)  # (its first cycle, without a collector, abandoned)
                c0, w0 = time.process_time(), time.monotonic()
                if queued:
                    service.execute(actions)
                else:
                    for a in actions:
                        service._do_send(a)
                while sum(outcomes.values()) < len(actions):
                    await asyncio.sleep(0.005)
                spent = time.process_time() - c0, time.monotonic() - w0
                service.feed(c.StopRequested(fast=True))
                await run
            return spent

        cpu, wall = asyncio.run(main())
        child.stdin.write("\n")
        child.stdin.flush()
        schedds = child.stdout.readline().strip()
    finally:
        child.kill()
        child.wait()
    n = len(actions)
    return (f"   {'queues per destination' if queued else 'a task per send':23s}: negotiator CPU {cpu:.2f} s "
            f"({cpu / n * 1e6:.0f} us/match), wall {wall:.2f} s, "
            f"connections opened {service.peers.opened + service.match_connections:,}, "
            f"outcomes {dict(outcomes)}; fake schedds' process {schedds} s CPU in all"
            + (f"\n     first failure: {errors[0]}" if errors else ""))


def schedd_side(sends: list, n: int) -> str:
    """``n`` of ``sends``' MatchNotify handled by a schedd core holding ``n`` idle jobs; one line."""
    from htc.daemons.schedd.core import Schedd, ScheddSettings
    from htc.daemons.schedd.requests import description_message
    from htc.jobqueue import JobQueue
    from htc.wire.transport import PeerInfo

    schedd = Schedd(ScheddSettings(), JobQueue.open(":memory:"), user_of_uid={1000: "alice"}.get, own_uid=0)
    schedd.handle(c.Started(), 1000.0)
    submit = description_message(f"executable = /bin/echo\nrequest_memory = 512\nqueue {n}\n", "/work", "j.sub")
    peer = PeerInfo(uid=1000)
    schedd.handle(c.Received(submit, 1, peer), 1000.0)
    [reply] = [a.msg for a in schedd.handle(c.Received(m.GetResourceRequests(
        submitter="alice@localhost", significant_attributes=("RequestMemory",)), 2, peer), 1000.0)
        if a.__class__ is c.Reply]
    acid = reply.requests[0].autocluster_id
    msgs = [m.MatchNotify(claim_id=msg.claim_id, submitter="alice@localhost", slot_name=msg.slot_name,
                          startd_address=msg.startd_address, slot_ad=msg.slot_ad, autocluster_id=acid)
            for _, msg in sends[:n]]
    events = [c.Received(msg, 3 + i, peer) for i, msg in enumerate(msgs)]
    taken = 0
    sent = []  # the actions of each MatchNotify (their digest: what the schedd sends, unchanged by a change)
    t0 = time.process_time()
    for event in events:
        actions = schedd.handle(event, 1001.0)
        sent.append(actions)
        for a in actions:
            if a.__class__ is c.Reply and a.msg.detail == "":
                taken += 1
    cpu = time.process_time() - t0
    digest = hashlib.sha256(repr(sent).encode()).hexdigest()[:16]
    return (f"  the schedd's side: {len(events):,} MatchNotify to one schedd core ({taken:,} taken): {cpu:.3f} s CPU, "
            f"{cpu / len(events) * 1e6:.0f} us each; its actions' digest {digest}")


def parse_reply(machines: int, seed: int, rounds: int = 3) -> None:
    """``--parse``: the service's parse of the collector's reply, whole vs. :class:`ParsedAds`."""
    from htc.classad import ClassAd
    from htc.daemons.negotiator.service import ParsedAds

    rng = random.Random(seed)
    ads = nb.make_pool(machines, rng)
    for ad in ads:  # (what the collector adds: Collector.store)
        ad["MyType"], ad["UpdateSequenceNumber"], ad["LastHeardFrom"] = "Machine", 1, 1_800_000_000

    def reply(ads) -> list[str]:  # the texts as the service gets them: decoded from the frame
        data = m.encode(m.AdsReply(ads=tuple(str(ad) for ad in ads)))
        return list(m.decode(data).ads)

    def change(share: float) -> list[str]:
        for ad in rng.sample(ads, int(len(ads) * share)):
            ad["KeyboardIdle"] = rng.randrange(0, 7200)
            ad["LoadAvg"] = round(rng.random(), 2)
            ad["UpdateSequenceNumber"] = ad["UpdateSequenceNumber"] + 1
        return reply(ads)

    print(f"the collector's reply of {machines:,} slot ads, parsed by the service; CPU seconds (process_time)")
    kept = ParsedAds()
    for k, (what, texts) in enumerate([("first cycle", reply(ads))]
                                      + [("20% changed", change(0.2)) for _ in range(rounds)]
                                      + [("none changed", reply(ads))]):
        spent, got = {}, {}
        for way in ("whole", "kept") if k % 2 == 0 else ("kept", "whole"):  # (either first in turn)
            gc.collect()
            t0 = time.process_time()
            got[way] = [ClassAd(text) for text in texts] if way == "whole" else kept.parse(texts)
            spent[way] = time.process_time() - t0
        assert [str(a) for a in got["kept"]] == [str(a) for a in got["whole"]], "ParsedAds gave another ad"
        del got
        print(f"  {what:12s}: every text parsed {spent['whole']:.3f} s; ParsedAds {spent['kept']:.3f} s "
              f"({kept.parsed:,} parsed, {kept.reused:,} reused); load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        asyncio.run(_fake_schedds(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", type=int, default=10_000, help="partitionable slots (default 10,000)")
    parser.add_argument("--jobs", type=int, default=nb.JOBS, help="idle jobs (default 100,000)")
    parser.add_argument("--autoclusters", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=2, help="cycles, each on a fresh daemon")
    parser.add_argument("--seed", type=int, default=1988)
    parser.add_argument("--inform-startd", action="store_true", help="NEGOTIATOR_INFORM_STARTD = True")
    parser.add_argument("--send", action="store_true",
                        help="then send the last cycle's MatchNotify to fake schedds on Unix sockets, both ways")
    parser.add_argument("--schedd", type=int, default=0, metavar="N",
                        help="then hand N of the last cycle's MatchNotify to a schedd core (its CPU per match)")
    parser.add_argument("--parse", action="store_true",
                        help="measure the service's parse of the collector's reply instead (no cycle)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="cProfile translate + encode of the last cycle; print its top N by own time")
    args = parser.parse_args()
    if args.parse:
        parse_reply(args.machines, args.seed)
        return
    slots = nb.make_pool(args.machines, random.Random(args.seed))
    subs, requests, _ = nb.make_requests(args.autoclusters, random.Random(args.seed + 1), jobs=args.jobs)
    with tempfile.TemporaryDirectory() as tmp:
        handler = logging.FileHandler(Path(tmp) / "NegotiatorLog")
        handler.setFormatter(_FORMAT)
        log = logging.getLogger("negotiator_service_cpu")
        log.propagate = False
        log.setLevel(logging.INFO)
        log.addHandler(handler)
        print(f"{args.machines:,} partitionable slots, {args.jobs:,} idle jobs in {args.autoclusters} "
              f"autoclusters, inform_startd {args.inform_startd}; CPU seconds per cycle (process_time)")
        for k in range(args.repeat):
            profile = None
            if args.profile and k == args.repeat - 1:
                import cProfile

                profile = cProfile.Profile()
            r = one_cycle(slots, subs, requests, inform_startd=args.inform_startd, log=log, profile=profile)
            n = r["matches"] or 1
            after = r["translate"] + r["encode"] + r["log"]
            print(f"  {r['matches']:,} matches, {r['sends']:,} sends ({r['bytes'] / 1e6:.1f} MB), {r['logs']:,} "
                  f"log lines; matches digest {r['digest']}, wire digest {r['wire']}")
            print("   " + "  ".join(f"{p} {r[p]:.3f} s ({r[p] / n * 1e6:.2f} us/match)"
                                    for p in ("core", "translate", "encode", "log")))
            print(f"   after the core: {after:.3f} s = {after / n * 1e6:.2f} us/match "
                  f"({after / r['core']:.2f} x the core); load average {os.getloadavg()[0]:.1f}")
            if profile is not None:
                import pstats

                pstats.Stats(profile).sort_stats("tottime").print_stats(args.profile)
        handler.close()
        if args.schedd:
            print(schedd_side(r["sends_made"], args.schedd), flush=True)
        if args.send:
            print(f"  the send path, {len(r['sends_made']):,} MatchNotify to 10 schedds (Unix sockets):")
            for queued in (False, True):
                home = Path(tmp) / ("queued" if queued else "tasks")
                home.mkdir()
                print(send_path(r["sends_made"], queued, home), flush=True)


if __name__ == "__main__":
    main()

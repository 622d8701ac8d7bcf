"""Benchmark: the negotiator daemon's CPU per match after the core has decided it (issue #19).

``benchmarks/negotiator_bench.py`` times the core alone. The real daemon then turns each
``NotifyMatch`` action into wire work (:mod:`htc.daemons.negotiator.adapter`): a ``MatchNotify``
carrying the slot ad's text, a log line, a ``Send`` to the schedd (and one to the startd with
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

It also prints the cycle's matches digest (as ``negotiator_bench``: case 1 ``f86d4da46be5b753``)
and a digest of every MatchNotify Send (destination and frame bytes, in order): the same wire
digest before and after a change means the schedds and startds receive exactly the same bytes.

Usage::

    python benchmarks/negotiator_service_cpu.py                        # case 1, twice
    python benchmarks/negotiator_service_cpu.py --machines 1000 --jobs 10000 --repeat 3   # quick
    python benchmarks/negotiator_service_cpu.py --inform-startd        # MatchNotify to startds too
    python benchmarks/negotiator_service_cpu.py --profile 25           # cProfile of translate+encode
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import negotiator_bench as nb  # noqa: E402 - the same pool and jobs

from htc.daemons import core as c  # noqa: E402
from htc.daemons.negotiator.adapter import NegotiatorDaemon  # noqa: E402
from htc.daemons.negotiator.events import NotifyMatch, PoolAds, RequestsReceived, Wakeup  # noqa: E402
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
    matches = [a.match for a in core_actions if a.__class__ is NotifyMatch]
    wire = hashlib.sha256()
    for a, (to, data) in zip(sends, frames):
        if a.msg.__class__ is m.MatchNotify:  # (the Negotiator ad's figures vary run to run)
            wire.update(to.encode())
            wire.update(data)
    return {
        "core": t1 - t0, "translate": t2 - t1, "encode": t3 - t2, "log": t4 - t3,
        "matches": len(matches), "sends": len(frames), "logs": len(logs),
        "bytes": sum(len(d) for _, d in frames), "wire": wire.hexdigest()[:16],
        "digest": hashlib.sha256("\n".join(
            f"{x.submitter} {x.autocluster_id} {x.job_id} {x.slot_name} {x.carved}"
            for x in matches).encode()).hexdigest()[:16],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", type=int, default=10_000, help="partitionable slots (default 10,000)")
    parser.add_argument("--jobs", type=int, default=nb.JOBS, help="idle jobs (default 100,000)")
    parser.add_argument("--autoclusters", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=2, help="cycles, each on a fresh daemon")
    parser.add_argument("--seed", type=int, default=1988)
    parser.add_argument("--inform-startd", action="store_true", help="NEGOTIATOR_INFORM_STARTD = True")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="cProfile translate + encode of the last cycle; print its top N by own time")
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()

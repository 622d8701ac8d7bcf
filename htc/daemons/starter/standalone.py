"""The starter as a process of its own: ``python -m htc.daemons.starter JOB_AD EXECUTE_DIR``.

The startd runs its starters in-process (:mod:`htc.daemons.startd.service`); this runs one job
the same way from a shell, obeying signals as HTCondor's ``condor_starter`` does: SIGTERM
vacates the job (soft kill, hard kill after ``--vacate-grace``), SIGQUIT kills it at once,
SIGTSTP suspends it, SIGCONT resumes it. It prints the job's exit record as ClassAd attributes.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from htc.daemons.starter.records import ExitRecord, StarterSettings
from htc.daemons.starter.service import Starter
from htc.errors import HTCError

__all__ = ["main", "run_job"]


async def run_job(job_ad: Mapping[str, Any], execute_dir: Path, settings: StarterSettings | None = None,
                  vacate_grace: float = 600.0) -> ExitRecord:
    """Run one job to completion, obeying signals sent to this process (for ``python -m``).

    SIGTERM vacates (soft kill, hard kill after ``vacate_grace``), SIGQUIT kills at once,
    SIGTSTP suspends the job, SIGCONT resumes it.
    """
    starter = Starter(job_ad, execute_dir, settings)
    loop = asyncio.get_running_loop()
    handled = (signal.SIGTERM, signal.SIGQUIT, signal.SIGTSTP, signal.SIGCONT)
    # A signal that comes while the job is being started is kept and acted on once it runs
    # (left to its default, SIGTERM would kill this process and orphan the job).
    early: list[int] = []
    for sig in handled:
        loop.add_signal_handler(sig, early.append, sig)
    try:
        await starter.start()
        async with asyncio.TaskGroup() as group:
            actions = {
                signal.SIGTERM: lambda: group.create_task(starter.vacate(vacate_grace)),
                signal.SIGQUIT: lambda: group.create_task(starter.kill()),
                signal.SIGTSTP: starter.suspend,
                signal.SIGCONT: starter.resume,
            }
            for sig, act in actions.items():
                loop.add_signal_handler(sig, act)
            for sig in early:
                actions[sig]()
            record = await starter.wait()
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
    return record


def main(argv: list[str] | None = None) -> int:
    """``python -m htc.daemons.starter JOB_AD_FILE EXECUTE_DIR [--slot S] [--cpus N] [--memory MB] [--user U]``.

    Runs the job and prints its exit record as ClassAd attributes; SIGTERM vacates the job,
    SIGQUIT kills it, SIGTSTP suspends it, SIGCONT resumes it. Exit status 0 when the job ran
    (whatever its exit code), 1 when it could not be started.
    """
    import argparse

    from htc.classad import ClassAd, parseOne

    parser = argparse.ArgumentParser(prog="python -m htc.daemons.starter", description=main.__doc__)
    parser.add_argument("job_ad", type=Path)
    parser.add_argument("execute_dir", type=Path)
    parser.add_argument("--slot", default="slot1")
    parser.add_argument("--cpus", type=int, default=1)
    parser.add_argument("--memory", type=int, default=None, help="hard memory limit in MiB")
    parser.add_argument("--user", default=None, help="the slot's account when running as root (default: "
                        "htc-slot<N>, made when missing); the job's Owner runs it when trusted")
    parser.add_argument("--vacate-grace", type=float, default=600.0, help="seconds between soft and hard kill")
    args = parser.parse_args(argv)
    ad = parseOne(args.job_ad.read_text())
    job = {key: ad.eval(key) if not isinstance(ad[key], str | int | float | bool) else ad[key] for key in ad}
    settings = StarterSettings(slot_name=args.slot, cpus=args.cpus, memory_mb=args.memory, slot_user=args.user)
    try:
        record = asyncio.run(run_job(job, args.execute_dir, settings, args.vacate_grace))
    except HTCError as exc:
        print(f"starter: {exc}", file=sys.stderr)
        return 1
    print(ClassAd({k: v for k, v in record.to_ad().items()}).printOld(), end="")
    return 0

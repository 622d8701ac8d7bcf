"""CPU per call of the schedd's news for a remote executor session (htc.daemons.schedd.sessions).

Run (root, so that the session's files are the owner's and read with the owner's rights, as in
a pool): ``python benchmarks/session_news_bench.py`` (``--calls 2000 --owner nobody``).

Each call appends its SUBMIT and EXECUTE events to the session's log, then its result and its
TERMINATED event, as the schedd's flush does for a lane call; the session's loop is woken
after each write and builds its news (:meth:`SessionService._push` into a connection that
only keeps what it is sent). Two ways, measured in one process with ``time.process_time``:

* **files**: the session finds the call's result in ``calls/`` and reads it (and looks for its
  stdout and stderr) with the owner's rights, as for a job the schedd does not tell it of;
* **told**: the schedd's flush tells the session what it wrote (:meth:`SessionService.written`),
  so the result goes from memory and no credentials are switched.

Figures (2026-11-28 10:45, the 2-core VM shared with five other helpers, load average 11.2-11.4;
CPU time, so the load matters less than for wall-clock; 2,000 calls, owner ``nobody``):

==============================================  ===================
CPU ms per call                                 two runs
==============================================  ===================
before the shortcut (a switch at every plan)    0.451, 0.497
files (switch only to open: this code)          0.359-0.390
told (outputs from the flush, no switch)        0.200-0.253
==============================================  ===================
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pwd
import shutil
import tempfile
import time
from pathlib import Path

from htc.daemons import owner_files as ofs
from htc.daemons.schedd import sessions as s
from htc.daemons.schedd.events import WriteCallFiles
from htc.eventlog.events import EventType
from htc.wire import messages as m


class _Sink:
    async def send(self, msg):
        self.last = msg


class _Event:
    def __init__(self, kind):
        self.type = kind


def _events(job: int, code: int, text: str) -> bytes:
    return f"{code:03d} ({job:03d}.000.000) 2026-11-28 10:00:00 {text}\n...\n".encode()


def measure(calls: int, owner_name: str | None, told: bool) -> float:
    """CPU ms per call of the session's two wake-ups (quiet events, then the call's end)."""
    root = Path(tempfile.mkdtemp(prefix="htc-news-bench-", dir="/var/tmp"))
    try:
        owner = ofs.Identity.owner(owner_name) if owner_name else None
        s._make(root, owner)
        service = s.SessionService(None)
        session = s._Session(root, owner, 0)
        service._track(session, True)
        sink = _Sink()
        log_fd = os.open(session.log, os.O_WRONLY | os.O_APPEND)
        result = b"\x80\x05" + b"r" * 60  # a small pickled value
        loop = asyncio.new_event_loop()
        try:
            total = 0.0
            for i in range(calls):
                job, call = i + 1, f"c{i:06d}"
                session.jobs[f"{job}.0"] = call
                os.write(log_fd, _events(job, 0, "Job submitted") + _events(job, 1, "Job executing"))
                started = time.process_time()
                session.quiet_since = None
                loop.run_until_complete(service._push(sink, session))  # quiet: waits for more
                total += time.process_time() - started
                path = session.calls / f"{call}.result"
                with open(path, "wb") as f:
                    f.write(result)
                if owner is not None and owner.uid is not None:
                    os.chown(path, owner.uid, owner.gid)
                os.write(log_fd, _events(job, 5, "Job terminated."))
                started = time.process_time()
                if told:
                    service.written([WriteCallFiles(str(session.calls), ((f"{call}.result", result),))],
                                    {(str(session.log), owner_name): [_Event(EventType.JOB_TERMINATED)]})
                loop.run_until_complete(service._push(sink, session))
                total += time.process_time() - started
                assert isinstance(sink.last, m.SessionNews) and sink.last.chunks, "the call's result did not go"
                os.unlink(path)
            return total * 1000 / calls
        finally:
            loop.close()
            os.close(log_fd)
            session.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--owner", default="nobody" if os.geteuid() == 0 else None,
                        help="the session's owner (root only; default nobody)")
    args = parser.parse_args(argv)
    if args.owner:
        pwd.getpwnam(args.owner)
    load = os.getloadavg()[0]
    for told in (False, True, False, True):
        ms = measure(args.calls, args.owner, told)
        print(f"{'told' if told else 'files':6} {ms:.3f} ms CPU per call ({args.calls} calls, owner "
              f"{args.owner or 'none'}, load average {load:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

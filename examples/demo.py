"""The htc demo: a personal pool on this machine runs a cluster of jobs.

Run it from the project's root after installing htc::

    python examples/demo.py

It uses its own pool under ``.htc-demo/`` (or ``$HTC_HOME`` when that is set), so it never touches
your own ``~/.htc``. Every step is a real ``htc`` command, printed before it runs, so you can type the
same commands yourself:

1. ``htc config_val`` shows the personal-pool configuration htc wrote on first use;
2. ``htc pool start`` starts the master, which starts collector, negotiator, startd and schedd;
3. ``htc status`` lists the machine's slots, measured by the startd;
4. ``htc submit`` queues a cluster of ``/bin/echo`` jobs; ``htc wait`` follows their user log;
5. ``htc q`` and ``htc history`` show them leave the queue, and their output files are read back;
6. ``HTCExecutor().map`` runs a Python function on the same pool, one job per call;
7. ``htc pool stop`` stops the pool.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

JOBS = 10
SUBMIT = f"""\
# {JOBS} jobs, each printing its own process number
executable = /bin/echo
arguments  = "hello from job $(Cluster).$(Process)"
output     = out.$(Process)
error      = err.$(Process)
log        = demo.log
request_memory = 64MB
queue {JOBS}
"""


def htc(*args: str, check: bool = True) -> str:
    """Run one ``htc`` command as a user would, echoing it and its output."""
    print(f"\n$ htc {' '.join(shlex.quote(a) for a in args)}", flush=True)
    proc = subprocess.run([sys.executable, "-m", "htc.cli.main", *args], capture_output=True, text=True)
    print(proc.stdout, end="")
    if proc.stderr:
        print(proc.stderr, end="", file=sys.stderr)
    if check and proc.returncode != 0:
        raise SystemExit(f"demo: 'htc {args[0]}' failed with exit status {proc.returncode}")
    return proc.stdout


def square(x: int) -> int:
    """The demo's remote function: each call is a job in the schedd's queue."""
    return x * x


def executor_map() -> None:
    """Step 6: the same pool from Python, through concurrent.futures' interface.

    Run as root, the calls run as the pool's slot accounts (jobs never run as root); the executor
    makes this Python and its packages readable to them by itself (docs/executor.md, "Running as root").
    """
    from htc import HTCExecutor

    print("\n>>> with HTCExecutor() as ex: print(list(ex.map(square, range(10))))", flush=True)
    with HTCExecutor(progress=False) as ex:
        squares = list(ex.map(square, range(10), timeout=120))
    print(squares)
    if squares != [x * x for x in range(10)]:
        raise SystemExit(f"demo: the executor returned {squares}")


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    os.environ.setdefault("HTC_HOME", str(root / ".htc-demo"))
    print(f"htc demo: personal pool under {os.environ['HTC_HOME']}")
    htc("config_val", "-v", "DAEMON_LIST")
    htc("pool", "start")
    try:
        htc("status")
        with tempfile.TemporaryDirectory(prefix="htc-demo-") as work:
            Path(work, "demo.sub").write_text(SUBMIT)
            os.chdir(work)
            htc("submit", "demo.sub")
            htc("wait", "-wait", "120", "demo.log")
            htc("q")
            htc("history", "-limit", "3")
            outputs = sorted(Path(work).glob("out.*"), key=lambda p: int(p.suffix[1:]))
            print(f"\n{len(outputs)} output files:")
            for path in outputs:
                print(f"  {path.name}: {path.read_text().strip()}")
            if len(outputs) != JOBS:
                raise SystemExit(f"demo: expected {JOBS} output files, found {len(outputs)}")
            executor_map()
    finally:
        htc("pool", "stop", check=False)
    print("\ndemo finished: every job and every call ran on the personal pool and left the queue.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

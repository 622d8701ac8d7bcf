"""Benchmark: the job runtime (htc/runtime). Prints its figures; asserts nothing.

Part 1, forwarded calls (remote I/O): a small C program times small calls -- pread of 1 byte,
write of 16 bytes, stat, lseek, open+close -- on a local file natively, on a local file with
libjobrt.so preloaded (the interposition's own cost), and on a remote file forwarded to the
asyncio file server (``python -m htc.runtime.remote_io``, a separate process, over a Unix socket
pair), with and without pipelining (writes sent without waiting for their result, batched into
one send until the next call that needs a reply). Then the same calls **relayed**, as a job in
another FileSystemDomain makes them: job -> the starter's end of the relay -> ``JobIOBytes``
frames over an htc connection -> the schedd's end -> the file server, each end the real
:func:`htc.daemons.job_io_relay.pump` in a process of its own (``--relay-calls`` calls each).
Goal: a small forwarded call under 50 µs on one host.

Part 2, checkpoint and restart time against image size (10 MB .. 1 GB): runs
``benchmarks/runtime_ckpt_bench.py``. Goal: 100 MB checkpointed and restarted in under 0.5 s each.

Part 3, leverage (``--leverage-steps N``; default 0: skipped; ``--only-leverage`` runs it alone):
a personal pool runs a compute job under ``universe = standard`` -- ``python3 compute.py``, N
steps of about 1 s of CPU each (the step's size is measured here first), one line of output a
step (a forwarded write) -- with a checkpoint every ``--leverage-interval`` seconds
(CHECKPOINT_INTERVAL, default 60). The bench follows the user log (cheap file reads every 5 s;
it gives up only when neither the log nor the job's output changed for ``--leverage-stall``
seconds), then prints from ``htc history -af``: the job's remote CPU, ``SubmitSideCpu`` and its
parts as htc/daemons/schedd/leverage.py counts them (the schedd core's handlers for the job's
events; storing its checkpoints), the checkpoints taken, and ``Leverage``; and, for scale, all
the CPU the schedd process used from the submit to the end. Goal: above 1,000 for a 10-minute job.
On cgroup v1 the starter gives a job ``cpu.shares`` 100 per cpu, a tenth of an ordinary
process's 1024, so on a loaded shared host the job gets a few percent of a core and its wall
time (and with it the number of periodic checkpoints) grows tenfold; the bench therefore sets
the job's share to ``--leverage-shares`` (10240) once it runs, giving it about a core, as an idle
execute machine would (0 leaves it).

Figures of 2026-11-28 (2-CPU VM shared with other work, load average 11-16): docs/checkpointing.md,
"Cost". Usage::

    python benchmarks/runtime_bench.py [--calls 20000] [--relay-calls 4000] [--ckpt-sizes 10,100,1000]
    python benchmarks/runtime_bench.py --only-leverage --leverage-steps 450 --leverage-interval 60
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from htc.runtime import build, remote_io  # noqa: E402

PREFIX = "/htc-remote"

PROGRAM = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
int main(int argc, char **argv) {
    const char *dir = argv[1];
    int n = atoi(argv[2]);
    char in[512], out[512], buf[64];
    snprintf(in, sizeof in, "%s/in.dat", dir);
    snprintf(out, sizeof out, "%s/out.dat", dir);
    struct stat st;
    int fd = open(in, O_RDONLY), wfd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    double t = now();
    for (int i = 0; i < n; i++) pread(fd, buf, 1, i % 1000);
    printf("pread 1 B %.2f\n", (now() - t) / n);
    t = now();
    for (int i = 0; i < n; i++) write(wfd, "0123456789abcdef", 16);
    fsync(wfd);   /* a pipelined run pays for its queued writes here */
    printf("write 16 B %.2f\n", (now() - t) / n);
    t = now();
    for (int i = 0; i < n; i++) stat(in, &st);
    printf("stat %.2f\n", (now() - t) / n);
    t = now();
    for (int i = 0; i < n; i++) lseek(fd, i, SEEK_SET);
    printf("lseek %.2f\n", (now() - t) / n);
    t = now();
    for (int i = 0; i < n / 4; i++) close(open(in, O_RDONLY));
    printf("open+close %.2f\n", (now() - t) / (n / 4));
    close(fd); close(wfd);
    return 0;
}
"""


PINGPONG = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]), sv[2];
    char c = 0;
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    if (fork() == 0) { for (int i = 0; i < n; i++) { read(sv[1], &c, 1); write(sv[1], &c, 1); } _exit(0); }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) { write(sv[0], &c, 1); read(sv[0], &c, 1); }
    clock_gettime(CLOCK_MONOTONIC, &b);
    wait(NULL);
    printf("%.2f\n", ((b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3) / n);
    return 0;
}
"""


def _run(exe: Path, directory: str, calls: int, env: dict | None = None, pass_fds=()) -> dict[str, float]:
    done = subprocess.run([str(exe), directory, str(calls)], env=env, pass_fds=pass_fds,
                          capture_output=True, text=True, check=True, timeout=600)
    out = {}
    for line in done.stdout.splitlines():
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def _forwarded(exe: Path, root: str, calls: int, pipeline: bool, blocking: bool = False) -> dict[str, float]:
    server_end, job_end = remote_io.socket_pair()
    server = subprocess.Popen([sys.executable, "-m", "htc.runtime.remote_io", "--fd",
                               str(server_end.fileno()), "--root", root] + ["--blocking"] * blocking,
                              pass_fds=[server_end.fileno()])
    server_end.close()
    env = dict(os.environ, **remote_io.job_environment(build.library(), job_end.fileno(), PREFIX,
                                                        pipeline=pipeline))
    try:
        return _run(exe, PREFIX, calls, env, pass_fds=[job_end.fileno()])
    finally:
        job_end.close()
        server.wait(timeout=60)


async def _relay_schedd(sockdir: str, root: str, ready: int) -> None:
    """The schedd's end of the relay (htc/daemons/schedd/job_io.py): one connection, whose bytes
    :func:`~htc.daemons.job_io_relay.pump` carries to and from a file server it started."""
    from htc.daemons.job_io_relay import pump
    from htc.wire.transport import UnixTransport

    finished = asyncio.Event()

    async def serve(conn) -> None:
        start = resource.getrusage(resource.RUSAGE_SELF)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        server = subprocess.Popen([sys.executable, "-m", "htc.runtime.remote_io", "--fd", str(theirs.fileno()),
                                   "--root", root], pass_fds=[theirs.fileno()])
        theirs.close()
        try:
            await pump(conn, ours)
        finally:
            await asyncio.to_thread(server.wait, 60)
            end, kids = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
            print(end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime, kids.ru_utime + kids.ru_stime,
                  flush=True)  # the relay's CPU while it served, and the file server's whole life's
            finished.set()

    async with asyncio.TaskGroup() as tasks:
        listening = await UnixTransport(sockdir).start_server("schedd", serve, task_group=tasks)
        os.write(ready, b"r")
        await finished.wait()
        await listening.aclose()


async def _relay_starter(sockdir: str, fd: int) -> None:
    """The starter's end of the relay (htc/daemons/starter/standard.py): the job's socket pumped
    over a connection to the schedd."""
    from htc.daemons.job_io_relay import pump
    from htc.wire.transport import UnixTransport

    conn = await UnixTransport(sockdir).open_connection("schedd")
    await pump(conn, socket.socket(fileno=fd))


def _calls_made(calls: int) -> int:
    """How many forwarded calls one run of :data:`PROGRAM` makes."""
    return 4 * calls + 2 * (calls // 4) + 5  # the loops; the two opens, two closes and the fsync


def _relayed(exe: Path, root: str, calls: int, pipeline: bool) -> dict[str, float]:
    """Like :func:`_forwarded`, the calls relayed: job -> starter -> (JobIOBytes) -> schedd -> server.
    Adds ``submit CPU``: the schedd end's and its file server's CPU per call, in µs."""
    sockdir = tempfile.mkdtemp(prefix="htcrb-")
    ready_r, ready_w = os.pipe()
    me = [sys.executable, str(Path(__file__).resolve())]
    schedd = subprocess.Popen([*me, "--relay-end", "schedd", sockdir, root, str(ready_w)], pass_fds=[ready_w],
                              stdout=subprocess.PIPE, text=True)
    os.close(ready_w)
    try:
        if os.read(ready_r, 1) != b"r":
            raise SystemExit("runtime_bench: the relay's schedd end did not start")
        starter_end, job_end = remote_io.socket_pair()
        starter = subprocess.Popen([*me, "--relay-end", "starter", sockdir, str(starter_end.fileno())],
                                   pass_fds=[starter_end.fileno()])
        starter_end.close()
        env = dict(os.environ, **remote_io.job_environment(build.library(), job_end.fileno(), PREFIX,
                                                            pipeline=pipeline))
        try:
            figures = _run(exe, PREFIX, calls, env, pass_fds=[job_end.fileno()])
        finally:
            job_end.close()
            starter.wait(timeout=60)
            relay_cpu, server_cpu = (float(x) for x in schedd.communicate(timeout=60)[0].split())
        figures["submit CPU"] = (relay_cpu + server_cpu) / _calls_made(calls) * 1e6
        return figures
    finally:
        os.close(ready_r)
        for proc in (schedd,):
            if proc.poll() is None:
                proc.kill()
        shutil.rmtree(sockdir, ignore_errors=True)


def forwarded_bench(calls: int, relay_calls: int) -> None:
    """Part 1: small calls natively, under the shim on local files, forwarded, and relayed."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "bench.c")
        src.write_text(PROGRAM)
        exe = Path(tmp, "bench")
        subprocess.run(["cc", "-O2", "-o", str(exe), str(src)], check=True)
        root = Path(tmp, "root")
        root.mkdir()
        (root / "in.dat").write_bytes(os.urandom(4096))
        pp = Path(tmp, "pingpong")
        Path(tmp, "pingpong.c").write_text(PINGPONG)
        subprocess.run(["cc", "-O2", "-o", str(pp), f"{tmp}/pingpong.c"], check=True)
        floor = subprocess.run([str(pp), str(calls)], capture_output=True, text=True, check=True).stdout.strip()
        columns = {
            "native": _run(exe, str(root), calls),
            "shim, local": _run(exe, str(root), calls,
                                dict(os.environ, LD_PRELOAD=str(build.library()))),
            "forwarded": _forwarded(exe, str(root), calls, pipeline=False),
            "fwd+pipelined": _forwarded(exe, str(root), calls, pipeline=True),
            "fwd, blocking": _forwarded(exe, str(root), calls, pipeline=False, blocking=True),
            "relayed": _relayed(exe, str(root), relay_calls, pipeline=False),
            "relay+pipelined": _relayed(exe, str(root), relay_calls, pipeline=True),
        }
    names = list(columns["native"]) + ["submit CPU"]
    print(f"floor: a bare C-to-C Unix socket round trip, now, on this host: {floor} µs; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"forwarded calls, µs per call ({calls} calls each, relayed: {relay_calls}; server: asyncio in its "
          f"own process; 'fwd, blocking': the same server in a plain blocking loop; 'relayed': through the "
          f"starter's and the schedd's relay, htc/daemons/job_io_relay.py, each in its own process)")
    print(f"{'call':<12}" + "".join(f"{c:>16}" for c in columns))
    for name in names:
        print(f"{name:<12}" + "".join(f"{columns[c][name]:>16.2f}" if name in columns[c] else f"{'':>16}"
                                      for c in columns))
    print("submit CPU: the CPU the schedd's end of the relay and its file server spent per relayed call "
          "(all five kinds together; the server's start included)")


def checkpoint_bench(sizes: str) -> None:
    """Part 2: checkpoint and restart time against image size (benchmarks/runtime_ckpt_bench.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import runtime_ckpt_bench

    runtime_ckpt_bench.main(["--sizes", sizes])


LEVERAGE_JOB = """\
import hashlib, sys
steps, work = int(sys.argv[1]), int(sys.argv[2])
digest = hashlib.sha256()
out = open("progress.out", "w")
for step in range(steps):
    for k in range(work):
        digest.update(k.to_bytes(4, "little"))
    out.write(f"step {step} {digest.hexdigest()[:16]}\\n")
    out.flush()
out.write("done\\n")
out.close()
"""

#: what ``htc history -af`` prints for part 3, in this order
LEVERAGE_ATTRS = ("Leverage", "SubmitSideCpu", "SubmitSideCpuHandlers", "SubmitSideCpuCheckpoints",
                  "SubmitSideCpuJobIO", "RemoteUserCpu", "RemoteSysCpu", "NumCkpts", "CkptSize", "RemoteWallClockTime",
                  "ExitCode")


def _step_work(seconds: float = 1.0) -> int:
    """How many of the job's inner iterations take ``seconds`` of CPU here (measured in CPU time)."""
    import hashlib

    digest, n, start = hashlib.sha256(), 100_000, time.process_time()
    for k in range(n):
        digest.update(k.to_bytes(4, "little"))
    return max(1000, int(n * seconds / max(time.process_time() - start, 1e-6)))


def _events(log: Path) -> tuple[int, bool]:
    """The user log's CheckpointedEvents so far, and whether the job terminated."""
    text = log.read_text() if log.exists() else ""
    return text.count("\n003 (") + text.startswith("003 ("), "\n005 (" in text or text.startswith("005 (")


def _job_cpu_share(shares: int) -> str | None:
    """Give the running job's cgroup ``shares`` (cgroup v1 cpu.shares; v2: the same weight in
    cpu.weight's scale, 100 = 1024). Returns what was done, or None while the job has not started."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if len(cmd) > 1 and cmd[1] == "compute.py":
            break
    else:
        return None
    for line in Path(f"/proc/{proc.pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(",") and Path("/sys/fs/cgroup/cpu", path.lstrip("/"), "cpu.shares").exists():
            target = Path("/sys/fs/cgroup/cpu", path.lstrip("/"), "cpu.shares")
            value = str(shares)
            break
        if controllers == "" and Path("/sys/fs/cgroup", path.lstrip("/"), "cpu.weight").exists():
            target = Path("/sys/fs/cgroup", path.lstrip("/"), "cpu.weight")
            value = str(max(1, min(10000, shares * 100 // 1024)))
            break
    else:
        return f"job pid {proc.pid}: no cgroup cpu weight to set"
    old = target.read_text().strip()
    target.write_text(value)
    return f"job pid {proc.pid}: {target} {old} -> {value}"


def leverage_bench(steps: int, interval: int, stall: float, shares: int) -> None:
    """Part 3: Leverage of a standard-universe compute job with periodic checkpoints."""
    import psutil

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pool_bench

    work_per_step = _step_work()
    pool_bench.KNOBS["CHECKPOINT_INTERVAL"] = str(interval)
    with pool_bench.personal_pool(2) as (_home, work, master):
        (work / "compute.py").write_text(LEVERAGE_JOB)
        (work / "compute.py").chmod(0o644)
        (work / "compute.sub").write_text(
            f"universe = standard\nexecutable = /usr/bin/python3\ntransfer_executable = false\n"
            f"arguments = compute.py {steps} {work_per_step}\ninitialdir = {work}\nlog = compute.log\nqueue\n")
        schedd = next(p for p in psutil.Process(master).children(recursive=True) if "schedd" in p.cmdline())
        schedd_cpu = sum(schedd.cpu_times()[:2])
        htc = [sys.executable, "-m", "htc.cli.main"]
        started = time.monotonic()
        subprocess.run([*htc, "submit", "compute.sub"], cwd=work, check=True, capture_output=True)
        # follow the user log and the job's output (cheap file reads); give up only when neither moves
        progress, last_change, last_report, state = work / "progress.out", time.monotonic(), 0.0, None
        boosted = None if shares else "left as the starter made it"
        while True:
            if boosted is None:
                boosted = _job_cpu_share(shares)
            ckpts, ended = _events(work / "compute.log")
            now_state = (ckpts, ended, progress.stat().st_size if progress.exists() else -1)
            if now_state != state:
                state, last_change = now_state, time.monotonic()
            if ended:
                break
            if time.monotonic() - last_change > stall:
                raise SystemExit(f"runtime_bench: the leverage job made no progress for {stall:g} s "
                                 f"(checkpoints {ckpts}; see {work})")
            if time.monotonic() - last_report > 60:
                last_report = time.monotonic()
                done = progress.read_text().count("\n") if progress.exists() else 0
                print(f"  ... {time.monotonic() - started:.0f} s: progress.out has {done} of {steps} steps (pipelined "
                      f"writes arrive late), {ckpts} checkpoints, "
                      f"load average {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
            time.sleep(5)
        schedd_cpu = sum(schedd.cpu_times()[:2]) - schedd_cpu
        out = subprocess.run([*htc, "history", "1.0", "-af", *LEVERAGE_ATTRS], capture_output=True, text=True,
                             check=True).stdout.split()
    got = dict(zip(LEVERAGE_ATTRS, out, strict=True))
    lev, local = float(got["Leverage"]), float(got["SubmitSideCpu"])
    user, system, ckpts = float(got["RemoteUserCpu"]), float(got["RemoteSysCpu"]), int(got["NumCkpts"])
    handlers, stored = float(got["SubmitSideCpuHandlers"]), float(got["SubmitSideCpuCheckpoints"])
    relayed = float(got["SubmitSideCpuJobIO"])
    print(f"(3) leverage: a compute job of {steps} steps of ~1 s of CPU each (standard universe, python3), "
          f"CHECKPOINT_INTERVAL = {interval} s; exit code {got['ExitCode']}; load average {os.getloadavg()[0]:.1f}")
    print(f"    the job's CPU share: {boosted}")
    print(f"    wall {float(got['RemoteWallClockTime']):.0f} s; remote CPU {user + system:.2f} s (user {user:.2f} + "
          f"sys {system:.2f}); {ckpts} checkpoints of {int(got['CkptSize']) / 1e6:.1f} MB")
    print(f"    SubmitSideCpu {local:.3f} s = handlers {handlers:.3f} s + storing checkpoints {stored:.3f} s "
          f"({stored / max(ckpts, 1) * 1000:.0f} ms each) + relayed file calls {relayed:.3f} s (none: the "
          f"personal pool serves them next to the starter)")
    print(f"    Leverage (htc history -af Leverage) = {lev:.0f} (goal > 1000: {'met' if lev > 1000 else 'NOT met'})")
    print(f"    for scale: the schedd process used {schedd_cpu:.2f} s of CPU in all from the submit to the end "
          f"(its own periodic work, the submit, negotiation and claiming included): remote CPU / that = "
          f"{(user + system) / max(schedd_cpu, 1e-9):.0f}")


def main() -> None:
    """Run the runtime benchmarks and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--relay-calls", type=int, default=4000, help="calls per figure through the relay")
    parser.add_argument("--ckpt-sizes", default="10,100,1000", help="MB of job memory to checkpoint")
    parser.add_argument("--leverage-steps", type=int, default=0,
                        help="steps of ~1 s of CPU of part 3's job (600: a 10-minute job; 0: skip part 3)")
    parser.add_argument("--leverage-interval", type=int, default=60, help="CHECKPOINT_INTERVAL for part 3")
    parser.add_argument("--leverage-stall", type=float, default=900,
                        help="part 3 gives up when the job's log and output stay the same this long (s)")
    parser.add_argument("--leverage-shares", type=int, default=10240,
                        help="part 3 sets its job's cgroup cpu.shares to this once it runs, so that on a loaded "
                             "host it gets about a core, as on an idle execute machine (0: leave the starter's "
                             "100 per cpu)")
    parser.add_argument("--only-leverage", action="store_true", help="run part 3 alone")
    parser.add_argument("--relay-end", nargs="+", help=argparse.SUPPRESS)  # (part 1's relay processes)
    args = parser.parse_args()
    if args.relay_end:
        role, *rest = args.relay_end
        if role == "schedd":
            asyncio.run(_relay_schedd(rest[0], rest[1], int(rest[2])))
        else:
            asyncio.run(_relay_starter(rest[0], int(rest[1])))
        return
    if not args.only_leverage:
        forwarded_bench(args.calls, args.relay_calls)
        checkpoint_bench(args.ckpt_sizes)
    if args.leverage_steps:
        leverage_bench(args.leverage_steps, args.leverage_interval, args.leverage_stall, args.leverage_shares)


if __name__ == "__main__":
    main()

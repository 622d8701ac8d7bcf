"""Benchmark: the job runtime (htc/runtime). Prints microseconds per call; asserts nothing.

Part 1, forwarded calls (remote I/O): a small C program times small calls -- pread of 1 byte,
write of 16 bytes, stat, lseek, open+close -- on a local file natively, on a local file with
libjobrt.so preloaded (the interposition's own cost), and on a remote file forwarded to the
asyncio file server (``python -m htc.runtime.remote_io``, a separate process, over a Unix socket
pair), with and without pipelining (writes sent without waiting for their result, batched into
one send until the next call that needs a reply). Goal: a small forwarded call under 50 µs.

Part 2, checkpoint and restart time against image size (10 MB .. 1 GB): runs
``benchmarks/runtime_ckpt_bench.py``. Goal: 100 MB checkpointed and restarted in under 0.5 s each.

Part 3, leverage (``--leverage-steps N``; default 0: skipped): a personal pool runs
examples/standard/count.py N steps under ``universe = standard`` with a checkpoint every
``--leverage-interval`` seconds (CHECKPOINT_INTERVAL); prints the job's remote CPU, the schedd's
CPU charged to it (``SubmitSideCpu``, htc/daemons/schedd/leverage.py says what is counted) and
``Leverage``. Goal: above 1,000 for a 10-minute job.

Usage::

    python benchmarks/runtime_bench.py [--calls N] [--ckpt-sizes 10,100,1000] [--leverage-steps 20000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
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


def forwarded_bench(calls: int) -> None:
    """Part 1: small calls natively, under the shim on local files, and forwarded."""
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
        }
    names = list(columns["native"])
    print(f"floor: a bare C-to-C Unix socket round trip, now, on this host: {floor} µs; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"forwarded calls, µs per call ({calls} calls each; server: asyncio in its own process; "
          f"the last column: the same server in a plain blocking loop)")
    print(f"{'call':<12}" + "".join(f"{c:>15}" for c in columns))
    for name in names:
        print(f"{name:<12}" + "".join(f"{columns[c][name]:>15.2f}" for c in columns))


def checkpoint_bench(sizes: str) -> None:
    """Part 2: checkpoint and restart time against image size (benchmarks/runtime_ckpt_bench.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import runtime_ckpt_bench

    runtime_ckpt_bench.main(["--sizes", sizes])


def leverage_bench(steps: int, interval: int) -> None:
    """Part 3: Leverage of a standard-universe compute job with periodic checkpoints."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pool_bench

    pool_bench.KNOBS["CHECKPOINT_INTERVAL"] = str(interval)
    with pool_bench.personal_pool(2) as (home, work, _master):
        example = Path(__file__).resolve().parents[1] / "examples" / "standard" / "count.py"
        (work / "count.py").write_bytes(example.read_bytes())
        (work / "count.py").chmod(0o644)
        (work / "count.sub").write_text(
            f"universe = standard\nexecutable = /usr/bin/python3\ntransfer_executable = false\n"
            f"arguments = count.py {steps}\ninitialdir = {work}\nqueue\n")
        htc = [sys.executable, "-m", "htc.cli.main"]
        subprocess.run([*htc, "submit", "count.sub"], cwd=work, check=True, capture_output=True)
        attrs = ["Leverage", "SubmitSideCpu", "RemoteUserCpu", "RemoteSysCpu", "NumCkpts", "RemoteWallClockTime"]

        def finished():
            out = subprocess.run([*htc, "history", "1.0", "-af", *attrs], capture_output=True, text=True).stdout
            return out.split() or None

        lev, local, user, system, ckpts, wall = pool_bench.wait_until(finished, "the job in the history",
                                                                      steps * 0.05 + 300, poll=1.0)
        remote = float(user) + float(system)
        print(f"(3) leverage: {steps} steps, {float(wall):.0f} s wall, {ckpts} checkpoints "
              f"(CHECKPOINT_INTERVAL = {interval} s): remote CPU {remote:.2f} s, submit side "
              f"{float(local) * 1000:.1f} ms, Leverage = {float(lev):.0f} (goal > 1000: "
              f"{'met' if float(lev) > 1000 else 'NOT met'})")


def main() -> None:
    """Run the runtime benchmarks and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--ckpt-sizes", default="10,100,1000", help="MB of job memory to checkpoint")
    parser.add_argument("--leverage-steps", type=int, default=0, help="count.py steps (0: skip part 3)")
    parser.add_argument("--leverage-interval", type=int, default=10, help="CHECKPOINT_INTERVAL for part 3")
    parser.add_argument("--only-leverage", action="store_true", help="run part 3 alone")
    args = parser.parse_args()
    if not args.only_leverage:
        forwarded_bench(args.calls)
        checkpoint_bench(args.ckpt_sizes)
    if args.leverage_steps:
        leverage_bench(args.leverage_steps, args.leverage_interval)


if __name__ == "__main__":
    main()

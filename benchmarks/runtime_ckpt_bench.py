"""Checkpoint and restart time against image size (issue #20 "Fast": 10 MB .. 1 GB; goal: a
100 MB image checkpointed and restarted in under 0.5 s each).

A C program allocates N MB, fills it with pseudo-random bytes (so every page is resident and
incompressible), then echoes stdin to stdout one byte at a time.  For each size the bench
- checkpoints it with SIGUSR2 (in-process handler) and times signal -> image renamed into place,
  with and without fsync;
- restarts the image (jobrt-restart, new process) and times exec -> the restored program echoing
  a byte back: verification (checksum of the whole image, host, files) plus the rebuild;
- times `jobrt-restart --check` alone (the verification share) and jobrt-dump (ptrace) of the
  same process.
Figures print as a table; nothing is asserted.

    .venv/bin/python benchmarks/runtime_ckpt_bench.py [--sizes 10,100,1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from htc.runtime import checkpoint, image  # noqa: E402

PROGRAM = r"""
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    size_t n = (size_t)atol(argv[1]) << 20;
    uint64_t *p = malloc(n), x = 88172645463325252ULL;
    for (size_t i = 0; i < n / 8; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; p[i] = x; }
    write(1, "R", 1);
    char c;
    while (read(0, &c, 1) == 1) write(1, &c, 1);
    return (int)(p[n / 16] & 1);
}
"""


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _reap_cpu(proc: subprocess.Popen) -> float:
    """Kill ``proc`` and return the CPU seconds of its whole life."""
    proc.kill()
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = -9
    return usage.ru_utime + usage.ru_stime


def _echo(proc: subprocess.Popen) -> None:
    proc.stdin.write(b"x")
    proc.stdin.flush()
    if proc.stdout.read(1) != b"x":
        raise SystemExit(f"the program did not answer (exit {proc.poll()})")


def bench_size(prog: Path, tools: checkpoint.Tools, mb: int, repeat: int, tmp: Path) -> dict[str, float]:
    """Median seconds of each operation for one size."""
    img = tmp / f"bench-{mb}.img"
    keys = ("ckpt", "ckpt_nofsync", "ckpt_cpu", "check", "restart", "restart_cpu", "dump")
    times: dict[str, list[float]] = {k: [] for k in keys}
    for fsync, key in ((True, "ckpt"), (False, "ckpt_nofsync")):
        job = checkpoint.start([str(prog), str(mb)], img, tools=tools, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, fsync=fsync)
        assert job.process.stdout.read(1) == b"R"
        for _ in range(repeat):
            c0, t0 = _cpu(job.pid), time.perf_counter()
            job.checkpoint(timeout=600)
            times[key].append(time.perf_counter() - t0)
            if not fsync:
                times["ckpt_cpu"].append(_cpu(job.pid) - c0)
        _echo(job.process)
        job.kill()
    size = image.read_header(img).total_size
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([str(tools.restarter), "--check", str(img)], check=True, capture_output=True)
        times["check"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        proc = subprocess.Popen([str(tools.restarter), str(img)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        _echo(proc)
        times["restart"].append(time.perf_counter() - t0)
        times["restart_cpu"].append(_reap_cpu(proc))
    proc = subprocess.Popen([str(prog), str(mb)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.read(1) == b"R"
    for _ in range(repeat):
        t0 = time.perf_counter()
        checkpoint.dump(proc.pid, tmp / "dump.img", tools=tools)
        times["dump"].append(time.perf_counter() - t0)
    _echo(proc)
    proc.kill()
    proc.wait()
    for path in (img, tmp / "dump.img"):
        path.unlink(missing_ok=True)
    out = {k: statistics.median(v) for k, v in times.items()}
    out["size_mb"] = size / 1e6
    return out


def main(argv: list[str] | None = None) -> None:
    """Run the bench and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100,1000", help="MB of program memory, comma separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where images go (default: a temporary directory)")
    args = parser.parse_args(argv)
    tools = checkpoint.build_tools(dumper=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmpname:
        tmp = Path(tmpname)
        src, prog = tmp / "alloc.c", tmp / "alloc"
        src.write_text(PROGRAM)
        subprocess.run(["cc", "-O2", "-o", str(prog), str(src)], check=True)
        print(f"host: {os.uname().release}, {os.cpu_count()} CPUs; images in {tmp}; median of {args.repeat}")
        print("wall seconds, and CPU seconds of the job during its checkpoint / of the restarted process")
        print(f"{'memory':>8} {'image':>9} {'ckpt+fsync':>11} {'ckpt':>8} {'ckpt cpu':>9} {'check':>8} "
              f"{'restart':>8} {'rst cpu':>8} {'dump':>8}")
        for mb in (int(s) for s in args.sizes.split(",")):
            r = bench_size(prog, tools, mb, args.repeat, tmp)
            print(f"{mb:>6}MB {r['size_mb']:>7.1f}MB {r['ckpt']:>10.3f}s {r['ckpt_nofsync']:>7.3f}s "
                  f"{r['ckpt_cpu']:>8.3f}s {r['check']:>7.3f}s {r['restart']:>7.3f}s "
                  f"{r['restart_cpu']:>7.3f}s {r['dump']:>7.3f}s", flush=True)
        print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    sys.exit(main())

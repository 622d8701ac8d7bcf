"""``htc tail``: condor_tail. Prints the last bytes of a running job's stdout (or ``-stderr``,
or files named in its sandbox), found with :func:`htc.client.sandbox.find_running_job`;
``-follow`` keeps printing what the job writes until it stops running or the user interrupts.
With ``-pool HOST[:PORT]`` (a pool on other machines) the files come from the startd running
the job, over SSH with the user's token (:mod:`htc.client.peek`)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from htc.cli.options import add_command, add_option, add_pool_options, transport_from
from htc.client.sandbox import RunningJob, find_running_job
from htc.errors import UsageError

#: seconds between looks at a followed file (condor_tail asks the starter every 2 s)
FOLLOW_INTERVAL = 1.0


def _targets(job: RunningJob, args: argparse.Namespace) -> list[tuple[str, Path]]:
    targets = []
    if args.stderr:
        targets.append(("stderr", job.stream_path(stderr=True)))
    elif not args.no_stdout:
        targets.append(("stdout", job.stream_path()))
    for name in args.files:
        relative = Path(name)
        if relative.is_absolute() or ".." in relative.parts:
            raise UsageError(f"{name}: name a file inside the job's sandbox, relative to it")
        targets.append((name, job.sandbox / relative))
    if not targets:
        raise UsageError("nothing to tail: -no-stdout without -stderr or a file name")
    return targets


def _open(label: str, path: Path, job: RunningJob):
    try:
        return open(path, "rb")  # noqa: SIM115 - kept open while following
    except FileNotFoundError:
        raise UsageError(f"job {job.job_id} has no {label} file yet ({path})") from None
    except PermissionError:
        raise UsageError(f"job {job.job_id}'s {label} ({path}) is not readable by you; it belongs to "
                         f"{job.user}, the account the job runs as (run this as root)") from None


def _last(handle, maxbytes: int) -> bytes:
    size = os.fstat(handle.fileno()).st_size
    handle.seek(max(0, size - maxbytes))
    return handle.read(maxbytes)


def _remote_names(args: argparse.Namespace) -> list[str]:
    names = ["stderr"] if args.stderr else [] if args.no_stdout else ["stdout"]
    names += list(args.files)
    if not names:
        raise UsageError("nothing to tail: -no-stdout without -stderr or a file name")
    return names


def _remote_tail(args: argparse.Namespace, transport) -> int:
    """htc tail -pool HOST: the job's files through the startd running it (htc.client.peek)."""
    from htc.client.peek import find_remote_job, peek
    from htc.wire.errors import RemoteError

    while True:
        try:
            job = find_remote_job(args.job, transport=transport)
            break
        except UsageError as exc:
            if not args.auto_retry or "is not running" not in str(exc):
                raise
            time.sleep(2.0)
    names = _remote_names(args)
    out = sys.stdout.buffer
    reply = peek(job, names, transport=transport, max_bytes=args.maxbytes)
    for chunk in reply.chunks:
        if len(names) > 1:
            out.write(f"==> {chunk.name} <==\n".encode())
        out.write(chunk.data)
    out.flush()
    offsets = [c.offset + len(c.data) for c in reply.chunks]
    while args.follow:
        time.sleep(FOLLOW_INTERVAL)
        try:
            reply = peek(job, names, transport=transport, max_bytes=args.maxbytes, offsets=offsets)
        except RemoteError as exc:
            if exc.code == "not_found":  # the job ended (its sandbox is gone)
                return 0
            raise
        for i, chunk in enumerate(reply.chunks):
            out.write(chunk.data)
            offsets[i] = chunk.offset + len(chunk.data)
        out.flush()
    return 0


def tail(args: argparse.Namespace) -> int:
    """htc tail: print the end of a running job's output."""
    if args.maxbytes <= 0:
        raise UsageError("-maxbytes needs a positive number of bytes")
    transport = transport_from(args, "schedd")
    from htc.client.remote import RemotePool

    if isinstance(transport, RemotePool):
        return _remote_tail(args, transport)
    while True:
        try:
            job = find_running_job(args.job, transport=transport, home=args.pool)
            break
        except UsageError as exc:
            if not args.auto_retry or "is not running" not in str(exc):
                raise
            time.sleep(2.0)  # condor_tail -auto-retry: every 2 seconds until the job runs
    handles = [(label, _open(label, path, job)) for label, path in _targets(job, args)]
    out = sys.stdout.buffer
    try:
        for label, handle in handles:
            if len(handles) > 1:
                out.write(f"==> {label} <==\n".encode())
            out.write(_last(handle, args.maxbytes))
        out.flush()
        while args.follow and job.sandbox.exists():
            time.sleep(FOLLOW_INTERVAL)
            _pump(handles, args.maxbytes, out)
        if args.follow:
            _pump(handles, args.maxbytes, out)  # what the job wrote last, before its sandbox went away
    finally:
        for _, handle in handles:
            handle.close()
    return 0


def _pump(handles, maxbytes: int, out) -> None:
    for _, handle in handles:
        while True:
            chunk = handle.read(maxbytes)
            if not chunk:
                break
            out.write(chunk)
    out.flush()


def register(sub) -> None:
    """Add ``htc tail``."""
    p = add_command(sub, "tail", "print the end of a running job's stdout or stderr (condor_tail)", [
        "htc tail 12.0                  # the last 1024 bytes of job 12.0's stdout",
        "htc tail -stderr 12.0          # its stderr instead",
        "htc tail -f 12.0               # keep printing what it writes (Ctrl-C stops)",
        "htc tail -maxbytes 4096 12.0 progress.txt   # also a file in its sandbox",
    ])
    p.add_argument("job", metavar="CLUSTER.PROC", help="the running job")
    p.add_argument("files", nargs="*", metavar="FILE", help="files in the job's sandbox to tail as well")
    add_option(p, "maxbytes", type=int, default=1024, metavar="N",
               help="at most N bytes per file and per look (default 1024)")
    add_option(p, "follow", "f", action="store_true", help="keep printing what the job writes, until it ends")
    add_option(p, "stderr", action="store_true", help="tail stderr instead of stdout")
    add_option(p, "no-stdout", action="store_true", help="do not tail stdout (with file names)")
    add_option(p, "auto-retry", action="store_true", help="wait (every 2 s) until the job runs")
    add_pool_options(p, daemon="schedd", json=False)
    p.set_defaults(func=tail)

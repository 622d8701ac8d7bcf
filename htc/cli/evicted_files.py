"""``htc evicted_files``: condor_evicted_files. HTCondor keeps the files of a job evicted with
``when_to_transfer_output = ON_EXIT_OR_EVICT`` (or of a checkpointing job) in the schedd's
spool, ``$(SPOOL)/<cluster % 10000>/<proc % 10000>/cluster<C>.proc<P>.subproc0``, and this tool
prints (``dir``), lists (``list``) or copies (``get``) them. htc's starter sends an evicted
job's files straight back to its initial directory (Iwd) instead, so the spool holds nothing
for it: the tool says so for each job and where the files went, and reads a spool directory of
HTCondor's layout only if one exists."""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

from htc.cli.options import add_command, add_pool_options, transport_from
from htc.client import query
from htc.errors import UsageError

COMMANDS = ("dir", "list", "get")
_JOB = re.compile(r"^(\d+)\.(\d+)$")


def spool_dir(spool: Path, cluster: int, proc: int) -> Path:
    """Where HTCondor's schedd keeps job ``cluster.proc``'s evicted files."""
    return spool / str(cluster % 10000) / str(proc % 10000) / f"cluster{cluster}.proc{proc}.subproc0"


def _spool() -> Path:
    from htc.config import load_config

    return Path(str(load_config("SCHEDD").param("SPOOL")))


def evicted_files(args: argparse.Namespace) -> int:
    """htc evicted_files: the files kept in the spool for evicted jobs (htc keeps none)."""
    words = list(args.words)
    command = words.pop(0) if words and words[0] in COMMANDS else "dir"
    if not words:
        raise UsageError("name at least one job: htc evicted_files [dir|list|get] CLUSTER.PROC ...")
    spool = _spool()
    transport = transport_from(args, "schedd")
    for word in words:
        found = _JOB.match(word)
        if not found:
            raise UsageError(f"{word!r} is not a job id; give CLUSTER.PROC")
        cluster, proc = int(found.group(1)), int(found.group(2))
        where = spool_dir(spool, cluster, proc)
        if where.is_dir():
            if command == "dir":
                print(where)
            elif command == "list":
                print(f"{word}:")
                for entry in sorted(where.iterdir()):
                    print(f"  {entry.name}")
            else:
                shutil.copytree(where, Path(word), dirs_exist_ok=True)
                print(f"Copied the evicted files of job {word} to ./{word}")
            continue
        ads = query(f"ClusterId == {cluster} && ProcId == {proc}", ["Iwd"], transport=transport)
        iwd = ads[0].get("Iwd") if ads else None
        back = (f"htc sends an evicted job's files (when_to_transfer_output = ON_EXIT_OR_EVICT) straight back "
                f"to its initial directory{f', {iwd}' if iwd else ''}")
        print(f"No evicted files are kept for job {word}: {back}"
              + ("." if ads else " (the job is not in the queue)."))
    return 0


def register(sub) -> None:
    """Add ``htc evicted_files``."""
    p = add_command(sub, "evicted_files", "the files kept in the spool for evicted jobs (condor_evicted_files)", [
        "htc evicted_files 12.0          # the directory (htc keeps none: says where the files went)",
        "htc evicted_files list 12.0 12.1",
        "htc evicted_files get 12.0      # copy them to ./12.0",
    ])
    p.add_argument("words", nargs="+", metavar="[dir|list|get] CLUSTER.PROC",
                   help="an optional command (dir, the default; list; get) and one or more job ids")
    add_pool_options(p, daemon="schedd", json=False)
    p.set_defaults(func=evicted_files)

"""``htc version``: condor_version. Prints the two lines HTCondor's tools print,
``$CondorVersion: ... $`` and ``$CondorPlatform: ... $``, the same strings this machine's startd
advertises in its slot ads (``CondorVersion``, ``CondorPlatform``) and job ads carry
(``CondorVersion``): the HTCondor release whose behaviour htc reproduces, its release date, and a
build id naming htc's own version (:mod:`htc.config.version` builds it)."""

from __future__ import annotations

import argparse

from htc.cli.options import add_command, add_option
from htc.config.version import condor_version
from htc.daemons.startd.sensors import arch, opsys_attrs


def platform_string() -> str:
    """``$CondorPlatform: X86_64-Debian12 $`` for this machine."""
    return f"$CondorPlatform: {arch()}-{opsys_attrs()['OpSysAndVer']} $"


def version(args: argparse.Namespace) -> int:
    """htc version: print the version and platform strings (or only the arch / opsys)."""
    if args.arch:
        print(arch())
    elif args.opsys:
        print(opsys_attrs()["OpSys"])
    else:
        print(condor_version())
        print(platform_string())
    return 0


def register(sub) -> None:
    """Add ``htc version``."""
    p = add_command(sub, "version", "print the version and platform (condor_version)", [
        "htc version          # $CondorVersion: ... $ and $CondorPlatform: ... $",
        "htc version -arch    # X86_64",
        "htc version -opsys   # LINUX",
    ])
    add_option(p, "arch", action="store_true", help="print only the architecture (Arch)")
    add_option(p, "opsys", action="store_true", help="print only the operating system (OpSys)")
    p.set_defaults(func=version)

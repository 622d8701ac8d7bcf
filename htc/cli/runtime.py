"""``htc runtime build|check``: the job runtime (:mod:`htc.runtime`) on this host.

``build`` compiles the preload library and the runtime's programs into the cache (a no-op when
they are current) and prints their paths; ``check`` probes what works here (compiler, static
libc, a forwarded read through the preload, openat2, ptrace, seccomp, cgroups) and exits 1 when
a required part is missing, so the runtime cannot work on this host.
"""

from __future__ import annotations

import argparse
import json

from htc.cli.options import add_command, add_option
from htc.runtime import build


def runtime(args: argparse.Namespace) -> int:
    """htc runtime build|check."""
    if args.action == "build":
        built = {build.LIBRARY_NAME: str(build.library(cache=args.cache))}
        for name in build.PROGRAMS:
            if build.program_sources(name):
                built[name] = str(build.program(name, cache=args.cache))
            else:
                built[name] = None
        if args.json:
            print(json.dumps(built, indent=2))
        else:
            for name, path in built.items():
                print(f"{name:<16} {path or '(no sources in this build of htc)'}")
        return 0
    from htc.runtime.hostcheck import run_checks
    checks = run_checks()
    if args.json:
        print(json.dumps([c.__dict__ for c in checks], indent=2))
    else:
        for c in checks:
            mark = "ok" if c.ok else ("MISSING" if c.required else "no")
            print(f"{c.name:<36} {mark:<8} {c.detail}")
    broken = [c.name for c in checks if c.required and not c.ok]
    if broken and not args.json:
        print(f"the job runtime cannot work on this host: {', '.join(broken)} (see above)")
    return 1 if broken else 0


def register(sub) -> None:
    """Add ``htc runtime``."""
    p = add_command(sub, "runtime", "build the job runtime, or check what of it works on this host", [
        "htc runtime check          # compiler, static libc, forwarding, ptrace, seccomp, cgroups",
        "htc runtime build          # compile libjobrt.so and the jobrt-* programs into the cache",
        "HTC_RUNTIME_CACHE=/opt/htc-rt htc runtime build   # a shared cache directory",
    ])
    p.add_argument("action", choices=["build", "check"])
    add_option(p, "cache", metavar="DIR", help="build into DIR (from the machine's cache: $HTC_RUNTIME_CACHE, "
               "/var/cache/htc/runtime for root, or ~/.cache/htc/runtime)")
    add_option(p, "json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=runtime)

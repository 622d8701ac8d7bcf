"""``python -m htc.daemons <name>``: run one daemon in the foreground.

The master starts its daemons this way; an administrator can too, to watch one daemon closely.
Each daemon's ``service`` module offers ``make_service(paths) -> DaemonService``; this entry
point finds the module, builds the service from the configuration and runs it until it exits.

Exit statuses: the daemon's own (0 after a clean stop); 1 after a crash (the traceback is in
the daemon log); 4 (HTCondor's DAEMON_NO_RESTART) when restarting cannot help -- the daemon is
not in this build, the configuration is broken, or another copy already serves its address --
so that a master does not restart it in a loop.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from htc.daemons.master.events import DAEMON_NO_RESTART
from htc.errors import HTCError, UsageError

#: daemon name -> module providing make_service(paths)
DAEMON_MODULES = {
    "master": "htc.daemons.master.service",
    "collector": "htc.daemons.collector.service",
    "negotiator": "htc.daemons.negotiator.service",
    "schedd": "htc.daemons.schedd.service",
    "startd": "htc.daemons.startd.service",
    "shared_port": "htc.daemons.shared_port.service",
}

__all__ = ["DAEMON_MODULES", "DAEMON_NO_RESTART", "main"]


def main(argv: list[str] | None = None) -> int:
    """Run the daemon named on the command line; return its exit status."""
    parser = argparse.ArgumentParser(prog="python -m htc.daemons", description=__doc__.splitlines()[0],
                                     allow_abbrev=False)
    parser.add_argument("daemon", choices=sorted(DAEMON_MODULES), help="which daemon to run")
    parser.add_argument("-home", "--home", metavar="DIR", help="the pool's home (default: $HTC_HOME or ~/.htc)")
    args = parser.parse_args(argv)

    from htc.daemons.service import DaemonPaths, home_dir, run_service

    name = args.daemon
    module_name = DAEMON_MODULES[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        module = None
    make_service = getattr(module, "make_service", None)
    if make_service is None:
        print(f"htc {name}: the {name} is not in this build of htc yet; take it out of DAEMON_LIST",
              file=sys.stderr)
        return DAEMON_NO_RESTART
    paths = DaemonPaths(Path(args.home).expanduser().resolve() if args.home else home_dir())
    os.umask(0o022)  # what a daemon creates has safe modes whatever umask started the pool
    try:
        paths.prepare()
        return run_service(make_service(paths))
    except UsageError as exc:
        print(f"htc {name}: {exc}", file=sys.stderr)
        return DAEMON_NO_RESTART
    except HTCError as exc:
        print(f"htc {name}: {exc}", file=sys.stderr)
        return exc.exit_status


if __name__ == "__main__":
    sys.exit(main())

"""``htc pool start|stop|status``, ``htc off``/``on``/``restart``/``reconfig`` and
``htc vacate``: the administrator's tools, over :mod:`htc.client`."""

from __future__ import annotations

import argparse
import json

from htc import client
from htc.cli import formatting as fmt
from htc.cli.options import add_command, add_option, add_pool_options, transport_from


def _status_table(status: client.PoolStatus) -> None:
    rows = [(d.name, d.state, d.pid or "-", d.restarts, "yes" if d.answering else "no") for d in status.daemons]
    fmt.print_table(("DAEMON", "STATE", "PID", "RESTARTS", "ANSWERS"), rows, right=[2, 3])


def pool(args: argparse.Namespace) -> int:
    """htc pool: start, stop or inspect the personal pool."""
    if args.action == "start":
        if args.foreground:
            return client.start_pool(foreground=True)
        status = client.start_pool(timeout=args.timeout)
        if args.json:
            print(json.dumps(status.to_dict(), indent=2))
            return 0
        if status.created_key:
            print(f"created the pool key {status.created_key} (mode 0600): copy it to the same place on every "
                  "other host of the pool, keeping it readable by root only")
        print(f"htc pool under {status.home} is running (master pid {status.master_pid})")
        _status_table(status)
        off = [d.name for d in status.daemons if not d.answering]
        if off:
            print(f"not running: {', '.join(off)} (see the *Log.stderr files under {status.home}/log)")
        return 0
    if args.action == "stop":
        before = client.stop_pool(fast=args.fast, timeout=args.timeout)
        if args.json:
            print(json.dumps(before.to_dict(), indent=2))
        elif before.running:
            print(f"htc pool under {before.home} stopped (master pid {before.master_pid})")
        else:
            print(f"htc pool under {before.home} is not running")
        return 0
    status = client.pool_status()
    if args.json:
        print(json.dumps(status.to_dict(), indent=2))
        return 0 if status.running else 1
    if not status.running:
        print(f"htc pool under {status.home} is not running (start it with 'htc pool start')")
        return 1
    state = "shutting down" if status.shutting_down else "running"
    print(f"htc pool under {status.home} is {state} (master pid {status.master_pid})")
    _status_table(status)
    return 0


def _daemons(args: argparse.Namespace) -> list[str]:
    return list(args.daemon or [])


def _sent(command: str, daemons: list[str], to: str = "master") -> list[str]:
    if not daemons:
        return [f'Sent "{command}" command to local {to}']
    return [f'Sent "{command}" command for "{d.lower()}" to local {to}' for d in daemons]


def off(args: argparse.Namespace) -> int:
    """htc off: stop daemons (condor_off)."""
    daemons = _daemons(args) + (["master"] if args.master else [])
    detail = client.daemons_off(daemons, fast=args.fast, transport=transport_from(args))
    lines = _sent("Kill-Daemon" if daemons else "Kill-All-Daemons", daemons)
    _report(args, lines, detail)
    return 0


def on(args: argparse.Namespace) -> int:
    """htc on: start daemons (condor_on)."""
    daemons = _daemons(args)
    detail = client.daemons_on(daemons, transport=transport_from(args))
    _report(args, _sent("Spawn-Daemon" if daemons else "Spawn-All-Daemons", daemons), detail)
    return 0


def restart(args: argparse.Namespace) -> int:
    """htc restart: restart daemons (condor_restart)."""
    daemons = _daemons(args)
    detail = client.daemons_restart(daemons, fast=args.fast, transport=transport_from(args))
    _report(args, _sent("Restart", daemons), detail)
    return 0


def reconfig(args: argparse.Namespace) -> int:
    """htc reconfig: make daemons re-read their configuration (condor_reconfig)."""
    daemons = _daemons(args)
    details = client.reconfig(daemons, transport=transport_from(args))
    lines = [f'Sent "Reconfig" command to local {d.lower()}' for d in daemons] or ['Sent "Reconfig" command to local master']
    _report(args, lines, "; ".join(details))
    return 0


def vacate(args: argparse.Namespace) -> int:
    """htc vacate: evict jobs from machines (condor_vacate)."""
    names = client.vacate_slots(args.machines, constraint=args.constraint or "", fast=args.fast,
                                transport=transport_from(args))
    command = "Vacate-Claim-Fast" if args.fast else "Vacate-Claim"
    lines = [f'Sent "{command}" command for "{n}" to local startd' for n in names] or ["No claimed slots to vacate"]
    _report(args, lines, "")
    return 0


def drain(args: argparse.Namespace) -> int:
    """htc drain: stop machines taking jobs and empty them (condor_drain)."""
    lines = client.drain_machines(args.machines, how=args.how, resume_on_completion=args.resume_on_completion,
                                  reason=args.reason or "", cancel=args.cancel,
                                  transport=transport_from(args))
    _report(args, lines, "")
    return 0


def reschedule(args: argparse.Namespace) -> int:
    """htc reschedule: ask for a negotiation cycle now (condor_reschedule)."""
    detail = client.reschedule(transport=transport_from(args))
    _report(args, ["Sent reschedule command to local schedd"], detail)
    return 0


def _report(args: argparse.Namespace, lines: list[str], detail: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps({"sent": lines, "reply": detail}))
        return
    for line in lines:
        print(line)


def register(sub) -> None:
    """Add pool, off, on, restart, reconfig, vacate, drain and reschedule."""
    p = add_command(sub, "pool", "start, stop or inspect the personal pool under $HTC_HOME", [
        "htc pool start                 # start the daemons; returns once they answer",
        "HTC_HOME=/tmp/p2 htc pool start   # a second, separate pool",
        "htc pool status",
        "htc pool stop",
        "htc pool start -foreground     # run the master here; Ctrl-C stops the pool",
    ])
    p.add_argument("action", choices=["start", "stop", "status"])
    add_option(p, "foreground", action="store_true", help="run the master in the foreground")
    add_option(p, "fast", action="store_true", help="with stop: do not wait for jobs to vacate gracefully")
    add_option(p, "timeout", type=float, default=30.0, metavar="SECONDS",
               help="how long start waits for the pool to answer, or stop for it to exit (default 30)")
    add_option(p, "json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=pool)

    specs = [
        ("off", off, "stop daemons of the pool (condor_off)", ["htc off                 # every daemon but the master",
                                                               "htc off -daemon schedd", "htc off -master -fast"]),
        ("on", on, "start daemons of the pool (condor_on)", ["htc on", "htc on -daemon startd"]),
        ("restart", restart, "restart daemons of the pool (condor_restart)", ["htc restart", "htc restart -daemon negotiator"]),
        ("reconfig", reconfig, "make daemons re-read their configuration (condor_reconfig)",
         ["htc reconfig", "htc reconfig -daemon startd"]),
    ]
    for name, func, text, examples in specs:
        p = add_command(sub, name, text, examples)
        add_option(p, "daemon", action="append", metavar="NAME", help="only this daemon (repeatable)")
        if name in ("off", "restart"):
            add_option(p, "fast", action="store_true", help="stop at once instead of gracefully")
            add_option(p, "graceful", action="store_false", dest="fast", help="let jobs finish their retirement time (default)")
        if name == "off":
            add_option(p, "peaceful", action="store_false", dest="fast", help="same as -graceful in htc")
            add_option(p, "master", action="store_true", help="stop the master too")
        add_pool_options(p)
        p.set_defaults(func=func)

    p = add_command(sub, "vacate", "evict jobs from machines, back to idle (condor_vacate)", [
        "htc vacate                     # every claimed slot of the pool",
        "htc vacate slot1@host",
        "htc vacate -fast -constraint 'RemoteUser == \"alice@host\"'",
    ])
    p.add_argument("machines", nargs="*", metavar="MACHINE|SLOT")
    add_option(p, "fast", action="store_true", help="kill at once instead of a soft kill first")
    add_option(p, "graceful", action="store_false", dest="fast", help="soft kill first (default)")
    add_option(p, "constraint", metavar="EXPR", help="slots satisfying this ClassAd expression")
    add_pool_options(p)
    p.set_defaults(func=vacate)

    p = add_command(sub, "drain", "stop machines taking jobs and let them empty (condor_drain)", [
        "htc drain host                 # running jobs finish (retirement time), no new ones start",
        "htc drain -how fast -reason 'kernel update' host",
        "htc drain -resume-on-completion host   # take jobs again once empty",
        "htc drain -cancel host",
    ])
    p.add_argument("machines", nargs="+", metavar="MACHINE")
    add_option(p, "how", choices=["graceful", "quick", "fast"], default="graceful",
               help="graceful (default): jobs finish; quick: vacate them now; fast: kill them now")
    add_option(p, "graceful", action="store_const", const="graceful", dest="how", help="same as -how graceful")
    add_option(p, "quick", action="store_const", const="quick", dest="how", help="same as -how quick")
    add_option(p, "fast", action="store_const", const="fast", dest="how", help="same as -how fast")
    add_option(p, "resume-on-completion", action="store_true", help="take jobs again once drained")
    add_option(p, "reason", metavar="TEXT", help="why (kept as the slot's DrainReason)")
    add_option(p, "cancel", action="store_true", help="stop draining: take jobs again")
    add_pool_options(p)
    p.set_defaults(func=drain)

    p = add_command(sub, "reschedule", "ask the schedd for a negotiation cycle now (condor_reschedule)", [
        "htc reschedule",
    ])
    add_pool_options(p)
    p.set_defaults(func=reschedule)

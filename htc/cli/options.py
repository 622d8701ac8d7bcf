"""Option helpers shared by the subcommands: HTCondor's single-dash long options, and the
``-pool`` / ``-name`` / ``-json`` options of the tools that talk to daemons."""

from __future__ import annotations

import argparse
from pathlib import Path

from htc.errors import UsageError
from htc.wire.transport import Connection, Server, Transport, UnixTransport


def add_option(parser: argparse.ArgumentParser, name: str, *aliases: str, **kwargs):
    """Declare ``-name`` and ``--name`` (plus any ``aliases``) as one option.

    HTCondor's tools take single-dash long options (``-constraint``); Python users expect
    double-dash ones. Both spellings map to the same destination.
    """
    spellings = [f"-{name}", f"--{name}"]
    for alias in aliases:
        spellings += [f"-{alias}", f"--{alias}"] if len(alias) > 1 else [f"-{alias}"]
    kwargs.setdefault("dest", name.replace("-", "_"))
    return parser.add_argument(*spellings, **kwargs)


def add_pool_options(parser: argparse.ArgumentParser, *, daemon: str | None = None, json: bool = True) -> None:
    """The options of a tool that talks to daemons: ``-pool``, ``-json`` and, for tools that
    talk to one daemon (``daemon``: ``"schedd"``), ``-name``."""
    if daemon:
        add_option(parser, "name", metavar="NAME",
                   help=f"talk to the {daemon} listening as NAME (default: the pool's {daemon})")
    add_option(parser, "pool", metavar="HOME|HOST[:PORT]",
               help="use the pool whose HTC_HOME is this directory, or the pool whose central manager "
                    "is HOST[:PORT] over SSH (default: $HTC_HOME)")
    if json:
        add_option(parser, "json", action="store_true", help="print machine-readable JSON")


class _Renamed(Transport):
    """A transport that reaches ``{alias: address}`` under another name (``-name``)."""

    def __init__(self, base: Transport, names: dict[str, str]):
        self.base = base
        self.names = names

    async def open_connection(self, address: str, **kwargs) -> Connection:
        return await self.base.open_connection(self.names.get(address, address), **kwargs)

    async def start_server(self, address: str, handler, *, task_group) -> Server:
        return await self.base.start_server(self.names.get(address, address), handler, task_group=task_group)


def transport_from(args: argparse.Namespace, daemon: str | None = None) -> Transport | None:
    """The transport the options ask for: the pool of ``-pool HOME`` (default: ``$HTC_HOME``'s,
    returned as None), with ``daemon`` reached under the ``-name`` given; or, when ``-pool`` is
    ``HOST[:PORT]``, the pool of that central manager over SSH (:mod:`htc.client.remote`).

    Raises:
        UsageError: ``-pool`` is not the home directory of a pool on this machine.
    """
    pool = getattr(args, "pool", None)
    name = getattr(args, "name", None)
    transport: Transport | None = None
    if pool:
        from htc.client.remote import parse_pool, remote_pool

        collector = parse_pool(pool)
        if collector is not None:
            return remote_pool(collector, schedd_name=name if daemon == "schedd" else None)
        home = Path(pool).expanduser()
        if not home.is_dir():
            raise UsageError(f"-pool {pool}: no such directory, nor a HOST[:PORT]; give the HTC_HOME of a pool "
                             "on this machine or the central manager of a pool on others")
        transport = UnixTransport(home.resolve() / "sockets")
    if daemon and name:
        if transport is None:
            from htc.client import default_transport

            transport = default_transport()
        transport = _Renamed(transport, {daemon: name})
    return transport


def add_command(sub, name: str, summary: str, examples: list[str], description: str | None = None
                ) -> argparse.ArgumentParser:
    """Add subcommand ``name`` whose ``--help`` ends with its examples.

    Args:
        sub: the subparsers object of the ``htc`` parser.
        name: the subcommand (``q``).
        summary: one line for ``htc --help``.
        examples: command lines shown under "examples:".
        description: a longer text for ``htc NAME --help`` (default: the summary).
    """
    epilog = "examples:\n" + "\n".join(f"  {line}" for line in examples)
    return sub.add_parser(name, help=summary, description=description or summary, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)

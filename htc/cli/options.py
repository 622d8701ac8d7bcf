"""Option helpers shared by the subcommands: HTCondor's single-dash long options."""

from __future__ import annotations

import argparse


def add_option(parser: argparse.ArgumentParser, name: str, *aliases: str, **kwargs):
    """Declare ``-name`` and ``--name`` (plus any ``aliases``) as one option.

    HTCondor's tools take single-dash long options (``-constraint``); Python users expect
    double-dash ones. Both spellings map to the same destination.
    """
    spellings = [f"-{name}", f"--{name}"]
    for alias in aliases:
        spellings += [f"-{alias}", f"--{alias}"]
    kwargs.setdefault("dest", name.replace("-", "_"))
    return parser.add_argument(*spellings, **kwargs)


def add_pool_options(parser: argparse.ArgumentParser) -> None:
    """The options every tool that talks to a daemon takes: ``-name`` and ``-pool``."""
    add_option(parser, "name", metavar="DAEMON", help="talk to this daemon (default: the local one)")
    add_option(parser, "pool", metavar="HOST", help="use this pool's collector (default: HTC_HOME's pool)")
    add_option(parser, "json", action="store_true", help="print machine-readable JSON")

"""Entry point of the ``htc`` command.

Each subcommand lives in a module of this package that exposes ``register(subparsers)``; the
module adds its parser and sets ``func`` to a function taking the parsed ``argparse.Namespace``
and returning an exit status. This module only assembles the parsers and turns an
:class:`htc.HTCError` into a clean one-line message and exit status, in one place.

HTCondor's users type single-dash long options (``-af``, ``-constraint``, ``-long``) from habit.
argparse accepts an option string like ``-constraint`` when it is declared, so each subcommand
declares both spellings (``-constraint`` and ``--constraint``); abbreviations are switched off
so that a single-dash word never silently matches a different option.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from htc.errors import HTCError

#: subcommand modules, in the order ``htc --help`` lists them
COMMAND_MODULES = [
    "htc.cli.submit",
    "htc.cli.queue_tools",
    "htc.cli.history",
    "htc.cli.status",
    "htc.cli.wait",
    "htc.cli.userprio",
    "htc.cli.pool",
    "htc.cli.config_val",
    "htc.cli.tail",
    "htc.cli.ssh_to_job",
    "htc.cli.evicted_files",
    "htc.cli.transfer_data",
    "htc.cli.who",
    "htc.cli.ping",
    "htc.cli.token",
    "htc.cli.version",
    "htc.cli.sim",
    "htc.cli.runtime",
    "htc.cli.checkpoint",
    "htc.dag.cli",          # htc dag ..., htc submit_dag (htc.dag is above htc.cli: loaded by name only)
]


class HelpfulParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors name the subcommand and point at ``--help``.

    ``-help`` (HTCondor's spelling) is ``--help`` on every parser, and each parser that parses
    records itself in the namespace (the innermost one first), so that :func:`main` reports an
    unknown flag with the usage of the subcommand it was given to, not the top-level one.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.add_help:
            self.add_argument("-help", action="help", help=argparse.SUPPRESS)

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if not hasattr(namespace, "_htc_parser"):
            namespace._htc_parser = self
        return namespace, extras

    def error(self, message: str):  # pragma: no cover - exercised through main()
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\nTry '{self.prog} --help' for more.\n")


def build_parser() -> argparse.ArgumentParser:
    """Return the parser of the whole ``htc`` command with every subcommand registered."""
    parser = HelpfulParser(
        prog="htc",
        description="htc: high-throughput computing on the machines you have "
        "(HTCondor's tools, in Python).",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="store_true", help="print the htc version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=HelpfulParser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``htc`` command with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the subcommand that was given the flag reports it, with its own usage
        getattr(args, "_htc_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.version:
        from htc import __version__

        print(f"htc {__version__}")
        return 0
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if os.environ.get("HTC_CONFIG") != "ONLY_ENV":
            # The first use of any command sets up a working personal pool under $HTC_HOME.
            from htc.config import ensure_home

            ensure_home()
        status = args.func(args)
    except HTCError as exc:
        print(f"htc {args.command}: {exc}", file=sys.stderr)
        return exc.exit_status
    except BrokenPipeError:  # `htc q | head` must not print a traceback
        return 0
    except KeyboardInterrupt:
        return 130
    return int(status or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

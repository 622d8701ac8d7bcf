"""``htc config_val``: query the configuration, as ``condor_config_val`` does.

Examples::

    htc config_val SPOOL MAX_JOBS_RUNNING     # expanded values, one per line
    htc config_val -v START                   # value, where it was set, raw text
    htc config_val -subsystem SCHEDD FOO      # as the schedd sees it (SCHEDD.FOO wins)
    htc config_val -dump ALLOW                # every knob matching a pattern
    htc config_val -summary                   # what the files change from the defaults
    htc config_val -config                    # the files read, in order
    htc config_val use POLICY:Desktop         # a metaknob template

Exit status: 0, or 1 when a name is not defined (like condor_config_val), 2 for a bad
configuration file or bad options.
"""

from __future__ import annotations

import argparse
import re
import sys

from htc.cli.options import add_option
from htc.config import ConfigError, load_config, metaknobs
from htc.config.config import Config
from htc.config.params import table_default

EPILOG = """\
examples:
  htc config_val SPOOL MAX_JOBS_RUNNING
  htc config_val -v START
  htc config_val -subsystem SCHEDD MAX_JOBS_RUNNING
  htc config_val -dump ALLOW_
  htc config_val -summary
  htc config_val -config
  htc config_val use ROLE
  htc config_val use POLICY:Desktop

An undefined name prints 'Not defined: NAME' and exits with status 1.
The language and every knob: docs/configuration.md."""


def register(sub) -> None:
    """Add the ``config_val`` subcommand to the ``htc`` parser."""
    p = sub.add_parser("config_val", help="show configuration values and where they come from",
                       description="Show configuration values, as condor_config_val does.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                       allow_abbrev=False)
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="knobs or macros to show (with -dump: patterns); 'use CATEGORY[:TEMPLATE]' "
                        "shows a metaknob template")
    add_option(p, "subsystem", metavar="NAME", help="evaluate as this daemon would (SCHEDD, STARTD, ...)")
    add_option(p, "local-name", metavar="NAME", help="evaluate as the daemon with this local name")
    add_option(p, "verbose", "v", action="store_true",
               help="also show where each value was set and its raw text")
    add_option(p, "raw", action="store_true", help="show values before macro expansion")
    add_option(p, "default", action="store_true", help="show the param table's default")
    add_option(p, "expand", action="store_true", help="with -dump or use: expand the values")
    add_option(p, "dump", action="store_true",
               help="show every knob (matching NAME patterns, as regular expressions)")
    add_option(p, "summary", action="store_true",
               help="show the values the configuration sources set, grouped by source")
    add_option(p, "config", action="store_true", help="list the configuration sources in load order")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Carry out ``htc config_val``; return the exit status."""
    names = list(args.names)
    if names and names[0].lower() == "use":
        return _show_templates(names[1:], args.expand)
    cfg = load_config(args.subsystem, local_name=args.local_name)
    for warning in cfg.warnings:
        print(warning, file=sys.stderr)
    out = sys.stdout
    if args.config:
        _print_sources(cfg, out)
        if not (names or args.dump or args.summary):
            return 0
    if args.summary:
        _print_summary(cfg, out, args.expand)
        return 0
    if args.dump:
        _print_dump(cfg, out, names, expand=args.expand, verbose=args.verbose)
        return 0
    if not names:
        if args.config:
            return 0
        print("htc config_val: name a knob to show, or use -dump, -summary or -config "
              "(see htc config_val --help)", file=sys.stderr)
        return 2
    for name in names:
        if args.default:
            value = cfg.default(name)
            if value is None:
                print(f"Not defined: {name} (it is not in the param table)", file=sys.stderr)
                return 1
            print(value, file=out)
            continue
        value = cfg.raw(name) if args.raw else cfg.get(name)
        if not value:
            print(f"Not defined: {name}", file=sys.stderr)
            return 1
        if args.verbose:
            _print_verbose(cfg, name, value, out)
        else:
            print(value, file=out)
    return 0


def _print_verbose(cfg: Config, name: str, value: str, out) -> None:
    origin = cfg.origin(name)
    print(f"{name} = {value}", file=out)
    print(f" # at: {origin.describe() if origin else 'nowhere'}", file=out)
    raw = cfg.raw(name) or ""
    print(f" # raw: {name} = {raw}", file=out)
    default = cfg.default(name)
    if default is not None and origin is not None and origin.kind != "default":
        print(f" # default: {default if default else '(unset)'}", file=out)
    for ref in cfg.undefined_references(name):
        print(f" # note: $({ref}) is not defined anywhere, so it expanded to nothing", file=out)


def _print_sources(cfg: Config, out) -> None:
    print("Configuration source:", file=out)
    print(f"\t{cfg.files[0] if cfg.files else '(none: ONLY_ENV)'}", file=out)
    if len(cfg.files) > 1:
        print("Local configuration sources:", file=out)
        for path in cfg.files[1:]:
            print(f"\t{path}", file=out)


def _print_dump(cfg: Config, out, patterns: list[str], *, expand: bool, verbose: bool) -> None:
    from htc.config.params import PARAMS

    try:
        regexes = [re.compile(p, re.I) for p in patterns]
    except re.error as exc:
        raise ConfigError(f"-dump pattern is not a regular expression: {exc}",
                          hint="quote the pattern; use . for any character") from None
    names = {n.upper(): n for n in cfg.names()}
    for p in PARAMS.values():
        if p.default and p.in_table:
            names.setdefault(p.name.upper(), p.name)
    label = "expanded" if expand else "raw"
    header = f"# Configuration for subsystem {cfg.subsystem} ({label} values)"
    if patterns:
        header += f", names matching: {' '.join(patterns)}"
    print(header, file=out)
    for key in sorted(names):
        name = names[key]
        if regexes and not any(r.search(name) for r in regexes):
            continue
        value = (cfg.get(name) or "") if expand else (cfg.raw(name) or "")
        print(f"{name} = {value}", file=out)
        if verbose:
            origin = cfg.origin(name)
            print(f" # at: {origin.describe() if origin else 'nowhere'}", file=out)


def _print_summary(cfg: Config, out, expand: bool) -> None:
    groups: dict[str, list[str]] = {}
    for entry in cfg.entries():
        origin = entry.origin
        if origin.kind not in ("file", "environment"):
            continue
        name = entry.name
        if entry.raw == table_default(name):
            continue  # set to the default: not a change (as condor_config_val -summary)
        if origin.kind == "file":
            key = origin.file or ""
        else:
            key = "environment"
        value = (cfg.get(name) or "") if expand else entry.raw
        groups.setdefault(key, []).append(f"{name} = {value}")
    print(f"# Configuration set by the sources (subsystem {cfg.subsystem})", file=out)
    order = [f for f in cfg.files if f in groups] + [k for k in groups if k not in cfg.files]
    for key in order:
        print("#", file=out)
        print(f"# from {key}", file=out)
        print("#", file=out)
        for line in groups[key]:
            print(line, file=out)


def _show_templates(specs: list[str], expand: bool) -> int:
    if not specs:
        for category in metaknobs.categories():
            print(f"use {category} : " + ", ".join(t.name for t in metaknobs.TEMPLATES[category].values()))
        return 0
    for spec in specs:
        category, sep, rest = spec.partition(":")
        category = category.strip()
        templates = metaknobs.TEMPLATES.get(category.upper())
        if templates is None:
            raise ConfigError(f"use {category}: unknown category",
                              hint="known categories: " + ", ".join(metaknobs.categories()))
        if not sep or not rest.strip():
            for template in templates.values():
                print(f"use {category.upper()}:{template.name}\t{template.description}")
            continue
        name, _, args = rest.strip().partition("(")
        template = metaknobs.find_template(category, name.strip())
        if template is None:
            print(f"Not defined: use {category}:{name.strip()}", file=sys.stderr)
            return 1
        body = template.body
        if expand:
            body = metaknobs.expand_meta_args(body, args.rstrip(")") if args else None)
        print(f"use {template.category}:{template.name} is")
        for line in body.splitlines():
            print(f"    {line}")
    return 0

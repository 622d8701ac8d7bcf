"""``htc status``'s ``-sort EXPR``, ``-direct NAME``, ``-xml`` and ``-print-format FILE``, as
condor_status defines them (src/condor_status.V6/status.cpp).

* ``-sort EXPR`` (repeatable: secondary keys): only ads for which EXPR is defined are shown
  (condor_status adds ``EXPR =!= UNDEFINED`` to the query), sorted by the keys condor_status
  renders (``ClassadSortSpecs::RenderKey``: integers and booleans as decimal text, reals by the
  bits of the double, strings as they are, anything else unparsed) compared in natural order
  (``slot2`` before ``slot10``); ``-sort no`` (``false``, ``0``, ``none``) keeps the collector's
  order.
* ``-direct NAME``: the ads of the daemon NAME only (a startd's slots, a schedd and its
  submitters, a master, a negotiator and its accounting ads), after making sure the daemon
  answers; collector and ``-any`` queries go to the collector, as in HTCondor. htc's daemons
  do not answer ad queries themselves, so the ads are the collector's copies (at most an update
  interval old) -- a difference from condor_status, which asks the daemon.
* ``-xml``: HTCondor's ClassAd XML, as ``htc q -xml``.
* ``-print-format FILE``: a print-format table (:mod:`htc.cli.print_format`); ``SELECT FROM
  <type>`` picks the kind of ad (``STARTD``, ``SCHEDD``, ``SUBMITTER``, ``NEGOTIATOR``,
  ``MASTER``, ``COLLECTOR``, ``ACCOUNTING``, ``ANY``); ``WHERE`` narrows the query; ``GROUP BY``
  sorts. The ``PRINTAS`` functions are htc q's (job ones); a column with none prints the value.
"""

from __future__ import annotations

import argparse
import re
import struct
import time

from htc.classad import ClassAd, ExprTree, quote
from htc.classad.values import Error, Undefined
from htc.cli import print_format
from htc.cli.options import add_option
from htc.client import ping, query_collector
from htc.errors import HTCError, UsageError
from htc.wire.messages import AdType

__all__ = ["SELECT_FROM", "add_options", "direct_constraint", "load_layout", "render_layout", "sort_ads",
           "sort_constraints"]

#: SELECT FROM <name> in a print-format file -> the ads it asks for
SELECT_FROM = {
    "STARTD": AdType.Startd, "MACHINE": AdType.Startd, "SLOT": AdType.Startd, "SCHEDD": AdType.Schedd,
    "SCHEDULER": AdType.Schedd, "SUBMITTER": AdType.Submitter, "SUBMITTERS": AdType.Submitter,
    "NEGOTIATOR": AdType.Negotiator, "MASTER": AdType.Master, "DAEMONMASTER": AdType.Master,
    "COLLECTOR": AdType.Collector, "ACCOUNTING": AdType.Accounting, "ANY": AdType.Any,
}

_NO_SORT = {"false", "0", "no", "none"}

#: -direct: which daemon answers for each kind of ad (None: the collector itself)
_DIRECT_DAEMON = {AdType.Startd: "startd", AdType.Schedd: "schedd", AdType.Submitter: "schedd",
                  AdType.Master: "master", AdType.Negotiator: "negotiator", AdType.Accounting: "negotiator"}
_DAEMON_AD = {"startd": AdType.Startd, "schedd": AdType.Schedd, "master": AdType.Master,
              "negotiator": AdType.Negotiator}


def add_options(p: argparse.ArgumentParser) -> None:
    """Add -sort, -direct, -xml and -print-format to the status parser."""
    add_option(p, "sort", action="append", metavar="EXPR",
               help="sort by EXPR (repeat for secondary keys; ads where it is undefined are left out; "
                    "'no': the collector's order)")
    add_option(p, "direct", metavar="NAME", help="only the ads of the daemon NAME, once it answers")
    add_option(p, "xml", action="store_true", help="whole ads in ClassAd XML")
    add_option(p, "print-format", metavar="FILE", help="a custom layout (condor's SELECT ... print-format file)")


def _sorting(sorts) -> list[str]:
    if not sorts or any(s.strip().lower() in _NO_SORT for s in sorts):
        return []
    for expr in sorts:
        try:
            ExprTree(expr)
        except Exception:  # noqa: BLE001 - any parse failure is the user's expression
            raise UsageError(f"Parse error of: {expr}") from None
    return list(sorts)


def sort_constraints(sorts) -> list[str]:
    """The query's ``EXPR =!= UNDEFINED`` for each sort key (none with ``-sort no``)."""
    return [f"({expr}) =!= UNDEFINED" for expr in _sorting(sorts)]


def _key_text(value) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):  # the double's bits as a long long, as condor_status renders it
        return str(struct.unpack("<q", struct.pack("<d", value))[0])
    if isinstance(value, str):
        return value
    if value is Undefined:
        return "undefined"
    if value is Error:
        return "error"
    return ExprTree(repr(value)).unparse() if not isinstance(value, (list, ClassAd)) else str(value)


def _natural(text: str) -> list:
    """natural_cmp's order: digit runs compare as numbers, the rest as characters."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part]


def sort_ads(ads: list[ClassAd], sorts) -> list[ClassAd]:
    """Ads in ``-sort`` order (the collector's order kept for ties and for ``-sort no``)."""
    keys = [ExprTree(expr) for expr in _sorting(sorts)]
    if not keys:
        return list(ads)
    return sorted(ads, key=lambda ad: [_natural(_key_text(k.eval(ad))) for k in keys])


def direct_constraint(name: str, ad_type: AdType, transport) -> str:
    """``-direct NAME``: the constraint selecting the ads the daemon NAME publishes.

    Raises:
        HTCError: no such daemon in the collector, or it does not answer (``Failed to locate``).
    """
    daemon = _DIRECT_DAEMON.get(ad_type)
    if daemon is None:  # collector and -any queries have no direct form: the collector answers
        return ""
    n = quote(name)
    own = _DAEMON_AD[daemon]
    found = query_collector(own, f"Name == {n} || Machine == {n} || MyAddress == {n}"
                            + (f' || Name == ("slot1@" + {n})' if own is AdType.Startd else ""),
                            transport=transport)
    addresses = sorted({str(ad.get("MyAddress")) for ad in found if ad.get("MyAddress")})
    if not addresses:
        raise HTCError(f"Error: Failed to locate {daemon} {name}\nno {daemon} of that name in the collector")
    if len(addresses) > 1:
        raise UsageError(f"-direct {name}: {len(addresses)} {daemon}s have that name; give the daemon's Name")
    address = addresses[0]
    try:
        ping(address, transport=transport)
    except HTCError as exc:
        raise HTCError(f"Error: Failed to locate {daemon} {name}\n{exc}") from None
    if ad_type is AdType.Submitter:
        schedds = sorted({str(ad.get("Name")) for ad in found if ad.get("Name")})
        return " || ".join(f"ScheddName == {quote(s)}" for s in schedds) or "false"
    if ad_type is AdType.Accounting:
        return ""  # the one negotiator's accounting ads
    return f"MyAddress == {quote(address)}"


def load_layout(path: str) -> print_format.Layout:
    """The print-format file at ``path``, read for condor_status (SELECT FROM <type> allowed)."""
    return print_format.load(path, ad_types=SELECT_FROM)


def render_layout(layout: print_format.Layout, ads: list[ClassAd]) -> str:
    """The table of a print-format file (no title line: condor_status prints none)."""
    return layout.render(ads, time.time(), title=None)

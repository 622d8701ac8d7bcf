"""What flocking adds to a daemon's ALLOW lists: FLOCK_FROM on the pool flocked to, FLOCK_TO on
the schedd that flocks.

Theory of operation
-------------------
HTCondor's sample configuration grants the flocking schedd's host what it needs through
``$(FLOCK_FROM)`` (``ALLOW_WRITE_COLLECTOR = $(ALLOW_WRITE), $(FLOCK_FROM)``, the same for the
startd) and lets the flocked-to negotiators reach the schedd through ``$(FLOCK_NEGOTIATOR_HOSTS)``
in ``ALLOW_NEGOTIATOR_SCHEDD``. htc's levels are finer (advertising a Submitter ad needs
ADVERTISE_SCHEDD, claiming a slot DAEMON), so :func:`flock_entries` names exactly the levels a
flocking schedd and the other pool's daemons need, and only for daemons of the other pool:

* on a host of the pool flocked to (FLOCK_FROM lists the flocking schedds' hosts), the collector
  grants ``condor_pool@*/HOST`` ADVERTISE_SCHEDD (its Submitter ads), the startd grants it DAEMON
  (claim, activate, keep-alive, release), the negotiator WRITE (Reschedule), and each grants
  ``*/HOST`` READ;
* on the flocking schedd (FLOCK_TO), the pool's negotiators (FLOCK_NEGOTIATOR_HOSTS, default
  FLOCK_TO) get NEGOTIATOR as ``condor_pool@*/HOST``, and the pool's daemons -- whose identity is
  ``condor_pool@TRUST_DOMAIN`` of that pool, by default its COLLECTOR_HOST, which FLOCK_TO names --
  get DAEMON (their starters report the jobs' progress and exit to the schedd).

The entries are appended to whatever list the configuration (or the built-in default) gives the
level; DENY lists still win. A personal pool (not in network mode) gets nothing from either knob.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["flock_entries", "flock_names", "host_of"]


def flock_names(value) -> list[str]:
    """A FLOCK_* list value (text or list) as its entries."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in value.replace(",", " ").split() if v]
    return [str(v).strip() for v in value if str(v).strip()]


def host_of(entry: str) -> str:
    """The host of ``HOST[:PORT]`` or of a sinful string ``<HOST:PORT...>``."""
    text = entry.strip().lstrip("<").split("?", 1)[0].rstrip(">")
    if text.startswith("["):
        return text[1:].split("]", 1)[0]
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def flock_entries(subsystem: str, get: Callable[[str], str | None]) -> dict[str, list[str]]:
    """``{level name: entries to append}`` for daemon ``subsystem`` from FLOCK_FROM / FLOCK_TO
    (``get(name)`` returns a knob's value or None)."""
    subsys = subsystem.upper()
    out: dict[str, list[str]] = {}
    flock_from = flock_names(get("FLOCK_FROM"))
    if flock_from and subsys in ("COLLECTOR", "STARTD", "NEGOTIATOR"):
        daemons = [f"condor_pool@*/{host}" for host in flock_from]
        level = {"COLLECTOR": "ADVERTISE_SCHEDD", "STARTD": "DAEMON", "NEGOTIATOR": "WRITE"}[subsys]
        out[level] = daemons
        out["READ"] = [f"*/{host}" for host in flock_from]
    flock_to = flock_names(get("FLOCK_TO"))
    if flock_to and subsys == "SCHEDD":
        negotiators = flock_names(get("FLOCK_NEGOTIATOR_HOSTS")) or flock_to
        out["NEGOTIATOR"] = [f"condor_pool@*/{host_of(h)}" for h in negotiators]
        domains = dict.fromkeys(d for entry in flock_to for d in (entry, host_of(entry)))
        out["DAEMON"] = [f"condor_pool@{domain}" for domain in domains]
    return out

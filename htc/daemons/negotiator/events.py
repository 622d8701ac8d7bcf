"""What the negotiator core speaks: the events its service feeds it and the actions it returns.

Besides these the core takes the events every core shares (:mod:`htc.daemons.core`):
``Tick`` (alias :data:`Wakeup`), ``Started``, ``Received`` (the wire's ``Reschedule``),
``StopRequested`` and ``Reconfigured``, and returns the shared ``Reply``, ``Log`` and ``Exit``.
A cycle's events carry its number, so that an answer to an earlier cycle is recognised as
stale.
"""

from __future__ import annotations

from dataclasses import dataclass

from htc.daemons import core as c
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator.accountant import SavedAccountant
from htc.daemons.negotiator.cycle import CycleStatistics
from htc.daemons.negotiator.match_runs import Match, MatchRun

__all__ = [
    "Wakeup", "Reschedule", "PoolAds", "PoolAdsFailed", "RequestsReceived", "RequestsFailed",
    "SetPriorityFactor", "SetRealPriority", "SetAccumulatedUsage", "ResetUsage",
    "FetchPoolAds", "AskResourceRequests", "NotifyMatches", "SaveAccountant", "PublishAccounting",
    "CycleFinished",
]

# --------------------------------------------------------------------------- events


#: The service's timer fired (``next_deadline()`` has passed): the shared ``Tick`` event.
Wakeup = c.Tick


@dataclass(frozen=True)
class Reschedule(c.Event):
    """Negotiate soon: new idle jobs, a slot became free, or someone asked."""

    reason: str = ""


@dataclass(frozen=True)
class PoolAds(c.Event):
    """The collector's answer to :class:`FetchPoolAds`: all slot ads and submitter ads."""

    cycle: int
    machines: tuple = ()
    submitters: tuple = ()


@dataclass(frozen=True)
class PoolAdsFailed(c.Event):
    """The collector could not be asked; the cycle is abandoned."""

    cycle: int
    reason: str


@dataclass(frozen=True)
class RequestsReceived(c.Event):
    """A schedd's resource requests for one submitter, best first."""

    cycle: int
    schedd: str
    submitter: str
    requests: tuple[ResourceRequest, ...] = ()


@dataclass(frozen=True)
class RequestsFailed(c.Event):
    """A schedd could not be asked for a submitter's requests (it is skipped this cycle)."""

    cycle: int
    schedd: str
    submitter: str
    reason: str


@dataclass(frozen=True)
class SetPriorityFactor(c.Event):
    """``htc userprio -setfactor``."""

    submitter: str
    factor: float


@dataclass(frozen=True)
class SetRealPriority(c.Event):
    """``htc userprio -setprio``."""

    submitter: str
    priority: float


@dataclass(frozen=True)
class SetAccumulatedUsage(c.Event):
    """``htc userprio -setaccum``: weighted slot-seconds."""

    submitter: str
    seconds: float


@dataclass(frozen=True)
class ResetUsage(c.Event):
    """``htc userprio -resetusage``."""

    submitter: str


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class FetchPoolAds(c.Action):
    """Query the collector for every slot ad and submitter ad; answer with PoolAds."""

    cycle: int


@dataclass(frozen=True)
class AskResourceRequests(c.Action):
    """Ask ``schedd`` for ``submitter``'s resource requests; answer with RequestsReceived."""

    cycle: int
    schedd: str
    schedd_address: str
    submitter: str
    significant_attributes: tuple[str, ...]


@dataclass(frozen=True)
class NotifyMatches(c.Action):
    """Tell the schedds and the startds of the matches of ``run`` (a wire message MatchNotify
    each): one action per run of matches of one request on one slot (:mod:`.match_runs`)."""

    run: MatchRun

    @property
    def matches(self) -> list[Match]:
        """The run's matches, one per job, in order (made anew at each read)."""
        return self.run.matches()


@dataclass(frozen=True)
class SaveAccountant(c.Action):
    """Persist the accountant (write :attr:`snapshot` as JSON, atomically). ``state`` is the
    accountant as it was when the core returned this (:meth:`.Accountant.saved`: its runs of
    carves as runs, cheap to take); the service writes its text (``state.text()``, the same
    as ``json.dumps(snapshot, sort_keys=True)``)."""

    state: SavedAccountant

    @property
    def snapshot(self) -> dict:
        """:meth:`.Accountant.snapshot`'s data of :attr:`state` (made anew at each read, by the
        service as it writes the file)."""
        return self.state.data()


@dataclass(frozen=True)
class PublishAccounting(c.Action):
    """Advertise these Accounting ads (one per submitter) to the collector for ``htc userprio``."""

    ads: tuple[dict, ...]


@dataclass(frozen=True)
class CycleFinished(c.Action):
    """A cycle ended (with matches or aborted); publish its statistics."""

    statistics: CycleStatistics

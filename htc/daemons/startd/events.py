"""What goes into the startd core (events) and what comes out (actions).

Plain frozen records. The startd's service turns wire messages (``htc/wire/messages.py``) and
timers into events, and actions into messages, process work and ad updates; the core never sees
a socket. Ads travel as plain ``dict``s (attribute name -> value; expression-valued attributes
hold an ``htc.classad.ExprTree``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Ad = Mapping[str, Any]


# --------------------------------------------------------------------------------- events
@dataclass(frozen=True, slots=True)
class SensorSample:
    """A fresh measurement of the machine (see :mod:`htc.daemons.startd.sensors`)."""

    attrs: Ad


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed: the service sends this when :meth:`Startd.next_deadline` arrives."""


@dataclass(frozen=True, slots=True)
class MatchNotified:
    """The negotiator matched ``slot`` (by the claim id the slot advertised) with a job."""

    slot: str
    claim_id: str


@dataclass(frozen=True, slots=True)
class RequestClaim:
    """A schedd asks to claim ``slot`` for ``job_ad`` presenting the slot's claim id.

    ``lease`` is the claim lease in seconds (the job's JobLeaseDuration); None means
    ``MAX_CLAIM_ALIVES_MISSED * alive_interval``. ``priority_preemption`` marks a claim the
    negotiator made by preempting a lower-priority user.
    """

    slot: str
    claim_id: str
    job_ad: Ad
    schedd: str
    lease: float | None = None
    alive_interval: float = 300.0
    priority_preemption: bool = False


@dataclass(frozen=True, slots=True)
class ActivateClaim:
    """The claimant's shadow asks to run ``job_ad`` on its claim (``lane``: as a call lane)."""

    claim_id: str
    job_ad: Ad
    lane: bool = False


@dataclass(frozen=True, slots=True)
class KeepAlive:
    """The claimant is still there; renews the claim lease."""

    claim_id: str


@dataclass(frozen=True, slots=True)
class JobUpdate:
    """The starter measured the job (ImageSize, RemoteUserCpu, ...); merged into the claim's job ad."""

    claim_id: str
    attrs: Ad


@dataclass(frozen=True, slots=True)
class JobExited:
    """The starter of ``claim_id`` is gone (job finished, vacated or killed)."""

    claim_id: str


@dataclass(frozen=True, slots=True)
class ReleaseClaim:
    """The claimant gives the claim back (no more work for it)."""

    claim_id: str


@dataclass(frozen=True, slots=True)
class ClaimantGone:
    """The claimant's watch on the claim closed unanswered: its schedd died or went away. The
    claim ends now (the wire adapter sends this only for a claim with no job, or a call lane's;
    a job keeps running within the claim lease, for a restarted schedd to reconnect to)."""

    claim_id: str


@dataclass(frozen=True, slots=True)
class ClaimLeaseExpired:
    """The service decided the claimant is gone (the core also expires leases by itself)."""

    claim_id: str


@dataclass(frozen=True, slots=True)
class Vacate:
    """condor_vacate: evict the job of ``slot`` (every slot when None); ``fast`` skips vacating."""

    slot: str | None = None
    fast: bool = False


@dataclass(frozen=True, slots=True)
class Drain:
    """condor_drain: stop taking jobs and empty the machine.

    ``how``: ``"graceful"`` honours MaxJobRetirementTime, ``"quick"`` retires with no
    retirement time (vacate now), ``"fast"`` hard-kills. ``resume_on_completion`` returns the
    slots to Owner once everything is drained.
    """

    how: str = "graceful"
    resume_on_completion: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CancelDrain:
    """condor_drain -cancel."""


# -------------------------------------------------------------------------------- actions
@dataclass(frozen=True, slots=True)
class AdvertiseSlot:
    """Send this slot ad to the collector; ``claim_id`` is private (negotiator only)."""

    slot: str
    ad: dict[str, Any]
    claim_id: str | None = None


@dataclass(frozen=True, slots=True)
class InvalidateSlot:
    """The slot is gone (a dynamic slot returned its resources); drop its ad."""

    slot: str


@dataclass(frozen=True, slots=True)
class ReplyClaim:
    """Answer to :class:`RequestClaim`. On success ``slot`` is the claimed (maybe dynamic) slot."""

    claim_id: str
    accepted: bool
    slot: str
    reason: str = ""
    slot_ad: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReplyActivate:
    """Answer to :class:`ActivateClaim`."""

    claim_id: str
    accepted: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class StartStarter:
    """Spawn a starter for ``job_ad`` in ``slot`` (``slot_ad`` is the machine ad the job sees)."""

    slot: str
    claim_id: str
    job_ad: dict[str, Any]
    slot_ad: dict[str, Any]
    lane: bool = False


@dataclass(frozen=True, slots=True)
class SuspendJob:
    """Stop every process of the job (SIGSTOP / cgroup freeze)."""

    slot: str
    claim_id: str


@dataclass(frozen=True, slots=True)
class ContinueJob:
    """Resume a suspended job."""

    slot: str
    claim_id: str


@dataclass(frozen=True, slots=True)
class VacateJob:
    """Soft-kill the job (its KillSig, default SIGTERM); hard-kill it after ``grace`` seconds."""

    slot: str
    claim_id: str
    grace: float


@dataclass(frozen=True, slots=True)
class KillJob:
    """Hard-kill the job now (SIGKILL to every process)."""

    slot: str
    claim_id: str


@dataclass(frozen=True, slots=True)
class KillStarter:
    """KILLING_TIMEOUT passed and the starter is still there: SIGKILL it and its children."""

    slot: str
    claim_id: str


@dataclass(frozen=True, slots=True)
class HoldJob:
    """The job broke one of its own limits (``AllowedExecuteDuration``): kill it now and report
    its exit to the shadow with a hold request (``code``/``subcode``/``reason``, as HoldReasonCode,
    HoldReasonSubCode and HoldReason). The claim stays: the slot is Claimed/Idle once it is gone."""

    slot: str
    claim_id: str
    code: int
    subcode: int
    reason: str


@dataclass(frozen=True, slots=True)
class ClaimEnded:
    """Tell the claimant (``schedd``) that the claim is gone and why."""

    claim_id: str
    schedd: str
    slot: str
    reason: str


Event = (
    SensorSample | Tick | MatchNotified | RequestClaim | ActivateClaim | KeepAlive | JobUpdate | JobExited
    | ReleaseClaim | ClaimLeaseExpired | Vacate | Drain | CancelDrain
)
Action = (
    AdvertiseSlot | InvalidateSlot | ReplyClaim | ReplyActivate | StartStarter | SuspendJob | ContinueJob
    | VacateJob | KillJob | KillStarter | HoldJob | ClaimEnded
)


def format_time_short(seconds: float) -> str:
    """A duration as HTCondor's ``format_time_short`` prints it in hold reasons: ``H:MM:SS``,
    with ``D+`` in front once it reaches a day (``0:00:05``, ``20:00:00``, ``3+00:00:00``)."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}+{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours}:{minutes:02d}:{secs:02d}"

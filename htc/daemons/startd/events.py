"""The startd's events and actions: the two conversations of its sans-IO parts.

Plain frozen records, in two groups:

* the **core's** (:class:`~htc.daemons.startd.core.Startd`): what goes in (a claim request, a
  starter gone, a drain ...) and what comes out (advertise a slot, start a starter, suspend a
  job ...). The wire adapter (:mod:`htc.daemons.startd.adapter`) turns wire messages
  (``htc/wire/messages/``) and timers into these events, and these actions into messages, ad
  updates and process work; the core never sees a socket. Ads travel as plain ``dict``s
  (attribute name -> value; expression-valued attributes hold an ``htc.classad.ExprTree``).
* the **service's** (:class:`~htc.daemons.startd.service.StartdService`): the process work the
  adapter asks for -- :class:`SampleSensors`, :class:`RunStarter`, :class:`QueueCalls`,
  :class:`HoldWatch` and the core's :data:`STARTER_ACTIONS` -- and how the service answers:
  :class:`Sampled`, :class:`StarterStarted`, :class:`StarterFailed`, :class:`StarterUsage`,
  :class:`StarterExited`, :class:`WatchClosed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from htc.daemons import core as c
from htc.daemons.starter.service import ExitRecord
from htc.jobqueue.states import HoldReasonCode

Ad = Mapping[str, Any]


# --------------------------------------------------------------------------------- events
@dataclass(frozen=True, slots=True)
class SensorSample(c.Event):
    """A fresh measurement of the machine (see :mod:`htc.daemons.startd.sensors`)."""

    attrs: Ad


@dataclass(frozen=True, slots=True)
class Tick(c.Event):
    """Time passed: the service sends this when :meth:`Startd.next_deadline` arrives."""


@dataclass(frozen=True, slots=True)
class MatchNotified(c.Event):
    """The negotiator matched ``slot`` (by the claim id the slot advertised) with a job."""

    slot: str
    claim_id: str


@dataclass(frozen=True, slots=True)
class RequestClaim(c.Event):
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
class ActivateClaim(c.Event):
    """The claimant's shadow asks to run ``job_ad`` on its claim (``lane``: as a call lane)."""

    claim_id: str
    job_ad: Ad
    lane: bool = False


@dataclass(frozen=True, slots=True)
class KeepAlive(c.Event):
    """The claimant is still there; renews the claim lease."""

    claim_id: str


@dataclass(frozen=True, slots=True)
class JobUpdate(c.Event):
    """The starter measured the job (ImageSize, RemoteUserCpu, ...); merged into the claim's job ad."""

    claim_id: str
    attrs: Ad


@dataclass(frozen=True, slots=True)
class JobExited(c.Event):
    """The starter of ``claim_id`` is gone (job finished, vacated or killed)."""

    claim_id: str


@dataclass(frozen=True, slots=True)
class ReleaseClaim(c.Event):
    """The claimant gives the claim back (no more work for it)."""

    claim_id: str


@dataclass(frozen=True, slots=True)
class ClaimantGone(c.Event):
    """The claimant's watch on the claim closed unanswered: its schedd died or went away. The
    claim ends now (the wire adapter sends this only for a claim with no job, or a call lane's;
    a job keeps running within the claim lease, for a restarted schedd to reconnect to)."""

    claim_id: str


@dataclass(frozen=True, slots=True)
class ClaimLeaseExpired(c.Event):
    """The service decided the claimant is gone (the core also expires leases by itself)."""

    claim_id: str


@dataclass(frozen=True, slots=True)
class Vacate(c.Event):
    """condor_vacate: evict the job of ``slot`` (every slot when None); ``fast`` skips vacating."""

    slot: str | None = None
    fast: bool = False


@dataclass(frozen=True, slots=True)
class Drain(c.Event):
    """condor_drain: stop taking jobs and empty the machine.

    ``how``: ``"graceful"`` honours MaxJobRetirementTime, ``"quick"`` retires with no
    retirement time (vacate now), ``"fast"`` hard-kills. ``resume_on_completion`` returns the
    slots to Owner once everything is drained.
    """

    how: str = "graceful"
    resume_on_completion: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CancelDrain(c.Event):
    """condor_drain -cancel."""


# -------------------------------------------------------------------------------- actions
@dataclass(frozen=True, slots=True)
class AdvertiseSlot(c.Action):
    """Send this slot ad to the collector; ``claim_id`` is private (negotiator only)."""

    slot: str
    ad: dict[str, Any]
    claim_id: str | None = None


@dataclass(frozen=True, slots=True)
class InvalidateSlot(c.Action):
    """The slot is gone (a dynamic slot returned its resources); drop its ad."""

    slot: str


@dataclass(frozen=True, slots=True)
class ReplyClaim(c.Action):
    """Answer to :class:`RequestClaim`. On success ``slot`` is the claimed (maybe dynamic) slot."""

    claim_id: str
    accepted: bool
    slot: str
    reason: str = ""
    slot_ad: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReplyActivate(c.Action):
    """Answer to :class:`ActivateClaim`."""

    claim_id: str
    accepted: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class StartStarter(c.Action):
    """Spawn a starter for ``job_ad`` in ``slot`` (``slot_ad`` is the machine ad the job sees)."""

    slot: str
    claim_id: str
    job_ad: dict[str, Any]
    slot_ad: dict[str, Any]
    lane: bool = False


@dataclass(frozen=True, slots=True)
class SuspendJob(c.Action):
    """Stop every process of the job (SIGSTOP / cgroup freeze)."""

    slot: str
    claim_id: str


@dataclass(frozen=True, slots=True)
class CheckpointJob(c.Action):
    """Checkpoint the claim's standard-universe job now and send the image to the shadow; the
    job runs on (``htc checkpoint``, PERIODIC_CHECKPOINT)."""

    slot: str
    claim_id: str
    why: str = "htc checkpoint"


@dataclass(frozen=True, slots=True)
class ContinueJob(c.Action):
    """Resume a suspended job."""

    slot: str
    claim_id: str


@dataclass(frozen=True, slots=True)
class VacateJob(c.Action):
    """Soft-kill the job (its KillSig, default SIGTERM); hard-kill it after ``grace`` seconds."""

    slot: str
    claim_id: str
    grace: float


@dataclass(frozen=True, slots=True)
class KillJob(c.Action):
    """Hard-kill the job now (SIGKILL to every process)."""

    slot: str
    claim_id: str


@dataclass(frozen=True, slots=True)
class KillStarter(c.Action):
    """KILLING_TIMEOUT passed and the starter is still there: SIGKILL it and its children."""

    slot: str
    claim_id: str


@dataclass(frozen=True, slots=True)
class HoldJob(c.Action):
    """The job broke one of its own limits (``AllowedExecuteDuration``): kill it now and report
    its exit to the shadow with a hold request (``code``/``subcode``/``reason``, as HoldReasonCode,
    HoldReasonSubCode and HoldReason). The claim stays: the slot is Claimed/Idle once it is gone."""

    slot: str
    claim_id: str
    code: int
    subcode: int
    reason: str


@dataclass(frozen=True, slots=True)
class ClaimEnded(c.Action):
    """Tell the claimant (``schedd``) that the claim is gone and why."""

    claim_id: str
    schedd: str
    slot: str
    reason: str


#: what the core handles
CoreEvent = (
    SensorSample | Tick | MatchNotified | RequestClaim | ActivateClaim | KeepAlive | JobUpdate | JobExited
    | ReleaseClaim | ClaimantGone | ClaimLeaseExpired | Vacate | Drain | CancelDrain
)
#: what the core returns
CoreAction = (
    AdvertiseSlot | InvalidateSlot | ReplyClaim | ReplyActivate | StartStarter | SuspendJob | ContinueJob
    | VacateJob | KillJob | KillStarter | HoldJob | ClaimEnded
)


# ------------------------------------------------------- the adapter and its service


@dataclass(frozen=True)
class Sampled(c.Event):
    """The service measured the machine (``Sensors.sample``)."""

    attrs: dict[str, Any]


@dataclass(frozen=True)
class StarterStarted(c.Event):
    """The job of ``claim_id`` is running."""

    claim_id: str


@dataclass(frozen=True)
class StarterFailed(c.Event):
    """The job of ``claim_id`` could not be started; ``error`` says why (nothing is running).

    ``hold_code`` is the HoldReasonCode the job should be held with (6 FailedToCreateProcess,
    13 TransferInputError).
    """

    claim_id: str
    error: str
    hold_code: int = int(HoldReasonCode.FailedToCreateProcess)
    hold_subcode: int = 0  # the errno of a failed exec, as HTCondor's starter reports it


@dataclass(frozen=True)
class StarterUsage(c.Event):
    """The starter measured the job of ``claim_id`` (RemoteUserCpu, ImageSize, ...)."""

    claim_id: str
    attrs: dict[str, Any]


@dataclass(frozen=True)
class StarterExited(c.Event):
    """The job of ``claim_id`` is gone and its sandbox cleaned up."""

    claim_id: str
    record: ExitRecord


@dataclass(frozen=True)
class SampleSensors(c.Action):
    """Measure the machine now and feed :class:`Sampled`."""


@dataclass(frozen=True)
class RunStarter(c.Action):
    """Start a starter for ``job_ad`` on ``slot`` and watch it until the job is gone."""

    slot: str
    claim_id: str
    job_ad: dict[str, Any]
    slot_ad: dict[str, Any]
    lane: bool = False  # a call lane (htc.executors.lane): RunCalls feed it, CallsDone report it


@dataclass(frozen=True)
class QueueCalls(c.Action):
    """Hand ``calls`` (wire LaneCalls, checked) to the call lane running on ``claim_id``."""

    claim_id: str
    calls: tuple[Any, ...]


@dataclass(frozen=True)
class HoldWatch(c.Action):
    """The answer to the request on ``conn_id`` is held (a claim watch, ClaimKeepAlive with
    ``watch``): feed :class:`WatchClosed` if that connection closes first."""

    conn_id: int


@dataclass(frozen=True)
class WatchClosed(c.Event):
    """The connection ``conn_id`` of a held claim watch closed: the schedd that watched died or left."""

    conn_id: int


#: core actions the service carries out on the claim's starter
STARTER_ACTIONS = (SuspendJob, ContinueJob, VacateJob, KillJob, KillStarter, CheckpointJob)

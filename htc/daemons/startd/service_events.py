"""What the startd's service and its wire adapter exchange: settings, events, actions.

:class:`~htc.daemons.startd.service.StartdService` drives a
:class:`~htc.daemons.startd.wire.StartdDaemon` built from :class:`StartdServiceSettings`. The
adapter asks for process work with :class:`SampleSensors`, :class:`RunStarter`, :class:`QueueCalls` and the core's
:data:`STARTER_ACTIONS`; the service carries it out and answers with :class:`Sampled`,
:class:`StarterStarted`, :class:`StarterFailed`, :class:`StarterUsage` and
:class:`StarterExited`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from htc.daemons import core as c
from htc.daemons.startd import events as ev
from htc.daemons.run_as import RunAsPolicy
from htc.daemons.startd.sensors import SensorSettings
from htc.daemons.startd.slots import StartdSettings
from htc.daemons.starter.service import ExitRecord

__all__ = [
    "StartdServiceSettings", "SampleSensors", "RunStarter", "Sampled", "StarterStarted", "StarterFailed",
    "StarterUsage", "StarterExited", "QueueCalls", "STARTER_ACTIONS", "HOLD_FAILED_TO_CREATE_PROCESS",
    "HOLD_TRANSFER_INPUT", "HoldWatch", "WatchClosed",
]


@dataclass(frozen=True)
class StartdServiceSettings:
    """The core's settings plus what the service needs (knob names in the comments)."""

    startd: StartdSettings
    sensors: SensorSettings
    execute_dir: Path                         # EXECUTE
    address: str = "startd"                   # where schedds and the negotiator reach it
    collector: str = "collector"
    negotiator: str = "negotiator"            # told (Reschedule) when a slot offers more than before
    sample_interval: float = 5.0              # POLLING_INTERVAL: sensors sampled, policy evaluated
    ad_lifetime: int = 900                    # CLASSAD_LIFETIME (at least 2 x UPDATE_INTERVAL)
    starter_update_interval: float = 300.0    # STARTER_UPDATE_INTERVAL
    starter_initial_update_interval: float = 8.0  # STARTER_INITIAL_UPDATE_INTERVAL
    retry_interval: float = 5.0               # between attempts to deliver a job exit or an ad
    claimed_update_delay: float = 1.0         # a claimed slot's activity-only ad changes wait this long
    stop_timeout: float = 630.0               # graceful shutdown: longest wait for jobs to vacate
    fast_stop_timeout: float = 35.0           # fast shutdown: longest wait for killed jobs
    run_as: RunAsPolicy = field(default_factory=RunAsPolicy)  # who runs jobs when the startd is root
    execute_note: str = ""                    # why execute_dir is not EXECUTE (see htc.daemons.execute_dir)
    execute_chosen: bool = False              # execute_dir is the startd's own per-pool directory
    use_cgroups: bool = True
    slot_weight: str = "Cpus"                 # SLOT_WEIGHT, published as an expression
    use_zygote: bool = True                   # STARTER_PYTHON_ZYGOTE
    zygote_modules: tuple[str, ...] = ("htc.executors.worker", "htc.executors.lane")  # STARTER_ZYGOTE_MODULES
    use_exec_zygote: bool = True              # STARTER_EXEC_ZYGOTE


# --- the adapter's own events and actions ----------------------------------------------------


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
    hold_code: int = 6


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


#: HTCondor's HoldReasonCode for a job the starter could not start / whose input could not be fetched
HOLD_FAILED_TO_CREATE_PROCESS = 6
HOLD_TRANSFER_INPUT = 13

#: core actions the service carries out on the claim's starter
STARTER_ACTIONS = (ev.SuspendJob, ev.ContinueJob, ev.VacateJob, ev.KillJob, ev.KillStarter)

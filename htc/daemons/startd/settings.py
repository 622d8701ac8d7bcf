"""What the startd is configured with: the core's settings and the service's.

Both are frozen dataclasses whose knob-configured fields say so where they are declared
(:func:`htc.daemons.settings.knob`); :func:`htc.daemons.startd.service.settings_from_config`
builds them with :func:`htc.daemons.settings.from_config`, passing the fields no single knob
decides (the host name, the memory left after RESERVED_MEMORY, the free disk of the execute
directory, the policy expressions, who runs jobs). The defaults are what a core test gets
without a configuration; a running startd always gets the param table's values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from htc.daemons.run_as import RunAsPolicy
from htc.daemons.settings import knob
from htc.daemons.startd.policy import Policy
from htc.daemons.startd.sensors import SensorSettings

__all__ = ["StartdServiceSettings", "StartdSettings", "keep_layout"]


@dataclass(frozen=True, kw_only=True)
class StartdSettings:
    """Everything the core needs to know.

    ``cpus``/``memory`` (MiB)/``disk`` (KiB) are the machine's resources to hand out.
    ``static_slots`` = 0 means one partitionable slot; N > 0 means N equal static slots.
    ``name`` is the host, or ``STARTD_NAME@host`` (:func:`htc.config.hostname.daemon_name`);
    ``machine`` the host's full name; slots are ``slot<N>@<slots_at>`` (empty: ``machine``), so a
    second startd on the host with its own STARTD_NAME has slots of its own names. ``memory`` is
    MEMORY less RESERVED_MEMORY; ``disk`` is DISK or what the execute directory has free.
    """

    name: str
    machine: str
    policy: Policy
    slots_at: str = ""
    memory: int
    disk: int
    cpus: int = knob("NUM_CPUS", 1, convert=lambda value: int(value or 1))
    static_slots: int = knob("NUM_SLOTS", 0, convert=lambda value: int(value or 0))
    update_interval: float = knob("UPDATE_INTERVAL", 300.0)
    polling_interval: float = knob("POLLING_INTERVAL", 5.0)
    match_timeout: float = knob("MATCH_TIMEOUT", 120.0)
    killing_timeout: float = knob("KILLING_TIMEOUT", 30.0)
    claim_worklife: float = knob("CLAIM_WORKLIFE", 1200.0)
    max_claim_alives_missed: int = knob("MAX_CLAIM_ALIVES_MISSED", 6)
    cpu_quantum: int = 1
    memory_quantum: int = 128
    disk_quantum: int = 1024
    #: STARTD_ATTRS: config macros published in every slot ad (name -> expression); the
    #: startd's own attributes (Name, State, Cpus, ...) win over one of the same name
    static_attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class StartdServiceSettings:
    """The core's settings plus what the service and its wire adapter need."""

    startd: StartdSettings
    sensors: SensorSettings
    execute_dir: Path                         # EXECUTE (see htc.daemons.execute_dir)
    address: str = "startd"                   # where schedds and the negotiator reach it
    collector: str = "collector"
    negotiator: str = "negotiator"            # told (Reschedule) when a slot offers more than before
    #: sensors sampled, policy evaluated
    sample_interval: float = knob("POLLING_INTERVAL", 5.0)
    ad_lifetime: int = 900                    # CLASSAD_LIFETIME, at least 2 x UPDATE_INTERVAL
    starter_update_interval: float = knob("STARTER_UPDATE_INTERVAL", 300.0)
    starter_initial_update_interval: float = knob("STARTER_INITIAL_UPDATE_INTERVAL", 8.0)
    retry_interval: float = 5.0               # between attempts to deliver a job exit or an ad
    claimed_update_delay: float = 1.0         # a claimed slot's activity-only ad changes wait this long
    #: graceful shutdown: longest wait for jobs to vacate (their vacate time and 30 s more)
    stop_timeout: float = knob("MachineMaxVacateTime", 630.0, convert=lambda value: float(value or 600) + 30.0)
    #: fast shutdown: longest wait for killed jobs
    fast_stop_timeout: float = knob("KILLING_TIMEOUT", 35.0, convert=lambda value: float(value) + 5.0)
    run_as: RunAsPolicy = field(default_factory=RunAsPolicy)  # who runs jobs when the startd is root
    execute_note: str = ""                    # why execute_dir is not EXECUTE (see htc.daemons.execute_dir)
    execute_chosen: bool = False              # execute_dir is the startd's own per-pool directory
    use_cgroups: bool = True
    #: published as an expression
    slot_weight: str = knob("SLOT_WEIGHT", "Cpus", convert=lambda value: str(value).strip() or "Cpus")
    use_zygote: bool = knob("STARTER_PYTHON_ZYGOTE", True)
    zygote_modules: tuple[str, ...] = knob("STARTER_ZYGOTE_MODULES", ("htc.executors.worker", "htc.executors.lane"),
                                           convert=lambda value: tuple(str(name) for name in value or ()))
    use_exec_zygote: bool = knob("STARTER_EXEC_ZYGOTE", True)
    #: seconds between periodic checkpoints of a standard-universe job (0: none)
    checkpoint_interval: float = knob("CHECKPOINT_INTERVAL", 900.0, convert=lambda value: max(0.0, float(value or 0)))


def keep_layout(old: StartdServiceSettings, new: StartdServiceSettings) -> tuple[StartdServiceSettings, bool]:
    """The settings a reconfiguration may apply: ``new``, but with the slots' layout of ``old``
    (NUM_CPUS, MEMORY, DISK, NUM_SLOTS and the host take a restart); True when that changed ``new``."""
    was, now = old.startd, new.startd
    if (now.cpus, now.memory, now.static_slots, now.machine) == (was.cpus, was.memory, was.static_slots, was.machine):
        return new, False
    return replace(new, startd=replace(now, cpus=was.cpus, memory=was.memory, disk=was.disk,
                                       static_slots=was.static_slots, machine=was.machine)), True

"""The schedd's settings: a frozen dataclass whose fields name their knobs.

:func:`htc.daemons.settings.from_config` builds it from the param table
(:func:`htc.daemons.schedd.service.settings_from_config` adds what comes from the host: the
name, the machine, the UID_DOMAIN default, and the pool-wide periodic policy); a core test
builds it directly with the defaults below.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from htc.daemons.settings import knob
from htc.errors import UsageError
from htc.jobqueue import SystemPolicy
from htc.submit import SubmitSettings

__all__ = ["ScheddSettings"]


@dataclass(frozen=True)
class ScheddSettings:
    """What the schedd core needs to know (times in seconds; names are HTCondor's knobs)."""

    name: str = "schedd@localhost"        # SCHEDD_NAME (the Name of its Scheduler ad)
    address: str = "schedd"               # where tools, negotiator and starters reach it
    machine: str = "localhost"            # the host it runs on (SubmitHost in the user log)
    collector: str = "collector"          # the collector's address
    negotiator: str = "negotiator"        # the negotiator's address
    #: FLOCK_TO's pools (with FLOCK_COLLECTOR_HOSTS, FLOCK_NEGOTIATOR_HOSTS): htc.daemons.schedd.flock
    flock_pools: tuple = ()
    flock_increment: int = knob("FLOCK_INCREMENT", 1)            # pools added at a time
    uid_domain: str = "localhost"         # UID_DOMAIN: submitters are user@uid_domain
    #: what expanding a submit description here uses (JOB_DEFAULT_*, SUBMIT_ATTRS, ...; the
    #: service builds it from the configuration)
    submit: SubmitSettings = field(default_factory=SubmitSettings)
    filesystem_domain: str = ""           # FILESYSTEM_DOMAIN: told to starters with each job
    spool: str = ""                       # SPOOL: where -spool jobs keep their files
    interval: float = knob("SCHEDD_INTERVAL", 300.0)             # ad refresh and housekeeping
    min_interval: float = knob("SCHEDD_MIN_INTERVAL", 5.0)       # least time between ad updates
    alive_interval: float = knob("ALIVE_INTERVAL", 300.0)        # claim keep-alives
    default_lease: float = knob("JOB_DEFAULT_LEASE_DURATION", 2400.0)
    periodic_interval: float = knob("PERIODIC_EXPR_INTERVAL", 60.0)
    request_claim_timeout: float = 30.0   # how long a startd may take to answer RequestClaim
    prompt_delay: float = 0.005           # new work (submit, release, reschedule): ads + Reschedule this soon
    reconnect_retry: float = 2.0          # between attempts to reach a running job's startd
    send_reschedule: bool = knob("SCHEDD_SEND_RESCHEDULE", True)
    max_jobs_running: int = knob("MAX_JOBS_RUNNING", 10000)
    max_jobs_submitted: int = knob("MAX_JOBS_SUBMITTED", 2147483647)   # jobs the whole queue may hold
    max_jobs_per_owner: int = knob("MAX_JOBS_PER_OWNER", 100000)       # jobs one owner may have queued
    max_jobs_per_submission: int = knob("MAX_JOBS_PER_SUBMISSION", 20000)  # jobs one submit may add
    claim_linger: float = knob("SCHEDD_CLAIM_LINGER", 0.0)       # (htc) keep an idle claim this long
    call_lanes: bool = knob("SCHEDD_CALL_LANES", True)           # (htc) function calls run on call lanes
    # scheduler/local universe (htc.daemons.schedd.local_jobs): when such a job may start, and
    # how long its process has between its kill signal and SIGKILL
    start_scheduler_universe: str = knob("START_SCHEDULER_UNIVERSE", "TotalSchedulerJobsRunning < 500", convert=str)
    start_local_universe: str = knob("START_LOCAL_UNIVERSE", "TotalLocalJobsRunning < 200", convert=str)
    local_kill_timeout: float = knob("SCHEDD_LOCAL_JOB_KILL_TIMEOUT", 30.0)
    scheduler_cool_down: int = knob("SCHEDULER_UNIVERSE_COOL_DOWN_DURATION", 300)  # after a non-zero exit
    max_scheduler_jobs_per_owner: int = knob("MAX_RUNNING_SCHEDULER_JOBS_PER_OWNER", 200)
    system_policy: SystemPolicy = SystemPolicy()  # SYSTEM_PERIODIC_HOLD / _RELEASE / _REMOVE

    def __post_init__(self) -> None:
        for name, value in (("SCHEDD_INTERVAL", self.interval), ("ALIVE_INTERVAL", self.alive_interval),
                            ("JOB_DEFAULT_LEASE_DURATION", self.default_lease),
                            ("PERIODIC_EXPR_INTERVAL", self.periodic_interval)):
            if not value > 0:
                raise UsageError(f"{name} must be a positive number of seconds, got {value!r}")
        if self.min_interval < 0:
            raise UsageError(f"SCHEDD_MIN_INTERVAL must be zero or more seconds, got {self.min_interval!r}")
        if self.claim_linger < 0:
            raise UsageError(f"SCHEDD_CLAIM_LINGER must be zero or more seconds, got {self.claim_linger!r}")
        if self.local_kill_timeout < 0:
            raise UsageError("SCHEDD_LOCAL_JOB_KILL_TIMEOUT must be zero or more seconds, "
                             f"got {self.local_kill_timeout!r}")
        if self.flock_increment < 1:
            raise UsageError(f"FLOCK_INCREMENT must be at least 1, got {self.flock_increment!r}")
        if self.prompt_delay < 0:
            raise UsageError(f"prompt_delay must be zero or more seconds, got {self.prompt_delay!r}")

    def alive_every(self, lease: float) -> float:
        """Seconds between keep-alives of a claim with ``lease``: ALIVE_INTERVAL, at most lease/3.

        HTCondor lowers the interval so that a startd sees at least three keep-alives per lease;
        its 10-second floor is kept unless the lease itself is shorter than 30 seconds.
        """
        return max(min(self.alive_interval, lease / 3.0), min(10.0, lease / 3.0), 0.5)

"""What a starter is told and what it reports: its settings, the job's usage and exit, the
job's kill signal, and who runs the job (the slot user when the startd is root).

The records the startd's core and service pass around; :mod:`htc.daemons.starter` runs jobs
with them (and re-exports them).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from htc.errors import HTCError, UsageError

__all__ = ["ExitRecord", "StarterError", "StarterSettings", "Usage", "kill_signal", "resolve_user"]


class StarterError(HTCError):
    """The starter could not run the job (user, executable, sandbox); the job did not start."""


@dataclass(frozen=True)
class StarterSettings:
    """How to run jobs on this slot; the startd's service fills it from config and the slot ad.

    ``memory_mb`` is the hard memory limit (the slot's Memory; None: the job's RequestMemory).
    ``slot_user`` runs the job when the starter is root (HTCondor's ``SLOT<N>_USER``; default
    ``nobody``); ``create_slot_user`` adds it with ``useradd --system`` when missing.
    ``use_zygote`` lets a starter given a :class:`ZygotePool` have a pre-imported Python fork
    jobs that are ``python -m MODULE`` with MODULE in ``zygote_modules`` (see
    :mod:`htc.daemons.starter_zygote`). ``use_exec_zygote`` has the pool's exec zygote (a small
    root process of the startd's interpreter) fork and exec every other job, instead of the
    startd forking it.
    """

    slot_name: str = "slot1"
    cpus: int = 1
    memory_mb: int | None = None
    slot_user: str = "nobody"
    create_slot_user: bool = False
    use_cgroups: bool = True
    machine_ad: Mapping[str, Any] = field(default_factory=dict)
    kill_timeout: float = 10.0
    use_zygote: bool = True
    zygote_modules: tuple[str, ...] = ("htc.executors.worker", "htc.executors.lane")
    use_exec_zygote: bool = True


@dataclass(frozen=True)
class Usage:
    """What the job consumed (HTCondor's attribute units)."""

    remote_user_cpu: float = 0.0
    remote_sys_cpu: float = 0.0
    image_size: int = 0  # KiB, peak virtual size
    resident_set_size: int = 0  # KiB, peak
    disk_usage: int = 0  # KiB

    def to_ad(self) -> dict[str, Any]:
        """As job-ad attributes."""
        return {"RemoteUserCpu": round(self.remote_user_cpu, 3), "RemoteSysCpu": round(self.remote_sys_cpu, 3),
                "ImageSize": self.image_size, "ResidentSetSize": self.resident_set_size,
                "MemoryUsage": (self.resident_set_size + 1023) // 1024, "DiskUsage": self.disk_usage}


@dataclass(frozen=True)
class ExitRecord:
    """How the job ended and what came back."""

    exit_code: int | None
    exit_signal: int | None
    core_dumped: bool
    oom_killed: bool
    vacated: bool
    usage: Usage
    output_files: tuple[Path, ...] = ()
    transfer_error: str | None = None

    @property
    def exit_by_signal(self) -> bool:
        """True when a signal ended the job."""
        return self.exit_signal is not None

    def to_ad(self) -> dict[str, Any]:
        """As job-ad attributes (ExitBySignal, ExitCode or ExitSignal, JobCoreDumped, usage)."""
        ad: dict[str, Any] = {"ExitBySignal": self.exit_by_signal, "JobCoreDumped": self.core_dumped}
        if self.exit_by_signal:
            ad["ExitSignal"] = self.exit_signal
        else:
            ad["ExitCode"] = self.exit_code
        return {**ad, **self.usage.to_ad()}


def kill_signal(job_ad: Mapping[str, Any]) -> int:
    """The job's soft-kill signal (``KillSig``: ``"SIGTERM"``, ``"TERM"`` or a number; default SIGTERM).

    Raises:
        UsageError: an unknown signal name.
    """
    value = job_ad.get("KillSig")
    if value is None:
        return signal.SIGTERM
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    name = str(value).strip().upper()
    if name.isdigit():
        return int(name)
    try:
        return signal.Signals[name if name.startswith("SIG") else "SIG" + name]
    except KeyError:
        raise UsageError(f"KillSig = {value!r} is not a signal name; use e.g. SIGTERM or SIGINT") from None


def resolve_user(settings: StarterSettings) -> pwd.struct_passwd | None:
    """Who runs the job: the slot user when we are root, None (ourselves) otherwise.

    Raises:
        StarterError: the slot user is missing (and may not be created) or is root.
    """
    if os.geteuid() != 0:
        return None
    name = settings.slot_user
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        if not settings.create_slot_user:
            raise StarterError(f"slot user {name!r} does not exist; create it (useradd --system {name}) or "
                               "let the starter create it (create_slot_user)") from None
        useradd = shutil.which("useradd")
        if useradd is None:
            raise StarterError(f"slot user {name!r} does not exist and this system has no useradd") from None
        subprocess.run([useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                       check=True, capture_output=True)
        entry = pwd.getpwnam(name)
    if entry.pw_uid == 0:
        raise StarterError(f"slot user {name!r} is root; jobs never run as root -- pick an unprivileged user")
    return entry

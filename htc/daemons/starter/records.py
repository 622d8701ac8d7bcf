"""What a starter is told and what it reports: its settings, the job's usage and exit, the
job's kill signal, and who runs the job (when the startd is root: its owner, or the slot's
account -- :mod:`htc.daemons.run_as`).

The records the startd's core and service pass around; :mod:`htc.daemons.starter.service` runs jobs
with them (and re-exports them).
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from htc.daemons.run_as import JobUser, RunAsError, RunAsPolicy, choose_user, default_slot_account, slot_number
from htc.errors import HTCError, UsageError

__all__ = ["ExitRecord", "StarterError", "StarterSettings", "Usage", "kill_signal", "resolve_user",
           "slot_account"]


class StarterError(HTCError):
    """The starter could not run the job (user, executable, sandbox); the job did not start.
    ``errno`` is the error number when the exec failed (the hold's HoldReasonSubCode, as in
    HTCondor, whose starter holds with code 6 and the errno), else 0."""

    def __init__(self, message: str, errno: int = 0):
        super().__init__(message)
        self.errno = errno


def cannot_start(path: str, errno: int, strerror: str) -> StarterError:
    """The error of an exec of ``path`` that failed with ``errno``: HTCondor's ``Failed to execute
    'PATH': (errno=N: 'TEXT')``, then what it means for this executable. An executable without
    execute permission gets there only when it is not transferred (``transfer_executable =
    false``): condor_submit accepts it, and a transferred one is made executable in the sandbox."""
    import errno as E
    import os
    import stat

    base = f"Failed to execute '{path}': (errno={errno}: '{strerror}')"
    transferred = os.path.basename(path) == "condor_exec.exe"
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if errno == E.EACCES and st is not None and stat.S_ISREG(st.st_mode) and not st.st_mode & 0o111:
        why = (f"{path} is not executable (its mode is {stat.S_IMODE(st.st_mode):04o}); condor_submit accepts "
               "such an executable and a transferred one is made executable in the sandbox, but this one is "
               "run where it is (transfer_executable = false): make it executable (chmod +x) or let it be "
               "transferred")
    elif errno == E.EACCES:
        why = (f"the job's user may not execute {path}: a directory above it is closed to that user, or its "
               "filesystem is mounted noexec")
    elif errno == E.ENOEXEC:
        why = (f"{path} is not a program this machine can run: a script needs a '#!' first line, a binary "
               "must be built for this machine")
    elif errno == E.ENOENT:
        why = (f"{path} does not exist on this machine" if transferred or st is not None else
               f"{path} does not exist on this machine (with transfer_executable = false it must be there)")
        if st is not None:  # the file is there: its '#!' interpreter is not
            why = f"the interpreter named on the '#!' line of {path} does not exist on this machine"
    else:
        why = "check the executable exists in the sandbox, is executable, and suits this machine"
    return StarterError(f"{base}: {why}", errno)


@dataclass(frozen=True)
class StarterSettings:
    """How to run jobs on this slot; the startd's service fills it from config and the slot ad.

    ``memory_mb`` is the hard memory limit (the slot's Memory; None: the job's RequestMemory).
    When the starter is root, the job runs as its owner when ``run_as`` lets it (see
    :mod:`htc.daemons.run_as`), else as ``slot_user``, the slot's account (HTCondor's
    ``SLOT<N>_USER``; None: ``htc-slot<N>`` of the slot's number, which the starter makes with
    ``useradd --system`` when missing). ``create_slot_user`` lets it make a named
    ``slot_user`` too (None: only its own ``htc-slot<N>``).
    ``use_zygote`` lets a starter given a :class:`ZygotePool` have a pre-imported Python fork
    jobs that are ``python -m MODULE`` with MODULE in ``zygote_modules`` (see
    :mod:`htc.daemons.starter.zygote`). ``use_exec_zygote`` has the pool's exec zygote (a small
    root process of the startd's interpreter) fork and exec every other job, instead of the
    startd forking it.
    """

    slot_name: str = "slot1"
    cpus: int = 1
    memory_mb: int | None = None
    slot_user: str | None = None
    create_slot_user: bool | None = None
    run_as: RunAsPolicy = field(default_factory=RunAsPolicy)
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
    #: a standard-universe job's vacate: its image was kept by the shadow (None: no such vacate)
    vacate_checkpointed: bool | None = None
    #: why the vacate's image was not kept (the job resumes from its previous one)
    checkpoint_error: str | None = None

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


def slot_account(settings: StarterSettings) -> tuple[str, bool]:
    """The slot's account for ``settings`` and whether the starter may create it."""
    if settings.slot_user:
        return settings.slot_user, bool(settings.create_slot_user)
    name = default_slot_account(slot_number(settings.slot_name) or 1)
    return name, settings.create_slot_user is not False


def resolve_user(settings: StarterSettings, job_ad: Mapping[str, Any] | None = None) -> JobUser | None:
    """Who runs the job: None (ourselves) unless we are root; then the job's owner when
    ``settings.run_as`` trusts it, else the slot's account (:func:`htc.daemons.run_as.choose_user`).

    Raises:
        StarterError: the slot's account is missing (and may not be created) or is root.
    """
    name, create = slot_account(settings)
    try:
        return choose_user(job_ad or {}, settings.run_as, name, create=create)
    except RunAsError as exc:
        raise StarterError(str(exc)) from None

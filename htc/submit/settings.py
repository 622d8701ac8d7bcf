"""The configuration submit reads, as plain settings (htc.submit needs no config system).

Where condor_submit consults ``condor_config`` (``FILESYSTEM_DOMAIN``,
``JOB_DEFAULT_REQUESTMEMORY``, ...), htc.submit takes a :class:`SubmitSettings`; the
defaults are HTCondor's defaults for this machine.  A daemon that has a config system
builds one from its knobs and passes it to :class:`htc.submit.Submit`.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass, field

from htc.config.hostname import full_hostname
from htc.config.version import CONDOR_RELEASE, condor_version

__all__ = ["CONDOR_RELEASE", "SubmitSettings"]


def _arch() -> str:
    m = platform.machine().upper()
    return {"AMD64": "X86_64", "I686": "INTEL", "I386": "INTEL", "ARM64": "AARCH64"}.get(m, m)


def _opsys() -> str:
    s = platform.system().upper()
    return {"DARWIN": "MACOSX"}.get(s, s)


@functools.lru_cache(maxsize=1)
def _fqdn() -> str:
    return full_hostname()


@dataclass(frozen=True)
class SubmitSettings:
    """Config values submit uses; each field names the HTCondor knob it stands for."""

    arch: str = field(default_factory=_arch)  # ARCH
    opsys: str = field(default_factory=_opsys)  # OPSYS
    opsys_and_ver: str = ""  # OPSYSANDVER
    opsys_major_ver: str = ""  # OPSYSMAJORVER
    opsys_ver: str = ""  # OPSYSVER
    filesystem_domain: str = field(default_factory=_fqdn)  # FILESYSTEM_DOMAIN
    uid_domain: str = field(default_factory=_fqdn)  # UID_DOMAIN
    spool: str = ""  # SPOOL
    default_universe: str = "vanilla"  # DEFAULT_UNIVERSE
    default_request_cpus: str = "1"  # JOB_DEFAULT_REQUESTCPUS
    default_request_memory: str = "128"  # JOB_DEFAULT_REQUESTMEMORY (MiB)
    default_request_disk: str = "MAX({ 1024,(TransferInputSizeMB + 1) * 1.25 }) * 1024"  # JOB_DEFAULT_REQUESTDISK
    default_request_gpus: str | None = None  # JOB_DEFAULT_REQUESTGPUS
    default_lease_duration: str = "2400"  # JOB_DEFAULT_LEASE_DURATION
    default_notification: str = "NEVER"  # JOB_DEFAULT_NOTIFICATION
    default_max_retries: int = 2  # DEFAULT_JOB_MAX_RETRIES
    default_rank: str | None = None  # DEFAULT_RANK
    append_rank: str | None = None  # APPEND_RANK
    append_requirements: str | None = None  # APPEND_REQUIREMENTS
    default_should_transfer_files: str | None = None  # SUBMIT_DEFAULT_SHOULD_TRANSFER_FILES
    nice_user_group: str = "nice-user"  # NICE_USER_ACCOUNTING_GROUP_NAME
    schedd_interval: int = 300  # SCHEDD_INTERVAL
    allow_getenv: bool = True  # SUBMIT_ALLOW_GETENV
    submit_method: int = 2  # JobSubmitMethod: 0 condor_submit, 2 Python bindings
    condor_version: str = field(default_factory=condor_version)
    condor_platform: str = field(
        default_factory=lambda: f"$CondorPlatform: {_arch()}-{platform.system()} $")

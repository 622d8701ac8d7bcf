"""The configuration submit reads, as plain settings (htc.submit needs no config system).

Where condor_submit consults ``condor_config`` (``FILESYSTEM_DOMAIN``,
``JOB_DEFAULT_REQUESTMEMORY``, ...), htc.submit takes a :class:`SubmitSettings`; the
defaults are HTCondor's defaults for this machine.  Whoever has a configuration (``htc
submit``, the schedd expanding a description, the executor) builds one with
:func:`settings_from_config`, which reads every knob named in :data:`KNOBS` -- so
``JOB_DEFAULT_REQUESTMEMORY = 512`` in a config file changes the jobs ``htc submit`` makes, as
it changes condor_submit's.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass, field

from htc.config.hostname import full_hostname
from htc.config.version import CONDOR_RELEASE, condor_version

__all__ = ["CONDOR_RELEASE", "KNOBS", "SubmitSettings", "settings_from_config"]


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
    #: SUBMIT_ATTRS: (attribute, expression text) inserted into every job ad (a submit file's
    #: ``+Attr`` or ``My.Attr`` overrides it)
    submit_attrs: tuple[tuple[str, str], ...] = ()
    submit_method: int = 2  # JobSubmitMethod: 0 condor_submit, 2 Python bindings
    condor_version: str = field(default_factory=condor_version)
    condor_platform: str = field(
        default_factory=lambda: f"$CondorPlatform: {_arch()}-{platform.system()} $")


#: field -> knob, for every field a configuration sets (the rest are the machine's or the tool's)
KNOBS = {
    "arch": "ARCH", "opsys": "OPSYS", "opsys_and_ver": "OPSYSANDVER", "opsys_major_ver": "OPSYSMAJORVER",
    "filesystem_domain": "FILESYSTEM_DOMAIN", "uid_domain": "UID_DOMAIN", "spool": "SPOOL",
    "default_universe": "DEFAULT_UNIVERSE", "default_request_cpus": "JOB_DEFAULT_REQUESTCPUS",
    "default_request_memory": "JOB_DEFAULT_REQUESTMEMORY", "default_request_disk": "JOB_DEFAULT_REQUESTDISK",
    "default_request_gpus": "JOB_DEFAULT_REQUESTGPUS", "default_lease_duration": "JOB_DEFAULT_LEASE_DURATION",
    "default_notification": "JOB_DEFAULT_NOTIFICATION", "default_max_retries": "DEFAULT_JOB_MAX_RETRIES",
    "default_rank": "DEFAULT_RANK", "append_rank": "APPEND_RANK", "append_requirements": "APPEND_REQUIREMENTS",
    "default_should_transfer_files": "SUBMIT_DEFAULT_SHOULD_TRANSFER_FILES",
    "nice_user_group": "NICE_USER_ACCOUNTING_GROUP_NAME", "schedd_interval": "SCHEDD_INTERVAL",
    "allow_getenv": "SUBMIT_ALLOW_GETENV",
}


def settings_from_config(config, **given) -> SubmitSettings:
    """The :class:`SubmitSettings` a loaded configuration gives (``given`` fields win).

    A knob left unset (``""``, or None for a number) keeps the field's default, the machine's
    own value where there is one (ARCH, OPSYS, FULL_HOSTNAME). ``SUBMIT_ATTRS`` names config
    macros whose values go into every job ad as expressions.

    Raises:
        UsageError: a SUBMIT_ATTRS entry names no macro or is not an attribute name.
    """
    import re

    from htc.errors import UsageError

    values: dict = {}
    for name, knob in KNOBS.items():
        value = config.param(knob)
        if value is None or value == "":
            continue
        if name in ("opsys_major_ver", "default_lease_duration"):
            value = str(value)
        values[name] = value
    attrs = []
    for attr in config.param("SUBMIT_ATTRS") or ():
        attr = attr.lstrip("+")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", attr):
            raise UsageError(f"SUBMIT_ATTRS names {attr!r}, which is not a ClassAd attribute name")
        text = config.get(attr)
        if text is None or text == "":
            continue  # condor_submit skips a listed macro that is not defined
        attrs.append((attr, text))
    if attrs:
        values["submit_attrs"] = tuple(attrs)
    values.update(given)
    return SubmitSettings(**values)

"""Values HTCondor computes about the machine before reading any file ("<Detected>" macros).

These become macros of origin ``detected``: ``$(FULL_HOSTNAME)``, ``$(ARCH)``,
``$(DETECTED_CPUS)``... A configuration file may still redefine most of them; the few that
HTCondor re-inserts after reading the files (host names after the root file, the process
facts at the very end) are listed in :data:`REINSERTED_AFTER_ROOT` and :data:`SPECIALS`.

Everything here is read from the running system (``socket``, ``os``, ``/etc/os-release``,
``psutil``); nothing is hard-coded except the HTCondor version htc reproduces.
"""

from __future__ import annotations

import functools
import getpass
import os
import platform
import pwd
from collections.abc import Mapping

import psutil

from htc.config.conditions import VERSION
from htc.config.hostname import host_names, local_ip

__all__ = ["detect", "htc_home_path", "REINSERTED_AFTER_ROOT", "SPECIALS", "CONDOR_VERSION"]

CONDOR_VERSION = ".".join(str(p) for p in VERSION)

#: macros HTCondor inserts again right after the root config file (so the file cannot set them)
REINSERTED_AFTER_ROOT = ("HOSTNAME", "FULL_HOSTNAME", "TILDE")
#: macros HTCondor re-inserts after the environment overrides ("reinsert_specials")
SPECIALS = ("TILDE", "USERNAME", "PID", "PPID", "IP_ADDRESS", "IPV4_ADDRESS", "CONDOR_VERSION",
            "SUBSYSTEM", "LOCALNAME")

_ARCH = {"x86_64": "X86_64", "amd64": "X86_64", "i386": "INTEL", "i686": "INTEL",
         "aarch64": "aarch64", "arm64": "aarch64", "ppc64le": "ppc64le"}


def htc_home_path(env: Mapping[str, str]) -> str:
    """``$HTC_HOME`` if set, else ``~/.htc`` (absolute, user expanded)."""
    home = env.get("HTC_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".htc")
    return os.path.abspath(os.path.expanduser(home))


def _hostnames() -> tuple[str, str]:
    return host_names()  # the one host name of every daemon (htc.config.hostname)


def _ip_address() -> str:
    return local_ip()


@functools.lru_cache(maxsize=1)
def _os_release() -> dict[str, str]:
    info: dict[str, str] = {}
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    key, sep, value = line.strip().partition("=")
                    if sep:
                        info[key] = value.strip().strip('"')
            break
        except OSError:
            continue
    return info


def _opsys() -> dict[str, str]:
    system = platform.system()
    if system == "Linux":
        rel = _os_release()
        name = (rel.get("NAME") or "Linux").split()[0]
        version = rel.get("VERSION_ID", "0")
        major_text, _, minor_text = version.partition(".")
        major = int(major_text) if major_text.isdigit() else 0
        minor = int(minor_text.split(".")[0]) if minor_text.split(".")[0].isdigit() else 0
        long_name = rel.get("PRETTY_NAME", name).split(" (")[0]
        return {"OPSYS": "LINUX", "OPSYSNAME": name, "OPSYSSHORTNAME": name,
                "OPSYSLONGNAME": long_name, "OPSYSMAJORVER": str(major),
                "OPSYSVER": str(major * 100 + minor), "OPSYSANDVER": f"{name}{major}",
                "OPSYSLEGACY": "LINUX", "UNAME_OPSYS": "Linux"}
    if system == "Darwin":
        major = int((platform.mac_ver()[0] or "0").split(".")[0])
        return {"OPSYS": "macOS", "OPSYSNAME": "macOS", "OPSYSSHORTNAME": "macOS",
                "OPSYSLONGNAME": f"macOS {major}", "OPSYSMAJORVER": str(major),
                "OPSYSVER": str(major * 100), "OPSYSANDVER": f"macOS{major}",
                "OPSYSLEGACY": "OSX", "UNAME_OPSYS": "Darwin"}
    return {"OPSYS": system.upper(), "OPSYSNAME": system, "OPSYSSHORTNAME": system,
            "OPSYSLONGNAME": system, "OPSYSLEGACY": system.upper(), "UNAME_OPSYS": system}


def _tilde() -> str | None:
    try:
        return pwd.getpwnam("condor").pw_dir
    except KeyError:
        return None


def detect(subsystem: str, localname: str | None, env: Mapping[str, str]) -> dict[str, str]:
    """The detected macros for a process of ``subsystem``.

    Args:
        subsystem: ``TOOL``, ``SCHEDD``, ... (upper case).
        localname: the daemon's ``-local-name``, if any.
        env: the environment (for ``OMP_THREAD_LIMIT``/``SLURM_CPUS_ON_NODE`` and ``HTC_HOME``).

    Returns:
        Macro name -> value, in HTCondor's insertion order.
    """
    short, full = _hostnames()
    machine = platform.machine()
    logical = psutil.cpu_count(logical=True) or 1
    physical = psutil.cpu_count(logical=False) or logical
    values: dict[str, str] = {}
    tilde = _tilde()
    if tilde:
        values["TILDE"] = tilde
    values["ARCH"] = _ARCH.get(machine.lower(), machine)
    values["UNAME_ARCH"] = machine
    values.update(_opsys())
    # HTCondor sets this when it can switch user ids (a root daemon); htc never switches ids
    values["CondorIsAdmin"] = "false"
    values["SUBSYSTEM"] = subsystem
    values["LOCALNAME"] = localname or subsystem
    values["DETECTED_MEMORY"] = str(psutil.virtual_memory().total // (1024 * 1024))
    values["DETECTED_PHYSICAL_CPUS"] = str(physical)
    values["DETECTED_CPUS"] = str(logical)
    values["DETECTED_CORES"] = str(logical)
    limit = logical
    for var in ("OMP_THREAD_LIMIT", "SLURM_CPUS_ON_NODE"):
        text = env.get(var, "")
        if text.strip().isdigit() and 0 < int(text) < limit:
            limit = int(text)
    if limit < logical:
        values["DETECTED_CPUS_LIMIT"] = str(limit)
    values["HOSTNAME"] = short
    values["FULL_HOSTNAME"] = full
    try:
        values["USERNAME"] = getpass.getuser()
    except (KeyError, OSError):
        values["USERNAME"] = str(os.geteuid())
    values["PID"] = str(os.getpid())
    values["PPID"] = str(os.getppid())
    values["IP_ADDRESS"] = values["IPV4_ADDRESS"] = _ip_address()
    values["CONDOR_VERSION"] = CONDOR_VERSION
    values["HTC_HOME"] = htc_home_path(env)
    return values

"""Machine sensors for the startd: what the machine is and what its owner is doing.

Theory of operation
-------------------
:meth:`Sensors.sample` returns a dict of machine-ad attributes, measured now:

* What the machine is (measured once, cached): ``Arch`` (``X86_64``, ``aarch64`` -- HTCondor's
  spelling), ``OpSys`` (``LINUX``), ``OpSysAndVer`` (``Debian12``), ``OpSysMajorVer``,
  ``TotalCpus``/``Cpus``, ``TotalMemory``/``Memory`` (MiB), ``Machine``, ``FileSystemDomain``,
  ``UidDomain``, ``HasFileTransfer``, ``HasSelfCheckpointTransfers`` (the starter sends a
  ``checkpoint_exit_code`` job's checkpoints: submit requires it), ``CondorVersion``, ``StartdIpAddr``/``MyAddress`` (the
  daemon's name: htc routes by name, not by sinful string), and ``Mips``/``KFlops`` from a short
  benchmark run once per process (``LastBenchmark`` says when).
* What it is doing (every sample): ``Disk`` (KiB free in the execute directory), ``LoadAvg`` and
  ``TotalLoadAvg`` (the kernel's 1-minute load), ``CondorLoadAvg`` (load caused by htc's jobs:
  the CPU seconds they used between samples, per second of wall time, smoothed with the same
  60-second time constant as the kernel's 1-minute load average), ``KeyboardIdle`` and
  ``ConsoleIdle``.

Idle times follow HTCondor's startd: the last *access* time of input devices. ``ConsoleIdle``
looks at the console devices (``/dev/input/*``, ``/dev/mouse``, ``/dev/console``);
``KeyboardIdle`` also at every terminal a person can type on (``/dev/tty[0-9]*`` virtual
consoles and ``/dev/pts/[0-9]*`` pseudo terminals: ssh sessions, xterms). Reading a key updates
the device's atime. With no such device at all, the machine has had no interactive input since
boot, so both are the time since boot.

Owner activity injection. A *sensor override file* -- ``$HTC_HOME/sensor_override`` unless the
settings name another -- holds ``Name = value`` lines (``KeyboardIdle = 0``, ``LoadAvg = 2.0``,
``# comments``). When present it is re-read on every sample and its values replace the measured
ones; attribute names are matched case-insensitively. Tests and demos use it to play the machine's
owner; :func:`write_sensor_override` writes it atomically.
"""

from __future__ import annotations

import glob
import math
import os
import platform
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from htc.config.hostname import full_hostname
from htc.config.version import CONDOR_RELEASE
from htc.config.version import condor_version as _condor_version
from htc.daemons.clock import REAL, Clock
from htc.errors import UsageError

#: HTCondor version htc's daemons are compatible with (htc.config.version)
COMPATIBLE_CONDOR_VERSION = CONDOR_RELEASE

_ARCH = {"x86_64": "X86_64", "amd64": "X86_64", "aarch64": "aarch64", "arm64": "aarch64", "i386": "INTEL",
         "i686": "INTEL", "ppc64le": "ppc64le", "ppc64": "PPC64", "s390x": "s390x"}
# /etc/os-release ID -> HTCondor's OpSysName
_DISTRO = {"debian": "Debian", "ubuntu": "Ubuntu", "almalinux": "AlmaLinux", "rocky": "Rocky", "centos": "CentOS",
           "rhel": "RedHat", "fedora": "Fedora", "opensuse-leap": "openSUSE", "sles": "SLES", "amzn": "AmazonLinux",
           "arch": "Arch"}
_CONSOLE_GLOBS = ("input/*", "mouse", "console")
_TERMINAL_GLOBS = ("tty[0-9]*", "pts/[0-9]*")
LOAD_TIME_CONSTANT = 60.0  # seconds; the kernel's 1-minute load average uses the same


def default_override_path() -> Path:
    """``$HTC_HOME/sensor_override`` (``HTC_HOME`` defaults to ``~/.htc``)."""
    return Path(os.environ.get("HTC_HOME") or Path.home() / ".htc") / "sensor_override"


@dataclass(frozen=True)
class SensorSettings:
    """Where to measure and what to call things; the startd's service fills this from config."""

    execute_dir: Path
    daemon_name: str = ""
    machine: str = ""  # this host's name (htc.config.hostname.full_hostname): Machine
    override_file: Path | None = None
    filesystem_domain: str | None = None
    uid_domain: str | None = None
    benchmark_seconds: float = 0.05
    dev_dir: Path = Path("/dev")


def arch() -> str:
    """The machine's architecture as HTCondor spells it (``X86_64``, ``aarch64``, ...)."""
    machine = platform.machine()
    return _ARCH.get(machine.lower(), machine)


def opsys_attrs(os_release: Path = Path("/etc/os-release")) -> dict[str, Any]:
    """``OpSys`` and the distribution attributes (``OpSysAndVer = "Debian12"`` and friends)."""
    fields: dict[str, str] = {}
    try:
        text = os_release.read_text()
    except OSError:
        text = ""  # no os-release: a plain "Linux" with version 0
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip('"')
    distro_id = fields.get("ID", "linux")
    name = _DISTRO.get(distro_id, distro_id.capitalize())
    numbers = [int(n) for n in re.findall(r"\d+", fields.get("VERSION_ID", "0"))[:2]] or [0]
    major = numbers[0]
    minor = numbers[1] if len(numbers) > 1 else 0
    return {
        "OpSys": "LINUX", "OpSysLegacy": "LINUX", "OpSysName": name, "OpSysShortName": name,
        "OpSysMajorVer": major, "OpSysVer": major * 100 + minor, "OpSysAndVer": f"{name}{major}",
        "OpSysLongName": fields.get("PRETTY_NAME", f"{name} {major}"),
    }


def condor_version(clock: Clock = REAL) -> str:
    """The ``CondorVersion`` string (:func:`htc.config.version.condor_version`: the same in job ads,
    daemon ads and ``htc version``; ``clock`` is not consulted, the date is htc's release date)."""
    return _condor_version()


_BENCHMARK: dict[str, float] = {}


def run_benchmarks(seconds: float = 0.05, clock: Clock = REAL) -> dict[str, float]:
    """Measure ``Mips`` and ``KFlops`` with two short loops, once per process.

    The loops are Python, so the numbers are a Python interpreter's speed on this machine:
    comparable between htc machines, not with HTCondor's C Dhrystone/Linpack figures.

    Args:
        seconds: time budget of each loop, on the real clock whatever ``clock`` is (a speed is
            measured in real time).
        clock: what ``LastBenchmark`` says.

    Returns:
        ``{"Mips": int, "KFlops": int, "LastBenchmark": epoch seconds}``; cached after the first call.
    """
    if _BENCHMARK:
        return dict(_BENCHMARK)

    def timed(body, ops_per_round: int) -> float:
        rounds, start = 0, REAL.monotonic()
        deadline = start + seconds
        while True:
            body()
            rounds += 1
            now = REAL.monotonic()
            if now >= deadline:
                return rounds * ops_per_round / (now - start)

    def integer_round():
        a, b = 1, 7
        for i in range(1000):
            a = (a * 3 + b + i) & 0xFFFF  # 4 integer operations
        return a

    def float_round():
        x, y = 1.0001, 0.9999
        for _ in range(1000):
            x = x * y + 0.5  # 2 floating-point operations
            x = x * 0.5
        return x

    _BENCHMARK["Mips"] = max(1, int(timed(integer_round, 4000) / 1e6))
    _BENCHMARK["KFlops"] = max(1, int(timed(float_round, 3000) / 1e3))
    _BENCHMARK["LastBenchmark"] = int(clock.time())
    return dict(_BENCHMARK)


def last_input_time(dev_dir: Path, patterns: tuple[str, ...]) -> float | None:
    """Latest access time of the devices matching ``patterns`` under ``dev_dir``, or None."""
    latest = None
    for pattern in patterns:
        for path in glob.glob(str(dev_dir / pattern)):
            try:
                atime = os.stat(path).st_atime
            except OSError:
                continue  # a pty can vanish between glob and stat
            latest = atime if latest is None else max(latest, atime)
    return latest


def parse_override(path: Path) -> dict[str, Any]:
    """Read a sensor override file (``Name = value`` lines, ``#`` comments).

    Values are ClassAd literals: ``true``/``false``, integers, reals, ``"strings"``; anything
    else is kept as a plain string.

    Returns:
        ``{}`` when the file does not exist, else the attributes it sets.

    Raises:
        UsageError: a line is not ``Name = value`` (the message names the file and line).
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    values: dict[str, Any] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
            raise UsageError(f"{path}:{lineno}: expected 'Name = value' (for example 'KeyboardIdle = 0'), got {raw!r}")
        values[name] = _literal(value)
    return values


def _literal(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            continue
    return text


def write_sensor_override(values: Mapping[str, Any], path: Path | None = None) -> Path:
    """Write ``values`` as a sensor override file, atomically (readers never see half a file).

    Args:
        values: attribute -> value (bools, numbers, strings).
        path: where; default :func:`default_override_path`.

    Returns:
        The path written.
    """
    path = path or default_override_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# htc sensor override: these values replace the startd's measurements"]
    for name, value in values.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str):
            text = '"' + value.replace('"', '\\"') + '"'
        else:
            text = repr(value)
        lines.append(f"{name} = {text}")
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path


class Sensors:
    """Measures the machine; one instance per startd.

    Args:
        settings: where to measure (execute dir, override file) and the names to publish.
        clock: the time of a sample taken without one (and of the benchmark and version date).
    """

    def __init__(self, settings: SensorSettings, clock: Clock = REAL):
        self.settings = settings
        self.clock = clock
        self._static: dict[str, Any] | None = None
        self._condor_load = 0.0
        self._last_sample: float | None = None
        self._last_cpu: dict[str, float] = {}

    @property
    def override_file(self) -> Path:
        """The override file this instance reads."""
        return self.settings.override_file or default_override_path()

    def static_attrs(self) -> dict[str, Any]:
        """The attributes that do not change while the startd runs (measured once)."""
        if self._static is None:
            fqdn = self.settings.machine or full_hostname()
            cpus = os.cpu_count() or 1
            memory = psutil.virtual_memory().total // (1024 * 1024)
            st = self.settings
            self._static = {
                "Arch": arch(), **opsys_attrs(), "Machine": fqdn,
                "TotalCpus": cpus, "DetectedCpus": cpus, "Cpus": cpus,
                "TotalMemory": memory, "DetectedMemory": memory, "Memory": memory,
                "FileSystemDomain": st.filesystem_domain or fqdn, "UidDomain": st.uid_domain or fqdn,
                "HasFileTransfer": True, "HasSelfCheckpointTransfers": True,  # checkpoint_exit_code jobs
                "CondorVersion": condor_version(self.clock),
                "CondorPlatform": f"$CondorPlatform: {arch()}-{opsys_attrs()['OpSysAndVer']} $",
                "StartdIpAddr": st.daemon_name or f"startd@{fqdn}", "MyAddress": st.daemon_name or f"startd@{fqdn}",
                **run_benchmarks(st.benchmark_seconds, self.clock),
            }
        return dict(self._static)

    def idle_times(self, now: float) -> tuple[int, int]:
        """(KeyboardIdle, ConsoleIdle) in whole seconds at ``now``."""
        dev = self.settings.dev_dir
        console = last_input_time(dev, _CONSOLE_GLOBS)
        terminals = last_input_time(dev, _TERMINAL_GLOBS)
        boot = psutil.boot_time()
        seen = [t for t in (console, terminals) if t is not None]
        console_last = console if console is not None else boot
        keyboard_last = max(seen) if seen else boot
        return int(max(0.0, now - keyboard_last)), int(max(0.0, now - console_last))

    def _disk_free_kib(self) -> int:
        path = Path(self.settings.execute_dir)
        while not path.exists() and path != path.parent:
            path = path.parent  # the execute dir may not exist before the first job
        return shutil.disk_usage(path).free // 1024

    def _condor_load_avg(self, now: float, job_cpu: Mapping[str, float]) -> float:
        if self._last_sample is not None and now > self._last_sample:
            dt = now - self._last_sample
            # A job first seen now may have run before the previous sample: counting all its
            # CPU time would fake a burst, so its first reading only sets the baseline.
            used = sum(max(0.0, cpu - self._last_cpu[key]) for key, cpu in job_cpu.items() if key in self._last_cpu)
            rate = min(used / dt, float(os.cpu_count() or 1))
            decay = math.exp(-dt / LOAD_TIME_CONSTANT)
            self._condor_load = self._condor_load * decay + rate * (1.0 - decay)
        self._last_sample = now
        self._last_cpu = dict(job_cpu)
        return round(self._condor_load, 3)

    def sample(self, now: float | None = None, job_cpu_seconds: Mapping[str, float] | None = None) -> dict[str, Any]:
        """Measure the machine.

        Args:
            now: the time of the sample (default: the sensors' clock).
            job_cpu_seconds: per running job (any key), the CPU seconds it has used so far
                (user + system); feeds ``CondorLoadAvg``.

        Returns:
            The attribute dict (see the module docstring), with the override file applied.

        Raises:
            UsageError: the override file is malformed.
        """
        now = self.clock.time() if now is None else now
        attrs = self.static_attrs()
        load = os.getloadavg()[0]
        condor_load = self._condor_load_avg(now, job_cpu_seconds or {})
        keyboard, console = self.idle_times(now)
        attrs.update({
            "Disk": self._disk_free_kib(), "LoadAvg": round(load, 3), "TotalLoadAvg": round(load, 3),
            "CondorLoadAvg": condor_load, "TotalCondorLoadAvg": condor_load,
            "KeyboardIdle": keyboard, "ConsoleIdle": console, "MyCurrentTime": int(now),
        })
        overrides = parse_override(self.override_file)
        if overrides:
            by_lower = {k.lower(): k for k in attrs}
            for name, value in overrides.items():
                attrs[by_lower.get(name.lower(), name)] = value
        return attrs

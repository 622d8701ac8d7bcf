"""Resource limits and accounting for one job: a cgroup when the kernel offers one, else rlimits.

Theory of operation
-------------------
:func:`detect_cgroups` looks at how this machine mounts cgroups (once per process):

* **v2** (``/sys/fs/cgroup`` is ``cgroup2``): the job gets ``<our cgroup>/htc_<name>``. Memory
  and cpu limits need those controllers enabled in our cgroup's ``cgroup.subtree_control``;
  the kernel refuses that while our own cgroup holds processes (the "no internal processes"
  rule), in which case the job's cgroup still tracks, freezes, kills and times the job
  (``cgroup.procs``, ``cgroup.kill``, ``cpu.stat``) and memory falls back to an rlimit.
* **v1** (a ``cgroup`` mount per controller, possibly next to an empty v2 ``unified`` mount, as
  on this project's build machines): a child of our cgroup in each of the ``memory``,
  ``cpuacct``, ``cpu`` and ``freezer`` hierarchies that is mounted. Memory is a hard limit
  (``memory.limit_in_bytes``, and ``memory.memsw.limit_in_bytes`` at the same value so the job
  cannot escape into swap); cpu is a weight (``cpu.shares``, 100 per cpu, like HTCondor).
* **none** (not root, no cgroupfs, or creation fails): :class:`JobCgroup.create` returns None and
  the starter uses ``RLIMIT_DATA`` for memory and its own process tracking.

The child process joins the cgroup itself, between fork and exec (:meth:`JobCgroup.enter`), so
no process of the job ever runs outside it -- not even for the microseconds a parent-side
"move the pid" would leave open. A process forked by a starter zygote is moved by the starter
instead (:meth:`JobCgroup.add`) while it waits on a gate, before it runs anything of the job.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import signal
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import psutil

from htc.daemons.clock import REAL, Clock

_V1_CONTROLLERS = ("memory", "cpuacct", "cpu", "freezer")


@dataclass(frozen=True)
class CgroupLayout:
    """Where this process's cgroups are: ``version`` 2 with ``base``, 1 with ``v1`` dirs, or 0."""

    version: int
    base: Path | None = None
    v1: tuple[tuple[str, Path], ...] = ()

    def describe(self) -> str:
        """One line for logs and error messages."""
        if self.version == 2:
            return f"cgroup v2 at {self.base}"
        if self.version == 1:
            return "cgroup v1 (" + ", ".join(f"{c} at {p}" for c, p in self.v1) + ")"
        return "no usable cgroups"


def _own_paths() -> dict[str, str]:
    paths = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


@cache
def detect_cgroups() -> CgroupLayout:
    """How this machine offers cgroups to us (see the module docstring). Cached."""
    if os.geteuid() != 0:
        return CgroupLayout(0)  # cgroup directories are root's unless delegated; rlimits then
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        own = _own_paths()
    except OSError:
        return CgroupLayout(0)
    v1: dict[str, Path] = {}
    for line in mounts:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        root, mountpoint, fstype, options = fields[3], Path(fields[4]), rfields[0], rfields[2].split(",")
        if fstype == "cgroup2" and mountpoint == Path("/sys/fs/cgroup"):
            rel = os.path.relpath(own.get("", "/"), root)
            return CgroupLayout(2, base=(mountpoint / rel).resolve())
        if fstype == "cgroup":
            for controller in _V1_CONTROLLERS:
                if controller in options and controller in own:
                    v1[controller] = (mountpoint / os.path.relpath(own[controller], root)).resolve()
    if "memory" in v1:
        return CgroupLayout(1, v1=tuple(sorted(v1.items())))
    return CgroupLayout(0)


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read(path: Path) -> str:
    return path.read_text()


def pid_namespace() -> int:
    """The inode of this process's PID namespace (0 where /proc does not say): job cgroups carry
    it in their names, so a sweep judges only cgroups whose pids are its own."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


class JobCgroup:
    """The cgroup(s) of one job. Build with :meth:`create`."""

    def __init__(self, layout: CgroupLayout, dirs: dict[str, Path], memory_limited: bool):
        self.layout = layout
        self.dirs = dirs  # controller ("" for v2) -> directory
        self.memory_limited = memory_limited

    @classmethod
    def create(cls, name: str, memory_bytes: int | None, cpus: float | None,
               layout: CgroupLayout | None = None) -> JobCgroup | None:
        """Make the job's cgroup with its limits, or return None when cgroups are not usable.

        Args:
            name: unique per job (used in the directory name).
            memory_bytes: hard memory limit, or None.
            cpus: cpu weight in cpus, or None.
            layout: for tests; default :func:`detect_cgroups`.
        """
        layout = layout or detect_cgroups()
        dirs: dict[str, Path] = {}
        name = f"{name}_ns{pid_namespace()}"  # whose pids the name's pid is (sweep_stale_cgroups)
        try:
            if layout.version == 2:
                assert layout.base is not None
                path = layout.base / f"htc_{name}"
                path.mkdir()
                dirs[""] = path
                limited = False
                if memory_bytes is not None and cls._enable_v2(layout.base):
                    _write(path / "memory.max", str(memory_bytes))
                    with contextlib.suppress(OSError):
                        _write(path / "memory.swap.max", "0")
                    limited = True
                if cpus and (path / "cpu.weight").exists():
                    _write(path / "cpu.weight", str(max(1, min(10000, int(100 * cpus)))))
                return cls(layout, dirs, limited)
            if layout.version == 1:
                for controller, parent in layout.v1:
                    path = parent / f"htc_{name}"
                    path.mkdir()
                    dirs[controller] = path
                mem = dirs["memory"]
                if memory_bytes is not None:
                    _write(mem / "memory.limit_in_bytes", str(memory_bytes))
                    if (mem / "memory.memsw.limit_in_bytes").exists():
                        _write(mem / "memory.memsw.limit_in_bytes", str(memory_bytes))
                if cpus and "cpu" in dirs:
                    _write(dirs["cpu"] / "cpu.shares", str(max(2, int(100 * cpus))))
                return cls(layout, dirs, memory_bytes is not None)
        except OSError:
            for path in dirs.values():
                with contextlib.suppress(OSError):
                    path.rmdir()
            return None  # a read-only or non-delegated cgroupfs: the starter uses rlimits
        return None

    @staticmethod
    def _enable_v2(base: Path) -> bool:
        try:
            _write(base / "cgroup.subtree_control", "+memory +cpu")
            return True
        except OSError:
            return False  # our cgroup holds processes, or the controllers are not delegated

    def enter(self) -> None:
        """Move the calling process into the job's cgroup(s). Called in the child before exec."""
        pid = str(os.getpid())
        for path in self.dirs.values():
            _write(path / "cgroup.procs", pid)

    def add(self, pid: int) -> None:
        """Move process ``pid`` into the job's cgroup(s) (a starter zygote's child, see
        :mod:`htc.daemons.starter.zygote`: it waits on a gate until this is done, so it too never
        runs job code outside the cgroup). Needs the privilege to write ``cgroup.procs``.

        Raises:
            OSError: the kernel refused (no such process, no permission).
        """
        for path in self.dirs.values():
            _write(path / "cgroup.procs", str(pid))

    def self_join_files(self) -> list[Path] | None:
        """The ``tasks`` file of each cgroup v1 hierarchy of the job, to which a single-threaded
        process writes ``0`` to join the job's cgroups itself (the kernel moves a thread that
        moves itself without the global lock a move by pid takes, whose RCU grace period costs
        milliseconds per job); None under cgroup v2, where :meth:`add` is the way."""
        if not self.dirs or "" in self.dirs:
            return None
        return [path / "tasks" for path in self.dirs.values()]

    def pids(self) -> set[int]:
        """Every process in the job's cgroup."""
        path = self.dirs.get("") or self.dirs["memory"]
        try:
            return {int(p) for p in _read(path / "cgroup.procs").split()}
        except OSError:
            return set()

    def cpu_seconds(self) -> tuple[float, float] | None:
        """(user, system) CPU seconds used by every process the job ever ran, or None."""
        try:
            if "" in self.dirs:
                stat = dict(line.split() for line in _read(self.dirs[""] / "cpu.stat").splitlines())
                return int(stat["user_usec"]) / 1e6, int(stat["system_usec"]) / 1e6
            if "cpuacct" in self.dirs:
                d = self.dirs["cpuacct"]
                if (d / "cpuacct.usage_user").exists():
                    return int(_read(d / "cpuacct.usage_user")) / 1e9, int(_read(d / "cpuacct.usage_sys")) / 1e9
                ticks = os.sysconf("SC_CLK_TCK")
                stat = dict(line.split() for line in _read(d / "cpuacct.stat").splitlines())
                return int(stat["user"]) / ticks, int(stat["system"]) / ticks
        except (OSError, KeyError, ValueError):
            return None
        return None

    def memory_peak_bytes(self) -> int | None:
        """The job's peak memory as the cgroup saw it (includes page cache), or None."""
        try:
            if "" in self.dirs:
                peak = self.dirs[""] / "memory.peak"
                return int(_read(peak)) if peak.exists() else None
            return int(_read(self.dirs["memory"] / "memory.max_usage_in_bytes"))
        except (OSError, ValueError):
            return None

    def oom_killed(self) -> bool:
        """True when the kernel killed a process of the job for exceeding the memory limit."""
        try:
            if "" in self.dirs:
                events = self.dirs[""] / "memory.events"
                text = _read(events) if events.exists() else ""
            else:
                text = _read(self.dirs["memory"] / "memory.oom_control")
        except OSError:
            return False
        fields = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
        return int(fields.get("oom_kill", "0")) > 0

    def kill_all(self) -> None:
        """SIGKILL every process in the cgroup (``cgroup.kill`` where the kernel has it)."""
        if "" in self.dirs and (self.dirs[""] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self.dirs[""] / "cgroup.kill", "1")
                return
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> bool:
        """Delete the cgroup directories; False while processes remain (kill them first)."""
        ok = True
        for path in self.dirs.values():
            try:
                path.rmdir()
            except FileNotFoundError:
                continue
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    raise
                ok = False
        return ok


def child_rlimits(memory_bytes: int | None, core_bytes: int = 0) -> None:
    """Apply rlimits in the job's process (before exec).

    ``memory_bytes`` limits the data segment (``RLIMIT_DATA``: heap and private writable
    mappings), which is what a job's memory growth consumes; it is used only when no cgroup
    limits memory. ``core_bytes`` is the core-file size (HTCondor's ``CoreSize``; 0 by default).
    """
    for which, value in ((resource.RLIMIT_CORE, core_bytes), (resource.RLIMIT_DATA, memory_bytes)):
        if value is None:
            continue
        hard = resource.getrlimit(which)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)  # only root may raise it
        resource.setrlimit(which, (value, value))


def sweep_stale_cgroups(layout: CgroupLayout | None = None, clock: Clock = REAL) -> list[Path]:
    """Remove job cgroups (``htc_dir_<pid>_<n>_ns<pidns>``) of starters that are gone, killing
    whatever is still in them: after a startd is killed with SIGKILL its jobs die with it
    (``PR_SET_PDEATHSIG``), but their cgroups stay. Cgroups of live processes (this one, other
    pools' startds) are left alone, and so are those made in another PID namespace (a container
    or another simulated host sharing this cgroup tree), whose pids say nothing here: judged by
    our pids, their live jobs were killed and their cgroups removed under them. ``clock`` paces the retries of a removal
    (:mod:`htc.daemons.clock`).

    Returns:
        The cgroup directories removed.
    """
    layout = layout or detect_cgroups()
    parents = [layout.base] if layout.version == 2 and layout.base else [p for _, p in layout.v1]
    own_namespace = pid_namespace()
    removed: list[Path] = []
    for parent in parents:
        try:
            entries = [e for e in parent.iterdir() if e.is_dir()]
        except OSError:
            continue
        for entry in entries:
            parts = entry.name.split("_")
            if len(parts) != 5 or parts[:2] != ["htc", "dir"] or not parts[2].isdigit() or not parts[3].isdigit():
                continue
            if parts[4] != f"ns{own_namespace}":
                continue  # another PID namespace's (a container's, a simulated host's): its pids are not ours
            pid = int(parts[2])
            if pid == os.getpid() or psutil.pid_exists(pid):
                continue
            for _ in range(50):
                try:
                    procs = [int(p) for p in _read(entry / "cgroup.procs").split()]
                except OSError:
                    procs = []
                for proc in procs:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc, signal.SIGKILL)
                try:
                    entry.rmdir()
                    removed.append(entry)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    clock.sleep_blocking(0.01)  # the kernel frees an emptied cgroup a moment after the last exit
    return removed

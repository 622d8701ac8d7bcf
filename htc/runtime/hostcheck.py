"""What of the job runtime works on this host: probes behind ``htc runtime check``.

Theory of operation
-------------------
Each probe tries the real thing, briefly, rather than reading version numbers: it compiles, it
links statically, it forwards a file read through the preload library to a file server, it
ptrace-attaches to a child. A probe returns a :class:`Check`; a *required* check that fails means
the runtime cannot work here at all (``htc runtime check`` then exits non-zero); the others name
features that one part needs (the ptrace dumper, seccomp for static binaries, cgroups for the
starter's limits) and say what is lost without them.
"""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from htc.runtime import build


@dataclass(frozen=True)
class Check:
    """The outcome of one probe."""

    name: str
    ok: bool
    detail: str
    required: bool = False


def _compiler() -> Check:
    try:
        cc = build.compiler()
    except build.RuntimeUnavailable as err:
        return Check("C compiler", False, str(err), True)
    banner = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()
    return Check("C compiler", True, f"{cc} ({banner[0] if banner else 'unknown version'})", True)


def _static_libc() -> Check:
    try:
        cc = build.compiler()
    except build.RuntimeUnavailable:
        return Check("static C library", False, "no compiler to try it with", True)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "t.c")
        src.write_text("#include <stdio.h>\nint main(void) { puts(\"static\"); return 0; }\n")
        done = subprocess.run([cc, "-static", "-o", f"{tmp}/t", str(src)], capture_output=True, text=True)
        if done.returncode != 0:
            return Check("static C library", False,
                         f"cc -static fails ({(done.stderr.strip().splitlines() or ['?'])[-1]}); "
                         f"{build.INSTALL_HINT}", True)
        ran = subprocess.run([f"{tmp}/t"], capture_output=True, text=True)
    return Check("static C library", ran.stdout == "static\n", "cc -static links and runs", True)


def _serve_one(sock: socket.socket, root: str) -> None:
    from htc.runtime.fileserver import FileServer
    server = FileServer(root)
    try:
        while data := sock.recv(1 << 16):
            out = server.feed(data)
            if out:
                sock.sendall(out)
    finally:
        server.close()
        sock.close()


def _remote_io() -> Check:
    try:
        lib = build.library()
    except build.RuntimeUnavailable as err:
        return Check("remote I/O (preload)", False, str(err), True)
    from htc.runtime.remote_io import job_environment, socket_pair
    with tempfile.TemporaryDirectory() as root:
        Path(root, "probe").write_text("forwarded\n")
        server_end, job_end = socket_pair()
        thread = threading.Thread(target=_serve_one, args=(server_end, root), daemon=True)
        thread.start()
        env = dict(os.environ, **job_environment(lib, job_end.fileno(), "/htc-remote-probe"))
        try:
            done = subprocess.run(["cat", "/htc-remote-probe/probe"], env=env, capture_output=True,
                                  text=True, pass_fds=[job_end.fileno()], timeout=60)
        finally:
            job_end.close()
        thread.join(timeout=60)
    ok = done.stdout == "forwarded\n"
    return Check("remote I/O (preload)", ok,
                 f"{lib}: a forwarded read works" if ok else f"cat under the shim said {done.stderr.strip()!r}",
                 True)


def _openat2() -> Check:
    from htc.runtime.fileserver import HAVE_OPENAT2
    return Check("openat2 RESOLVE_BENEATH", HAVE_OPENAT2,
                 "the file server resolves paths in the kernel" if HAVE_OPENAT2 else
                 "kernel before 5.6: the file server checks each opened path through /proc instead")


def _ptrace() -> Check:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    child = subprocess.Popen(["sleep", "30"])
    try:
        rc = libc.ptrace(0x4206, child.pid, None, None)  # PTRACE_SEIZE
        err = ctypes.get_errno()
    finally:
        child.kill()
        child.wait()
    if rc == 0:
        return Check("ptrace", True, "PTRACE_SEIZE of a child works (the ptrace dumper can run)")
    return Check("ptrace", False, f"PTRACE_SEIZE fails ({os.strerror(err)}): no checkpoints of static binaries")


def _seccomp() -> Check:
    try:
        actions = Path("/proc/sys/kernel/seccomp/actions_avail").read_text().split()
    except OSError:
        return Check("seccomp user notification", False, "the kernel has no seccomp")
    ok = "user_notif" in actions
    return Check("seccomp user notification", ok,
                 "available (remote calls of static binaries could be trapped)" if ok else
                 f"not offered (actions: {' '.join(actions)})")


def _cgroups() -> Check:
    try:
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return Check("cgroups", False, "cannot read /proc/mounts")
    v2 = [m[1] for m in mounts if m[2] == "cgroup2"]
    v1 = sorted({opt for m in mounts if m[2] == "cgroup" for opt in m[3].split(",")}
                & {"cpu", "cpuacct", "memory", "pids", "freezer", "cpuset", "blkio"})
    writable = [p for p in v2 + [m[1] for m in mounts if m[2] == "cgroup"] if os.access(p, os.W_OK)]
    parts = []
    if v2:
        controllers = Path(v2[0], "cgroup.controllers")
        names = controllers.read_text().split() if controllers.exists() else []
        parts.append(f"v2 at {v2[0]} ({' '.join(names) or 'no controllers'})")
    if v1:
        parts.append(f"v1 controllers {','.join(v1)}")
    ok = bool(writable)
    return Check("cgroups", ok, ("; ".join(parts) or "none mounted") + ("" if ok else "; none writable"))


def _restore_prereqs() -> Check:
    ok = Path("/proc/self/map_files").exists()
    return Check("checkpoint/restore kernel support", ok,
                 "CONFIG_CHECKPOINT_RESTORE present (/proc/self/map_files)" if ok else
                 "CONFIG_CHECKPOINT_RESTORE missing: restarts cannot restore the memory layout")


PROBES = (_compiler, _static_libc, _remote_io, _openat2, _ptrace, _seccomp, _cgroups, _restore_prereqs)


def run_checks() -> list[Check]:
    """Run every probe, in order; a probe that crashes is reported as a failed check."""
    out = []
    for probe in PROBES:
        try:
            out.append(probe())
        except Exception as err:  # a probe's own bug must not hide the other answers
            out.append(Check(probe.__name__.strip("_"), False, f"probe failed: {err!r}"))
    return out

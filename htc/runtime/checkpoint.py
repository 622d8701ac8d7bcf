"""Run a program under the checkpointing runtime, checkpoint it, and restart it from an image.

Theory of operation
-------------------
:func:`start` runs an unmodified, dynamically linked program with ``libjobrt.so`` preloaded and
``JOBRT_CKPT_IMAGE`` naming its image path.  The library's handler answers two signals:
:data:`CHECKPOINT_SIGNAL` (SIGUSR2) writes an image and lets the program continue (a periodic
checkpoint); :data:`VACATE_SIGNAL` (SIGTSTP, HTCondor's "checkpoint and vacate") writes an image
and exits with :data:`VACATED_EXIT`.  The image appears by rename, so a reader sees either the
previous image or the new one, never half of one.  When the program cannot be checkpointed the
handler writes ``IMAGE.refused`` instead and the program runs on; :meth:`Job.checkpoint` raises
:class:`CheckpointRefused` with that reason.

Each image carries the pid that wrote it and a sequence number that grows over the job's life
(it is restored with the process), so :meth:`Job.checkpoint` waits for an image or a refusal of
its own process numbered after the last one it saw; an older image at the same path (a restart
from a copy rolls the number back) is never mistaken for the new one.

:func:`restart` starts ``jobrt-restart IMAGE`` as a new process (a new pid): it verifies the
image, refuses with :class:`RestartRefused` (the restarter's message and exit code) what it cannot
restore safely, and otherwise becomes the checkpointed program, which can be checkpointed again.
:func:`dump` checkpoints a process from outside with ``jobrt-dump`` (ptrace): that is how static
binaries, which ignore LD_PRELOAD, are checkpointed.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from htc.errors import UsageError
from htc.runtime import build
from htc.runtime.image import ImageError, ImageHeader, read_header

CHECKPOINT_SIGNAL = signal.SIGUSR2
VACATE_SIGNAL = signal.SIGTSTP
VACATED_EXIT = 85
UNSUPPORTED_EXIT = 86

#: the restarter's exit codes (c/jobrt_ckpt_fmt.h JR_EXIT_*) and what they mean
RESTART_CODES = {
    64: "usage",
    65: "corrupt",  # not an image, truncated, checksum mismatch
    66: "foreign",  # another architecture, kernel or CPU feature set
    67: "files",  # a file the process had open cannot be restored
    68: "io",  # the image cannot be read
    70: "restore",  # the address space could not be rebuilt
}

_Stream = int | IO[Any] | None


class CheckpointRefused(UsageError):
    """The running program cannot be checkpointed (threads, sockets, shared memory ...)."""


class RestartRefused(UsageError):
    """The restarter refused an image: damaged, foreign, or its files cannot be restored."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code
        self.reason = RESTART_CODES.get(code, "unknown")


class CheckpointFailed(UsageError):
    """A checkpoint did not happen: the program exited, or no image came in time."""


@dataclass(frozen=True)
class Tools:
    """Paths of the runtime's built artifacts."""

    library: Path
    restarter: Path
    dumper: Path | None = None


def build_tools(cache: Path | str | None = None, *, dumper: bool = False) -> Tools:
    """Build (or find cached) ``libjobrt.so`` and ``jobrt-restart`` (and ``jobrt-dump``)."""
    return Tools(
        library=build.library(cache),
        restarter=build.program("jobrt-restart", cache),
        dumper=build.program("jobrt-dump", cache) if dumper else None,
    )


def _refusal(image: Path) -> tuple[int, int, str] | None:
    """(pid, attempt, reason) of IMAGE.refused: "checkpoint N of pid P refused: REASON"."""
    try:
        text = image.with_name(image.name + ".refused").read_text().strip()
    except FileNotFoundError:
        return None
    head, _, reason = text.partition(" refused: ")
    words = head.split()
    try:
        return int(words[4]), int(words[1]), reason
    except (ValueError, IndexError):
        return None


def _image_of(image: Path) -> ImageHeader | None:
    try:
        return read_header(image)
    except (FileNotFoundError, ImageError):
        return None


class Job:
    """A process under the runtime: started by :func:`start` or :func:`restart`."""

    def __init__(self, process: subprocess.Popen, image: Path, seq: int, restarted: bool = False):
        self.process = process
        self.image = image
        self.restarted = restarted
        self._seen = seq

    @property
    def pid(self) -> int:
        """The process id (a restarted job has a new one)."""
        return self.process.pid

    def _await_image(self, timeout: float) -> ImageHeader:
        # an image (or refusal) is this process's when it carries its pid and a newer number
        deadline = time.monotonic() + timeout
        while True:
            refused = _refusal(self.image)
            if refused and refused[0] == self.pid and refused[1] > self._seen:
                self._seen = refused[1]
                raise CheckpointRefused(f"pid {self.pid}: {refused[2]}")
            header = _image_of(self.image)
            if header and header.pid == self.pid and header.seq > self._seen:
                self._seen = header.seq
                return header
            if self.process.poll() is not None and self.process.returncode != VACATED_EXIT:
                raise CheckpointFailed(
                    f"pid {self.pid} exited with {self.process.returncode} before writing {self.image}"
                )
            if time.monotonic() > deadline:
                raise CheckpointFailed(f"pid {self.pid} wrote no image to {self.image} within {timeout} s")
            time.sleep(0.002)

    def checkpoint(self, timeout: float = 60.0) -> ImageHeader:
        """Checkpoint and continue; return the new image's header.

        Raises :class:`CheckpointRefused` when the program cannot be checkpointed (it runs on).
        """
        self.process.send_signal(CHECKPOINT_SIGNAL)
        return self._await_image(timeout)

    def vacate(self, timeout: float = 60.0) -> ImageHeader:
        """Checkpoint and exit; return the image's header once the process has exited."""
        self.process.send_signal(VACATE_SIGNAL)
        header = self._await_image(timeout)
        self.process.wait(timeout)
        return header

    def kill(self) -> None:
        """SIGKILL the process and reap it (a crash: work since the last image is lost)."""
        self.process.kill()
        self.process.wait()

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to exit; return its exit status."""
        return self.process.wait(timeout)


def _env(tools: Tools, image: Path, env: Mapping[str, str] | None, allow_unsupported: bool,
         fsync: bool) -> dict[str, str]:
    out = dict(os.environ if env is None else env)
    preload = str(tools.library)
    others = [p for p in out.get("LD_PRELOAD", "").split(":") if p and Path(p).resolve() != tools.library.resolve()]
    out["LD_PRELOAD"] = ":".join([preload, *others])
    out["JOBRT_CKPT_IMAGE"] = str(image)
    out["JOBRT_CKPT_SIGNAL"] = str(int(CHECKPOINT_SIGNAL))
    out["JOBRT_CKPT_EXIT_SIGNAL"] = str(int(VACATE_SIGNAL))
    out["JOBRT_CKPT_EXIT_CODE"] = str(VACATED_EXIT)
    out["JOBRT_CKPT_FSYNC"] = "1" if fsync else "0"
    out["JOBRT_CKPT_UNSUPPORTED"] = "allow" if allow_unsupported else "fail"
    return out


def _refuse_setuid(program: str, env: Mapping[str, str] | None) -> None:
    """Refuse a setuid/setgid program: the loader ignores LD_PRELOAD for it, so it would run
    without the handler and the checkpoint signal would kill it."""
    path = program if "/" in program else shutil.which(program, path=(env or os.environ).get("PATH"))
    if path and os.path.exists(path) and os.stat(path).st_mode & (stat.S_ISUID | stat.S_ISGID):
        raise CheckpointRefused(
            f"{path} is setuid/setgid: the dynamic loader ignores LD_PRELOAD for it, so it cannot "
            "run under the checkpointing runtime; run a copy without the setuid bit, or run it vanilla"
        )


def start(argv: Sequence[str], image: Path | str, *, tools: Tools | None = None,
          stdin: _Stream = subprocess.DEVNULL, stdout: _Stream = None, stderr: _Stream = None,
          cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
          pass_fds: Sequence[int] = (), allow_unsupported: bool = False, fsync: bool = True) -> Job:
    """Start ``argv`` with checkpointing to ``image`` (absolute path recommended).

    With ``allow_unsupported`` a program that starts threads or forks runs on without
    checkpoints; otherwise it exits with :data:`UNSUPPORTED_EXIT` and a message on stderr.
    """
    _refuse_setuid(argv[0], env)
    tools = tools or build_tools()
    image = Path(image).absolute()
    process = subprocess.Popen(
        list(argv), stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, pass_fds=tuple(pass_fds),
        env=_env(tools, image, env, allow_unsupported, fsync),
    )
    return Job(process, image, seq=0)


def _run_restarter(cmd: list[str], image: Path, **popen: Any) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, **popen)
    if done.returncode:
        message = done.stderr.strip() or f"jobrt-restart exited with {done.returncode}"
        raise RestartRefused(message, done.returncode)
    return done


def check(image: Path | str, *, tools: Tools | None = None, cwd: Path | str | None = None) -> ImageHeader:
    """Verify that ``image`` can be restored on this host now (checksum, host, files).

    Raises :class:`RestartRefused` with the restarter's message otherwise.
    """
    tools = tools or build_tools()
    image = Path(image).absolute()
    _run_restarter([str(tools.restarter), "--check", str(image)], image, cwd=cwd)
    return read_header(image)


def restart(image: Path | str, *, tools: Tools | None = None, image_out: Path | str | None = None,
            stdin: _Stream = subprocess.DEVNULL, stdout: _Stream = None, stderr: _Stream = None,
            pass_fds: Sequence[int] = (), launcher: Sequence[str] = (), verify_first: bool = True) -> Job:
    """Restart the process saved in ``image`` as a new process; return its :class:`Job`.

    The restored process checkpoints to ``image_out`` from now on (default: where it did before).
    ``pass_fds`` are inherited at their numbers: the remote-I/O connection goes at the number the
    job had (``JOBRT_IO_FD``), and the shim reconnects its remote files through it.
    ``launcher`` is a command prefix for the restarter (e.g. ``["setarch", "-R"]``).
    With ``verify_first`` (default) the image is checked first, so a refusal raises
    :class:`RestartRefused` here instead of surfacing as the new process's exit status.
    """
    tools = tools or build_tools()
    image = Path(image).absolute()
    header = check(image, tools=tools) if verify_first else read_header(image)
    cmd = [*launcher, str(tools.restarter)]
    if image_out is not None:
        cmd += ["--image-out", str(Path(image_out).absolute())]
    process = subprocess.Popen(cmd + [str(image)], stdin=stdin, stdout=stdout, stderr=stderr,
                               pass_fds=tuple(pass_fds))
    target = Path(image_out).absolute() if image_out is not None else image
    return Job(process, target, seq=header.seq, restarted=True)


def dump(pid: int, image: Path | str, *, tools: Tools | None = None, leave: str = "run",
         fsync: bool = True) -> ImageHeader:
    """Checkpoint process ``pid`` from outside with ``jobrt-dump`` (ptrace); return the header.

    ``leave`` says what happens to the process afterwards: ``"run"`` (it continues) or
    ``"kill"`` (it is killed once the image is safely written: checkpoint and vacate).
    """
    if leave not in ("run", "kill"):
        raise UsageError(f"dump(leave={leave!r}): leave must be 'run' or 'kill'")
    tools = tools or build_tools(dumper=True)
    if tools.dumper is None:
        tools = Tools(tools.library, tools.restarter, build.program("jobrt-dump"))
    image = Path(image).absolute()
    cmd = [str(tools.dumper), "--kill" if leave == "kill" else "--run", "--fsync" if fsync else "--no-fsync",
           str(pid), str(image)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        message = done.stderr.strip() or f"jobrt-dump exited with {done.returncode}"
        raise CheckpointRefused(message)
    return read_header(image)

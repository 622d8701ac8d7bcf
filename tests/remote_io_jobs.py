"""Running a real program under the remote-I/O shim against a real file-server process."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from htc.runtime import build, remote_io

#: the job-side directory that stands for the server's root
PREFIX = "/htc-remote"


@dataclass
class Run:
    """What a job run under the shim did."""

    returncode: int
    stdout: str
    stderr: str
    server_rc: int


def compile_c(tmp_path: Path, name: str, source: str) -> Path:
    """Compile a C test program (dynamically linked, so the preload reaches it)."""
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    exe = tmp_path / name
    subprocess.run(["cc", "-O2", "-D_GNU_SOURCE", "-o", str(exe), str(src)], check=True)
    return exe


def run_job(argv: list[str], root: Path, *, pipeline: bool = True, cwd: str | None = None,
            uid: int | None = None, extra_fds: tuple[int, ...] = (), env: dict | None = None,
            job_cwd: Path | None = None) -> Run:
    """Run ``argv`` with the shim against ``python -m htc.runtime.remote_io`` serving ``root``."""
    server_end, job_end = remote_io.socket_pair()
    cmd = [sys.executable, "-m", "htc.runtime.remote_io", "--fd", str(server_end.fileno()),
           "--root", str(root)]
    if uid is not None:
        cmd += ["--uid", str(uid), "--gid", str(uid)]
    server = subprocess.Popen(cmd, pass_fds=[server_end.fileno()])
    server_end.close()
    job_env = dict(os.environ, **(env or {}))
    job_env.update(remote_io.job_environment(build.library(), job_end.fileno(), PREFIX,
                                             cwd=cwd, pipeline=pipeline))
    try:
        done = subprocess.run(argv, env=job_env, pass_fds=[job_end.fileno(), *extra_fds],
                              capture_output=True, text=True, timeout=120, cwd=job_cwd)
    finally:
        job_end.close()
    return Run(done.returncode, done.stdout, done.stderr, server.wait(timeout=60))

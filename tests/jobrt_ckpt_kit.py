"""What the checkpoint tests share: the built runtime, compiled test programs, reference runs.

The runtime is built through htc.runtime.build into its normal cache (keyed by source hash, so a
second run reuses it).  Test programs live in tests/system/jobrt_progs and are compiled per session.
A feature the host lacks (no compiler, no static C library, no ptrace) skips with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ckpt_images import runtime_tools
from htc.runtime import checkpoint

PROGS = Path(__file__).parent / "system" / "jobrt_progs"
COUNT = 4000  # iterations of the counter: about 2 s uninterrupted (usleep(300) each)


@dataclass(frozen=True)
class Kit:
    """Built runtime tools and compiled test programs."""

    tools: checkpoint.Tools
    bin: Path
    input: Path

    def prog(self, name: str) -> Path:
        """Path of a compiled test program."""
        return self.bin / name


def _cc(*args: str) -> None:
    done = subprocess.run(["cc", *args], capture_output=True, text=True)
    if done.returncode:
        if "-static" in args and "cannot find -lc" in done.stderr:
            pytest.skip("the static C library is missing (Debian: apt-get install libc6-dev)")
        raise AssertionError(f"compiling {args}: {done.stderr}")


def make_kit(tmp: Path, *, static: bool = False) -> Kit:
    """Build the runtime and compile the test programs into ``tmp``."""
    tools = runtime_tools(dumper=True)
    _cc("-O2", "-o", str(tmp / "counter"), str(PROGS / "counter.c"))
    _cc("-O2", "-pthread", "-o", str(tmp / "threads"), str(PROGS / "threads.c"))
    _cc("-O2", "-o", str(tmp / "forks"), str(PROGS / "forks.c"))
    if static:
        _cc("-O2", "-static", "-o", str(tmp / "counter_static"), str(PROGS / "counter.c"))
    data = tmp / "input.bin"
    data.write_bytes(os.urandom(8 * 997))
    return Kit(tools, tmp, data)


@dataclass(frozen=True)
class Outputs:
    """The three outputs of one counter run, as bytes."""

    out: bytes
    log: bytes
    stdout: bytes


class CounterRun:
    """Paths of one counter run in a directory: its output file, write() log and stdout."""

    def __init__(self, kit: Kit, where: Path):
        where.mkdir(parents=True, exist_ok=True)
        self.kit = kit
        self.out = where / "out.txt"
        self.log = where / "log.txt"
        self.stdout = where / "stdout.txt"
        self.image = where / "image"

    def argv(self, program: str = "counter") -> list[str]:
        """The counter's command line."""
        return [str(self.kit.prog(program)), str(self.kit.input), str(self.out), str(self.log), str(COUNT)]

    def outputs(self) -> Outputs:
        """What the run produced so far."""
        return Outputs(self.out.read_bytes(), self.log.read_bytes(), self.stdout.read_bytes())


def reference(kit: Kit, where: Path) -> Outputs:
    """Run the counter uninterrupted and return its outputs."""
    run = CounterRun(kit, where)
    with open(run.stdout, "wb") as out:
        subprocess.run(run.argv(), stdout=out, check=True, timeout=300)
    return run.outputs()


def wait_for(predicate, timeout: float = 60.0, what: str = "condition") -> None:
    """Poll ``predicate`` until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


def started(run: CounterRun) -> bool:
    """True once the counter has written its first progress line."""
    return run.stdout.exists() and run.stdout.stat().st_size > 0


def copy(src: Path, dst: Path) -> Path:
    """Copy an image (keeping it intact for a later restart)."""
    shutil.copyfile(src, dst)
    return dst

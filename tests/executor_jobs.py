"""Functions the executor feature tests run as jobs (shipped by value like any helper module)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import htc


def flaky(counter_dir, succeed_on):
    """Raise until this is the ``succeed_on``-th run (counted in files of ``counter_dir``)."""
    runs = len(os.listdir(counter_dir)) + 1
    Path(counter_dir, f"run{runs}").write_text("")
    if runs < succeed_on:
        raise RuntimeError(f"run {runs} fails")
    return runs


def hog(megabytes, seconds=30.0):
    """Hold ``megabytes`` of resident memory for a while."""
    block = bytearray(megabytes * 1024 * 1024)
    for i in range(0, len(block), 4096):
        block[i] = 1
    time.sleep(seconds)
    return len(block)


def kill_self(sig):
    os.kill(os.getpid(), sig)
    time.sleep(10)


def leave_abruptly(code):
    os._exit(code)


def chatty(n):
    for i in range(n):
        print(f"line {i}", flush=True)
    print("to stderr", file=__import__("sys").stderr)
    return n


def talk_slowly(n, pause):
    """Print ``n`` lines, ``pause`` seconds apart (for streamed output)."""
    for i in range(n):
        if i:
            time.sleep(pause)
        print(f"step {i}", flush=True)
    return n


def stepper(total, flag_dir, step_seconds=0.02):
    """Count to ``total`` with a checkpoint per step; note in ``flag_dir`` each run's start step."""
    state = htc.resume(default={"step": 0, "runs": []})
    state["runs"].append(state["step"])
    Path(flag_dir, f"started-at-{state['step']}").write_text(str(os.getpid()))
    while state["step"] < total:
        time.sleep(step_seconds)
        state["step"] += 1
        htc.checkpoint(state)
        Path(flag_dir, "progress").write_text(str(state["step"]))
    return state


def value_of(x):
    return x


def combine(a, b, extra=()):
    return a + b + sum(extra)


def signal_name(sig):
    return signal.Signals(sig).name


def write_and_return(name, value):
    """Leave ``name`` in the working directory and return ``value``."""
    with open(name, "w") as f:
        f.write(f"made for {value}\n")
    print(f"wrote {name}")
    return value

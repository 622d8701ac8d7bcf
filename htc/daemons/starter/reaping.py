"""Reaping the children of a single-threaded forking server: the one copy both zygotes use.

Theory of operation
-------------------
A zygote -- the starter's (:mod:`htc.daemons.starter.zygote_program`) and the local executor's
(:mod:`htc.executors.zygote`) -- forks its children from one thread that waits in a selector
(forking a threaded process is unsafe). It hears that a child ended without polling: SIGCHLD
writes a byte to a non-blocking wake-up pipe (``signal.set_wakeup_fd``) whose read end the
selector watches (:func:`open_sigchld_wakeup`). When that end is readable the zygote empties
it (:func:`drain`) and reaps every child that has ended (:func:`reap_exited`) with ``wait4``,
so the kernel measures each one's CPU time and peak memory; several exits may share one
wake-up, so it reaps until none is left.

Shipping
--------
The starter's zygote runs under the job's interpreter, with no access to htc: its program is
sent as source on its stdin (:func:`htc.daemons.starter.zygote_program.program`), and this
module's source goes with it. So this module keeps to the standard library and Python 3.9,
with nothing at its top but imports and these functions.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

__all__ = ["drain", "open_sigchld_wakeup", "reap_exited"]


def open_sigchld_wakeup() -> tuple[int, int]:
    """Have every SIGCHLD write to a wake-up pipe, and return its (read end, write end).

    Register the read end with the selector; a child closes both ends after its fork. Call it
    from the main thread (it sets a signal handler and the process's wake-up fd).
    """
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the signal is not ignored
    return wake_r, wake_w


def drain(fd: int) -> None:
    """Read the non-blocking wake-up pipe ``fd`` empty (the signals it carried are noted)."""
    try:
        while os.read(fd, 512):
            continue
    except BlockingIOError:
        return


def reap_exited(on_exit: Callable[[int, int, object], None]) -> None:
    """Reap every child that has ended, without blocking, calling ``on_exit(pid, status, rusage)``
    for each (``status`` is the raw wait status, ``rusage`` a :class:`resource.struct_rusage`).

    Returns once no ended child is left (live ones stay) or there are no children at all.
    """
    while True:
        try:
            pid, status, rusage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        on_exit(pid, status, rusage)

"""Leverage (the seed paper's): a job's remote CPU divided by the CPU the submit side spent on it.

Theory of operation
-------------------
What is counted as the submit side's CPU for a job (``SubmitSideCpu``, seconds), per run:

* **the schedd core's handlers** for every event that names the job while it has a shadow:
  messages carrying its ``job_id`` (StarterUpdate, JobOutput, JobExited, SendCheckpoint's
  record), answers to calls made for it (activation, vacate, suspend, ``htc checkpoint``: the
  cookie names the job), and CheckpointStored. :class:`CoreMeter` wraps the core's ``handle``
  and charges the calling thread's CPU time (``time.thread_time``) of each such event to the
  run's shadow (``Shadow.submit_cpu``);
* **storing each checkpoint image** (:mod:`htc.daemons.schedd.checkpoint_files`): the
  process's CPU, all threads, user + system (``getrusage(RUSAGE_SELF)``), from the start of the
  SendCheckpoint conversation to the image swapped in (``CheckpointStored.cpu``). Other work of
  the schedd running at the same time is counted too, so this part can only overstate the cost.
* **forwarded file calls relayed to the submit side** (a job in another FileSystemDomain,
  :mod:`htc.daemons.schedd.job_io`): the CPU of the file server the schedd started for the run
  (its ``/proc`` times, read every :data:`~htc.daemons.schedd.job_io.CHARGE_INTERVAL` seconds and
  once more as the relay ends) and the schedd thread's CPU passing each chunk on
  (``RelayCounts.cpu``). The event loop's wake-ups and the decoding of each incoming frame are
  not in it, so this part understates the relay (``benchmarks/runtime_bench.py`` part 1 measures
  the whole: "submit CPU" per relayed call). Calls served on the execute side, as in a personal
  pool, cost the submit side nothing.

Not counted: the negotiation and claiming before the run has a shadow (the schedd's match and
claim handlers name a claim, not a job), the submit itself, the user-log writes the service does
after the handler, the handler of the event that ends the run (the shadow is gone by the time
its CPU is known), and relay CPU after that end.

Each charge goes through :func:`charge`, which keeps the run's total (``Shadow.submit_cpu``)
and its parts (``Shadow.submit_cpu_parts``: :data:`PARTS`). At each run's end
(:func:`htc.daemons.schedd.ends`) the run's CPU is added to the job's ``SubmitSideCpu``, each
part to its own attribute (``SubmitSideCpuHandlers``, ``SubmitSideCpuCheckpoints``,
``SubmitSideCpuJobIO``), and
``Leverage`` is set to ``(CumulativeRemoteUserCpu + CumulativeRemoteSysCpu) / SubmitSideCpu``
(left out while SubmitSideCpu is 0).
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Any

from htc.daemons import core as c
from htc.daemons.calls import CallDone, CallFailed

__all__ = ["PARTS", "CoreMeter", "charge", "leverage_attributes", "pid_cpu", "process_cpu"]

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

#: the parts of ``SubmitSideCpu`` (module docstring), each also kept as a job attribute of its own
PARTS = {"handlers": "SubmitSideCpuHandlers", "checkpoints": "SubmitSideCpuCheckpoints",
         "job_io": "SubmitSideCpuJobIO"}


def pid_cpu(pid: int) -> float | None:
    """Process ``pid``'s CPU seconds so far (user + system; a zombie's are its final ones), or None
    when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def process_cpu() -> float:
    """This process's CPU seconds so far, every thread, user + system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def charge(shadow, part: str, seconds: float) -> None:
    """Add ``seconds`` of the schedd's CPU to a run's ``SubmitSideCpu``, as part ``part`` of :data:`PARTS`."""
    shadow.submit_cpu += seconds
    shadow.submit_cpu_parts[part] = shadow.submit_cpu_parts.get(part, 0.0) + seconds


def _job_of(event: c.Event) -> Any:
    """The (cluster, proc) an event concerns, or None."""
    if isinstance(event, c.Received):
        text = getattr(event.msg, "job_id", None)
        if isinstance(text, str) and "." in text:
            cluster, _, proc = text.partition(".")
            return int(cluster), int(proc)
        return None
    if isinstance(event, CallDone | CallFailed):
        cookie = event.cookie
        if isinstance(cookie, tuple) and len(cookie) > 1 and isinstance(cookie[1], tuple):
            return cookie[1]
        return None
    job = getattr(event, "job_id", None)
    return job if isinstance(job, tuple) else None


class CoreMeter:
    """Wraps a schedd core's ``handle`` to charge each job's events to its shadow (module docstring)."""

    def __init__(self, core):
        self.core, self._handle = core, core.handle
        core.handle = self.handle

    def handle(self, event: c.Event, now: float) -> list:
        """The core's handle, with the thread CPU it took charged to the job's run."""
        start = time.thread_time()
        actions = self._handle(event, now)
        job = _job_of(event)
        if job is not None:
            shadow = self.core.shadows.get(job)
            if shadow is not None:
                charge(shadow, "handlers", time.thread_time() - start)
        return actions


def leverage_attributes(job, shadow, remote_cpu: float, number) -> dict[str, str]:
    """``SubmitSideCpu`` and its parts (the job's so far, with this run's) and ``Leverage`` at a run's end.

    Args:
        remote_cpu: the job's cumulative remote user + system CPU, this run's included.
        number: reads a numeric attribute of the job (``userlog.number``).
    """
    local = number(job, "SubmitSideCpu") + shadow.submit_cpu
    attrs = {"SubmitSideCpu": repr(round(local, 6))}
    for part, name in PARTS.items():
        attrs[name] = repr(round(number(job, name) + shadow.submit_cpu_parts.get(part, 0.0), 6))
    if local > 0:
        attrs["Leverage"] = repr(round(remote_cpu / local, 3))
    return attrs

"""``htc q -userlog FILE``: job ads rebuilt from a job event log, as condor_q's
``userlog_to_classads`` builds them.

A log does not carry whole job ads, so the ads hold what the events say: ids, status, times,
the execute host, exit codes, hold reasons, image size and run times.  The owner is the
log file's owner (HTCondor: the user running the tool, ``???`` if unknown) and ``Cmd`` is
``???``, as in condor_q.  Jobs that left the queue stay, as Completed (4) or Removed (3).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable

from htc.classad import ClassAd
from htc.eventlog import events as ev
from htc.eventlog.reader import read_events
from htc.errors import UsageError

__all__ = ["jobs_from_userlog"]

_IDLE, _RUNNING, _REMOVED, _COMPLETED, _HELD, _SUSPENDED = 1, 2, 3, 4, 5, 7


def _owner() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return "???"


def jobs_from_userlog(path: str, now: float) -> list[ClassAd]:
    """The jobs of the log at ``path``, one ad each, in ClusterId.ProcId order.

    Raises:
        UsageError: the file does not exist or cannot be read (``Can't open user log``).
    """
    if not os.path.isfile(path):
        raise UsageError(f"Can't open user log: {path}")
    return build(read_events(path), path, now)


def _set_status(ad: dict, status: int, when: float) -> None:
    ad["LastJobStatus"] = ad.get("JobStatus", 0)
    ad["JobStatus"] = status
    ad["EnteredCurrentStatus"] = int(when)


def build(events: Iterable[ev.Event], path: str, now: float) -> list[ClassAd]:
    """Fold ``events`` into job ads (what :func:`jobs_from_userlog` returns)."""
    jobs: dict[tuple[int, int], dict] = {}
    owner = _owner()
    for e in events:
        key = (e.cluster, e.proc)
        t = int(e.timestamp)
        if isinstance(e, ev.SubmitEvent):
            jobs[key] = {
                "MyType": "Job", "TargetType": "Machine", "ClusterId": e.cluster, "ProcId": e.proc,
                "UserLog": path, "QDate": t, "EnteredCurrentStatus": t, "ServerTime": int(now),
                "SubmitHost": e.submit_host, "JobStatus": _IDLE, "LastJobStatus": 0, "Owner": owner,
                "JobPrio": 0, "ImageSize": 0, "Cmd": "???", "LastSuspensionTime": 0, "CompletionDate": 0,
                "NumJobStarts": 0, "TotalSuspensions": 0, "NumSystemHolds": 0, "LocalUserCpu": 0.0,
                "RemoteUserCpu": 0.0, "LocalSysCpu": 0.0, "RemoteSysCpu": 0.0, "RemoteWallClockTime": 0.0,
            }
            continue
        ad = jobs.get(key)
        if ad is None:  # events of a job whose submit event is not in this log
            continue
        if isinstance(e, ev.ExecuteEvent):
            _set_status(ad, _RUNNING, t)
            ad["JobCurrentStartDate"] = t
            ad["ShadowBday"] = t
            ad["NumJobStarts"] = ad.get("NumJobStarts", 0) + 1
            ad["StartdIpAddr"] = ad["RemoteHost"] = e.execute_host
        elif isinstance(e, (ev.JobTerminatedEvent, ev.JobEvictedEvent)):
            requeued = isinstance(e, ev.JobEvictedEvent) and not e.terminated_and_requeued
            started = ad.get("JobCurrentStartDate")
            run = float(t - started) if started is not None else 0.0
            ad["LastRemoteWallClockTime"] = run
            ad["RemoteWallClockTime"] = ad.get("RemoteWallClockTime", 0.0) + run
            if "RemoteHost" in ad:
                ad["LastRemoteHost"] = ad.pop("RemoteHost")
            if requeued or isinstance(e, ev.JobEvictedEvent):
                _set_status(ad, _IDLE, t)
                continue
            _set_status(ad, _COMPLETED, t)
            ad["CompletionDate"] = t
            ad["ExitBySignal"] = not e.terminated_normally
            if e.terminated_normally:
                ad["ExitCode"] = e.return_value if e.return_value is not None else 0
            elif e.signal is not None:
                ad["ExitSignal"] = e.signal
            ad["BytesSent"], ad["BytesRecvd"] = float(e.total_sent_bytes), float(e.total_received_bytes)
        elif isinstance(e, ev.JobAbortedEvent):
            _set_status(ad, _REMOVED, t)
            if e.reason:
                ad["RemoveReason"] = e.reason
        elif isinstance(e, ev.JobHeldEvent):
            _set_status(ad, _HELD, t)
            ad["HoldReason"] = e.reason or ""
            ad["HoldReasonCode"], ad["HoldReasonSubCode"] = e.code, e.subcode
        elif isinstance(e, ev.JobReleasedEvent):
            _set_status(ad, _IDLE, t)
        elif isinstance(e, ev.JobSuspendedEvent):
            _set_status(ad, _SUSPENDED, t)
            ad["LastSuspensionTime"] = t
            ad["TotalSuspensions"] = ad.get("TotalSuspensions", 0) + 1
        elif isinstance(e, ev.JobUnsuspendedEvent):
            _set_status(ad, _RUNNING, t)
        elif isinstance(e, ev.ImageSizeEvent):
            ad["ImageSize"] = e.size
            if e.memory_usage is not None:
                ad["MemoryUsage"] = e.memory_usage
    return [ClassAd(jobs[key]) for key in sorted(jobs)]

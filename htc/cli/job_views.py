"""condor_q's and condor_history's tables, computed from job ads.

* :func:`batch_rows` -- the default view: one row per batch (an owner's ``JobBatchName``, or
  the cluster ``ID: 12`` when the jobs have none), with counts of done, running, idle and held
  jobs and the range of job ids; ``_`` stands for zero, as in condor_q.
* :func:`job_rows` -- ``-nobatch``: one row per job (``ID OWNER SUBMITTED RUN_TIME ST PRI SIZE CMD``).
* :func:`run_rows` -- ``-run``: where each running job runs.
* :func:`hold_rows` -- ``-hold``: since when and why each job is held.
* :func:`history_rows` -- condor_history's ``ID OWNER SUBMITTED RUN_TIME ST COMPLETED CMD``.
* :func:`totals_line` -- ``Total for query: 3 jobs; 0 completed, 0 removed, 2 idle, ...``.

Each takes ads and the time (``now``), so tests give both.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from htc.classad import ClassAd
from htc.cli.formatting import duration, short_date
from htc.jobqueue.states import JobStatus

__all__ = ["BATCH_HEADERS", "JOB_HEADERS", "RUN_HEADERS", "HOLD_HEADERS", "HISTORY_HEADERS",
           "batch_rows", "job_rows", "run_rows", "hold_rows", "history_rows", "totals_line", "status_counts"]

BATCH_HEADERS = ("OWNER", "BATCH_NAME", "SUBMITTED", "DONE", "RUN", "IDLE", "TOTAL", "JOB_IDS")
JOB_HEADERS = ("ID", "OWNER", "SUBMITTED", "RUN_TIME", "ST", "PRI", "SIZE", "CMD")
RUN_HEADERS = ("ID", "OWNER", "SUBMITTED", "RUN_TIME", "HOST(S)")
HOLD_HEADERS = ("ID", "OWNER", "HELD_SINCE", "HOLD_REASON")
HISTORY_HEADERS = ("ID", "OWNER", "SUBMITTED", "RUN_TIME", "ST", "COMPLETED", "CMD")


def _get(ad: ClassAd, name: str, default=None):
    try:
        value = ad.eval(name)
    except KeyError:
        return default
    if value.__class__.__name__ == "Value":  # Undefined / Error
        return default
    return value


def _num(ad: ClassAd, name: str, default: float = 0) -> float:
    value = _get(ad, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return value


def _status(ad: ClassAd) -> int:
    return int(_num(ad, "JobStatus", 1))


def _letter(status: int) -> str:
    try:
        return JobStatus(status).letter
    except ValueError:
        return "?"


def job_id(ad: ClassAd) -> str:
    """``ClusterId.ProcId``."""
    return f"{int(_num(ad, 'ClusterId'))}.{int(_num(ad, 'ProcId'))}"


def run_time(ad: ClassAd, now: float) -> float:
    """Wall-clock seconds the job has run: earlier runs plus the current one (condor_q's RUN_TIME)."""
    total = _num(ad, "RemoteWallClockTime")
    if _status(ad) in (JobStatus.RUNNING, JobStatus.TRANSFERRING_OUTPUT, JobStatus.SUSPENDED):
        start = _num(ad, "ShadowBday") or _num(ad, "JobCurrentStartDate") or _num(ad, "JobStartDate")
        if start:
            total += max(0.0, now - start)
    return total


def command_line(ad: ClassAd) -> str:
    """The executable's base name and its arguments, as condor_q's CMD column shows them."""
    cmd = _get(ad, "Cmd", "")
    cmd = os.path.basename(cmd) if isinstance(cmd, str) else ""
    args = _get(ad, "Arguments") or _get(ad, "Args") or ""
    return f"{cmd} {args}".strip() if isinstance(args, str) else cmd


def size_mb(ad: ClassAd) -> str:
    """SIZE: MemoryUsage in MB if known, else ImageSize (KiB) in MB, one decimal."""
    usage = _get(ad, "MemoryUsage")
    if isinstance(usage, (int, float)) and not isinstance(usage, bool):
        return f"{usage:.1f}"
    return f"{_num(ad, 'ImageSize') / 1024:.1f}"


def job_rows(ads: Iterable[ClassAd], now: float) -> list[tuple]:
    """``-nobatch`` rows."""
    return [(job_id(ad), _get(ad, "Owner", "?"), short_date(_num(ad, "QDate")), duration(run_time(ad, now)),
             _letter(_status(ad)), int(_num(ad, "JobPrio")), size_mb(ad), command_line(ad)) for ad in ads]


def run_rows(ads: Iterable[ClassAd], now: float) -> list[tuple]:
    """``-run`` rows (running jobs and where they run)."""
    return [(job_id(ad), _get(ad, "Owner", "?"), short_date(_num(ad, "QDate")), duration(run_time(ad, now)),
             _get(ad, "RemoteHost", "") or "") for ad in ads]


def hold_rows(ads: Iterable[ClassAd]) -> list[tuple]:
    """``-hold`` rows (held jobs, since when and why)."""
    return [(job_id(ad), _get(ad, "Owner", "?"), short_date(_num(ad, "EnteredCurrentStatus")),
             _get(ad, "HoldReason", "") or "") for ad in ads]


def history_rows(ads: Iterable[ClassAd], now: float) -> list[tuple]:
    """condor_history's default rows."""
    rows = []
    for ad in ads:
        completed = _num(ad, "CompletionDate") or (_num(ad, "EnteredCurrentStatus") if _status(ad) == 3 else 0)
        rows.append((job_id(ad), _get(ad, "Owner", "?"), short_date(_num(ad, "QDate")),
                     duration(_num(ad, "RemoteWallClockTime")), _letter(_status(ad)),
                     short_date(completed) if completed else "???", command_line(ad)))
    return rows


@dataclass
class _Batch:
    owner: str
    name: str
    submitted: float = 0.0
    counts: dict[int, int] = field(default_factory=dict)
    total_procs: int = 0
    ids: list[tuple[int, int]] = field(default_factory=list)
    clusters: dict[int, int] = field(default_factory=dict)


def _ids_text(ids: Sequence[tuple[int, int]]) -> str:
    ids = sorted(ids)
    first, last = ids[0], ids[-1]
    if first == last:
        return f"{first[0]}.{first[1]}"
    if first[0] == last[0] and len(ids) == last[1] - first[1] + 1:
        return f"{first[0]}.{first[1]}-{last[1]}"
    return f"{first[0]}.{first[1]} ... {last[0]}.{last[1]}"


def batch_rows(ads: Iterable[ClassAd]) -> tuple[tuple[str, ...], list[tuple]]:
    """The default (batch) view: headers (HOLD added when a job is held) and one row per batch.

    Returns:
        ``(headers, rows)``.
    """
    batches: dict[tuple[str, str], _Batch] = {}
    for ad in ads:
        owner = str(_get(ad, "Owner", "?"))
        cluster = int(_num(ad, "ClusterId"))
        name = _get(ad, "JobBatchName")
        name = name if isinstance(name, str) and name else f"ID: {cluster}"
        batch = batches.setdefault((owner, name), _Batch(owner, name))
        qdate = _num(ad, "QDate")
        if qdate and (not batch.submitted or qdate < batch.submitted):
            batch.submitted = qdate
        status = _status(ad)
        batch.counts[status] = batch.counts.get(status, 0) + 1
        batch.ids.append((cluster, int(_num(ad, "ProcId"))))
        batch.clusters[cluster] = max(batch.clusters.get(cluster, 0), int(_num(ad, "TotalSubmitProcs")))
    any_held = any(b.counts.get(JobStatus.HELD) for b in batches.values())
    headers = BATCH_HEADERS if not any_held else BATCH_HEADERS[:6] + ("HOLD",) + BATCH_HEADERS[6:]

    def cell(n: int) -> str:
        return str(n) if n else "_"

    rows = []
    for batch in batches.values():
        present = len(batch.ids)
        total = max(present, sum(batch.clusters.values()))
        done = batch.counts.get(JobStatus.COMPLETED, 0) + (total - present)
        running = sum(batch.counts.get(s, 0) for s in (JobStatus.RUNNING, JobStatus.TRANSFERRING_OUTPUT,
                                                        JobStatus.SUSPENDED))
        row = [batch.owner, batch.name, short_date(batch.submitted), cell(done), cell(running),
               cell(batch.counts.get(JobStatus.IDLE, 0))]
        if any_held:
            row.append(cell(batch.counts.get(JobStatus.HELD, 0)))
        row += [cell(total), _ids_text(batch.ids)]
        rows.append(tuple(row))
    return headers, rows


def status_counts(ads: Iterable[ClassAd]) -> dict[int, int]:
    """How many jobs are in each JobStatus."""
    counts: dict[int, int] = {}
    for ad in ads:
        status = _status(ad)
        counts[status] = counts.get(status, 0) + 1
    return counts


def totals_line(label: str, counts: dict[int, int]) -> str:
    """condor_q's summary: ``Total for query: 3 jobs; 0 completed, 0 removed, 2 idle, 1 running, 0 held, 0 suspended``."""
    S = JobStatus
    total = sum(counts.values())
    return (f"Total for {label}: {total} jobs; {counts.get(S.COMPLETED, 0)} completed, "
            f"{counts.get(S.REMOVED, 0)} removed, {counts.get(S.IDLE, 0)} idle, "
            f"{counts.get(S.RUNNING, 0) + counts.get(S.TRANSFERRING_OUTPUT, 0)} running, "
            f"{counts.get(S.HELD, 0)} held, {counts.get(S.SUSPENDED, 0)} suspended")

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

__all__ = ["BATCH_HEADERS", "JOB_HEADERS", "RUN_HEADERS", "HOLD_HEADERS", "HISTORY_HEADERS", "IO_HEADERS",
           "GOODPUT_HEADERS", "io_rows", "goodput_rows", "readable_bytes",
           "batch_rows", "job_rows", "run_rows", "hold_rows", "history_rows", "totals_line", "status_counts"]

BATCH_HEADERS = ("OWNER", "BATCH_NAME", "SUBMITTED", "DONE", "RUN", "IDLE", "TOTAL", "JOB_IDS")
JOB_HEADERS = ("ID", "OWNER", "SUBMITTED", "RUN_TIME", "ST", "PRI", "SIZE", "CMD")
RUN_HEADERS = ("ID", "OWNER", "SUBMITTED", "RUN_TIME", "HOST(S)")
HOLD_HEADERS = ("ID", "OWNER", "HELD_SINCE", "CODE/SUB", "HOLD_REASON")
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


def run_time(ad: ClassAd, now: float, current_run: bool = False) -> float:
    """Wall-clock seconds for condor_q's RUN_TIME column (``job_time`` in condor_q).

    With ``current_run`` (condor_q's default, and ``-currentrun``): a running job's time in
    this run, an idle or held job's last run (``LastRemoteWallClockTime``; all its runs,
    ``RemoteWallClockTime``, when the schedd did not record the last one).  Without it
    (``-cumulative-time``): every earlier run (``RemoteWallClockTime``) plus the current one.
    """
    status = _status(ad)
    total = 0.0 if current_run else _num(ad, "RemoteWallClockTime")
    if status in (JobStatus.RUNNING, JobStatus.TRANSFERRING_OUTPUT, JobStatus.SUSPENDED):
        start = _num(ad, "ShadowBday") or _num(ad, "JobCurrentStartDate") or _num(ad, "JobStartDate")
        if start:
            total += max(0.0, now - start)
    elif current_run and status in (JobStatus.IDLE, JobStatus.HELD):
        total = _num(ad, "LastRemoteWallClockTime", _num(ad, "RemoteWallClockTime"))
    return total


def command_line(ad: ClassAd) -> str:
    """The CMD column of condor_q and condor_history (``PRINTAS JOB_DESCRIPTION``): the job's
    description in parentheses when it has one (``MATCH_EXP_JobDescription``, else
    ``JobDescription``), otherwise the executable's base name and the arguments as the ad stores
    them (``Arguments``, HTCondor's V2 form, in which a space inside an argument is quoted:
    ``echo hello' 'world x``; else the old ``Args``), as ``ArgList::GetArgsStringForDisplay``."""
    cmd = _get(ad, "Cmd")
    if not isinstance(cmd, str):
        return ""
    description = _get(ad, "MATCH_EXP_JobDescription")
    if not isinstance(description, str):
        description = _get(ad, "JobDescription")
    if isinstance(description, str) and description:
        return f"({description})"
    args = _get(ad, "Arguments")
    if not isinstance(args, str):
        args = _get(ad, "Args")
    base = os.path.basename(cmd)
    return f"{base} {args}" if isinstance(args, str) and args else base


def size_mb(ad: ClassAd) -> str:
    """SIZE: MemoryUsage in MB if known, else ImageSize (KiB) in MB, one decimal."""
    usage = _get(ad, "MemoryUsage")
    if isinstance(usage, (int, float)) and not isinstance(usage, bool):
        return f"{usage:.1f}"
    return f"{_num(ad, 'ImageSize') / 1024:.1f}"


def job_rows(ads: Iterable[ClassAd], now: float, current_run: bool = False) -> list[tuple]:
    """``-nobatch`` rows."""
    return [(job_id(ad), _get(ad, "Owner", "?"), short_date(_num(ad, "QDate")),
             duration(run_time(ad, now, current_run)),
             _letter(_status(ad)), int(_num(ad, "JobPrio")), size_mb(ad), command_line(ad)) for ad in ads]


def run_rows(ads: Iterable[ClassAd], now: float, current_run: bool = False) -> list[tuple]:
    """``-run`` rows (running jobs and where they run)."""
    return [(job_id(ad), _get(ad, "Owner", "?"), short_date(_num(ad, "QDate")),
             duration(run_time(ad, now, current_run)),
             _get(ad, "RemoteHost", "") or "") for ad in ads]


def hold_rows(ads: Iterable[ClassAd]) -> list[tuple]:
    """``-hold`` rows (held jobs, since when, the hold code and subcode, and why)."""
    return [(job_id(ad), _get(ad, "Owner", "?"), short_date(_num(ad, "EnteredCurrentStatus")), code_sub(ad),
             _get(ad, "HoldReason", "") or "") for ad in ads]


def owner_of(ad: ClassAd) -> str:
    """The OWNER column: ``Owner``, ``??`` when the ad has none."""
    owner = _get(ad, "Owner")
    return str(owner) if owner is not None else "??"


def code_sub(ad: ClassAd) -> str:
    """condor_q's ``CODE/SUB`` column: ``HoldReasonCode`` as ``%4d`` (``?`` if none), then
    ``/HoldReasonSubCode`` as ``/%-3d`` (a space if none)."""
    code, sub = _get(ad, "HoldReasonCode"), _get(ad, "HoldReasonSubCode")
    left = f"{code:4d}" if isinstance(code, int) and not isinstance(code, bool) else "   ?"
    right = f"/{sub:<3d}" if isinstance(sub, int) and not isinstance(sub, bool) else " "
    return left + right


def history_rows(ads: Iterable[ClassAd], now: float) -> list[tuple]:
    """condor_history's default rows."""
    rows = []
    for ad in ads:
        completed = _num(ad, "CompletionDate") or (_num(ad, "EnteredCurrentStatus") if _status(ad) == 3 else 0)
        rows.append((job_id(ad), _get(ad, "Owner", "?"), short_date(_num(ad, "QDate")),
                     duration(_num(ad, "RemoteWallClockTime", _num(ad, "RemoteUserCpu"))), _letter(_status(ad)),
                     short_date(completed) if completed else "???", command_line(ad)))
    return rows


_SCHEDULER_UNIVERSE = 7


@dataclass
class _Batch:
    owner: str
    name: str
    submitted: float = 0.0
    states: dict[int, int] = field(default_factory=dict)
    ids: list[tuple[int, int]] = field(default_factory=list)
    # per cluster: [TotalSubmitProcs (0: unknown), procs in the results, next materialized proc or None]
    clusters: dict[int, list] = field(default_factory=dict)
    dag_total: int = 0
    dag_done: int = 0


def _ids_text(ids: Sequence[tuple[int, int]]) -> str:
    ids = sorted(ids)
    first, last = ids[0], ids[-1]
    if first == last:
        return f"{first[0]}.{first[1]}"
    if first[0] == last[0]:
        return f"{first[0]}.{first[1]}-{last[1]}"
    return f"{first[0]}.{first[1]} ... {last[0]}.{last[1]}"


def _batch_name(ad: ClassAd, cluster: int) -> str:
    """render_batch_name: JobBatchName, ``DAG: N`` for a DAGMan job, ``NODE: name``, ``ID: N``."""
    name = _get(ad, "JobBatchName")
    if isinstance(name, str):
        return name
    if _num(ad, "JobUniverse") == _SCHEDULER_UNIVERSE:
        return f"DAG: {cluster}"
    node = _get(ad, "DAGNodeName")
    if isinstance(node, str) and _get(ad, "DAGManJobId") is not None:
        return f"NODE: {node}"
    return f"ID: {cluster}"


def batch_rows(ads: Iterable[ClassAd], partial: bool = False, show_hold: bool = False
               ) -> tuple[tuple[str, ...], list[tuple]]:
    """The default (batch) view: headers (HOLD added when a job is held) and one row per batch.

    As condor_q's ``reduce_results``: a batch is an owner's ``JobBatchName``, a DAG with its
    nodes, or one cluster.  RUN counts running jobs (and those transferring output), IDLE
    idle and suspended ones, HOLD held ones.  TOTAL is the sum of the clusters'
    ``TotalSubmitProcs`` (a DAG's ``DAG_NodesTotal``), DONE the procs of those clusters that
    are no longer in the queue (a DAG's ``DAG_NodesDone``); both are ``_`` when a cluster of
    the batch has no ``TotalSubmitProcs``, and DONE is ``_`` when ``partial`` (the query
    named procs or had a constraint, so absent procs need not have finished).

    Returns:
        ``(headers, rows)``.
    """
    ads = list(ads)
    parent_of = {}
    for ad in ads:
        dagman = _get(ad, "DAGManJobId")
        if isinstance(dagman, int) and not isinstance(dagman, bool):
            parent_of[int(_num(ad, "ClusterId"))] = dagman
    present = {int(_num(ad, "ClusterId")) for ad in ads}
    dag_parents = set(parent_of.values())

    def top_dag(cluster: int) -> int | None:
        top, seen = None, set()
        while cluster in parent_of and parent_of[cluster] in present and cluster not in seen:
            seen.add(cluster)
            top = cluster = parent_of[cluster]
        return top

    batches: dict[tuple, _Batch] = {}
    for ad in sorted(ads, key=lambda a: (int(_num(a, "ClusterId")), int(_num(a, "ProcId")))):
        owner = str(_get(ad, "Owner", "?"))
        cluster = int(_num(ad, "ClusterId"))
        proc = int(_num(ad, "ProcId"))
        dagman = top_dag(cluster)
        if dagman is None and (cluster in dag_parents or _num(ad, "JobUniverse") == _SCHEDULER_UNIVERSE):
            dagman = cluster
        if dagman is not None:
            key: tuple = ("dag", dagman)
        else:
            name = _get(ad, "JobBatchName")
            key = ("name", owner, name) if isinstance(name, str) else ("cluster", cluster)
        batch = batches.get(key)
        if batch is None:
            batch = batches[key] = _Batch(owner, _batch_name(ad, cluster))
        qdate = _num(ad, "QDate")
        if qdate and (not batch.submitted or qdate < batch.submitted):
            batch.submitted = qdate
        if _num(ad, "JobUniverse") == _SCHEDULER_UNIVERSE:
            batch.dag_total += int(_num(ad, "DAG_NodesTotal"))
            batch.dag_done += int(_num(ad, "DAG_NodesDone"))
            batch.clusters.setdefault(-cluster, None)
            continue
        status = _status(ad)
        batch.states[status] = batch.states.get(status, 0) + 1
        batch.ids.append((cluster, proc))
        if key[0] == "dag":
            continue  # a DAG's nodes count through the DAG's own totals
        info = batch.clusters.setdefault(cluster, [0, 0, None])
        info[0] = max(info[0], int(_num(ad, "TotalSubmitProcs")))
        info[1] += 1
        materialized = _get(ad, "JobMaterializeNextProcId")
        if isinstance(materialized, int) and not isinstance(materialized, bool):
            info[2] = materialized
    any_held = any(b.states.get(JobStatus.HELD) for b in batches.values())
    with_hold = any_held or show_hold
    headers = BATCH_HEADERS if not with_hold else BATCH_HEADERS[:6] + ("HOLD",) + BATCH_HEADERS[6:]

    def cell(n: int) -> str:
        return str(n) if n > 0 else "_"

    rows = []
    for batch in batches.values():
        total, done, unknown = batch.dag_total, batch.dag_done, False
        for info in batch.clusters.values():
            if info is None:
                continue
            submitted, here, materialized = info
            if not submitted:
                unknown = True
                continue
            total += submitted
            if not partial:
                done += (materialized - here) if materialized is not None else (submitted - here)
        if unknown:
            total = done = 0
        S = batch.states
        running = S.get(JobStatus.RUNNING, 0) + S.get(JobStatus.TRANSFERRING_OUTPUT, 0)
        idle = S.get(JobStatus.IDLE, 0) + S.get(JobStatus.SUSPENDED, 0)
        row = [batch.owner, batch.name, short_date(batch.submitted), cell(done), cell(running), cell(idle)]
        if with_hold:
            row.append(cell(S.get(JobStatus.HELD, 0)))
        row += [cell(total), _ids_text(batch.ids) if batch.ids else ""]
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


IO_HEADERS = ("ID", "OWNER", "RUNS", "ST", "INPUT", "OUTPUT", "RATE", "MISC")
GOODPUT_HEADERS = ("ID", "OWNER", "SUBMITTED", "RUN_TIME", "GOODPUT", "CPU_UTIL", "Mb/s")


def readable_bytes(value) -> str:
    """HTCondor's ``metric_units``: ``%.1f`` and ``B ``/``KB``/``MB``/``GB``/``TB`` in powers of 1024."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "        "
    units = ("B ", "KB", "MB", "GB", "TB")
    power = 0
    value = float(value)
    while value > 1024.0 and power < len(units) - 1:
        value /= 1024.0
        power += 1
    return f"{value:.1f} {units[power]}"


def io_wanted(ad: ClassAd) -> bool:
    """condor_q -io's WHERE: jobs transferring or queued to transfer files (or standard universe)."""
    return (_num(ad, "JobUniverse") == 1 or _get(ad, "TransferQueued") is True
            or _get(ad, "TransferringOutput") is True or _get(ad, "TransferringInput") is True)


def io_rows(ads: Iterable[ClassAd]) -> list[tuple]:
    """``-io`` rows: ``ID OWNER RUNS ST INPUT OUTPUT RATE MISC`` (jobIO_PrintFormat)."""
    rows = []
    for ad in ads:
        if not io_wanted(ad):
            continue
        recvd, sent = _get(ad, "BytesRecvd"), _get(ad, "BytesSent")
        both = recvd + sent if all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                   for v in (recvd, sent)) else None
        flags = [name for name, attr in (("in", "TransferringInput"), ("out", "TransferringOutput"),
                                         ("queued", "TransferQueued")) if _get(ad, attr) is True]
        runs = _get(ad, "NumJobStarts")
        rows.append((job_id(ad), _get(ad, "Owner", "??"), runs if isinstance(runs, int) else "?",
                     _letter(_status(ad)), readable_bytes(recvd), readable_bytes(sent), readable_bytes(both),
                     f" transfer={','.join(flags)}" if flags else ""))
    return rows


def goodput_rows(ads: Iterable[ClassAd], now: float, current_run: bool = True) -> list[tuple]:
    """``-goodput`` rows (condor_q before 25.x): the share of the run time saved in checkpoints
    (``JobCommittedTime`` / ``RemoteWallClockTime``), CPU use of that work, and network Mb/s;
    ``[?????]`` where a job has not checkpointed.  RUN_TIME is wall-clock time, as condor_q's
    ``CPU_TIME`` column printed it without ``-cputime``."""
    rows = []
    for ad in ads:
        status = _status(ad)
        wall = _num(ad, "RemoteWallClockTime")
        bday, last_ckpt = _num(ad, "ShadowBday"), _num(ad, "LastCkptTime")
        if status in (JobStatus.RUNNING, JobStatus.TRANSFERRING_OUTPUT, JobStatus.SUSPENDED) and bday \
                and last_ckpt > bday:
            wall += last_ckpt - bday
        committed = _num(ad, "JobCommittedTime")
        goodput = f"{min(100.0, committed / wall * 100.0):6.1f}%" if wall > 0 and committed >= 0 else " [?????]"
        cpu = _get(ad, "RemoteUserCpu")
        util = "[??????]"
        if isinstance(cpu, (int, float)) and not isinstance(cpu, bool) and committed > 0:
            share = cpu / committed * 100.0
            if share >= 0:
                util = f"{min(share, 100.0):6.1f}%"
        total_mbits = (_num(ad, "BytesSent") + _num(ad, "BytesRecvd")) * 8 / (1024 * 1024)
        mbps = f"{total_mbits / wall:6.2f}" if total_mbits > 0 and wall > 0 else "[????]"
        rows.append((job_id(ad), _get(ad, "Owner", "??"), short_date(_num(ad, "QDate")),
                     duration(run_time(ad, now, current_run)), goodput, util, mbps))
    return rows


DAG_HEADERS = ("ID", "OWNER/NODENAME", "SUBMITTED", "RUN_TIME", "ST", "PRI", "SIZE", "CMD")


def dag_rows(ads: Iterable[ClassAd], now: float, current_run: bool = False) -> list[tuple]:
    """``-nobatch -dag`` rows: each DAGMan job followed by its nodes' jobs, a node named
    `` |-NodeName`` (one more space per level of sub-DAG) instead of its owner."""
    ads = sorted(ads, key=lambda a: (int(_num(a, "ClusterId")), int(_num(a, "ProcId"))))
    clusters = {int(_num(ad, "ClusterId")) for ad in ads}
    children: dict[int, list[ClassAd]] = {}
    roots = []
    for ad in ads:
        parent = _get(ad, "DAGManJobId")
        if isinstance(parent, int) and not isinstance(parent, bool) and parent in clusters \
                and parent != int(_num(ad, "ClusterId")):
            children.setdefault(parent, []).append(ad)
        else:
            roots.append(ad)
    rows: list[tuple] = []
    done: set[int] = set()

    def walk(ad: ClassAd, depth: int) -> None:
        owner = _get(ad, "Owner", "?")
        node = _get(ad, "DAGNodeName")
        name = " " * depth + "|-" + node if depth and isinstance(node, str) else owner
        [row] = job_rows([ad], now, current_run)
        rows.append((row[0], name) + row[2:])
        cluster = int(_num(ad, "ClusterId"))
        if cluster in done:
            return
        done.add(cluster)
        for child in children.get(cluster, []):
            walk(child, depth + 1)

    for ad in roots:
        walk(ad, 0)
    return rows

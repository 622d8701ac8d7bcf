"""A running job's sandbox on this machine: condor_tail, condor_ssh_to_job and condor_who.

Theory of operation
-------------------
HTCondor's condor_tail and condor_ssh_to_job ask the schedd, which asks the starter running
the job. htc's pools live on one host, so the tools find the sandbox themselves and read it
with the rights of the user who runs them:

* the schedd says whether the job runs (``JobStatus == 2``) and where (``RemoteHost``);
* the startd makes each sandbox as ``dir_<pid>_<n>`` under its execute directory (EXECUTE, or
  the per-pool directory under ``/var/lib/htc/execute`` a root startd moves to when EXECUTE
  cannot be reached by the jobs' users: :mod:`htc.daemons.execute_dir`) and writes the job's ad
  there as ``.job.ad`` (owned by the startd's account: an ad file the job replaced is not
  believed); the sandbox whose ad has the job's ``ClusterId``/``ProcId`` (and
  ``GlobalJobId`` when both carry one) is the job's;
* the job's processes are those of the sandbox's user whose working directory is the sandbox;
  the oldest is the job's main process (its pid and its environment).

A sandbox is mode 0700 and owned by the user the job runs as (a slot account such as
``htc-slot1`` when the pool runs as root), so only that user and root can look inside; anyone
else is told so (:class:`SandboxUnreadable`) rather than shown nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from htc.classad import ClassAd
from htc.client import jobs, request
from htc.errors import UsageError
from htc.wire.transport import Transport

__all__ = ["RunningJob", "SandboxUnreadable", "execute_dirs", "sandboxes", "find_running_job", "job_processes",
           "running_on_this_machine", "startd_slots",
           "STDOUT_NAME", "STDERR_NAME"]

STDOUT_NAME = "_condor_stdout"
STDERR_NAME = "_condor_stderr"
JOB_AD_NAME = ".job.ad"
#: where a root startd makes its per-pool execute directory (htc.daemons.execute_dir)
SHARED_EXECUTE_ROOT = Path("/var/lib/htc/execute")
_JOB_ID = re.compile(r"^(\d+)(?:\.(\d+))?$")


class SandboxUnreadable(UsageError):
    """The job's sandbox exists but the caller may not look inside (another user's job)."""


@dataclass
class RunningJob:
    """A job running on this machine and its sandbox.

    ``ad`` is the schedd's job ad (None when the job was found only by its sandbox); ``sandbox_ad``
    the ``.job.ad`` the starter wrote; ``uid``/``gid`` own the sandbox (the user the job runs as);
    ``pid`` is the job's main process (None when it cannot be seen).
    """

    job_id: str
    sandbox: Path
    uid: int
    gid: int
    ad: ClassAd | None = None
    sandbox_ad: ClassAd | None = None
    pid: int | None = None
    pids: list[int] = field(default_factory=list)

    @property
    def user(self) -> str:
        """The account the job runs as (its uid when it has no name)."""
        import pwd

        try:
            return pwd.getpwuid(self.uid).pw_name
        except KeyError:
            return str(self.uid)

    def stream_path(self, stderr: bool = False) -> Path:
        """The file the job's stdout (stderr) goes to while it runs: the sandbox's capture, or
        the job's ``Out`` (``Err``) itself when the job writes it in place (no file transfer)."""
        capture = self.sandbox / (STDERR_NAME if stderr else STDOUT_NAME)
        if capture.exists():
            return capture
        ad = self.ad or self.sandbox_ad or ClassAd()
        target = ad.get("Err" if stderr else "Out")
        if isinstance(target, str) and target and target != "/dev/null":
            path = Path(target)
            if not path.is_absolute() and isinstance(ad.get("Iwd"), str):
                path = Path(ad["Iwd"]) / path
            return path
        return capture


def execute_dirs(home: Path | str | None = None) -> list[Path]:
    """The directories the startd of the pool under ``home`` (default: ``$HTC_HOME``'s) may make
    sandboxes in (the existing ones)."""
    from htc.config import load_config
    from htc.daemons.service import home_dir

    if home is None:
        home, env = home_dir(), None
    else:
        env = {**os.environ, "HTC_HOME": str(home)}
    config = load_config("STARTD", env=env)
    candidates = []
    configured = config.param("EXECUTE")
    if configured:
        candidates.append(Path(str(configured)))
    # the per-pool directory a root startd moves to (htc.daemons.execute_dir.shared_execute_dir)
    digest = hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:16]
    candidates.append(SHARED_EXECUTE_ROOT / digest)
    return [p for p in dict.fromkeys(candidates) if p.is_dir()]


def _read_ad(box: Path) -> ClassAd | None:
    """The sandbox's ``.job.ad`` (old syntax, as the starter writes it), or None when unreadable."""
    import stat

    from htc.classad import ClassAdParseError, parseOne

    try:
        st = (box / JOB_AD_NAME).lstat()
        if not stat.S_ISREG(st.st_mode) or st.st_uid != box.parent.stat().st_uid:
            return ClassAd()  # not the starter's: the job made it (a job may write in its sandbox)
        return parseOne((box / JOB_AD_NAME).read_text())
    except (OSError, UnicodeDecodeError):
        return None
    except ClassAdParseError:  # half written: the starter is still making it
        return ClassAd()


def sandboxes(dirs: Iterable[Path] | None = None) -> list[tuple[Path, ClassAd | None]]:
    """Every ``dir_*`` sandbox under ``dirs`` (default: :func:`execute_dirs`) with its ``.job.ad``
    (None where the caller may not read it)."""
    out = []
    for parent in execute_dirs() if dirs is None else dirs:
        try:
            entries = sorted(parent.glob("dir_*"))
        except OSError:
            continue
        for box in entries:
            if box.is_dir():
                out.append((box, _read_ad(box)))
    return out


def job_processes(sandbox: Path, uid: int) -> list[int]:
    """The pids of ``uid``'s processes working in ``sandbox``, oldest first (those the caller can see)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["uids", "create_time"]):
        try:
            if proc.info["uids"] is None or proc.info["uids"].real != uid:
                continue
            cwd = proc.cwd()
        except (psutil.Error, OSError):
            continue
        if cwd == str(sandbox) or cwd.startswith(f"{sandbox}/"):
            found.append((proc.info["create_time"] or 0.0, proc.pid))
    return [pid for _, pid in sorted(found)]


def _matches(ad: ClassAd, cluster: int, proc: int, global_id: str | None) -> bool:
    if ad.get("ClusterId") != cluster or ad.get("ProcId") != proc:
        return False
    theirs = ad.get("GlobalJobId")
    return not (global_id and isinstance(theirs, str) and theirs != global_id)


def find_running_job(job: str, *, transport: Transport | None = None, home: Path | str | None = None,
                     dirs: Iterable[Path] | None = None) -> RunningJob:
    """The running job ``job`` (``CLUSTER.PROC``; ``CLUSTER`` means its first running proc) and
    its sandbox on this machine.

    ``transport`` reaches the schedd; ``home`` is the pool's HTC_HOME, whose configuration says
    where its startd makes sandboxes (default: ``$HTC_HOME``); ``dirs`` names those directories
    outright.

    Raises:
        UsageError: ``job`` is not a job id, the job is not in the queue or not running, or its
            sandbox is not on this machine.
        SandboxUnreadable: the sandbox belongs to another user (only root and that user may look).
        DaemonUnreachable: the schedd is not running.
    """
    found = _JOB_ID.match(job.strip())
    if not found:
        raise UsageError(f"{job!r} is not a job id; give CLUSTER.PROC (as htc q shows it)")
    cluster = int(found.group(1))
    constraint = f"ClusterId == {cluster}" + (f" && ProcId == {found.group(2)}" if found.group(2) else "")
    ads = jobs.query(constraint, transport=transport)
    if not ads:
        raise UsageError(f"job {job} is not in the queue (htc history {job} shows finished jobs)")
    running = [ad for ad in ads if ad.get("JobStatus") in (2, 6, 7)]  # running, transferring, suspended
    if not running:
        from htc.job_codes import JobStatus

        ad = ads[0]
        try:
            state = JobStatus(ad.get("JobStatus")).name.lower()
        except ValueError:
            state = f"in status {ad.get('JobStatus')}"
        raise UsageError(f"job {ad.get('ClusterId')}.{ad.get('ProcId')} is not running "
                         f"(it is {state}); there is no sandbox to look at")
    ad = running[0]
    job_id = f"{ad['ClusterId']}.{ad['ProcId']}"
    global_id = ad.get("GlobalJobId") if isinstance(ad.get("GlobalJobId"), str) else None
    unreadable = []
    for box, box_ad in sandboxes(execute_dirs(home) if dirs is None else dirs):
        if box_ad is None:
            if not os.access(box, os.R_OK | os.X_OK):
                unreadable.append(box)
            continue
        if _matches(box_ad, ad["ClusterId"], ad["ProcId"], global_id):
            st = box.stat()
            pids = job_processes(box, st.st_uid)
            return RunningJob(job_id, box, st.st_uid, st.st_gid, ad, box_ad, pids[0] if pids else None, pids)
    if unreadable:
        owners = sorted({_owner_name(b) for b in unreadable})
        raise SandboxUnreadable(
            f"job {job_id} runs on {ad.get('RemoteHost', 'a slot')}, but its sandbox is not readable by you: "
            f"the sandboxes here belong to {', '.join(owners)}, the accounts jobs run as, and only they and root "
            "may look inside (run this as root)")
    raise UsageError(f"job {job_id} runs on {ad.get('RemoteHost', 'a slot')}, but no sandbox of it is on this "
                     "machine yet (it may be starting; try again in a moment)")


def _owner_name(box: Path) -> str:
    import pwd

    try:
        uid = box.stat().st_uid
    except OSError:
        return "?"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def running_on_this_machine(*, home: Path | str | None = None, dirs: Iterable[Path] | None = None
                            ) -> dict[str, RunningJob]:
    """``{"cluster.proc": RunningJob}`` of the sandboxes here the caller can read (condor_who's PIDs
    and programs; the schedd is not asked)."""
    out: dict[str, RunningJob] = {}
    for box, box_ad in sandboxes(execute_dirs(home) if dirs is None else dirs):
        if box_ad is None or not isinstance(box_ad.get("ClusterId"), int):
            continue
        job_id = f"{box_ad['ClusterId']}.{box_ad.get('ProcId', 0)}"
        try:
            st = box.stat()
        except OSError:
            continue
        pids = job_processes(box, st.st_uid)
        out[job_id] = RunningJob(job_id, box, st.st_uid, st.st_gid, None, box_ad, pids[0] if pids else None, pids)
    return out


def startd_slots(*, name: str = "startd", transport: Transport | None = None) -> list[ClassAd]:
    """The slot ads of the startd listening as ``name`` that run a job (condor_who's rows)."""
    ads = request.query_collector(request.AdType.Startd, "JobId =!= undefined", transport=transport)
    return [ad for ad in ads if ad.get("MyAddress", ad.get("StartdIpAddr")) == name]

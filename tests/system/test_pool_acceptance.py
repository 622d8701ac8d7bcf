"""Issue 5's acceptance tests: a personal pool doing what a user does with one, end to end.

Each test runs a real master with its collector, negotiator, startd and schedd in a temporary
HTC_HOME (:class:`poolutil.Pool`), real jobs run by the startd's starters, and checks what a
user would check: the outputs, the job's user log read by ``htcondor2.JobEventLog`` (HTCondor's
own reader, a test-only oracle), ``htc q`` and ``htc history``.

* 200 echo jobs complete, every output and event is right, the queue empties into the history;
* a job no slot can run stays idle through negotiation cycles and ``htc q -better-analyze``
  names the clause that rules the slots out;
* ``kill -9`` of the startd under a running job: the master restarts it, the job runs again and
  completes exactly once (the killed run does not finish behind everybody's back);
* the owner comes back to a desktop (``use POLICY : Desktop``, its timers shortened): the job
  is suspended, vacated once MaxSuspendTime has passed, and completes on another machine;
  with the owner gone again the slot is Unclaimed.

The owner test needs two execute machines, because the sensor override file that plays the
owner is machine-wide (as the keyboard is). The master runs one startd; the test runs a second
one (:meth:`poolutil.Pool.spawn`) with the local name STARTD2, so ``STARTD2.EXECUTE`` and
``STARTD2.SENSOR_OVERRIDE_FILE`` give it its own sandboxes and owner, in a UTS namespace whose
host name is ``spare``: the startd names its slots ``slotN@<host name>``, so two startds under
one host name would advertise the same slot names. It shares this machine's file system and
sockets, as a second desktop sharing the submit machine's file system would.

``kill -9`` of the schedd under 20 running jobs is in ``test_pool_jobs.py``; malformed
messages and submit files in ``test_pool_schedd.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import htcondor2
import psutil
import pytest

from htc.cli.main import main
from htc.client import query_collector
from htc.config.hostname import full_hostname
from htc.daemons.startd.sensors import write_sensor_override
from htc.client import history
from htc.wire import messages as m
from poolutil import Pool, wait_for

pytestmark = pytest.mark.slow

T = htcondor2.JobEventType


class Pools:
    """The pools of one test (call it to start one, or :meth:`adopt` one to start yourself);
    every one is stopped, and its processes killed, when the test ends."""

    def __init__(self):
        self.pools: list[Pool] = []

    def adopt(self, pool: Pool) -> Pool:
        self.pools.append(pool)
        return pool

    def __call__(self, *args, **kwargs) -> Pool:
        return self.adopt(Pool(*args, **kwargs)).start()


@pytest.fixture
def pools():
    owned = Pools()
    try:
        yield owned
    finally:
        for pool in owned.pools:
            pool.stop()


def use_pool(pool: Pool, monkeypatch) -> None:
    """Make the in-process ``htc`` tools talk to ``pool``, from its work directory."""
    monkeypatch.setenv("HTC_HOME", str(pool.home))
    monkeypatch.chdir(pool.work)


def htc(capsys, *argv: str) -> str:
    """Run one ``htc`` command in-process; return its standard output (it must succeed)."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    assert status == 0, f"htc {' '.join(argv)} exited {status}: {err}"
    return out


def finished(pool: Pool, cluster: int) -> list:
    return history(f"ClusterId == {cluster}", path=pool.home / "spool" / "job_queue.db")


# --- 1. two hundred jobs ------------------------------------------------------------------------------


def test_200_echo_jobs_complete_with_their_outputs_events_and_history(pools, monkeypatch, capsys):
    pool = pools("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD", NUM_CPUS="8")
    use_pool(pool, monkeypatch)
    n = 200
    (pool.work / "echo.sub").write_text(
        "executable = /bin/echo\narguments = $(Process)\noutput = out.$(Process)\nerror = err.$(Process)\n"
        f"log = echo.log\nqueue {n}\n")
    out = htc(capsys, "submit", "echo.sub")
    cluster = int(out.rsplit("cluster ", 1)[1].rstrip(".\n"))
    assert out.endswith(f"{n} job(s) submitted to cluster {cluster}.\n")

    events = pool.log_events(pool.work / "echo.log", 3 * n, timeout=120)
    kinds: dict[int, list] = {}
    for event in events:
        assert event.cluster == cluster
        kinds.setdefault(event.proc, []).append(event)
    assert sorted(kinds) == list(range(n))
    for proc, evs in kinds.items():
        assert [e.type for e in evs] == [T.SUBMIT, T.EXECUTE, T.JOB_TERMINATED], (proc, evs)
        assert evs[2]["TerminatedNormally"] is True and evs[2]["ReturnValue"] == 0, (proc, evs[2])
        assert (pool.work / f"out.{proc}").read_text() == f"{proc}\n"
        assert (pool.work / f"err.{proc}").read_text() == ""

    # htc q shows them leave; htc history has every one of them, completed with exit code 0
    wait_for(lambda: htc(capsys, "q", "-af", "ProcId", "-constraint", f"ClusterId == {cluster}") == "",
             what=f"cluster {cluster} to leave the queue")
    assert "Total for query: 0 jobs" in htc(capsys, "q", str(cluster))
    rows = htc(capsys, "history", "-af", "ProcId", "JobStatus", "ExitCode", "-constraint",
               f"ClusterId == {cluster}").splitlines()
    assert sorted(rows, key=lambda r: int(r.split()[0])) == [f"{p} 4 0" for p in range(n)]


# --- 2. a job no slot can run -------------------------------------------------------------------------


def negotiation_cycles(pool: Pool) -> int:
    ads = query_collector(m.AdType.Negotiator, transport=pool.transport, timeout=5)
    return max((int(ad.get("NumNegotiationCycles", 0)) for ad in ads), default=0)


def test_a_job_no_slot_can_run_stays_idle_and_better_analyze_names_the_clause(pools, monkeypatch, capsys):
    pool = pools("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD")
    use_pool(pool, monkeypatch)
    wait_for(lambda: pool.slots(), what="the startd's slots in the collector")
    (pool.work / "windows.sub").write_text(
        'executable = /bin/true\nrequirements = OpSys == "WINDOWS"\nlog = windows.log\nqueue\n')
    (pool.work / "ok.sub").write_text("executable = /bin/true\nlog = ok.log\nqueue\n")
    windows = int(htc(capsys, "submit", "-terse", "windows.sub").split(".")[0])
    before = negotiation_cycles(pool)
    # A job that fits runs meanwhile: the negotiator is matching, just not the misfit.
    htc(capsys, "submit", "ok.sub")
    assert pool.log_events(pool.work / "ok.log", 3)[-1].type == T.JOB_TERMINATED
    wait_for(lambda: negotiation_cycles(pool) >= before + 3, what="three more negotiation cycles")

    assert htc(capsys, "q", f"{windows}.0", "-af", "JobStatus", "NumJobStarts") == "1 0\n"
    assert [e.type for e in htcondor2.JobEventLog(str(pool.work / "windows.log")).events(stop_after=0)] == \
        [T.SUBMIT]
    out = htc(capsys, "q", "-better-analyze", f"{windows}.0")
    assert f"The Requirements expression for job {windows}.000" in out
    why = out.split(f"Why job {windows}.0 is not running:")[1]
    assert "no slot satisfies" in why and 'OpSys == "WINDOWS"' in why, out
    slots = len(pool.slots())
    assert f'OpSys == "WINDOWS" rules out {slots} of {slots} slots' in out, out


# --- 3. kill -9 of the startd -------------------------------------------------------------------------


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_kill_9_of_the_startd_under_a_running_job_runs_it_again_to_one_completion(pools):
    pool = pools("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD")
    # The job runs in the shared work directory (no file transfer) and leaves a trace of each
    # start and of each run that gets to its end, so a run finishing unseen would show.
    job = ('executable = /bin/sh\narguments = "-c \'echo $$ >> starts; sleep 8; echo done >> ends\'"\n'
           f"should_transfer_files = NO\ninitialdir = {pool.work}\nlog = {pool.work}/k.log\n"
           "+JobLeaseDuration = 60\nqueue\n")
    cluster = pool.submit(job).cluster_id
    starts, ends = pool.work / "starts", pool.work / "ends"
    [first] = wait_for(lambda: starts.exists() and starts.read_text().split(), what="the job to start")
    old = pool.status("STARTD").pid
    os.kill(old, signal.SIGKILL)
    pool.running_pid("STARTD", other_than=old)  # the master brings it back
    # The killed startd's job does not live on behind it, and the new startd clears its sandbox
    # and job cgroups.
    wait_for(lambda: not alive(int(first)), timeout=5, what=f"the first run (pid {first}) to end")
    wait_for(lambda: not leftovers_of(old, pool), timeout=20, what=f"startd {old}'s sandbox and cgroups removed")

    [row] = wait_for(lambda: finished(pool, cluster), timeout=60, what="the job in the history")
    assert row["JobStatus"] == 4 and row["ExitCode"] == 0 and row["NumJobStarts"] == 2
    # (The history commits before the schedd writes the user log, at the end of its turn: wait for it.)
    events = pool.log_events(pool.work / "k.log", until=lambda evs: any(e.type == T.JOB_TERMINATED for e in evs))
    counts = Counter(e.type for e in events)
    assert counts[T.EXECUTE] == 2 and counts[T.JOB_TERMINATED] == 1, counts
    [term] = [e for e in events if e.type == T.JOB_TERMINATED]
    assert term["TerminatedNormally"] is True and term["ReturnValue"] == 0
    assert events[-1].type == T.JOB_TERMINATED
    assert len(starts.read_text().split()) == 2
    assert ends.read_text() == "done\n", "exactly one run got to its end"


def leftovers_of(startd_pid: int, pool) -> list[Path]:
    """The sandboxes and job cgroups a startd with this pid made that still exist."""
    from htc.daemons.starter.limits import detect_cgroups

    layout = detect_cgroups()
    parents = [layout.base] if layout.version == 2 and layout.base else [p for _, p in layout.v1]
    found = [*pool.root.rglob(f"dir_{startd_pid}_*"), *Path("/var/lib/htc/execute").glob(f"*/dir_{startd_pid}_*")]
    for parent in parents:
        found += parent.glob(f"htc_dir_{startd_pid}_*")
    return found


# --- 5. the owner comes back --------------------------------------------------------------------------

MAX_SUSPEND = 4  # seconds a job may stay suspended before it is vacated (Desktop: 10 minutes)
AWAY = {"KeyboardIdle": 100000, "ConsoleIdle": 100000, "LoadAvg": 0.0}
AT_THE_KEYBOARD = {**AWAY, "KeyboardIdle": 0, "ConsoleIdle": 0}


def can_make_uts_namespaces() -> bool:
    try:
        return subprocess.run(["unshare", "--uts", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not can_make_uts_namespaces(),
                    reason="the second execute machine runs in a UTS namespace, which needs root (unshare --uts)")
def test_the_owner_returns_the_job_is_suspended_vacated_and_finishes_on_another_machine(pools):
    # Two desktops, each with a one-cpu partitionable slot and its own owner: this host, whose
    # startd the master runs, and "spare", a second startd under its own host name. The sensor
    # override file is machine-wide, like a keyboard, so each machine has its own.
    here = full_hostname()  # the name every daemon gives this host (htc.config.hostname)
    config = (f"use POLICY : Desktop\nMaxSuspendTime = {MAX_SUSPEND}\nMachineMaxVacateTime = 5\n"
              "STARTD2.EXECUTE = $(LOCAL_DIR)/execute2\n"
              "STARTD2.SENSOR_OVERRIDE_FILE = $(LOCAL_DIR)/sensor_override2\n")
    pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD", config=config, NUM_CPUS="1")
    overrides = {here: pool.home / "sensor_override", "spare": pool.home / "sensor_override2"}
    for path in overrides.values():
        write_sensor_override(AWAY, path)
    pools.adopt(pool).start()
    pool.spawn("startd", "startd2", local_name="STARTD2", hostname="spare")
    wait_for(lambda: {s["Name"] for s in pool.slots('State == "Unclaimed"')} == {f"slot1@{here}", "slot1@spare"},
             what="both desktops' slots Unclaimed")

    job = (f"executable = /bin/sleep\narguments = 8\nlog = {pool.work}/owner.log\nqueue\n")
    cluster = pool.submit(job).cluster_id
    log = pool.work / "owner.log"
    first = pool.log_events(log, 2)[1]
    assert first.type == T.EXECUTE
    desk = first["SlotName"].split("@", 1)[1]
    other = "spare" if desk == here else here
    write_sensor_override(AT_THE_KEYBOARD, overrides[desk])  # the owner is back at that desk

    # Suspended; after MaxSuspendTime PREEMPT holds: the startd continues the job to vacate it
    # (Claimed/Retiring, then Preempting/Vacating), which the log shows as unsuspended, evicted.
    wanted = [T.SUBMIT, T.EXECUTE, T.JOB_SUSPENDED, T.JOB_UNSUSPENDED, T.JOB_EVICTED, T.EXECUTE, T.JOB_TERMINATED]
    events = pool.log_events(log, until=lambda evs: evs and evs[-1].type == T.JOB_TERMINATED, timeout=40)
    events = [e for e in events if e.type != T.IMAGE_SIZE]
    assert [e.type for e in events] == wanted, [str(e.type) for e in events]
    suspended, evicted, second, done = events[2], events[4], events[5], events[6]
    # vacated only once it had been suspended for MaxSuspendTime (the log has 1-second stamps)
    assert evicted.timestamp - suspended.timestamp >= MAX_SUSPEND - 1, (suspended, evicted)
    assert second["SlotName"].endswith(f"@{other}")
    assert done["TerminatedNormally"] is True and done["ReturnValue"] == 0
    [row] = wait_for(lambda: finished(pool, cluster), what="the job in the history")
    assert row["JobStatus"] == 4 and row["NumJobStarts"] == 2 and row["LastRemoteHost"].endswith(f"@{other}")

    # While the owner is there the desk is the owner's; once the owner leaves it is Unclaimed.
    assert pool.slots(f'Name == "slot1@{desk}"')[0]["State"] == "Owner"
    write_sensor_override(AWAY, overrides[desk])
    wait_for(lambda: pool.slots(f'Name == "slot1@{desk}" && State == "Unclaimed"'),
             what=f"slot1@{desk} Unclaimed again")

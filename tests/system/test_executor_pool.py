"""HTCExecutor on a real personal pool: every call a job of the schedd, run by the startd's starter.

(The standard-contract suite runs on the pool too: tests/system/test_executor_contract.py.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from executor_contract import double, gate, wait_for
from executor_jobs import chatty, combine, flaky, stepper, talk_slowly, value_of, write_and_return
from executor_pool import pool  # noqa: F401 (the module's pool: a fixture)
from htc.classad import ClassAd
from htc.executors import (
    CallStatus, DependencyFailed, HTCExecutor, ImpossibleRequest, JobHeld, SessionError, VersionMismatch, attach,
)
from htc.wire import messages as m

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parents[1]



@pytest.fixture
def scratch(pool):
    path = Path(tempfile.mkdtemp(dir=pool.pool.work))
    path.chmod(0o777)
    return path


@pytest.fixture
def ex(pool):
    executor = HTCExecutor(**pool.executor_args())
    yield executor
    executor.shutdown(wait=True, cancel_futures=True)


def queued(pool, job_id: str) -> list[ClassAd]:
    cluster, proc = job_id.split(".")
    return pool.pool.jobs(f"ClusterId == {cluster} && ProcId == {proc}")


def test_calls_are_jobs_with_their_ad_output_and_analysis(ex, pool, scratch):
    future = ex.submit(chatty, 2)
    assert future.result(timeout=120) == 2
    assert future.stdout == "line 0\nline 1\n" and future.stderr == "to stderr\n"
    ad = future.classad()
    assert ad["HTCCallId"] == future.call_id and ad["HTCFunction"] == "executor_jobs.chatty"
    assert ad["WantPython"] is True and ad["JobUniverse"] == 5
    gate_path = scratch / "open"
    held = [ex.submit(gate, str(gate_path), i) for i in range(2)]
    wait_for(lambda: all(f.running() for f in held), what="both cpus busy")
    idle = ex.options(request_cpus=2).submit(double, 3)
    wait_for(lambda: idle.status is CallStatus.IDLE, what="third call idle")
    why = idle.why()
    assert f"job {idle.job_id} is idle" in why and "Requirements expression" in why
    gate_path.touch()
    assert idle.result(timeout=120) == 6


def test_streamed_output_reaches_future_stream_while_the_call_runs(ex):
    future = ex.options(stream_output=True).submit(talk_slowly, 3, 2.0)
    lines = future.stream()
    assert next(lines) == "step 0\n"
    first = time.monotonic()
    assert not future.done()  # the first line came while the call still runs on the pool
    assert list(lines) == ["step 1\n", "step 2\n"]
    # Printed 4 s after the first; without streaming all three would arrive together at the end.
    assert time.monotonic() - first > 2.0
    assert future.result(timeout=60) == 3
    assert future.stdout == "step 0\nstep 1\nstep 2\n"


def test_an_impossible_request_is_refused_before_anything_is_queued(ex, pool):
    wait_for(lambda: pool.pool.slots(), what="the startd's slot ad")
    with pytest.raises(ImpossibleRequest, match=r"no slot of the pool can ever run this call \(request_cpus=64"):
        ex.options(request_cpus=64).submit(double, 1)
    with pytest.raises(ImpossibleRequest, match="requirements"):
        ex.options(requirements='OpSys == "PLAN9"').submit(double, 1)
    assert pool.pool.jobs("HTCSession =!= undefined && RequestCpus == 64") == []


def test_cancel_removes_the_job_from_the_queue(ex, pool, scratch):
    gate_path = scratch / "open"
    held = [ex.submit(gate, str(gate_path), i) for i in range(2)]
    wait_for(lambda: all(f.running() for f in held), what="both cpus busy")
    pending = ex.submit(double, 4)
    wait_for(lambda: pending.job_id is not None, what="the pending call queued")
    assert queued(pool, pending.job_id)
    assert pending.cancel()
    wait_for(lambda: not queued(pool, pending.job_id), what="the cancelled job to leave the queue")
    gate_path.touch()
    assert [f.result(timeout=120) for f in held] == [0, 1]


def test_dependencies_and_retries_run_through_the_schedd(ex, scratch):
    parent = ex.submit(combine, 20, 1)
    child = ex.submit(combine, parent, parent)
    assert child.result(timeout=120) == 42
    counter = scratch / "runs"
    counter.mkdir()
    counter.chmod(0o777)
    assert ex.options(max_retries=2).submit(flaky, str(counter), 2).result(timeout=120) == 2
    broken = ex.submit(flaky, str(scratch), 99)
    dependant = ex.submit(value_of, broken)
    with pytest.raises(DependencyFailed, match="RuntimeError"):
        dependant.result(timeout=120)


def test_calls_share_the_calls_directory_unless_they_need_one_of_their_own(ex):
    calls = ex._spool.calls
    first = ex.submit(combine, 1, 2)  # files named after the call, in calls/
    own = ex.options(transfer_output_files=["made.txt"]).submit(write_and_return, "made.txt", first)
    last = ex.submit(combine, own, 10)
    assert last.result(timeout=120) == 13 and own.stdout == "wrote made.txt\n"
    assert not (calls / first.call_id).exists() and not (calls / last.call_id).exists()
    # Its call file became its result, which this anonymous session reused once read (below).
    assert not list(calls.glob(f"{first.call_id}.*")) and not list(calls.glob(f"{last.call_id}.*"))
    # A call with transfer_output_files gets a directory, where its files come back.
    assert (calls / own.call_id / "made.txt").read_text() == "made for 3\n"
    assert (calls / own.call_id / f"{first.call_id}.result").exists()  # its parent's result, as an input
    assert (calls / f"{own.call_id}.result").exists()  # and its own result where a flat child reads it


def test_an_anonymous_session_reuses_the_files_of_the_results_it_has_read(ex):
    calls = ex._spool.calls

    def spares() -> dict[str, int]:
        return {p.name: p.stat().st_ino for p in calls.glob(".spare-*")}

    first = ex.submit(combine, 1, 2)
    assert first.result(timeout=120) == 3
    assert not (calls / f"{first.call_id}.result").exists()
    [(name, inode)] = spares().items()
    # The next call is written into that file: call file, result, spare again; no new inode.
    second = ex.submit(combine, 3, 4)
    assert second.result(timeout=120) == 7
    assert list(spares().values()) == [inode] and not list(calls.glob(f"{second.call_id}.*"))
    # A result read (and its file reused) is still there for a child: written again from memory.
    child = ex.submit(combine, first, 10)
    assert child.result(timeout=120) == 13
    assert (calls / f"{first.call_id}.result").exists()
    # A result too big to keep in memory keeps its file (here the spare its call was written into).
    [inode] = spares().values()
    big = ex.submit(value_of, "x" * 40_000)
    assert len(big.result(timeout=120)) == 40_000
    assert (calls / f"{big.call_id}.result").stat().st_ino == inode and not spares()


def test_sessions_are_spread_over_the_disk_where_the_file_system_allows(ex):
    import array
    import fcntl

    from htc.executors.spool import _FS_IOC_GETFLAGS, _FS_TOPDIR_FL, spread_sessions

    root = ex._spool.path.parent
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
    except OSError:  # a file system without inode flags: nothing to set, and nothing failed
        flags = None
    finally:
        os.close(fd)
    assert flags is None or flags[0] & _FS_TOPDIR_FL
    spread_sessions(root / "not-yet" / "made")  # makes the directory; never fails for the flag
    assert (root / "not-yet" / "made").is_dir()


def test_infrastructure_failures_are_retried_and_shown_as_a_status(ex, pool, scratch):
    future = ex.options(transfer_input_files=[str(scratch / "missing.dat")], infrastructure_retries=1).submit(double, 1)
    with pytest.raises(JobHeld, match="HoldReasonCode 13") as info:
        future.result(timeout=120)
    assert info.value.code == 13 and "missing.dat" in info.value.reason
    steps = [(status, detail) for _, status, detail in future.history]
    assert any(s is CallStatus.RETRYING and "retry 1 of 1" in d for s, d in steps), steps
    assert steps[-1][0] is CallStatus.FAILED


def test_a_preempted_call_resumes_from_its_checkpoint_on_another_run(ex, pool, scratch):
    future = ex.options(checkpoint=True).submit(stepper, 150, str(scratch), 0.02)
    progress = scratch / "progress"

    def steps() -> int:
        text = progress.read_text() if progress.exists() else ""
        return int(text) if text.strip() else 0

    wait_for(lambda: steps() >= 20 or future.done(), limit=120,
             what=f"twenty steps ({future!r}, {future.history}, files {sorted(os.listdir(scratch))})")
    assert not future.done(), (future.history, future.exception())
    future.vacate()
    wait_for(lambda: future.evictions == 1, limit=120, what="the eviction")
    state = future.result(timeout=180)
    assert state["step"] == 150
    assert len(state["runs"]) == 2 and state["runs"][1] >= 20, state["runs"]
    assert future.evictions == 1 and future.status is CallStatus.COMPLETED


def test_a_version_mismatch_on_the_execute_side_names_the_package(pool, tmp_path):
    """The execute side's msgspec claims another version than the client's: the call is refused."""
    import msgspec

    site = Path(tempfile.mkdtemp(dir=pool.root))
    for info in Path(pool.environment.get("PYTHONPATH", "").split(":")[0] or "/nonexistent").glob("msgspec-*"):
        break
    else:
        import importlib.metadata as metadata

        info = Path(metadata.distribution("msgspec")._path)
    skewed = site / "msgspec-0.0.1.dist-info"
    skewed.mkdir()
    text = (info / "METADATA").read_text()
    (skewed / "METADATA").write_text(text.replace(f"Version: {msgspec.__version__}", "Version: 0.0.1"))
    for path in [site, skewed, skewed / "METADATA"]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    env = dict(pool.environment)
    env["PYTHONPATH"] = ":".join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    args = {**pool.executor_args(), "environment": env}
    with HTCExecutor(**args) as ex:
        future = ex.submit(value_of, msgspec.Struct)
        with pytest.raises(VersionMismatch, match=rf"msgspec {msgspec.__version__} on the submit side but 0.0.1 here"):
            future.result(timeout=120)
        assert future.status is CallStatus.FAILED


_CLIENT = """
import json, sys, time
sys.path.insert(0, {tests!r})
from executor_contract import gate
from executor_jobs import combine
from htc.executors import HTCExecutor

ex = HTCExecutor(name="sweep1", **{args!r})
fs = [ex.submit(gate, {gate!r}, i) for i in range(3)]
total = ex.submit(combine, fs[0], fs[2], extra=[fs[1]])
while any(f.job_id is None for f in fs):
    time.sleep(0.01)
print(json.dumps([f.job_id for f in fs]), flush=True)
if {detach!r}:
    ex.shutdown(wait=False)
else:
    time.sleep(600)
"""


def _client(pool, scratch, detach: bool) -> tuple[subprocess.Popen, list[str]]:
    args = pool.executor_args()
    args["pool"] = str(args["pool"])
    script = _CLIENT.format(tests=str(TESTS), args=args, gate=str(scratch / "open"), detach=detach)
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    return proc, json.loads(line)


def test_reconnection_after_the_client_is_killed(pool, scratch):
    proc, job_ids = _client(pool, scratch, detach=False)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert all(queued(pool, j) for j in job_ids), "the jobs outlive their client"
    (scratch / "open").touch()
    ex = attach("sweep1", **pool.executor_args())
    try:
        assert len(ex.futures) == 4
        assert [f.job_id for f in ex.futures[:3]] == job_ids
        assert [f.result(timeout=120) for f in ex.futures] == [0, 1, 2, 0 + 2 + 1]
        assert ex.futures[3].job_id is not None  # the dependant was submitted by the attached executor
    finally:
        ex.shutdown(wait=True)
    with pytest.raises(SessionError, match="in use"):
        with HTCExecutor(name="sweep1", **pool.executor_args()):
            attach("sweep1", **pool.executor_args())
    from htc.executors import forget, sessions

    assert any(s["name"] == "sweep1" for s in sessions())
    forget("sweep1")
    assert not any(s["name"] == "sweep1" for s in sessions())


def test_shutdown_without_waiting_detaches_a_named_session(pool, scratch):
    proc, job_ids = _client(pool, scratch, detach=True)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert all(queued(pool, j) for j in job_ids), "a detached session leaves its jobs running"
    (scratch / "open").touch()
    ex = attach("sweep1", **pool.executor_args())
    try:
        assert [f.result(timeout=120) for f in ex.futures] == [0, 1, 2, 3]
    finally:
        ex.shutdown(wait=True)
    from htc.executors import forget

    forget("sweep1")


def test_an_unnamed_session_removes_its_leftover_jobs_when_it_ends(pool, scratch):
    ex = HTCExecutor(**pool.executor_args())
    gate_path = scratch / "open"
    held = [ex.submit(gate, str(gate_path), i) for i in range(2)]
    wait_for(lambda: all(f.running() for f in held), what="both cpus busy")
    pending = [ex.submit(double, i) for i in range(2)]
    wait_for(lambda: all(f.job_id for f in pending), what="queued")
    session = ex.name
    gate_path.touch()
    ex.shutdown(wait=True, cancel_futures=True)
    assert all(f.cancelled() for f in pending)
    assert pool.pool.send(m.QueryJobs(constraint=f'HTCSession == "{session}"')).ads == ()


def test_calls_run_on_a_lane_worker_and_a_vacated_one_runs_again(ex, pool, scratch):
    # One worker runs call after call (a call lane): the same process answers each time.
    pids = [ex.submit(os.getpid).result(timeout=120) for _ in range(3)]
    assert len(set(pids)) == 1 and pids[0] != os.getpid()
    started, gate_path = scratch / "started", scratch / "open"
    future = ex.submit(gate, str(gate_path), "done", str(started))
    wait_for(lambda: started.exists() and future.running(), limit=120, what="the call running on its lane")
    assert int(started.read_text()) == pids[0]
    ad = future.classad()
    assert ad["HTCLane"] is True and ad["JobStatus"] == 2 and ad["RemoteHost"].startswith("slot")
    started.unlink()
    future.vacate()  # stops the worker, as a job's process is stopped; the call runs again
    wait_for(lambda: future.evictions == 1 and started.exists(), limit=120, what="the eviction and the rerun")
    assert int(started.read_text()) != pids[0]
    gate_path.touch()
    assert future.result(timeout=120) == "done" and future.evictions == 1


def test_kill_9_of_the_schedd_under_a_lane_runs_its_call_again_and_frees_the_slot(pool, scratch):
    ex = HTCExecutor(**pool.executor_args())
    try:
        started, gate_path = scratch / "started", scratch / "open"
        future = ex.submit(gate, str(gate_path), "done", str(started))
        wait_for(lambda: started.exists() and future.running(), limit=120, what="the call running on its lane")
        first_worker = int(started.read_text())
        started.unlink()
        old = pool.pool.status("SCHEDD").pid
        os.kill(old, signal.SIGKILL)
        pool.pool.running_pid("SCHEDD", other_than=old)  # the master brings it back
        # The new schedd gives the lane's claim back: the startd ends the orphaned worker at
        # once (not when the lease runs out) and the call runs again, on a new worker.
        wait_for(lambda: started.exists(), limit=120, what="the call running again")
        wait_for(lambda: not psutil.pid_exists(first_worker), limit=30, what="the orphaned worker to end")
        gate_path.touch()
        assert future.result(timeout=120) == "done"
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


"""HTCExecutor beyond the standard contract: options, errors, dependencies, retries, limits,
checkpoints and eviction, output, statuses -- every call a real process (the local backend)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from executor_contract import double, fail, gate, wait_for
from executor_jobs import chatty, combine, flaky, hog, kill_self, leave_abruptly, stepper, value_of
from htc.executors import (
    CallStatus, CallTimedOut, DependencyFailed, HTCExecutor, ImpossibleRequest, JobKilled, JobOutOfMemory,
    OptionError, RemoteTraceback, SerializationError, SessionError,
)
from htc.executors.local import LocalProcessBackend
from htc.executors.status import advance, diagram
from htc.transitions import IllegalTransition


@pytest.fixture
def ex():
    executor = HTCExecutor(backend=LocalProcessBackend(slots=2, memory="4GB"), progress=False)
    yield executor
    executor.shutdown(wait=True, cancel_futures=True)


# --- mistakes surface at submit ----------------------------------------------------------------------


def test_an_impossible_request_fails_at_once(ex):
    with pytest.raises(ImpossibleRequest, match="request_cpus=64 but the local backend has 2 cpus"):
        ex.options(request_cpus=64).submit(double, 1)
    with pytest.raises(ImpossibleRequest, match="request_memory=65536 MiB"):
        ex.options(request_memory="64GB").submit(double, 1)
    with pytest.raises(ImpossibleRequest, match="requirements 'OpSys == \"WINDOWS\"' is not true for this machine"):
        ex.options(requirements='OpSys == "WINDOWS"').submit(double, 1)
    assert ex.futures == []


def test_unknown_options_and_bad_values_are_refused(ex):
    with pytest.raises(OptionError, match="unknown option request_cpu;"):
        ex.options(request_cpu=2)
    with pytest.raises(OptionError, match="not a size"):
        ex.options(request_memory="lots")
    with pytest.raises(OptionError, match="not a ClassAd expression"):
        ex.options(requirements="Memory >=")
    with pytest.raises(OptionError):
        HTCExecutor(backend="local", max_retries=-1)


def test_sizes_are_read_as_condor_submit_reads_them(ex):
    opts = ex.options(request_memory="4GB", request_disk="2G")._options
    assert (opts.request_memory, opts.request_disk) == (4096, 2 * 1024 * 1024)
    assert ex.options(request_memory=1500)._options.request_memory == 1500


def test_an_unpicklable_argument_fails_at_submit_naming_it(ex):
    sock = socket.socket()
    try:
        with pytest.raises(SerializationError, match=r"args\[0\] \(an argument of .*double\(\)\): it is a socket"):
            ex.submit(double, sock)
    finally:
        sock.close()


def test_a_named_session_needs_a_pool():
    with pytest.raises(SessionError, match="use the pool backend"):
        HTCExecutor(backend="local", name="sweep-local")


# --- results and errors ------------------------------------------------------------------------------


def test_a_remote_exception_keeps_its_type_and_carries_the_remote_traceback(ex):
    future = ex.submit(fail, "remote trouble")
    with pytest.raises(ValueError, match="remote trouble") as info:
        future.result(timeout=60)
    cause = info.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert "in fail" in cause.tb and "raise ValueError(text)" in cause.tb
    assert any(f"raised in job {future.job_id}" in note for note in info.value.__notes__)
    assert future.status is CallStatus.FAILED


def test_a_job_killed_by_a_signal_says_so_and_where_to_look(ex):
    future = ex.submit(kill_self, signal.SIGKILL)
    with pytest.raises(JobKilled, match=r"killed by signal 9 \(SIGKILL\).*future.stderr"):
        future.result(timeout=60)


def test_a_job_that_leaves_without_a_result_says_so(ex):
    with pytest.raises(JobKilled, match="exited with status 7 without writing a result"):
        ex.submit(leave_abruptly, 7).result(timeout=60)


def test_memory_beyond_the_request_kills_the_job(ex):
    future = ex.options(request_memory=60).submit(hog, 200)
    with pytest.raises(JobOutOfMemory, match="request_memory of 60 MiB"):
        future.result(timeout=60)


def test_the_per_call_timeout_stops_the_call(ex):
    started = time.monotonic()
    with pytest.raises(CallTimedOut, match="timeout of 0.5 s"):
        ex.options(timeout=0.5).submit(time.sleep, 30).result(timeout=60)
    assert time.monotonic() - started < 20


def test_user_exceptions_are_retried_only_with_max_retries(ex, tmp_path):
    once, thrice = tmp_path / "once", tmp_path / "thrice"
    once.mkdir()
    thrice.mkdir()
    with pytest.raises(RuntimeError, match="run 1 fails"):
        ex.submit(flaky, str(once), 3).result(timeout=60)
    assert ex.options(max_retries=2).submit(flaky, str(thrice), 3).result(timeout=60) == 3


# --- dependencies --------------------------------------------------------------------------------------


def test_futures_among_the_arguments_are_dependencies(ex, tmp_path):
    gate_path = tmp_path / "open"
    parent = ex.submit(gate, str(gate_path), 40)
    child = ex.submit(combine, parent, 2)
    grandchild = ex.submit(combine, child, parent, extra=[parent, 1])
    wait_for(lambda: parent.running(), what="parent running")
    assert child.status is CallStatus.WAITING and child.job_id is None
    assert "waiting for the calls it depends on" in child.why() and "gate" in child.why()
    gate_path.touch()
    assert child.result(timeout=60) == 42
    assert grandchild.result(timeout=60) == 42 + 40 + 40 + 1


def test_a_parent_that_finished_before_its_child_was_submitted(ex):
    parent = ex.submit(combine, 1, 2)
    assert parent.result(timeout=60) == 3
    child = ex.submit(combine, parent, 10)
    assert child.result(timeout=60) == 13
    assert [status for _, status, _ in child.history][:2] == [CallStatus.WAITING, CallStatus.IDLE]


def test_a_failed_parent_fails_its_dependants_without_running_them(ex):
    parent = ex.submit(fail, "parent broke")
    child = ex.submit(value_of, parent)
    grandchild = ex.submit(value_of, child)
    with pytest.raises(DependencyFailed, match="which failed with ValueError: parent broke") as info:
        child.result(timeout=60)
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(DependencyFailed):
        grandchild.result(timeout=60)
    assert child.job_id is None


def test_a_cancelled_parent_fails_its_dependants(ex, tmp_path):
    gate_path = tmp_path / "open"
    blockers = [ex.submit(gate, str(gate_path), i) for i in range(2)]
    wait_for(lambda: all(b.running() for b in blockers), what="blockers running")
    parent = ex.submit(double, 1)
    child = ex.submit(value_of, parent)
    assert parent.cancel()
    with pytest.raises(DependencyFailed, match="was cancelled"):
        child.result(timeout=10)
    gate_path.touch()


def test_a_thread_pool_future_is_not_an_argument(ex):
    from concurrent.futures import Future

    with pytest.raises(SerializationError, match="future of another kind of executor"):
        ex.submit(value_of, Future())


# --- output, status, introspection ---------------------------------------------------------------------


def test_stdout_and_stderr_are_on_the_future(ex):
    future = ex.submit(chatty, 3)
    assert future.result(timeout=60) == 3
    assert future.stdout == "line 0\nline 1\nline 2\n"
    assert future.stderr == "to stderr\n"
    assert list(future.stream()) == ["line 0\n", "line 1\n", "line 2\n"]


def test_status_job_id_classad_and_why(ex, tmp_path):
    gate_path = tmp_path / "open"
    held = [ex.options(request_cpus=1).submit(gate, str(gate_path), i) for i in range(2)]
    wait_for(lambda: all(f.status is CallStatus.RUNNING for f in held), what="both running")
    waiting = ex.options(request_cpus=2, priority=3).submit(double, 8)
    wait_for(lambda: waiting.status is CallStatus.IDLE, what="idle")
    assert waiting.job_id.startswith("local.")
    why = waiting.why()
    assert "idle: it needs 2 cpu(s)" in why and "2 of 2 cpus" in why
    ad = waiting.classad()
    assert ad["RequestCpus"] == 2 and ad["JobPrio"] == 3 and ad["JobStatus"] == 1
    assert ex.statistics() == {"running": 2, "idle": 1}
    gate_path.touch()
    assert waiting.result(timeout=60) == 16
    assert waiting.status is CallStatus.COMPLETED
    assert "completed" in waiting.why()
    assert "job local." in repr(waiting)


def test_higher_priority_calls_start_first(ex, tmp_path):
    gate_path = tmp_path / "open"
    held = [ex.submit(gate, str(gate_path), i) for i in range(2)]
    wait_for(lambda: all(f.running() for f in held), what="both running")
    low = ex.options(priority=0).submit(gate, str(tmp_path / "never"), "low", str(tmp_path / "low-started"))
    high = ex.options(priority=10).submit(double, 5)
    wait_for(lambda: low.status is CallStatus.IDLE and high.status is CallStatus.IDLE, what="both idle")
    gate_path.touch()
    assert high.result(timeout=60) == 10
    assert low.cancel() or low.running()
    (tmp_path / "never").touch()


# --- checkpoints and eviction -----------------------------------------------------------------------


def test_an_evicted_call_resumes_from_its_checkpoint(ex, tmp_path):
    future = ex.options(checkpoint=True).submit(stepper, 60, str(tmp_path))
    progress = tmp_path / "progress"

    def steps() -> int:
        text = progress.read_text() if progress.exists() else ""
        return int(text) if text.strip() else 0

    wait_for(lambda: steps() >= 10, what="ten steps")
    future.vacate()
    wait_for(lambda: future.evictions == 1, what="eviction")
    state = future.result(timeout=60)
    assert future.evictions == 1 and future.status is CallStatus.COMPLETED
    assert state["step"] == 60
    assert len(state["runs"]) == 2 and state["runs"][0] == 0 and state["runs"][1] >= 10
    assert (tmp_path / f"started-at-{state['runs'][1]}").exists()


def test_the_eviction_shows_in_the_status(ex, tmp_path):
    gate_path = tmp_path / "open"
    blockers = [ex.submit(gate, str(gate_path), i) for i in range(2)]
    wait_for(lambda: all(f.running() for f in blockers), what="blockers running")
    blockers[0].vacate()
    wait_for(lambda: blockers[0].evictions == 1, what="eviction")
    assert blockers[0].status in (CallStatus.EVICTED, CallStatus.IDLE, CallStatus.RUNNING)
    assert blockers[0].running()  # a future never goes back to pending
    gate_path.touch()
    assert blockers[0].result(timeout=60) == 0


# --- the status table -----------------------------------------------------------------------------------


def test_the_status_table_refuses_illegal_steps_by_name():
    from htc.executors.status import CallEvent

    assert advance("1.0", CallStatus.IDLE, CallEvent.STARTED) is CallStatus.RUNNING
    assert advance("1.0", CallStatus.RUNNING, CallEvent.EVICTED) is CallStatus.EVICTED
    with pytest.raises(IllegalTransition, match="call 1.0 is completed and cannot take the event 'started'"):
        advance("1.0", CallStatus.COMPLETED, CallEvent.STARTED)
    assert "running --> evicted: evicted" in diagram()


def test_the_docs_show_the_current_status_diagram():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "executor.md").read_text()
    assert diagram() in docs, "regenerate the diagram in docs/executor.md from htc.executors.status.diagram()"


# --- scripts ---------------------------------------------------------------------------------------------


def test_closures_from_main_of_a_script_run_as_jobs(tmp_path):
    script = tmp_path / "sweep_script.py"
    script.write_text(textwrap.dedent("""
        from htc import HTCExecutor

        OFFSET = 1000

        def make_scaler(k):
            def scale(x):
                return x * k + OFFSET
            return scale

        class Box:
            def __init__(self, v):
                self.v = v

        if __name__ == "__main__":
            with HTCExecutor(backend="local") as ex:
                print(sorted(ex.map(make_scaler(3), range(4))))
                print(ex.submit(lambda b: b.v * 2, Box(21)).result())
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[1000, 1003, 1006, 1009]", "42"]


# --- progress ---------------------------------------------------------------------------------------


def test_progress_bars_follow_map_and_wait_when_asked(capsys):
    from htc.executors import wait as wait_with_bar
    from htc.executors.progress import enabled

    assert enabled(None) is False  # stderr is not a terminal under pytest
    with HTCExecutor(backend=LocalProcessBackend(slots=2), progress=True) as ex:
        assert list(ex.map(double, range(3))) == [0, 2, 4]
        done, not_done = wait_with_bar([ex.submit(fail, "x"), ex.submit(double, 1)], timeout=60, progress=True)
    assert len(done) == 2 and not not_done
    err = capsys.readouterr().err
    assert "3/3" in err and "2/2" in err and "1 failed" in err


def test_stream_starts_over_when_an_evicted_call_runs_again():
    # The output file of a streaming call is emptied when a new run starts (after an eviction):
    # stream() then follows the new run from its first line instead of skipping it.
    from htc.executors.future import HTCFuture

    looks = iter(["run 1 line 1\nrun 1 line 2\n", "run 2 line 1\n", "run 2 line 1\nrun 2 line 2\n"])
    future = HTCFuture.__new__(HTCFuture)
    state = {"text": ""}

    def output(stream):
        state["text"] = next(looks, state["text"])
        return state["text"]

    future._output = output
    future.done = lambda: state["text"].endswith("run 2 line 2\n")
    assert list(future.stream(interval=0)) == ["run 1 line 1\n", "run 1 line 2\n", "run 2 line 1\n", "run 2 line 2\n"]

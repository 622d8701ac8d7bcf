"""The execute-side runner of function jobs, run as a real subprocess in a sandbox directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_lane_worker import Parent

from htc.wire import callfile as cf
from htc.executors.errors import CallTimedOut, UnpicklableRemoteException, VersionMismatch
from htc.executors.serialize import dumps_call, dumps_value, loads, python_version
from htc.executors.worker import EXIT_ERROR, EXIT_EXCEPTION, EXIT_VALUE


def write_call(sandbox: Path, fn, *args, check_versions=True, timeout=None, chunked=False, python=None,
               packages=None, parents=(), **kwargs) -> cf.CallHeader:
    pickled = dumps_call(fn, args, kwargs, persistent=lambda o: o.call_id if isinstance(o, Parent) else None)
    header = cf.CallHeader(call_id="c1", function=getattr(fn, "__qualname__", "fn"), python=python or python_version(),
                           packages=pickled.packages if packages is None else packages, parents=parents,
                           check_versions=check_versions, timeout=timeout, chunked=chunked)
    cf.write_call(sandbox / cf.CALL_FILE, header, pickled.payload)
    return header


def run_worker(sandbox: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "htc.executors.worker", str(sandbox)], capture_output=True,
                          text=True, timeout=timeout, cwd=sandbox)


def outcome(sandbox: Path):
    header, payload = cf.read_result(sandbox / cf.RESULT_FILE)
    return header, loads(payload, header.serializer)


def test_a_returned_value_comes_back_with_exit_status_0(tmp_path):
    write_call(tmp_path, pow, 2, 10)
    done = run_worker(tmp_path)
    assert done.returncode == EXIT_VALUE, done.stderr
    header, value = outcome(tmp_path)
    assert (header.outcome, value) == ("value", 1024)
    assert header.pid > 0 and header.finished_at >= header.started_at


def test_a_raised_exception_comes_back_with_its_type_and_traceback(tmp_path):
    def divide(a, b):
        return a / b

    write_call(tmp_path, divide, 1, 0)
    done = run_worker(tmp_path)
    assert done.returncode == EXIT_EXCEPTION
    header, exc = outcome(tmp_path)
    assert header.outcome == "exception"
    assert isinstance(exc, ZeroDivisionError)
    assert header.exception_type == "ZeroDivisionError"
    assert "in divide" in header.traceback and "return a / b" in header.traceback


def test_keyword_arguments_and_closures_over_local_state(tmp_path):
    base = {"offset": 7}

    def shifted(x, *, scale=1):
        return x * scale + base["offset"]

    write_call(tmp_path, shifted, 5, scale=3)
    assert run_worker(tmp_path).returncode == EXIT_VALUE
    assert outcome(tmp_path)[1] == 22


def test_a_package_version_mismatch_refuses_to_run_and_names_it(tmp_path):
    write_call(tmp_path, len, "abc", packages={"cloudpickle": "0.0.1", "msgspec": "0.0.2"})
    done = run_worker(tmp_path)
    assert done.returncode == EXIT_ERROR
    header, exc = outcome(tmp_path)
    assert header.outcome == "error"
    assert isinstance(exc, VersionMismatch)
    text = str(exc)
    assert "cloudpickle 0.0.1 on the submit side" in text and "msgspec 0.0.2" in text
    assert {m[0] for m in exc.mismatches} == {"cloudpickle", "msgspec"}


def test_a_python_version_mismatch_is_named(tmp_path):
    write_call(tmp_path, len, "abc", python="3.2.1")
    assert run_worker(tmp_path).returncode == EXIT_ERROR
    _, exc = outcome(tmp_path)
    assert isinstance(exc, VersionMismatch) and "Python 3.2.1 on the submit side" in str(exc)


def test_version_checks_can_be_turned_off(tmp_path):
    write_call(tmp_path, len, "abcd", packages={"cloudpickle": "0.0.1"}, check_versions=False)
    assert run_worker(tmp_path).returncode == EXIT_VALUE
    assert outcome(tmp_path)[1] == 4


def test_a_missing_call_file_is_reported_in_the_result(tmp_path):
    done = run_worker(tmp_path)
    assert done.returncode == EXIT_ERROR
    _, exc = outcome(tmp_path)
    assert isinstance(exc, cf.CallFileError) and "call file is missing" in str(exc)


def test_an_unpicklable_exception_comes_back_as_a_stand_in(tmp_path):
    def raise_odd():
        import threading

        class Odd(Exception):
            def __init__(self):
                super().__init__("odd one")
                self.lock = threading.Lock()

        raise Odd()

    write_call(tmp_path, raise_odd)
    assert run_worker(tmp_path).returncode == EXIT_EXCEPTION
    header, exc = outcome(tmp_path)
    assert isinstance(exc, UnpicklableRemoteException)
    assert exc.type_name.endswith("Odd") and "odd one" in str(exc)


def test_an_unpicklable_result_fails_the_call_with_a_clear_error(tmp_path):
    def make_lock():
        import threading

        return threading.Lock()

    write_call(tmp_path, make_lock)
    assert run_worker(tmp_path).returncode == EXIT_ERROR
    _, exc = outcome(tmp_path)
    assert "the result" in str(exc) and "lock" in str(exc).lower()


def test_the_timeout_stops_the_call_inside_the_job(tmp_path):
    write_call(tmp_path, time.sleep, 30, timeout=0.5)
    started = time.monotonic()
    done = run_worker(tmp_path)
    assert time.monotonic() - started < 20
    assert done.returncode == EXIT_ERROR
    _, exc = outcome(tmp_path)
    assert isinstance(exc, CallTimedOut) and "timeout of 0.5 s" in str(exc)


def test_chunks_apply_the_function_to_each_argument_tuple(tmp_path):
    write_call(tmp_path, pow, [(2, 3), (3, 2), (10, 0)], chunked=True)
    assert run_worker(tmp_path).returncode == EXIT_VALUE
    assert outcome(tmp_path)[1] == [8, 9, 1]


def test_parent_results_replace_the_futures_among_the_arguments(tmp_path):
    data, _ = dumps_value({"weights": [1, 2, 3]})
    cf.write_result(tmp_path / cf.parent_file("@p1"), cf.ResultHeader(call_id="@p1", outcome="value"), data)
    write_call(tmp_path, lambda d, k: sum(d["weights"]) * k, Parent("@p1"), 10, parents=("@p1",))
    assert run_worker(tmp_path).returncode == EXIT_VALUE, (tmp_path / cf.RESULT_FILE).read_bytes()[:400]
    assert outcome(tmp_path)[1] == 60


def counting(n):
    import htc

    state = htc.resume(default={"i": 0, "total": 0})
    for i in range(state["i"], n):
        state["total"] += i
        state["i"] = i + 1
        htc.checkpoint(state)
    return state["total"], htc.resume() is not None


def test_resume_returns_the_last_checkpoint_of_an_earlier_run(tmp_path):
    data, _ = dumps_value({"i": 5, "total": 1000})
    (tmp_path / cf.CHECKPOINT_FILE).write_bytes(data)
    write_call(tmp_path, counting, 8)
    assert run_worker(tmp_path).returncode == EXIT_VALUE
    header, value = outcome(tmp_path)
    assert value == (1000 + 5 + 6 + 7, True)
    assert header.resumed is True
    assert loads((tmp_path / cf.CHECKPOINT_FILE).read_bytes())["i"] == 8


def test_checkpoint_and_resume_outside_a_job_do_nothing():
    import htc

    assert htc.checkpoint({"x": 1}) is False
    assert htc.resume("fresh") == "fresh"
    assert counting(4) == (6, False)


class Accumulator:
    """A Checkpointable callable: the worker asks it for its state when the job must leave."""

    def __init__(self):
        self.done = 0

    def get_checkpoint(self):
        return {"done": self.done}

    def set_checkpoint(self, state):
        self.done = state["done"]

    def __call__(self, steps, flag):
        for _ in range(self.done, steps):
            self.done += 1
            if self.done == 3:
                Path(flag).write_text("ready")
            time.sleep(0.05)
        return self.done


def test_a_checkpointable_saves_its_state_on_the_soft_kill_and_resumes_from_it(tmp_path):
    flag = tmp_path / "flag"
    write_call(tmp_path, Accumulator(), 100000, str(flag))
    proc = subprocess.Popen([sys.executable, "-m", "htc.executors.worker", str(tmp_path)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not flag.exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM  # the starter sees an eviction
    assert not (tmp_path / cf.RESULT_FILE).exists()
    saved = loads((tmp_path / cf.CHECKPOINT_FILE).read_bytes())["done"]
    assert saved >= 3
    write_call(tmp_path, Accumulator(), saved + 2, str(flag))
    assert run_worker(tmp_path).returncode == EXIT_VALUE
    header, value = outcome(tmp_path)
    assert value == saved + 2 and header.resumed


def test_result_files_are_checked_for_damage(tmp_path):
    path = tmp_path / cf.RESULT_FILE
    path.write_bytes(b"HTCrslt1\x00\x00\xff\xff{}")
    with pytest.raises(cf.CallFileError, match="truncated"):
        cf.read_result(path)
    path.write_bytes(b"garbage")
    with pytest.raises(cf.CallFileError, match="not an htc result file"):
        cf.read_result(path)
    assert os.path.exists(path)


def test_a_call_file_named_after_its_call_is_found_and_two_are_refused(tmp_path):
    write_call(tmp_path, pow, 3, 2)
    (tmp_path / cf.CALL_FILE).rename(tmp_path / "4d-7.call")  # a call from a session's shared calls/
    done = run_worker(tmp_path)
    assert done.returncode == EXIT_VALUE, done.stderr
    assert outcome(tmp_path)[1] == 9
    write_call(tmp_path, pow, 3, 3)
    assert run_worker(tmp_path).returncode == EXIT_ERROR
    _, exc = outcome(tmp_path)
    assert isinstance(exc, cf.CallFileError) and "2 call files (4d-7.call, htc_call.pkl)" in str(exc)

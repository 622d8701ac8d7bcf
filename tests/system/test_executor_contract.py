"""The concurrent.futures contract, run against ThreadPoolExecutor and against HTCExecutor.

Every test here must pass for the standard library's own executor; HTCExecutor must then
behave the same. Executors have two workers (threads, or local slots/pool slots), and the
tests use gates (files the test creates) to hold calls running or pending on purpose.
"""

from __future__ import annotations

import tempfile
import threading
import time
from concurrent.futures import (
    ALL_COMPLETED, FIRST_COMPLETED, FIRST_EXCEPTION, CancelledError, Future, ThreadPoolExecutor, as_completed, wait,
)

from pathlib import Path

import pytest

from executor_contract import add, double, fail, gate, slow, wait_for
from executor_pool import pool  # noqa: F401 (the module's pool: a fixture)
from htc.executors import HTCExecutor



@pytest.fixture(params=["thread", "htc-local", "htc-pool", "htc-pool-remote"])
def make_executor(request):
    made = []
    pool = request.getfixturevalue("pool") if request.param.startswith("htc-pool") else None

    def make():
        if request.param == "thread":
            ex = ThreadPoolExecutor(max_workers=2)
        elif request.param == "htc-local":
            from htc.executors.local import LocalProcessBackend

            ex = HTCExecutor(backend=LocalProcessBackend(slots=2), progress=False)
        elif request.param == "htc-pool-remote":
            # a client on another machine (htc.executors.remote): its session lives on the submit
            # host and is mirrored over one connection; here the "other machine" is a socket
            from htc.executors.remote import RemoteBackend
            from htc.wire.transport import UnixTransport

            args = pool.executor_args()
            backend = RemoteBackend("submit.test", transport=UnixTransport(Path(args.pop("pool")) / "sockets"))
            ex = HTCExecutor(backend=backend, **args)
        else:
            ex = HTCExecutor(**pool.executor_args())
        made.append(ex)
        return ex

    make.kind = request.param
    yield make
    for ex in made:
        ex.shutdown(wait=True, cancel_futures=True)


@pytest.fixture
def executor(make_executor):
    return make_executor()


@pytest.fixture
def tmp_path(request, tmp_path_factory):
    """A scratch directory the calls can see: pool jobs run as another user when tests run as root."""
    if "htc-pool" in request.node.name:
        pool = request.getfixturevalue("pool")
        path = Path(tempfile.mkdtemp(dir=pool.pool.work))
        path.chmod(0o777)
        return path
    return tmp_path_factory.mktemp("scratch")


def _hold_both_workers(executor, tmp_path):
    """Two calls that run until the gate opens; returns (gate path, futures)."""
    gate_path = tmp_path / "open"
    started = [tmp_path / f"started{i}" for i in range(2)]
    fs = [executor.submit(gate, str(gate_path), i, str(started[i])) for i in range(2)]
    wait_for(lambda: all(p.exists() for p in started), what="both blockers started")
    wait_for(lambda: all(f.running() for f in fs), what="both blockers running")
    return gate_path, fs


def test_submit_returns_a_future_with_the_result(executor):
    future = executor.submit(double, 21)
    assert isinstance(future, Future)
    assert future.result(timeout=60) == 42
    assert future.done() and not future.running() and not future.cancelled()
    assert future.exception() is None


def test_arguments_and_keyword_arguments(executor):
    assert executor.submit(add, 1, 2, c=3).result(timeout=60) == 6
    assert executor.submit(add, a=5).result(timeout=60) == 5


def test_an_exception_is_raised_by_result_and_returned_by_exception(executor):
    future = executor.submit(fail, "no good")
    with pytest.raises(ValueError, match="no good"):
        future.result(timeout=60)
    exc = future.exception()
    assert isinstance(exc, ValueError) and str(exc) == "no good"


def test_map_keeps_order_over_several_iterables(executor):
    assert list(executor.map(add, [1, 2, 3], [10, 20, 30, 40])) == [11, 22, 33]
    assert list(executor.map(double, [])) == []


def test_map_with_chunks_gives_the_same_results(executor):
    assert list(executor.map(double, range(10), chunksize=3)) == [2 * i for i in range(10)]


def test_map_raises_the_first_exception_when_iterated_to_it(executor):
    results = executor.map(fail, ["first"])
    with pytest.raises(ValueError, match="first"):
        next(results)


def test_map_timeout_counts_from_the_call(executor):
    results = executor.map(slow, [1], [2.0], timeout=0.2)
    with pytest.raises(TimeoutError):
        list(results)


def test_result_timeout_while_pending(executor, tmp_path):
    gate_path, fs = _hold_both_workers(executor, tmp_path)
    with pytest.raises(TimeoutError):
        fs[0].result(timeout=0.1)
    gate_path.touch()
    assert [f.result(timeout=60) for f in fs] == [0, 1]


def test_submit_after_shutdown_raises(executor):
    executor.shutdown(wait=True)
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
        executor.submit(double, 1)


def test_context_manager_waits_for_the_calls(make_executor):
    with make_executor() as ex:
        futures = [ex.submit(slow, i, 0.05) for i in range(4)]
    assert all(f.done() for f in futures)
    assert [f.result() for f in futures] == [0, 1, 2, 3]


def test_wait_all_first_completed_and_first_exception(executor, tmp_path):
    gate_path, held = _hold_both_workers(executor, tmp_path)
    done, not_done = wait(held, timeout=0.1)
    assert not done and not_done == set(held)
    gate_path.touch()
    done, not_done = wait(held, timeout=60, return_when=ALL_COMPLETED)
    assert done == set(held) and not not_done
    failing = executor.submit(fail, "x")
    done, _ = wait([failing, executor.submit(slow, 1, 2.0)], timeout=60, return_when=FIRST_EXCEPTION)
    assert failing in done
    quick = executor.submit(double, 1)
    done, _ = wait([quick], timeout=60, return_when=FIRST_COMPLETED)
    assert quick in done


def test_as_completed_yields_every_future_once(executor):
    futures = [executor.submit(slow, i, 0.01 * (3 - i)) for i in range(3)]
    seen = list(as_completed(futures, timeout=60))
    assert sorted(seen, key=id) == sorted(futures, key=id)
    assert sorted(f.result() for f in seen) == [0, 1, 2]


def test_as_completed_times_out(executor, tmp_path):
    gate_path, held = _hold_both_workers(executor, tmp_path)
    with pytest.raises(TimeoutError):
        list(as_completed(held, timeout=0.2))
    gate_path.touch()


def test_a_pending_future_can_be_cancelled_and_wait_sees_it(executor, tmp_path):
    gate_path, held = _hold_both_workers(executor, tmp_path)
    pending = executor.submit(double, 5)
    assert pending.cancel() is True
    assert pending.cancelled() and pending.done()
    assert pending.cancel() is True  # again: still cancelled
    with pytest.raises(CancelledError):
        pending.result(timeout=1)
    gate_path.touch()
    # ThreadPoolExecutor tells wait() about a cancelled future when a worker reaches it;
    # HTCExecutor at once. Either way wait() must count it as done.
    done, _ = wait([pending], timeout=10)
    assert pending in done
    assert [f.result(timeout=60) for f in held] == [0, 1]
    assert pending.cancelled()


def test_a_running_future_cannot_be_cancelled(executor, tmp_path):
    gate_path, held = _hold_both_workers(executor, tmp_path)
    assert held[0].running()
    assert held[0].cancel() is False
    gate_path.touch()
    assert held[0].result(timeout=60) == 0


def test_shutdown_cancel_futures_cancels_only_pending_calls(executor, tmp_path):
    gate_path, held = _hold_both_workers(executor, tmp_path)
    pending = [executor.submit(double, i) for i in range(3)]
    threading.Timer(0.3, gate_path.touch).start()
    executor.shutdown(wait=True, cancel_futures=True)
    assert all(f.cancelled() for f in pending)
    assert [f.result() for f in held] == [0, 1]


def test_shutdown_without_waiting_returns_at_once_and_calls_finish(executor, tmp_path):
    gate_path, held = _hold_both_workers(executor, tmp_path)
    started = time.monotonic()
    executor.shutdown(wait=False)
    assert time.monotonic() - started < 5
    gate_path.touch()
    assert [f.result(timeout=60) for f in held] == [0, 1]


def test_done_callbacks_run_once_with_the_future(executor):
    calls = []
    event = threading.Event()

    def callback(f):
        calls.append(f)
        event.set()

    future = executor.submit(double, 4)
    future.add_done_callback(callback)
    assert event.wait(60)
    assert future.result() == 8
    late = []
    future.add_done_callback(late.append)  # already done: runs at once, in this thread
    assert late == [future]
    wait_for(lambda: len(calls) == 1, what="callback")
    assert calls == [future]


def test_map_closed_early_cancels_the_calls_left(executor, tmp_path):
    # The first call's gate is open, the others wait for the test: once the first result has
    # been read, at most two more calls run (two workers) and closing the iterator cancels
    # the rest, which never start even after their gate opens. (A map iterator that was never
    # started has nothing to cancel in the standard library: its generator body never ran.)
    # The first call takes 0.3 s: a pool's call lane holds no call ahead behind one that slow
    # (a call a lane holds is running, as far as cancel() goes).
    # (A call cancelled just as the pool started it is stopped by its removal: it may have
    # begun, but it never finishes.)
    open_path, gate_path = tmp_path / "open-now", tmp_path / "open"
    open_path.touch()
    finished = [str(tmp_path / f"finished.{i}") for i in range(6)]
    results = executor.map(gate, [str(open_path)] + [str(gate_path)] * 5, range(6), [None] * 6, [60.0] * 6,
                           [0.3] + [0.0] * 5, finished)
    assert next(results) == 0
    results.close()
    gate_path.touch()
    executor.shutdown(wait=True)
    # Two workers run calls 1 and 2 while the gate is shut; a backend may have handed the
    # next one to a worker already (it is running, then, as far as cancel() goes), never the last.
    ran = sorted(i for i in range(6) if Path(finished[i]).exists())
    assert ran[:1] == [0] and len(ran) <= 4 and 5 not in ran, f"calls {ran} ran: closing the map cancelled nothing"

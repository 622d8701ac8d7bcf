"""HTCExecutor for a client on another machine (htc.executors.remote), on a real personal pool.

The "other machine" is the pool's socket here (tests/system/test_multi_host_executor.py runs it
between simulated hosts over SSH): what matters is that the session lives in the schedd's spool
and reaches the client only through the session's connection -- the jobs' Iwd is the schedd's
directory, never the client's, the results arrive in the client's mirror, and an unnamed
session's directory is gone from the submit host when the executor shuts down.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from executor_contract import double, fail
from executor_pool import pool  # noqa: F401 (the module's pool: a fixture)
from htc.executors import HTCExecutor, OptionError
from htc.executors.remote import RemoteBackend
from htc.wire import messages as m
from htc.wire.transport import Transport, UnixTransport

pytestmark = pytest.mark.slow



def remote_executor(pool, **kwargs) -> HTCExecutor:
    args = pool.executor_args()
    backend = RemoteBackend("submit.test", transport=UnixTransport(Path(args.pop("pool")) / "sockets"))
    return HTCExecutor(backend=backend, **args, **kwargs)


def test_calls_run_from_the_schedds_session_directory_and_results_come_back(pool):
    spool = pool.pool.home / "spool" / "executor"
    with remote_executor(pool) as ex:
        results = list(ex.map(double, range(20)))
        assert results == [2 * i for i in range(20)]
        with pytest.raises(ValueError, match="boom"):
            ex.submit(fail, "boom").result(timeout=120)
        from htc.client import history

        ads = history(f'HTCSession == "{ex.name}"', path=pool.pool.home / "spool" / "job_queue.db")
        assert len(ads) >= 20, len(ads)
        sessions = list(spool.glob(f"*/{ex.name}"))
        assert len(sessions) == 1, list(spool.glob("*/*"))
        remote_calls = sessions[0] / "calls"
        assert any(remote_calls.glob("*.result")), "results are written on the submit host's side"
        mirror = ex._spool.calls  # the client's own copy, filled only by what the schedd pushed
        assert sum(1 for _ in mirror.glob("*.result")) + len(list(mirror.glob(".spare-*"))) >= 1
        assert {str(ad.get("Iwd")) for ad in ads} == {str(remote_calls)}
    assert not list(spool.glob(f"*/{ex.name}")), "an unnamed session's directory is removed at shutdown"


class CountingTransport(Transport):
    """The pool's sockets, counting the message types the client sends on every connection (not
    a UnixTransport: the backend would ask over a blocking socket of its own)."""

    def __init__(self, path):
        self.inner = UnixTransport(path)
        self.sent: list[str] = []

    async def start_server(self, address, handler, *, task_group):
        raise AssertionError("a client serves nothing")

    async def open_connection(self, address, **kwargs):
        conn = await self.inner.open_connection(address, **kwargs)
        send, send_nowait = conn.send, conn.send_nowait

        async def counted(msg, *args, **kw):
            self.sent.append(type(msg).__name__)
            return await send(msg, *args, **kw)

        def counted_nowait(msg, *args, **kw):
            self.sent.append(type(msg).__name__)
            return send_nowait(msg, *args, **kw)

        conn.send, conn.send_nowait = counted, counted_nowait
        return conn


def test_a_batch_is_one_request_with_its_pickles_and_the_mirror_gets_no_call_files(pool):
    args = pool.executor_args()
    transport = CountingTransport(Path(args.pop("pool")) / "sockets")
    with HTCExecutor(backend=RemoteBackend("submit.test", transport=transport), **args) as ex:
        assert ex.submit(double, 1).result(timeout=120) == 2
        before = len(transport.sent)
        assert list(ex.map(double, range(30))) == [2 * i for i in range(30)]
        sent = transport.sent[before:]
        assert "SubmitCalls" in sent
        assert not {"Submit", "PutCallFiles", "FollowCalls"} & set(sent), sent
        assert not list(ex._spool.calls.glob("*.call")), "an unnamed session's pickles go only to the submit host"
        before = len(transport.sent)
        big = b"x" * (5 * 1024 * 1024)  # more than one message of pickles: the first go ahead
        assert ex.submit(len, big).result(timeout=120) == len(big)
        assert transport.sent[before:].count("PutCallFiles") == 1 and "SubmitCalls" in transport.sent[before:]


def test_options_that_name_the_clients_files_are_refused(pool):
    with remote_executor(pool) as ex:
        with pytest.raises(OptionError, match="transfer_input_files.*another machine"):
            ex.options(transfer_input_files=["/etc/hostname"]).submit(double, 1)
        with pytest.raises(OptionError, match="checkpoint"):
            ex.options(checkpoint=True).submit(double, 1)


def test_a_named_session_detaches_and_a_later_client_gets_its_results(pool):
    import tempfile

    from executor_contract import gate, wait_for
    from htc.executors import attach, forget

    scratch = Path(tempfile.mkdtemp(dir=pool.pool.work))
    scratch.chmod(0o777)
    ex = remote_executor(pool, name="remote-sweep")
    futures = [ex.submit(gate, str(scratch / "open"), i) for i in range(2)]
    wait_for(lambda: all(f.job_id for f in futures), what="the calls' jobs")
    ex.shutdown(wait=False)  # a named session detaches: its jobs keep running, its directory stays
    spool = pool.pool.home / "spool" / "executor"
    assert list(spool.glob("*/remote-sweep")), "a named session's directory stays on the submit host"
    (scratch / "open").touch()
    args = pool.executor_args()
    backend = RemoteBackend("submit.test", transport=UnixTransport(Path(args.pop("pool")) / "sockets"))
    again = attach("remote-sweep", backend=backend, **args)
    try:
        assert [f.result(timeout=120) for f in again.futures] == [0, 1]
    finally:
        again.shutdown(wait=True)
    forget("remote-sweep")

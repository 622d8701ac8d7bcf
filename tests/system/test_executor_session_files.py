"""A remote executor session that runs for long keeps only its recent calls' files on the submit
host: the client says now and then how far its mirror holds the session (``NewsTaken``), and
the schedd removes the files of the calls that ended before that (htc.daemons.schedd.sessions).
No result is removed before the client has it: every future gets its result."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor_contract import double, wait_for
from executor_pool import pool  # noqa: F401 (the module's pool: a fixture)
from htc.executors import HTCExecutor
from htc.executors import remote
from htc.executors.remote import RemoteBackend
from htc.wire.transport import UnixTransport

pytestmark = pytest.mark.slow

#: files mirrored between two NewsTaken, for this test (the client's default is larger)
EVERY = 8



def test_a_long_sessions_directory_on_the_submit_host_stays_bounded(pool, monkeypatch):
    monkeypatch.setattr(remote, "_TAKEN_FILES", EVERY)
    args = pool.executor_args()
    backend = RemoteBackend("submit.test", transport=UnixTransport(Path(args.pop("pool")) / "sockets"))
    calls = 150
    with HTCExecutor(backend=backend, **args) as ex:
        for start in range(0, calls, 50):  # batches, as a long session submits them
            assert list(ex.map(double, range(start, start + 50))) == [2 * i for i in range(start, start + 50)]
        [session] = list((pool.pool.home / "spool" / "executor").glob(f"*/{ex.name}"))
        remote_calls = session / "calls"

        def files() -> list[str]:
            return [p.name for p in remote_calls.iterdir()]

        # What the mirror has not said it holds yet: fewer than EVERY files' calls, four files each.
        try:
            wait_for(lambda: len(files()) <= 4 * EVERY, limit=60.0, what="the session's calls/ bounded")
        except AssertionError:
            raise AssertionError(f"the session's calls/ on the submit host holds {len(files())} files "
                                 f"after {calls} calls: {sorted(files())[:12]}...") from None
        assert sum(1 for name in files() if name.endswith(".result")) < EVERY
        mirror = ex._spool.calls  # the client's copy has every result it was sent
        assert sum(1 for _ in mirror.glob("*.result")) + len(list(mirror.glob(".spare-*"))) >= 1

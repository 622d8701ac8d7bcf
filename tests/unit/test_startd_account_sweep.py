"""After a job, the startd sweeps its slot account's orphans off the event loop, and frees the
account only once the sweep is done (htc.daemons.startd.service.StartdService._give_back_account)."""

from __future__ import annotations

import asyncio
import os
import logging
import threading
from types import SimpleNamespace

from htc.daemons.run_as import JobUser, SlotAccounts
from htc.daemons.startd import service as startd_service
from htc.daemons.startd.service import StartdService


def test_the_orphan_sweep_runs_in_a_thread_and_the_account_is_freed_after_it(monkeypatch):
    accounts = SlotAccounts()
    accounts.acquire("claim#1", "slot1_1")
    seen: list[tuple[int, set[int], bool, bool]] = []

    def sweep(uid, keep=frozenset(), **_kw):
        held = "claim#1" in accounts._held
        seen.append((uid, set(keep), threading.current_thread() is threading.main_thread(), held))
        return [4242]

    monkeypatch.setattr(startd_service, "kill_processes_of", sweep)
    fake = SimpleNamespace(accounts=accounts, log=logging.getLogger("test"),
                           zygotes=SimpleNamespace(pids_of=lambda uid: {77}))
    user = JobUser("htc-slot1", 994, 993, (993,), owner=False)
    asyncio.run(StartdService._give_back_account(fake, "claim#1", user))
    assert seen == [(994, {77}, False, True)]  # off the loop's thread, the account still held
    assert accounts.release("claim#1") is None  # then freed


def test_a_job_run_as_its_owner_frees_the_account_without_a_sweep(monkeypatch):
    accounts = SlotAccounts()
    accounts.acquire("claim#1", "slot1_1")
    monkeypatch.setattr(startd_service, "kill_processes_of", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    fake = SimpleNamespace(accounts=accounts, log=logging.getLogger("test"), zygotes=None)
    asyncio.run(StartdService._give_back_account(fake, "claim#1", JobUser("alice", 1001, 1001, (1001,), owner=True)))
    assert accounts.release("claim#1") is None


def test_the_sweep_reads_the_uids_of_orphans_only(monkeypatch):
    """The sweep after every job reads /proc/PID/status (costly for the kernel) only for the
    processes init adopted; the parent comes from the short /proc/PID/stat."""
    import subprocess

    from htc.daemons import run_as

    read: list[int] = []
    real = run_as._status_of

    def recording(pid):
        read.append(pid)
        return real(pid)

    monkeypatch.setattr(run_as, "_status_of", recording)
    child = subprocess.Popen(["sleep", "30"])  # our child: has a parent, never an orphan
    try:
        assert run_as.kill_processes_of(2**31 - 7) == []  # a uid nothing runs as
    finally:
        child.kill()
        child.wait()
    assert child.pid not in read and os.getpid() not in read
    for pid in read:
        assert real(pid)[1] in (1, -1)  # adopted by init (or gone since)


def test_the_parent_is_read_after_the_last_parenthesis_of_stat():
    from htc.daemons.run_as import ppid_from_stat

    assert ppid_from_stat(b"4242 (a) b (c) S 17 4242 4242 0 -1 4194560") == 17
    assert ppid_from_stat(b"4242 (x)) R 1 4242") == 1
    assert ppid_from_stat(b"") == -1 and ppid_from_stat(b"garbage") == -1
    with open(f"/proc/{os.getpid()}/stat", "rb") as f:
        assert ppid_from_stat(f.read()) == os.getppid()


def test_the_sweep_of_a_kept_claims_last_job_does_not_free_the_account_of_its_next_job():
    """A kept claim's next job starts (and takes an account) while the last job's account is
    still being swept; when that sweep ends, only the last job's account is freed."""
    accounts = SlotAccounts()
    first = accounts.acquire("claim#1", "slot1_1")
    second = accounts.acquire("claim#1", "slot1_1")   # the next job on the same claim
    assert (first, second) == (1, 2)
    assert accounts.release("claim#1", first) == first  # the sweep of the first job ended
    other = accounts.acquire("claim#2", "slot1_2")
    assert other == 1 and accounts.acquire("claim#3", "slot1_3") == 3  # 2 is still the running job's
    assert accounts.release("claim#1", second) == second and accounts.release("claim#1") is None

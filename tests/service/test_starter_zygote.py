"""The starter zygote with real processes: a pre-imported Python forks function jobs.

Most jobs here run ``python -m zjob ...``, a tiny module of ours on a world-readable
PYTHONPATH named in ``zygote_modules`` (the mechanism is generic); one runs the executor's real
worker. What matters: the job behaves exactly as under fork+exec (files, exit status, user,
cgroup, signals), one zygote serves many jobs, and any zygote trouble ends in a job that still
runs or is reported ended -- never a hang.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from htc.daemons.clock import FakeClock
from htc.daemons.starter import limits, zygote
from htc.daemons.starter.service import Starter, StarterSettings
from htc.daemons.starter.zygote import ZygotePool
from htc.daemons.starter.zygote_keys import ZygoteKey, eligible_module, zygote_environment

ROOT = os.geteuid() == 0
# An interpreter the slot user can run: the system one when we are root (ours may sit in /root).
PY = "/usr/bin/python3" if ROOT and os.access("/usr/bin/python3", os.X_OK) else sys.executable

ZJOB = '''\
import os, signal, sys, time

def main(argv):
    what = argv[0]
    with open("facts.txt", "w") as f:
        f.write(repr({"argv": argv, "argv0": sys.argv[0], "uid": os.getuid(), "pid": os.getpid(),
                      "ppid": os.getppid(), "cwd": os.getcwd(), "env": dict(os.environ), "name": __name__,
                      "path0": sys.path[0], "cgroup": open("/proc/self/cgroup").read(),
                      "stdin": sys.stdin.read(), "umask": os.umask(0o022)}))
    print("to stdout", what)
    print("to stderr", what, file=sys.stderr)
    if what == "exit":
        return int(argv[1])
    if what == "raise":
        raise ValueError("boom from zjob")
    if what == "sysexit":
        sys.exit("a message, not a code")
    if what == "sleep":
        if len(argv) > 1:
            signal.signal(signal.SIGTERM, lambda *_: (open("term.txt", "w").write("bye"), os._exit(7)))
        open("ready.txt", "w").write("ready")
        while True:
            time.sleep(0.05)
    if what == "spin":
        open("ready.txt", "w").write("ready")
        n = 0
        while True:
            n += 1
            if n % 100000 == 0:
                open("count.txt", "w").write(str(n))
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


@pytest.fixture
def world():
    """(iwd, execute, module dir): outside pytest's tmp_path, whose 0700 parents nobody cannot cross."""
    base = Path(tempfile.mkdtemp(prefix="htc-zygote-test-"))
    base.chmod(0o755)
    iwd, execute, mods = base / "iwd", base / "execute", base / "mods"
    iwd.mkdir()
    mods.mkdir()
    (mods / "zjob.py").write_text(ZJOB)
    for path in (iwd, mods):
        path.chmod(0o755)
    (mods / "zjob.py").chmod(0o644)
    try:
        yield iwd, execute, mods
    finally:
        shutil.rmtree(base)


def job(iwd: Path, mods: Path, args: str, module: str = "zjob", **attrs):
    ad = {"ClusterId": 7, "ProcId": 0, "Cmd": PY, "TransferExecutable": False, "Arguments": f"-m {module} {args}",
          "Iwd": str(iwd), "Out": "out.txt", "Err": "err.txt", "RequestMemory": 256,
          "Environment": f"PYTHONPATH={mods} MARK=zz", "ShouldTransferFiles": "YES",
          "WhenToTransferOutput": "ON_EXIT"}
    ad.update(attrs)
    return ad


SETTINGS = StarterSettings(zygote_modules=("zjob",))


def facts(iwd: Path) -> dict:
    import ast

    return ast.literal_eval((iwd / "facts.txt").read_text())


async def run(ad, execute, pool, settings=SETTINGS):
    starter = Starter(ad, execute, settings, pool)
    await starter.start()
    return starter, await asyncio.wait_for(starter.wait(), 60)


async def suspends_and_resumes(starter, counter) -> None:
    """The job counting into ``counter`` stops counting while suspended and counts on after."""
    starter.suspend()
    await until(lambda: psutil.Process(starter.pid).status() == psutil.STATUS_STOPPED)
    await asyncio.sleep(0.1)
    before = counter.read_text()
    await asyncio.sleep(0.3)
    assert counter.read_text() == before
    starter.resume()
    await until(lambda: counter.read_text() != before)


async def until(predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the job never got there"
        await asyncio.sleep(0.01)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_eligibility_and_keys():
    assert eligible_module(["/py", "-m", "zjob", "x"], ("zjob",)) == "zjob"
    assert eligible_module(["/py", "-m", "other"], ("zjob",)) is None
    assert eligible_module(["/py", "zjob.py"], ("zjob",)) is None
    assert eligible_module(["/bin/sh"], ("zjob",)) is None
    env = {"PYTHONPATH": "/a", "LANG": "C.UTF-8", "_CONDOR_SCRATCH_DIR": "/x", "OMP_NUM_THREADS": "1"}
    assert zygote_environment(env) == {"PYTHONPATH": "/a", "LANG": "C.UTF-8"}
    one = ZygoteKey.for_job(["/py", "-m", "m"], "m", 1, 1, env)
    assert one == ZygoteKey.for_job(["/py", "-m", "m"], "m", 1, 1, {**env, "_CONDOR_SCRATCH_DIR": "/y"})
    assert one != ZygoteKey.for_job(["/py", "-m", "m"], "m", 1, 1, {**env, "PYTHONPATH": "/b"})
    assert one != ZygoteKey.for_job(["/py", "-m", "m"], "m", 2, 2, env)


def test_module_jobs_are_forked_by_one_zygote(world):
    iwd, execute, mods = world
    (iwd / "in.txt").write_text("standard input\n")

    async def go():
        pool = ZygotePool()
        try:
            first, record = await run(job(iwd, mods, "exit 3 extra", In="in.txt"), execute, pool)
            seen = facts(iwd)
            assert first.zygote_pid is not None and pool.pids() == {next(iter(pool.pids())): first.zygote_pid}
            assert psutil.pid_exists(first.zygote_pid)  # it stays for the next job
            if ROOT:  # the zygote itself is the slot account's (the job names no Owner), not root's
                assert psutil.Process(first.zygote_pid).uids().real == pwd.getpwnam("htc-slot1").pw_uid
            second, record2 = await run(job(iwd, mods, "exit 0"), execute, pool)
            assert second.zygote_pid == first.zygote_pid and facts(iwd)["ppid"] == first.zygote_pid
            return first.zygote_pid, record, seen, record2
        finally:
            pool.close()

    zygote, record, seen, record2 = asyncio.run(go())
    assert gone(zygote)  # close() ended it
    assert record.exit_code == 3 and not record.exit_by_signal and record2.exit_code == 0
    assert seen["ppid"] == zygote and seen["name"] == "__main__"
    assert seen["argv"] == ["exit", "3", "extra"] and seen["argv0"].endswith("zjob.py")
    assert seen["cwd"].startswith(str(execute)) and seen["path0"] == seen["cwd"]
    assert seen["env"]["MARK"] == "zz" and seen["env"]["_CONDOR_SCRATCH_DIR"] == seen["cwd"]
    assert any(name.startswith("_CONDOR_ANCESTOR_") for name in seen["env"])
    assert "STARTD_SECRET" not in seen["env"] and seen["stdin"] == "standard input\n"
    assert seen["umask"] == 0o022
    assert (iwd / "out.txt").read_text() == "to stdout exit\n"
    assert (iwd / "err.txt").read_text() == "to stderr exit\n"
    assert record.usage.resident_set_size > 1000 and record.usage.disk_usage > 0
    if ROOT:  # a job that names no Owner runs as the slot's account, htc-slot1
        assert seen["uid"] == pwd.getpwnam("htc-slot1").pw_uid
    if limits.detect_cgroups().version:
        assert "htc_dir_" in seen["cgroup"], seen["cgroup"]
    assert list(execute.iterdir()) == []


def test_raising_and_exiting_modules_report_like_the_interpreter(world):
    iwd, execute, mods = world

    async def go():
        pool = ZygotePool()
        try:
            raised = await run(job(iwd, mods, "raise"), execute, pool)
            err_raise = (iwd / "err.txt").read_text()
            exited = await run(job(iwd, mods, "sysexit"), execute, pool)
            return raised, err_raise, exited, (iwd / "err.txt").read_text()
        finally:
            pool.close()

    (raised, r1), err_raise, (exited, r2), err_exit = asyncio.run(go())
    assert raised.zygote_pid is not None and exited.zygote_pid == raised.zygote_pid
    assert r1.exit_code == 1 and "Traceback" in err_raise and "ValueError: boom from zjob" in err_raise
    assert r2.exit_code == 1 and err_exit.endswith("a message, not a code\n")


def test_vacate_kill_and_suspend_reach_a_forked_job(world):
    iwd, execute, mods = world

    async def go():
        pool = ZygotePool()
        try:
            # suspend / resume
            starter = Starter(job(iwd, mods, "spin"), execute, SETTINGS, pool)
            await starter.start()
            assert starter.zygote_pid is not None
            box = starter.sandbox.path
            await until(lambda: (box / "count.txt").exists())
            await suspends_and_resumes(starter, box / "count.txt")
            killed = await starter.kill()
            # vacate: the job's SIGTERM handler runs and it leaves on its own
            starter = Starter(job(iwd, mods, "sleep handler", WhenToTransferOutput="ON_EXIT_OR_EVICT"), execute,
                              SETTINGS, pool)
            await starter.start()
            await until(lambda: (starter.sandbox.path / "ready.txt").exists())
            vacated = await starter.vacate(grace=10)
            # vacate past the grace: killed
            starter = Starter(job(iwd, mods, "sleep"), execute, SETTINGS, pool)
            await starter.start()
            await until(lambda: (starter.sandbox.path / "ready.txt").exists())
            t0 = time.monotonic()
            hard = await starter.vacate(grace=0.3)
            return killed, vacated, hard, time.monotonic() - t0
        finally:
            pool.close()

    killed, vacated, hard, took = asyncio.run(go())
    assert killed.exit_signal == signal.SIGKILL and killed.vacated
    assert vacated.exit_code == 7 and vacated.vacated and (iwd / "term.txt").read_text() == "bye"
    assert hard.exit_signal == signal.SIGTERM and hard.vacated and took < 5  # default SIGTERM: no handler
    assert list(execute.iterdir()) == []


def test_ineligible_jobs_and_a_disabled_zygote_use_exec(world):
    iwd, execute, mods = world
    script = iwd / "job.sh"
    script.write_text("#!/bin/sh\necho plain\n")
    script.chmod(0o755)

    async def go():
        pool = ZygotePool()
        try:
            no_exec = StarterSettings(zygote_modules=("zjob",), use_exec_zygote=False)
            plain, r1 = await run({**job(iwd, mods, ""), "Cmd": "job.sh", "TransferExecutable": True,
                                   "Arguments": ""}, execute, pool, no_exec)
            other, r2 = await run(job(iwd, mods, "exit 5"), execute, pool,
                                  StarterSettings(use_exec_zygote=False))  # zjob not listed
            off, r3 = await run(job(iwd, mods, "exit 6"), execute, pool,
                                StarterSettings(zygote_modules=("zjob",), use_zygote=False, use_exec_zygote=False))
            return [s.zygote_pid for s in (plain, other, off)], [r.exit_code for r in (r1, r2, r3)], pool.pids()
        finally:
            pool.close()

    zygotes, codes, pids = asyncio.run(go())
    assert zygotes == [None, None, None] and codes == [0, 5, 6] and pids == {}


def test_a_module_the_zygote_cannot_import_falls_back_to_exec(world):
    iwd, execute, mods = world

    async def go():
        pool = ZygotePool()
        try:
            return await run(job(iwd, mods, "", module="no_such_module_here"), execute, pool,
                             StarterSettings(zygote_modules=("no_such_module_here",)))
        finally:
            pool.close()

    starter, record = asyncio.run(go())
    assert starter.zygote_pid is None and record.exit_code == 1
    assert "No module named no_such_module_here" in (iwd / "err.txt").read_text()


def test_a_zygote_that_cannot_start_is_tried_again_after_a_while_by_the_pools_clock(tmp_path):
    count = tmp_path / "launches"
    broken_python = tmp_path / "python"
    broken_python.write_text(f"#!/bin/sh\necho launched >> {count}\nexit 1\n")
    broken_python.chmod(0o755)
    clock = FakeClock()
    pool = ZygotePool(clock=clock)
    key = ZygoteKey(str(broken_python), "zjob", None, None, ())

    async def go():
        launches = []
        for wait in (0, zygote.RETRY_AFTER - 1, 1):  # the second run comes before the retry is due
            clock.advance(wait)
            assert await pool.run(key, {}, [], None) is None  # (the starter execs the job)
            launches.append(count.read_text().count("launched"))
        return launches

    try:
        assert asyncio.run(go()) == [1, 1, 2]
    finally:
        pool.close()


def test_a_zygote_killed_between_jobs_is_replaced(world):
    iwd, execute, mods = world

    async def go():
        pool = ZygotePool()
        try:
            first, r1 = await run(job(iwd, mods, "exit 0"), execute, pool)
            os.kill(first.zygote_pid, signal.SIGKILL)
            await until(lambda: not pool.pids())  # the pool notices at once (its socket closes)
            second, r2 = await run(job(iwd, mods, "exit 4"), execute, pool)
            return first.zygote_pid, second.zygote_pid, r1, r2
        finally:
            pool.close()

    z1, z2, r1, r2 = asyncio.run(go())
    assert r1.exit_code == 0 and r2.exit_code == 4
    assert z2 is not None and z2 != z1 and gone(z1) and gone(z2)


def test_a_zygote_killed_while_its_job_runs_reports_the_job_killed(world):
    iwd, execute, mods = world

    async def go():
        pool = ZygotePool()
        try:
            starter = Starter(job(iwd, mods, "sleep"), execute, SETTINGS, pool)
            await starter.start()
            await until(lambda: (starter.sandbox.path / "ready.txt").exists())
            os.kill(starter.zygote_pid, signal.SIGKILL)
            record = await asyncio.wait_for(starter.wait(), 30)
            return starter.pid, record
        finally:
            pool.close()

    pid, record = asyncio.run(go())
    assert record.exit_signal == signal.SIGKILL and not record.vacated
    assert gone(pid)
    assert list(execute.iterdir()) == []


def test_concurrent_first_jobs_share_one_new_zygote(world):
    iwd, execute, mods = world
    iwds = []
    for n in range(3):
        (iwd / str(n)).mkdir()
        (iwd / str(n)).chmod(0o777)
        iwds.append(iwd / str(n))

    async def go():
        pool = ZygotePool()
        try:
            done = await asyncio.gather(*(run(job(d, mods, f"exit {n}"), execute, pool) for n, d in enumerate(iwds)))
            return [s.zygote_pid for s, _ in done], [r.exit_code for _, r in done]
        finally:
            pool.close()

    zygotes, codes = asyncio.run(go())
    assert codes == [0, 1, 2] and len(set(zygotes)) == 1 and zygotes[0] is not None


@pytest.mark.skipif(not ROOT, reason="tests the root path (the job runs as the slot account with a Python prepared for it); run the tests as root, as CI does")
def test_a_function_job_runs_the_real_worker_through_the_zygote(world):
    iwd, execute, _ = world
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from executor_pool import execute_python

    from htc.wire import callfile as cf
    from htc.executors.serialize import dumps_call, loads, python_version

    python, env = execute_python(iwd.parent / "python")
    pickled = dumps_call(pow, (2, 10), {})
    header = cf.CallHeader(call_id="c1", function="pow", python=python_version(), packages=pickled.packages,
                           check_versions=False)
    results = []

    async def go():
        pool = ZygotePool()
        try:
            for n in range(2):
                cf.write_call(iwd / cf.CALL_FILE, header, pickled.payload)
                ad = {"ClusterId": 9, "ProcId": n, "Cmd": python, "TransferExecutable": False,
                      "Arguments": "-m htc.executors.worker", "Iwd": str(iwd), "Out": "stdout", "Err": "stderr",
                      "Environment": " ".join(f"{k}={v}" for k, v in env.items()), "ShouldTransferFiles": "YES",
                      "TransferInput": cf.CALL_FILE, "WhenToTransferOutput": "ON_EXIT", "RequestMemory": 256}
                starter, record = await run(ad, execute, pool, StarterSettings())
                result_header, payload = cf.read_result(iwd / cf.RESULT_FILE)
                results.append((starter.zygote_pid, record.exit_code, result_header.outcome,
                                loads(payload, result_header.serializer), (iwd / "stderr").read_text()))
                (iwd / cf.RESULT_FILE).unlink()
        finally:
            pool.close()

    asyncio.run(go())
    (z1, code1, outcome1, value1, err1), (z2, code2, outcome2, value2, _) = results
    assert (code1, outcome1, value1) == (0, "value", 1024), err1
    assert (code2, outcome2, value2) == (0, "value", 1024)
    assert z1 is not None and z1 == z2

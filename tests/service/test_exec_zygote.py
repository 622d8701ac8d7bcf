"""The exec zygote with real processes: a small root process forks and execs every plain job.

What matters: a job started through it is what fork+exec gives (user, cgroup, files, exit
status, signals, environment, a start failure's message), one zygote serves every job, and
zygote trouble ends in a job that still runs or is reported ended -- never a hang.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import re
import shutil
import signal
import tempfile
from pathlib import Path

import psutil
import pytest

from htc.daemons.starter import limits
from htc.daemons.starter.service import Starter, StarterError, StarterSettings
from htc.daemons.starter.zygote import ZygotePool
from htc.daemons.starter.zygote_keys import ZygoteKey
from test_starter_zygote import gone, suspends_and_resumes, until

ROOT = os.geteuid() == 0
SETTINGS = StarterSettings()
NO_EXEC_ZYGOTE = StarterSettings(use_exec_zygote=False)


@pytest.fixture
def dirs():
    """(iwd, execute): outside pytest's tmp_path, whose 0700 parents nobody cannot cross."""
    base = Path(tempfile.mkdtemp(prefix="htc-exec-zygote-test-"))
    base.chmod(0o755)
    iwd, execute = base / "iwd", base / "execute"
    iwd.mkdir()
    iwd.chmod(0o777)
    try:
        yield iwd, execute
    finally:
        shutil.rmtree(base)


def script(iwd: Path, body: str, name: str = "job.sh") -> str:
    path = iwd / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return name


def job(iwd: Path, cmd: str, **attrs):
    ad = {"ClusterId": 3, "ProcId": 0, "Cmd": cmd, "Iwd": str(iwd), "Out": "out.txt", "Err": "err.txt",
          "RequestMemory": 128, "Environment": "MARK=zz", "ShouldTransferFiles": "YES",
          "WhenToTransferOutput": "ON_EXIT"}
    ad.update(attrs)
    return ad


async def run(ad, execute, pool, settings=SETTINGS):
    starter = Starter(ad, execute, settings, pool)
    await starter.start()
    return starter, await asyncio.wait_for(starter.wait(), 60)


FACTS = ('id -u > facts.uid; echo $PPID > facts.ppid; cat /proc/self/cgroup > facts.cgroup; '
         'grep -E "^Sig(Ign|Blk)" /proc/self/status > facts.sig; env | sort > facts.env; pwd > facts.cwd; '
         'umask > facts.umask; ulimit -c > facts.core')


def test_plain_executables_and_scripts_share_one_exec_zygote(dirs):
    iwd, execute = dirs
    (iwd / "in.txt").write_text("standard input\n")
    script(iwd, FACTS + '\ncat; echo "to stderr" >&2; exit 3')

    async def go():
        pool = ZygotePool()
        try:
            true, r_true = await run(job(iwd, "/bin/true", TransferExecutable=False), execute, pool)
            false, r_false = await run(job(iwd, "/bin/false", TransferExecutable=False), execute, pool)
            sh, r_sh = await run(job(iwd, "job.sh", In="in.txt", TransferOutput="facts.uid,facts.ppid,"
                                     "facts.cgroup,facts.sig,facts.env,facts.cwd,facts.umask,facts.core"),
                                 execute, pool)
            zygote = pool.pids()[ZygoteKey.for_exec()]
            assert psutil.Process(zygote).uids().real == os.geteuid()  # root when we are: it setuids children
            return [s.zygote_pid for s in (true, false, sh)], zygote, (r_true, r_false, r_sh)
        finally:
            pool.close()

    zygotes, zygote, (r_true, r_false, r_sh) = asyncio.run(go())
    assert zygotes == [zygote] * 3 and gone(zygote)  # close() ended it
    assert (r_true.exit_code, r_false.exit_code, r_sh.exit_code) == (0, 1, 3)
    assert not any(r.exit_by_signal for r in (r_true, r_false, r_sh))
    assert (iwd / "out.txt").read_text() == "standard input\n"
    assert (iwd / "err.txt").read_text() == "to stderr\n"
    assert int((iwd / "facts.ppid").read_text()) == zygote
    assert (iwd / "facts.umask").read_text().strip() == "0022"
    assert (iwd / "facts.core").read_text().strip() == "0"
    assert (iwd / "facts.cwd").read_text().strip().startswith(str(execute))
    env = dict(line.split("=", 1) for line in (iwd / "facts.env").read_text().splitlines() if "=" in line)
    assert env["MARK"] == "zz" and any(name.startswith("_CONDOR_ANCESTOR_") for name in env)
    sig = dict(line.split(":") for line in (iwd / "facts.sig").read_text().splitlines())
    assert int(sig["SigBlk"], 16) == 0
    assert not int(sig["SigIgn"], 16) & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGHUP - 1))
    if ROOT:
        # a job that names no Owner runs as the slot's account, htc-slot1
        assert int((iwd / "facts.uid").read_text()) == pwd.getpwnam("htc-slot1").pw_uid
    if limits.detect_cgroups().version:
        assert "htc_dir_" in (iwd / "facts.cgroup").read_text()
    assert r_sh.usage.disk_usage >= 0 and r_true.usage.resident_set_size >= 0
    assert list(execute.iterdir()) == []


def test_signals_and_usage_come_back_like_exec(dirs):
    iwd, execute = dirs
    script(iwd, 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; kill -USR1 $$', "burn.sh")

    async def go():
        pool = ZygotePool()
        try:
            return await run(job(iwd, "burn.sh"), execute, pool)
        finally:
            pool.close()

    starter, record = asyncio.run(go())
    assert starter.zygote_pid is not None
    assert record.exit_signal == signal.SIGUSR1 and record.exit_code is None
    assert record.usage.remote_user_cpu + record.usage.remote_sys_cpu > 0.05
    assert record.usage.resident_set_size > 0


def test_a_start_failure_says_what_exec_says(dirs):
    iwd, execute = dirs
    (iwd / "notexec.bin").write_bytes(b"\x00\x01garbage")
    (iwd / "noperm.sh").write_text("#!/bin/sh\ntrue\n")
    (iwd / "noperm.sh").chmod(0o644)

    async def go():
        pool = ZygotePool()
        messages = []
        try:
            for ad in (job(iwd, "notexec.bin"), job(iwd, "/no/such/program", TransferExecutable=False),
                       job(iwd, str(iwd / "noperm.sh"), TransferExecutable=False)):
                pair = []
                for settings in (SETTINGS, NO_EXEC_ZYGOTE):
                    with pytest.raises(StarterError) as caught:
                        await run(ad, execute, pool, settings)
                    pair.append(re.sub(r"dir_\d+_\d+", "SANDBOX", str(caught.value)))
                messages.append(pair)
            zygote = pool.pids()[ZygoteKey.for_exec()]
            ok, record = await run(job(iwd, "/bin/true", TransferExecutable=False), execute, pool)
            assert ok.zygote_pid == zygote and record.exit_code == 0  # the zygote is unharmed
            return messages
        finally:
            pool.close()

    messages = asyncio.run(go())
    for by_zygote, by_exec in messages:
        assert by_zygote == by_exec and by_zygote.startswith("Failed to execute '")
    assert "(errno=8: 'Exec format error')" in messages[0][0] and "not a program this machine can run" in messages[0][0]
    assert "(errno=2: 'No such file or directory')" in messages[1][0]
    assert "/no/such/program does not exist on this machine (with transfer_executable = false" in messages[1][0]
    # condor_submit accepts an executable without execute permission; run in place, it says so
    assert "(errno=13: 'Permission denied')" in messages[2][0]
    assert f"{iwd / 'noperm.sh'} is not executable (its mode is 0644)" in messages[2][0]
    assert list(execute.iterdir()) == []


def test_vacate_kill_and_suspend_reach_an_exec_zygote_job(dirs):
    iwd, execute = dirs
    script(iwd, 'n=0; echo ready > ready.txt; while true; do n=$((n+1)); echo $n > count.txt; done', "spin.sh")
    script(iwd, "trap 'echo bye > term.txt; exit 7' TERM; echo ready > ready.txt; "
                "while true; do sleep 0.05; done", "polite.sh")
    script(iwd, "echo ready > ready.txt; exec sleep 1000", "sleeper.sh")

    async def go():
        pool = ZygotePool()
        try:
            starter = Starter(job(iwd, "spin.sh"), execute, SETTINGS, pool)
            await starter.start()
            assert starter.zygote_pid is not None
            box = starter.sandbox.path
            await until(lambda: (box / "count.txt").exists() and (box / "count.txt").read_text().strip())
            await suspends_and_resumes(starter, box / "count.txt")
            killed = await starter.kill()
            starter = Starter(job(iwd, "polite.sh", WhenToTransferOutput="ON_EXIT_OR_EVICT"), execute, SETTINGS,
                              pool)
            await starter.start()
            await until(lambda: (starter.sandbox.path / "ready.txt").exists())
            vacated = await starter.vacate(grace=10)
            starter = Starter(job(iwd, "sleeper.sh", KillSig="SIGKILL"), execute, SETTINGS, pool)
            await starter.start()
            await until(lambda: (starter.sandbox.path / "ready.txt").exists())
            hard = await starter.vacate(grace=0.3)
            return killed, vacated, hard
        finally:
            pool.close()

    killed, vacated, hard = asyncio.run(go())
    assert killed.exit_signal == signal.SIGKILL and killed.vacated
    assert vacated.exit_code == 7 and vacated.vacated and (iwd / "term.txt").read_text() == "bye\n"
    assert hard.exit_signal == signal.SIGKILL and hard.vacated
    assert list(execute.iterdir()) == []


def test_a_killed_exec_zygote_is_replaced_and_its_running_job_reported_killed(dirs):
    iwd, execute = dirs
    script(iwd, "echo ready > ready.txt; exec sleep 1000", "sleeper.sh")

    async def go():
        pool = ZygotePool()
        try:
            first, r1 = await run(job(iwd, "/bin/true", TransferExecutable=False), execute, pool)
            os.kill(first.zygote_pid, signal.SIGKILL)
            await until(lambda: not pool.pids())  # the pool notices at once (its socket closes)
            starter = Starter(job(iwd, "sleeper.sh"), execute, SETTINGS, pool)
            await starter.start()
            await until(lambda: (starter.sandbox.path / "ready.txt").exists())
            second = starter.zygote_pid
            os.kill(second, signal.SIGKILL)
            r2 = await asyncio.wait_for(starter.wait(), 30)
            third, r3 = await run(job(iwd, "/bin/false", TransferExecutable=False), execute, pool)
            return first.zygote_pid, second, starter.pid, third.zygote_pid, r1, r2, r3
        finally:
            pool.close()

    z1, z2, pid, z3, r1, r2, r3 = asyncio.run(go())
    assert r1.exit_code == 0 and r2.exit_signal == signal.SIGKILL and not r2.vacated and r3.exit_code == 1
    assert None not in (z2, z3) and len({z1, z2, z3}) == 3
    assert gone(pid) and gone(z1) and gone(z2) and gone(z3)
    assert list(execute.iterdir()) == []


def test_without_a_pool_or_with_the_knob_off_jobs_are_forked_by_the_starter(dirs):
    iwd, execute = dirs

    async def go():
        pool = ZygotePool()
        try:
            alone, r1 = await run(job(iwd, "/bin/true", TransferExecutable=False), execute, None)
            off, r2 = await run(job(iwd, "/bin/false", TransferExecutable=False), execute, pool, NO_EXEC_ZYGOTE)
            return alone.zygote_pid, off.zygote_pid, r1.exit_code, r2.exit_code, pool.pids()
        finally:
            pool.close()

    assert asyncio.run(go()) == (None, None, 0, 1, {})

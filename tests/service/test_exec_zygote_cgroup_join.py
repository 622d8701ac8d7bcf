"""Under cgroup v1 the exec zygote's child joins the job's cgroups itself (writing 0 to each
hierarchy's ``tasks``, still root, past the gate), so the startd never moves it by pid -- a
move that waits for an RCU grace period on its event loop -- and it is in every one of them
before the job runs; a child that cannot join ends unrun and the job is exec'd as before."""

from __future__ import annotations

import asyncio
import os

import pytest

from htc.daemons.starter import limits
from htc.daemons.starter.zygote import ZygotePool
from test_exec_zygote import dirs, job, run, script  # noqa: F401 -- dirs is a fixture

V1 = limits.detect_cgroups().version == 1


def _probe_v1() -> None:
    if os.geteuid() != 0 or not V1:
        pytest.skip("needs cgroup v1 hierarchies the startd may write: run the tests as root, as CI does "
                    "(on a cgroup v2 host the startd moves the job by pid, tested elsewhere)")


def test_the_job_joins_each_v1_hierarchy_itself(dirs, monkeypatch):  # noqa: F811
    _probe_v1()
    iwd, execute = dirs
    script(iwd, "cat /proc/self/cgroup > facts.cgroup")
    moved_by_pid: list[int] = []
    monkeypatch.setattr(limits.JobCgroup, "add", lambda self, pid: moved_by_pid.append(pid))

    async def go():
        pool = ZygotePool()
        try:
            starter, record = await run(job(iwd, "job.sh"), execute, pool)
            return starter, record
        finally:
            pool.close()

    starter, record = asyncio.run(go())
    assert starter.zygote_pid is not None and record.exit_code == 0
    assert moved_by_pid == []  # nobody wrote its pid into cgroup.procs
    lines = (iwd / "facts.cgroup").read_text().splitlines()
    joined = [line for line in lines if "htc_dir_" in line]
    hierarchies = {line.split(":")[1] for line in joined}
    assert len(joined) >= 2 and all(h for h in hierarchies)  # each of the job's v1 hierarchies


def test_a_child_that_cannot_join_ends_unrun_and_the_job_is_execd(dirs, monkeypatch):  # noqa: F811
    _probe_v1()
    iwd, execute = dirs
    script(iwd, "echo ran >> runs.txt; cat /proc/self/cgroup > facts.cgroup")
    real = limits.JobCgroup.self_join_files
    monkeypatch.setattr(limits.JobCgroup, "self_join_files",
                        lambda self: [p.with_name("no-such-tasks") for p in real(self)])

    async def go():
        pool = ZygotePool()
        try:
            return await run(job(iwd, "job.sh"), execute, pool)
        finally:
            pool.close()

    starter, record = asyncio.run(go())
    assert record.exit_code == 0
    assert starter.zygote_pid is None  # exec'd the ordinary way
    assert (iwd / "runs.txt").read_text() == "ran\n"  # once: the zygote's child ran nothing
    assert "htc_dir_" in (iwd / "facts.cgroup").read_text()

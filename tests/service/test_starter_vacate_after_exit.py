"""A vacate that reaches the starter after its job has exited by itself does not make the run a
vacated one: the job's exit stands (and its output goes back), so the schedd records it done
instead of requeueing it to run again -- from its last checkpoint image, for a standard-universe
job, redoing the work since (tests/system/test_executor_transparent_ckpt.py's bound)."""

from __future__ import annotations

import asyncio

from htc.daemons.starter.service import Starter
from tests.service.test_starter import dirs, job, script, until  # noqa: F401 (dirs: a fixture)


def test_a_vacate_after_the_job_exited_leaves_its_exit_as_it_was(dirs):  # noqa: F811
    iwd, execute = dirs
    cmd = script(iwd, "echo done\nexit 0")

    async def go():
        starter = Starter(job(iwd, cmd), execute)
        await starter.start()
        waiting = asyncio.ensure_future(starter.wait())  # (as the starter's service does)
        await until(lambda: starter.ended)  # the job is gone; the starter finishes up ...
        vacated = await starter.vacate(grace=10)  # ... when the startd's vacate reaches it
        assert vacated is await waiting
        return vacated

    record = asyncio.run(go())
    assert record.exit_code == 0 and record.exit_signal is None
    assert not record.vacated
    assert (iwd / "out.txt").read_text() == "done\n"  # the output of a job that ended by itself

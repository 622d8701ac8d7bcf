"""``universe = standard`` with the execute machine in another FileSystemDomain: the job's
forwarded file calls are served on the submit side (issue #20, "In the pool", test 3 across
FileSystemDomains).

The startd is told it is in FILESYSTEM_DOMAIN ``elsewhere.example``; the schedd keeps the host's.
The job is ``python3 job.py`` whose script and input exist only in its Iwd, a directory only
its owner (root) may enter, while the job itself runs as ``nobody``. Its starter must not serve
the calls itself: it relays them to the schedd (RelayJobIO), whose file server runs as the owner
in the Iwd. fanotify names the process behind every open in the Iwd: only the schedd's children
(its file server, its shadow's transfers) and this test may appear, never the startd or
anything it started.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import htcondor2
import pytest

from ckpt_images import runtime_tools
from poolutil import open_pool, wait_for
from test_pool_wire_transfer import OpenWatch

pytestmark = pytest.mark.slow

T = htcondor2.JobEventType

SCRIPT = """\
import os
with open("input.txt") as f:
    text = f.read()
os.mkdir("results")
with open("results/output.txt", "w") as out:
    out.write(text.upper())
    out.write("uid %d\\n" % os.getuid())
"""


@pytest.fixture(scope="module")
def pool():
    if os.geteuid() != 0:
        pytest.skip("the execute side is kept out of the Iwd by fanotify, which needs root; run the tests as "
                    "root, as CI does")
    runtime_tools()
    with open_pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD",
                   config="STARTD.FILESYSTEM_DOMAIN = elsewhere.example\n") as started:
        yield started


def test_a_standard_job_in_another_filesystem_domain_has_its_calls_served_by_the_schedd(pool):
    iwd = pool.work / "relay"
    iwd.mkdir()
    iwd.chmod(0o700)  # the job runs as nobody: only forwarded calls, run as the owner, get in
    (iwd / "job.py").write_text(SCRIPT)
    (iwd / "input.txt").write_text("only on the submit side\n")
    watch = OpenWatch()
    watch.watch(iwd)
    watch.start()
    schedd, startd = pool.running_pid("SCHEDD"), pool.running_pid("STARTD")
    try:
        reply = pool.submit(f"universe = standard\nexecutable = /usr/bin/python3\ntransfer_executable = false\n"
                            f"arguments = job.py\ninitialdir = {iwd}\nshould_transfer_files = YES\n"
                            "log = job.log\nerror = job.err\nqueue\n")
        events = pool.log_events(iwd / "job.log", until=lambda evs: any(e.type == T.JOB_TERMINATED for e in evs),
                                 timeout=120)
    finally:
        opens = watch.stop()
    done = events[-1]
    assert done.type == T.JOB_TERMINATED and done["ReturnValue"] == 0, \
        ((iwd / "job.err").read_text() if (iwd / "job.err").exists() else "", pool.jobs(f"ClusterId == {reply.cluster_id}"))
    assert (iwd / "results" / "output.txt").read_text().startswith("ONLY ON THE SUBMIT SIDE\n")
    assert (iwd / "results" / "output.txt").read_text().splitlines()[1] != "uid 0"  # the job: not root
    assert (iwd / "results" / "output.txt").stat().st_uid == 0  # written by the owner's server
    logs = "".join(path.read_text() for path in (pool.home / "log").glob("Sched*Log*"))
    servers = {int(pid) for pid in re.findall(rf"job {reply.cluster_id}\.0: serving its forwarded file calls .*"
                                              r"\(file server pid (\d+)\)", logs)}
    assert len(servers) == 1, logs[-3000:]
    openers = {pid for pid, _ in opens}
    assert startd not in openers
    assert servers <= openers  # the schedd's file server opened the script, the input, the output
    assert openers <= {schedd, os.getpid()} | servers, opens

    def charged():  # the relay's CPU (its file server's included) is in the job's SubmitSideCpu
        out = subprocess.run([sys.executable, "-m", "htc.cli.main", "history", f"{reply.cluster_id}.0", "-af",
                              "SubmitSideCpuJobIO", "SubmitSideCpu"], env=pool.env, capture_output=True, text=True,
                             timeout=60).stdout.split()
        return out or None

    relayed, local = (float(x) for x in wait_for(charged, timeout=60, what="the job in the history"))
    assert 0 < relayed <= local


def test_a_relay_for_a_run_the_schedd_does_not_follow_is_refused_and_it_keeps_serving(pool):
    import asyncio

    from htc.client.request import ping
    from htc.wire import messages as m

    async def ask() -> m.Message:
        conn = await pool.transport.open_connection("schedd")
        try:
            await conn.send(m.RelayJobIO(claim_id="not-a-claim", job_id="1.0"))
            return await conn.recv(timeout=20)
        finally:
            await conn.aclose()

    reply = asyncio.run(ask())
    assert isinstance(reply, m.ErrorReply) and reply.code == "not_found"
    assert "no run of job 1.0 on that claim" in reply.message
    assert ping("schedd", transport=pool.transport).daemon == "schedd"

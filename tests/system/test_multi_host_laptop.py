"""Issue 18, test 5: a client in a fifth host, with only a token, spools a job and runs an executor.

A central manager, a submit host and an execute host form a pool (tests/netns_hosts.py); the
"laptop" runs no daemons and shares no file system with them (each host has its own /tmp). With
a token minted on the central manager for ``nobody`` (a user every simulated host has), it

* submits with ``htc submit -spool -pool cm -name SUBMIT``: the input file travels to the submit
  host's spool over the connection; the job runs on the execute host; ``htc transfer_data``
  fetches the output into the laptop's submit directory (test_cli_spool_transfer_data covers the
  details on one host; this is the same across hosts);
* runs ``HTCExecutor(pool="cm", schedd=SUBMIT)``: a map of 20 calls whose results come back in
  order, with one call's exception raised by the map at its place (htc.executors.remote).

The jobs run as ``nobody`` on the execute host, which cannot run the test's own interpreter
(under /root): they use a Python prepared as the executor tests do (tests/executor_pool.py), in a
directory outside every host's private /tmp.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from executor_pool import execute_python
from netns_hosts import HTC_HOME, copy_pool_key, network, networks, pool_config  # noqa: F401 (fixtures)
from test_multi_host_pool import FAST, start, wait_until

TOKENS = "/tmp/home/tokens.d"
USER = "nobody"

CLIENT = """
import json, sys
from htc.executors import HTCExecutor

def square(x):
    if x == 13:
        raise ValueError("thirteen is unlucky")
    return x * x

python, environment, schedd = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
with HTCExecutor(pool="cm", schedd=schedd, python=python, environment=environment, progress=False) as ex:
    got, error = [], None
    try:
        for value in ex.map(square, range(20), timeout=600):  # (an OptionError is a ValueError too)
            got.append(value)
    except ValueError as exc:
        error = f"{type(exc).__name__}: {exc}"
    rest = [f.result(timeout=600) for f in [ex.submit(square, x) for x in range(14, 20)]]
with HTCExecutor(pool="cm", schedd=schedd, name="kept", python=python, environment=environment,
                 progress=False) as ex:
    kept = ex.submit(square, 3).result(timeout=600)
print(json.dumps({"got": got, "error": error, "rest": rest, "kept": kept}), flush=True)
if sys.stdin.readline().strip() == "forget":
    from htc.executors import forget

    forget("kept")
    print("forgotten", flush=True)
"""


def test_a_laptop_spools_a_job_and_runs_an_executor_map(network):
    cm, submit, execute, laptop = network.add_hosts("cm", "submit", "exec1", "laptop")
    for host, role in ((cm, "CentralManager"), (submit, "Submit"), (execute, "Execute")):
        host.write(f"{HTC_HOME}/htc_config", pool_config(role, **FAST))
    start(cm)
    copy_pool_key(cm, submit, execute)
    start(submit)
    start(execute)
    laptop.write(f"{HTC_HOME}/htc_config", f"SEC_TOKEN_DIRECTORY = {TOKENS}\n")
    made = cm.run(["htc", "token", "create", "-identity", f"{USER}@cm.test"])
    assert made.returncode == 0, made.stderr
    laptop.path(TOKENS).mkdir(mode=0o700, parents=True)
    laptop.path(TOKENS).chmod(0o700)
    laptop.write(f"{TOKENS}/pool", made.stdout.strip() + "\n", mode=0o600)
    status = lambda: laptop.run(["htc", "status", "-pool", "cm", "-af", "Name"]).stdout.split()  # noqa: E731
    wait_until(lambda: f"slot1@{execute.fqdn}" in status(), 90, "the execute host's slot from the laptop")
    pool = ["-pool", "cm", "-name", submit.fqdn]

    # htc submit -spool: the input goes over the connection; transfer_data brings the output back.
    laptop.write("/tmp/work/in.txt", "laptop data\n")
    laptop.write("/tmp/work/job.sub", "executable = /bin/sh\narguments = \"-c 'tr a-z A-Z < in.txt > out.txt'\"\n"
                                      "transfer_input_files = in.txt\nshould_transfer_files = YES\nlog = job.log\n"
                                      "queue\n")
    spooled = laptop.run(["htc", "submit", "-spool", *pool, "job.sub"], cwd="/tmp/work")
    assert "submitted to cluster 1" in spooled.stdout, spooled.stdout + spooled.stderr
    queue = lambda: laptop.run(["htc", "q", *pool, "-af", "JobStatus", "Owner"]).stdout.split()  # noqa: E731
    wait_until(lambda: queue() == ["4", USER], 180,
               f"the spooled job to complete (queue: {queue()}; {submit.run(['tail', '-n', '20', '/tmp/htc/log/SchedLog']).stdout})")
    assert not laptop.path("/tmp/work/out.txt").exists()
    fetched = laptop.run(["htc", "transfer_data", *pool, "1"], cwd="/tmp/work")
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    assert laptop.path("/tmp/work/out.txt").read_text() == "LAPTOP DATA\n"
    assert "Job terminated" in laptop.path("/tmp/work/job.log").read_text()

    # HTCExecutor(pool="cm"): calls, results and events over the connection.
    root = Path(tempfile.mkdtemp(prefix="htc-laptop-py-", dir="/var/tmp"))
    try:
        root.chmod(0o755)
        python, environment = execute_python(root)
        laptop.write("/tmp/work/client.py", CLIENT)
        client = laptop.popen([sys.executable, "client.py", python, json.dumps(environment), submit.fqdn],
                              cwd="/tmp/work", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        try:
            line = client.stdout.readline()
            assert line, client.stderr.read() + submit.run(["tail", "-n", "30", "/tmp/htc/log/SchedLog"]).stdout
            out = json.loads(line)
            assert out["got"] == [x * x for x in range(13)]
            assert out["error"] == "ValueError: thirteen is unlucky"
            assert out["rest"] == [x * x for x in range(14, 20)]
            assert out["kept"] == 9
            sessions = lambda: submit.run(["sh", "-c", "ls /tmp/htc/spool/executor/*/"]).stdout.split()  # noqa: E731
            assert sessions() == ["kept"], "the unnamed session is removed from the submit host, the named one kept"
            client.stdin.write("forget\n")
            client.stdin.flush()
            assert client.stdout.readline().strip() == "forgotten", client.stderr.read()
            assert client.wait(timeout=120) == 0
            assert sessions() == [], "htc.executors.forget removes the named session from the submit host"
        finally:
            client.kill()
            client.wait(timeout=30)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for host in (execute, submit, cm):
        assert host.run(["htc", "pool", "stop"], timeout=120).returncode == 0

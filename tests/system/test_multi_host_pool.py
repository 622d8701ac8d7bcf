"""A real pool of four simulated hosts (tests/netns_hosts.py): a central manager, a submit host
and two execute hosts, each running its own master, shared port and daemons, configured only with
roles, CONDOR_HOST and the pool key. The daemons advertise sinful addresses and reach each other
over SSH through the hosts' shared ports; jobs submitted on the submit host run on both execute
hosts, and the user log and the history say so. (Jobs without input files: file transfer
between hosts is another part of issue 18.)"""

from __future__ import annotations

import re
import time

from netns_hosts import HTC_HOME, copy_pool_key, network, networks, pool_config  # noqa: F401 (fixtures)

#: knobs that make the pool react in seconds (as poolutil.FAST does for a personal pool)
FAST = {"UPDATE_INTERVAL": "2", "NEGOTIATOR_INTERVAL": "2", "NEGOTIATOR_CYCLE_DELAY": "0",
        "NEGOTIATOR_MIN_INTERVAL": "0", "SCHEDD_INTERVAL": "5", "SCHEDD_MIN_INTERVAL": "0",
        "MASTER_UPDATE_INTERVAL": "5", "STARTER_INITIAL_UPDATE_INTERVAL": "1", "POLLING_INTERVAL": "1",
        "ALIVE_INTERVAL": "2", "NUM_CPUS": "1", "CONDOR_ADMIN": "", "SSH_KEEPALIVE_INTERVAL": "2"}
JOBS = 6


def wait_until(condition, timeout: float, what: str):
    """Poll another host's state until ``condition()`` is truthy; return it."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.5)


def start(host) -> None:
    done = host.run(["htc", "pool", "start"], timeout=180)
    assert done.returncode == 0, f"htc pool start on {host.name}: {done.stdout}{done.stderr}"


def test_jobs_from_the_submit_host_run_on_both_execute_hosts(network):
    cm, submit, exec1, exec2 = network.add_hosts("cm", "submit", "exec1", "exec2")
    roles = {cm: ("CentralManager",), submit: ("Submit",), exec1: ("Execute",), exec2: ("Execute",)}
    for host, role in roles.items():
        host.write(f"{HTC_HOME}/htc_config", pool_config(*role, **FAST))
    start(cm)  # the central manager makes the pool key; the others get a copy
    copy_pool_key(cm, submit, exec1, exec2)
    for host in (submit, exec1, exec2):
        start(host)

    # Every daemon is in the central manager's collector under its host's sinful address.
    def ads():
        out = cm.run(["htc", "status", "-any", "-af", "MyType", "Name", "MyAddress"]).stdout
        return {tuple(line.split()) for line in out.splitlines() if line.strip()}

    wanted = {("Machine", f"slot1@{h.fqdn}", f"<{h.ip}:9618?sock=startd>") for h in (exec1, exec2)}
    wanted.add(("Scheduler", submit.fqdn, f"<{submit.ip}:9618?sock=schedd>"))
    wanted.add(("Negotiator", f"negotiator@{cm.fqdn}", f"<{cm.ip}:9618?sock=negotiator>"))
    wait_until(lambda: wanted <= ads(), 90, f"the ads of every host in the collector: {wanted}")

    submit.path("/tmp/work").mkdir(mode=0o777)
    submit.path("/tmp/work").chmod(0o777)
    submit.write("/tmp/work/job.sub", f"executable = /bin/sleep\narguments = 2\nlog = /tmp/work/job.log\nqueue {JOBS}\n")
    submitted = submit.run(["htc", "submit", "job.sub"], cwd="/tmp/work")
    assert f"{JOBS} job(s) submitted to cluster 1." in submitted.stdout, submitted.stdout + submitted.stderr

    log = submit.path("/tmp/work/job.log")
    wait_until(lambda: log.exists() and log.read_text().count("Job terminated.") == JOBS, 180,
               f"{JOBS} jobs to terminate (the queue: {submit.run(['htc', 'q']).stdout})")
    text = log.read_text()
    hosts = set(re.findall(r"Job executing on host: <([\d.]+):9618\?sock=startd>", text))
    assert hosts == {exec1.ip, exec2.ip}, text
    slots = set(re.findall(r"SlotName: slot1_\d+@(\S+)", text))
    assert slots == {exec1.fqdn, exec2.fqdn}, text
    assert text.count("(1) Normal termination (return value 0)") == JOBS

    history = submit.run(["htc", "history", "-af", "ProcId", "JobStatus", "LastRemoteHost"]).stdout.split("\n")
    rows = [line.split() for line in history if line.strip()]
    assert sorted(int(r[0]) for r in rows) == list(range(JOBS)) and {r[1] for r in rows} == {"4"}, history
    assert {r[2].split("@", 1)[1] for r in rows} == {exec1.fqdn, exec2.fqdn}, history
    assert submit.run(["htc", "q", "-af", "ProcId"]).stdout.strip() == ""
    for host in (exec1, exec2, submit, cm):
        assert host.run(["htc", "pool", "stop"], timeout=120).returncode == 0

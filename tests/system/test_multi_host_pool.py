"""A real pool of four simulated hosts (tests/netns_hosts.py): a central manager, a submit host
and two execute hosts, each running its own master, shared port and daemons, configured only with
roles, CONDOR_HOST and the pool key. The daemons advertise sinful addresses and reach each other
over SSH through the hosts' shared ports. 100 jobs submitted on the submit host, each with an
input and an output file, run on both execute hosts; each host is its own FileSystemDomain (its
name), so the files travel over the connection (the starter fetches the input from the shadow and
sends the output back). Every output is checked, the user log (read by htc's reader and by
HTCondor's ``htcondor2.JobEventLog``) has each job's submit, execute and termination in order,
and the history has the 100 jobs, each on the execute host its log names.

:func:`start_pool` brings the four hosts up for the other multi-host tests (a cut link:
test_multi_host_link_cut.py)."""

from __future__ import annotations

import re

import htcondor2

import waiting
from htc.eventlog import EventType, read_events
from netns_hosts import HTC_HOME, copy_pool_key, network, networks, pool_config  # noqa: F401 (fixtures)

#: knobs that make the pool react in seconds (as poolutil.FAST does for a personal pool)
FAST = {"UPDATE_INTERVAL": "2", "NEGOTIATOR_INTERVAL": "2", "NEGOTIATOR_CYCLE_DELAY": "0",
        "NEGOTIATOR_MIN_INTERVAL": "0", "SCHEDD_INTERVAL": "5", "SCHEDD_MIN_INTERVAL": "0",
        "MASTER_UPDATE_INTERVAL": "5", "STARTER_INITIAL_UPDATE_INTERVAL": "1", "POLLING_INTERVAL": "1",
        "ALIVE_INTERVAL": "2", "NUM_CPUS": "1", "CONDOR_ADMIN": "", "SSH_KEEPALIVE_INTERVAL": "2"}
JOBS = 100
SLOTS = 4  # CPUs per execute host: four jobs at a time on each

JOB_SCRIPT = """#!/bin/sh
# its input (in_<proc>.txt) upper-cased, then the host it ran on (the execute host's own name)
tr a-z A-Z < "in_$1.txt" > out.txt
hostname >> out.txt
"""


def wait_until(condition, timeout: float, what: str):
    """Poll another host's state every half second (a poll may run a command there) until
    ``condition()`` is truthy; return it."""
    return waiting.wait_until(condition, timeout, what, interval=0.5)


def start(host) -> None:
    done = host.run(["htc", "pool", "start"], timeout=180)
    assert done.returncode == 0, f"htc pool start on {host.name}: {done.stdout}{done.stderr}"


def start_pool(network, **knobs: str):
    """Central manager, submit host and two execute hosts with ``FAST`` and ``knobs``, all their
    daemons in the central manager's collector; returns ``(cm, submit, exec1, exec2)``."""
    cm, submit, exec1, exec2 = network.add_hosts("cm", "submit", "exec1", "exec2")
    roles = {cm: ("CentralManager",), submit: ("Submit",), exec1: ("Execute",), exec2: ("Execute",)}
    for host, role in roles.items():
        host.write(f"{HTC_HOME}/htc_config", pool_config(*role, **{**FAST, **knobs}))
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
    return cm, submit, exec1, exec2


def stop_pool(*hosts) -> None:
    """``htc pool stop`` on each host (execute hosts first)."""
    for host in hosts:
        done = host.run(["htc", "pool", "stop"], timeout=120)
        assert done.returncode == 0, f"htc pool stop on {host.name}: {done.stdout}{done.stderr}"


def test_100_jobs_with_files_from_the_submit_host_run_on_both_execute_hosts(network):
    cm, submit, exec1, exec2 = start_pool(network, NUM_CPUS=str(SLOTS))
    by_ip = {exec1.ip: exec1, exec2.ip: exec2}
    submit.write("/tmp/work/job.sh", JOB_SCRIPT, mode=0o755)
    for proc in range(JOBS):
        submit.write(f"/tmp/work/in_{proc}.txt", f"input of job {proc}\n")
    submit.write("/tmp/work/job.sub",
                 "executable = job.sh\narguments = $(Process)\nshould_transfer_files = YES\nwhen_to_transfer_output = ON_EXIT\n"
                 "transfer_input_files = in_$(Process).txt\ntransfer_output_remaps = \"out.txt = out_$(Process).txt\"\n"
                 "log = /tmp/work/job.log\nrequest_memory = 16\nrequest_disk = 1024\n"
                 f"queue {JOBS}\n")
    submitted = submit.run(["htc", "submit", "job.sub"], cwd="/tmp/work")
    assert f"{JOBS} job(s) submitted to cluster 1." in submitted.stdout, submitted.stdout + submitted.stderr

    log = submit.path("/tmp/work/job.log")
    wait_until(lambda: log.exists() and log.read_text().count("Job terminated.") == JOBS, 600,
               f"{JOBS} jobs to terminate (the queue: {submit.run(['htc', 'q']).stdout})")

    # Every output: its own input upper-cased, and the name of the host the log says it ran on.
    events = read_events(log)
    ran_on: dict[int, str] = {}
    for event in events:
        if event.type is EventType.EXECUTE:
            ip = re.match(r"<([\d.]+):", event.execute_host).group(1)
            ran_on[event.proc] = by_ip[ip].name
    assert set(ran_on) == set(range(JOBS))
    for proc in range(JOBS):
        out = submit.path(f"/tmp/work/out_{proc}.txt").read_text()
        assert out == f"INPUT OF JOB {proc}\n{ran_on[proc]}\n", (proc, out)
    per_host = {name: list(ran_on.values()).count(name) for name in (exec1.name, exec2.name)}
    assert all(per_host.values()), f"every job ran on one host: {per_host}"

    # The log: per job exactly submit, execute, terminated (return value 0), in that order.
    for reader in ("htc", "htcondor2"):
        if reader == "htc":
            seq = [(e.proc, e.type.value) for e in events]
        else:
            with htcondor2.JobEventLog(str(log)) as jel:
                seq = [(e.proc, int(e.type)) for e in jel.events(stop_after=0)]
        for proc in range(JOBS):
            kinds = [kind for p, kind in seq if p == proc]
            assert kinds == [EventType.SUBMIT.value, EventType.EXECUTE.value, EventType.JOB_TERMINATED.value], \
                (reader, proc, kinds)
    assert log.read_text().count("(1) Normal termination (return value 0)") == JOBS

    # The history: 100 completed jobs, each on the slot of the host its log names.
    history = submit.run(["htc", "history", "-af", "ProcId", "JobStatus", "LastRemoteHost"]).stdout.split("\n")
    rows = [line.split() for line in history if line.strip()]
    assert sorted(int(r[0]) for r in rows) == list(range(JOBS)) and {r[1] for r in rows} == {"4"}, history
    for proc, _status, slot in rows:
        assert slot.split("@", 1)[1] == f"{ran_on[int(proc)]}.{network.domain}", (proc, slot)
    assert submit.run(["htc", "q", "-af", "ProcId"]).stdout.strip() == ""
    print(f"jobs per execute host: {per_host}")
    stop_pool(exec1, exec2, submit, cm)

"""An execute host's link cut mid-job, on a real pool of four simulated hosts (tests/netns_hosts.py).

HTCondor's job lease, on both sides: the SSH keepalives (SSH_KEEPALIVE_INTERVAL x
(SSH_KEEPALIVE_COUNT_MAX + 1), here 3 s) notice the cut; the schedd finds the host silent
(connects time out), writes JOB_DISCONNECTED and waits the job's lease (``job_lease_duration``,
here 15 s), then JOB_RECONNECT_FAILED and the job is matched anew and completes on the other
execute host. The cut-off startd, hearing nothing from the schedd for the lease, evicts the claim
and kills the job, so when the link comes back nothing runs twice to completion: the job writes a
start and an end marker on the host's own /tmp, and the cut host has the start only; the schedd
ignores the old run's late reports; the user log has one termination; the history one run, on
the other host; and the cut host's slot is free again.
"""

from __future__ import annotations

import re
import time

import htcondor2

from htc.eventlog import EventType, read_events
from netns_hosts import network, networks  # noqa: F401 (fixtures)
from test_multi_host_pool import start_pool, stop_pool, wait_until

LEASE = 15
#: the job runs this long: well past the cut host's lease, so an unkilled old run would finish
#: (and write its end marker) long before the test restores the link
RUN = 30

SCRIPT = f"""#!/bin/sh
touch /tmp/linkcut.start
sleep {RUN}
touch /tmp/linkcut.end
hostname
"""


def test_a_cut_execute_host_loses_its_job_to_the_other_and_nothing_runs_twice(network):
    cm, submit, exec1, exec2 = start_pool(network, NUM_CPUS="1", SSH_KEEPALIVE_INTERVAL="1",
                                          SSH_KEEPALIVE_COUNT_MAX="2", SSH_CONNECT_TIMEOUT="2")
    by_ip = {exec1.ip: exec1, exec2.ip: exec2}
    submit.write("/tmp/work/job.sh", SCRIPT, mode=0o755)
    submit.write("/tmp/work/job.sub",
                 "executable = job.sh\nshould_transfer_files = YES\noutput = out.txt\nlog = /tmp/work/job.log\n"
                 f"job_lease_duration = {LEASE}\nqueue\n")
    submitted = submit.run(["htc", "submit", "job.sub"], cwd="/tmp/work")
    assert "1 job(s) submitted to cluster 1." in submitted.stdout, submitted.stdout + submitted.stderr
    log = submit.path("/tmp/work/job.log")

    def executes():
        return [e for e in read_events(log) if e.type is EventType.EXECUTE]

    [first] = wait_until(executes, 120, "the job to start")
    cut = by_ip[re.match(r"<([\d.]+):", first.execute_host).group(1)]
    other = exec2 if cut is exec1 else exec1
    wait_until(lambda: cut.path("/tmp/linkcut.start").exists(), 60, f"the job to run on {cut.name}")
    network.cut(cut)
    cut_at = time.time()

    # The job is disconnected, the lease ends, it starts again on the other host and completes.
    wait_until(lambda: "Job terminated." in log.read_text(), 180,
               f"the job to complete elsewhere (the log: {log.read_text()})")
    kinds = [e.type for e in read_events(log) if e.type is not EventType.IMAGE_SIZE]
    assert kinds == [EventType.SUBMIT, EventType.EXECUTE, EventType.JOB_DISCONNECTED,
                     EventType.JOB_RECONNECT_FAILED, EventType.EXECUTE, EventType.JOB_TERMINATED], kinds
    events = {e.type: e for e in read_events(log)}
    noticed = events[EventType.JOB_DISCONNECTED].timestamp - cut_at
    given_up = events[EventType.JOB_RECONNECT_FAILED].timestamp - cut_at
    # The schedd waited the lease (counted from the last watch answered before the cut, at most
    # one watch period, 5 s, earlier; log times are whole seconds) before running the job again.
    assert given_up >= LEASE - 7, f"rescheduled {given_up:.1f} s after the cut, before the {LEASE} s lease ended"
    print(f"\ncut noticed (JOB_DISCONNECTED) after {noticed:.0f} s, job given up after {given_up:.0f} s, "
          f"completed elsewhere after {events[EventType.JOB_TERMINATED].timestamp - cut_at:.0f} s")
    second = executes()[1]
    assert second.execute_host.startswith(f"<{other.ip}:"), second.execute_host
    assert submit.path("/tmp/work/out.txt").read_text() == f"{other.name}\n"
    assert other.path("/tmp/linkcut.end").exists()

    # The cut-off startd killed its run when its lease ran out: no job process is left there, and
    # the run never reached its end, though it would have by now had it kept running.
    wait_until(lambda: cut.run(["pgrep", "-x", "sleep"]).returncode == 1, 30, f"the old run on {cut.name} to be killed")
    assert cut.path("/tmp/linkcut.start").exists() and not cut.path("/tmp/linkcut.end").exists()

    # The link comes back: the cut host's slot is free again, and still only one run completed.
    network.restore(cut)

    def slot_state():
        out = cm.run(["htc", "status", "-af", "Name", "State", "Activity"]).stdout
        return f"slot1@{cut.fqdn} Unclaimed Idle" in out and out

    wait_until(slot_state, 120, f"{cut.name}'s slot to be Unclaimed again")
    assert not cut.path("/tmp/linkcut.end").exists()
    assert log.read_text().count("Job terminated.") == 1
    with htcondor2.JobEventLog(str(log)) as jel:
        numbers = [int(e.type) for e in jel.events(stop_after=0) if int(e.type) != EventType.IMAGE_SIZE.value]
    assert numbers == [0, 1, 22, 24, 1, 5], numbers  # HTCondor's own reader sees the same story
    history = submit.run(["htc", "history", "-af", "ProcId", "JobStatus", "LastRemoteHost"]).stdout.split()
    assert history[:2] == ["0", "4"] and history[2].endswith(f"@{other.fqdn}") and len(history) == 3, history
    stop_pool(exec1, exec2, submit, cm)

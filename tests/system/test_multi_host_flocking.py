"""Flocking between two pools of simulated hosts (tests/netns_hosts.py), as docs/multi-machine.md's
"Flocking" section sets it up: pool A (central manager ``cma``, submit host ``suba``, no execute
host at all) flocks to pool B (central manager ``cmb``, execute host ``exb``). Both pools share
one pool key; each has its own TRUST_DOMAIN (its COLLECTOR_HOST).

First B does not list A's submit host in FLOCK_FROM: the jobs stay idle and B's shared port logs
the refusal of A's schedd with its address. Then B's hosts get ``FLOCK_FROM = suba.test`` and are
reconfigured: the jobs run on B's execute host, and the user log and the history say where.
"""

from __future__ import annotations

import re

from netns_hosts import HTC_HOME, copy_pool_key, network, networks, pool_config  # noqa: F401 (fixtures)
from test_multi_host_pool import FAST, start, wait_until

JOBS = 3


def test_jobs_flock_to_another_pool_only_where_flock_from_lets_them(network):
    cma, suba, cmb, exb = network.add_hosts("cma", "suba", "cmb", "exb")
    configs = {cma: pool_config("CentralManager", condor_host="cma.test", **FAST),
               suba: pool_config("Submit", condor_host="cma.test", FLOCK_TO="cmb.test", **FAST),
               cmb: pool_config("CentralManager", condor_host="cmb.test", **FAST),
               exb: pool_config("Execute", condor_host="cmb.test", **FAST)}
    for host, text in configs.items():
        host.write(f"{HTC_HOME}/htc_config", text)
    start(cma)  # makes the key both pools share
    copy_pool_key(cma, suba, cmb, exb)
    for host in (suba, cmb, exb):
        start(host)
    wait_until(lambda: f"slot1@{exb.fqdn}" in cmb.run(["htc", "status", "-af", "Name"]).stdout, 90,
               "B's execute host in B's collector")

    suba.path("/tmp/work").mkdir(mode=0o777)
    suba.path("/tmp/work").chmod(0o777)
    suba.write("/tmp/work/job.sub", f"executable = /bin/sleep\narguments = 1\nlog = /tmp/work/job.log\nqueue {JOBS}\n")
    submitted = suba.run(["htc", "submit", "job.sub"], cwd="/tmp/work")
    assert f"{JOBS} job(s) submitted to cluster 1." in submitted.stdout, submitted.stdout + submitted.stderr

    # Without FLOCK_FROM, B refuses A's schedd at its shared port, saying whom and why.
    refusal = re.compile(rf"PERMISSION DENIED: refused the SSH login of 'condor_pool@cma\.test' from "
                         rf"{re.escape(suba.ip)}:\d+: .*FLOCK_FROM")
    port_log = cmb.path(f"{HTC_HOME}/log/SharedPortLog")
    wait_until(lambda: port_log.exists() and refusal.search(port_log.read_text()), 120,
               "B's shared port to refuse A's schedd")
    sched_log = suba.path(f"{HTC_HOME}/log/SchedLog").read_text()
    assert "flocking: root@suba.test has idle jobs" in sched_log and "advertising them to cmb.test" in sched_log
    statuses = suba.run(["htc", "q", "-af", "JobStatus"]).stdout.split()
    assert statuses == ["1"] * JOBS, statuses  # all idle: pool A has no slot, B refuses them
    assert cmb.run(["htc", "status", "-submitters", "-af", "Name"]).stdout.strip() == ""
    # -better-analyze says where the job could run: nowhere in A, on B's one slot.
    analysis = suba.run(["htc", "q", "-better-analyze", "1.0"])
    assert "0 of 0 slots in pool cma.test match (0 willing to run it now); this schedd's own pool" \
        in analysis.stdout, analysis.stdout + analysis.stderr
    assert "1 of 1 slots in pool cmb.test match (1 willing to run it now); a FLOCK_TO pool" in analysis.stdout

    # B lets A's submit host flock in: the jobs run on B's execute host.
    for host in (cmb, exb):
        host.write(f"{HTC_HOME}/htc_config", configs[host] + "FLOCK_FROM = suba.test\n")
        done = host.run(["htc", "reconfig"])
        assert done.returncode == 0, done.stdout + done.stderr
    log = suba.path("/tmp/work/job.log")
    wait_until(lambda: log.exists() and log.read_text().count("Job terminated.") == JOBS, 180,
               f"{JOBS} jobs to terminate in pool B (the queue: {suba.run(['htc', 'q']).stdout})")
    text = log.read_text()
    assert set(re.findall(r"Job executing on host: <([\d.]+):9618\?sock=startd>", text)) == {exb.ip}, text
    assert text.count("(1) Normal termination (return value 0)") == JOBS

    history = suba.run(["htc", "history", "-af", "ProcId", "LastRemoteHost", "LastRemotePool"]).stdout
    rows = [line.split() for line in history.splitlines() if line.strip()]
    assert sorted(int(r[0]) for r in rows) == list(range(JOBS)), history
    assert {r[1].split("@", 1)[1] for r in rows} == {exb.fqdn} and {r[2] for r in rows} == {"cmb.test"}, history
    # B's negotiator charged A's submitter in B's own accounting.
    assert "root@suba.test" in cmb.run(["htc", "userprio", "-allusers"]).stdout
    for host in (exb, cmb, suba, cma):
        assert host.run(["htc", "pool", "stop"], timeout=120).returncode == 0

"""The tools from a machine outside the pool: ``-pool HOST`` and ``-name`` over SSH (issue 18).

A central manager, a submit host and an execute host form a pool (tests/netns_hosts.py); a fifth
host, the "laptop", runs no daemons and has only a token minted on the central manager for
``nobody`` (a user with an account on every host and not the tool's own). From the laptop, ``htc status -pool cm`` lists the slots, ``htc submit -pool cm -name
SCHEDD`` queues a job that runs on the execute host, ``htc q`` shows it and ``htc rm`` removes
another; without the token, submitting is refused with a message that says why and what to do,
and a host with no pool says it cannot be reached."""

from __future__ import annotations

from netns_hosts import HTC_HOME, copy_pool_key, network, networks, pool_config  # noqa: F401 (fixtures)
from test_multi_host_pool import FAST, start, wait_until

TOKENS = "/tmp/home/tokens.d"
#: the token's user: jobs run as their owner, who needs an account on the submit and execute hosts;
#: the simulated hosts share the machine's user database, where ``nobody`` is the one user certain
#: to exist that is not the tool's own (root), and adding one would change the machine's
USER = "nobody"


def test_tools_on_a_laptop_talk_to_the_pool_by_its_central_manager(network):
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

    # Without a token: READ works where the pool allows it, a submit is refused and says why.
    laptop.write("/tmp/work/job.sub", "executable = /bin/true\nqueue\n")
    refused = laptop.run(["htc", "submit", "-pool", "cm", "-name", submit.fqdn, "job.sub"], cwd="/tmp/work")
    assert refused.returncode != 0, refused.stdout
    assert "token" in refused.stderr and "cm:9618" in refused.stderr, refused.stderr

    laptop.write(f"{TOKENS}/pool", made.stdout.strip() + "\n", mode=0o600)
    status = lambda: laptop.run(["htc", "status", "-pool", "cm", "-af", "Name"]).stdout.split()  # noqa: E731
    wait_until(lambda: f"slot1@{execute.fqdn}" in status(), 90, "the execute host's slot from the laptop")

    laptop.write("/tmp/work/job.sub", "executable = /bin/sleep\narguments = 1\nqueue\n"
                                      "executable = /bin/sleep\narguments = 600\nqueue\n")
    submitted = laptop.run(["htc", "submit", "-pool", "cm", "-name", submit.fqdn, "job.sub"], cwd="/tmp/work")
    assert "submitted to cluster 1" in submitted.stdout, submitted.stdout + submitted.stderr
    queue = lambda: laptop.run(["htc", "q", "-pool", "cm", "-name", submit.fqdn,  # noqa: E731
                                "-af", "ClusterId", "ProcId", "Owner"]).stdout
    assert f"1 1 {USER}" in queue(), queue()  # 1.0 (one second) may be done already

    removed = laptop.run(["htc", "rm", "-pool", "cm", "-name", submit.fqdn, "1.1"])
    assert removed.returncode == 0, removed.stdout + removed.stderr
    history = lambda: submit.run(["htc", "history", "-af", "ProcId", "JobStatus"]).stdout.split("\n")  # noqa: E731
    wait_until(lambda: {"0 4", "1 3"} <= {line.strip() for line in history()}, 180,
               f"job 1.0 to complete and 1.1 to be removed (history: {history()}, queue: "
               f"{submit.run(['htc', 'q', '-allusers', '-af', 'ProcId', 'JobStatus', 'HoldReason', 'Owner', 'NumJobStarts']).stdout}"
               f"{submit.run(['htc', 'status', '-af', 'Name', 'State']).stdout} "
               f"{submit.run(['sh', '-c', 'tail -n 20 /tmp/htc/log/SchedLog /tmp/htc/log/ShadowLog']).stdout}")

    # A host with no pool says it cannot be reached, and what to check.
    nowhere = laptop.run(["htc", "status", "-pool", f"{execute.fqdn}:9", "-af", "Name"], timeout=120)
    assert nowhere.returncode != 0 and "cannot reach the pool" in nowhere.stderr, nowhere.stderr
    for host in (execute, submit, cm):
        assert host.run(["htc", "pool", "stop"], timeout=120).returncode == 0

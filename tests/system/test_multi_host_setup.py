"""Setting up a pool on simulated hosts (tests/netns_hosts.py), as docs/multi-machine.md tells a
user: the central manager's first ``htc pool start`` creates the pool key and says so; another
host without the key refuses to start and says where to copy it from; with the key it starts."""

from __future__ import annotations

from netns_hosts import HTC_HOME, POOL_KEY, copy_pool_key, network, networks, pool_config  # noqa: F401 (fixtures)

KEY = POOL_KEY
FAST = {"UPDATE_INTERVAL": "2", "NEGOTIATOR_INTERVAL": "2", "MASTER_UPDATE_INTERVAL": "5"}


def config(*roles: str) -> str:
    return pool_config(*roles, **FAST)


def test_the_central_manager_makes_the_key_and_the_others_need_a_copy(network):
    cm, exec1 = network.add_hosts("cm", "exec1")
    cm.write(f"{HTC_HOME}/htc_config", config("CentralManager", "Submit"))
    exec1.write(f"{HTC_HOME}/htc_config", config("Execute"))

    started = cm.run(["htc", "pool", "start"])
    assert started.returncode == 0, started.stdout + started.stderr
    assert f"created the pool key {KEY} (mode 0600)" in started.stdout
    assert cm.path(KEY).stat().st_mode & 0o777 == 0o600 and len(cm.path(KEY).read_bytes()) == 64
    daemons = cm.run(["htc", "pool", "status"]).stdout
    assert all(d in daemons for d in ("COLLECTOR", "NEGOTIATOR", "SCHEDD")) and "STARTD" not in daemons
    again = cm.run(["htc", "pool", "start"])
    assert again.returncode == 0 and "created the pool key" not in again.stdout  # made once, then kept

    refused = exec1.run(["htc", "pool", "start"])
    assert refused.returncode != 0
    assert f"the pool key {KEY}" in refused.stderr and "copy the file from cm.test" in refused.stderr
    assert "master" not in exec1.run(["ps", "-eo", "args"]).stdout.replace("ps -eo args", "")

    copy_pool_key(cm, exec1)  # as a user would: same path, mode 0600
    joined = exec1.run(["htc", "pool", "start"])
    assert joined.returncode == 0, joined.stdout + joined.stderr
    assert "created the pool key" not in joined.stdout and "STARTD" in joined.stdout
    for host in (exec1, cm):
        assert host.run(["htc", "pool", "stop"]).returncode == 0

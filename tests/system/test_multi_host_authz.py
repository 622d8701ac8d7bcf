"""The authorization matrix across hosts (issue 18, test 3), on simulated hosts (tests/netns_hosts.py).

One pool for the module: ``cm`` is central manager, submit and execute host at once; its config
lets only ``alice@cm.test`` and ``bob@cm.test`` WRITE (the example of docs/security.md, "Across
hosts"). ``rogue`` is an execute host whose pool key is not the pool's. ``laptop`` runs no
daemons: its users hold tokens minted on the central manager, one token directory each.

* rogue's startd cannot advertise: ``htc status`` on cm never lists it, and cm's SharedPortLog
  names rogue's address for each refused login;
* carol, whom ALLOW_WRITE does not name, cannot submit from the laptop (and is told why);
* bob cannot rm, hold or qedit alice's job over the network;
* bob, no administrator, cannot ``htc off`` the central manager;
* alice's READ-scoped token lets her look but not submit, although ALLOW_WRITE names her
  (a token's scope is an upper bound on what its holder may do);
* every refusal is in the daemon's log with the identity and the laptop's address.
"""

from __future__ import annotations

import json
import os

import pytest

from netns_hosts import HTC_HOME, POOL_KEY, Network, netns_unavailable, pool_config
from test_multi_host_pool import FAST, start, wait_until

DOMAIN = "cm.test"  # TRUST_DOMAIN defaults to CONDOR_HOST
WRITERS = f"alice@{DOMAIN}, bob@{DOMAIN}"
TOKENS = "/tmp/home/tokens"
JOB = "executable = /bin/sleep\narguments = 600\nrequirements = false\nqueue\n"


class Pool:
    """The module's hosts, and the laptop's users."""

    def __init__(self, network: Network):
        self.network = network
        self.cm, self.rogue, self.laptop = network.add_hosts("cm", "rogue", "laptop")
        self.cm.write(f"{HTC_HOME}/htc_config", pool_config("CentralManager", "Submit", "Execute", **FAST,
                                                            ALLOW_WRITE=WRITERS))
        self.rogue.write(f"{HTC_HOME}/htc_config", pool_config("Execute", **FAST))
        self.rogue.write(POOL_KEY, os.urandom(64).hex(), mode=0o600)  # not the pool's key
        self.rogue.path(POOL_KEY).parent.chmod(0o700)
        self.laptop.write(f"{HTC_HOME}/htc_config", "# a laptop: no daemons\n")
        self.laptop.write("/tmp/work/job.sub", JOB)

    def token(self, user: str, *authz: str) -> None:
        """Mint a token for ``user@cm.test`` on cm and give it to ``user`` on the laptop."""
        scopes = [a for level in authz for a in ("-authz", level)]
        made = self.cm.run(["htc", "token", "create", "-identity", f"{user}@{DOMAIN}", *scopes], check=True)
        directory = self.laptop.path(f"{TOKENS}/{user}")
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        for old in directory.iterdir():
            old.unlink()
        self.laptop.write(f"{TOKENS}/{user}/pool", made.stdout.strip() + "\n", mode=0o600)

    def htc(self, user: str, *args: str, pool: bool = True):
        """``htc ARGS -pool cm`` on the laptop as ``user`` (their token directory)."""
        extra = ["-pool", "cm"] if pool else []
        return self.laptop.run(["htc", args[0], *extra, *args[1:]], cwd="/tmp/work",
                               env={"_HTC_SEC_TOKEN_DIRECTORY": f"{TOKENS}/{user}"})

    def log(self, name: str) -> str:
        return self.cm.path(f"{HTC_HOME}/log/{name}").read_text(errors="replace")

    def jobs(self) -> list[list[str]]:
        done = self.cm.run(["htc", "q", "-allusers", "-af", "ClusterId", "Owner", "JobStatus", "Foo"])
        assert done.returncode == 0, done.stderr
        return [line.split() for line in done.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def pool():
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    with Network() as network:
        hosts = Pool(network)
        start(hosts.cm)
        start(hosts.rogue)
        for user in ("alice", "bob", "carol"):
            hosts.token(user)
        yield hosts
        for host in (hosts.rogue, hosts.cm):
            host.run(["htc", "pool", "stop", "-fast"], timeout=120)


def test_a_host_with_the_wrong_pool_key_cannot_advertise(pool):
    cm, rogue = pool.cm, pool.rogue
    names = lambda: cm.run(["htc", "status", "-af", "Name"]).stdout.split()  # noqa: E731
    wait_until(lambda: f"slot1@{cm.fqdn}" in names(), 90, "cm's own slot in its collector")
    # rogue's startd tries every UPDATE_INTERVAL (2 s): wait for two refusals of its address
    refusals = lambda: [line for line in pool.log("SharedPortLog").splitlines()  # noqa: E731
                        if "PERMISSION DENIED" in line and f"from {rogue.ip}:" in line]
    wait_until(lambda: len(refusals()) >= 2, 90, f"cm to refuse rogue's logins ({pool.log('SharedPortLog')[-2000:]})")
    # rogue's client gives up on cm's host key (certified by the real pool's CA, not by the one
    # rogue's key gives) and says so as it disconnects; cm logs that, with rogue's address. On a
    # loaded machine an attempt can end before cm reads the reason (cm logs a broken pipe then),
    # so the reason is looked for among the refusals as they come, not in the first one alone
    told = lambda: [r for r in refusals() if "ended before it logged in" in r and "not trusted" in r]  # noqa: E731
    wait_until(lambda: told(), 90, f"cm to log why rogue's login ended ({refusals()})")
    assert "cannot trust the host at cm.test:9618" in rogue.path(f"{HTC_HOME}/log/StartLog").read_text()
    assert not any(rogue.fqdn in n for n in names()), names()
    status = cm.run(["htc", "status", "-any", "-af", "Name"]).stdout
    assert rogue.fqdn not in status, status


def test_a_user_allow_write_does_not_name_cannot_submit_from_another_host(pool):
    refused = pool.htc("carol", "submit", "job.sub")
    assert refused.returncode != 0, refused.stdout
    assert "permission denied" in refused.stderr and "needs WRITE access" in refused.stderr, refused.stderr
    assert f"carol@{DOMAIN}" in refused.stderr and "ALLOW_WRITE" in refused.stderr, refused.stderr
    assert [j for j in pool.jobs() if j[1] == "carol"] == []
    log = pool.log("SchedLog")
    assert f"PERMISSION DENIED to carol@{DOMAIN} (from {pool.laptop.ip}, by token) for Submit" in log, log[-3000:]


def test_bob_cannot_remove_hold_or_edit_alices_job_over_the_network(pool):
    done = pool.htc("alice", "submit", "job.sub")
    assert "submitted to cluster" in done.stdout, done.stdout + done.stderr
    cluster = done.stdout.rsplit("cluster", 1)[1].strip(" .\n")
    job = f"{cluster}.0"
    assert [cluster, "alice", "1", "undefined"] in pool.jobs()  # Owner from her token
    for verb in ("rm", "hold"):
        done = pool.htc("bob", verb, "-name", pool.cm.fqdn, job)
        assert "Permission denied" in done.stdout + done.stderr, (verb, done.stdout, done.stderr)
    done = pool.htc("bob", "qedit", "-name", pool.cm.fqdn, job, "Foo", "1")
    assert done.returncode != 0 and "may not edit jobs of alice" in done.stderr, done.stderr
    assert [cluster, "alice", "1", "undefined"] in pool.jobs()  # still idle, unedited, queued
    log = pool.log("SchedLog")
    for what in ("ActOnJobs Remove", "ActOnJobs Hold", "EditJobs"):
        assert f"PERMISSION DENIED to bob (bob@{DOMAIN} from {pool.laptop.ip}) for {what}" in log, (what, log[-3000:])
    assert pool.htc("alice", "rm", "-name", pool.cm.fqdn, job).returncode == 0  # she may
    wait_until(lambda: not [j for j in pool.jobs() if j[0] == cluster], 60, "alice's job to leave the queue")


def test_a_user_who_is_no_administrator_cannot_turn_off_a_remote_host(pool):
    done = pool.htc("bob", "off")
    assert done.returncode != 0, done.stdout
    assert "permission denied" in done.stderr and "ADMINISTRATOR" in done.stderr, done.stderr
    log = pool.log("MasterLog")
    assert (f"PERMISSION DENIED to bob@{DOMAIN} (from {pool.laptop.ip}, by token) for DaemonsOff, "
            "access level ADMINISTRATOR") in log, log[-3000:]
    running = pool.cm.run(["htc", "pool", "status"]).stdout
    assert "shutting down" not in running and "SCHEDD" in running.upper(), running


def test_a_read_scoped_token_reads_but_cannot_write_whatever_allow_write_says(pool):
    pool.token("alice", "READ")
    try:
        looked = pool.htc("alice", "q", "-allusers")
        assert looked.returncode == 0, looked.stderr
        refused = pool.htc("alice", "submit", "job.sub")
        assert refused.returncode != 0, refused.stdout
        assert "permission denied" in refused.stderr and "scope" in refused.stderr, refused.stderr
        assert (f"PERMISSION DENIED to alice@{DOMAIN} (from {pool.laptop.ip}, by token scoped to READ) for Submit"
                in pool.log("SchedLog"))
    finally:
        pool.token("alice")


# Bad frames on a channel that logged in with alice's token, to cm's real schedd (issue 18, test 6;
# tests/system/test_shared_port.py sends them to a stand-in daemon). Each is answered with the
# error it earns and ends only its own channel.
PROBE = r"""
import asyncio, json
import asyncssh
from htc.client.remote import parse_pool, remote_pool
from htc.wire import messages as m
from htc.wire.address import parse_remote
from htc.wire.framing import frame

async def main():
    pool = remote_pool(parse_pool("cm"))
    schedd = parse_remote(await pool.resolve("schedd"))
    ssh = await pool.ssh._connection(schedd.endpoint, None)
    bystander = await pool.open_connection("schedd")          # another conversation, open throughout
    out = {}
    cases = {"garbage": b"\x00\x00\x00\x05\xc1\xc1\xc1\xc1\xc1",
             "oversized": (2 ** 31).to_bytes(4, "big") + b"xxxx",
             "truncated": frame(m.encode(m.Ping()))[:-1],
             "not_a_message": frame(b"\x93\x01\x02\x03")}
    for name, data in cases.items():
        writer, reader, _ = await ssh.open_session(subsystem=schedd.name, encoding=None)
        writer.write(data)
        if name == "truncated":
            writer.write_eof()
        try:
            async with asyncio.timeout(30):
                reply = await reader.read()
        except (asyncssh.Error, TimeoutError) as exc:
            reply = b"    " + repr(exc).encode()
        out[name] = reply[4:].decode("latin-1")
        writer.close()
    out["bystander"] = type(await bystander.request(m.QueryJobs(constraint="false"))).__name__
    print(json.dumps(out))

asyncio.run(main())
"""


def test_bad_frames_from_a_token_holder_end_only_their_channel(pool):
    before = pool.cm.run(["htc", "pool", "status", "-json"]).stdout
    done = pool.laptop.run(["python3", "-c", PROBE], env={"_HTC_SEC_TOKEN_DIRECTORY": f"{TOKENS}/alice"})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "malformed" in out["garbage"] or "undecodable" in out["garbage"], out
    assert "too_large" in out["oversized"], out
    assert "malformed" in out["truncated"], out
    assert "invalid" in out["not_a_message"] or "malformed" in out["not_a_message"], out
    assert out["bystander"] == "AdsReply", out
    assert pool.htc("bob", "q", "-allusers").returncode == 0  # the schedd serves others, through the port
    after = pool.cm.run(["htc", "pool", "status", "-json"]).stdout
    pids = lambda text: {d["name"]: d["pid"] for d in json.loads(text)["daemons"]}  # noqa: E731
    assert pids(after) == pids(before), (before, after)   # nothing restarted
    assert f"closing connection from client (alice@{DOMAIN} at {pool.laptop.ip}" in pool.log("SchedLog")


def test_tail_reads_a_running_job_through_its_startd_for_its_owner_only(pool):
    pool.laptop.write("/tmp/work/talk.sub", "executable = /bin/sh\narguments = \"-c 'echo hello-from-cm; sleep 600'\"\n"
                                            "output = talk.out\nshould_transfer_files = YES\nqueue\n")
    done = pool.htc("alice", "submit", "talk.sub")
    assert "submitted to cluster" in done.stdout, done.stdout + done.stderr
    job = done.stdout.rsplit("cluster", 1)[1].strip(" .\n") + ".0"
    try:
        tail = lambda who: pool.htc(who, "tail", job)  # noqa: E731
        wait_until(lambda: "hello-from-cm" in tail("alice").stdout, 120,
                   f"job {job}'s stdout through htc tail -pool cm ({tail('alice').stderr}; queue: {pool.jobs()})")
        refused = tail("bob")
        assert refused.returncode != 0 and "only its owner or an administrator" in refused.stderr, refused.stderr
        assert f"PERMISSION DENIED to bob@{DOMAIN} for PeekJob of job {job}" in pool.log("StartLog")
        sneaky = pool.htc("alice", "tail", job, "../../../../etc/shadow")
        assert sneaky.returncode != 0 and "inside the job's sandbox" in sneaky.stderr, sneaky.stderr
        entered = pool.htc("alice", "ssh_to_job", job, "true")
        assert entered.returncode != 0 and "cannot enter a sandbox on another machine" in entered.stderr, entered.stderr
        assert f"htc tail -pool cm {job}" in entered.stderr
    finally:
        pool.htc("alice", "rm", job)

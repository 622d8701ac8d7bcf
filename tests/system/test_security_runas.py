"""Jobs run as their owner (issue #14, section 2), on a real root personal pool, with real users.

A root startd runs each job as its ``Owner`` -- with the owner's own groups, nothing of root's --
when it trusts the owner (htc.daemons.run_as), and as a slot account otherwise, never as root.
The jobs here submit as ``htctest-alice`` and ``htctest-bob`` (tests/local_users.py): their
clients run as them, so the schedd knows them by their peer credentials, and the kernel's own
checks decide what their jobs may do to each other.

What alice needs to use the pool: to traverse the pool's root and home (mode 0755 here), to
connect to the schedd's socket (and the collector's, for the executor) -- write permission on
the socket file, which the tests give since access is decided by peer credentials -- and a
Python she can run (the interpreter of the tests sits under /root; :func:`shared_python`
prepares a world-readable copy of htc and its packages, as an administrator would, to which the
tests add psutil for the clients).

Also here: the executor's client reads (and unpickles) results only from files and directories
that only it (or root) could have written.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import psutil
import pytest

from htc.config import load_config
from htc.daemons.run_as import (
    DEFAULT_DEDICATED, RunAsPolicy, SlotAccounts, choose_user, default_slot_account, trusted_owner,
)
from htc.daemons.schedd.requests import description_message
from htc.daemons.startd.service import run_as_policy
from htc.daemons.starter.service import Starter, StarterError, StarterSettings, resolve_user
from htc.daemons.starter.zygote import ZygotePool
from htc.errors import UsageError
from htc.executors import HTCExecutor, attach, shared_python
from htc.executors.spool import Spool, UntrustedFile
from htc.client import history
from local_users import ALICE, BOB, local_user, needs_users, private_dir, run_as
from poolutil import Pool, wait_for

pytestmark = needs_users
TESTS = Path(__file__).resolve().parents[1]
HOST = __import__("htc.config.hostname", fromlist=["full_hostname"]).full_hostname()

# The job every test of who-runs-it submits: it says who it is.
ID_SCRIPT = "#!/bin/sh\necho \"uid=$(id -u) gid=$(id -g) groups=$(id -G)\"\n"


def identity(text: str) -> tuple[int, int, set[int]]:
    """(uid, gid, groups) from the output of :data:`ID_SCRIPT`."""
    found = re.search(r"uid=(\d+) gid=(\d+) groups=([\d ]*)", text)
    assert found, text
    return int(found.group(1)), int(found.group(2)), {int(g) for g in found.group(3).split()}


def own_groups(name: str) -> set[int]:
    entry = pwd.getpwnam(name)
    return set(os.getgrouplist(name, entry.pw_gid))


# --- the pool -------------------------------------------------------------------------------------


class RunAsPool:
    """A whole root pool (two cores: two jobs at once), a Python every user can run, and the
    sockets every user may connect to."""

    def __init__(self) -> None:
        self.python_root = Path(tempfile.mkdtemp(prefix="htc-runas-py-"))
        self.python_root.chmod(0o755)
        self.mods = self.python_root / "mods"  # a module the starter zygote runs (see ZMOD)
        self.mods.mkdir(mode=0o755)
        (self.mods / "whoami_job.py").write_text(ZMOD)
        (self.mods / "whoami_job.py").chmod(0o644)
        self.pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD", NUM_CPUS="2",
                         STARTER_ZYGOTE_MODULES="htc.executors.worker, htc.executors.lane, whoami_job")
        self.python, env = shared_python(self.python_root)
        # A client needs psutil too (a job does not): the same copy, as an administrator installs it.
        client = self.python_root / "client"
        shutil.copytree(Path(psutil.__file__).parent, client / "psutil")
        for path in [client, *client.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        self.pythonpath = ":".join(p for p in (env.get("PYTHONPATH"), str(client), str(TESTS)) if p)

    def start(self) -> RunAsPool:
        self.pool.start()
        for name in ("schedd", "collector"):  # who may do what is decided by peer credentials
            os.chmod(self.pool.home / "sockets" / f"{name}.sock", 0o777)
        return self

    def stop(self) -> None:
        try:
            self.pool.stop()
        finally:
            shutil.rmtree(self.python_root, ignore_errors=True)

    def env(self, home: Path) -> dict[str, str]:
        """The environment of a client of ``home``'s user: that user's own HTC_HOME (sessions)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("_HTC_") and k != "HTC_CONFIG"}
        env.update(PYTHONPATH=self.pythonpath, HTC_HOME=str(home), HOME=str(home))
        return env

    def submit_as(self, user: str, home: Path, text: str) -> int:
        """Submit ``text`` (its relative paths in ``home``) from a process of ``user``; the cluster id."""
        client = ("import sys\nfrom htc.client import send_command\nfrom htc.wire import messages as m\n"
                  "from htc.wire.transport import UnixTransport\n"
                  "reply = send_command('schedd', m.Submit(cluster_ad=sys.stdin.read(), proc_ads=('[ ]',)), "
                  "transport=UnixTransport(sys.argv[1]), timeout=30)\nprint(reply.cluster_id)\n")
        ad = description_message(text, home, "job.sub").cluster_ad
        done = run_as(user, [self.python, "-c", client, str(self.pool.home / "sockets")], input=ad, cwd=home,
                      env=self.env(home), home=str(home), timeout=120)
        assert done.returncode == 0, done.stderr
        return int(done.stdout.split()[-1])

    def finished(self, cluster: int, timeout: float = 120.0) -> None:
        """Wait until the cluster has left the queue (it completed)."""
        wait_for(lambda: not self.pool.jobs(f"ClusterId == {cluster}"), timeout, f"cluster {cluster} to finish")
        [row] = self.history(cluster)
        assert row.get("ExitCode") == 0 and row.get("JobStatus") == 4, row

    def history(self, cluster: int) -> list[dict]:
        return history(f"ClusterId == {cluster}", path=self.pool.home / "spool" / "job_queue.db")


@pytest.fixture(scope="module")
def rpool():
    if os.geteuid() != 0:
        pytest.skip("only a root startd runs jobs as other users")
    local_user(ALICE)
    local_user(BOB)
    started = RunAsPool().start()
    try:
        yield started
    finally:
        started.stop()


def user_dir(rpool: RunAsPool, user: str) -> Path:
    """A directory of ``user``'s own (0700) under the pool's root (0755: every user may traverse)."""
    return private_dir(user, parent=rpool.pool.root)


def user_file(path: Path, user: str, text: str, mode: int = 0o644) -> Path:
    path.write_text(text)
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    path.chmod(mode)
    return path


# --- who runs a job, on the pool -----------------------------------------------------------------


def test_alices_job_runs_as_alice_with_her_own_groups_and_none_of_roots(rpool):
    alice = local_user(ALICE)
    home = user_dir(rpool, ALICE)
    user_file(home / "id.sh", ALICE, ID_SCRIPT, 0o755)
    cluster = rpool.submit_as(ALICE, home, "executable = id.sh\noutput = out.txt\nerror = err.txt\n"
                                           "log = job.log\nrequest_memory = 64\nqueue\n")
    rpool.finished(cluster)
    uid, gid, groups = identity((home / "out.txt").read_text())
    assert (uid, gid) == (alice.pw_uid, alice.pw_gid)
    assert groups == own_groups(ALICE) and 0 not in groups
    [row] = rpool.history(cluster)
    assert row["Owner"] == ALICE
    assert f"runs as {ALICE} (uid {alice.pw_uid}" in (rpool.pool.home / "log" / "StartLog").read_text()


def test_a_root_job_runs_as_a_slot_account_never_as_root(rpool):
    work = Path(tempfile.mkdtemp(dir=rpool.pool.work))
    work.chmod(0o755)
    (work / "id.sh").write_text(ID_SCRIPT)
    (work / "id.sh").chmod(0o755)
    cluster = rpool.pool.submit(f"executable = {work}/id.sh\noutput = {work}/out.txt\nerror = {work}/err.txt\n"
                                f"request_memory = 64\nqueue\n").cluster_id
    rpool.finished(cluster)
    uid, gid, groups = identity((work / "out.txt").read_text())
    account = pwd.getpwuid(uid)
    assert uid != 0 and gid != 0 and 0 not in groups
    assert re.fullmatch(DEFAULT_DEDICATED, account.pw_name), account.pw_name  # htc-slot<N>, made by the startd
    assert gid == account.pw_gid and groups == {account.pw_gid}  # only the account's own group


BOB_JOB = """\
#!/bin/sh
# Bob's job: a private file in its sandbox, its pid and sandbox for alice's job, then wait for her.
echo "bob's secret" > secret.txt
chmod 600 secret.txt
echo "$PWD $$ $(id -u)" > {meet}/bob.tmp && mv {meet}/bob.tmp {meet}/bob.info
i=0
while [ ! -e {meet}/alice.done ] && [ $i -lt 1500 ]; do sleep 0.1; i=$((i+1)); done
echo "bob uid $(id -u)"
"""

ALICE_JOB = """\
#!/bin/sh
# Alice's job, running at the same time: try to read bob's private file and to stop his job.
i=0
while [ ! -e {meet}/bob.info ] && [ $i -lt 1500 ]; do sleep 0.1; i=$((i+1)); done
read dir pid uid < {meet}/bob.info
echo "alice uid $(id -u) bob uid $uid"
if cat "$dir/secret.txt" > /dev/null 2>&1; then echo "read: yes"; else echo "read: no"; fi
if kill -STOP "$pid" 2> /dev/null; then echo "stop: yes"; kill -CONT "$pid"; else echo "stop: no"; fi
if kill -0 "$pid" 2> /dev/null; then echo "signal: yes"; else echo "signal: no"; fi
touch {meet}/alice.done
"""


def test_two_users_jobs_at_once_get_different_uids_and_cannot_touch_each_other(rpool):
    meet = Path(tempfile.mkdtemp(dir=rpool.pool.root))
    meet.chmod(0o1777)  # where the two jobs meet: everyone may write, nobody may remove another's file
    bob_home, alice_home = user_dir(rpool, BOB), user_dir(rpool, ALICE)
    user_file(bob_home / "bob.sh", BOB, BOB_JOB.format(meet=meet), 0o755)
    user_file(alice_home / "alice.sh", ALICE, ALICE_JOB.format(meet=meet), 0o755)
    sub = "executable = {}\noutput = out.txt\nerror = err.txt\nrequest_cpus = 1\nrequest_memory = 64\nqueue\n"
    bob = rpool.submit_as(BOB, bob_home, sub.format("bob.sh"))
    alice = rpool.submit_as(ALICE, alice_home, sub.format("alice.sh"))
    rpool.finished(alice, 240)
    rpool.finished(bob, 240)
    said = (alice_home / "out.txt").read_text()
    uids = re.search(r"alice uid (\d+) bob uid (\d+)", said)
    assert uids, said + (alice_home / "err.txt").read_text()
    assert "read: no" in said, said      # bob's mode-600 file in his 0700 sandbox
    assert "stop: no" in said, said      # SIGSTOP to bob's job: EPERM
    assert "signal: no" in said, said    # not even signal 0
    assert int(uids.group(1)) == local_user(ALICE).pw_uid and int(uids.group(2)) == local_user(BOB).pw_uid
    assert (bob_home / "out.txt").read_text().strip() == f"bob uid {local_user(BOB).pw_uid}"


def zygote_job(rpool: RunAsPool, out: Path, extra: str = "") -> str:
    """A job the startd's zygote forks (``python -m whoami_job OUT``) saying who it is and its parent."""
    return (f"executable = {rpool.python}\ntransfer_executable = false\narguments = -m whoami_job {out}\n"
            f"environment = PYTHONPATH={rpool.mods}\nshould_transfer_files = NO\ninitialdir = {out.parent}\n"
            f"request_memory = 64\n{extra}\nqueue\n")


def test_a_slot_account_passed_to_another_owner_keeps_nothing_of_the_previous_one(rpool):
    """Root's function job runs as a slot account, forked by a zygote running as it. Alice's next
    job asks not to run as her (run_as_owner = false) and gets the same account: the startd ends
    root's zygote first, and her job is forked by a fresh one -- never by a process of root's job."""
    meet = Path(tempfile.mkdtemp(dir=rpool.pool.root))
    meet.chmod(0o1777)
    first = rpool.pool.submit(zygote_job(rpool, meet / "root.txt")).cluster_id
    rpool.finished(first)
    uid, gid, *rest = (meet / "root.txt").read_text().split()
    root_zygote = int(rest[-1])
    account = pwd.getpwuid(int(uid))
    assert re.fullmatch(DEFAULT_DEDICATED, account.pw_name)
    assert psutil.Process(root_zygote).uids().real == account.pw_uid  # it stays for root's next job
    home = user_dir(rpool, ALICE)
    second = rpool.submit_as(ALICE, home, zygote_job(rpool, meet / "alice.txt", "run_as_owner = false"))
    rpool.finished(second)
    uid2, gid2, *rest2 = (meet / "alice.txt").read_text().split()
    assert int(uid2) == account.pw_uid  # the same account (the lowest free number)...
    assert int(rest2[-1]) != root_zygote  # ...but a zygote of its own
    wait_for(lambda: not psutil.pid_exists(root_zygote) or psutil.Process(root_zygote).status() == "zombie",
             10, "root's zygote to end")
    log = (rpool.pool.home / "log" / "StartLog").read_text()
    assert f"slot account {account.pw_name} passes to {ALICE}'s jobs: its zygotes ended" in log
    assert "the job says RunAsOwner = false" in log


# --- the executor -----------------------------------------------------------------------------------

CLIENT = textwrap.dedent('''\
    import json, sys
    from htc.executors import HTCExecutor

    def who():
        import os
        return [os.getuid(), os.getgid(), sorted(os.getgroups())]

    pool, python, pythonpath = sys.argv[1:4]
    with HTCExecutor(pool=pool, python=python, environment={"PYTHONPATH": pythonpath}, progress=False) as ex:
        print(json.dumps(ex.submit(who).result(timeout=240)))
''')


def test_a_function_call_of_alices_executor_runs_as_alice(rpool):
    alice = local_user(ALICE)
    home = user_dir(rpool, ALICE)
    done = run_as(ALICE, [rpool.python, "-c", CLIENT, str(rpool.pool.home), rpool.python, rpool.pythonpath],
                  cwd=home, env=rpool.env(home), home=str(home), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    uid, gid, groups = json.loads(done.stdout.strip().splitlines()[-1])
    assert (uid, gid) == (alice.pw_uid, alice.pw_gid)
    assert set(groups) <= own_groups(ALICE) and 0 not in groups


def test_a_result_file_another_uid_could_write_is_refused_when_attaching(rpool):
    """A root client's named session: its finished call's result is swapped for a file owned by
    the slot account (what a job running as it could have left there). Attaching reads the
    finished calls' results: that one fails with UntrustedFile, and nothing is unpickled."""
    home = Path(tempfile.mkdtemp(prefix="htc-runas-client-"))
    old = os.environ.get("HTC_HOME")
    os.environ["HTC_HOME"] = str(home)
    try:
        args = {"pool": rpool.pool.home, "python": rpool.python, "environment": {"PYTHONPATH": rpool.pythonpath},
                "progress": False}
        with HTCExecutor(name="swapped", **args) as ex:
            assert ex.submit(pow, 2, 5).result(timeout=240) == 32
            call_id = ex.futures[0].call_id
        spool = Spool("swapped")
        result = spool.result_path(call_id)
        data = result.read_bytes()
        slot = pwd.getpwnam(default_slot_account(1))
        result.unlink()
        result.write_bytes(data)
        os.chown(result, slot.pw_uid, slot.pw_gid)
        again = attach("swapped", **args)
        try:
            [future] = again.futures
            with pytest.raises(UntrustedFile, match=f"belongs to uid {slot.pw_uid}"):
                future.result(timeout=60)
        finally:
            again.shutdown(wait=False, cancel_futures=True)
    finally:
        if old is None:
            os.environ.pop("HTC_HOME", None)
        else:
            os.environ["HTC_HOME"] = old
        shutil.rmtree(home, ignore_errors=True)


# --- the client's check, file by file -------------------------------------------------------------


def _session(root: Path) -> tuple[Spool, str]:
    spool = Spool("s", root=root)
    spool.lock()
    spool.create({"backend": "pool"})
    spool.flat = True
    spool.prepare("c1", b"call", ())
    return spool, spool.result_file("c1")


def test_the_client_reads_only_results_only_it_or_root_could_write(tmp_path):
    result = b"the result's bytes"
    spool, path = _session(tmp_path)
    assert spool.read_result("c1") is None  # not there yet
    Path(path).write_bytes(result)
    assert spool.read_result("c1") == result  # the client's own file
    other = pwd.getpwnam(default_slot_account(1)) if _has(default_slot_account(1)) else local_user(BOB)
    os.chown(path, other.pw_uid, other.pw_gid)
    with pytest.raises(UntrustedFile, match=f"belongs to uid {other.pw_uid}"):
        spool.read_result("c1")
    os.chown(path, 0, 0)
    os.chmod(path, 0o664)
    with pytest.raises(UntrustedFile, match="writable by its group"):
        spool.read_result("c1")
    os.chmod(path, 0o646)
    with pytest.raises(UntrustedFile, match="writable by others"):
        spool.read_result("c1")
    os.unlink(path)
    os.symlink(tmp_path / "elsewhere", path)
    with pytest.raises(UntrustedFile, match="symbolic link"):
        spool.read_result("c1")
    os.unlink(path)
    # A calls/ directory others may write: someone could have put any file there.
    fresh = Spool("s", root=tmp_path)
    os.chmod(spool.calls, 0o777)
    with pytest.raises(UntrustedFile, match="calls is writable by its group and others"):
        fresh.read_result("c1")
    with pytest.raises(UntrustedFile, match="calls is writable by its group and others"):
        fresh.lock()
    os.chmod(spool.calls, 0o755)
    os.chown(spool.calls, local_user(BOB).pw_uid, -1)
    with pytest.raises(UntrustedFile, match=f"belongs to uid {local_user(BOB).pw_uid}"):
        Spool("s", root=tmp_path).read_result("c1")
    spool.unlock()


def _has(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


ALICE_SPOOL = textwrap.dedent('''\
    import os, sys
    from pathlib import Path
    from htc.executors.spool import Spool, UntrustedFile
    spool = Spool("s", root=Path(sys.argv[1]))
    spool.lock()
    spool.create({"backend": "pool"})
    spool.flat = True
    spool.prepare("mine", b"call", ())
    spool.prepare("roots", b"call", ())
    spool.prepare("bobs", b"call", ())
    print("ready " + " ".join(spool.result_file(call) for call in ("mine", "roots", "bobs")), flush=True)
    sys.stdin.readline()  # the test puts the three results in place
    out = []
    for call in ("mine", "roots", "bobs"):
        try:
            out.append(f"{call}={spool.read_result(call)!r}")
        except UntrustedFile as exc:
            out.append(f"{call}=refused: {exc}")
    print("\\n".join(out))
''')


def test_a_client_that_is_not_root_refuses_another_users_result(rpool):
    """Alice's client reads her own results and root's (the pool's daemons), never bob's."""
    home = user_dir(rpool, ALICE)
    proc = subprocess.Popen([rpool.python, "-c", ALICE_SPOOL, str(home)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=home,
                            env=rpool.env(home), user=local_user(ALICE).pw_uid, group=local_user(ALICE).pw_gid,
                            extra_groups=[])
    try:
        ready, *paths = proc.stdout.readline().split()
        assert ready == "ready", proc.stderr.read()
        owners = (("mine", local_user(ALICE)), ("roots", pwd.getpwuid(0)), ("bobs", local_user(BOB)))
        for (call, owner), path in zip(owners, paths):
            path = Path(path)
            path.write_bytes(call.encode())
            os.chown(path, owner.pw_uid, owner.pw_gid)
        out, err = proc.communicate("go\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    lines = dict(line.split("=", 1) for line in out.strip().splitlines())
    assert lines["mine"] == "b'mine'" and lines["roots"] == "b'roots'"
    assert lines["bobs"].startswith(f"refused: executor result file {paths[2]} belongs to uid "
                                    f"{local_user(BOB).pw_uid}")


# --- the rules, and the starter that applies them -------------------------------------------------


def ad(owner: str | None, domain: str | None = HOST, **extra):
    job = {"ClusterId": 1, "ProcId": 0}
    if owner is not None:
        job["Owner"] = owner
        if domain is not None:
            job["User"] = f"{owner}@{domain}"
    return {**job, **extra}


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs jobs as another user")
@pytest.mark.parametrize("job,policy,why", [
    (ad(ALICE), RunAsPolicy(uid_domain=HOST), None),
    (ad(ALICE, RunAsOwner=False), RunAsPolicy(uid_domain=HOST), "RunAsOwner = false"),
    (ad(ALICE), RunAsPolicy(allow_runas_owner=False, uid_domain=HOST), "STARTER_ALLOW_RUNAS_OWNER is false"),
    (ad(ALICE, "elsewhere.example"), RunAsPolicy(uid_domain=HOST), "UID_DOMAIN 'elsewhere.example' is not"),
    (ad(ALICE, None), RunAsPolicy(uid_domain=HOST), "names no submitter domain"),
    (ad("root"), RunAsPolicy(uid_domain=HOST), "is root"),
    (ad("htctest-no-such-user"), RunAsPolicy(uid_domain=HOST), "has no account here"),
    (ad("htc-slot2"), RunAsPolicy(uid_domain=HOST), "dedicated execute account"),
    (ad(BOB), RunAsPolicy(uid_domain=HOST, slot_users={1: BOB}), "dedicated execute account"),
    (ad(None), RunAsPolicy(uid_domain=HOST), "has no Owner"),
])
def test_who_runs_a_job(job, policy, why):
    local_user(ALICE)
    local_user(BOB)
    user = choose_user(job, policy, "htc-slot1", create=True)
    entry, reason = trusted_owner(job, policy)
    if why is None:
        alice = pwd.getpwnam(ALICE)
        assert (user.name, user.uid, user.gid, user.owner) == (ALICE, alice.pw_uid, alice.pw_gid, True)
        assert set(user.groups) == own_groups(ALICE) and user.groups[0] == alice.pw_gid
    else:
        slot = pwd.getpwnam("htc-slot1")
        assert (user.name, user.uid, user.groups, user.owner) == ("htc-slot1", slot.pw_uid, (slot.pw_gid,), False)
        assert entry is None and why in reason and why in user.describe()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs jobs as another user")
def test_a_root_or_missing_slot_user_is_refused_with_advice():
    with pytest.raises(StarterError, match="is root; jobs never run as root"):
        resolve_user(StarterSettings(slot_user="root"), ad(None))
    with pytest.raises(StarterError, match="does not exist; create it"):
        resolve_user(StarterSettings(slot_user="htctest-never-made"), ad(None))
    # A root job with a root SLOT<N>_USER is refused too: jobs never run as root.
    with pytest.raises(StarterError, match="is root"):
        resolve_user(StarterSettings(slot_user="root", run_as=RunAsPolicy(uid_domain=HOST)), ad("root"))


def test_slot_accounts_one_per_running_job():
    accounts = SlotAccounts()
    assert accounts.acquire("a", "slot1_1") == 1
    assert accounts.acquire("b", "slot1_2") == 2
    assert accounts.acquire("s", "slot3") == 3  # a static slot holds its own number
    assert accounts.release("a") == 1
    assert accounts.acquire("c", "slot1_9") == 1  # the lowest number no running job holds
    assert accounts.serve(1, "root") is False
    assert accounts.serve(1, "root") is False
    assert accounts.serve(1, ALICE) is True  # another owner: the account is cleared first


def test_the_startd_reads_the_run_as_knobs(tmp_path):
    config_file = tmp_path / "htc_config"
    config_file.write_text("SLOT1_USER = htctest-alice\nSTARTD.SLOT2_USER = htctest-bob\nSLOT3_USER =\n"
                           "STARTER_ALLOW_RUNAS_OWNER = false\nUID_DOMAIN = example.org\n"
                           "DEDICATED_EXECUTE_ACCOUNT_REGEXP = exec[0-9]+\n")
    config = load_config("STARTD", env={"HTC_CONFIG": str(config_file), "HTC_HOME": str(tmp_path)})
    policy = run_as_policy(config, "host.example")
    assert policy.slot_users == {1: ALICE, 2: BOB}
    assert (policy.allow_runas_owner, policy.uid_domain, policy.dedicated) == (False, "example.org", "exec[0-9]+")
    assert policy.account_name(1) == ALICE and policy.account_name(4) == "htc-slot4"
    assert policy.is_dedicated("exec7") and policy.is_dedicated(BOB) and not policy.is_dedicated("htc-slot1")
    defaults = load_config("STARTD", env={"HTC_CONFIG": "ONLY_ENV", "HTC_HOME": str(tmp_path)})
    policy = run_as_policy(defaults, "host.example")
    assert policy.allow_runas_owner and policy.slot_users == {} and policy.dedicated == DEFAULT_DEDICATED
    config_file.write_text("DEDICATED_EXECUTE_ACCOUNT_REGEXP = exec[\n")
    with pytest.raises(UsageError, match="DEDICATED_EXECUTE_ACCOUNT_REGEXP = 'exec\\[' is not a regular expression"):
        run_as_policy(load_config("STARTD", env={"HTC_CONFIG": str(config_file), "HTC_HOME": str(tmp_path)}), "h")
    config_file.write_text("SLOT1_USER = alice; rm -rf /\n")
    with pytest.raises(UsageError, match="SLOT1_USER = 'alice; rm -rf /' is not an account name"):
        run_as_policy(load_config("STARTD", env={"HTC_CONFIG": str(config_file), "HTC_HOME": str(tmp_path)}), "h")


ZMOD = '''\
import os, sys

if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        f.write(f"{os.getuid()} {os.getgid()} {' '.join(map(str, sorted(os.getgroups())))} {os.getppid()}")
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs jobs as another user")
def test_jobs_of_different_users_never_share_a_zygote():
    """Function jobs of alice, bob and root (the slot account) through one ZygotePool: each
    user's job is forked by a zygote of that user, never by another's."""
    alice, bob = local_user(ALICE), local_user(BOB)
    base = Path(tempfile.mkdtemp(prefix="htc-runas-zygote-"))
    base.chmod(0o755)
    mods, execute = base / "mods", base / "execute"
    mods.mkdir(mode=0o755)
    (mods / "whoami_job.py").write_text(ZMOD)
    (mods / "whoami_job.py").chmod(0o644)
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    settings = StarterSettings(zygote_modules=("whoami_job",), run_as=RunAsPolicy(uid_domain=HOST))

    async def one(owner: str | None, name: str) -> tuple[int | None, str]:
        iwd = base / name
        iwd.mkdir(mode=0o777)
        iwd.chmod(0o777)
        out = iwd / "who.txt"
        job = {**ad(owner), "Cmd": python, "TransferExecutable": False, "Iwd": str(iwd),
               "Arguments": f"-m whoami_job {out}", "Environment": f"PYTHONPATH={mods}", "RequestMemory": 128}
        starter = Starter(job, execute, settings, pool)
        await starter.start()
        record = await asyncio.wait_for(starter.wait(), 60)
        assert record.exit_code == 0, record
        return starter.zygote_pid, out.read_text()

    async def go():
        return [await one(owner, f"{name}{n}") for n in range(2)
                for owner, name in ((ALICE, "a"), (BOB, "b"), ("root", "r"))]

    pool = ZygotePool()
    try:
        runs = asyncio.run(go())
    finally:
        pool.close()
        shutil.rmtree(base)
    slot = pwd.getpwnam("htc-slot1")
    expected = {ALICE: alice, BOB: bob, "root": slot}
    zygotes: dict[str, set[int]] = {}
    for (zygote, text), owner in zip(runs, [ALICE, BOB, "root"] * 2):
        uid, gid, *rest = text.split()
        groups, ppid = {int(g) for g in rest[:-1]}, int(rest[-1])
        who = expected[owner]
        assert (int(uid), int(gid)) == (who.pw_uid, who.pw_gid)
        assert 0 not in groups and groups <= own_groups(who.pw_name)
        assert zygote is not None and ppid == zygote  # forked by a zygote...
        zygotes.setdefault(owner, set()).add(zygote)
    assert all(len(pids) == 1 for pids in zygotes.values())  # ...the same one for one user's jobs
    assert len(set.union(*zygotes.values())) == 3  # ...and a different one for each user
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                   for p in set.union(*zygotes.values()))


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs jobs as another user")
@pytest.mark.parametrize("how", ["fork", "exec zygote"])
def test_the_starter_gives_the_job_its_owners_uid_gid_and_groups(how):
    """Both ways a plain job starts (the startd's fork+exec, the exec zygote): the owner's uid,
    primary gid and supplementary groups, set before the uid, nothing of the starter's."""
    alice = local_user(ALICE)
    base = Path(tempfile.mkdtemp(prefix="htc-runas-starter-"))
    base.chmod(0o755)
    iwd = base / "iwd"
    iwd.mkdir()
    iwd.chmod(0o777)
    (iwd / "id.sh").write_text(ID_SCRIPT)
    (iwd / "id.sh").chmod(0o755)
    job = {**ad(ALICE), "Cmd": str(iwd / "id.sh"), "Iwd": str(iwd), "Out": "out.txt", "Err": "err.txt",
           "RequestMemory": 64}
    settings = StarterSettings(run_as=RunAsPolicy(uid_domain=HOST), use_exec_zygote=how == "exec zygote")

    async def go():
        starter = Starter(job, base / "execute", settings, ZygotePool() if how == "exec zygote" else None)
        try:
            await starter.start()
            return starter, await asyncio.wait_for(starter.wait(), 60)
        finally:
            if starter.zygotes is not None:
                starter.zygotes.close()

    try:
        starter, record = asyncio.run(go())
        assert record.exit_code == 0, (iwd / "err.txt").read_text()
        assert (starter.zygote_pid is not None) == (how == "exec zygote")
        assert starter.user is not None and starter.user.owner
        uid, gid, groups = identity((iwd / "out.txt").read_text())
        assert (uid, gid, groups) == (alice.pw_uid, alice.pw_gid, own_groups(ALICE))
    finally:
        shutil.rmtree(base)


ORPHAN = '''\
import os, sys, time
if os.fork() == 0:        # the orphan: its parent leaves at once, init adopts it
    os.setsid()
    if os.fork() == 0:
        open(sys.argv[1], "w").write(str(os.getpid()))
        time.sleep(300)
    os._exit(0)
os.wait()
time.sleep(300)           # this one keeps its parent (the test)
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs processes as a slot account")
def test_processes_a_job_left_under_its_slot_account_are_killed_but_not_others():
    from htc.daemons.run_as import ensure_account, kill_processes_of

    account = ensure_account("htc-slot9", True)
    where = Path(tempfile.mkdtemp(prefix="htc-runas-orphan-"))  # (pytest's tmp_path is below a 0700 one)
    where.chmod(0o777)
    pidfile = where / "orphan.pid"
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    parent = subprocess.Popen([python, "-c", ORPHAN, str(pidfile)], user=account.pw_uid, group=account.pw_gid,
                              extra_groups=[], cwd="/")
    try:
        wait_for(lambda: pidfile.exists() and pidfile.read_text(), 20, "the orphan to start")
        orphan = int(pidfile.read_text())
        wait_for(lambda: psutil.Process(orphan).ppid() != parent.pid, 20, "the orphan to be adopted")
        if psutil.Process(orphan).ppid() != 1:
            pytest.skip("a subreaper adopts orphans here, not init")
        with pytest.raises(ValueError, match="root"):
            kill_processes_of(0)
        killed = kill_processes_of(account.pw_uid)
        assert orphan in killed and parent.pid not in killed
        wait_for(lambda: not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == "zombie", 10,
                 "the orphan to die")
        assert parent.poll() is None  # a process with a parent (another startd's job, say) is left alone
    finally:
        parent.kill()
        parent.wait()
        kill_processes_of(account.pw_uid)
        shutil.rmtree(where)

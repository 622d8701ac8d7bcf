"""Authorization on one host, with real users: who may do what to a root-started pool.

The pool is started by root through the real ``htc pool start`` under umask 000 (the case in
which every directory and socket used to be world-writable). ``htctest-alice`` and
``htctest-bob`` (tests/local_users.py) then act on it through the real ``htc`` command, and a
client with a uid that has no account sends raw messages. Each refusal must come back as a clear
"permission denied" and appear in the daemon's log; what was refused must not have happened.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import psutil
import pytest

from htc.classad import ClassAd
from htc.client import query_master, send_command
from htc.wire import messages as m
from htc.wire.errors import RemoteError
from htc.wire.transport import UnixTransport
from tests.local_users import ALICE, BOB, local_user, needs_users, private_dir, run_as
from tests.poolutil import FAST, Pool, wait_for

pytestmark = needs_users

DAEMONS = "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD, STARTD"
NO_ACCOUNT = 54321  # a uid with no passwd entry


def _others_can_run(path: str) -> bool:
    path = os.path.realpath(path)
    try:
        if os.stat(path).st_mode & 0o005 != 0o005:
            return False
        parent = os.path.dirname(path)
        while parent != "/":
            if not os.stat(parent).st_mode & 0o001:
                return False
            parent = os.path.dirname(parent)
    except OSError:
        return False
    return True


def _python_for_others() -> str:
    """An interpreter of this Python version that other users can run (the venv's may sit under /root)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, shutil.which(f"python{version}"), f"/usr/bin/python{version}"):
        if candidate and _others_can_run(candidate):
            return candidate
    pytest.skip(f"no python{version} that other users can run (sys.executable is under a private directory)")


_HOOK: list[Path] = []


def _site_hook() -> Path:
    """A directory others can read whose sitecustomize adds this environment's site-packages (with
    its .pth files: htc may be installed in editable mode) to any interpreter that has it on PYTHONPATH."""
    if not _HOOK:
        path = Path(tempfile.mkdtemp(prefix="htc-site-"))
        path.chmod(0o755)
        (path / "sitecustomize.py").write_text(f"import site\nsite.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
        (path / "sitecustomize.py").chmod(0o644)
        atexit.register(shutil.rmtree, path, True)
        _HOOK.append(path)
    return _HOOK[0]


def _env(home: Path) -> dict[str, str]:
    """The environment of a client of the pool at ``home``: htc and its packages from this environment."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("_HTC_") and k != "HTC_CONFIG"}
    env.update(HTC_HOME=str(home), PYTHONPATH=str(_site_hook()), PYTHONNOUSERSITE="1")
    return env


class SecuredPool:
    """A pool started by root with ``htc pool start`` under umask 000, and clients acting on it."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="htc-authz-"))
        self.root.chmod(0o755)
        self.home = self.root / "home"
        self.python = _python_for_others()
        self.env = _env(self.home)
        self.env.update({f"_HTC_{k}": v for k, v in {**FAST, "DAEMON_LIST": DAEMONS}.items()})
        self.transport = UnixTransport(self.home / "sockets")
        self.dirs = {ALICE: private_dir(ALICE, self.root), BOB: private_dir(BOB, self.root)}

    def start(self) -> SecuredPool:
        done = subprocess.run([sys.executable, "-m", "htc.cli.main", "pool", "start", "-timeout", "60"],
                              env=self.env, capture_output=True, text=True, umask=0, timeout=120)
        assert done.returncode == 0, f"htc pool start failed: {done.stdout}{done.stderr}"
        return self

    def stop(self) -> None:
        subprocess.run([sys.executable, "-m", "htc.cli.main", "pool", "stop", "-fast"], env=self.env,
                       capture_output=True, timeout=60)
        for proc in psutil.process_iter(["cmdline"]):
            if str(self.home) in " ".join(proc.info["cmdline"] or ()):
                proc.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- clients ------------------------------------------------------------------------------

    def htc(self, user: str | None, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run the real ``htc`` command as ``user`` (None: root) in that user's directory."""
        argv = [self.python, "-m", "htc.cli.main", *args]
        if user is None:
            return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout,
                                  cwd=self.root)
        return run_as(user, argv, env=self.env, cwd=self.dirs[user], timeout=timeout)

    def client(self, user: str | int, code: str) -> subprocess.CompletedProcess:
        """Run Python ``code`` as ``user`` (a name, or a bare uid with no account); ``send(address, msg)``
        is defined for it and prints the reply or the refusal."""
        prelude = ("import sys\nfrom htc.client import send_command\nfrom htc.wire import messages as m\n"
                   "from htc.wire.errors import RemoteError\nfrom htc.wire.transport import UnixTransport\n"
                   f"T = UnixTransport({str(self.home / 'sockets')!r})\n"
                   "def send(address, msg):\n"
                   "    try:\n        print('REPLY', send_command(address, msg, transport=T, timeout=20))\n"
                   "    except RemoteError as exc:\n        print('REFUSED', exc.code, exc.remote_message)\n")
        argv = [self.python, "-c", prelude + code]
        if isinstance(user, str):
            return run_as(user, argv, env=self.env, cwd=self.dirs[user], timeout=60)
        return subprocess.run(argv, user=user, group=user, extra_groups=[], env=self.env, cwd="/",
                              capture_output=True, text=True, timeout=60)

    def send(self, msg: m.Message, address: str = "schedd") -> m.Message:
        return send_command(address, msg, transport=self.transport, timeout=20)

    def jobs(self, constraint: str = "true") -> list[ClassAd]:
        return [ClassAd(t) for t in self.send(m.QueryJobs(constraint=constraint)).ads]

    def submit_as(self, user: str, extra: str = "") -> str:
        """``htc submit`` of an idle sleep job as ``user``; returns its job id."""
        path = self.dirs[user] / "job.sub"
        text = f"executable = /bin/sleep\narguments = 300\nrequirements = false\n{extra}\nqueue\n"
        run_as(user, ["/bin/sh", "-c", f"cat > {path}"], input=text, check=True)
        done = self.htc(user, "submit", str(path))
        assert done.returncode == 0, done.stderr
        [cluster] = [w.rstrip(".") for w in done.stdout.split() if w.rstrip(".").isdigit()][-1:]
        return f"{cluster}.0"

    def log(self, name: str) -> str:
        return (self.home / "log" / name).read_text(errors="replace")

    def slot_names(self) -> list[str]:
        """The Name of every slot in the collector, once the startd has advertised."""
        ads = wait_for(lambda: self.send(m.QueryAds(ad_type=m.AdType.Startd), "collector").ads, 60,
                       "the startd's slots in the collector")
        return [str(ClassAd(a)["Name"]) for a in ads]

    def machine(self) -> str:
        return self.slot_names()[0].rpartition("@")[2]


@pytest.fixture(scope="module")
def pool():
    local_user(ALICE), local_user(BOB)
    secured = SecuredPool()
    try:
        yield secured.start()
    finally:
        secured.stop()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_pool_started_under_umask_000_gives_nobody_else_write_access(pool):
    home = pool.home
    for path in (home, home / "config.d", home / "log", home / "spool", home / "execute", home / "sockets"):
        assert _mode(path) == 0o755, f"{path} is {_mode(path):04o}"
    assert _mode(home / "htc_config") == 0o644
    for sock in (home / "sockets").iterdir():
        assert stat.S_ISSOCK(sock.lstat().st_mode) and _mode(sock) == 0o666, f"{sock} is {_mode(sock):04o}"
    assert {s.name for s in (home / "sockets").iterdir()} >= {"master.sock", "collector.sock", "schedd.sock",
                                                               "negotiator.sock", "startd.sock"}
    # everything the pool made, logs and the job queue included: nothing writable by group or others
    made = [p for p in home.rglob("*") if not p.is_symlink() and not stat.S_ISSOCK(p.lstat().st_mode)]
    assert any(p.name == "SchedLog" for p in made) and any(p.name == "MasterLog.stderr" for p in made)
    loose = [f"{p} {_mode(p):04o}" for p in made if _mode(p) & 0o022]
    assert not loose, loose


def test_deny_write_star_makes_submit_fail_with_a_clear_message(pool):
    deny = pool.home / "config.d" / "60-deny.conf"
    deny.write_text("DENY_WRITE = *\n")
    try:
        assert pool.htc(None, "reconfig", "-daemon", "schedd").returncode == 0
        path = pool.root / "root.sub"
        path.write_text("executable = /bin/true\nqueue\n")
        hers = pool.dirs[ALICE] / "a.sub"
        run_as(ALICE, ["/bin/sh", "-c", f"cat > {hers}"], input=path.read_text(), check=True)
        before = len(pool.jobs())
        for user, sub in ((None, path), (ALICE, hers)):
            done = pool.htc(user, "submit", str(sub))
            assert done.returncode != 0
            assert "permission denied" in done.stderr and "needs WRITE access" in done.stderr, done.stderr
            assert "DENY_WRITE" in done.stderr and "refuses everyone" in done.stderr, done.stderr
        assert len(pool.jobs()) == before  # READ still works; nothing was queued
        log = pool.log("SchedLog")
        assert "PERMISSION DENIED to root@" in log and f"PERMISSION DENIED to {ALICE}@" in log
    finally:
        deny.unlink()
        pool.htc(None, "reconfig", "-daemon", "schedd")
    assert pool.htc(None, "submit", str(path)).returncode == 0  # and the pool takes jobs again


def test_alice_acts_only_on_her_own_jobs(pool):
    bobs = pool.submit_as(BOB)
    hers = pool.submit_as(ALICE)

    def status(job_id: str):
        [job] = pool.jobs(f"ClusterId == {job_id.split('.')[0]}")
        return job["JobStatus"], job.get("Owner"), job.get("Foo")

    assert status(bobs)[1] == BOB and status(hers)[1] == ALICE  # Owner is the account that submitted
    for verb in ("hold", "rm", "vacate_job"):
        done = pool.htc(ALICE, verb, bobs)
        assert "Permission denied" in done.stdout + done.stderr, (verb, done.stdout, done.stderr)
    done = pool.htc(ALICE, "qedit", bobs, "Foo", "1")
    assert done.returncode != 0 and f"may not edit jobs of {BOB}" in done.stderr, done.stderr
    assert status(bobs) == (1, BOB, None)  # still idle, unedited, in the queue
    # her own job: all of it works
    assert pool.htc(ALICE, "qedit", hers, "Foo", "1").returncode == 0
    assert pool.htc(ALICE, "hold", hers).returncode == 0
    assert status(hers) == (5, ALICE, 1)
    assert pool.htc(ALICE, "rm", hers).returncode == 0
    assert pool.jobs(f"ClusterId == {hers.split('.')[0]}") == []
    log = pool.log("SchedLog")
    for what in ("ActOnJobs Hold", "ActOnJobs Remove", "ActOnJobs Vacate", "EditJobs"):
        assert f"PERMISSION DENIED to {ALICE} (uid {local_user(ALICE).pw_uid}" in log and what in log, what
    assert pool.htc(BOB, "rm", bobs).returncode == 0  # bob still may


def test_alice_cannot_stop_drain_vacate_or_reconfigure_the_pool(pool):
    before = {d.name: d.pid for d in query_master(transport=pool.transport, timeout=10).daemons}
    machine = pool.machine()
    attempts = {
        ("off", "-daemon", "negotiator"): ("MasterLog", "DaemonsOff"),
        ("off",): ("MasterLog", "DaemonsOff"),
        ("off", "-master"): ("MasterLog", "DaemonsOff"),
        ("restart",): ("MasterLog", "DaemonsRestart"),
        ("reconfig", "-daemon", "schedd"): ("SchedLog", "Reconfig"),
        ("drain", machine): ("StartLog", "DrainJobs"),
        ("vacate", machine): ("StartLog", "Vacate"),
        ("userprio", "-setfactor", f"{BOB}@{machine}", "5"): ("NegotiatorLog", "SetUserPriority"),
    }
    for args, (log, message) in attempts.items():
        done = pool.htc(ALICE, *args)
        assert done.returncode != 0, (args, done.stdout, done.stderr)
        assert "permission denied" in done.stderr and "ADMINISTRATOR" in done.stderr, (args, done.stderr)
        assert f"PERMISSION DENIED to {ALICE}@" in pool.log(log) and f"for {message}, access level ADMINISTRATOR" \
            in pool.log(log), (args, log)
    after = query_master(transport=pool.transport, timeout=10)
    assert not after.shutting_down
    assert {d.name: d.pid for d in after.daemons} == before and all(d.state == "Running" for d in after.daemons)
    slots = pool.send(m.QueryAds(ad_type=m.AdType.Startd, projection=("Draining",)), "collector").ads
    assert slots and all(ClassAd(s).get("Draining") in (None, False) for s in slots)
    # root, the pool's administrator, may (and the pool answers as before afterwards)
    assert pool.htc(None, "reconfig", "-daemon", "schedd").returncode == 0


def test_alice_cannot_advertise_or_remove_a_machine(pool):
    fake = '[ Name = "slot1@fake"; Machine = "fake"; MyType = "Machine"; Cpus = 64; Requirements = true ]'
    done = pool.client(ALICE, "send('collector', m.UpdateAd(ad_type=m.AdType.Startd, name='slot1@fake', "
                              f"ad_text={fake!r}, lifetime=600))\n"
                              f"send('collector', m.InvalidateAd(ad_type=m.AdType.Startd, constraint='true'))\n"
                              f"send('collector', m.UpdateAd(ad_type=m.AdType.Schedd, name='schedd@fake', "
                              "ad_text='[ Name = \"schedd@fake\" ]'))\n")
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("REFUSED denied permission denied") for line in lines), done
    assert "ADVERTISE_STARTD" in lines[0] and "ADVERTISE_SCHEDD" in lines[2]
    names = pool.slot_names()
    assert names and "slot1@fake" not in names  # the fake is not there, the real slots still are
    log = pool.log("CollectorLog")
    assert f"PERMISSION DENIED to {ALICE}@" in log and "for UpdateAd, access level ADVERTISE_STARTD" in log
    assert "for InvalidateAd, access level ADVERTISE_STARTD" in log
    # daemon-to-daemon messages are refused to her too: a fake match, a fake job exit
    done = pool.client(ALICE, "send('schedd', m.JobExited(claim_id='x', job_id='1.0', exit_code=0))\n"
                              "send('startd', m.RequestClaim(claim_id='x', schedd_name='s', schedd_address='schedd', "
                              "submitter='a@b', job_ad='[ ]'))\n")
    assert [line.split()[:2] for line in done.stdout.splitlines()] == [["REFUSED", "denied"]] * 2, done


def test_a_uid_without_an_account_cannot_submit_as_root(pool):
    ad = '[ Cmd = "/bin/id"; Owner = "root"; User = "root@x"; Iwd = "/" ]'
    done = pool.client(NO_ACCOUNT, f"send('schedd', m.Submit(cluster_ad={ad!r}, proc_ads=('[ ]',)))\n"
                                   "send('schedd', m.QueryJobs(constraint='false'))\n")
    first, second = done.stdout.splitlines()
    assert first.startswith("REFUSED denied permission denied: unauthenticated@unmapped "
                            f"(uid {NO_ACCOUNT}"), done
    assert "above READ" in first
    assert second.startswith("REPLY"), second  # it may still look (READ)
    assert pool.jobs('Cmd == "/bin/id"') == []
    assert f"PERMISSION DENIED to unauthenticated@unmapped (uid {NO_ACCOUNT}, pid " in pool.log("SchedLog")


def test_config_others_can_write_is_refused_and_its_command_never_runs():
    local_user(ALICE)
    pool = Pool("COLLECTOR, SCHEDD", config="# test\n")
    marker = pool.root / "ran-as-root"
    try:
        pool.start()
        secured = SecuredPool.__new__(SecuredPool)  # its clients, on this pool
        secured.root, secured.home, secured.python = pool.root, pool.home, _python_for_others()
        secured.env = _env(pool.home)
        secured.dirs = {ALICE: private_dir(ALICE, pool.root)}
        config_d = pool.home / "config.d"
        config_d.chmod(0o777)  # as a umask of 000 used to leave it
        evil = config_d / "99-evil.conf"
        run_as(ALICE, ["/bin/sh", "-c", f"echo 'include command : /usr/bin/touch {marker}' > {evil}"], check=True)
        # alice asks the daemons to re-read it: refused (ADMINISTRATOR), by the master and by the schedd
        done = secured.client(ALICE, "send('master', m.Reconfig())\nsend('schedd', m.Reconfig())\n")
        assert [line.split()[:2] for line in done.stdout.splitlines()] == [["REFUSED", "denied"]] * 2, done
        # root asks: the daemon refuses the whole configuration, naming config.d, and keeps the old one
        done = secured.htc(None, "reconfig", "-daemon", "schedd")
        assert done.returncode != 0 and f"{config_d} (mode 0777) is writable by others" in done.stderr, done.stderr
        with pytest.raises(RemoteError) as refused:
            pool.send(m.Reconfig(), "collector")
        assert str(config_d) in str(refused.value)
        # a tool reading the configuration (as root) will not run the command, and names the file
        done = secured.htc(None, "config_val", "-v", "SCHEDD_INTERVAL")
        assert done.returncode != 0 and f"refusing to run the include command '/usr/bin/touch {marker}' of {evil}" \
            in done.stderr and f"belongs to uid {local_user(ALICE).pw_uid}" in done.stderr, done.stderr
        os.kill(pool.status("SCHEDD").pid, signal.SIGHUP)
        wait_for(lambda: (pool.home / "log" / "SchedLog").read_text().count("keeping the old configuration") >= 2,
                 what="the schedd to refuse the configuration after SIGHUP")
        assert pool.send(m.Ping(), "schedd")  # still serving
        # and no daemon starts from such a home
        done = subprocess.run([sys.executable, "-m", "htc.daemons", "collector", "-home", str(pool.home)],
                              env=pool.env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 4 and str(config_d) in done.stderr and "writable by others" in done.stderr
        assert not marker.exists(), "the include command ran"
        assert f"PERMISSION DENIED to {ALICE}@" in (pool.home / "log" / "MasterLog").read_text()
        assert f"PERMISSION DENIED to {ALICE}@" in (pool.home / "log" / "SchedLog").read_text()
    finally:
        pool.stop()


def test_a_personal_pool_of_alice_works_for_her_and_lets_bob_only_look():
    """No configuration: the pool's account (alice) is its administrator and only writer."""
    local_user(ALICE), local_user(BOB)
    root = Path(tempfile.mkdtemp(prefix="htc-personal-"))
    root.chmod(0o755)
    try:
        secured = SecuredPool.__new__(SecuredPool)
        secured.root, secured.python = root, _python_for_others()
        secured.dirs = {ALICE: private_dir(ALICE, root), BOB: private_dir(BOB, root)}
        secured.dirs[ALICE].chmod(0o755)  # bob may reach her pool's sockets, as any local user could
        secured.home = secured.dirs[ALICE] / "pool"
        secured.env = _env(secured.home)
        secured.env.update({f"_HTC_{k}": v for k, v in {**FAST, "DAEMON_LIST": "MASTER, COLLECTOR, SCHEDD"}.items()})
        secured.transport = UnixTransport(secured.home / "sockets")
        done = secured.htc(ALICE, "pool", "start", "-timeout", "60")
        assert done.returncode == 0, done.stdout + done.stderr
        assert (secured.home / "sockets" / "schedd.sock").stat().st_uid == local_user(ALICE).pw_uid
        alice_id = secured.submit_as(ALICE)  # her own pool takes her jobs
        assert [j["Owner"] for j in secured.jobs()] == [ALICE]
        sub = secured.dirs[BOB] / "job.sub"
        run_as(BOB, ["/bin/sh", "-c", f"cat > {sub}"], input="executable = /bin/true\nqueue\n", check=True)
        done = secured.htc(BOB, "submit", str(sub))
        assert done.returncode != 0 and "needs WRITE access" in done.stderr and "built-in default" in done.stderr
        assert secured.htc(BOB, "q").returncode == 0  # but may look
        done = secured.htc(BOB, "pool", "stop")
        assert done.returncode != 0 and "ADMINISTRATOR" in done.stderr, done.stderr
        assert f"PERMISSION DENIED to {BOB}@" in secured.log("SchedLog")
        assert f"PERMISSION DENIED to {BOB}@" in secured.log("MasterLog")
        assert secured.htc(ALICE, "rm", alice_id).returncode == 0
        done = secured.htc(ALICE, "pool", "stop")
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        for proc in psutil.process_iter(["cmdline"]):
            if str(root) in " ".join(proc.info["cmdline"] or ()):
                proc.kill()
        shutil.rmtree(root, ignore_errors=True)

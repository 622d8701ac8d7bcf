"""The starter with real processes, real signals and real limits.

Jobs are small /bin/sh scripts (any slot user can run /bin/sh) or Python run by an interpreter
the slot user can reach. Waiting for a job to reach a point is done by waiting for a file it
writes; the few real sleeps measure that a stopped job makes no CPU progress.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htc.daemons.clock import FakeClock
from htc.daemons.starter import limits
from htc.daemons import job_files
from htc.daemons.job_files import TransferError, parse_remaps
from htc.daemons.starter.service import Starter, StarterError, StarterSettings, kill_signal
from htc.daemons.starter.env import (
    job_arguments,
    job_environment,
    parse_environment_v1,
    parse_environment_v2,
    split_args_v2,
)
from htc.errors import UsageError
from htc.submit.argsenv import join_v2_raw

ROOT = os.geteuid() == 0
# An interpreter the slot user can run: the system one when we are root (ours may sit in /root).
PY = "/usr/bin/python3" if ROOT and os.access("/usr/bin/python3", os.X_OK) else sys.executable


# ------------------------------------------------------------------ arguments and environment (pure)
def test_arguments_v2_follow_htcondor_split_args():
    # condor_submit: arguments = "-n $(Process) 'quoted arg'"  ->  Arguments = "-n 0 quoted' 'arg"
    assert job_arguments({"Arguments": "-n 0 quoted' 'arg"}) == ["-n", "0", "quoted arg"]
    assert split_args_v2("'one '' quote' x") == ["one ' quote", "x"]
    assert split_args_v2("a '' b") == ["a", "", "b"]  # '' alone is an empty argument
    assert split_args_v2("  \ta\r\nb  ") == ["a", "b"]
    assert split_args_v2('say "hi"') == ["say", '"hi"']  # double quotes are not special in the ad
    with pytest.raises(UsageError, match="Unbalanced quote starting here: 'oops"):
        split_args_v2("ok 'oops")


def test_arguments_v1_and_precedence():
    assert job_arguments({"Args": "a  b\tc"}) == ["a", "b", "c"]
    assert job_arguments({"Args": "old", "Arguments": "new 'one'"}) == ["new", "one"]
    assert job_arguments({}) == []


def test_join_args_matches_htcondor_append_arg():
    assert join_v2_raw(["-n", "0", "quoted arg"]) == "-n 0 quoted' 'arg"
    assert join_v2_raw(["a  b"]) == "a'  'b"  # one quoted run, not a' '' 'b
    assert join_v2_raw(["it's"]) == "it''''s"
    assert join_v2_raw([""]) == "''"


@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)))))
def test_join_then_split_is_the_identity(args):
    assert split_args_v2(join_v2_raw(args)) == args


def test_environment_v2_v1_and_errors():
    # condor_submit: environment = "ONE=1 TWO='two words'"  ->  Environment = "ONE=1 TWO=two' 'words"
    assert parse_environment_v2("ONE=1 TWO=two' 'words EMPTY=") == {"ONE": "1", "TWO": "two words", "EMPTY": ""}
    assert parse_environment_v2("EQ=a=b") == {"EQ": "a=b"}
    assert parse_environment_v1("A=1;B=2;\nC=3") == {"A": "1", "B": "2", "C": "3"}
    assert job_environment({"Env": "A=1|B=x y", "EnvDelim": "|"}) == {"A": "1", "B": "x y"}
    assert job_environment({"Env": "A=1", "Environment": "B=2"}) == {"B": "2"}
    with pytest.raises(UsageError, match="Missing '=' after environment variable 'NOVALUE'"):
        parse_environment_v2("A=1 NOVALUE")
    with pytest.raises(UsageError, match="missing variable in '=x'"):
        parse_environment_v1("=x")


def test_remaps_and_kill_signal_parsing():
    assert parse_remaps("a.txt = out/b.txt; c = /abs/c ;d\\;e = f\\=g") == {
        "a.txt": "out/b.txt", "c": "/abs/c", "d;e": "f=g"}
    with pytest.raises(TransferError, match="has no '='"):
        parse_remaps("lonely")
    assert kill_signal({}) == signal.SIGTERM
    assert kill_signal({"KillSig": "SIGINT"}) == kill_signal({"KillSig": "INT"}) == signal.SIGINT
    assert kill_signal({"KillSig": 10}) == 10
    with pytest.raises(UsageError, match="not a signal name"):
        kill_signal({"KillSig": "SIGNOPE"})


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("ab.=; /\t"), max_size=24))
def test_remaps_without_escapes_read_the_same_by_plain_splits(text):
    def outcome(split):
        try:
            return split(text)
        except TransferError as exc:
            return str(exc)

    assert outcome(job_files._split_plain_remaps) == outcome(job_files._split_escaped_remaps)


# ------------------------------------------------------------------ real jobs
@pytest.fixture
def dirs():
    # Not under pytest's tmp_path: its parents are root's 0700 dirs, which the slot user cannot
    # traverse (the starter refuses such an EXECUTE; see the test below).
    base = Path(tempfile.mkdtemp(prefix="htc-starter-test-"))
    base.chmod(0o755)
    iwd, execute = base / "iwd", base / "execute"
    iwd.mkdir()
    try:
        yield iwd, execute
    finally:
        shutil.rmtree(base)


@pytest.mark.skipif(not ROOT, reason="an unreachable sandbox only matters when switching to the slot user")
def test_an_execute_dir_the_slot_user_cannot_reach_is_refused(tmp_path):
    hidden = tmp_path / "hidden"
    hidden.mkdir(mode=0o700)
    (tmp_path / "job.sh").write_text("#!/bin/sh\ntrue\n")
    with pytest.raises(StarterError, match="cannot reach its sandbox.*mode 0700.*chmod o\\+x"):
        run(job(tmp_path, "job.sh"), hidden / "execute")
    assert list((hidden / "execute").iterdir()) == []


def script(iwd: Path, body: str, name: str = "job.sh", interpreter: str = "/bin/sh") -> str:
    path = iwd / name
    path.write_text(f"#!{interpreter}\n{body}\n")
    path.chmod(0o755)
    return name


def job(iwd: Path, cmd: str, **attrs):
    ad = {"ClusterId": 42, "ProcId": 0, "Cmd": cmd, "Iwd": str(iwd), "JobUniverse": 5, "Out": "out.txt",
          "Err": "err.txt", "RequestMemory": 256, "ShouldTransferFiles": "YES", "WhenToTransferOutput": "ON_EXIT"}
    ad.update(attrs)
    return ad


def run(ad, execute, **settings):
    async def go():
        starter = Starter(ad, execute, StarterSettings(**settings))
        await starter.start()
        return await starter.wait()

    return asyncio.run(go())


async def until(predicate, timeout=10.0):
    """Await a condition the job makes true (a file it writes); fail loudly if it never does."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the job never got there"
        await asyncio.sleep(0.01)


def test_environment_arguments_and_ad_files_as_htcondor_provides(dirs, monkeypatch):
    iwd, execute = dirs
    monkeypatch.setenv("STARTD_SECRET", "must-not-leak")
    body = ("import json, os, sys\n"
            "json.dump({'argv': sys.argv[1:], 'env': dict(os.environ), 'cwd': os.getcwd(),\n"
            "           'jobad': open(os.environ['_CONDOR_JOB_AD']).read(),\n"
            "           'machinead': open(os.environ['_CONDOR_MACHINE_AD']).read()}, open('seen.json', 'w'))")
    cmd = script(iwd, body, "job.py", PY)
    ad = job(iwd, cmd, Arguments="-n 0 quoted' 'arg ''", Environment="ONE=1 TWO=two' 'words OMP_NUM_THREADS=9")
    record = run(ad, execute, slot_name="slot1_3@node", cpus=4, machine_ad={"Name": "slot1_3@node", "Cpus": 4})
    assert record.exit_code == 0 and record.transfer_error is None, (iwd / "err.txt").read_text()
    seen = json.loads((iwd / "seen.json").read_text())
    assert seen["argv"] == ["-n", "0", "quoted arg", ""]
    env = seen["env"]
    assert env["ONE"] == "1" and env["TWO"] == "two words"
    assert env["_CONDOR_SCRATCH_DIR"] == seen["cwd"] == env["TMPDIR"] == env["TMP"] == env["TEMP"]
    assert env["_CONDOR_SLOT"] == "slot1_3" and env["BATCH_SYSTEM"] == "HTCondor"
    assert env["_CONDOR_JOB_IWD"] == str(iwd)
    assert env["OMP_NUM_THREADS"] == "9" and env["MKL_NUM_THREADS"] == "4"  # the job's value wins
    assert "STARTD_SECRET" not in env and "PATH" not in env  # nothing of the startd's environment
    assert "ClusterId = 42" in seen["jobad"] and 'Name = "slot1_3@node"' in seen["machinead"]
    assert not Path(seen["cwd"]).exists() and list(execute.iterdir()) == []  # cleaned up


def test_exit_codes_and_signals(dirs):
    iwd, execute = dirs
    assert run(job(iwd, script(iwd, "exit 7")), execute).exit_code == 7
    record = run(job(iwd, script(iwd, "kill -USR1 $$")), execute)
    assert record.exit_by_signal and record.exit_signal == signal.SIGUSR1 and record.exit_code is None
    assert record.to_ad()["ExitSignal"] == signal.SIGUSR1 and record.to_ad()["ExitBySignal"] is True
    assert "ExitCode" not in record.to_ad()


def test_input_files_directories_contents_and_stdin(dirs):
    iwd, execute = dirs
    (iwd / "data.txt").write_text("data\n")
    (iwd / "indir" / "deep").mkdir(parents=True)
    (iwd / "indir" / "deep" / "a").write_text("a\n")
    (iwd / "contents").mkdir()
    (iwd / "contents" / "b").write_text("b\n")
    (iwd / "stdin.txt").write_text("hello from stdin\n")
    cmd = script(iwd, "cat\nfind . -path ./_condor_std\\* -prune -o -print | sort > listing.txt")
    ad = job(iwd, cmd, TransferInput="data.txt, indir,contents/", In="stdin.txt")
    record = run(ad, execute)
    assert record.exit_code == 0
    assert (iwd / "out.txt").read_text() == "hello from stdin\n"
    listing = (iwd / "listing.txt").read_text().split()
    for path in ("./data.txt", "./indir/deep/a", "./b", "./condor_exec.exe", "./stdin.txt", "./.job.ad",
                 "./.machine.ad"):
        assert path in listing
    assert "./contents" not in listing  # 'contents/' brings the contents, not the directory


def test_missing_input_is_a_transfer_error_and_leaves_nothing(dirs):
    iwd, execute = dirs
    with pytest.raises(TransferError, match="input file 'nope.dat' does not exist"):
        run(job(iwd, script(iwd, "true"), TransferInput="nope.dat"), execute)
    assert list(execute.iterdir()) == []


def test_output_transfer_list_and_remaps(dirs):
    iwd, execute = dirs
    cmd = script(iwd, "echo 1 > out1.txt; echo 2 > out2.txt; mkdir -p sub/x; echo 3 > sub/x/f; echo err >&2")
    ad = job(iwd, cmd, TransferOutput="out1.txt,sub", TransferOutputRemaps="out1.txt = renamed.txt; sub = res/sub")
    record = run(ad, execute)
    assert record.exit_code == 0 and record.transfer_error is None
    assert (iwd / "renamed.txt").read_text() == "1\n" and (iwd / "res/sub/x/f").read_text() == "3\n"
    assert not (iwd / "out2.txt").exists() and not (iwd / "out1.txt").exists()
    assert (iwd / "err.txt").read_text() == "err\n"


def test_without_a_list_new_and_modified_files_come_back(dirs):
    iwd, execute = dirs
    (iwd / "keep.txt").write_text("input\n")
    (iwd / "change.txt").write_text("before\n")
    cmd = script(iwd, "echo new > new.txt; mkdir newdir; echo x > newdir/x; sleep 0.01; echo after > change.txt")
    record = run(job(iwd, cmd, TransferInput="keep.txt,change.txt"), execute)
    names = sorted(p.name for p in record.output_files)
    # not keep.txt (unchanged input), the executable, the ad files or the stdout/stderr captures
    assert names == ["change.txt", "err.txt", "new.txt", "newdir", "out.txt"]
    assert (iwd / "change.txt").read_text() == "after\n" and (iwd / "newdir/x").exists()


def test_missing_output_is_reported(dirs):
    iwd, execute = dirs
    record = run(job(iwd, script(iwd, "true"), TransferOutput="never.txt"), execute)
    assert "output file 'never.txt' was not created" in record.transfer_error


def test_suspend_stops_cpu_progress_and_resume_continues_it(dirs):
    iwd, execute = dirs
    cmd = script(iwd, "touch started; while :; do :; done")

    async def go():
        starter = Starter(job(iwd, cmd), execute, StarterSettings())
        await starter.start()
        await until(lambda: (starter.sandbox.path / "started").exists())
        await asyncio.sleep(0.2)
        starter.suspend()
        main = psutil.Process(starter.pid)
        await until(lambda: main.status() == psutil.STATUS_STOPPED)  # SIGSTOP lands asynchronously
        stopped = main.status()
        cpu1 = starter.usage().remote_user_cpu + starter.usage().remote_sys_cpu
        await asyncio.sleep(0.4)
        cpu2 = starter.usage().remote_user_cpu + starter.usage().remote_sys_cpu
        starter.resume()
        await asyncio.sleep(0.4)
        cpu3 = starter.usage().remote_user_cpu + starter.usage().remote_sys_cpu
        record = await starter.kill()
        return stopped, cpu1, cpu2, cpu3, record

    stopped, cpu1, cpu2, cpu3, record = asyncio.run(go())
    assert stopped == psutil.STATUS_STOPPED
    assert cpu2 - cpu1 < 0.01, "a suspended job kept using CPU"
    assert cpu3 > cpu2
    assert record.vacated and record.exit_signal == signal.SIGKILL


def test_vacate_sends_killsig_and_the_job_may_leave_cleanly(dirs):
    iwd, execute = dirs
    cmd = script(iwd, "trap 'echo bye > vacated.txt; exit 3' INT\ntouch started\nwhile :; do sleep 0.05; done")

    async def go():
        starter = Starter(job(iwd, cmd, KillSig="SIGINT", WhenToTransferOutput="ON_EXIT_OR_EVICT"), execute)
        await starter.start()
        await until(lambda: (starter.sandbox.path / "started").exists())
        starter.suspend()  # a suspended job still gets to handle the soft kill
        waited, vacated = await asyncio.gather(starter.wait(), starter.vacate(grace=10))
        assert waited is vacated  # one finish, whoever waits
        return vacated

    record = asyncio.run(go())
    assert record.vacated and record.exit_code == 3
    assert (iwd / "vacated.txt").read_text() == "bye\n"


def test_vacate_kills_after_the_grace_and_on_exit_sends_nothing_back(dirs):
    iwd, execute = dirs
    cmd = script(iwd, "trap '' TERM\ntouch started\necho partial > partial.txt\nwhile :; do :; done")

    async def go():
        starter = Starter(job(iwd, cmd), execute)
        await starter.start()
        await until(lambda: (starter.sandbox.path / "started").exists())
        t0 = time.monotonic()
        record = await starter.vacate(grace=0.3)
        return record, time.monotonic() - t0

    record, took = asyncio.run(go())
    assert record.exit_signal == signal.SIGKILL and record.vacated
    assert 0.3 <= took < 5
    assert not (iwd / "partial.txt").exists() and not (iwd / "out.txt").exists()
    assert list(execute.iterdir()) == []


def test_the_vacate_grace_is_measured_by_the_starters_clock(dirs):
    iwd, execute = dirs
    cmd = script(iwd, "trap '' TERM\ntouch started\nwhile :; do sleep 0.05; done")
    clock = FakeClock()

    async def go():
        starter = Starter(job(iwd, cmd), execute, clock=clock)
        await starter.start()
        await until(lambda: (starter.sandbox.path / "started").exists())
        vacating = asyncio.ensure_future(starter.vacate(grace=600))
        await asyncio.sleep(0.3)  # real time passes, the starter's does not
        clock.advance(599)
        await clock.settle()
        assert not vacating.done()
        while not vacating.done():  # past the grace: the kill and the clean-up wait by the clock too
            clock.advance(0.02)
            await asyncio.sleep(0.01)
        return vacating.result()

    record = asyncio.run(go())
    assert record.exit_signal == signal.SIGKILL and record.vacated and record.transfer_error is None
    assert list(execute.iterdir()) == []


@pytest.mark.parametrize("cgroups", [True, False], ids=["cgroup", "session+marker"])
def test_cleanup_leaves_no_processes_even_escaped_ones(dirs, cgroups):
    iwd, execute = dirs
    cmd = script(iwd, "setsid sleep 1000 &\necho $! > bg.pid\nsleep 1000 &\necho $! >> bg.pid\nexit 0")
    record = run(job(iwd, cmd), execute, use_cgroups=cgroups)
    assert record.exit_code == 0
    for pid in map(int, (iwd / "bg.pid").read_text().split()):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid
    assert list(execute.iterdir()) == []


@pytest.mark.skipif(not ROOT, reason="cgroup memory limits need root (cgroupfs is root's)")
def test_memory_limit_is_enforced_by_the_cgroup(dirs):
    iwd, execute = dirs
    assert limits.detect_cgroups().version in (1, 2), limits.detect_cgroups().describe()
    cmd = script(iwd, "x = bytearray(400 * 1024 * 1024)\nprint('survived')", "hog.py", PY)
    record = run(job(iwd, cmd), execute, memory_mb=64)
    assert record.oom_killed and record.exit_signal == signal.SIGKILL
    assert "survived" not in (iwd / "out.txt").read_text()
    # Only this process's sandboxes (dir_<our pid>_N) are ours: pools of other tests running in
    # parallel have job cgroups of their own at the same moment.
    ours = f"htc_dir_{os.getpid()}_*"
    leftovers = [left for _, root in limits.detect_cgroups().v1 for left in root.glob(ours)]
    assert not leftovers, leftovers


def test_memory_limit_by_rlimit_without_cgroups(dirs):
    iwd, execute = dirs
    cmd = script(iwd, "x = bytearray(400 * 1024 * 1024)\nprint('survived')", "hog.py", PY)
    record = run(job(iwd, cmd), execute, memory_mb=64, use_cgroups=False)
    assert record.exit_code == 1 and not record.oom_killed
    assert "MemoryError" in (iwd / "err.txt").read_text()


def test_usage_is_measured(dirs):
    iwd, execute = dirs
    body = "import time\nopen('blob', 'wb').write(b'x' * (2 << 20))\nt = time.process_time()\n" \
           "while time.process_time() - t < 0.3: pass"
    record = run(job(iwd, script(iwd, body, "burn.py", PY), TransferOutput="out.txt"), execute)
    usage = record.usage
    assert usage.remote_user_cpu + usage.remote_sys_cpu >= 0.3
    assert usage.resident_set_size > 1000 and usage.image_size >= usage.resident_set_size
    assert usage.disk_usage >= 2048  # KiB, the blob
    ad = record.to_ad()
    assert ad["ExitCode"] == 0 and ad["MemoryUsage"] == (usage.resident_set_size + 1023) // 1024


@pytest.mark.skipif(not ROOT, reason="switching to the slot user needs root")
def test_runs_as_the_slot_user_when_root(dirs):
    iwd, execute = dirs
    cmd = script(iwd, "id -u > uid.txt; stat -c %U . > owner.txt; touch /root/escape 2>/dev/null; echo $? > rc.txt")
    record = run(job(iwd, cmd), execute, slot_user="nobody")
    assert record.exit_code == 0
    assert int((iwd / "uid.txt").read_text()) == pwd.getpwnam("nobody").pw_uid
    assert (iwd / "owner.txt").read_text().strip() == "nobody"
    assert (iwd / "rc.txt").read_text().strip() != "0" and not Path("/root/escape").exists()


@pytest.mark.skipif(not ROOT or not shutil.which("useradd"), reason="creating a slot user needs root and useradd")
def test_slot_user_is_created_when_asked(dirs):
    iwd, execute = dirs
    name = "htcslot9"
    subprocess.run(["userdel", name], capture_output=True)
    try:
        with pytest.raises(StarterError, match=f"slot user '{name}' does not exist"):
            run(job(iwd, script(iwd, "true")), execute, slot_user=name)
        record = run(job(iwd, script(iwd, "id -un > who.txt")), execute, slot_user=name, create_slot_user=True)
        assert record.exit_code == 0 and (iwd / "who.txt").read_text().strip() == name
    finally:
        subprocess.run(["userdel", name], capture_output=True)
    with pytest.raises(StarterError, match="is root"):
        run(job(iwd, script(iwd, "true")), execute, slot_user="root")


def test_unrunnable_executable_is_a_clear_error(dirs):
    iwd, execute = dirs
    (iwd / "notexec.bin").write_bytes(b"\x00\x01garbage")
    with pytest.raises(StarterError, match=r"Failed to execute '.*condor_exec.exe': \(errno=8: 'Exec format error'\): "
                       "[^ ]* is not a program this machine can run") as caught:
        run(job(iwd, "notexec.bin"), execute)
    assert caught.value.errno == 8  # the hold's subcode, as HTCondor's starter gives it
    assert list(execute.iterdir()) == []


def test_shared_filesystem_job_runs_in_its_iwd(dirs):
    iwd, execute = dirs
    iwd.chmod(0o777)  # with should_transfer_files = NO the job writes straight into its Iwd
    cmd = script(iwd, "pwd > where.txt; echo direct")
    record = run(job(iwd, str(iwd / cmd), ShouldTransferFiles="NO"), execute)
    assert record.exit_code == 0 and record.output_files == ()
    assert (iwd / "where.txt").read_text().strip() == str(iwd)
    assert (iwd / "out.txt").read_text() == "direct\n"


def test_starter_runs_as_its_own_process(dirs):
    iwd, execute = dirs
    cmd = script(iwd, "echo hi; exit 4")
    (iwd / "job.ad").write_text(f'Cmd = "{cmd}"\nIwd = "{iwd}"\nOut = "out.txt"\nArguments = "a b"\n')
    proc = subprocess.run([sys.executable, "-m", "htc.daemons.starter", str(iwd / "job.ad"), str(execute)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "ExitCode = 4" in proc.stdout and "ExitBySignal = false" in proc.stdout
    assert (iwd / "out.txt").read_text() == "hi\n"


def _unified_mount():
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["cgroup2"]:
            return Path(left.split()[4])
    return None


@pytest.mark.skipif(not ROOT or _unified_mount() is None, reason="needs root and a cgroup2 mount")
def test_cgroup_v2_tracks_times_and_kills_a_job():
    # Hybrid machines mount v2 without controllers next to v1; that is enough to exercise the
    # v2 code: membership, cpu.stat, cgroup.kill, removal (memory then falls back to rlimits).
    own = Path("/proc/self/cgroup").read_text().splitlines()
    rel = next(line.split(":", 2)[2] for line in own if line.startswith("0::")).lstrip("/")
    layout = limits.CgroupLayout(2, base=_unified_mount() / rel)
    cg = limits.JobCgroup.create(f"v2test{os.getpid()}", 64 << 20, 1, layout=layout)
    assert cg is not None and "" in cg.dirs
    # 0.2 s of CPU, however long a busy machine takes to give it (not 0.2 s of wall time).
    proc = subprocess.Popen([PY, "-c", "import time\nwhile time.process_time()<0.2: pass\ntime.sleep(60)"],
                            preexec_fn=cg.enter)
    try:
        assert cg.pids() == {proc.pid}
        deadline = time.monotonic() + 10
        # The kernel folds the child's CPU into cpu.stat a moment later (later still on a busy
        # machine), so wait for the cgroup's own figure.
        while sum(cg.cpu_seconds()) < 0.1 and time.monotonic() < deadline:
            time.sleep(0.02)
        user, system = cg.cpu_seconds()
        assert user + system >= 0.1
        cg.kill_all()
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 5
    while not cg.remove():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not cg.dirs[""].exists()


@pytest.mark.skipif(not ROOT, reason="cgroups are root's here")
def test_this_machine_offers_cgroups():
    layout = limits.detect_cgroups()
    assert layout.version in (1, 2), layout.describe()
    if layout.version == 1:
        assert dict(layout.v1)["memory"].is_dir()


def test_starter_process_vacates_its_job_on_sigterm(dirs):
    iwd, execute = dirs
    iwd.chmod(0o777)  # the job marks its start in its Iwd
    cmd = script(iwd, "trap 'exit 5' TERM\ntouch \"$_CONDOR_JOB_IWD/started\"\nwhile :; do sleep 0.05; done")
    (iwd / "job.ad").write_text(f'Cmd = "{cmd}"\nIwd = "{iwd}"\n')
    proc = subprocess.Popen([sys.executable, "-m", "htc.daemons.starter", str(iwd / "job.ad"), str(execute),
                             "--vacate-grace", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        asyncio.run(until(lambda: (iwd / "started").exists() or proc.poll() is not None, timeout=30))
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    assert "ExitCode = 5" in out
    assert list(execute.iterdir()) == []


def test_a_sigterm_while_the_job_is_being_started_vacates_it_once_it_runs(dirs):
    iwd, execute = dirs
    iwd.chmod(0o777)
    cmd = script(iwd, "trap 'exit 5' TERM\ntouch \"$_CONDOR_JOB_IWD/started\"\nwhile :; do sleep 0.05; done")
    (iwd / "job.ad").write_text(f'Cmd = "{cmd}"\nIwd = "{iwd}"\n')
    # The signal lands the moment the job is spawned, before the starter is waiting on it.
    program = textwrap.dedent(f"""
        import os, signal, sys
        from htc.daemons.starter import service, standalone

        spawn = service.Starter.start

        async def start_then_signal(self):
            await spawn(self)
            os.kill(os.getpid(), signal.SIGTERM)

        service.Starter.start = start_then_signal
        sys.exit(standalone.main([{str(iwd / "job.ad")!r}, {str(execute)!r}, "--vacate-grace", "30"]))
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr)
    # The job got the soft kill: it ran its trap, or (on a busy machine) the signal came before
    # its shell had set the trap. Either way the starter waited for it and cleaned up.
    assert "ExitCode = 5" in done.stdout or "ExitSignal = 15" in done.stdout, done.stdout
    assert list(execute.iterdir()) == []


def test_sandboxes_of_gone_starters_are_swept_and_live_ones_kept(tmp_path):
    from htc.daemons.starter.sandbox import sweep_stale_sandboxes

    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer exists
    stale = tmp_path / f"dir_{gone.pid}_3"
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "file").write_text("x")
    mine, init_s, other = tmp_path / f"dir_{os.getpid()}_1", tmp_path / "dir_1_1", tmp_path / "dir_x_1"
    for path in (mine, init_s, other):
        path.mkdir()
    assert sweep_stale_sandboxes(tmp_path) == [stale]
    assert not stale.exists() and mine.exists() and init_s.exists() and other.exists()
    assert sweep_stale_sandboxes(tmp_path / "missing") == []

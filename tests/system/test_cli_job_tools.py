"""htc tail, ssh_to_job, who, ping and evicted_files against a real pool running a real job.

The job waits for a file the test creates, so it runs exactly as long as the test needs it:
nothing here sleeps for a fixed time or assumes an idle machine.
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import subprocess
import sys

import pytest

from htc.wire import messages as m
from poolutil import open_pool, wait_for

pytestmark = pytest.mark.slow

DAEMONS = "COLLECTOR, SCHEDD, NEGOTIATOR, STARTD"


def htc(pool, *args: str, timeout: float = 60, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "htc.cli.main", *args], env=pool.env, capture_output=True,
                          text=True, timeout=timeout, **({"input": stdin} if stdin is not None
                                                         else {"stdin": subprocess.DEVNULL}))


def _job(pool) -> str:
    go = pool.work / "go"
    script = (f"echo first line; echo to stderr >&2; printf %03000d 0; echo; "
              f"while [ ! -e {go} ]; do sleep 0.1; done; echo last line")
    return (f'executable = /bin/sh\narguments = "-c \'{script}\'"\nenvironment = "FOO=from_the_job"\n'
            f"output = {pool.work}/out\nerror = {pool.work}/err\nlog = {pool.work}/log\nqueue\n")


@pytest.fixture(scope="module")
def running():
    """A pool whose job 1.0 runs (and has written its first lines) until the test creates work/go."""
    with open_pool(DAEMONS) as pool:
        pool.submit(_job(pool))
        wait_for(lambda: pool.jobs("JobStatus == 2"), 90, "job 1.0 to run")
        wait_for(lambda: "to stderr" in htc(pool, "tail", "-stderr", "1.0").stdout, 30, "the job's stderr")
        yield pool
        (pool.work / "go").touch()


def test_tail_prints_the_end_of_stdout_and_stderr(running):
    out = htc(running, "tail", "1.0")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout) == 1024 and set(out.stdout.strip()) == {"0"}  # the last 1024 bytes only
    whole = htc(running, "tail", "-maxbytes", "100000", "1.0")
    assert whole.stdout.startswith("first line\n") and whole.stdout.count("0") == 3000
    err = htc(running, "tail", "-stderr", "1.0")
    assert (err.returncode, err.stdout) == (0, "to stderr\n")


def test_tail_of_another_pool_with_pool_home(running, tmp_path):
    env = {**running.env, "HTC_HOME": str(tmp_path / "another")}
    out = subprocess.run([sys.executable, "-m", "htc.cli.main", "tail", "-stderr", "-pool", str(running.home), "1.0"],
                         env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (out.returncode, out.stdout) == (0, "to stderr\n"), out.stderr


def test_tail_refuses_a_job_that_is_not_running(running):
    out = htc(running, "tail", "99.0")
    assert out.returncode != 0 and "job 99.0 is not in the queue" in out.stderr
    bad = htc(running, "tail", "-bogus", "1.0")
    assert bad.returncode == 2 and bad.stderr.startswith("usage: htc tail ")


def test_an_idle_job_has_no_sandbox(running):
    running.submit("executable = /bin/true\nrequirements = false\nqueue\n")
    out = htc(running, "tail", "2.0")
    assert out.returncode == 2 and "job 2.0 is not running (it is idle)" in out.stderr
    running.send(m.ActOnJobs(action=m.JobAction.Remove, ids=("2.0",), reason="test"))


def _as_user(uid: int, pool, fn) -> str:
    """Run ``fn()`` in a child process that has become ``uid`` (with the pool's environment);
    return the text of what it raised ("" if nothing). Forked, so nothing new must be imported
    from directories that user cannot read."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read)
            os.environ.clear()
            os.environ.update(pool.env)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - reported to the parent
                os.write(write, f"{type(exc).__name__}: {exc}".encode())
        except BaseException:  # noqa: BLE001
            code = 3
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return text


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: another user's view of a root pool's sandbox; run the tests as root, as CI does")
def test_another_user_is_told_the_sandbox_is_not_theirs(running):
    from htc.cli import ssh_to_job as ssh  # imported here, before the child drops root
    from htc.client.sandbox import find_running_job

    import encodings.idna  # noqa: F401 - what the child would import lazily, from files nobody may not read

    find_running_job("1.0", transport=running.transport, home=running.home)  # as root: found (and every module loaded)
    nobody = pwd.getpwnam("nobody").pw_uid
    refused = _as_user(nobody, running, lambda: find_running_job("1.0", transport=running.transport, home=running.home))
    assert refused.startswith("SandboxUnreadable: ") and "not readable by you" in refused, refused
    assert "run this as root" in refused
    args = argparse.Namespace(job="1.0", remote_command=["id"], pool=str(running.home), name=None)
    entered = _as_user(nobody, running, lambda: ssh.ssh_to_job(args))
    assert "job 1.0 belongs to root" in entered or "not readable by you" in entered, entered


def test_ssh_to_job_runs_in_the_sandbox_as_the_jobs_user_with_its_environment(running):
    out = htc(running, "ssh_to_job", "1.0", "pwd; id -u; echo $FOO; echo $_CONDOR_SCRATCH_DIR; ls")
    assert out.returncode == 0, out.stderr
    pwd, uid, foo, scratch, *files = out.stdout.splitlines()
    sandbox = os.path.realpath(pwd)
    assert os.path.basename(sandbox).startswith("dir_")
    assert int(uid) == os.stat(sandbox).st_uid  # the job's account (a slot user when run as root)
    if os.geteuid() == 0:
        assert int(uid) != 0  # jobs never run as root, and neither does their shell
    assert foo == "from_the_job" and os.path.realpath(scratch) == sandbox
    assert "_condor_stdout" in files
    status = htc(running, "ssh_to_job", "1.0", "exit 7")
    assert status.returncode == 7
    shell = htc(running, "ssh_to_job", "1.0", stdin="echo in=$PWD; exit 3\n")  # the shell reads its input
    assert shell.returncode == 3, shell.stderr
    assert shell.stdout.startswith("Welcome to slot1_1@") and f"in={pwd}\n" in shell.stdout


def test_who_lists_the_running_job_with_its_pid_and_program(running):
    out = htc(running, "who")
    assert out.returncode == 0, out.stderr
    header, *rows = out.stdout.splitlines()
    assert header.split() == ["OWNER", "CLIENT", "SLOT", "JOB", "RUNTIME", "PID", "PROGRAM"]
    [row] = [r.split() for r in rows if " 1.0 " in f" {r} "]
    assert row[2] == "1_1" and row[3] == "1.0" and re.fullmatch(r"\d+\+\d\d:\d\d:\d\d", row[4])
    assert row[5].isdigit() and row[6].startswith("/")
    assert os.path.basename(row[6]) in ("sh", "condor_exec.exe")  # the program, as the sandbox names it


def test_ping_reports_each_level_and_fails_on_a_refusal(running):
    ok = htc(running, "ping", "WRITE")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("WRITE using (") and " succeeded as " in ok.stdout
    table = htc(running, "ping", "-table", "-type", "collector", "ALL")
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["Instruction", "Authentication", "Encryption", "Integrity", "Decision", "Identity"]
    decisions = {line.split()[0]: line.split()[4] for line in lines[1:]}
    assert decisions["READ"] == "ALLOW" and decisions["CONFIG"] == "DENY"  # nobody has CONFIG by default
    assert table.returncode == 1  # one refusal fails the whole run, as condor_ping's exit status says
    verbose = htc(running, "ping", "-verbose", "-type", "master", "CONFIG")
    assert "Authorized:                  FALSE" in verbose.stdout and "ALLOW_CONFIG" in verbose.stdout
    assert htc(running, "ping", "-quiet", "READ").stdout == ""
    unknown = htc(running, "ping", "OWNER")
    assert unknown.returncode != 0 and 'Could not understand TOKEN "OWNER"' in unknown.stderr


def test_evicted_files_says_htc_keeps_none(running):
    out = htc(running, "evicted_files", "1.0")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("No evicted files are kept for job 1.0: ")
    assert str(running.work) in out.stdout


def test_tail_follow_prints_until_the_job_ends(running):
    follow = subprocess.Popen([sys.executable, "-m", "htc.cli.main", "tail", "-f", "1.0"], env=running.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: htc(running, "tail", "1.0").stdout.endswith("0\n"), 10, "the job's output")
        # the follower must be following before the job may end (a slow start on a busy machine
        # would otherwise first look after the job left, which is an error, not a follow)
        first = follow.stdout.readline()
        assert first.endswith("0\n"), f"tail -f printed {first!r} first"
        (running.work / "go").touch()
        out, err = follow.communicate(timeout=60)  # it ends by itself when the job's sandbox goes
        out = first + out
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert follow.returncode == 0, err
    assert out.endswith("last line\n")
    wait_for(lambda: running.jobs("JobStatus == 4") or not running.jobs(), 60, "job 1.0 to complete")
    done = htc(running, "tail", "1.0")
    assert done.returncode != 0 and ("not running" in done.stderr or "not in the queue" in done.stderr)

"""A job cannot make root read or write what its owner could not (issue #14, part 1).

A real root-started pool (master, collector, negotiator, startd, schedd); the attacker is the
second local user ``htctest-alice`` (tests/local_users.py), who submits over the schedd's
socket as herself -- the schedd knows her by the kernel's peer credentials -- from a
directory of her own. The victims are root-only files and directories: a test passes when
they are untouched and the job is held (or the write refused) with a reason that says what and
for whom. Each of these attacks succeeded before :mod:`htc.daemons.owner_files`.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from executor_pool import execute_python
from local_users import ALICE, local_user, needs_users, private_dir, run_as
from poolutil import Pool, wait_for
from user_python import python_argv

pytestmark = [pytest.mark.slow, needs_users]

HTC_SOURCE = Path(__file__).resolve().parents[2]

_SUBMIT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from htc.client import send_command
    from htc.daemons.schedd.requests import description_message
    from htc.wire.transport import UnixTransport
    home, cwd, text = sys.argv[1], sys.argv[2], sys.stdin.read()
    reply = send_command("schedd", description_message(text, Path(cwd), "job.sub"),
                         transport=UnixTransport(Path(home) / "sockets"), timeout=30)
    print(reply.cluster_id)
""")


@pytest.fixture(scope="module")
def pool():
    local_user(ALICE)
    p = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD")
    try:
        p.start()
        # The executor's jobs run as the slot user, who needs a Python it can reach.
        p.job_python, p.job_env = execute_python(p.root / "python")
        # Other users may talk to the daemons (who may do what is part 5 of the issue, not here).
        for sock in (p.home / "sockets").iterdir():
            sock.chmod(0o777)
        yield p
    finally:
        p.stop()


@pytest.fixture
def root_only(pool):
    """A directory only root may enter (mode 0700), holding a root-only ``secret``."""
    path = Path(tempfile.mkdtemp(prefix="root-only-", dir=pool.root))
    path.chmod(0o700)
    (path / "secret").write_text("ROOT SECRET\n")
    (path / "secret").chmod(0o600)
    return path


@pytest.fixture
def alice_dir(pool):
    """A directory of alice's own, her jobs' initial directory."""
    return private_dir(ALICE, pool.root)


def submit_as_alice(pool: Pool, cwd: Path, text: str) -> int:
    """Submit ``text`` as alice (her own process, her own uid on the socket); the cluster id."""
    done = run_as(ALICE, [*python_argv(_SUBMIT), str(pool.home), str(cwd)], input=text, env=pool.env, cwd=str(cwd))
    assert done.returncode == 0, f"alice could not submit: {done.stderr}"
    return int(done.stdout.strip())


def job_state(pool: Pool, cluster: int) -> dict:
    """The job's status and hold reason, from the queue or (once it left) the history."""
    ads = pool.jobs(f"ClusterId == {cluster}", "JobStatus", "HoldReason")
    if ads:
        return {"JobStatus": ads[0]["JobStatus"], "HoldReason": ads[0].get("HoldReason")}
    from htc.client import history
    rows = history(f"ClusterId == {cluster}", path=pool.home / "spool" / "job_queue.db")
    return {"JobStatus": rows[0]["JobStatus"], "HoldReason": rows[0].get("HoldReason")} if rows else {}


def wait_for_end(pool: Pool, cluster: int, timeout: float = 90.0) -> dict:
    """Wait until the job is held (5) or completed (4); its state."""
    return wait_for(lambda: (s := job_state(pool, cluster)) and s["JobStatus"] in (4, 5) and s,
                    timeout, f"job {cluster}.0 to be held or to complete")


def sh_job(iwd: Path, script: str, extra: str = "") -> str:
    return (f"executable = /bin/sh\narguments = \"-c '{script}'\"\ninitialdir = {iwd}\n"
            f"should_transfer_files = YES\n{extra}\nqueue\n")


def schedd_log(pool: Pool) -> str:
    return (pool.home / "log" / "SchedLog").read_text(errors="replace")


# --------------------------------------------------------------------------------- the attacks

def test_a_link_left_in_the_iwd_by_one_job_is_not_written_through_by_the_next(pool, root_only, alice_dir):
    victim = root_only / "x"
    victim.write_text("untouched\n")
    first = submit_as_alice(pool, alice_dir, sh_job(alice_dir, f"ln -s {victim} pwn"))
    assert wait_for_end(pool, first)["JobStatus"] == 4
    assert (alice_dir / "pwn").is_symlink()  # the job's link came back as a link
    second = submit_as_alice(pool, alice_dir, sh_job(alice_dir, "echo owned > pwn", "transfer_output_files = pwn"))
    state = wait_for_end(pool, second)
    assert victim.read_text() == "untouched\n"
    assert state["JobStatus"] == 5, state
    assert "pwn" in state["HoldReason"] and "symbolic link" in state["HoldReason"], state


def test_output_error_and_log_in_a_root_only_directory_are_refused(pool, root_only, alice_dir):
    job = sh_job(alice_dir, "echo out; echo err >&2",
                 f"output = {root_only}/out\nerror = {root_only}/err\nlog = {root_only}/log")
    cluster = submit_as_alice(pool, alice_dir, job)
    state = wait_for_end(pool, cluster)
    assert sorted(p.name for p in root_only.iterdir()) == ["secret"]
    assert state["JobStatus"] == 5, state
    assert f"permission denied for user {ALICE}" in state["HoldReason"], state
    wait_for(lambda: f"user log {root_only}/log" in schedd_log(pool), 30, "the refused log write in the SchedLog")


def test_streamed_output_to_a_root_only_file_is_refused(pool, root_only, alice_dir):
    victim = root_only / "secret"
    job = sh_job(alice_dir, "echo streamed", f"output = {victim}\nstream_output = true")
    cluster = submit_as_alice(pool, alice_dir, job)
    wait_for_end(pool, cluster)
    assert victim.read_text() == "ROOT SECRET\n"
    wait_for(lambda: f"the job output file {victim}" in schedd_log(pool), 30,
             "the refused streamed write in the SchedLog")
    assert f"permission denied for user {ALICE}" in schedd_log(pool).split(f"the job output file {victim}")[1]


def test_output_on_a_shared_file_system_is_opened_as_the_owner(pool, root_only, alice_dir):
    victim = root_only / "secret"
    job = (f"executable = /bin/echo\narguments = shared\ninitialdir = {alice_dir}\n"
           f"should_transfer_files = NO\noutput = {victim}\nqueue\n")
    cluster = submit_as_alice(pool, alice_dir, job)
    state = wait_for_end(pool, cluster)
    assert victim.read_text() == "ROOT SECRET\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600 and victim.stat().st_uid == 0
    assert state["JobStatus"] == 5 and f"permission denied for user {ALICE}" in state["HoldReason"], state


def test_transfer_input_files_of_etc_shadow_is_refused(pool, alice_dir):
    job = sh_job(alice_dir, "cat shadow", f"transfer_input_files = /etc/shadow\noutput = {alice_dir}/out")
    cluster = submit_as_alice(pool, alice_dir, job)
    state = wait_for_end(pool, cluster)
    out = alice_dir / "out"
    assert not out.exists() or "root:" not in out.read_text()
    assert state["JobStatus"] == 5, state
    assert "/etc/shadow" in state["HoldReason"] and f"permission denied for user {ALICE}" in state["HoldReason"]


def test_links_in_an_input_directory_are_neither_read_nor_written_through(pool, root_only, alice_dir):
    """An input directory's contents land at the top of the sandbox: a link there is copied as a
    link (the job reads through it only what it may read itself), and a link named like the
    starter's own files (``_condor_stdout``, ``.job.ad``) does not make the starter write."""
    other = root_only / "other"
    other.write_text("ROOT OTHER\n")
    inputs = alice_dir / "in"
    run_as(ALICE, ["mkdir", str(inputs)], check=True)
    for name, target in (("leak", root_only / "secret"), ("_condor_stdout", root_only / "secret"),
                         (".job.ad", other)):
        run_as(ALICE, ["ln", "-s", str(target), str(inputs / name)], check=True)
    job = sh_job(alice_dir, "cat leak; echo done", f"transfer_input_files = in/\noutput = {alice_dir}/out")
    state = wait_for_end(pool, submit_as_alice(pool, alice_dir, job))
    for victim, text in ((root_only / "secret", "ROOT SECRET\n"), (other, "ROOT OTHER\n")):
        assert victim.read_text() == text and victim.stat().st_uid == 0
    assert state["JobStatus"] == 4, state
    assert (alice_dir / "out").read_text() == "done\n"


def test_remaps_out_of_the_iwd_go_only_where_alice_may_write(pool, root_only, alice_dir):
    up = submit_as_alice(pool, alice_dir, sh_job(alice_dir, "echo a > a",
                                                 "transfer_output_remaps = \"a = ../escaped\""))
    absolute = submit_as_alice(pool, alice_dir, sh_job(alice_dir, "echo b > b",
                                                       f"transfer_output_remaps = \"b = {root_only}/b\""))
    elsewhere = private_dir(ALICE, pool.root)
    allowed = submit_as_alice(pool, alice_dir, sh_job(alice_dir, "echo c > c",
                                                      f"transfer_output_remaps = \"c = {elsewhere}/c\""))
    for cluster in (up, absolute):
        state = wait_for_end(pool, cluster)
        assert state["JobStatus"] == 5 and f"permission denied for user {ALICE}" in state["HoldReason"], state
    assert not (alice_dir.parent / "escaped").exists()
    assert sorted(p.name for p in root_only.iterdir()) == ["secret"]
    # An absolute destination alice may write is hers to choose, as in HTCondor.
    assert wait_for_end(pool, allowed)["JobStatus"] == 4
    assert (elsewhere / "c").read_text() == "c\n" and (elsewhere / "c").stat().st_uid == local_user(ALICE).pw_uid


# ----------------------------------------------------------------------- the lane's call files

def test_a_link_planted_in_an_executor_calls_dir_is_not_followed_by_the_schedd(pool, root_only):
    """Alice's executor shares one ``calls/`` directory for its calls; a link planted there
    under the name of a call's result must not carry the schedd's write out of it."""
    victim = root_only / "secret"
    script = textwrap.dedent(f"""
        import json, os, sys
        from htc.executors import HTCExecutor
        with HTCExecutor(pool={str(pool.home)!r}, progress=False, python={pool.job_python!r},
                         environment={pool.job_env!r}) as ex:
            calls = ex._spool.calls
            # the names the next call's result and output will have
            for n in range(1, 4):
                for suffix in (".result", ".out", ".err"):
                    os.symlink({str(victim)!r}, calls / f"{{ex._token}}-{{n}}{{suffix}}")
            future = ex.submit(print, "written through the link")  # (its stdout goes to <call>.out)
            try:
                outcome = repr(future.result(timeout=120))
            except BaseException as exc:
                outcome = f"{{type(exc).__name__}}: {{exc}}"
        print(json.dumps([ex._token, outcome]))
    """)
    home = private_dir(ALICE, pool.root)
    sessions = pool.home / "executor"  # (where executor sessions live: $HTC_HOME/executor)
    sessions.mkdir(exist_ok=True)
    os.chown(sessions, local_user(ALICE).pw_uid, local_user(ALICE).pw_gid)
    done = run_as(ALICE, python_argv(script), env=pool.env, cwd=str(home), home=str(home), timeout=300)
    assert victim.read_text() == "ROOT SECRET\n", done.stdout + done.stderr
    assert done.returncode == 0, done.stderr
    token, outcome = json.loads(done.stdout.strip().splitlines()[-1])
    wait_for(lambda: f"{token}-1.out: it is a symbolic link" in schedd_log(pool), 30,
             f"the refused write through the link in the SchedLog (the call: {outcome})")

"""Hostile submits against a real pool: each of issue 14's attacks on the submit path.

A real master runs a real schedd (:mod:`poolutil`); the attacks go over its Unix socket as a
tool sends them, through ``htc submit`` in a process of its own, and -- for the limits per
owner -- from a process that has become a second local user (the kernel names it to the
schedd). After every refusal the schedd must still answer, and nothing may have been queued.

* a submit line `` = 3`` killed the schedd (an IndexError in the parser);
* ``queue 100000000`` kept it busy for minutes (the limits were declared and never read);
* ``htc submit -queue 2`` of a file holding only comments recursed forever;
* ``B = $(A) $INT(B)`` in a configuration recursed forever;
* NUL bytes in paths raised ValueError from os.stat / open deep in the submit code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from htc.client import ping
from htc.daemons.schedd.requests import description_message
from htc.wire import messages as m
from htc.wire.errors import RemoteError
from local_users import ALICE, local_user, needs_users
from poolutil import Pool, wait_for

pytestmark = pytest.mark.slow

HTC = [sys.executable, "-c", "import sys; from htc.cli.main import main; sys.exit(main())"]


@pytest.fixture(scope="module")
def pool():
    p = Pool()  # HTCondor's defaults: MAX_JOBS_PER_SUBMISSION 20000, MAX_JOBS_PER_OWNER 100000
    try:
        yield p.start()
    finally:
        p.stop()


def refused(pool: Pool, text: str, filename: str = "hostile.sub") -> RemoteError:
    """Submit ``text`` for the schedd to expand; return its refusal (a test failure if it queued)."""
    with pytest.raises(RemoteError) as caught:
        pool.submit(text, filename)
    return caught.value


def serving(pool: Pool) -> None:
    """The schedd answers Ping and a query (it did not die or hang on what came before)."""
    assert ping("schedd", transport=pool.transport, timeout=10)
    pool.jobs("false")


def htc(pool: Pool, *args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    """``htc ARGS`` in a process of its own, against the pool."""
    return subprocess.run([*HTC, *args], cwd=cwd, env=pool.env, capture_output=True, text=True, timeout=timeout)


def count(pool: Pool) -> int:
    return len(pool.jobs("true", "ProcId"))


# -- a line with no name -------------------------------------------------------------------------

def test_a_line_with_no_name_is_answered_with_its_line_and_the_schedd_serves_on(pool):
    before = count(pool)
    for line in (" = 3", "= 3", "+ = 3", "- =", "@= x"):
        err = refused(pool, f"executable = /bin/true\n{line}\nqueue\n")
        assert err.code == "bad_request"
        assert "Line 2 of submit file hostile.sub" in str(err) and "Illegal Identifier" in str(err), str(err)
        serving(pool)
    assert count(pool) == before


def test_an_expression_too_deep_for_htc_is_a_parse_error_and_the_schedd_serves_on(pool):
    # A chain of any length parses (htc.classad follows chains with loops); nesting deeper than
    # the parser's bound (120 levels) is refused with a parse error, never a RecursionError.
    deep = "(" * 500 + "1" + ")" * 500
    for command in ("requirements", "rank", "+Deep", "periodic_remove"):
        err = refused(pool, f"executable = /bin/true\n{command} = {deep} > 0\nqueue\n")
        assert err.code == "bad_request" and "Parse error in expression" in str(err), str(err)[:300]
        serving(pool)


def test_a_5000_term_chain_is_taken_and_the_schedd_serves_on(pool):
    chain = "+".join(["1"] * 5000)
    before = count(pool)
    pool.submit(f"executable = /bin/true\nhold = true\n+Chain = {chain}\nqueue\n")
    assert count(pool) == before + 1
    serving(pool)


def test_htc_submit_of_a_line_with_no_name_says_which_line(pool, tmp_path):
    (tmp_path / "bad.sub").write_text("executable = /bin/true\n = 3\nqueue\n")
    done = htc(pool, "submit", "bad.sub", cwd=tmp_path)
    assert done.returncode != 0
    assert "Line 2 of submit file bad.sub" in done.stderr and "Traceback" not in done.stderr, done.stderr


# -- the limits ----------------------------------------------------------------------------------

def test_queue_100000000_is_refused_at_once_by_max_jobs_per_submission(pool, tmp_path):
    before = count(pool)
    started = time.monotonic()
    err = refused(pool, "executable = /bin/true\nqueue 100000000\n")
    elapsed = time.monotonic() - started
    assert "Number of submitted jobs would exceed MAX_JOBS_PER_SUBMISSION" in str(err), str(err)
    assert "100000000 jobs and the limit is 20000" in str(err)
    assert elapsed < 30, f"the refusal took {elapsed:.1f} s"  # minutes of CPU before the limit was read
    # a queue statement with items counts them first: 3 items x 40,000,000
    err = refused(pool, "executable = /bin/true\narguments = $(x)\nqueue 40000000 x in (a, b, c)\n")
    assert "this submission makes 120000000 jobs" in str(err)
    serving(pool)
    # htc submit refuses before expanding a proc, with the same words
    (tmp_path / "big.sub").write_text("executable = /bin/true\nqueue 100000000\n")
    started = time.monotonic()
    done = htc(pool, "submit", "big.sub", cwd=tmp_path)
    assert done.returncode != 0 and time.monotonic() - started < 30
    assert "Number of submitted jobs would exceed MAX_JOBS_PER_SUBMISSION" in done.stderr, done.stderr
    assert count(pool) == before


def test_a_late_materialization_cluster_counts_the_procs_it_queues_at_first(pool):
    reply = pool.submit("executable = /bin/true\nmax_materialize = 2\nqueue 30000\n")
    try:
        assert reply.num_procs == 30000
        assert len(pool.jobs(f"ClusterId == {reply.cluster_id}", "ProcId")) == 2
    finally:
        pool.send(m.ActOnJobs(action=m.JobAction.RemoveX, ids=(str(reply.cluster_id),)))


def _as_user(name: str, pool: Pool, text: str, iwd: str) -> tuple[str, object]:
    """Send a Submit from a child process that has become user ``name`` (the schedd sees its uid)."""
    from htc.client import send_command

    entry = local_user(name)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become the user, submit, report, exit without cleanup
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            try:
                reply = send_command("schedd", description_message(text, iwd, "alice.sub"),
                                     transport=pool.transport, timeout=20)
                result = f"ok {reply.cluster_id} {reply.num_procs}"
            except RemoteError as exc:
                result = f"refused {exc}"
            except BaseException as exc:  # reported to the parent, which fails the test with it
                result = f"failed {type(exc).__name__}: {exc}"
            os.write(write, result.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        result = fh.read()
    os.waitpid(pid, 0)
    kind, _, rest = result.partition(" ")
    return kind, rest


@pytest.fixture
def small_pool():
    p = Pool(MAX_JOBS_PER_OWNER="5", MAX_JOBS_SUBMITTED="8")
    try:
        yield p.start()
    finally:
        p.stop()


@needs_users
def test_max_jobs_per_owner_and_max_jobs_submitted_refuse_over_and_accept_under(small_pool, tmp_path):
    """MAX_JOBS_PER_OWNER = 5 counts one owner's jobs; MAX_JOBS_SUBMITTED = 8 the whole queue."""
    pool = small_pool
    clusters = []
    try:
        assert count(pool) == 0
        job = "executable = /bin/true\nhold = true\nqueue {n}\n"
        clusters.append(pool.submit(job.format(n=3)).cluster_id)           # root: 3
        err = refused(pool, job.format(n=3))                                # root: 3 + 3 > 5
        assert "Number of submitted jobs would exceed MAX_JOBS_PER_OWNER" in str(err), str(err)
        assert "has 3 jobs in the queue, 3 more would make 6 and the limit is 5" in str(err)
        clusters.append(pool.submit(job.format(n=2)).cluster_id)           # root: 5, at the limit
        err = refused(pool, job.format(n=1))
        assert "MAX_JOBS_PER_OWNER" in str(err)
        # another owner is not held to root's count, but the queue as a whole is limited
        os.chmod(tmp_path, 0o755)
        # local users reach the schedd's socket (as in a pool started under umask 022)
        sockets = pool.home / "sockets"
        sockets.chmod(sockets.stat().st_mode | 0o555)
        (sockets / "schedd.sock").chmod(0o777)
        kind, rest = _as_user(ALICE, pool, job.format(n=4), str(tmp_path))  # 5 + 4 > 8
        assert kind == "refused" and "Number of submitted jobs would exceed MAX_JOBS_SUBMITTED" in rest, rest
        assert "the queue holds 5 jobs, 4 more would make 9 and the limit is 8" in rest
        kind, rest = _as_user(ALICE, pool, job.format(n=3), str(tmp_path))  # 5 + 3 = 8: accepted
        assert kind == "ok", rest
        clusters.append(int(rest.split()[0]))
        owners = sorted(str(ad["Owner"]) for ad in pool.jobs("true", "Owner"))
        assert owners == [ALICE] * 3 + ["root"] * 5
        kind, rest = _as_user(ALICE, pool, job.format(n=1), str(tmp_path))  # a full queue refuses even one
        assert kind == "refused" and "MAX_JOBS_SUBMITTED" in rest, rest
        # jobs that leave make room again (the schedd's remembered counts are only upper bounds)
        pool.send(m.ActOnJobs(action=m.JobAction.RemoveX, ids=(str(clusters.pop(0)),)))
        wait_for(lambda: count(pool) == 5, what="root's first 3 jobs to leave")
        kind, rest = _as_user(ALICE, pool, job.format(n=2), str(tmp_path))  # queue 5 + 2, alice 3 + 2
        assert kind == "ok", rest
        clusters.append(int(rest.split()[0]))
        # the owner's limit is tested before the submission's, as HTCondor's NewProc does
        err = refused(pool, "executable = /bin/true\nqueue 100000000\n")
        assert "MAX_JOBS_PER_OWNER" in str(err) or "MAX_JOBS_SUBMITTED" in str(err), str(err)
        serving(pool)
    finally:
        for cid in clusters:
            pool.send(m.ActOnJobs(action=m.JobAction.RemoveX, ids=(str(cid),)))


# -- a description of comments, -queue ---------------------------------------------------------

def test_htc_submit_queue_2_of_a_file_of_only_comments_is_an_error_not_a_recursion(pool, tmp_path):
    (tmp_path / "comments.sub").write_text("# nothing but a comment\n\n# and another\n")
    done = htc(pool, "submit", "-queue", "2", "comments.sub", cwd=tmp_path)
    assert done.returncode != 0
    assert "No 'executable' parameter was provided" in done.stderr, done.stderr
    assert "RecursionError" not in done.stderr and "Traceback" not in done.stderr
    # with an executable given on the command line, -queue 2 queues two jobs, as condor_submit does
    done = htc(pool, "submit", "-queue", "2", "-append", "executable = /bin/true", "-append", "hold = true",
               "comments.sub", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "2 job(s) submitted to cluster" in done.stdout
    cluster = int(done.stdout.rsplit("cluster", 1)[1].strip(" .\n"))
    pool.send(m.ActOnJobs(action=m.JobAction.RemoveX, ids=(str(cluster),)))
    wait_for(lambda: not pool.jobs(f"ClusterId == {cluster}", "ProcId"), what="the cluster to leave")


# -- macro loops -------------------------------------------------------------------------------

def test_a_submit_macro_that_refers_to_itself_through_a_function_is_answered(pool):
    for text in ("A = 1\nB = $(A) $INT(B)\n", "A = $SUBSTR(B, 1)\nB = $CHOICE(0, A)\n",
                 "A = $(B)\nB = $(A)\n"):
        err = refused(pool, f"executable = /bin/true\n{text}arguments = $(B)\nqueue\n")
        assert err.code == "bad_request" and "arguments" in str(err), str(err)
        assert "refers to itself" in str(err) or "does not terminate" in str(err), str(err)
        serving(pool)


def test_a_config_macro_loop_through_int_is_a_config_error_naming_knob_file_and_line(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    config = home / "htc_config"
    config.write_text("A = 1\nB = $(A) $INT(B)\nMAX_JOBS_RUNNING = $(B)\n")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("_HTC_")}
    env.update(HTC_CONFIG=str(config), HTC_HOME=str(home))
    done = subprocess.run([*HTC, "config_val", "B"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert f"{config}:2: B: a macro refers to itself through a function: $INT(B) -> $INT(B)" in done.stderr
    # a daemon reading a knob built on it says the same, and does not start
    done = subprocess.run([*HTC, "config_val", "MAX_JOBS_RUNNING"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0 and "refers to itself" in done.stderr and "Traceback" not in done.stderr


# -- NUL bytes ---------------------------------------------------------------------------------

PATH_COMMANDS = ("executable = /bin/tr\0ue", "input = in\0put", "output = out\0put", "error = e\0rr",
                 "log = l\0og", "initialdir = /tm\0p", "transfer_input_files = a, b\0c",
                 "transfer_output_files = o\0ut", 'transfer_output_remaps = "a = b\0c"')


def test_nul_bytes_in_paths_are_refused_naming_the_line(pool, tmp_path):
    """htc submit (which parses the file itself) names the line of every path command with a NUL."""
    before = count(pool)
    for i, command in enumerate(PATH_COMMANDS):
        name = f"nul{i}.sub"
        (tmp_path / name).write_text("executable = /bin/true\nshould_transfer_files = yes\n" + command + "\nqueue\n")
        done = htc(pool, "submit", name, cwd=tmp_path)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        assert f"Line 3 of submit file {name}" in done.stderr and "NUL byte" in done.stderr, done.stderr
        assert command.split("=")[0].strip() in done.stderr, done.stderr
    # the items a queue statement reads from a file
    (tmp_path / "items").write_text("a\nb\0c\n")
    (tmp_path / "items.sub").write_text("executable = /bin/true\narguments = $(x)\nqueue x from items\n")
    done = htc(pool, "submit", "items.sub", cwd=tmp_path)
    assert "item line 2 holds a NUL byte" in done.stderr and "Line 3" in done.stderr, done.stderr
    serving(pool)
    assert count(pool) == before


def test_the_schedd_reads_no_file_and_runs_no_command_for_a_description(pool, tmp_path):
    """The schedd expands descriptions as root: include, queue from and matching are refused."""
    witness = tmp_path / "touched"
    for line in ("include : /etc/shadow", f"include : /usr/bin/touch {witness} |",
                 f"include command : /usr/bin/touch {witness}", "queue x from /etc/shadow",
                 f"queue x from /usr/bin/touch {witness} |", "queue x matching /root/*"):
        text = f"executable = /bin/true\narguments = $(x)\n{line}\n" + ("" if line.startswith("queue") else "queue\n")
        err = refused(pool, text)
        assert "reads no file, lists no directory and runs no command" in str(err), str(err)
        assert "root:" not in str(err)  # no line of /etc/shadow in the answer
        serving(pool)
    assert not witness.exists()
    # nor does it measure (walk) what a job names: transfer_input_files = / cost minutes of a
    # root walk of the whole file system, and sizes of files the user may not read
    started = time.monotonic()
    reply = pool.submit("executable = /bin/true\nhold = true\nshould_transfer_files = yes\n"
                        "transfer_input_files = /, /root\nqueue\n")
    assert time.monotonic() - started < 10
    [ad] = pool.jobs(f"ClusterId == {reply.cluster_id}", "TransferInputSizeMB", "ExecutableSize")
    assert ad["TransferInputSizeMB"] == 0 and ad["ExecutableSize"] == 0
    pool.send(m.ActOnJobs(action=m.JobAction.RemoveX, ids=(str(reply.cluster_id),)))


def test_htc_submit_of_a_file_with_a_nul_byte_names_the_line(pool, tmp_path):
    (tmp_path / "nul.sub").write_bytes(b"executable = /bin/true\noutput = out\0.txt\nqueue\n")
    done = htc(pool, "submit", "nul.sub", cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "Line 2 of submit file nul.sub" in done.stderr and "NUL byte" in done.stderr
    (tmp_path / "latin1.sub").write_bytes(b"executable = /bin/true\narguments = caf\xe9\nqueue\n")
    done = htc(pool, "submit", "latin1.sub", cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "Line 2 of submit file latin1.sub: byte 0xe9 is not UTF-8 text" in done.stderr


def test_a_config_line_with_a_nul_byte_is_a_config_error(tmp_path):
    config = tmp_path / "htc_config"
    config.write_bytes(b"LOG = /tmp/lo\0g\n")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("_HTC_")}
    env.update(HTC_CONFIG=str(config), HTC_HOME=str(tmp_path))
    done = subprocess.run([*HTC, "config_val", "LOG"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert f"{config}:1: the line holds a NUL byte" in done.stderr

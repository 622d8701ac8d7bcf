"""Fuzzing the submit language: every description either makes jobs or raises SubmitError.

Descriptions are drawn from real commands (paths, arguments, requirements, macros and the
macro functions, ``+Attr``, if/elif/else, includes of missing files, every queue form), from
random lines, and from random text with NUL bytes and other control characters. Parsing and
building the first procs must end in job ads or in :class:`~htc.submit.SubmitError` (the
error type that names file, line and command) -- never another exception, never a hang.
The same descriptions go to a real schedd, which must answer each (jobs or ``bad_request``)
and still answer Ping after.

Bounded for CI: a few hundred examples, each capped in procs (the ``check`` hook refuses
more than 200, as MAX_JOBS_PER_SUBMISSION does) and in time. No example runs a command:
``include : cmd |`` and ``queue from cmd |`` are answered with a SubmitError here.
"""

from __future__ import annotations

import contextlib
import os
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htc.client import ping
from htc.daemons.schedd.requests import description_message
from htc.submit import Submit, SubmitError
from htc.wire import messages as m
from htc.wire.errors import RemoteError
from poolutil import Pool

NAMES = st.sampled_from(["A", "B", "x", "Item", "Process", "Cluster", "n", "list", "DOLLAR", "ENV"])
WORDS = st.sampled_from(["/bin/true", "/bin/echo", "in.txt", "out.$(Process)", "a b c", "1", "0", "-3",
                         "2G", "1024", "true", "yes", "undefined", "$(A)", "$(B)", "$(x:def)", "$$(Name)",
                         "$ENV(HOME)", "$INT(A)", "$INT(B,%d)", "$REAL(A)", "$STRING(A)", "$EVAL(1+2)",
                         "$CHOICE(0,a,b)", "$CHOICE(A,list)", "$SUBSTR(A,1)", "$SUBSTR(B,-2,1)",
                         "$RANDOM_CHOICE(a,b)", "$RANDOM_INTEGER(1,9)", "$Fpn(A)", "$BASENAME(A)",
                         "$DIRNAME(A)", "$(A) $INT(B)", "$(B)$(B)", '"quoted"', "(", ")", "\\", "@", ":",
                         "=", "#", "$(", "$INT(", "x\0y", "\t", "é", "Memory > 1", "a || b && c",
                         "+".join(["1"] * 1500), " || ".join(["a"] * 800), "(" * 300 + "1" + ")" * 300])
COMMANDS = st.sampled_from(["executable", "arguments", "args", "output", "error", "log", "input",
                            "initialdir", "iwd", "transfer_input_files", "transfer_output_files",
                            "transfer_output_remaps", "should_transfer_files", "when_to_transfer_output",
                            "requirements", "rank", "request_memory", "request_cpus", "request_disk",
                            "environment", "env", "getenv", "universe", "priority", "hold", "notification",
                            "max_materialize", "max_idle", "periodic_remove", "on_exit_hold",
                            "job_ad_information_attrs", "batch_name", "accounting_group", "+MyAttr", "-MyAttr",
                            "+", "A", "B", "list", "x", "queue", "include", "if", "error", "warning"])
QUEUE = st.sampled_from(["queue", "queue 3", "queue 0", "queue -1", "queue 100000000", "queue 2 x in (a, b)",
                         "queue x in a b c", "queue x, y from (\n1 2\n3 4\n)", "queue x from (\n1\n2",
                         "queue x matching *.none", "queue x matching files *", "queue 2 x in [1:] (a b c)",
                         "queue x from missing.txt", "queue x from ls |", "queue $(A)", "queue 1+1",
                         "queue x in ($(list))", "queue [", "queue from", "queue in", "queue 3 in"])


@st.composite
def lines(draw) -> str:
    kind = draw(st.integers(0, 9))
    if kind <= 4:
        value = " ".join(draw(st.lists(WORDS, min_size=0, max_size=4)))
        return f"{draw(COMMANDS)} {draw(st.sampled_from(['=', ' = ', ':', '@=end', '']))} {value}"
    if kind == 5:
        return draw(QUEUE)
    if kind == 6:
        return draw(st.sampled_from(["if defined A", "if $(A)", "elif version >= 8.0", "else", "endif",
                                     "if x y", "include : missing.sub", "include ifexist : missing.sub",
                                     "include : x |", "include command : nothing", "error : stop $(A)",
                                     "warning : careful", "@end", "# a comment \\", " = 3", "= 3", "+ = 3"]))
    if kind == 7:
        return f"{draw(NAMES)} = {draw(WORDS)}{draw(WORDS)}"
    return draw(st.text(max_size=40))


DESCRIPTIONS = st.one_of(
    st.lists(lines(), max_size=12).map("\n".join),
    st.lists(lines(), max_size=8).map(lambda ls: "executable = /bin/true\n" + "\n".join(ls) + "\nqueue\n"),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=200),
)

MAX_PROCS = 200
#: examples per property (HTC_FUZZ_EXAMPLES=5000 for a longer campaign than CI's)
EXAMPLES = int(os.environ.get("HTC_FUZZ_EXAMPLES", "300"))


def _limit(num_procs: int) -> None:
    if num_procs > MAX_PROCS:
        raise SubmitError(f"{num_procs} procs (the fuzz test builds at most {MAX_PROCS})")


def _no_commands(cmd, cwd, env):
    raise SubmitError(f"command '{cmd}' not run by the fuzz test")


@contextlib.contextmanager
def no_commands():
    """``include : cmd |`` and ``queue from cmd |`` answered without running anything."""
    with mock.patch("htc.submit.queue.run_command", _no_commands), \
            mock.patch("htc.submit.parser.run_command", _no_commands):
        yield


def expand(text: str, cwd: str) -> int:
    """Parse ``text`` and build its first procs; the number of procs, or a SubmitError."""
    sub = Submit(text, filename="fuzz.sub", cwd=cwd, env={"HOME": "/nonexistent"})
    if not sub.has_queue_statement:
        sub.setQArgs("1")
    cluster = sub.cluster(1, qdate=0, owner="fuzz", check=_limit)
    for _ad in cluster.job_ads(0, 20):
        pass
    return cluster.num_procs


STATS = {"inputs": 0, "jobs": 0, "submit_errors": 0}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=DESCRIPTIONS)
def test_every_description_makes_jobs_or_raises_submit_error(text, tmp_path_factory):
    cwd = str(tmp_path_factory.getbasetemp())
    STATS["inputs"] += 1
    with no_commands():
        try:
            expand(text, cwd)
            STATS["jobs"] += 1
        except SubmitError as exc:
            assert str(exc).startswith("ERROR"), str(exc)
            STATS["submit_errors"] += 1


def test_known_crashes_of_the_audit_are_submit_errors(tmp_path):
    for text in (" = 3\nexecutable = /bin/true\nqueue\n", "A = 1\nB = $(A) $INT(B)\narguments = $(B)\n"
                 "executable = /bin/true\nqueue\n", "executable = /bin/tr\0ue\nqueue\n",
                 "# only a comment\n", "A = $SUBSTR(B,1)\nB = $CHOICE(0,A)\nexecutable = $(A)\nqueue\n",
                 "executable = /bin/true\nrequirements = " + "(" * 500 + "1" + ")" * 500 + " > 0\nqueue\n"):
        with pytest.raises(SubmitError):
            expand(text, str(tmp_path))


# -- through a real schedd -------------------------------------------------------------------

@pytest.fixture(scope="module")
def pool():
    p = Pool(MAX_JOBS_PER_SUBMISSION=str(MAX_PROCS))
    try:
        yield p.start()
    finally:
        p.stop()


@pytest.mark.slow
@settings(max_examples=max(EXAMPLES // 5, 20), deadline=None, suppress_health_check=list(HealthCheck))
@given(text=DESCRIPTIONS)
def test_a_real_schedd_answers_every_description_and_serves_on(pool, text):
    try:
        reply = pool.send(description_message(text, pool.work, "fuzz.sub"), timeout=30)
        assert isinstance(reply, m.SubmitReply) and 0 <= reply.num_procs <= MAX_PROCS
        pool.send(m.ActOnJobs(action=m.JobAction.RemoveX, ids=(str(reply.cluster_id),)))
    except RemoteError as exc:
        assert exc.code == "bad_request", str(exc)
    assert ping("schedd", transport=pool.transport, timeout=10)

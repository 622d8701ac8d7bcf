"""stream_output / stream_error on a real pool: the output file fills while the job runs.

The startd tails the sandbox's stdout/stderr and sends new bytes to the shadow (JobOutput),
which has the schedd write them into the job's output file at their offset; the final
transfer leaves streamed files alone. A job that does not stream still gets its output only
at the end.
"""

from __future__ import annotations

import hashlib

import htcondor2
import pytest

from poolutil import Pool, open_pool, wait_for

pytestmark = pytest.mark.slow

T = htcondor2.JobEventType
LINES = "line 1\nline 2\nline 3\n"


@pytest.fixture(scope="module")
def pool():
    with open_pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD") as started:
        yield started


def _ended(pool: Pool, name: str) -> list:
    """The job's events up to its termination."""
    events = pool.log_events(pool.work / f"{name}.log", until=lambda evs: any(e.type == T.JOB_TERMINATED for e in evs),
                             timeout=40)
    return [e for e in events if e.type != T.IMAGE_SIZE]


def _status(pool: Pool, cluster: int) -> int | None:
    rows = pool.jobs(f"ClusterId == {cluster}", "JobStatus")
    return rows[0]["JobStatus"] if rows else None


def _text(path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def _job(pool: Pool, name: str, script: str, extra: str) -> str:
    return (f"executable = /bin/sh\narguments = \"-c '{script}'\"\n"
            f"output = {pool.work}/{name}.out\nerror = {pool.work}/{name}.err\nlog = {pool.work}/{name}.log\n"
            f"{extra}\nqueue\n")


def _seen_while_running(pool: Pool, cluster: int, path) -> None:
    """``line 1`` shows in ``path`` while the job is still running (two seconds before ``line 3``)."""
    def check():
        text = _text(path)
        if "line 1" not in text:
            return False
        assert "line 3" not in text, "the output arrived all at once, at the end"
        assert _status(pool, cluster) == 2, "the output arrived only after the job had left Running"
        return True
    wait_for(check, timeout=30, what=f"'line 1' in {path.name} while the job runs", interval=0.1)


def test_stream_output_shows_lines_while_the_job_runs(pool):
    script = "for i in 1 2 3; do echo line $i; sleep 1; done"
    cluster = pool.submit(_job(pool, "so", script, "stream_output = true")).cluster_id
    out = pool.work / "so.out"
    _seen_while_running(pool, cluster, out)
    events = _ended(pool, "so")
    assert events[-1].type == T.JOB_TERMINATED and events[-1]["ReturnValue"] == 0
    assert out.read_text() == LINES
    assert _text(pool.work / "so.err") == ""


def test_stream_error_shows_lines_while_the_job_runs(pool):
    script = "for i in 1 2 3; do echo line $i >&2; echo out $i; sleep 1; done"
    cluster = pool.submit(_job(pool, "se", script, "stream_error = true")).cluster_id
    err = pool.work / "se.err"
    _seen_while_running(pool, cluster, err)
    assert "out 1" not in _text(pool.work / "se.out")  # stdout is not streamed: it comes at the end
    _ended(pool, "se")
    assert err.read_text() == LINES
    assert (pool.work / "se.out").read_text() == "out 1\nout 2\nout 3\n"


def test_without_streaming_output_arrives_at_the_end(pool):
    progress = pool.work / "ns.progress"
    script = f"for i in 1 2 3; do echo line $i; echo $i > {progress}; sleep 1; done"
    pool.submit(_job(pool, "ns", script, "")).cluster_id
    out = pool.work / "ns.out"
    wait_for(lambda: _text(progress) == "2\n", timeout=30, what="the job to print line 2")
    assert _text(out) == ""  # the job still runs (it sleeps before line 3): nothing came back yet
    _ended(pool, "ns")
    assert out.read_text() == LINES


def test_more_than_a_mebibyte_streams_intact(pool):
    # 3 MiB in bursts: several chunks per look, some while the job runs, the rest at the end.
    script = "for i in 1 2 3; do yes $i-abcde | head -c 1048576; sleep 1; done"
    cluster = pool.submit(_job(pool, "big", script, "stream_output = true\nstream_error = true")).cluster_id
    out = pool.work / "big.out"
    def first_mebibyte():
        if not out.exists() or out.stat().st_size < 1048576:
            return False
        assert _status(pool, cluster) == 2, "the first mebibyte arrived only after the job had left Running"
        return True
    wait_for(first_mebibyte, timeout=30, what="the first mebibyte while the job runs", interval=0.1)
    events = _ended(pool, "big")
    assert events[-1].type == T.JOB_TERMINATED and events[-1]["ReturnValue"] == 0, events[-1]
    expected = "".join(f"{i}-abcde\n" * (1048576 // 8) for i in (1, 2, 3)).encode()
    data = out.read_bytes()
    assert len(data) == len(expected)
    assert hashlib.sha256(data).hexdigest() == hashlib.sha256(expected).hexdigest()
    assert (pool.work / "big.err").read_bytes() == b""

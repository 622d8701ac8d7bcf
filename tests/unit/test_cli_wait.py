"""htc wait (condor_wait) over event logs written by htc.eventlog's writer."""

from __future__ import annotations

import threading
import time

import pytest

from htc.cli.main import main
from htc.errors import UsageError
from htc.eventlog import EventLogWriter
from htc.eventlog.events import ExecuteEvent, JobAbortedEvent, JobTerminatedEvent, SubmitEvent
from htc.client.wait import parse_job_spec, wait_for_jobs


@pytest.fixture
def log(tmp_path):
    return tmp_path / "job.log"


def write(path, *events):
    with EventLogWriter(path, fsync=False) as w:
        w.write(*events)


def test_all_jobs_done_exits_0(log, capsys):
    write(log, SubmitEvent(cluster=12, proc=0), SubmitEvent(cluster=12, proc=1),
          ExecuteEvent(cluster=12, proc=0, execute_host="<127.0.0.1:1>"),
          JobTerminatedEvent(cluster=12, proc=0), JobAbortedEvent(cluster=12, proc=1, reason="via htc rm"))
    result = wait_for_jobs(log, timeout=5)
    assert (result.done, result.message, result.exit_status) == (True, "All jobs done.", 0)
    assert (result.submitted, result.completed, result.aborted) == (2, 1, 1)
    assert main(["wait", str(log)]) == 0
    assert capsys.readouterr().out == "All jobs done.\n"


def test_timeout_exits_1_with_condor_waits_message(log, capsys):
    write(log, SubmitEvent(cluster=12, proc=0), SubmitEvent(cluster=12, proc=1), JobTerminatedEvent(cluster=12, proc=0))
    started = time.monotonic()
    result = wait_for_jobs(log, timeout=0.4, poll=0.05)
    assert time.monotonic() - started >= 0.4
    assert (result.done, result.message, result.pending) == (False, "Time expired.", ("12.1.0",))
    assert main(["wait", "-wait", "0.2", str(log)]) == 1
    assert capsys.readouterr().out == "Time expired.\n"


def test_follows_a_growing_log(log):
    write(log, SubmitEvent(cluster=3, proc=0))

    def finish():
        time.sleep(0.3)
        write(log, ExecuteEvent(cluster=3, proc=0))
        time.sleep(0.1)
        write(log, JobTerminatedEvent(cluster=3, proc=0, return_value=0))

    writer = threading.Thread(target=finish)
    writer.start()
    try:
        started = time.monotonic()
        result = wait_for_jobs(log, timeout=10, poll=0.02)
    finally:
        writer.join()
    assert result.done and result.message == "All jobs done."
    assert 0.3 <= time.monotonic() - started < 5


def test_one_cluster_or_one_job_of_a_shared_log(log):
    write(log, SubmitEvent(cluster=12, proc=0), SubmitEvent(cluster=13, proc=0), SubmitEvent(cluster=13, proc=1),
          JobTerminatedEvent(cluster=12, proc=0), JobTerminatedEvent(cluster=13, proc=1))
    assert wait_for_jobs(log, "12", timeout=1).done
    assert wait_for_jobs(log, "13.1", timeout=1).done
    assert not wait_for_jobs(log, "13", timeout=0.2, poll=0.05).done
    missing = wait_for_jobs(log, "99", timeout=0.2, poll=0.05)
    assert (missing.done, missing.message) == (False, "This log does not mention that job!")


def test_num_and_status_lines(log):
    write(log, SubmitEvent(cluster=5, proc=0), SubmitEvent(cluster=5, proc=1),
          ExecuteEvent(cluster=5, proc=0, execute_host="<10.0.0.1:9618>"), JobTerminatedEvent(cluster=5, proc=0))
    lines: list[str] = []
    result = wait_for_jobs(log, num=1, status=True, report=lines.append, timeout=1)
    assert (result.done, result.message) == (True, "Specifed number of jobs (1) done.")
    assert lines == ["5.0.0 submitted", "5.1.0 submitted", "5.0.0 executing on host <10.0.0.1:9618>",
                     "5.0.0 completed"]


def test_echo_prints_the_events_as_the_log_has_them(log):
    write(log, SubmitEvent(cluster=5, proc=0, submit_host="<127.0.0.1:1>"), JobTerminatedEvent(cluster=5, proc=0))
    lines: list[str] = []
    wait_for_jobs(log, echo=True, report=lines.append, timeout=1)
    assert lines[0].startswith("000 (005.000.000)") and lines[0].rstrip().endswith("...")
    assert lines[1].startswith("005 (005.000.000)")


def test_empty_log_and_zero_wait(log, capsys):
    log.write_text("")
    assert wait_for_jobs(log, timeout=0.1, poll=0.02).message == "This log does not mention any jobs!"
    write(log, SubmitEvent(cluster=1, proc=0))
    result = wait_for_jobs(log, timeout=0)
    assert (result.done, result.message) == (False, "Time expired."), "-wait 0 reads the log once"
    write(log, JobTerminatedEvent(cluster=1, proc=0))
    assert wait_for_jobs(log, timeout=0).done


def test_bad_arguments(log, tmp_path, capsys):
    with pytest.raises(UsageError, match="Couldn't open"):
        wait_for_jobs(tmp_path / "nope.log", timeout=1)
    with pytest.raises(UsageError, match="Couldn't understand job number: x"):
        parse_job_spec("x")
    assert parse_job_spec("-1") is None and parse_job_spec("12.3") == (12, 3, -1)
    log.write_text("")
    with pytest.raises(UsageError, match="greater than zero"):
        wait_for_jobs(log, num=0)
    assert main(["wait", str(tmp_path / "nope.log")]) == 2
    assert "Couldn't open" in capsys.readouterr().err


def test_json_output(log, capsys):
    write(log, SubmitEvent(cluster=2, proc=0), JobTerminatedEvent(cluster=2, proc=0))
    import json

    assert main(["wait", "-json", str(log)]) == 0
    assert json.loads(capsys.readouterr().out) == {"done": True, "message": "All jobs done.", "submitted": 1,
                                                   "completed": 1, "aborted": 0, "pending": []}

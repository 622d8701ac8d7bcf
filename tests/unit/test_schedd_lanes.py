"""Call lanes in the schedd core (htc.daemons.schedd.lanes), with the fake clock of test_schedd_core.

Every call stays a job: it is Running with an EXECUTE event while the lane has it, and ends
with the job's own policy, a TERMINATED event and its history entry; only the transport
changes (RunCalls / CallsDone and its answer MoreCalls instead of an activation per job).
"""

from __future__ import annotations

import pytest
from test_schedd_core import Harness, job

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.schedd.callfiles import read_input, write_call_files
from htc.daemons.schedd.events import Owed, WriteCallFiles, WriteUserLog
from htc.daemons.schedd.lane_calls import LANE_ARGUMENTS, lane_key
from htc.eventlog.events import EventType
from htc.jobqueue import JobQueue, JobStatus
from htc.wire import messages as m

CALL = 'universe = vanilla\n+HTCLane = true\ntransfer_input_files = htc_call.pkl\noutput = stdout\nerror = stderr\n'


def lane_job(extra: str = "", queue: str = "queue") -> str:
    return job(CALL + extra, queue)


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.core.read_input = _read
    harness.start()
    return harness


_FILES = {"/work/htc_call.pkl": b"CALL"}


def _read(path: str, owner: str | None = None) -> bytes:
    if path not in _FILES:
        raise FileNotFoundError(path)
    return _FILES[path]


def sent_ids(h: Harness, out: list[c.Action]) -> list[str]:
    """The calls sent to lanes in ``out``: in RunCalls, and in the answers (MoreCalls) to CallsDone."""
    ids = [call.job_id for run in h.calls(m.RunCalls, out) for call in run.msg.calls]
    return ids + [call.job_id for a in out if isinstance(a, c.Reply) and isinstance(a.msg, m.MoreCalls)
                  for call in a.msg.calls]


def start_lane(h: Harness) -> tuple[str, list[m.RunCalls]]:
    """Match, claim, activate the lane and acknowledge it; return the claim id and the RunCalls sent."""
    out = h.grant(h.match())
    [activate] = h.calls(m.ActivateClaim, out)
    assert activate.msg.lane is True
    assert ClassAd(activate.msg.job_ad)["Arguments"] == LANE_ARGUMENTS
    out = h.ack(activate)
    return activate.msg.claim_id, [call.msg for call in h.calls(m.RunCalls, out)]


def done(h: Harness, claim_id: str, *job_ids: str, exit_code: int = 0) -> list[c.Action]:
    before = len(h.actions)
    results = tuple(m.LaneResult(job_id=j, exit_code=exit_code, files={"htc_result.pkl": b"R" + j.encode()},
                                 stdout=b"out " + j.encode(), started=10.0, finished=10.001, user_cpu=0.001)
                    for j in job_ids)
    assert isinstance(h.request(m.CallsDone(claim_id=claim_id, results=results)), m.MoreCalls)
    return h.actions[before:]


def test_calls_run_on_a_lane_as_jobs_and_a_dry_lane_is_vacated_then_its_claim_released(h):
    h.submit(lane_job(queue="queue 3"))
    claim_id, [first] = start_lane(h)
    # One call for a worker whose pace is unknown, Running with an EXECUTE event.
    assert [call.job_id for call in first.calls] == ["1.0"]
    assert first.calls[0].files == {"htc_call.pkl": b"CALL"}
    assert h.status(1, 0) is JobStatus.RUNNING and h.status(1, 1) is JobStatus.IDLE
    assert h.queue.get_job((1, 0))["RemoteHost"] == '"slot1_1@exec"'
    assert h.events().count(EventType.EXECUTE) == 1
    out = done(h, claim_id, "1.0")
    # The result lands in the Iwd before the TERMINATED event is written, and the job is history.
    writes = [a for a in out if isinstance(a, WriteCallFiles)]
    # (nothing for the empty stderr: on a first run no earlier file can be there to empty)
    assert writes and dict(writes[0].files) == {"htc_result.pkl": b"R1.0", "stdout": b"out 1.0"}
    assert out.index(writes[0]) < next(i for i, a in enumerate(out) if EventType.JOB_TERMINATED in h.events([a]))
    [hist] = h.queue.history("ProcId == 0")
    assert hist["JobStatus"] == "4" and hist["ExitCode"] == "0"
    # The next call goes at once; quick calls (1 ms) get the worker a few ahead.
    assert sent_ids(h, out) == ["1.1", "1.2"]
    assert h.events(out).count(EventType.EXECUTE) == 2
    done(h, claim_id, "1.1")
    out = done(h, claim_id, "1.2")
    assert h.queue.count() == 0 and len(h.queue.history()) == 3
    # Nothing left and no linger: the lane is vacated, which ends its claim.
    [vacate] = h.calls(m.Vacate, out)
    assert vacate.msg.claim_id == claim_id
    assert h.exited(claim_id, "1.0", vacated=True) == m.Ack()
    assert h.core.lanes == {} and h.core.claims == {}


def test_the_lane_workers_own_updates_are_taken_as_signs_of_life(h):
    h.submit(lane_job())
    claim_id, _ = start_lane(h)
    h.now += 30
    update = '[ ImageSize = 2048; JobState = "Running" ]'
    assert h.request(m.StarterUpdate(claim_id=claim_id, job_id="1.0", update_ad=update)) == m.Ack()
    assert h.core.claims[claim_id].last_alive == h.now


def test_a_lane_keeps_more_calls_ahead_when_they_are_quick(h):
    h.submit(lane_job(queue="queue 40"))
    claim_id, [first] = start_lane(h)
    out = done(h, claim_id, *(call.job_id for call in first.calls))
    assert len(sent_ids(h, out)) > 5  # 1 ms calls: about 10 ms of work ahead


def test_no_call_waits_behind_a_slow_one_nor_on_a_busy_lane_while_another_is_idle(h):
    h.submit(lane_job(queue="queue 40"))
    claim_id, _ = start_lane(h)
    done(h, claim_id, "1.0")  # quick: the lane now holds several
    held = set(h.core.lanes[claim_id].in_flight)
    assert len(held) > 2
    h.now += 5  # the call it runs is taking far longer than its pace
    out = done(h, claim_id, *sorted(f"{c}.{p}" for c, p in held)[1:])
    assert len(sent_ids(h, out)) == 0  # nothing more goes behind the slow one



def test_a_new_submit_goes_to_a_lingering_lane_at_once():
    h = Harness(claim_linger=10.0)
    h.core.read_input = _read
    h.start()
    h.submit(lane_job())
    claim_id, _ = start_lane(h)
    out = done(h, claim_id, "1.0")
    assert not h.calls(m.Vacate, out)  # lingers
    before = len(h.actions)
    h.submit(lane_job())
    [run] = h.calls(m.RunCalls, h.actions[before:])
    assert run.msg.calls[0].job_id == "2.0"
    done(h, claim_id, "2.0")
    out = h.tick(h.now + 11)
    [vacate] = h.calls(m.Vacate, out)
    assert vacate.msg.claim_id == claim_id


def test_max_retries_runs_a_failed_call_again_on_the_lane(h):
    h.submit(lane_job("max_retries = 1"))
    claim_id, _ = start_lane(h)
    out = done(h, claim_id, "1.0", exit_code=1)
    assert EventType.JOB_EVICTED in h.events(out)  # terminated and requeued
    assert sent_ids(h, out) == ["1.0"] and h.status(1, 0) is JobStatus.RUNNING
    done(h, claim_id, "1.0", exit_code=1)
    [hist] = h.queue.history()
    assert hist["NumJobCompletions"] == "2"


def test_a_worker_that_dies_sends_its_calls_to_starters_of_their_own(h):
    h.submit(lane_job(queue="queue 2"))
    claim_id, _ = start_lane(h)
    before = len(h.actions)
    h.exited(claim_id, "1.0", exit_signal=9)
    out = h.actions[before:]
    assert h.events(out).count(EventType.JOB_EVICTED) == 1
    assert h.queue.get_job((1, 0))["HTCLane"] == "false" and h.queue.get_job((1, 1))["HTCLane"] == "true"
    # The claim is reused for the call it ran, now on a starter of its own.
    [activate] = h.calls(m.ActivateClaim, out)
    assert activate.msg.lane is False and ClassAd(activate.msg.job_ad)["ProcId"] == 0


def test_removing_a_call_on_a_lane_stops_the_worker_and_its_other_calls_run_again(h):
    h.submit(lane_job(queue="queue 40"))
    claim_id, _ = start_lane(h)
    done(h, claim_id, "1.0")  # quick calls: the lane now holds several
    held = sorted(h.core.lanes[claim_id].in_flight)
    assert len(held) > 2
    first = f"{held[0][0]}.{held[0][1]}"
    before = len(h.actions)
    reply = h.request(m.ActOnJobs(action=m.JobAction.Remove, ids=(first,)))
    assert reply.success == 1 and h.status(*held[0]) is JobStatus.REMOVED
    [vacate] = h.calls(m.Vacate, h.actions[before:])
    assert vacate.msg.claim_id == claim_id
    before = len(h.actions)
    h.exited(claim_id, "1.0", vacated=True)
    assert h.status(*held[0]) is None  # retired once the worker is gone
    assert all(h.status(*job) is JobStatus.IDLE for job in held[1:])
    assert h.events(h.actions[before:]).count(EventType.JOB_EVICTED) == len(held) - 1
    assert h.queue.get_job(held[1])["HTCLane"] == "true"  # taken off, not to blame: lanes still
    # A late result of the removed call changes nothing.
    assert h.request(m.CallsDone(claim_id=claim_id, results=(m.LaneResult(job_id=first, exit_code=0),))) \
        == m.MoreCalls()


def test_a_call_whose_input_cannot_be_read_runs_on_a_starter(h):
    h.submit(job('+HTCLane = true\ntransfer_input_files = missing.pkl\n'))
    out = h.grant(h.match())
    [activate] = h.calls(m.ActivateClaim, out)
    out = h.ack(activate)
    assert not h.calls(m.RunCalls, out) and h.queue.get_job((1, 0))["HTCLane"] == "false"


def test_calls_with_a_time_limit_or_lanes_off_never_use_a_lane():
    for knobs, extra in (({}, "allowed_execute_duration = 60\n"), ({"call_lanes": False}, "")):
        h = Harness(**knobs)
        h.core.read_input = _read
        h.start()
        h.submit(lane_job(extra))
        [activate] = h.calls(m.ActivateClaim, h.grant(h.match()))
        assert activate.msg.lane is False


def test_calls_the_startd_never_took_are_not_lost(h):
    h.submit(lane_job(queue="queue 2"))
    out = h.grant(h.match())
    [activate] = h.calls(m.ActivateClaim, out)
    claim_id = activate.msg.claim_id
    [run] = h.calls(m.RunCalls, h.ack(activate))
    out = h.fail(run, "timeout", "no answer")  # never answered: did the calls get there?
    [vacate] = h.calls(m.Vacate, out)  # the worker is stopped ...
    assert vacate.msg.claim_id == claim_id
    h.exited(claim_id, "1.0", vacated=True)
    assert h.status(1, 0) is JobStatus.IDLE  # ... and the call is queued again


def test_the_answer_to_calls_done_brings_the_next_calls_again_when_it_may_have_been_lost(h):
    h.submit(lane_job(queue="queue 3"))
    claim_id, _ = start_lane(h)
    first = done(h, claim_id, "1.0")
    assert sent_ids(h, first) == ["1.1", "1.2"] and not h.calls(m.RunCalls, first)  # no RunCalls needed
    # The startd did not get that answer and sends the same CallsDone again: the answer
    # repeats the calls (the startd runs none twice) and changes nothing else.
    again = done(h, claim_id, "1.0")
    assert sent_ids(h, again) == ["1.1", "1.2"] and EventType.JOB_TERMINATED not in h.events(again)
    # A fresh CallsDone means the answer arrived: nothing is repeated.
    assert sent_ids(h, done(h, claim_id, "1.1")) == []


def test_a_lane_that_could_not_start_sends_its_calls_to_starters(h):
    h.submit(lane_job(queue="queue 2"))
    out = h.grant(h.match())
    [activate] = h.calls(m.ActivateClaim, out)
    out = h.fail(activate, "internal", "no lane here")
    assert [a for a in out if isinstance(a, c.Send) and isinstance(a.msg, m.ReleaseClaim)]
    assert h.status(1, 0) is JobStatus.IDLE and h.core.claims == {}
    # The next claim runs the call on a starter of its own.
    [classic] = h.calls(m.ActivateClaim, h.grant(h.match(claim_id="slot1@exec#3#cc"), new_id="slot1_2@exec#4#dd"))
    assert classic.msg.lane is False


def test_a_restarted_schedd_runs_the_calls_of_its_lanes_again_and_gives_their_claims_back(h):
    h.submit(lane_job(queue="queue 2"))
    claim_id, _ = start_lane(h)
    assert "ClaimId" not in ClassAd(h.request(m.QueryJobs(constraint="ProcId == 0")).ads[0])  # hidden
    from test_schedd_core import restarted

    h2 = restarted(h)
    assert h2.status(1, 0) is JobStatus.IDLE and h2.status(1, 1) is JobStatus.IDLE
    assert EventType.SHADOW_EXCEPTION in h2.events()
    # The claims go back two seconds later (results the startd sends again meanwhile count).
    assert not [a for a in h2.actions if isinstance(a, c.Send) and isinstance(a.msg, m.ReleaseClaim)]
    assert h2.core.next_deadline() <= h2.now + 2.0
    h2.tick(h2.now + 2.0)
    released = [a.msg for a in h2.actions if isinstance(a, c.Send) and isinstance(a.msg, m.ReleaseClaim)]
    assert [r.claim_id for r in released] == [claim_id]
    # The next start of the call is a clean one (a lane again here), not a reconnect.
    [activate] = h2.calls(m.ActivateClaim, h2.grant(h2.match(claim_id="slot1@exec#5#ee"), new_id="slot1_3@exec#6#ff"))
    assert activate.msg.lane is True


def test_a_result_the_startd_sends_again_after_a_restart_ends_the_call_instead_of_running_it_twice(h):
    h.submit(lane_job(queue="queue 3"))
    claim_id, _ = start_lane(h)
    done(h, claim_id, "1.0")  # quick: 1.1 and 1.2 go to the lane together
    from test_schedd_core import restarted

    h2 = restarted(h)  # the schedd died with 1.1 and 1.2 on the lane; the worker ran them
    assert h2.status(1, 1) is JobStatus.IDLE and h2.status(1, 2) is JobStatus.IDLE
    # The startd sends the results the dead schedd did not take to the new one, which ends
    # 1.1 with its result (files in the outbox, TERMINATED, history) and does not run it again.
    # 1.2 was taken by another lane meanwhile: its late result is dropped.
    h2.queue.set_status((1, 2), JobStatus.RUNNING, now=h2.now, attrs={"ClaimId": '"slot9@exec#9#99"'})
    out = done(h2, claim_id, "1.1", "1.2")
    [write] = [a for a in out if isinstance(a, WriteCallFiles)]
    assert dict(write.files)["htc_result.pkl"] == b"R1.1" and [a for a in out if isinstance(a, Owed)]
    assert write.owner == h2.queue.history("ProcId == 1")[0]["Owner"].strip('"')  # written with the owner's rights
    assert h2.events(out) == [EventType.JOB_TERMINATED]
    assert h2.status(1, 1) is None and h2.queue.history("ProcId == 1")[0]["ExitCode"] == "0"
    assert h2.status(1, 2) is JobStatus.RUNNING
    # Nothing more for an idle call a lane of another claim had: its own lane's result counts.
    h2.queue.set_status((1, 2), JobStatus.IDLE, now=h2.now)
    assert not [a for a in done(h2, "slot1_7@exec#7#77", "1.2") if isinstance(a, WriteCallFiles)]
    assert h2.status(1, 2) is JobStatus.IDLE


def test_call_files_land_in_the_iwd_reusing_the_call_file_and_skipping_empty_output(tmp_path):
    (tmp_path / "htc_call.pkl").write_bytes(b"CALL")
    (tmp_path / "stderr").write_bytes(b"old run")
    inode = (tmp_path / "htc_call.pkl").stat().st_ino
    write_call_files(WriteCallFiles(str(tmp_path), (("htc_result.pkl", b"RESULT"), ("stdout", b""), ("stderr", b"")),
                                    recycle="htc_call.pkl"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["htc_result.pkl", "stderr"]
    assert (tmp_path / "htc_result.pkl").read_bytes() == b"RESULT"
    assert (tmp_path / "htc_result.pkl").stat().st_ino == inode  # no new file made
    assert (tmp_path / "stderr").read_bytes() == b""  # emptied, since it was there
    # Without a call file to reuse (or asked not to), the result is a file of its own.
    write_call_files(WriteCallFiles(str(tmp_path), (("htc_result.pkl", b"AGAIN"), ("stdout", b"hi")),
                                    recycle="htc_call.pkl"))
    assert (tmp_path / "htc_result.pkl").read_bytes() == b"AGAIN" and (tmp_path / "stdout").read_bytes() == b"hi"


def test_the_result_reuses_the_call_file_only_once_the_job_is_gone(h):
    h.submit(lane_job("max_retries = 1"))
    claim_id, _ = start_lane(h)
    [retry] = [a for a in done(h, claim_id, "1.0", exit_code=1) if isinstance(a, WriteCallFiles)]
    assert retry.recycle is None and retry.files[0][0] == "htc_result.pkl"  # it runs again: keep the call
    [last] = [a for a in done(h, claim_id, "1.0") if isinstance(a, WriteCallFiles)]
    assert last.recycle == "htc_call.pkl" and last.files[0][0] == "htc_result.pkl"
    # The second run empties what the first one printed to stderr (an empty stream on a first
    # run writes nothing: no earlier file can be there).
    assert dict(retry.files).get("stderr") is None and dict(last.files)["stderr"] == b""


def test_a_result_is_committed_with_the_end_of_its_call_and_written_by_the_next_schedd(tmp_path):
    # The files are written after the commit that ends the call (at the end of the service's
    # turn): the commit itself must hold the result, for a schedd killed in between.
    # (tests/system/test_durable_promises.py does it with kill -9 of a real schedd.)
    path = str(tmp_path / "q.db")
    h = Harness(JobQueue.open(path))
    h.core.read_input = _read
    h.start()
    h.submit(lane_job(queue="queue 2"))
    claim_id, _ = start_lane(h)
    h.queue.paid([seq for seq, _ in h.queue.owed()])  # the service wrote the SUBMIT and EXECUTE events
    out = done(h, claim_id, "1.0")
    [write] = [a for a in out if isinstance(a, WriteCallFiles)]
    logs = [a for a in out if isinstance(a, WriteUserLog)]
    [owed] = [a for a in out if isinstance(a, Owed)]
    assert out.index(write) < out.index(owed) and all(out.index(log) < out.index(owed) for log in logs)
    # One entry for the batch: 1.0's TERMINATED and the EXECUTE of 1.1, sent in the answer.
    assert [(e.type, e.job_id) for log in logs for e in log.events] == [(EventType.JOB_TERMINATED, "1.0"),
                                                                        (EventType.EXECUTE, "1.1")]
    # What another process sees in the file now, before the service has written anything:
    with JobQueue.open(path) as other:
        assert [hist["ProcId"] for hist in other.history()] == ["0"]
        assert [seq for seq, _ in other.owed()] == [owed.seq]
    # The schedd dies here. The next one writes the result before anything else, then pays.
    h.queue.close()
    again = Harness(JobQueue.open(path))
    started = again.start()
    kept = [a for a in started if isinstance(a, (WriteCallFiles, WriteUserLog, Owed))]
    assert kept[:len(logs) + 2] == [write, *logs, owed]  # (then 1.1's SHADOW_EXCEPTION: it runs again)
    again.queue.paid([a.seq for a in started if isinstance(a, Owed)])
    assert again.queue.owed() == []
    assert not [a for a in Harness(again.queue).start() if isinstance(a, WriteCallFiles)]
    again.queue.close()


def test_a_call_named_after_itself_gets_its_outputs_renamed_as_its_remaps_say(h):
    # The pool backend's calls share calls/: the call file, result and output carry the call's id.
    _FILES["/work/7f-3.call"] = b"CALL"
    h.submit(job('+HTCLane = true\ntransfer_input_files = 7f-3.call\noutput = 7f-3.out\nerror = 7f-3.err\n'
                 'transfer_output_remaps = "htc_result.pkl=7f-3.result"\n'))
    claim_id, [run] = start_lane(h)
    assert [(call.job_id, sorted(call.files)) for call in run.calls] == [("1.0", ["7f-3.call"])]
    [write] = [a for a in done(h, claim_id, "1.0") if isinstance(a, WriteCallFiles)]
    assert write.recycle == "7f-3.call"  # its inode becomes the result's
    assert dict(write.files) == {"7f-3.result": b"R1.0", "7f-3.out": b"out 1.0"}
    assert write.files[0][0] == "7f-3.result"


def test_remaps_a_lane_cannot_apply_send_the_call_to_a_starter():
    for remaps in ("htc_result.pkl=sub/r.pkl", "htc_result.pkl"):
        h = Harness()
        h.core.read_input = _read
        h.start()
        h.submit(lane_job(f'transfer_output_remaps = "{remaps}"\n'))
        [activate] = h.calls(m.ActivateClaim, h.grant(h.match()))
        assert activate.msg.lane is False, remaps


def test_a_call_queued_behind_another_counts_only_its_own_run_as_wall_clock_time(h):
    h.submit(lane_job(queue="queue 2"))
    claim_id, _ = start_lane(h)
    h.now += 30.0  # the result comes back long after the call was sent; the worker took 1 ms
    done(h, claim_id, "1.0")
    [ad] = h.queue.history(constraint="ProcId == 0")
    assert 0.0 < float(ad["RemoteWallClockTime"]) < 0.01


def test_a_lane_key_is_worked_out_once_per_cluster_and_follows_its_changes(h):
    cid = h.submit(lane_job("request_memory = 128\n", queue="queue 3"))
    q = h.queue

    def memo(proc):
        return lane_key(q.get_job((cid, proc)))

    def plain(proc):  # a plain mapping: worked out attribute by attribute
        return lane_key(dict(q.get_job((cid, proc)).to_dict()))

    keys = [memo(p) for p in range(3)]
    assert keys[0] is not None and keys == [plain(p) for p in range(3)] == [keys[0]] * 3
    with q.transaction():
        q.edit_cluster(cid, "RequestMemory", "256")
    assert memo(0) == plain(0) != keys[0] and "256" in memo(0)
    with q.transaction():
        q.set_attributes((cid, 1), {"RequestMemory": "512"})  # one proc of its own
    assert memo(1) == plain(1) and "512" in memo(1)
    assert memo(2) == plain(2) and "256" in memo(2)
    with q.transaction():
        q.set_attributes((cid, 2), {"TransferOutputRemaps": '"htc_result.pkl=sub/r.pkl"'})
        q.set_attributes((cid, 0), {"StreamOut": "true"})
    assert memo(2) is None and plain(2) is None  # a remap a lane cannot apply
    assert memo(0) is None and plain(0) is None  # streaming: a starter of its own
    assert memo(1) == plain(1) is not None


def test_a_call_input_is_read_whole_or_one_byte_past_what_a_lane_carries(tmp_path):
    small, big = tmp_path / "small", tmp_path / "big"
    small.write_bytes(b"call bytes")
    big.write_bytes(b"x" * (m.MAX_LANE_CALL_BYTES + 5000))
    assert read_input(str(small)) == b"call bytes"
    assert len(read_input(str(big))) == m.MAX_LANE_CALL_BYTES + 1  # too big: the call goes to a starter
    with pytest.raises(FileNotFoundError):
        read_input(str(tmp_path / "missing"))
    with pytest.raises(OSError):
        read_input(str(tmp_path))


def test_lanes_of_one_kind_take_their_share_of_the_last_idle_calls_so_they_finish_together(h):
    h.submit(lane_job(queue="queue 24"))
    claim_a, _ = start_lane(h)  # runs 1.0
    out = h.grant(h.match(claim_id="slot1@exec#1#cc"), new_id="slot1_2@exec#2#dd")
    [activate] = h.calls(m.ActivateClaim, out)
    h.ack(activate)  # runs 1.1
    claim_b = activate.msg.claim_id
    lane_a, lane_b = h.core.lanes[claim_a], h.core.lanes[claim_b]
    assert len(lane_a.in_flight) == len(lane_b.in_flight) == 1
    # Quick calls on both: alone, lane A would take 33 (about 300 ms of 1 ms calls); with 22
    # idle and another lane of its kind it takes about half of them (the count of idle calls
    # it goes by may still hold the two that run).
    out = done(h, claim_a, "1.0")
    assert 11 <= len(sent_ids(h, out)) <= 12
    out = done(h, claim_b, "1.1")  # then B about half of what is left
    assert 5 <= len(sent_ids(h, out)) <= 7
    out = done(h, claim_a, *(f"{c}.{p}" for c, p in sorted(lane_a.in_flight)[:-2]))  # A is 2 short of dry
    assert 2 <= len(sent_ids(h, out)) <= 4
    assert not h.core.lanes.idle.get(lane_a.key) or len(h.core.lanes.idle[lane_a.key]) <= 3
    assert abs(len(lane_a.in_flight) - len(lane_b.in_flight)) <= 2  # and neither holds the rest alone


def _ads(h: Harness, out: list[c.Action]) -> list[m.UpdateAd]:
    return [a.msg for a in out if isinstance(a, c.Send) and isinstance(a.msg, m.UpdateAd)]


def test_a_submit_a_lane_starts_at_once_sends_no_prompt_ads_but_idle_work_still_does():
    """A call taken by a lingering lane in its Submit's turn is no idle work: the collector
    hears of it at the queue-changed pace (SCHEDD_MIN_INTERVAL), not within ``prompt_delay``
    as for every call before; a submit that leaves a job idle still advertises at once."""
    h = Harness(claim_linger=10.0)
    h.core.read_input = _read
    h.start()
    h.submit(lane_job())
    claim_id, _ = start_lane(h)
    done(h, claim_id, "1.0")
    h.tick(h.now + 2)  # the ads the first call's end made due go out
    h.submit(lane_job())
    assert h.status(2, 0) is JobStatus.RUNNING
    assert not _ads(h, h.tick(h.now + 0.01))  # past prompt_delay, before SCHEDD_MIN_INTERVAL
    assert _ads(h, h.tick(h.now + 1.1))  # the queue changed: ads at the usual pace
    h.submit(lane_job(queue="queue 5"))  # more than the lane takes: idle work
    assert h.status(3, 4) is JobStatus.IDLE
    assert _ads(h, h.tick(h.now + 0.01))


def test_a_batch_of_calls_reads_its_inputs_under_one_switch_to_their_owner(h):
    """A lane's next calls are read with their owner's rights taken once for the batch
    (callfiles.reading_as), every read inside it, and no queue work while it is held."""
    import contextlib

    blocks: list[str | None] = []
    inside = [False]
    reads: list[bool] = []

    @contextlib.contextmanager
    def reading_as(owner):
        blocks.append(owner)
        inside[0] = True
        try:
            yield
        finally:
            inside[0] = False

    def read(path, owner=None):
        reads.append(inside[0])
        return _read(path, owner)

    h.core.read_input = read
    h.core.lanes.reading_as = reading_as
    transaction = h.queue.transaction

    def no_queue_work_inside(*args, **kwargs):
        assert not inside[0], "the queue was changed while the owner's rights were held"
        return transaction(*args, **kwargs)

    h.queue.transaction = no_queue_work_inside
    h.submit(lane_job(queue="queue 40"))
    claim_id, _ = start_lane(h)
    blocks.clear()
    reads.clear()
    out = done(h, claim_id, "1.0")  # quick: the answer brings several calls
    sent = sent_ids(h, out)
    assert len(sent) > 2 and len(reads) == len(sent) and all(reads)
    assert blocks == [h.queue.get_job((1, 1)).owner] and blocks[0]  # one switch for the batch, to the calls' owner

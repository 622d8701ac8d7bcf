"""Self-checkpointing (``checkpoint_exit_code``): the starter's decision and what a checkpoint
holds, the schedd core's record of a stored checkpoint, and its store's bookkeeping."""

from __future__ import annotations

from htc.daemons.schedd.checkpoint_files import checkpoint_directory, checkpoint_stores, stale_stores
from htc.daemons.schedd.checkpoints import CheckpointStored
from htc.daemons.starter.self_checkpoint import Decision, checkpoint_names, decide, wants_checkpoints
from htc.eventlog.events import EventType, FileTransferType
from htc.daemons.schedd.events import WriteUserLog
from htc.wire import messages as m

from test_schedd_core import Harness, job, run_first_job

JOB = {"WantFTOnCheckpoint": True, "SuccessCheckpointExitCode": 85}


def test_the_checkpoint_exit_code_restarts_and_every_other_end_finishes():
    assert decide(JOB, 85, None, vacated=False) is Decision.CHECKPOINT
    assert decide(JOB, 0, None, vacated=False) is Decision.FINISH
    assert decide(JOB, 1, None, vacated=False) is Decision.FINISH
    assert decide(JOB, None, 9, vacated=False) is Decision.FINISH
    # while vacating, the exit is an eviction (HTCondor uploads nothing then)
    assert decide(JOB, 85, None, vacated=True) is Decision.FINISH
    # without WantFTOnCheckpoint HTCondor's starter ignores the code
    assert decide({"SuccessCheckpointExitCode": 85}, 85, None, vacated=False) is Decision.FINISH
    assert not wants_checkpoints({"SuccessCheckpointExitCode": 85}) and wants_checkpoints(JOB)
    assert decide({}, 85, None, vacated=False) is Decision.FINISH


def test_a_job_may_promise_a_signal_instead():
    ad = {"WantFTOnCheckpoint": True, "SuccessCheckpointExitBySignal": True, "SuccessCheckpointExitSignal": 10}
    assert wants_checkpoints(ad)
    assert decide(ad, None, 10, vacated=False) is Decision.CHECKPOINT
    assert decide(ad, None, 15, vacated=False) is Decision.FINISH
    assert decide(ad, 10, None, vacated=False) is Decision.FINISH
    assert not wants_checkpoints({"WantFTOnCheckpoint": True, "SuccessCheckpointExitBySignal": True})


def test_a_checkpoint_holds_the_listed_files_and_the_captured_stdout_and_stderr():
    present = {"state", "_condor_stdout", "_condor_stderr", "big.out"}
    ad = {**JOB, "TransferCheckpoint": "state", "Out": "out.txt", "Err": "err.txt"}
    assert checkpoint_names(ad, ["big.out"], present) == ["state", "_condor_stdout", "_condor_stderr"]
    # without a list: what the output transfer would send, stdout/stderr included once
    assert checkpoint_names({**JOB, "Out": "out.txt"}, ["big.out", "state"], present) == \
        ["big.out", "state", "_condor_stdout"]
    # streamed, not transferred, or not captured: left out
    streamed = {**ad, "StreamOut": True, "TransferErr": False}
    assert checkpoint_names(streamed, [], present) == ["state"]
    assert checkpoint_names({**JOB, "TransferCheckpoint": "state", "Out": "/dev/null"}, [], present) == ["state"]


def _running(h: Harness) -> str:
    h.submit(job("checkpoint_exit_code = 85\ntransfer_checkpoint_files = state"))
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    return claim_id


def test_a_stored_checkpoint_is_recorded_and_logged_and_the_job_keeps_running():
    h = Harness()
    h.start()
    claim_id = _running(h)
    started = h.now
    h.now += 100
    out = h.feed(CheckpointStored((1, 0), claim_id, 1, started=h.now - 2, files=2, bytes=10))
    ad = h.queue.get_job((1, 0))
    assert ad["CheckpointNumber"] == "1" and ad["JobLastCheckpointTime"] == str(int(h.now))
    assert float(ad["CommittedTime"]) == 100
    assert h.status(1) is not None and int(ad["JobStatus"]) == 2  # still running: not a completion
    [write] = [a for a in out if isinstance(a, WriteUserLog)]
    assert [(e.type, e.transfer_type, e.timestamp) for e in write.events] == [
        (EventType.FILE_TRANSFER, FileTransferType.OUT_STARTED, h.now - 2),
        (EventType.FILE_TRANSFER, FileTransferType.OUT_FINISHED, h.now)]
    # the second checkpoint commits only the time since the first
    h.now += 30
    h.feed(CheckpointStored((1, 0), claim_id, 2, started=h.now))
    ad = h.queue.get_job((1, 0))
    assert ad["CheckpointNumber"] == "2" and float(ad["CommittedTime"]) == 130
    # at the exit, the run adds only what came after the last checkpoint
    h.now += 7
    assert h.exited(claim_id, "1.0", exit_code=0) == m.Ack()
    [done] = h.queue.history("ProcId == 0")
    assert float(done["CommittedTime"]) == 137 and done["CheckpointNumber"] == "2"
    assert float(done["RemoteWallClockTime"]) == 137 + started - 1000.0  # the whole run still counts


def test_a_checkpoint_of_a_run_that_ended_is_not_recorded():
    h = Harness()
    h.start()
    claim_id = _running(h)
    out = h.feed(CheckpointStored((1, 0), "another-claim", 1, started=h.now))
    assert "CheckpointNumber" not in h.queue.get_job((1, 0))
    assert not [a for a in out if isinstance(a, WriteUserLog)]
    h.exited(claim_id, "1.0", exit_code=0)
    h.feed(CheckpointStored((1, 0), claim_id, 1, started=h.now))
    [done] = h.queue.history("ProcId == 0")
    assert "CheckpointNumber" not in done


def test_stores_of_jobs_that_left_the_queue_are_found(tmp_path):
    kept, gone = checkpoint_directory(tmp_path, 3, 0), checkpoint_directory(tmp_path, 12345, 2)
    for store in (kept, gone):
        (store / "current").mkdir(parents=True)
    (tmp_path / "3" / "0" / "cluster3.proc0.subproc0").mkdir()  # a spooled job's own directory: not a store
    assert kept == tmp_path / "3" / "0" / "cluster3.proc0.subproc0.checkpoint"
    stores = checkpoint_stores(tmp_path)
    assert stores == {(3, 0): kept, (12345, 2): gone}
    assert stale_stores(stores, lambda job_id: job_id == (3, 0)) == [gone]


def test_a_standard_jobs_image_is_recorded_with_its_attributes_and_a_checkpointed_event():
    h = Harness()
    h.start()
    h.submit(job("universe = standard"))
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    h.now += 50
    out = h.feed(CheckpointStored((1, 0), claim_id, 3, started=h.now - 1, files=1, bytes=4096))
    ad = h.queue.get_job((1, 0))
    assert (ad["NumCkpts"], ad["LastCkptTime"], ad["CkptSize"]) == ("1", str(int(h.now)), "4096")
    assert ad["CheckpointNumber"] == "3" and float(ad["CommittedTime"]) == 50
    [write] = [a for a in out if isinstance(a, WriteUserLog)]
    assert [(e.type, e.sent_bytes) for e in write.events] == [(EventType.CHECKPOINTED, 4096.0)]  # no 040s
    h.now += 10
    h.feed(CheckpointStored((1, 0), claim_id, 4, started=h.now, files=1, bytes=5000))
    ad = h.queue.get_job((1, 0))
    assert (ad["NumCkpts"], ad["CkptSize"], ad["CheckpointNumber"]) == ("2", "5000", "4")

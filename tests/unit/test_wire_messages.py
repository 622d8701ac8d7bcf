"""The message schema: every message round-trips, bad ones are refused with useful words."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htc.errors import PeerError, UsageError
from htc.wire import messages as m
from htc.wire.errors import MessageInvalid, WireError
from htc.wire.framing import FrameDecoder, frame
from htc.wire.errors import FrameTooLarge

AD = '[ Name = "slot1@a"; Cpus = 4 ]'

#: one valid example of every message type
EXAMPLES = [
    m.Ack(detail="done"),
    m.ErrorReply(code="bad_request", message="no such daemon"),
    m.Ping(),
    m.Pong(daemon="collector", pid=12, started_at=1.5e9, version="0.1.0"),
    m.Reconfig(),
    m.UpdateAd(ad_type=m.AdType.Startd, name="slot1@a", ad_text=AD, lifetime=60),
    m.InvalidateAd(ad_type=m.AdType.Startd, name="slot1@a"),
    m.QueryAds(ad_type=m.AdType.Any, constraint="Cpus > 2", projection=("Name", "Cpus"), limit=5),
    m.AdsReply(ads=(AD, AD)),
    m.DaemonsOff(daemons=("COLLECTOR",), how="fast"),
    m.DaemonsOn(),
    m.DaemonsRestart(daemons=("SCHEDD",)),
    m.QueryMaster(),
    m.MasterStatus(master_pid=3, daemons=(m.DaemonStatus(name="COLLECTOR", state="Running", pid=4),)),
    m.Submit(cluster_ad="[ Cmd = \"/bin/true\" ]", proc_ads=("[ ProcId = 0 ]", "[ ProcId = 1 ]")),
    m.SubmitReply(cluster_id=7, num_procs=2),
    m.SubmitClusters(clusters=(m.ClusterSubmission(cluster_ad="[ Cmd = \"/bin/true\" ]", proc_ads=("[ ]",),
                                                   submission_id="dagman-7-A-retry0"),)),
    m.SubmitClustersReply(results=(m.ClusterSubmitted(cluster_id=8, num_procs=1), m.ClusterSubmitted(error="no"))),
    m.QueryJobs(constraint="JobStatus == 1", projection=("ClusterId",)),
    m.ActOnJobs(action=m.JobAction.Hold, ids=("7", "8.1"), reason="because"),
    m.ActOnJobsReply(success=2),
    m.EditJobs(constraint="true", attributes={"JobPrio": "10"}),
    m.EditReply(matched=3),
    m.Reschedule(),
    m.SetUserPriority(submitter="alice@example.org", priority=2.5, factor=10.0, reset_usage=True),
    m.GetResourceRequests(submitter="alice@x", significant_attributes=("RequestCpus",)),
    m.ResourceRequests(submitter="alice@x", requests=(m.ResourceRequest(autocluster_id=1, job_ad=AD, count=3),)),
    m.MatchNotify(claim_id="c1", submitter="alice@x", slot_name="slot1@a", startd_address="startd", slot_ad=AD),
    m.RequestClaim(claim_id="c1", schedd_name="schedd@a", schedd_address="schedd", submitter="alice@x", job_ad=AD),
    m.ClaimReply(claim_id="c1", accepted=False, reason="START is false"),
    m.ActivateClaim(claim_id="c1", job_ad=AD, shadow_address="schedd"),
    m.ClaimKeepAlive(claim_id="c1"),
    m.ReleaseClaim(claim_id="c1"),
    m.StarterUpdate(claim_id="c1", job_id="7.0", update_ad="[ RemoteUserCpu = 1.5 ]"),
    m.JobOutput(claim_id="c1", job_id="7.0", stream="stdout", offset=4096, data=b"line 1\n"),
    m.FetchInput(claim_id="c1", job_id="7.0"),
    m.SendOutput(claim_id="c1", job_id="7.0"),
    m.SendCheckpoint(claim_id="c1", job_id="7.0", number=3),
    m.FetchCheckpoint(claim_id="c1", job_id="7.0"),
    m.CheckpointJobs(ids=("7.0", "8")), m.CheckpointJobsReply(requested=("7.0",), refused={"8.0": "not running"}),
    m.CheckpointClaim(claim_id="c1"),
    m.RelayJobIO(claim_id="c1", job_id="7.0"), m.JobIOBytes(data=b"\x01request"),
    m.SpoolInput(job_id="7.0"),
    m.FetchOutput(job_id="7.0"),
    m.FileEntry(name="indir/sub/a.txt", kind="file", mode=0o644, size=2, mtime_ns=10**18),
    m.FileEntry(name="indir/link", kind="link", target="sub/a.txt"),
    m.FileData(data=b"a\n"),
    m.FileDone(sha256="87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7"),
    m.TransferEnd(files=2, bytes=2),
    m.JobExited(claim_id="c1", job_id="7.0", exit_code=0),
    m.RunCalls(claim_id="c1", calls=(m.LaneCall(job_id="7.1", files={"htc_call.pkl": b"\x80call"}),)),
    m.CallsDone(claim_id="c1", results=(m.LaneResult(job_id="7.1", exit_code=0, files={"htc_result.pkl": b"r"},
                                                     stdout=b"hi\n", started=1.0, finished=1.5),)),
    m.MoreCalls(calls=(m.LaneCall(job_id="7.2", files={"htc_call.pkl": b"\x80next"}),)),
    m.Vacate(slot_names=("slot1@a",)),
    m.Suspend(claim_id="c1"),
    m.Continue(claim_id="c1"),
    m.DrainJobs(how="quick", reason="kernel update"),
    m.CancelDrainJobs(),
    m.Forwarded(host="10.200.0.2", identity="alice@pool", authenticated_by="token"),
    m.Forwarded(host="fe80::1"),
    m.Forwarded(host="10.200.0.2", identity="alice@pool", authenticated_by="token", scopes=("READ",)),
    m.PeekJob(job_id="7.0", names=("stdout", "logs/progress.txt"), offsets=(-1, 100), max_bytes=4096),
    m.PeekReply(chunks=(m.PeekChunk(name="stdout", offset=0, size=3, data=b"hi\n"),)),
    m.OpenSession(session="sweep1", offset=120),
    m.SessionOpened(directory="/s/executor/alice/sweep1", calls="/s/executor/alice/sweep1/calls",
                    log="/s/executor/alice/sweep1/jobs.log"),
    m.PutCallFiles(chunks=(m.FileChunk(name="ab12.call", data=b"\x80\x05"), m.FileChunk(name="big.call", data=b"x",
                                                                                        last=False))),
    m.FollowCalls(jobs={"3.0": "ab12"}),
    m.SubmitCalls(chunks=(m.FileChunk(name="ab12.call", data=b"\x80\x05"),), cluster_ad="[Cmd = \"x\"]",
                  proc_ads=("[HTCCallId = \"ab12\"]",), calls=("ab12",), submission_id="htcx-1"),
    m.SessionNews(offset=0, log=b"005 (003.000.000) ...\n", chunks=(m.FileChunk(name="ab12.result", data=b"r"),)),
    m.CloseSession(remove=True),
    m.NewsTaken(offset=4096),
]


def test_examples_cover_every_message_type():
    assert {type(x) for x in EXAMPLES} == set(m.MESSAGE_TYPES)


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def test_every_message_class_is_decodable():
    assert set(_all_subclasses(m.Message)) == set(m.MESSAGE_TYPES)
    for cls in m.MESSAGE_TYPES:
        assert cls.reply_type is None or cls.reply_type in m.MESSAGE_TYPES


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda x: type(x).__name__)
def test_round_trip(msg):
    assert m.decode(m.encode(msg)) == msg


def test_wire_form_is_a_tagged_map():
    raw = msgspec.msgpack.decode(m.encode(m.QueryAds(ad_type=m.AdType.Startd)))
    assert raw["type"] == "QueryAds"
    assert raw["ad_type"] == "Machine"


def test_messages_are_frozen():
    msg = m.Ping()
    with pytest.raises(AttributeError):
        msg.x = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        m.Ack().detail = "x"  # type: ignore[misc]


def test_construction_converts_to_declared_types():
    q = m.QueryAds(ad_type="Machine", projection=["Name"])  # type: ignore[arg-type]
    assert q.ad_type is m.AdType.Startd
    assert q.projection == ("Name",)


@pytest.mark.parametrize(
    "build, words",
    [
        (lambda: m.Pong(daemon=3, pid=1, started_at=0), "Expected `str`, got `int` - at `$.daemon`"),
        (lambda: m.QueryAds(ad_type=m.AdType.Startd, projection=("not a name",)), "$.projection[0]"),
        (lambda: m.QueryAds(ad_type="Toaster"), "Toaster"),  # type: ignore[arg-type]
        (lambda: m.UpdateAd(ad_type=m.AdType.Any, name="x", ad_text=AD), "only for queries"),
        (lambda: m.UpdateAd(ad_type=m.AdType.Startd, name="x", ad_text="Name = 1"), "starting with '['"),
        (lambda: m.UpdateAd(ad_type=m.AdType.Startd, name="", ad_text=AD), "$.name"),
        (lambda: m.ActOnJobs(action=m.JobAction.Hold), "exactly one of ids or constraint (got none)"),
        (lambda: m.ActOnJobs(action=m.JobAction.Hold, ids=("1",), constraint="true"), "got ids, constraint"),
        (lambda: m.ActOnJobs(action=m.JobAction.Hold, ids=("1.x",)), "$.ids[0]"),
        (lambda: m.EditJobs(ids=("1",), attributes={}), "attributes is empty"),
        (lambda: m.Submit(cluster_ad=AD, proc_ads=()), "at least one job"),
        (lambda: m.ClaimReply(claim_id="c", accepted=False), "needs a reason"),
        (lambda: m.JobExited(claim_id="c", job_id="1.0"), "exactly one of exit_code or exit_signal"),
        (lambda: m.DaemonsOff(daemons=("../etc",)), "$.daemons[0]"),
        (lambda: m.DaemonsOff(how="slow"), "$.how"),  # type: ignore[arg-type]
        (lambda: m.MasterStatus(master_pid=-1), "$.master_pid"),
    ],
)
def test_bad_construction_is_a_usage_error_naming_the_field(build, words):
    with pytest.raises(MessageInvalid) as info:
        build()
    assert isinstance(info.value, UsageError)
    assert words in str(info.value)


def test_encode_refuses_non_messages():
    with pytest.raises(UsageError, match="not a wire message"):
        m.encode({"type": "Ping"})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="not a wire message"):
        m.encode(m.ResourceRequest(autocluster_id=1, job_ad="[ ]", count=1))  # a Record, not a Message


def test_encode_takes_every_message_type_and_their_subclasses():
    class Later(m.Ping, frozen=True):
        """A subclass, with nothing of its own: it passes encode's test as its class does."""

    for cls in m.MESSAGE_TYPES:
        if not cls.__struct_fields__:
            assert m.decode(m.encode(cls())) == cls()
    assert msgspec.msgpack.decode(m.encode(Later())) == {"type": "Later"}  # (its own tag: no peer decodes it)
    assert m.decode(m.encode(m.MatchNotify(claim_id="c", submitter="s", slot_name="x", startd_address="a",
                                           slot_ad="[ ]"))).claim_id == "c"


@pytest.mark.parametrize(
    "raw, words",
    [
        (b"", "truncated"),
        (b"\xc1", "malformed"),
        (msgspec.msgpack.encode([1, 2]), "invalid message"),
        (msgspec.msgpack.encode({"type": "Nope"}), "Invalid value 'Nope'"),
        (msgspec.msgpack.encode({"type": "Ping", "extra": 1}), "unknown field `extra`"),
        (msgspec.msgpack.encode({"type": "ActOnJobs", "action": "Hold"}), "exactly one of ids or constraint"),
        (msgspec.msgpack.encode({"type": "Pong", "daemon": "x", "pid": -4, "started_at": 0}), "$.pid"),
        (msgspec.msgpack.encode({"type": "MasterStatus", "master_pid": 1,
                                 "daemons": [{"name": "C", "state": "", "pid": 1}]}), "$.daemons[0].state"),
    ],
)
def test_decode_refuses_malformed_input_as_peer_error(raw, words):
    with pytest.raises(WireError) as info:
        m.decode(raw)
    assert isinstance(info.value, PeerError)
    assert words in str(info.value)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_decode_of_garbage_is_a_message_or_wire_error(raw):
    try:
        msg = m.decode(raw)
    except WireError:
        return
    assert isinstance(msg, m.MESSAGE_TYPES)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(EXAMPLES), st.data())
def test_decode_of_mutated_messages_never_crashes(msg, data):
    raw = bytearray(m.encode(msg))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    try:
        m.decode(bytes(raw))
    except WireError:
        pass


# --- framing (sans-IO) ------------------------------------------------------------------


def test_frame_decoder_reassembles_at_every_split():
    stream = b"".join(frame(m.encode(x)) for x in EXAMPLES[:5])
    for cut in range(len(stream) + 1):
        dec = FrameDecoder()
        bodies = dec.feed(stream[:cut]) + dec.feed(stream[cut:])
        assert [m.decode(b) for b in bodies] == EXAMPLES[:5]
        assert dec.pending == 0
        dec.close()


def test_frame_decoder_refuses_oversize_before_the_body_arrives():
    dec = FrameDecoder(max_size=100)
    with pytest.raises(FrameTooLarge, match="101-byte frame, above the limit of 100"):
        dec.feed((101).to_bytes(4, "big"))


def test_frame_refuses_to_send_oversize_bodies():
    with pytest.raises(FrameTooLarge, match="limit is 10 bytes"):
        frame(b"x" * 11, max_size=10)


def test_frame_decoder_reports_truncated_stream():
    dec = FrameDecoder()
    assert dec.feed(frame(b"abc")[:5]) == []
    with pytest.raises(WireError, match="inside a frame"):
        dec.close()

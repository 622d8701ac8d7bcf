"""Call lanes on the execute side: the wire adapter's checks (no event loop), then a real startd
running a real lane (``python -m htc.executors.lane``, forked by the starter zygote, as the
slot user when we are root) that takes calls by RunCalls and answers CallsDone."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

import msgspec
import pytest

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.client import send_command_async
from htc.daemons.startd.events import QueueCalls, RunStarter
from htc.wire import callfile as cf
from htc.wire.lane_frames import CHANNEL_ENV
from htc.executors.serialize import dumps_call, loads, python_version
from htc.executors.worker import EXIT_EXCEPTION, EXIT_VALUE
from htc.wire import messages as m
from htc.wire.errors import RemoteError
from tests.service.test_startd_service import (
    T0, Peer, adapter, claim_static_slot, settings, submit_job, wait_for_ads, with_pool,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from executor_pool import execute_python  # noqa: E402

JOB = '[ ClusterId = 3; ProcId = 0; Cmd = "/usr/bin/python3"; Arguments = "-m htc.executors.lane"; RequestCpus = 1 ]'


def call_file(fn, *args, call_id: str = "c") -> bytes:
    pickled = dumps_call(fn, args, {})
    return cf.pack_call(cf.CallHeader(call_id=call_id, function=getattr(fn, "__qualname__", "?"),
                                      python=python_version(), packages=pickled.packages), pickled.payload)


def value_of(result: m.LaneResult):
    header, payload = cf.unpack_result(result.files[cf.RESULT_FILE])
    return loads(payload, header.serializer)


# --------------------------------------------------------------------------- the relay alone


def test_results_wait_for_company_only_while_the_lane_has_a_call_queued(monkeypatch):
    """The relay holds a result (up to GATHER) while its lane has another call queued behind
    the running one, so one CallsDone carries several; with nothing queued it goes at once."""
    import socket

    from htc.daemons.startd import lanes as startd_lanes
    from htc.daemons.startd.lanes import LaneRelay
    from htc.wire.lane_frames import ResultFrame, frame

    gather = 0.5  # long, so that a busy test machine cannot make the test flaky
    monkeypatch.setattr(startd_lanes, "GATHER", gather)

    async def scenario():
        batches: list[tuple[float, list[str]]] = []
        loop = asyncio.get_running_loop()

        async def send(results):
            batches.append((loop.time(), [r.job_id for r in results]))
            return True

        ours, theirs = socket.socketpair()
        relay = LaneRelay("test", send)
        relay.queue([m.LaneCall(job_id=f"1.{i}", files={cf.CALL_FILE: b"x"}) for i in range(3)])
        await relay.attach(ours)
        done = frame(msgspec.msgpack.encode(ResultFrame(0, {}, b"", b"", 1.0, 1.0, 0.0, 0.0)))
        start = loop.time()
        theirs.sendall(done)  # 1.0 ends; 1.1 runs and 1.2 waits: 1.0's result waits too
        await asyncio.sleep(0.05)
        assert batches == []
        theirs.sendall(done)  # 1.1 ends; nothing waits behind 1.2 now: both go, in one CallsDone
        while not batches:
            await asyncio.sleep(0.001)
        first = batches[-1]
        theirs.sendall(done)  # 1.2 ends with nothing behind it: at once
        while len(batches) < 2:
            await asyncio.sleep(0.001)
        relay.close()
        theirs.close()
        return start, batches, first

    start, batches, first = asyncio.run(scenario())
    assert [ids for _, ids in batches] == [["1.0", "1.1"], ["1.2"]]
    assert first[0] - start < gather  # sent when 1.1 ended, not when the gathering time ran out


# --------------------------------------------------------------------------- the adapter alone


def test_run_calls_need_a_running_lane_and_plain_file_names(tmp_path):
    daemon, _ = adapter(tmp_path)
    claim_id = claim_static_slot(daemon, T0 + 1)
    good = m.LaneCall(job_id="3.1", files={cf.CALL_FILE: b"x"})
    out = daemon.handle(c.Received(m.RunCalls(claim_id=claim_id, calls=(good,)), conn_id=2), T0 + 2)
    assert out[-1].msg.code == "not_found" and "runs no call lane" in out[-1].msg.message
    out = daemon.handle(c.Received(m.RunCalls(claim_id="slot1@node1.test#9#ff", calls=(good,)), conn_id=3), T0 + 2)
    assert out[-1].msg.code == "not_found" and "holds no claim" in out[-1].msg.message
    # An ordinary job is no lane either.
    plain = m.ActivateClaim(claim_id=claim_id, job_ad=JOB, shadow_address="schedd")
    out = daemon.handle(c.Received(plain, conn_id=4), T0 + 3)
    (run,) = [a for a in out if isinstance(a, RunStarter)]
    assert not run.lane
    out = daemon.handle(c.Received(m.RunCalls(claim_id=claim_id, calls=(good,)), conn_id=5), T0 + 3)
    assert out[-1].msg.code == "not_found"


def test_a_lane_activation_reaches_the_starter_and_its_calls_are_checked_then_queued(tmp_path):
    daemon, _ = adapter(tmp_path)
    claim_id = claim_static_slot(daemon, T0 + 1)
    out = daemon.handle(c.Received(m.ActivateClaim(claim_id=claim_id, job_ad=JOB, shadow_address="schedd",
                                                   lane=True), conn_id=2), T0 + 2)
    (run,) = [a for a in out if isinstance(a, RunStarter)]
    assert run.lane and run.claim_id == claim_id
    for files, why in (({cf.CALL_FILE: b"x", "../up": b""}, "plain names"), ({cf.CALL_FILE: b"x", "..": b""}, "plain"),
                       ({"input.txt": b""}, "the call file is missing from the call"),
                       ({cf.CALL_FILE: b"x", "4d-1.call": b"x"}, "the call holds 2 call files"),
                       ({cf.CALL_FILE: b"x" * (m.MAX_LANE_CALL_BYTES + 1)}, "more than")):
        calls = (m.LaneCall(job_id="3.1", files={cf.CALL_FILE: b"ok"}), m.LaneCall(job_id="3.2", files=files))
        out = daemon.handle(c.Received(m.RunCalls(claim_id=claim_id, calls=calls), conn_id=3), T0 + 3)
        assert not [a for a in out if isinstance(a, QueueCalls)]  # all or nothing
        assert out[-1].msg.code == "bad_request" and why in out[-1].msg.message and "3.2" in out[-1].msg.message
    calls = (m.LaneCall(job_id="3.1", files={cf.CALL_FILE: b"ok", "data.csv": b"1,2"}),)
    out = daemon.handle(c.Received(m.RunCalls(claim_id=claim_id, calls=calls), conn_id=4), T0 + 4)
    assert out == [QueueCalls(claim_id, calls), c.Reply(4, m.Ack(detail="1 call(s) queued"))]


# --------------------------------------------------------------------------- a real lane


@pytest.fixture(scope="module")
def lane_python():
    """An interpreter (and PYTHONPATH) the slot user can run htc with."""
    root = Path(tempfile.mkdtemp(prefix="htc-lane-py-", dir="/tmp"))
    root.chmod(0o755)
    try:
        yield execute_python(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def lane_job(iwd: Path, python: str, env: dict[str, str], cluster: int) -> str:
    environment = " ".join(f"{k}={v}" for k, v in env.items())
    return submit_job(iwd, f"executable = {python}\ntransfer_executable = false\narguments = -m htc.executors.worker\n"
                           f"environment = \"{environment}\"\nshould_transfer_files = YES\noutput = out.txt\n"
                           f"error = err.txt\ntransfer_input_files = {cf.CALL_FILE}", cluster=cluster)


async def claim_lane(t, job: str, shadow: str = "schedd") -> str:
    (slot,) = await wait_for_ads(t, "PartitionableSlot")
    claim = await send_command_async("startd", m.RequestClaim(
        claim_id=slot["ClaimId"], schedd_name="schedd@test", schedd_address=shadow, submitter="alice@test",
        job_ad=job), transport=t)
    assert claim.accepted
    # The schedd changes the first call's Arguments to run the lane program.
    ad = ClassAd(job)
    ad["Arguments"] = "-m htc.executors.lane"
    ack = await send_command_async("startd", m.ActivateClaim(claim_id=claim.claim_id, job_ad=str(ad),
                                                             shadow_address=shadow, lane=True), transport=t)
    assert ack == m.Ack(detail=f"starting job {ad['ClusterId']}.0")
    return claim.claim_id


async def results(peer: Peer, count: int, timeout: float = 30.0) -> list[m.LaneResult]:
    async with asyncio.timeout(timeout):
        while True:
            got = [r for msg in peer.got if isinstance(msg, m.CallsDone) for r in msg.results]
            if len(got) >= count:
                return got
            peer.arrived.clear()
            await peer.arrived.wait()


def shout(text):
    print("stdout of", text)
    os.write(2, f"stderr of {text}\n".encode())
    return (os.getuid(), Path.cwd().name, sorted(os.listdir(".")), text.upper(), os.environ.get(CHANNEL_ENV))


def fail(text):
    raise KeyError(text)


def first_call_iwd(home, lane_python, arg: str, cluster: int):
    """The first call's Iwd (holding its call file, which the lane must leave alone) and the lane's ad."""
    python, env = lane_python
    iwd = home / "iwd"
    iwd.mkdir()
    iwd.chmod(0o777)
    (iwd / cf.CALL_FILE).write_bytes(call_file(shout, arg))
    return iwd, lane_job(iwd, python, env, cluster=cluster)


def test_a_lane_runs_calls_from_run_calls_and_reports_them_before_its_exit(home, lane_python):
    iwd, job = first_call_iwd(home, lane_python, "first", cluster=21)
    peer = Peer()

    async def body(t, startd):
        claim_id = await claim_lane(t, job)
        # At once: the lane may not be spawned yet, the calls wait for it.
        ack = await send_command_async("startd", m.RunCalls(claim_id=claim_id, calls=(
            m.LaneCall(job_id="21.0", files={cf.CALL_FILE: call_file(shout, "first"), "in.txt": b"input"}),
            m.LaneCall(job_id="21.1", files={cf.CALL_FILE: call_file(fail, "second")}))), transport=t)
        first = await results(peer, 2)
        await send_command_async("startd", m.RunCalls(claim_id=claim_id, calls=(
            m.LaneCall(job_id="21.2", files={cf.CALL_FILE: call_file(shout, "third")}),)), transport=t)
        third = await results(peer, 3)
        with pytest.raises(RemoteError, match="plain names"):
            await send_command_async("startd", m.RunCalls(claim_id=claim_id, calls=(
                m.LaneCall(job_id="21.3", files={cf.CALL_FILE: b"", "a/b": b""}),)), transport=t)
        sandboxes = list((home / "execute").iterdir())
        await send_command_async("startd", m.Vacate(claim_id=claim_id), transport=t)
        exited = await peer.wait_for(m.JobExited)
        with pytest.raises(RemoteError, match="holds no claim"):
            await send_command_async("startd", m.RunCalls(claim_id=claim_id, calls=(
                m.LaneCall(job_id="21.4", files={cf.CALL_FILE: b""}),)), transport=t)
        return claim_id, ack, first, third, sandboxes, exited

    claim_id, ack, first, third, sandboxes, exited = asyncio.run(
        with_pool(home, settings(home), body, {"schedd": peer}))
    assert ack == m.Ack(detail="2 call(s) queued")
    one, two, three = third
    assert [r.job_id for r in third] == ["21.0", "21.1", "21.2"]
    assert (one.exit_code, two.exit_code, three.exit_code) == (EXIT_VALUE, EXIT_EXCEPTION, EXIT_VALUE)
    uid, cwd, listing, text, channel = value_of(one)
    # A root startd runs alice's calls as the slot's account: her job's UID_DOMAIN ("test") is not
    # this startd's, so her Owner is not trusted (htc.daemons.run_as).
    assert uid == (os.getuid() if os.geteuid() else __import__("pwd").getpwnam("htc-slot1").pw_uid)
    assert (cwd, listing, text, channel) == ("htc_lane_call", ["in.txt"], "FIRST", "0")
    assert one.stdout == b"stdout of first\n" and one.stderr == b"stderr of first\n"
    assert one.started <= one.finished and set(one.files) == {cf.RESULT_FILE}
    assert isinstance(value_of(two), KeyError)
    assert value_of(three)[3] == "THIRD" and three.stdout == b"stdout of third\n"
    assert len(sandboxes) == 1
    # The lane ends when vacated, reported for the job it was activated with, after all its results.
    assert exited.claim_id == claim_id and exited.job_id == "21.0" and exited.vacated
    kinds = [type(msg) for msg in peer.got if isinstance(msg, (m.CallsDone, m.JobExited))]
    assert kinds[-1] is m.JobExited and m.JobExited not in kinds[:-1]
    assert list((home / "execute").iterdir()) == []  # sandbox gone
    # Nothing came back into the first call's Iwd: its call file only.
    assert sorted(p.name for p in iwd.iterdir()) == [cf.CALL_FILE]
    log = (home / "StartLog").read_text()
    assert "ready for htc.executors.lane" in log and "fork+exec instead" not in log  # the lane zygote forked it


def test_a_call_that_kills_the_lane_ends_it_after_the_results_before_it(home, lane_python):
    iwd, job = first_call_iwd(home, lane_python, "x", cluster=22)
    peer = Peer()

    async def body(t, startd):
        claim_id = await claim_lane(t, job)
        await send_command_async("startd", m.RunCalls(claim_id=claim_id, calls=(
            m.LaneCall(job_id="22.0", files={cf.CALL_FILE: call_file(shout, "ok")}),
            m.LaneCall(job_id="22.1", files={cf.CALL_FILE: call_file(os._exit, 5)}),
            m.LaneCall(job_id="22.2", files={cf.CALL_FILE: call_file(shout, "never")}))), transport=t)
        exited = await peer.wait_for(m.JobExited, timeout=30)
        return exited

    exited = asyncio.run(with_pool(home, settings(home), body, {"schedd": peer}))
    done = [r for msg in peer.got if isinstance(msg, m.CallsDone) for r in msg.results]
    assert [r.job_id for r in done] == ["22.0"]
    assert (exited.job_id, exited.exit_code, exited.vacated) == ("22.0", 5, False)
    assert peer.got.index(exited) > max(i for i, msg in enumerate(peer.got) if isinstance(msg, m.CallsDone))
    assert list((home / "execute").iterdir()) == []
    assert "2 call(s) not run to the end: 22.1, 22.2" in (home / "StartLog").read_text()


def test_a_lane_started_by_fork_and_exec_serves_its_socket_and_ends_when_it_closes(home, lane_python):
    """The starter alone, without zygotes: the channel is the job's stdin all the same."""
    from htc.daemons.starter.service import Starter, StarterSettings
    from htc.wire.lane_frames import HEADER, CallFrame, ResultFrame, frame

    python, env = lane_python
    iwd = home / "iwd"
    iwd.mkdir()
    iwd.chmod(0o777)
    ad = ClassAd(lane_job(iwd, python, env, cluster=23))
    ad["Arguments"] = "-m htc.executors.lane"
    ad["TransferInput"] = "no-such-file"  # a lane brings nothing in: this is never looked for
    job = {key: ad.eval(key) for key in ad}

    async def go():
        starter = Starter(job, home / "execute", StarterSettings(use_exec_zygote=False), lane=True)
        await starter.start()
        assert starter.zygote_pid is None and starter.lane_socket is not None
        reader, writer = await asyncio.open_unix_connection(sock=starter.lane_socket)
        writer.write(frame(msgspec.msgpack.encode(CallFrame("23.0", {cf.CALL_FILE: call_file(shout, "exec")}))))
        size = HEADER.unpack(await reader.readexactly(HEADER.size))[0]
        result = msgspec.msgpack.decode(await reader.readexactly(size), type=ResultFrame)
        writer.close()  # the lane reads end-of-file and leaves
        return result, await asyncio.wait_for(starter.wait(), 30)

    result, record = asyncio.run(go())
    assert result.exit_code == EXIT_VALUE and result.stdout == b"stdout of exec\n"
    header, payload = cf.unpack_result(result.files[cf.RESULT_FILE])
    assert loads(payload, header.serializer)[3] == "EXEC"
    assert (record.exit_code, record.vacated, record.output_files) == (0, False, ())
    assert list((home / "execute").iterdir()) == [] and sorted(p.name for p in iwd.iterdir()) == []


class FeedingPeer(Peer):
    """A shadow that answers each CallsDone with the lane's next call, twice over (a call the
    lane holds must not run twice), and last with a call that already ran (``max_retries``: it
    must run again)."""

    def __init__(self, calls: list[m.LaneCall]):
        super().__init__()
        self.todo = list(calls)

    async def serve(self, conn):
        while True:
            msg = await conn.recv(timeout=60)
            self.got.append(msg)
            self.arrived.set()
            if isinstance(msg, m.CallsDone):
                more = (self.todo.pop(0),) * 2 if self.todo else ()
                await conn.send(m.MoreCalls(calls=more))
            else:
                await conn.send(m.Ack())


def test_the_answer_to_calls_done_feeds_the_lane_and_runs_a_call_once_per_run(home, lane_python):
    iwd, job = first_call_iwd(home, lane_python, "first", cluster=23)
    again = m.LaneCall(job_id="23.1", files={cf.CALL_FILE: call_file(shout, "again")})
    peer = FeedingPeer([m.LaneCall(job_id=f"23.{i}", files={cf.CALL_FILE: call_file(shout, f"n{i}")})
                        for i in range(1, 4)] + [again])

    async def body(t, startd):
        claim_id = await claim_lane(t, job)
        await send_command_async("startd", m.RunCalls(claim_id=claim_id, calls=(
            m.LaneCall(job_id="23.0", files={cf.CALL_FILE: call_file(shout, "n0")}),)), transport=t)
        await results(peer, 5)
        await asyncio.sleep(0.5)  # room for a call run twice to show up
        got = await results(peer, 5)
        await send_command_async("startd", m.Vacate(claim_id=claim_id), transport=t)
        await peer.wait_for(m.JobExited)
        return got

    got = asyncio.run(with_pool(home, settings(home), body, {"schedd": peer}))
    assert [r.job_id for r in got] == ["23.0", "23.1", "23.2", "23.3", "23.1"]  # once per run, in order
    assert [value_of(r)[3] for r in got] == ["N0", "N1", "N2", "N3", "AGAIN"]

"""The startd's lane relay alone: how a result frame becomes a LaneResult, and how a batch of
calls is written to the lane's socket (in order, in one write)."""

from __future__ import annotations

import asyncio
import math
import socket

import msgspec
import pytest

from htc.daemons.startd.lanes import LaneRelay, lane_result
from htc.wire import messages as m
from htc.wire.errors import MessageInvalid
from htc.wire.lane_frames import HEADER, CallFrame, ResultFrame


def result_frame(**changes) -> ResultFrame:
    fields = dict(exit_code=0, files={"htc_result.pkl": b"\x00" * 100}, stdout=b"out", stderr=b"",
                  started=10.0, finished=11.0, user_cpu=0.5, sys_cpu=0.25)
    return ResultFrame(**{**fields, **changes})


def test_a_sound_frame_becomes_the_same_result_the_checked_way_builds():
    got = lane_result("3.7", result_frame())
    checked = m.LaneResult(job_id="3.7", exit_code=0, files={"htc_result.pkl": b"\x00" * 100}, stdout=b"out",
                           started=10.0, finished=11.0, user_cpu=0.5, sys_cpu=0.25)
    assert got == checked
    assert msgspec.msgpack.encode(got) == msgspec.msgpack.encode(checked)


def test_times_below_zero_are_taken_as_zero():
    got = lane_result("1.0", result_frame(started=-5.0, user_cpu=-0.1))
    assert got.started == 0.0 and got.user_cpu == 0.0 and got.finished == 11.0


@pytest.mark.parametrize("changes", [dict(finished=math.nan), dict(started=math.inf), dict(sys_cpu=2e12),
                                     dict(exit_code=2**63), dict(files={"": b"x"})])
def test_a_frame_the_checks_refuse_is_refused_as_before(changes):
    """What the fast path does not take goes through the checked constructor, which refuses it
    (the relay then closes the lane's channel as broken)."""
    with pytest.raises(MessageInvalid):
        lane_result("1.0", result_frame(**changes))


def test_a_batch_of_calls_is_written_once_in_order_and_a_held_call_not_again():
    async def scenario() -> tuple[list[str], int]:
        ours, theirs = socket.socketpair()
        theirs.setblocking(False)

        async def send(_results):
            return True

        relay = LaneRelay("test", send)
        await relay.attach(ours)
        writes = []
        real_write = relay._writer.write
        relay._writer.write = lambda data: (writes.append(len(data)), real_write(data))[1]
        relay.queue([m.LaneCall(job_id=f"1.{i}", files={"htc_call.pkl": b"c" * i}) for i in range(4)])
        relay.queue([m.LaneCall(job_id="1.2", files={"htc_call.pkl": b"cc"})])  # held already: not again
        await asyncio.sleep(0)
        data = b""
        loop = asyncio.get_running_loop()
        while len(data) < sum(writes):
            data += await loop.sock_recv(theirs, 1 << 16)
        relay.close()
        theirs.close()
        ids = []
        while data:
            (size,) = HEADER.unpack_from(data)
            ids.append(msgspec.msgpack.decode(data[HEADER.size:HEADER.size + size], type=CallFrame).job_id)
            data = data[HEADER.size + size:]
        return ids, len(writes)

    ids, writes = asyncio.run(scenario())
    assert ids == ["1.0", "1.1", "1.2", "1.3"]
    assert writes == 1


def _result_bytes(code: int) -> bytes:
    from htc.wire.lane_frames import frame

    return frame(msgspec.msgpack.encode(ResultFrame(code, {}, b"", b"", 1.0, 2.0, 0.0, 0.0)))


def test_results_cut_anywhere_arrive_whole_in_order_and_finish_delivers_them():
    """Frames reach the relay in pieces of any size (a header cut in two, two frames in one
    read); each becomes its call's result, and finish() after the lane's end delivers them all."""
    async def scenario() -> list[tuple[str, int]]:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        theirs.setblocking(False)
        delivered: list[tuple[str, int]] = []

        async def send(results):
            delivered.extend((r.job_id, r.exit_code) for r in results)
            return True

        relay = LaneRelay("test", send)
        relay.queue([m.LaneCall(job_id=f"1.{i}", files={"htc_call.pkl": b"c"}) for i in range(4)])
        await relay.attach(ours)
        data = b"".join(_result_bytes(code) for code in (0, 1, 3, 0))
        for piece in (data[:2], data[2:9], data[9:len(data) - 3], data[len(data) - 3:]):
            await loop.sock_sendall(theirs, piece)
            await asyncio.sleep(0.01)
        theirs.shutdown(socket.SHUT_WR)  # the lane ended
        await relay.finish(deadline=30.0)
        theirs.close()
        return delivered

    assert asyncio.run(scenario()) == [("1.0", 0), ("1.1", 1), ("1.2", 3), ("1.3", 0)]


def test_a_result_with_no_call_outstanding_closes_the_lanes_channel():
    async def scenario() -> bytes:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        theirs.setblocking(False)

        async def send(_results):
            raise AssertionError("nothing is sent")

        relay = LaneRelay("test", send)
        await relay.attach(ours)
        await loop.sock_sendall(theirs, _result_bytes(0))
        got = await asyncio.wait_for(loop.sock_recv(theirs, 10), 30.0)  # end of file: the relay closed it
        await relay.finish(deadline=30.0)
        theirs.close()
        return got

    assert asyncio.run(scenario()) == b""


def test_ready_results_go_once_they_are_as_many_as_the_calls_still_queued(monkeypatch):
    """A lane holding 8 calls: 3 results wait (5 calls still queued), the 4th sends all four
    (4 queued: the schedd ends them and answers while the lane runs those), long before the
    gathering time runs out -- the lane and the schedd do not take turns."""
    from htc.daemons.startd import lanes as startd_lanes

    monkeypatch.setattr(startd_lanes, "GATHER", 60.0)  # the rule, not the time, must send them

    async def scenario() -> tuple[list[list[str]], list[list[str]]]:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        theirs.setblocking(False)
        batches: list[list[str]] = []

        async def send(results):
            batches.append([r.job_id for r in results])
            return True

        relay = LaneRelay("test", send)
        relay.queue([m.LaneCall(job_id=f"1.{i}", files={"htc_call.pkl": b"c"}) for i in range(8)])
        await relay.attach(ours)
        await loop.sock_sendall(theirs, b"".join(_result_bytes(0) for _ in range(3)))
        await asyncio.sleep(0.1)
        held = [list(b) for b in batches]
        await loop.sock_sendall(theirs, _result_bytes(0))
        for _ in range(1000):  # up to 10 s
            if batches:
                break
            await asyncio.sleep(0.01)
        relay.close()
        theirs.close()
        return held, batches

    held, batches = asyncio.run(scenario())
    assert held == []
    assert batches == [["1.0", "1.1", "1.2", "1.3"]]

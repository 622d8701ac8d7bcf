"""The client's side of an executor session (htc.executors.remote.SessionChannel): how replies
and pushed news are matched on the session's channel, without a pool."""

from __future__ import annotations

import asyncio

import pytest

from htc.executors.remote import SessionChannel
from htc.wire import messages as m


class ScriptedConn:
    """Hands out the given messages, then ends the pump as a cancelled read would."""

    def __init__(self, messages):
        self.messages = list(messages)

    async def recv(self, timeout=None):
        if not self.messages:
            raise asyncio.CancelledError
        return self.messages.pop(0)


def test_a_late_reply_to_a_request_that_timed_out_is_dropped_not_given_to_the_next(tmp_path):
    async def run():
        channel = SessionChannel(None, None, None, tmp_path / "jobs.log", 1.0)
        channel._ready = asyncio.Event()
        channel._ready.set()
        channel._conn = ScriptedConn([m.Ack(detail="late"), m.SubmitReply(cluster_id=3, first_proc=0, num_procs=1)])
        timed_out, waiting = asyncio.get_running_loop().create_future(), asyncio.get_running_loop().create_future()
        timed_out.cancel()  # as asyncio.wait_for leaves it
        channel._waiting.extend([timed_out, waiting])
        with pytest.raises(asyncio.CancelledError):
            await channel._run()
        return waiting.result()

    assert asyncio.run(run()) == m.SubmitReply(cluster_id=3, first_proc=0, num_procs=1)


class SlowSendConn:
    """A send that yields (a full SSH window) while the reply comes in meanwhile."""

    def __init__(self, channel: SessionChannel, reply: m.Message):
        self.channel = channel
        self.reply = reply
        self.replies: asyncio.Queue = asyncio.Queue()

    async def send(self, msg):
        self.replies.put_nowait(self.reply)
        for _ in range(5):
            await asyncio.sleep(0)  # the pump runs: the reply arrives before send returns

    async def recv(self, timeout=None):
        return await self.replies.get()


def test_a_reply_that_comes_while_its_request_is_still_being_sent_is_its_own(tmp_path):
    async def run():
        channel = SessionChannel(None, None, None, tmp_path / "jobs.log", 1.0)
        channel._ready = asyncio.Event()
        channel._ready.set()
        reply = m.SubmitReply(cluster_id=3, first_proc=0, num_procs=1)
        channel._conn = SlowSendConn(channel, reply)
        pump = asyncio.get_running_loop().create_task(channel._run())
        try:
            return await channel._request(m.CloseSession(remove=False), timeout=5.0)
        finally:
            pump.cancel()

    assert asyncio.run(run()) == m.SubmitReply(cluster_id=3, first_proc=0, num_procs=1)


class LoopbackConn:
    """Answers each request sent with ``send_nowait`` through the pump, noting the loop's tasks then."""

    def __init__(self, reply: m.Message, fail: bool = False):
        self.reply = reply
        self.fail = fail
        self.replies: asyncio.Queue = asyncio.Queue()
        self.tasks_at_send: list[int] = []

    def send_nowait(self, msg):
        if self.fail:
            raise ConnectionResetError("SSH channel closed")
        self.tasks_at_send.append(len(asyncio.all_tasks()))
        self.replies.put_nowait(self.reply)

    async def recv(self, timeout=None):
        return await self.replies.get()

    async def aclose(self):
        return None


def _channel_on_io_thread(tmp_path, conn):
    from htc.executors.schedd_link import IOThread

    io = IOThread("test-session-io")
    channel = SessionChannel(None, io, None, tmp_path / "jobs.log", 1.0)
    channel._conn = conn

    async def start():
        channel._ready = asyncio.Event()
        channel._ready.set()
        channel._pump = asyncio.get_running_loop().create_task(channel._run())

    io.call(start(), 5)
    return io, channel


def test_a_request_from_another_thread_is_sent_and_answered_without_a_task_of_its_own(tmp_path):
    reply = m.SubmitReply(cluster_id=3, first_proc=0, num_procs=1)
    conn = LoopbackConn(reply)
    io, channel = _channel_on_io_thread(tmp_path, conn)
    try:
        assert [channel._call(m.CloseSession(remove=False), timeout=10) for _ in range(3)] == [reply] * 3
        assert conn.tasks_at_send == [1, 1, 1]  # only the pump: the request ran in a plain callback
        conn.reply = m.ErrorReply(code="denied", message="not yours")
        from htc.wire.errors import RemoteError

        with pytest.raises(RemoteError, match="not yours"):
            channel._call(m.CloseSession(remove=False), timeout=10)
    finally:
        io.call(channel._stop(), 5)
        io.close()


def test_a_request_the_broken_channel_could_not_send_fails_as_a_lost_schedd_to_be_sent_again(tmp_path):
    from htc.executors.errors import ScheddLost

    io, channel = _channel_on_io_thread(tmp_path, LoopbackConn(m.Ack(detail=""), fail=True))
    try:
        with pytest.raises(ScheddLost, match="broke"):
            channel._call(m.CloseSession(remove=False), timeout=10)
        assert not channel._waiting
    finally:
        io.call(channel._stop(), 5)
        io.close()

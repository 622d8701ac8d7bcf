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

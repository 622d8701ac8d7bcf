"""A connect that gets no answer (a cut link) is told apart from one that nobody listens to:
the first is HostSilent (code ``timeout``, so a schedd waits the job lease), the second plain
DaemonUnreachable (``unreachable``: the daemons there are gone)."""

from __future__ import annotations

import asyncio
import errno
import socket

import pytest

from htc.daemons.calls import UNANSWERED
from htc.wire.errors import DaemonUnreachable, HostSilent
from htc.wire.ssh_client import SshOptions, SshTransport, silent_host


@pytest.mark.parametrize("exc", [TimeoutError(), OSError(errno.EHOSTUNREACH, "No route to host"),
                                 OSError(errno.ENETUNREACH, "Network is unreachable"),
                                 OSError(errno.ETIMEDOUT, "Connection timed out"),
                                 OSError("Multiple exceptions: [Errno 113] Connect call failed ('10.200.0.3', 9618)")])
def test_silence_is_a_silent_host(exc):
    assert silent_host(exc)


@pytest.mark.parametrize("exc", [ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
                                 ConnectionResetError(errno.ECONNRESET, "reset"), ValueError("bad")])
def test_an_answer_is_not(exc):
    assert not silent_host(exc)


def test_host_silent_is_daemon_unreachable_with_an_unanswered_timeout_code():
    err = HostSilent("x")
    assert isinstance(err, DaemonUnreachable) and err.code == "timeout" and err.code in UNANSWERED


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_port_nobody_listens_on_is_unreachable_not_silent():
    transport = SshTransport(lambda: None, SshOptions(connect_timeout=0.5))

    async def go():
        try:
            await transport.open_connection(f"<127.0.0.1:{_free_port()}?sock=startd>", timeout=2)
        finally:
            await transport.aclose()

    with pytest.raises(DaemonUnreachable) as info:
        asyncio.run(go())
    assert not isinstance(info.value, HostSilent) and info.value.code == "unreachable"

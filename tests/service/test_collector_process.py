"""A collector run alone by ``python -m htc.daemons collector``: signals, config, exit statuses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from htc.daemons import __main__ as entry
from htc.client import ping, query_collector, send_command, send_command_async
from htc.errors import UsageError
from htc.wire import messages as m
from htc.wire.errors import DaemonUnreachable
from htc.wire.transport import UnixTransport

pytestmark = pytest.mark.slow


def start_collector(home: Path, **knobs) -> subprocess.Popen:
    env = dict(os.environ, HTC_HOME=str(home), **{f"_HTC_{k}": v for k, v in knobs.items()})
    return subprocess.Popen([sys.executable, "-m", "htc.daemons", "collector"], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_serving(transport, proc, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return ping("collector", transport=transport)
        except DaemonUnreachable:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"collector did not start: {proc.communicate()}")
            time.sleep(0.05)


def test_collector_alone_serves_reconfigures_and_stops_on_signals(home):
    proc = start_collector(home, COLLECTOR_NAME="test pool")
    try:
        t = UnixTransport(home / "sockets")
        assert wait_serving(t, proc).pid == proc.pid
        send_command("collector", m.UpdateAd(ad_type=m.AdType.Startd, name="slot1@x",
                                             ad_text="[ Cpus = 1 ]"), transport=t)
        assert [ad["Name"] for ad in query_collector(transport=t)] == ["test pool", "slot1@x"]

        proc.send_signal(signal.SIGHUP)
        log = home / "log" / "CollectorLog"
        deadline = time.monotonic() + 10
        while "SIGHUP: configuration re-read" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)

        proc.send_signal(signal.SIGQUIT)
        assert proc.wait(timeout=10) == 0
        assert "got SIGQUIT: fast shutdown" in log.read_text()
        assert not (home / "sockets" / "collector.sock").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=5)


def test_broken_config_is_exit_status_4_with_the_reason(home):
    proc = start_collector(home, CLASSAD_LIFETIME="soon")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == entry.DAEMON_NO_RESTART
    assert "htc collector:" in err and "CLASSAD_LIFETIME" in err


def test_a_daemon_not_in_this_build_exits_4(home, monkeypatch, capsys):
    monkeypatch.setitem(entry.DAEMON_MODULES, "schedd", "htc.daemons.no_such_daemon")
    assert entry.main(["schedd", "-home", str(home)]) == entry.DAEMON_NO_RESTART
    assert "the schedd is not in this build of htc yet" in capsys.readouterr().err


def test_blocking_client_calls_refuse_to_run_inside_an_event_loop(home):
    import asyncio

    async def inside():
        with pytest.raises(UsageError, match="await its \\*_async version"):
            send_command("collector", m.Ping(), transport=UnixTransport(home))
        with pytest.raises(DaemonUnreachable):
            await send_command_async("collector", m.Ping(), transport=UnixTransport(home))

    asyncio.run(inside())

"""Configuration others can change is not obeyed; the pool's files get safe modes whatever the umask.

htc.config.safety's rule (docs/security.md, "A daemon obeys only configuration nobody else can
change"), the loader's use of it (a daemon refuses the file, any reader refuses to run its
command), and the modes of what ensure_home and the transport create under umask 000.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from htc.config import load_config
from htc.config.errors import ConfigError
from htc.config.home import ensure_home
from htc.config.safety import unsafe_reason
from htc.errors import UsageError
from htc.wire.transport import UnixTransport
from tests.local_users import ALICE, local_user, needs_users


@pytest.fixture
def umask_000():
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_ensure_home_under_umask_000_makes_nothing_others_can_write(tmp_path, umask_000):
    home = tmp_path / "a" / "b" / "home"
    ensure_home({"HTC_HOME": str(home)})
    for path in (tmp_path / "a", tmp_path / "a" / "b", home, *(home / d for d in ("config.d", "spool", "execute", "log"))):
        assert _mode(path) == 0o755, f"{path} is {_mode(path):04o}"
    assert _mode(home / "htc_config") == 0o644


def test_the_transport_makes_its_directory_and_sockets_with_explicit_modes(tmp_path, umask_000):
    transport = UnixTransport(tmp_path / "sockets")

    async def listen():
        async with asyncio.TaskGroup() as tg:
            server = await transport.start_server("schedd", lambda conn: asyncio.sleep(0), task_group=tg)
            modes = _mode(tmp_path / "sockets"), _mode(tmp_path / "sockets" / "schedd.sock")
            await server.aclose()
        return modes

    assert asyncio.run(listen()) == (0o755, 0o666)


def test_a_socket_directory_others_can_write_is_refused(tmp_path):
    sockets = tmp_path / "sockets"
    sockets.mkdir()
    sockets.chmod(0o777)

    async def listen():
        async with asyncio.TaskGroup() as tg:
            await UnixTransport(sockets).start_server("schedd", lambda conn: asyncio.sleep(0), task_group=tg)

    with pytest.raises(ExceptionGroup) as group:
        asyncio.run(listen())
    [error] = group.value.exceptions
    assert isinstance(error, UsageError) and f"{sockets} (mode 0777" in str(error) and "chmod go-w" in str(error)
    assert not (sockets / "schedd.sock").exists()


def test_the_rule(tmp_path):
    safe = tmp_path / "safe.conf"
    safe.write_text("A = 1\n")
    safe.chmod(0o644)
    assert unsafe_reason(str(safe)) is None
    safe.chmod(0o664)
    assert "writable by its group" in unsafe_reason(str(safe))
    safe.chmod(0o646)
    assert "writable by others" in unsafe_reason(str(safe))
    safe.chmod(0o644)
    # a directory on the way that others can write: they could swap the file
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    (loose / "x.conf").write_text("")
    assert f"directory {loose} (mode 0777) is writable by others" in unsafe_reason(str(loose / "x.conf"))
    # ... unless it is sticky (as /tmp is): then what lies inside must pass on its own
    loose.chmod(0o1777)
    assert unsafe_reason(str(loose / "x.conf")) is None
    # a link to an unsafe place is unsafe
    link = tmp_path / "link.conf"
    link.symlink_to(loose / "x.conf")
    loose.chmod(0o777)
    assert "writable by others" in unsafe_reason(str(link))


@needs_users
def test_a_file_of_another_user_is_unsafe(tmp_path):
    path = tmp_path / "theirs.conf"
    path.write_text("")
    alice = local_user(ALICE)
    os.chown(path, alice.pw_uid, alice.pw_gid)
    assert f"belongs to uid {alice.pw_uid}" in unsafe_reason(str(path))


def _home_with(tmp_path: Path, text: str, mode: int = 0o755) -> dict[str, str]:
    home = tmp_path / "home"
    env = {"HTC_HOME": str(home)}
    ensure_home(env)
    (home / "config.d" / "50-x.conf").write_text(text)
    (home / "config.d").chmod(mode)
    return env


def test_a_daemon_refuses_a_config_dir_others_can_write(tmp_path):
    env = _home_with(tmp_path, "SCHEDD_INTERVAL = 7\n", mode=0o777)
    with pytest.raises(ConfigError) as refused:
        load_config("SCHEDD", env=env)
    assert "refusing to read the LOCAL_CONFIG_DIR directory" in str(refused.value)
    assert "(mode 0777) is writable by others" in str(refused.value)
    # a tool still reads it (nothing in it runs a command)
    assert load_config(None, env=env).param("SCHEDD_INTERVAL") == 7


def test_no_reader_runs_a_command_from_a_file_others_can_write(tmp_path):
    marker = tmp_path / "ran"
    env = _home_with(tmp_path, f"include command : /usr/bin/touch {marker}\n")
    conf = Path(env["HTC_HOME"]) / "config.d" / "50-x.conf"
    conf.chmod(0o666)
    for subsystem in (None, "SCHEDD"):
        with pytest.raises(ConfigError) as refused:
            load_config(subsystem, env=env)
        assert str(conf) in str(refused.value) and "writable by others" in str(refused.value)
    assert not marker.exists()
    conf.chmod(0o644)  # the same line from a safe file runs, as before
    load_config(None, env=env)
    assert marker.exists()

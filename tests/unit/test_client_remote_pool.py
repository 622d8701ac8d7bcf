"""``-pool HOST[:PORT]``: which texts name a remote pool, and which token the tool presents to it
(htc/client/remote.py); the pool over SSH is in tests/system/test_remote_pool_option.py."""

from __future__ import annotations

import pytest

from htc.client.remote import client_credentials, parse_pool
from htc.wire.address import parse_host_port
from htc.wire.token_store import save_token
from htc.wire.tokens import mint

KEY = b"k" * 32


class Config:
    def __init__(self, **knobs):
        self.knobs = knobs

    def param(self, name):
        return self.knobs.get(name)

    get = param


def test_a_directory_is_a_personal_pool_and_host_port_a_remote_one(tmp_path):
    assert parse_pool(str(tmp_path)) is None
    assert parse_pool("./no/such/dir") is None
    assert str(parse_pool("cm.example.org")) == "<cm.example.org:9618>"
    assert str(parse_pool("cm:9620")) == "<cm:9620>"
    assert str(parse_pool("<10.0.0.1:9618>")) == "<10.0.0.1:9618>"
    assert parse_pool("cm:notaport") is None


@pytest.mark.parametrize("issuer", ["cm", "cm:9618", "localhost"])
def test_the_token_issued_for_the_pool_host_is_presented(tmp_path, issuer):
    save_token(tmp_path, "other", mint(KEY, "bob@elsewhere.org", issuer="elsewhere.org", now=0))
    save_token(tmp_path, "pool", mint(KEY, "alice@" + issuer, issuer=issuer, now=0))
    host = "localhost" if issuer == "localhost" else "cm"
    credentials = client_credentials(parse_host_port(host), Config(SEC_TOKEN_DIRECTORY=str(tmp_path)))
    assert credentials()[0] == "alice@" + issuer and "pool" in credentials.source


def test_a_token_of_another_pool_is_never_sent(tmp_path):
    save_token(tmp_path, "other", mint(KEY, "bob@elsewhere.invalid", issuer="elsewhere.invalid", now=0))
    credentials = client_credentials(parse_host_port("cm"), Config(SEC_TOKEN_DIRECTORY=str(tmp_path)))
    assert credentials() is None and credentials.source == ""


def test_a_readable_pool_key_mints_a_token_for_the_user(tmp_path):
    key_file = tmp_path / "poolkey"
    key_file.write_bytes(KEY)
    key_file.chmod(0o600)
    config = Config(SEC_TOKEN_DIRECTORY=str(tmp_path / "none"), SEC_TOKEN_POOL_SIGNING_KEY_FILE=str(key_file))
    credentials = client_credentials(parse_host_port("cm"), config)
    assert credentials()[0].endswith("@cm") and credentials.pool_key == KEY


class _Refusing:
    """An SSH transport stand-in whose connections fail with ``error``."""

    def __init__(self, error):
        self.error = error
        self.opened = []

    async def open_connection(self, address, **kwargs):
        self.opened.append(address)
        raise self.error


def _pool(error, credentials=None):
    from htc.client.remote import Credentials, RemotePool

    ssh = _Refusing(error)
    pool = RemotePool(parse_host_port("cm"), ssh, credentials=credentials or Credentials(None, ""),
                      token_hint="/home/alice/.htc/tokens.d")
    return pool, ssh


def test_a_refused_token_says_which_file_and_what_to_do():
    import asyncio

    from htc.client.remote import Credentials
    from htc.wire.ssh_client import LoginRefused

    pool, ssh = _pool(LoginRefused("permission denied"), Credentials(("alice@cm", "t"), "the token in /t/pool"))
    with pytest.raises(LoginRefused) as caught:
        asyncio.run(pool.open_connection("collector", timeout=1))
    assert ssh.opened == ["<cm:9618>"]
    text = str(caught.value)
    assert "cm:9618 refused the token in /t/pool" in text and "htc token create" in text
    assert "/home/alice/.htc/tokens.d" in text


def test_an_unreachable_pool_says_what_to_check():
    import asyncio

    from htc.wire.errors import DaemonUnreachable

    pool, ssh = _pool(DaemonUnreachable("connection refused"))
    with pytest.raises(DaemonUnreachable, match="cannot reach the pool at cm:9618 .*firewall"):
        asyncio.run(pool.open_connection("collector", timeout=1))
    with pytest.raises(DaemonUnreachable):
        asyncio.run(pool.open_connection("negotiator", timeout=1))
    assert ssh.opened == ["<cm:9618>", "<cm:9618?sock=negotiator>"]

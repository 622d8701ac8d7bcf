"""The pool key file, identity tokens and remote daemon addresses (htc.wire.poolkey/tokens/address)."""

from __future__ import annotations

import os

import pytest

from htc.wire import address, poolkey, tokens
from htc.wire.errors import BadAddress

KEY = b"k" * 32


# -- the pool key ---------------------------------------------------------------------------------

def test_ensure_creates_a_private_key_once(tmp_path):
    path = tmp_path / "keys" / "POOL"
    key, created = poolkey.ensure_pool_key(path)
    assert created and len(key) == poolkey.NEW_KEY_BYTES
    assert os.stat(path).st_mode & 0o777 == 0o600
    again, created_again = poolkey.ensure_pool_key(path)
    assert again == key and not created_again
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]


def test_a_key_others_can_read_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "POOL"
    path.write_bytes(os.urandom(64))
    os.chmod(path, 0o644)
    with pytest.raises(poolkey.PoolKeyError, match=r"mode 0644.*chmod 600"):
        poolkey.read_pool_key(path)


def test_a_missing_or_short_key_is_refused(tmp_path):
    with pytest.raises(poolkey.PoolKeyError, match="does not exist"):
        poolkey.read_pool_key(tmp_path / "nothing")
    short = tmp_path / "short"
    short.write_bytes(b"abc")
    os.chmod(short, 0o600)
    with pytest.raises(poolkey.PoolKeyError, match="3 bytes"):
        poolkey.read_pool_key(short)


def test_a_symlinked_key_is_not_followed(tmp_path):
    real = tmp_path / "real"
    real.write_bytes(os.urandom(64))
    os.chmod(real, 0o600)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(poolkey.PoolKeyError):
        poolkey.read_pool_key(tmp_path / "link")


def test_derived_keys_differ_by_use_and_by_pool():
    assert poolkey.derive(KEY, b"a") != poolkey.derive(KEY, b"b")
    assert poolkey.derive(KEY, b"a") != poolkey.derive(b"j" * 32, b"a")
    assert poolkey.token_key(KEY) not in (KEY, poolkey.derive(KEY, b"ssh-ca"))


# -- tokens ---------------------------------------------------------------------------------------

def test_a_minted_token_verifies_with_its_claims():
    token = tokens.mint(KEY, "alice@pool", issuer="pool", now=1000, lifetime=60, scopes=("READ", "WRITE"))
    claims = tokens.verify(token, KEY, now=1059, issuer="pool")
    assert (claims.identity, claims.issuer, claims.issued_at, claims.expires) == ("alice@pool", "pool", 1000, 1060)
    assert claims.scopes == ("READ", "WRITE") and len(claims.token_id) == 32


def test_a_token_of_another_key_or_pool_is_refused():
    token = tokens.mint(KEY, "alice@pool", issuer="pool", now=1000)
    with pytest.raises(tokens.TokenError, match="signature"):
        tokens.verify(token, b"j" * 32, now=1000)
    with pytest.raises(tokens.TokenError, match="issued by 'pool'"):
        tokens.verify(token, KEY, now=1000, issuer="other")


def test_an_expired_or_future_token_is_refused():
    token = tokens.mint(KEY, "alice@pool", issuer="pool", now=1000, lifetime=10)
    with pytest.raises(tokens.TokenError, match="expired"):
        tokens.verify(token, KEY, now=1010)
    with pytest.raises(tokens.TokenError, match="future"):
        tokens.verify(tokens.mint(KEY, "a@b", issuer="p", now=5000), KEY, now=1000)


def test_a_changed_identity_breaks_the_signature():
    token = tokens.mint(KEY, "alice@pool", issuer="pool", now=1000)
    header, body, sig = token.split(".")
    forged = tokens._b64(tokens._unb64(body).replace(b"alice", b"admin"))
    with pytest.raises(tokens.TokenError, match="signature"):
        tokens.verify(f"{header}.{forged}.{sig}", KEY, now=1000)


@pytest.mark.parametrize("text", ["", "abc", "a.b", "a.b.c", "!!.??.**", "e30.e30.e30"])
def test_garbage_is_a_token_error_not_a_crash(text):
    with pytest.raises(tokens.TokenError):
        tokens.verify(text, KEY, now=0)


def test_mint_refuses_an_identity_without_a_domain():
    with pytest.raises(ValueError, match="user@domain"):
        tokens.mint(KEY, "alice", issuer="pool", now=0)


def test_scopes_read_htcondor_spelling():
    assert tokens.parse_scopes("condor:/READ openid condor:/ADMINISTRATOR") == ("READ", "ADMINISTRATOR")


# -- addresses ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("<10.200.0.3:9618?sock=schedd>", ("10.200.0.3", 9618, "schedd")),
    ("<10.200.0.3:9618?addrs=10.200.0.3-9618&alias=cm&sock=startd>", ("10.200.0.3", 9618, "startd")),
    ("<cm.example.org:9000>", ("cm.example.org", 9000, "collector")),
    ("<cm>", ("cm", 9618, "collector")),
    ("<[fe80::1]:9618?sock=schedd>", ("fe80::1", 9618, "schedd")),
])
def test_sinful_strings_parse(text, expected):
    got = address.parse_remote(text)
    assert (got.host, got.port, got.name) == expected
    assert address.parse_remote(str(got)) == got


@pytest.mark.parametrize("text, expected", [
    ("cm", ("cm", 9618, "collector")),
    ("cm:9000", ("cm", 9000, "collector")),
    ("10.0.0.1:1", ("10.0.0.1", 1, "collector")),
    ("[::1]:9000", ("::1", 9000, "collector")),
])
def test_host_port_as_users_write_it(text, expected):
    got = address.parse_host_port(text)
    assert (got.host, got.port, got.name) == expected


@pytest.mark.parametrize("text", ["<>", "<cm:0>", "<cm:70000>", "<cm:9618?sock=../x>", "cm:port", ":9618", "", "<cm"])
def test_bad_addresses_say_what_is_wrong(text):
    with pytest.raises(BadAddress, match="address|host"):
        if text.startswith("<"):
            address.parse_remote(text)
        else:
            address.parse_host_port(text)


def test_local_names_are_not_remote():
    assert not address.is_remote("schedd")
    assert address.is_remote("<cm:9618>")
    assert address.format_remote("10.0.0.1", 9618, "schedd") == "<10.0.0.1:9618?sock=schedd>"

"""``htc token create|list`` and the token directory (htc.wire.token_store)."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest

from htc.cli.main import main
from htc.wire import token_store
from htc.wire.poolkey import ensure_pool_key
from htc.wire.tokens import mint, verify


@pytest.fixture
def pool(tmp_path, monkeypatch):
    """A configured pool: its key file, TRUST_DOMAIN and a token directory, all under tmp_path."""
    key_file = tmp_path / "passwords.d" / "POOL"
    key, _ = ensure_pool_key(key_file)
    config = tmp_path / "htc_config"
    config.write_text(f"CONDOR_HOST = cm.example\nSEC_TOKEN_POOL_SIGNING_KEY_FILE = {key_file}\n"
                      f"SEC_TOKEN_DIRECTORY = {tmp_path / 'tokens.d'}\n")
    monkeypatch.setenv("HTC_CONFIG", str(config))
    return key, tmp_path


def test_create_prints_a_token_the_pool_key_verifies(pool, capsys):
    key, _ = pool
    assert main(["token", "create", "-identity", "alice@pool", "-lifetime", "3600", "-authz", "READ",
                 "-authz", "write"]) == 0
    token = capsys.readouterr().out.strip()
    claims = verify(token, key, now=time.time(), issuer="cm.example")  # TRUST_DOMAIN = COLLECTOR_HOST
    assert claims.identity == "alice@pool" and claims.scopes == ("READ", "WRITE")
    assert claims.expires is not None and 3590 <= claims.expires - claims.issued_at <= 3600


def test_create_with_token_saves_it_0600_in_the_token_directory(pool, capsys):
    key, tmp = pool
    assert main(["token", "create", "-identity", "bob@pool", "-token", "mypool", "-scope", "condor:/READ"]) == 0
    assert capsys.readouterr().out == ""
    path = tmp / "tokens.d" / "mypool"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    claims = verify(path.read_text(), key, now=time.time())
    assert (claims.identity, claims.scopes, claims.expires) == ("bob@pool", ("READ",), None)
    # list shows it as condor_token_list does
    assert main(["token", "list"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith('Header: {"alg":"HS256","kid":"POOL","typ":"JWT"} Payload: {')
    payload = json.loads(line.split(" Payload: ")[1].split(" File: ")[0])
    assert payload["sub"] == "bob@pool" and payload["iss"] == "cm.example" and payload["scope"] == "condor:/READ"
    assert line.endswith(f"File: {path}")


def test_create_refuses_bad_input_with_what_to_do(pool, tmp_path, capsys):
    def refused(argv, words):
        assert main(["token", "create", *argv]) != 0
        err = capsys.readouterr().err
        assert words in err, err

    refused(["-identity", "alice"], "user@domain")
    refused(["-identity", "alice@pool", "-authz", "ROOT"], "not an authorization level")
    refused(["-identity", "alice@pool", "-token", "../x"], "plain file name")
    refused(["-identity", "alice@pool", "-lifetime", "0"], "positive")
    leaky = tmp_path / "leaky"
    leaky.write_bytes(os.urandom(32))
    leaky.chmod(0o644)
    refused(["-identity", "alice@pool", "-key", str(leaky)], "chmod 600")


def test_find_token_picks_the_pools_issuer_and_skips_unsafe_files(tmp_path):
    key = os.urandom(32)
    d = tmp_path / "tokens.d"
    other = mint(key, "alice@other", issuer="other.example", now=time.time())
    ours = mint(key, "alice@pool", issuer="cm.example", now=time.time())
    token_store.save_token(d, "a-other", other)
    token_store.save_token(d, "b-leaky", ours)
    (d / "b-leaky").chmod(0o644)
    token_store.save_token(d, "c-ours", ours)
    (d / "d-garbage").write_text("not a token")
    (d / "d-garbage").chmod(0o600)
    found = token_store.find_token(d, issuer="cm.example")
    assert found is not None and found.path.name == "c-ours" and found.token == ours
    assert token_store.find_token(d, issuer="nowhere") is None
    assert token_store.find_token(d).path.name == "a-other"
    problems = {t.path.name: t.problem for t in token_store.list_tokens(d)}
    assert "chmod 600" in problems["b-leaky"] and "not a token" in problems["d-garbage"] and not problems["c-ours"]
    assert token_store.list_tokens(tmp_path / "missing") == []


def test_the_default_token_directory_is_per_user_not_under_htc_home(monkeypatch):
    import pwd

    home = pwd.getpwuid(os.geteuid()).pw_dir
    assert token_store.default_directory() == token_store.Path(home) / ".htc" / "tokens.d"
    assert token_store.token_directory(None) == token_store.default_directory()

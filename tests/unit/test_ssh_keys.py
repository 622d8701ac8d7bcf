"""Host keys, the pool's SSH CA and trust on first use (htc.wire.ssh_keys): files only, no sockets."""

from __future__ import annotations

import os

import asyncssh
import pytest

from htc.wire.ssh_keys import (HostKeyError, KnownHosts, certify_host_key, load_or_create_host_key, pool_ca,
                               pool_known_hosts, read_authorized_keys)


def test_host_key_is_created_private_and_then_reused(tmp_path):
    path = tmp_path / "ssh" / "host_key"
    key, created = load_or_create_host_key(path)
    assert created and path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "ssh").stat().st_mode & 0o777 == 0o700
    again, created_again = load_or_create_host_key(path)
    assert not created_again
    assert again.public_data == key.public_data


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_host_key_others_can_read_is_refused_naming_it(tmp_path, mode):
    path = tmp_path / "host_key"
    load_or_create_host_key(path)
    os.chmod(path, mode)
    with pytest.raises(HostKeyError, match=rf"{path}.*mode {mode:04o}.*chmod 600"):
        load_or_create_host_key(path)


def test_a_damaged_host_key_says_so(tmp_path):
    path = tmp_path / "host_key"
    path.write_bytes(b"not a key")
    os.chmod(path, 0o600)
    with pytest.raises(HostKeyError, match="not an SSH private key"):
        load_or_create_host_key(path)


def test_the_ca_is_derived_from_the_pool_key_alone():
    key = os.urandom(64)
    assert pool_ca(key).public_data == pool_ca(key).public_data
    assert pool_ca(key).public_data != pool_ca(os.urandom(64)).public_data


def test_a_host_certificate_is_valid_for_any_name_and_signed_by_the_pool_ca(tmp_path):
    key = os.urandom(64)
    host_key, _ = load_or_create_host_key(tmp_path / "host_key")
    cert = certify_host_key(pool_ca(key), host_key, now=1_800_000_000)
    assert cert.signing_key.public_data == pool_ca(key).convert_to_public().public_data
    assert cert.key.public_data == host_key.public_data
    assert cert.principals == []
    trusted = pool_known_hosts(key)[1]
    assert [k.public_data for k in trusted] == [pool_ca(key).convert_to_public().public_data]


def test_known_hosts_trusts_on_first_use_and_refuses_a_changed_key(tmp_path):
    known = KnownHosts(tmp_path / "home" / "known_hosts")
    first = asyncssh.generate_private_key("ssh-ed25519")
    other = asyncssh.generate_private_key("ssh-ed25519")
    assert known.check("10.0.0.1", 9618, first)                 # recorded
    assert known.path.stat().st_mode & 0o777 == 0o600
    assert known.check("10.0.0.1", 9618, first)                 # recognised
    assert not known.check("10.0.0.1", 9618, other)             # someone else: refused
    assert known.check("10.0.0.1", 9619, other)                 # another port is another host
    assert "[10.0.0.1]:9618 ssh-ed25519 " in known.path.read_text()


def test_authorized_keys_map_identities_to_keys_and_refuse_what_others_can_change(tmp_path):
    bob = asyncssh.generate_private_key("ssh-ed25519").convert_to_public()
    path = tmp_path / "authorized"
    path.write_text(f"# comment\n\nbob@pool {bob.export_public_key().decode().strip()} bob's laptop\n")
    os.chmod(path, 0o644)
    assert [k.public_data for k in read_authorized_keys(path)["bob@pool"]] == [bob.public_data]
    os.chmod(path, 0o666)
    with pytest.raises(HostKeyError, match=rf"{path}.*0666.*chmod go-w"):
        read_authorized_keys(path)
    os.chmod(path, 0o644)
    path.write_text("bob ssh-ed25519 AAAA\n")
    with pytest.raises(HostKeyError, match=rf"{path}, line 1"):
        read_authorized_keys(path)

"""htc.config.hostname: this host's one name, found as HTCondor's init_local_hostname finds it."""

from __future__ import annotations

import socket

import pytest

from htc.config import hostname as hn
from htc.config import load_config


@pytest.fixture(autouse=True)
def fresh():
    hn.host_names.cache_clear()
    yield
    hn.host_names.cache_clear()


def _resolver(monkeypatch, name: str, answers):
    monkeypatch.setattr(socket, "gethostname", lambda: name)

    def getaddrinfo(host, port, *args, **kwargs):
        assert host == name
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, canon, (ip, 0)) for canon, ip in answers]
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_a_canonical_name_with_a_domain_wins_over_the_bare_one(monkeypatch):
    _resolver(monkeypatch, "vm", [("vm", "127.0.0.1"), ("vm.example.org", "10.0.0.5")])
    assert hn.host_names() == ("vm", "vm.example.org")


def test_etc_hosts_first_alias_localhost_is_not_the_hosts_name(monkeypatch):
    # /etc/hosts "127.0.0.1 localhost vm": socket.getfqdn() says localhost; HTCondor keeps vm
    _resolver(monkeypatch, "vm", [("vm", "127.0.0.1")])
    assert hn.host_names() == ("vm", "vm")


def test_an_unresolvable_name_stays_and_gets_the_default_domain(monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "box")

    def fail(*args, **kwargs):
        raise socket.gaierror("no")
    monkeypatch.setattr(socket, "getaddrinfo", fail)
    assert hn.host_names() == ("box", "box")
    assert hn.host_names("", "lab.example") == ("box", "box.lab.example")


def _config(tmp_path, text: str):
    path = tmp_path / "htc_config"
    path.write_text(text)
    return load_config(env={"HTC_CONFIG": str(path), "HTC_HOME": str(tmp_path)})


def test_network_hostname_and_default_domain_from_the_configuration(monkeypatch, tmp_path):
    _resolver(monkeypatch, "vm", [("vm", "127.0.0.1")])
    assert hn.full_hostname(_config(tmp_path, "NETWORK_HOSTNAME = node7.cluster.example\n")) == "node7.cluster.example"
    assert hn.full_hostname(_config(tmp_path, "DEFAULT_DOMAIN_NAME = lab.example\n")) == "vm.lab.example"
    assert hn.full_hostname() == "vm"


def test_sinful_names_the_daemons_socket(monkeypatch):
    monkeypatch.setattr(hn, "local_ip", lambda: "10.1.2.3")
    assert hn.sinful("schedd", "h.example") == "<10.1.2.3:0?addrs=10.1.2.3-0&alias=h.example&noUDP&sock=schedd>"

"""What a daemon needs to take part in a multi-host pool: network mode, SSH options, credentials.

Theory of operation
-------------------
A host is in *network mode* when COLLECTOR_HOST names a real port (a personal pool's is
``127.0.0.1:0``, or unset): then the master also runs the shared port (:func:`network_mode`),
and daemons reach other hosts through :func:`daemon_transport` -- a
:class:`~htc.wire.routing.RoutingTransport` whose SSH side logs in with a token the daemon mints
for itself from the pool key (:func:`daemon_credentials`: ``condor_pool@TRUST_DOMAIN``, issuer
TRUST_DOMAIN, short-lived, minted afresh for each SSH connection) and trusts exactly the pool's
SSH CA. A personal pool gets the plain :class:`~htc.wire.transport.UnixTransport` and needs no
key at all.

TRUST_DOMAIN is read as HTCondor reads it (default ``$(COLLECTOR_HOST)``), so every host of a
pool with the same CONDOR_HOST agrees on the issuer of its tokens.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from htc.config.hostname import full_hostname, local_ip

from htc.wire import tokens
from htc.wire.address import DEFAULT_PORT, format_remote, parse_host_port
from htc.wire.errors import BadAddress
from htc.wire.poolkey import read_pool_key
from htc.wire.routing import RoutingTransport
from htc.wire.transport import Transport, UnixTransport

# htc.wire.ssh_* import asyncssh (a quarter of a second): only a daemon in network mode pays it,
# so those imports are made inside the functions that need them.

__all__ = ["DAEMON_TOKEN_LIFETIME", "POOL_USER", "PoolAddresses", "daemon_credentials", "daemon_transport",
           "network_mode", "own_endpoints", "pool_addresses", "service_transport", "ssh_options", "trust_domain"]

#: the identity daemons prove to each other across hosts (HTCondor's)
POOL_USER = "condor_pool"
#: seconds a daemon's self-minted token is valid (one is minted per SSH connection)
DAEMON_TOKEN_LIFETIME = 3600.0


def network_mode(config) -> bool:
    """Whether this host is part of a multi-host pool: COLLECTOR_HOST names a real port."""
    text = str(config.param("COLLECTOR_HOST") or "").strip()
    if not text:
        return False
    try:
        parse_host_port(text)  # port 0 (a personal pool's) is refused as no real port
    except BadAddress:
        return False
    return True


def trust_domain(config) -> str:
    """TRUST_DOMAIN, the issuer of the pool's tokens (htc's default: COLLECTOR_HOST; see its doc)."""
    return str(config.param("TRUST_DOMAIN") or config.param("COLLECTOR_HOST") or "").strip()


def daemon_credentials(pool_key: bytes, domain: str, *, lifetime: float = DAEMON_TOKEN_LIFETIME,
                       clock: Callable[[], float] = time.time) -> Callable[[], tuple[str, str]]:
    """A credentials callable for the SshTransport minting ``condor_pool@domain`` tokens."""
    identity = f"{POOL_USER}@{domain}"

    def credentials() -> tuple[str, str]:
        return identity, tokens.mint(pool_key, identity, issuer=domain, now=clock(), lifetime=lifetime)

    return credentials


def ssh_options(config, *, pool_key: bytes | None = None, known_hosts_file: str | None = None):
    """SshOptions from the SSH_* knobs; trusting the pool CA when ``pool_key`` is given."""
    from htc.wire.ssh_client import DEFAULT_CIPHERS, SshOptions
    from htc.wire.ssh_keys import pool_known_hosts

    value = config.param("SSH_CIPHERS") or ()
    ciphers = value.replace(",", " ").split() if isinstance(value, str) else [str(v) for v in value]
    return SshOptions(keepalive_interval=float(config.param("SSH_KEEPALIVE_INTERVAL")),
                      keepalive_count_max=int(config.param("SSH_KEEPALIVE_COUNT_MAX")),
                      connect_timeout=float(config.param("SSH_CONNECT_TIMEOUT")),
                      ciphers=tuple(ciphers) or DEFAULT_CIPHERS,
                      known_hosts_file=known_hosts_file,
                      trusted=pool_known_hosts(pool_key) if pool_key is not None else None)


def own_endpoints(config) -> set[tuple[str, int]]:
    """The ``(host, port)`` pairs that name this host's shared port: the address it advertises,
    its interface's, its full and short names, NETWORK_INTERFACE, and loopback."""
    port = int(config.param("SHARED_PORT_PORT") or DEFAULT_PORT)
    full = full_hostname(config)
    hosts = {advertised_ip(config), local_ip(), full, full.split(".", 1)[0], "127.0.0.1", "localhost"}
    interface = str(config.param("NETWORK_INTERFACE") or "").strip()
    if interface and interface != "*":
        hosts.add(interface)
    return {(host, port) for host in hosts if host}


def daemon_transport(local: Transport, config) -> Transport:
    """The transport a daemon sends with: ``local`` alone, or (network mode) routed with SSH.

    Raises:
        PoolKeyError: network mode, and the pool key is missing or others can read it.
    """
    if not network_mode(config) or isinstance(local, RoutingTransport):
        return local
    from htc.wire.ssh_client import SshTransport

    key = read_pool_key(config.param("SEC_TOKEN_POOL_SIGNING_KEY_FILE"))
    remote = SshTransport(daemon_credentials(key, trust_domain(config)), ssh_options(config, pool_key=key))
    return RoutingTransport(local, remote, own_endpoints(config))


# -- where a daemon is reached, and where it reaches the collector ---------------------------------


def advertised_ip(config) -> str:
    """The address other hosts reach this one at: its full name's address as the resolver gives
    it (``/etc/hosts`` or DNS), unless that is a loopback one; else the outgoing interface's."""
    try:
        ip = socket.gethostbyname(full_hostname(config))
        if not ipaddress.ip_address(ip).is_loopback:
            return ip
    except (OSError, ValueError):
        pass  # the name does not resolve: fall back to the interface a default route picks
    return local_ip()


@dataclass(frozen=True)
class PoolAddresses:
    """Where a daemon says it is and where it sends its ads (local names in a personal pool)."""

    own: str         # what it advertises as MyAddress: ``<ip:9618?sock=schedd>`` or ``schedd``
    collector: str   # ``<cm:9618>`` or ``collector``
    negotiator: str  # ``<host:9618?sock=negotiator>`` (NEGOTIATOR_HOST, default the collector's) or ``negotiator``


def pool_addresses(config, name: str) -> PoolAddresses:
    """The addresses of daemon ``name`` (its socket's name) on this host.

    In network mode the daemon is ``<ip:SHARED_PORT_PORT?sock=name>``, the collector is
    COLLECTOR_HOST as a sinful string and the negotiator (where schedds and startds send their
    Reschedule) the daemon of that name behind the shared port of NEGOTIATOR_HOST, by default
    the collector's (``use ROLE : CentralManager`` runs both); otherwise all are local names.

    Raises:
        BadAddress: COLLECTOR_HOST or NEGOTIATOR_HOST is not ``HOST[:PORT]``.
    """
    if not network_mode(config):
        return PoolAddresses(name, "collector", "negotiator")
    port = int(config.param("SHARED_PORT_PORT") or DEFAULT_PORT)
    collector = parse_host_port(str(config.param("COLLECTOR_HOST")))
    elsewhere = str(config.param("NEGOTIATOR_HOST") or "").strip()
    try:
        at = parse_host_port(elsewhere, name="negotiator") if elsewhere else collector
    except BadAddress as exc:
        raise BadAddress(f"NEGOTIATOR_HOST = {elsewhere}: {exc}; give the negotiator's host as HOST[:PORT] "
                         "(or leave it empty: the central manager)") from None
    negotiator = format_remote(at.host, at.port, "negotiator")
    return PoolAddresses(format_remote(advertised_ip(config), port, name), str(collector), negotiator)


def service_transport(socket_dir: str | Path, config) -> Transport:
    """The transport of a daemon's service: its Unix sockets, routed to other hosts over SSH in
    network mode (:func:`daemon_transport`).

    Raises:
        PoolKeyError: network mode, and the pool key is missing or others can read it.
    """
    return daemon_transport(UnixTransport(socket_dir), config)

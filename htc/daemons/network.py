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

import time
from collections.abc import Callable
from pathlib import Path

from htc.wire import tokens
from htc.wire.address import parse_host_port
from htc.wire.errors import BadAddress
from htc.wire.poolkey import read_pool_key
from htc.wire.routing import RoutingTransport
from htc.wire.ssh_client import DEFAULT_CIPHERS, SshOptions, SshTransport
from htc.wire.ssh_keys import pool_known_hosts
from htc.wire.transport import Transport, UnixTransport

__all__ = ["DAEMON_TOKEN_LIFETIME", "POOL_USER", "daemon_credentials", "daemon_transport", "network_mode",
           "ssh_options", "trust_domain"]

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
    """TRUST_DOMAIN, the issuer of the pool's tokens (default: COLLECTOR_HOST, as HTCondor)."""
    return str(config.param("TRUST_DOMAIN") or config.param("COLLECTOR_HOST") or "").strip()


def daemon_credentials(pool_key: bytes, domain: str, *, lifetime: float = DAEMON_TOKEN_LIFETIME,
                       clock: Callable[[], float] = time.time) -> Callable[[], tuple[str, str]]:
    """A credentials callable for :class:`SshTransport` minting ``condor_pool@domain`` tokens."""
    identity = f"{POOL_USER}@{domain}"

    def credentials() -> tuple[str, str]:
        return identity, tokens.mint(pool_key, identity, issuer=domain, now=clock(), lifetime=lifetime)

    return credentials


def ssh_options(config, *, pool_key: bytes | None = None, known_hosts_file: str | None = None) -> SshOptions:
    """SshOptions from the SSH_* knobs; trusting the pool CA when ``pool_key`` is given."""
    ciphers = str(config.param("SSH_CIPHERS") or "").replace(",", " ").split()
    return SshOptions(keepalive_interval=float(config.param("SSH_KEEPALIVE_INTERVAL")),
                      keepalive_count_max=int(config.param("SSH_KEEPALIVE_COUNT_MAX")),
                      connect_timeout=float(config.param("SSH_CONNECT_TIMEOUT")),
                      ciphers=tuple(ciphers) or DEFAULT_CIPHERS,
                      known_hosts_file=known_hosts_file,
                      trusted=pool_known_hosts(pool_key) if pool_key is not None else None)


def daemon_transport(socket_dir: str | Path, config, own_endpoints=()) -> Transport:
    """The transport a daemon uses: Unix sockets only, or (network mode) routed with SSH.

    Raises:
        PoolKeyError: network mode, and the pool key is missing or others can read it.
    """
    local = UnixTransport(socket_dir)
    if not network_mode(config):
        return local
    key = read_pool_key(config.param("SEC_TOKEN_POOL_SIGNING_KEY_FILE"))
    remote = SshTransport(daemon_credentials(key, trust_domain(config)), ssh_options(config, pool_key=key))
    return RoutingTransport(local, remote, own_endpoints)

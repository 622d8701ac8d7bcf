"""The tools' view of a pool on another machine: ``-pool HOST[:PORT]`` (and ``-name``).

Theory of operation
-------------------
``htc q -pool cm -name submit.test`` talks to a multi-host pool over SSH, through its hosts'
shared ports (:mod:`htc.wire.ssh_client`). :class:`RemotePool` is a transport that turns the
local names the tools use into the pool's sinful addresses as each connection is opened:

* ``collector`` is the ``-pool`` address (``<cm:9618>``); other local names (``negotiator``,
  ``master``) are the daemons of that name behind the central manager's shared port;
* ``schedd`` is found through the collector, as HTCondor's tools do: the Scheduler ad whose
  ``Name`` is ``-name`` (or the only Scheduler ad when no ``-name`` is given), and its
  ``MyAddress``. The answer is kept for the life of the transport (one tool run);
* a sinful address (a startd's ``MyAddress``) is used as it is.

**Credentials** (:func:`client_credentials`): the user's token whose issuer is the pool's (its
TRUST_DOMAIN is not known to a laptop, so a token matches when its issuer names the ``-pool``
host, by name or by address, or is this machine's configured TRUST_DOMAIN); else, when the user
can read the pool key, a token minted with it for ``USER@TRUST_DOMAIN``; else nothing, and the
pool treats the tool as ``unauthenticated@unmapped`` (READ at most, where ALLOW_READ allows it).
A token is never offered to a host it was not issued for: that would hand the password over.

**Host keys**: trusted through the pool CA when the pool key is readable; otherwise on first use,
recorded in ``known_hosts`` under the user's HTC home, and a changed key is refused thereafter.
"""

from __future__ import annotations

import getpass
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from htc.errors import UsageError
from htc.wire.address import RemoteAddress, format_remote, is_remote, parse_host_port
from htc.wire import tokens
from htc.wire.errors import BadAddress, DaemonUnreachable, RemoteError
from htc.wire.transport import Connection, Server, Transport

__all__ = ["RemotePool", "client_credentials", "parse_pool", "remote_pool"]

#: seconds a token minted from a readable pool key is valid (one tool run needs minutes at most)
_MINTED_LIFETIME = 3600.0


def parse_pool(text: str) -> RemoteAddress | None:
    """``-pool``'s collector when ``text`` is ``HOST[:PORT]`` or a sinful string and not an
    existing directory (a personal pool's home), else None."""
    if not text or Path(text).expanduser().is_dir() or "/" in text and not is_remote(text):
        return None
    try:
        return parse_host_port(text)
    except BadAddress:
        return None


def _addresses(host: str) -> set[str]:
    try:
        return {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except (OSError, UnicodeError):
        return set()


@dataclass(frozen=True)
class Credentials:
    """What the tool proves to the pool, and how it says so in errors."""

    pair: tuple[str, str] | None
    source: str  # "the token in FILE", "the pool key FILE", or "" (unauthenticated)
    pool_key: bytes | None = None

    def __call__(self) -> tuple[str, str] | None:
        return self.pair


def _matching_token(collector: RemoteAddress, config):
    from htc.wire.token_store import list_tokens, token_directory

    names = {collector.host, f"{collector.host}:{collector.port}", socket.getfqdn(collector.host)}
    configured = str(config.param("TRUST_DOMAIN") or "").strip()
    if configured:
        names.add(configured)
    usable = [t for t in list_tokens(token_directory(config)) if not t.problem]
    for found in usable:
        if str(found.claims.get("iss", "")) in names:
            return found
    wanted = _addresses(collector.host)
    for found in usable:
        issuer = str(found.claims.get("iss", ""))
        try:
            issuer_host = parse_host_port(issuer).host
        except BadAddress:
            continue
        if wanted and _addresses(issuer_host) & wanted:
            return found
    return None


def client_credentials(collector: RemoteAddress, config, *, domain: str | None = None) -> Credentials:
    """The user's credentials for the pool at ``collector`` (see the module docstring);
    ``domain``: that pool's TRUST_DOMAIN when it is not this host's (a FLOCK_TO pool sharing the
    pool key), the issuer of a token minted from the key."""
    found = _matching_token(collector, config)
    if found is not None:
        return Credentials((str(found.claims.get("sub", "")), found.token), f"the token in {found.path}")
    key_file = str(config.param("SEC_TOKEN_POOL_SIGNING_KEY_FILE") or "")
    from htc.daemons.network import network_mode, trust_domain

    if domain is None:
        domain = trust_domain(config) if network_mode(config) else collector.host
    if key_file:
        from htc.wire.poolkey import PoolKeyError, read_pool_key

        try:
            key = read_pool_key(key_file)
        except (PoolKeyError, OSError):
            key = None  # not readable by this user: a token, or nothing
        if key is not None:
            identity = f"{getpass.getuser()}@{domain}"
            token = tokens.mint(key, identity, issuer=domain, now=time.time(), lifetime=_MINTED_LIFETIME)
            return Credentials((identity, token), f"the pool key {key_file}", key)
    return Credentials(None, "")


class RemotePool(Transport):
    """Reach the pool whose collector is ``collector`` over ``ssh``; ``schedd_name`` is ``-name``."""

    def __init__(self, collector: RemoteAddress, ssh: Transport, *, schedd_name: str | None = None,
                 credentials: Credentials | None = None, token_hint: str = ""):
        self.collector = collector
        self.ssh = ssh
        self.schedd_name = schedd_name
        self.credentials = credentials or Credentials(None, "")
        self.token_hint = token_hint
        self._schedd: str | None = None

    @property
    def pool(self) -> str:
        return f"{self.collector.host}:{self.collector.port}"

    async def _find_schedd(self, timeout: float | None) -> str:
        from htc.client.request import query_collector_async
        from htc.wire.messages import AdType

        if self._schedd is None:
            constraint = f'Name == "{self.schedd_name}"' if self.schedd_name else ""
            ads = await query_collector_async(AdType.Schedd, constraint, ["Name", "MyAddress"],
                                              address=str(self.collector), transport=self,
                                              **({"timeout": timeout} if timeout else {}))
            if self.schedd_name and not ads:
                raise UsageError(f"-name {self.schedd_name}: the pool at {self.pool} has no schedd of that name "
                                 f"(see 'htc status -pool {self.pool} -schedd')")
            if len(ads) != 1:
                names = ", ".join(sorted(str(ad.get("Name")) for ad in ads)) or "none"
                raise UsageError(f"the pool at {self.pool} has {len(ads)} schedds ({names}); "
                                 "say which with -name NAME")
            self._schedd = str(ads[0].get("MyAddress"))
        return self._schedd

    async def resolve(self, address: str, timeout: float | None = None) -> str:
        """The sinful address of ``address`` (a local name or a sinful string) in this pool."""
        if is_remote(address):
            return address
        if address == "collector":
            return str(self.collector)
        if address == "schedd":
            return await self._find_schedd(timeout)
        return format_remote(self.collector.host, self.collector.port, address)

    async def open_connection(self, address: str, **kwargs) -> Connection:
        target = await self.resolve(address, kwargs.get("timeout"))
        from htc.wire.ssh_client import LoginRefused

        try:
            return self._hinting(await self.ssh.open_connection(target, **kwargs))
        except LoginRefused as exc:
            raise LoginRefused(
                f"the pool at {self.pool} refused {self.credentials.source or 'an unauthenticated login'} "
                f"({exc}); ask its administrator for a token ('htc token create -identity YOU@DOMAIN' on "
                f"the central manager) and save it in {self.token_hint}") from exc
        except DaemonUnreachable as exc:
            if address == "collector" or target == str(self.collector):
                raise DaemonUnreachable(
                    f"cannot reach the pool at {self.pool} ({exc}); check the host name and port, that "
                    "the central manager is running ('htc pool status' there) and that no firewall "
                    "blocks the port") from exc
            raise

    def _hinting(self, conn: Connection) -> Connection:
        """``conn``, whose refusals for want of rights also say who the tool was and what to do."""
        if self.credentials.pair is None:
            hint = (f"; this tool proved no identity to the pool at {self.pool}: save a token in "
                    f"{self.token_hint} (its administrator makes one with 'htc token create -identity "
                    "YOU@DOMAIN' on the central manager)")
        else:
            hint = f" (this tool spoke as {self.credentials.pair[0]}, with {self.credentials.source})"
        read_reply = conn.read_reply

        async def hinted(msg, **kwargs):
            try:
                return await read_reply(msg, **kwargs)
            except RemoteError as exc:
                if exc.code != "denied":
                    raise
                raise RemoteError(exc.daemon, exc.code, exc.remote_message + hint) from exc

        conn.read_reply = hinted  # request() reads its reply through this attribute
        return conn

    async def start_server(self, address: str, handler, *, task_group) -> Server:
        raise UsageError("a tool talking to a remote pool does not serve connections")


def remote_pool(collector: RemoteAddress, *, schedd_name: str | None = None,
                trust_domain: str | None = None) -> RemotePool:
    """A :class:`RemotePool` with this user's credentials and host-key trust (module docstring);
    ``trust_domain`` as for :func:`client_credentials`."""
    from htc.config import htc_home, load_config
    from htc.daemons.network import ssh_options
    from htc.wire.ssh_client import SshTransport
    from htc.wire.token_store import token_directory

    config = load_config()
    credentials = client_credentials(collector, config, domain=trust_domain)
    known_hosts = Path(htc_home()) / "known_hosts"
    options = ssh_options(config, pool_key=credentials.pool_key, known_hosts_file=str(known_hosts))
    return RemotePool(collector, SshTransport(credentials, options), schedd_name=schedd_name,
                      credentials=credentials, token_hint=str(token_directory(config)))

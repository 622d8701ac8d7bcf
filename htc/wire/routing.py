"""One transport for a daemon in network mode: local names over Unix sockets, others over SSH.

Theory of operation
-------------------
:class:`RoutingTransport` looks at the address only. A plain name (``schedd``) is a daemon of
this host: the :class:`~htc.wire.transport.UnixTransport`. A sinful string
(``<10.200.0.3:9618?sock=schedd>``) naming one of this host's own ``host:port`` endpoints is also
local (a daemon advertises its sinful ``MyAddress`` and its neighbours on the same host must not
go out to the network and back), so it is reduced to its name and sent to the Unix transport. Any
other sinful string goes to the :class:`~htc.wire.ssh_client.SshTransport` (a bulk conversation,
:meth:`~htc.wire.transport.Transport.open_bulk_connection`, on its own SSH connection to the
host). Servers always listen
locally: network peers arrive through the host's shared port.
"""

from __future__ import annotations

import asyncio

from htc.wire.address import is_remote, parse_remote
from htc.wire.transport import DEFAULT_TIMEOUT, Connection, ConnectionHandler, Server, Transport

__all__ = ["RoutingTransport"]


class RoutingTransport(Transport):
    """Route by address (module header).

    Args:
        local: this host's daemons (a UnixTransport).
        remote: other hosts' daemons (an SshTransport).
        own_endpoints: the ``(host, port)`` pairs that mean this host's shared port.
    """

    def __init__(self, local: Transport, remote: Transport, own_endpoints=()):
        self.local = local
        self.remote = remote
        self.own_endpoints = {(str(h), int(p)) for h, p in own_endpoints}

    def route(self, address: str) -> tuple[Transport, str]:
        """The transport that reaches ``address``, and the address to give it."""
        if not is_remote(address):
            return self.local, address
        target = parse_remote(address)
        if target.endpoint in self.own_endpoints:
            return self.local, target.name
        return self.remote, address

    async def open_connection(self, address: str, *, timeout: float | None = DEFAULT_TIMEOUT) -> Connection:
        transport, routed = self.route(address)
        return await transport.open_connection(routed, timeout=timeout)

    async def open_bulk_connection(self, address: str, *, timeout: float | None = DEFAULT_TIMEOUT) -> Connection:
        """A connection for a bulk conversation: another host's on its bulk SSH connection."""
        transport, routed = self.route(address)
        return await transport.open_bulk_connection(routed, timeout=timeout)

    async def start_server(self, address: str, handler: ConnectionHandler, *,
                           task_group: asyncio.TaskGroup) -> Server:
        transport, routed = self.route(address)
        if transport is not self.local:
            return await self.remote.start_server(address, handler, task_group=task_group)
        return await self.local.start_server(routed, handler, task_group=task_group)

    async def aclose(self) -> None:
        """Close the remote side's cached connections."""
        closer = getattr(self.remote, "aclose", None)
        if closer is not None:
            await closer()

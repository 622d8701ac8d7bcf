"""One request to one daemon: the connection every other module of :mod:`htc.client` uses.

Each call opens a connection, sends one request, checks the reply and closes, as HTCondor's
tools do.  The plain functions are for synchronous callers (the CLI); the ``*_async`` ones are
for code already inside an event loop.  Without a ``transport`` they reach the daemons of this
machine's pool, under ``$HTC_HOME/sockets``.

>>> ads = query_collector(AdType.Startd, "Cpus >= 4", ["Name", "Cpus"])   # doctest: +SKIP
>>> send_command("master", DaemonsOff(daemons=("SCHEDD",)))                # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from htc.classad import ClassAd
from htc.errors import UsageError
from htc.wire import messages as m
from htc.wire.errors import DaemonUnreachable
from htc.wire.messages import AdType
from htc.wire.transport import DEFAULT_TIMEOUT, Transport, UnixTransport

__all__ = [
    "SCHEDD", "AdType", "default_transport", "ping", "query_collector", "query_collector_async", "query_master",
    "send_command", "send_command_async",
]

#: the schedd's address on the pool's transport
SCHEDD = "schedd"


def default_transport() -> Transport:
    """The transport to this machine's pool (``$HTC_HOME/sockets``)."""
    from htc.daemons.service import DaemonPaths, home_dir

    return UnixTransport(DaemonPaths(home_dir()).sockets)


async def send_command_async(address: str, msg: m.Message, *, transport: Transport | None = None,
                             timeout: float = DEFAULT_TIMEOUT) -> m.Message:
    """Send ``msg`` to the daemon at ``address`` and return its reply.

    Args:
        address: the daemon's name (``"collector"``, ``"master"``, ``"schedd"``).
        msg: the request.
        transport: how to reach it (default: this machine's pool).
        timeout: seconds for connecting and for the reply.

    Returns:
        The reply, of the type ``msg.reply_type`` names.

    Raises:
        DaemonUnreachable: the daemon is not running (start the pool with 'htc pool start').
        RemoteError: the daemon refused the request; its reason is in the message.
        PeerError: the daemon broke the protocol or went away mid-request.
    """
    transport = transport or default_transport()
    try:
        conn = await transport.open_connection(address, timeout=timeout)
    except DaemonUnreachable as exc:
        raise await _why_unreachable(address, transport, exc) from exc
    async with conn:
        return await conn.request(msg, timeout=timeout)


#: the master's states of a daemon that is not serving, and what a tool says of each
_NOT_SERVING = {"Off": "is off (turn it on with 'htc on -daemon {name}')",
                "Stopping": "is being stopped",
                "Starting": "is starting; try again in a moment",
                "Restarting": "is restarting; try again in a moment",
                "Backoff": "exited and the master restarts it soon; try again in a moment",
                "GaveUp": "kept exiting and the master gave up restarting it (see its log; "
                          "'htc on -daemon {name}' tries again)"}


async def _why_unreachable(address: str, transport: Transport, exc: DaemonUnreachable) -> DaemonUnreachable:
    """A daemon of a running pool that its master holds off (``htc off -daemon SCHEDD``) is
    reported as such, not as a pool that may not be running; else ``exc`` unchanged."""
    if address == "master":
        return exc
    try:
        conn = await transport.open_connection("master", timeout=2.0)
        async with conn:
            status = await conn.request(m.QueryMaster(), timeout=2.0)
    except Exception:  # no master either: the pool is not running, as exc says
        return exc
    for daemon in getattr(status, "daemons", ()):
        if daemon.name.lower() == address.lower() and daemon.state in _NOT_SERVING:
            what = _NOT_SERVING[daemon.state].format(name=daemon.name)
            return DaemonUnreachable(f"the pool is running but its {daemon.name} daemon {what}")
    return exc


def _run(coro):
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise UsageError("this htc call blocks and cannot run inside an event loop; "
                     "await its *_async version instead")


def send_command(address: str, msg: m.Message, *, transport: Transport | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> m.Message:
    """Blocking :func:`send_command_async` (same arguments, result and errors).

    Raises:
        UsageError: called from inside a running event loop.
    """
    return _run(send_command_async(address, msg, transport=transport, timeout=timeout))


async def query_collector_async(ad_type: AdType = AdType.Any, constraint: str = "",
                                projection: Iterable[str] = (), *, limit: int | None = None,
                                address: str = "collector", transport: Transport | None = None,
                                timeout: float = DEFAULT_TIMEOUT, private: bool = False) -> list[ClassAd]:
    """Ads of ``ad_type`` in the collector for which ``constraint`` is true.

    Args:
        ad_type: which kind (``AdType.Startd`` for slots; ``AdType.Any`` for all).
        constraint: a ClassAd expression; empty matches every ad.
        projection: attribute names to keep (empty: whole ads).
        limit: at most this many ads.
        address: the collector's name.
        transport, timeout: as for :func:`send_command_async`.
        private: with private attributes (``ClaimId``); needs NEGOTIATOR (htc.wire.private).

    Returns:
        The ads, parsed, in the collector's order (by type, then Name).

    Raises:
        RemoteError: the constraint does not parse (code ``bad_request``).
        DaemonUnreachable, PeerError: as for :func:`send_command_async`.
    """
    reply = await send_command_async(
        address, m.QueryAds(ad_type=ad_type, constraint=constraint, projection=tuple(projection), limit=limit,
                             private=private),
        transport=transport, timeout=timeout)
    return [ClassAd(text) for text in reply.ads]


def query_collector(ad_type: AdType = AdType.Any, constraint: str = "", projection: Iterable[str] = (), *,
                    limit: int | None = None, address: str = "collector", transport: Transport | None = None,
                    timeout: float = DEFAULT_TIMEOUT, private: bool = False) -> list[ClassAd]:
    """Blocking :func:`query_collector_async` (same arguments, result and errors)."""
    return _run(query_collector_async(ad_type, constraint, projection, limit=limit, address=address,
                                      transport=transport, timeout=timeout, private=private))


def query_master(*, address: str = "master", transport: Transport | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> m.MasterStatus:
    """The master's view of its daemons (state, pid, restarts); errors as for :func:`send_command`."""
    return send_command(address, m.QueryMaster(), transport=transport, timeout=timeout)


def ping(address: str, *, transport: Transport | None = None, timeout: float = 5.0) -> m.Pong:
    """Ask a daemon who it is; errors as for :func:`send_command`."""
    return send_command(address, m.Ping(), transport=transport, timeout=timeout)

"""Messages of the network path: what the shared port tells a daemon about a forwarded peer."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from htc.wire.messages.schema import Message

#: an IPv4/IPv6 address as the shared port saw it (no host names: they are not proof of anything)
PeerAddress = Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[0-9A-Fa-f:.]+$")]
#: ``user@domain`` as a token's ``sub`` names it
IdentityName = Annotated[str, Meta(min_length=3, max_length=256, pattern=r"^[^@\s/]+@[^@\s/]+$")]
#: how the identity was proved
AuthMethod = Annotated[str, Meta(pattern=r"^(|token|pool|ssh-key)$")]
#: an authorization level a token's scope names (``READ`` from ``condor:/READ``)
ScopeLevel = Annotated[str, Meta(min_length=1, max_length=32, pattern=r"^[A-Z_]+$")]


class Forwarded(Message, frozen=True):
    """The preamble the shared port sends a daemon before a network peer's bytes: the peer's
    address, the identity it proved (None: none) and how (``token``, ``pool``, ``ssh-key``, ""),
    and the levels its token's scope limits it to (``("READ",)``; empty: no limit beyond the
    ALLOW/DENY lists). A daemon believes it only from root or its own account (htc.wire.transport)."""

    host: PeerAddress
    identity: IdentityName | None = None
    authenticated_by: AuthMethod = ""
    scopes: Annotated[tuple[ScopeLevel, ...], Meta(max_length=16)] = ()

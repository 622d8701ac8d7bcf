"""Who a peer is: the identity the ALLOW/DENY lists of :mod:`htc.wire.authz` are matched against.

Theory of operation
-------------------
A peer on this host is named by the kernel: a Unix socket's peer credentials (SO_PEERCRED) give
its uid, which :func:`identify` maps to ``name@UID_DOMAIN`` through the password database. Root
and the pool's own account are the *daemon identity* and also answer to ``condor@UID_DOMAIN`` and
``condor_pool@UID_DOMAIN``. A uid with no passwd entry is ``unauthenticated@unmapped``.

A peer on another host reaches a daemon through its host's shared port, which tells the daemon
the peer's address and what it proved (:class:`~htc.wire.transport.PeerInfo` ``host``,
``identity``, ``authenticated_by``). :func:`identify_remote` turns that into an identity: the
proved name (``alice@pool``, from a token's ``sub``), or for a peer that proved the pool key the
pool's daemon identity ``condor_pool@TRUST_DOMAIN``; a peer that proved nothing is
``unauthenticated@unmapped``. A token's *scope* (``condor:/READ``) stays with the identity as
``scopes``: the levels the holder may use at most, whatever the lists grant the name. A remote identity keeps the peer's address, so the host part of a
list entry is matched against *that* address (and its names), not against this host.

Nothing here does I/O except :func:`user_of_uid` (the password database) and
:func:`host_names_of` (a cached reverse lookup).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["DAEMON_ALIASES", "UNMAPPED", "Identity", "identify", "identify_remote", "host_names_of", "user_of_uid"]

#: the identity of a peer nobody can name (no passwd entry for its uid, no credentials)
UNMAPPED = "unauthenticated@unmapped"
#: the names HTCondor's daemons authenticate as; the daemon identity answers to them too
DAEMON_ALIASES = ("condor", "condor_pool")


@dataclass(frozen=True)
class Identity:
    """An authenticated peer: ``name`` is ``user@domain`` (``unauthenticated@unmapped`` if none).

    ``user`` is the local account name (None when unmapped); ``aliases`` are further names the
    lists may use for it (the daemon identity's ``condor@domain``).
    """

    name: str
    user: str | None = None
    uid: int | None = None
    pid: int | None = None
    aliases: tuple[str, ...] = ()
    #: a peer on another host: its address (host parts of entries match it, not this host)
    host: str | None = None
    #: how a network peer proved its name (``token``, ``pool``, ``ssh-key``; "" for none or local)
    authenticated_by: str = ""
    #: names of ``host`` (reverse lookup), matched by host-name patterns such as ``*/cm.example``
    host_names: tuple[str, ...] = ()
    #: the levels a token's scope limits this peer to (``("READ",)``); (): no limit
    scopes: tuple[str, ...] = ()

    @property
    def unmapped(self) -> bool:
        """True for a peer without a local account (HTCondor's ``*@unmapped``)."""
        return self.name.lower().endswith("@unmapped")

    @property
    def remote(self) -> bool:
        """True for a peer that came over the network (it has an address)."""
        return self.host is not None

    @property
    def names(self) -> tuple[str, ...]:
        """Every name the lists may match: ``name`` and the aliases."""
        return (self.name, *self.aliases)

    def describe(self) -> str:
        """``alice@host (uid 1001, pid 4242)`` (``alice@pool from 10.0.0.5 by token``) for logs."""
        if self.remote:
            how = f"by {self.authenticated_by}" if self.authenticated_by else "unauthenticated"
            if self.scopes:
                how += f" scoped to {' '.join(self.scopes)}"
            return f"{self.name} (from {self.host}, {how})"
        bits = [f"uid {self.uid}" if self.uid is not None else "uid unknown"]
        if self.pid is not None:
            bits.append(f"pid {self.pid}")
        return f"{self.name} ({', '.join(bits)})"


def identify(uid: int | None, pid: int | None, *, uid_domain: str, user_of_uid: Callable[[int], str | None],
             daemon_uids: Iterable[int] = (0,)) -> Identity:
    """The identity of a peer the kernel names by ``uid`` (None: the transport could not tell)."""
    user = user_of_uid(uid) if uid is not None else None
    if user is None:
        return Identity(UNMAPPED, None, uid, pid)
    aliases = tuple(f"{a}@{uid_domain}" for a in DAEMON_ALIASES) if uid in set(daemon_uids) else ()
    return Identity(f"{user}@{uid_domain}", user, uid, pid, aliases)


def identify_remote(identity: str | None, host: str, authenticated_by: str, *, trust_domain: str,
                    host_names: tuple[str, ...] = (), scopes: tuple[str, ...] = ()) -> Identity:
    """The identity of a peer that came over the network from ``host``.

    ``identity`` is what it proved (``alice@pool``) and ``authenticated_by`` how; a peer that
    proved nothing is ``unauthenticated@unmapped``. A peer that proved the pool key
    (``authenticated_by == "pool"``) is the pool's daemon identity ``condor_pool@TRUST_DOMAIN``
    and answers to ``condor@TRUST_DOMAIN`` too. Its ``user`` is the identity's user part, the
    ``Owner`` of jobs it submits (no local account is looked up: which account runs a job is the
    execute host's decision, by UID_DOMAIN). ``scopes`` are its token's levels (an upper bound).
    """
    if authenticated_by == "pool":
        identity = f"condor_pool@{trust_domain}"
    if not identity or not authenticated_by or "@" not in identity:
        return Identity(UNMAPPED, None, host=host, host_names=host_names)
    user, _, domain = identity.partition("@")
    aliases = ()
    if user.lower() in DAEMON_ALIASES and domain.lower() == trust_domain.lower():
        aliases = tuple(f"{a}@{domain}" for a in DAEMON_ALIASES if f"{a}@{domain}".lower() != identity.lower())
    return Identity(identity, user, aliases=aliases, host=host, authenticated_by=authenticated_by,
                    host_names=host_names, scopes=tuple(scopes))


def user_of_uid(uid: int) -> str | None:
    """The account name of ``uid`` in the password database, or None."""
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


@lru_cache(maxsize=4096)
def host_names_of(address: str) -> tuple[str, ...]:
    """The names of a network ``address`` by reverse lookup (``/etc/hosts``, DNS), () if none.

    Asked only when a policy has host-name patterns (``*/cm.example``); the answer is cached for
    the daemon's life, so a slow resolver costs one lookup per peer address.
    """
    try:
        name, aliases, _ = socket.gethostbyaddr(address)
    except (OSError, UnicodeError):
        return ()
    return tuple(dict.fromkeys(n.lower().rstrip(".") for n in (name, *aliases) if n))

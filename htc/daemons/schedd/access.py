"""Who may do what at the schedd: the owner of submitted jobs, and who may act on a job.

The owner of submitted jobs is the peer the socket names (SO_PEERCRED), never what the ads
claim: ``Owner`` and ``User`` are set from the authenticated account (the service's
authorization step maps the uid; a core fed directly maps it with ``user_of_uid``). A peer with
no account is refused. A claimed ``Owner`` naming somebody else is accepted only from a pool
administrator (ALLOW_ADMINISTRATOR, as HTCondor's QUEUE_SUPER_USERS). Only a job's owner or an
administrator acts on a job or edits it. Root may submit (htc's tests and executors run as root);
its jobs never run as root (the startd runs them as a slot user).

A peer from another host is named by the identity it proved (``alice@pool``, a token's subject):
its jobs get ``Owner`` = the user part (``alice``) and ``User`` = the identity itself, which is
``owner@UID_DOMAIN`` exactly when the identity's domain is the pool's UID_DOMAIN (and then an
execute host of that UID_DOMAIN runs them as its account ``alice``, if it has one). Such a peer
acts on a job only when the job's ``User`` is its identity: ``alice@pool`` and ``alice@other``
are different people, though both are Owner ``alice``. A peer that proved nothing is refused.
"""

from __future__ import annotations

import logging
import pwd
from collections.abc import Callable

from htc.daemons import core as c
from htc.daemons.schedd.userlog import literal
from htc.errors import UsageError

__all__ = ["Access", "Denied", "denied_log", "user_of_uid"]


class Denied(UsageError):
    """The requester may not do this (submit for another user)."""


def user_of_uid(uid: int) -> str | None:
    """The user name of ``uid`` in the password database (None: it has none)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def denied_log(event: c.Received, what: str, why: str) -> c.Log:
    """The daemon-log line of a request refused for ownership (as the service logs its refusals)."""
    peer = event.peer
    who = peer.user or "an unmapped peer"
    where = (f"{peer.identity or 'unauthenticated@unmapped'} from {peer.host}" if peer.host is not None
             else f"uid {peer.uid}, pid {peer.pid}")
    return c.Log(f"PERMISSION DENIED to {who} ({where}) for {what}: {why}", logging.WARNING)


class Access:
    """Decides who a peer is and what it may do.

    Args:
        user_of_uid: maps a peer's uid to a user name (for a core fed without the service's
            authorization step).
        own_uid: the uid the schedd runs as (may submit for others, like root).
    """

    def __init__(self, user_of_uid: Callable[[int], str | None], own_uid: int):
        self.user_of_uid = user_of_uid
        self.own_uid = own_uid

    def user(self, event: c.Received) -> str | None:
        """The account of the peer: as the service's authorization mapped it, else by its uid."""
        peer = event.peer
        if peer.user is not None:
            return peer.user
        return self.user_of_uid(peer.uid) if peer.uid is not None else None

    def administrator(self, event: c.Received) -> bool:
        """Whether the peer administers the pool (ALLOW_ADMINISTRATOR, decided by the service; a
        core fed without it falls back to root and the schedd's own account)."""
        peer = event.peer
        if peer.administrator is not None:
            return peer.administrator
        return peer.uid is not None and peer.uid in (0, self.own_uid)

    def owner(self, event: c.Received, claimed: str | None) -> str:
        """The owner of jobs the peer submits: its own account, whatever the ad claims.

        Raises:
            Denied: the peer has no account (a uid without a passwd entry), or claims another
                owner without being an administrator.
        """
        name = self.user(event)
        if name is None and event.peer.host is not None:
            raise Denied(f"the peer from {event.peer.host} proved no identity; only authenticated users "
                         "may submit jobs (present a token: htc token create -identity USER@DOMAIN)")
        if name is None:
            uid = event.peer.uid
            raise Denied(f"uid {uid if uid is not None else '(unknown)'} has no account in the password database; "
                         "only local users may submit jobs (the Owner in the ad is not taken on trust)")
        if claimed and claimed != name:
            if not self.administrator(event):
                raise Denied(f"user {name} may not submit jobs owned by {claimed}; submit as {claimed}")
            return claimed
        return name

    def user_attribute(self, event: c.Received, owner: str, uid_domain: str) -> str:
        """The ``User`` of jobs the peer submits as ``owner``: a network peer's own identity,
        else ``owner@UID_DOMAIN``."""
        peer = event.peer
        if peer.host is not None and peer.identity and owner == self.user(event):
            return peer.identity
        return f"{owner}@{uid_domain}"

    def may_change(self, event: c.Received, job) -> bool:
        """Only a job's owner and the pool's administrators may act on it or edit it."""
        if self.administrator(event):
            return True
        user = self.user(event)
        if user is None or user != job.owner:
            return False
        peer = event.peer
        if peer.host is not None:  # from another host: the job's User must be the identity itself
            return bool(peer.identity) and literal(job, "User") == peer.identity
        return True

"""Who may send which message: identities, authorization levels and the ALLOW/DENY policy.

Theory of operation
-------------------
Every request a daemon receives needs an *authorization level*, as every HTCondor command is
registered at one: ``READ`` to look (``QueryJobs``, ``QueryAds``), ``WRITE`` to change one's
own things (``Submit``, ``ActOnJobs``), ``ADMINISTRATOR`` to run the pool (``DaemonsOff``,
``DrainJobs``, ``Reconfig``), ``DAEMON`` for what daemons tell each other (claims, starter
reports), ``NEGOTIATOR`` for what only the negotiator sends (``MatchNotify``,
``GetResourceRequests``), and ``ADVERTISE_STARTD`` / ``ADVERTISE_SCHEDD`` / ``ADVERTISE_MASTER``
for ads that join the pool. :data:`REQUIRED` is that table, per daemon, in one place;
:func:`level_for` reads it (a message a daemon's table does not list needs ``DAEMON``: unknown
means closed).

Who asks is an *identity* (:mod:`htc.wire.identity`): for a peer on this host the one the kernel
vouches for (SO_PEERCRED uid -> ``name@UID_DOMAIN``; the pool's account and root are the daemon
identity and answer to ``condor@...``/``condor_pool@...`` too); for a peer from another host the
one it proved at the shared port (a token's subject, ``alice@pool``; the pool key makes it
``condor_pool@TRUST_DOMAIN``). A peer nobody can name is ``unauthenticated@unmapped`` and is
refused every level above ``READ`` whatever the lists say (HTCondor refuses job management to
``*@unmapped`` the same way); from another host it reads only where ``ALLOW_READ`` is *configured*
to let it, not by the built-in default.

:class:`Policy` decides, with HTCondor's rules (``IpVerify::Verify``), whether an identity has a
level:

* ``DENY_<L>`` beats ``ALLOW_<L>``; ``DENY_<L> = *`` refuses everyone.
* A level other than READ or WRITE with no ``ALLOW_<L>`` list is refused to everyone.
* ``ALLOW_<L> = *`` allows everyone not in ``DENY_<L>``.
* Otherwise an identity in neither list has the level only if a level that implies it does:
  ``WRITE``, ``NEGOTIATOR``, ``CONFIG`` and the ``ADVERTISE_*`` levels imply ``READ``;
  ``ADMINISTRATOR`` and ``DAEMON`` imply ``WRITE`` (so also ``READ``).

A list comes from the first *non-empty* name of its chain, the per-daemon form first:
``ALLOW_WRITE_SCHEDD``, ``ALLOW_WRITE``, (for the ``ADVERTISE_*`` levels ``ALLOW_DAEMON_<SUBSYS>``
and ``ALLOW_DAEMON``), ``ALLOW_DEFAULT_<SUBSYS>``, ``ALLOW_DEFAULT``; ``SCHEDD.ALLOW_WRITE`` is the
same as ``ALLOW_WRITE_SCHEDD`` for the schedd. An empty value counts as no list, as HTCondor's
``param`` returns nothing for it. When *no* name of the chain is set at all, the built-in
default of :func:`default_lists` applies -- a personal pool as HTCondor's ``use SECURITY :
USER_BASED`` makes it: READ for everyone, WRITE for everyone when the daemons run as root (each
user manages only their own jobs: the schedd checks ownership) and only for the pool's owner
otherwise, and ADMINISTRATOR, DAEMON and NEGOTIATOR for the daemon identity.

A token may carry a *scope* (``htc token create -authz READ``, HTCondor's ``condor:/READ``):
the levels its holder may use at most, on every daemon, whatever ALLOW_* grants the identity.
A level is within the scope when a scope level implies it (``WRITE`` covers ``READ``, as
HTCondor's permission hierarchy does); ``ALLOW`` (Ping) is always. The scope is checked first,
so a scoped token of an administrator is no administrator.

Entries are HTCondor's ``user@domain/host`` (``*`` wildcards in either part; no ``/`` means any
host; no ``@`` and no ``/`` means a host, any user). For a peer on this host a host part matches
when it names this machine: its host names, ``localhost``, its addresses, or a network
(``127.0.0.0/8``) holding one of them. For a peer from another host it matches that peer's
address (``10.200.0.*``, ``10.200.0.0/24``) or, for a name pattern (``*/cm.example``), the names
a reverse lookup gives for the address (looked up only when some entry has a name pattern).

On a host in *network mode* (COLLECTOR_HOST names a real port) the built-in defaults add the
pool's daemons on other hosts, ``condor_pool@TRUST_DOMAIN``, to ADMINISTRATOR, DAEMON and
NEGOTIATOR (so to the ADVERTISE levels), and let every authenticated identity WRITE (the schedd
still lets each act only on their own jobs).

Nothing here does I/O: the service builds a :class:`Policy` from the configuration
(:func:`policy_from_config`) and asks :meth:`Policy.check` before a message reaches the core.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from htc.wire import messages as m
from htc.wire.flock_access import flock_entries
from htc.wire.identity import DAEMON_ALIASES, UNMAPPED, Identity, identify, identify_remote, user_of_uid

__all__ = ["Level", "Identity", "Entry", "AccessList", "Decision", "Policy", "Authorizer", "REQUIRED", "UNMAPPED",
           "DAEMON_ALIASES", "level_for", "identify", "implied_levels", "default_lists", "parse_list", "build_policy",
           "policy_from_config", "authorizer_from_config", "user_of_uid", "identify_remote",
           "network_trust_domain", "in_scope"]


class Level(enum.Enum):
    """HTCondor's authorization levels (``DCpermission``)."""

    ALLOW = "ALLOW"                        # anyone (Ping)
    READ = "READ"
    WRITE = "WRITE"
    NEGOTIATOR = "NEGOTIATOR"
    ADMINISTRATOR = "ADMINISTRATOR"
    CONFIG = "CONFIG"
    DAEMON = "DAEMON"
    ADVERTISE_STARTD = "ADVERTISE_STARTD"
    ADVERTISE_SCHEDD = "ADVERTISE_SCHEDD"
    ADVERTISE_MASTER = "ADVERTISE_MASTER"


L = Level

#: the levels whose grant also grants ``level`` directly (HTCondor's DCpermissionHierarchy)
DIRECTLY_IMPLIED_BY: Mapping[Level, tuple[Level, ...]] = {
    L.READ: (L.WRITE, L.NEGOTIATOR, L.CONFIG, L.ADVERTISE_STARTD, L.ADVERTISE_SCHEDD, L.ADVERTISE_MASTER),
    L.WRITE: (L.ADMINISTRATOR, L.DAEMON),
}

#: the level whose configuration a level falls back to (ALLOW_ADVERTISE_STARTD -> ALLOW_DAEMON)
CONFIG_FALLBACK: Mapping[Level, Level] = {L.ADVERTISE_STARTD: L.DAEMON, L.ADVERTISE_SCHEDD: L.DAEMON,
                                          L.ADVERTISE_MASTER: L.DAEMON}



def implied_levels(level: Level) -> tuple[Level, ...]:
    """``level`` and every level it implies (ADMINISTRATOR -> ADMINISTRATOR, WRITE, READ)."""
    out = [level]
    grew = True
    while grew:
        grew = False
        for lower, uppers in DIRECTLY_IMPLIED_BY.items():
            if lower not in out and any(u in out for u in uppers):
                out.append(lower)
                grew = True
    return tuple(out)


def in_scope(level: Level, scopes: Iterable[str]) -> bool:
    """Whether a token scoped to ``scopes`` (level names) may use ``level``: some scope level
    implies it. Names that are no level grant nothing."""
    if level is L.ALLOW:
        return True
    known = {lv.value: lv for lv in Level}
    return any(level in implied_levels(known[s]) for s in scopes if s in known)


# --- what each message needs ---------------------------------------------------------------

def _by_ad_type(msg: m.UpdateAd | m.InvalidateAd) -> Level:
    return {m.AdType.Startd: L.ADVERTISE_STARTD, m.AdType.Schedd: L.ADVERTISE_SCHEDD,
            m.AdType.Submitter: L.ADVERTISE_SCHEDD, m.AdType.Master: L.ADVERTISE_MASTER,
            m.AdType.Negotiator: L.NEGOTIATOR, m.AdType.Accounting: L.NEGOTIATOR}.get(msg.ad_type, L.DAEMON)


def _query_ads(msg: m.QueryAds) -> Level:
    # private attributes (ClaimId) only for the negotiator, as HTCondor's QUERY_STARTD_PVT_ADS
    return L.NEGOTIATOR if msg.private else L.READ


def _vacate(msg: m.Vacate) -> Level:
    # the schedd vacating its own claim is daemon business; condor_vacate of slots is administration
    return L.DAEMON if msg.claim_id else L.ADMINISTRATOR


LevelRule = Level | Callable[[m.Message], Level]

#: every daemon answers these the same way (the service, not the core, handles them)
COMMON: Mapping[type[m.Message], LevelRule] = {m.Ping: L.ALLOW, m.Reconfig: L.ADMINISTRATOR}

#: daemon -> message type -> the level it needs (a level, or a function of the message)
REQUIRED: Mapping[str, Mapping[type[m.Message], LevelRule]] = {
    "master": {m.QueryMaster: L.READ, m.DaemonsOn: L.ADMINISTRATOR, m.DaemonsOff: L.ADMINISTRATOR,
               m.DaemonsRestart: L.ADMINISTRATOR},
    "collector": {m.QueryAds: _query_ads, m.UpdateAd: _by_ad_type, m.InvalidateAd: _by_ad_type},
    "negotiator": {m.Reschedule: L.WRITE, m.SetUserPriority: L.ADMINISTRATOR},
    "schedd": {m.QueryJobs: L.READ, m.Submit: L.WRITE, m.SubmitClusters: L.WRITE, m.ActOnJobs: L.WRITE,
               m.EditJobs: L.WRITE,
               m.Reschedule: L.WRITE, m.GetResourceRequests: L.NEGOTIATOR, m.MatchNotify: L.NEGOTIATOR,
               m.StarterUpdate: L.DAEMON, m.JobOutput: L.DAEMON, m.JobExited: L.DAEMON,
               m.CallsDone: L.DAEMON, m.ReleaseClaim: L.DAEMON, m.FetchInput: L.DAEMON, m.SendOutput: L.DAEMON,
               m.SpoolInput: L.WRITE, m.FetchOutput: L.WRITE, m.OpenSession: L.WRITE,
               # (inside an OpenSession conversation; the level is checked when it opens)
               m.PutCallFiles: L.WRITE, m.SubmitCalls: L.WRITE, m.CloseSession: L.WRITE,
               m.SendCheckpoint: L.DAEMON, m.FetchCheckpoint: L.DAEMON,
               m.CheckpointJobs: L.WRITE, m.RelayJobIO: L.DAEMON},  # (and only the job's owner or an administrator: the schedd checks)
    "startd": {m.MatchNotify: L.NEGOTIATOR, m.RequestClaim: L.DAEMON, m.ActivateClaim: L.DAEMON,
               m.RunCalls: L.DAEMON, m.ClaimKeepAlive: L.DAEMON, m.ReleaseClaim: L.DAEMON,
               m.Suspend: L.DAEMON, m.Continue: L.DAEMON, m.Vacate: _vacate, m.CheckpointClaim: L.DAEMON,
               m.DrainJobs: L.ADMINISTRATOR, m.CancelDrainJobs: L.ADMINISTRATOR,
               m.PeekJob: L.READ},  # and only the job's owner or an administrator (the startd checks)
}


def level_for(daemon: str, msg: m.Message) -> Level:
    """The level ``daemon`` requires for ``msg`` (DAEMON for a message its table does not list)."""
    rule = COMMON.get(type(msg)) or REQUIRED.get(daemon, {}).get(type(msg), L.DAEMON)
    return rule if isinstance(rule, Level) else rule(msg)


# --- lists ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """One list entry, split as HTCondor's ``split_entry`` does."""

    user: str
    host: str
    text: str


def parse_entry(text: str) -> Entry:
    """``alice@x/host`` -> user ``alice@x``, host ``host``; ``*@x`` -> any host; ``host`` -> any user."""
    if text.count("/") >= 2:  # user/net/mask
        user, _, host = text.partition("/")
        return Entry(user, host, text)
    if "/" in text:
        left, _, right = text.partition("/")
        if "@" in left or left.startswith("*"):
            return Entry(left, right, text)
        return Entry("*", text, text)  # net/mask
    if "@" in text:
        return Entry(text, "*", text)
    return Entry("*", text, text)


def parse_list(text: str) -> tuple[Entry, ...]:
    """The entries of an ALLOW/DENY value (commas or white space between them)."""
    return tuple(parse_entry(item) for item in re.split(r"[,\s]+", text) if item)


@lru_cache(maxsize=1024)
def _wildcard(pattern: str) -> re.Pattern:
    return re.compile("".join(".*" if c == "*" else re.escape(c) for c in pattern), re.IGNORECASE)


def _user_matches(pattern: str, names: tuple[str, ...]) -> bool:
    if pattern == "*":
        return True
    rx = _wildcard(pattern)
    return any(rx.fullmatch(name) for name in names)


def _host_matches(pattern: str, local_hosts: frozenset[str]) -> bool:
    if pattern in ("*", ""):
        return True
    try:
        net = ipaddress.ip_network(pattern, strict=False)
    except ValueError:
        net = None
    if net is not None:
        for host in local_hosts:
            try:
                if ipaddress.ip_address(host) in net:
                    return True
            except ValueError:
                continue
        return False
    rx = _wildcard(pattern.rstrip("."))
    return any(rx.fullmatch(host) for host in local_hosts)


def _peer_hosts(identity: Identity) -> frozenset[str]:
    return frozenset(h.lower().rstrip(".") for h in (identity.host or "", *identity.host_names) if h)


def _is_name_pattern(pattern: str) -> bool:
    if pattern in ("*", ""):
        return False
    try:
        ipaddress.ip_network(pattern, strict=False)
        return False
    except ValueError:
        return not re.fullmatch(r"[0-9.*:]+", pattern)


@dataclass(frozen=True)
class AccessList:
    """The entries of one ALLOW or DENY list and where they come from (for messages)."""

    entries: tuple[Entry, ...]
    source: str
    #: the built-in default, not a configured list (a remote unauthenticated peer needs a configured one)
    builtin: bool = False

    @property
    def everyone(self) -> bool:
        """True for HTCondor's optimised ``*`` (or ``*/*``)."""
        return len(self.entries) == 1 and self.entries[0].text in ("*", "*/*")

    def match(self, identity: Identity, local_hosts: frozenset[str]) -> Entry | None:
        """The first entry naming ``identity`` (host parts: its address if remote, else this host)."""
        hosts = _peer_hosts(identity) if identity.remote else local_hosts
        for entry in self.entries:
            if _user_matches(entry.user, identity.names) and _host_matches(entry.host, hosts):
                return entry
        return None

    @property
    def names_hosts(self) -> bool:
        """True when an entry's host part is a host name pattern (needs the peer's names)."""
        return any(_is_name_pattern(e.host) for e in self.entries)


@dataclass(frozen=True)
class Decision:
    """The answer of :meth:`Policy.check`: allowed or not, and why (names the list that decided)."""

    allowed: bool
    level: Level
    reason: str

    def __bool__(self) -> bool:
        return self.allowed


@dataclass
class Policy:
    """The ALLOW/DENY lists of one daemon, and HTCondor's rules for them (see the module header).

    Args:
        allow: level -> its ALLOW list (None: no list).
        deny: level -> its DENY list (None: no list).
        local_hosts: the names and addresses of this host, which host parts are matched against.
    """

    allow: Mapping[Level, AccessList | None]
    deny: Mapping[Level, AccessList | None]
    local_hosts: frozenset[str] = frozenset({"localhost", "127.0.0.1", "::1"})
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def needs_host_names(self) -> bool:
        """True when some entry names hosts by name, so a remote peer's address must be looked up."""
        return any(lst is not None and lst.names_hosts for lists in (self.allow, self.deny) for lst in lists.values())

    def check(self, level: Level, identity: Identity) -> Decision:
        """Whether ``identity`` has ``level``; the reason says which list decided."""
        key = (level, identity.names, identity.host, identity.host_names, identity.scopes)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._verify(level, identity)
        return found

    def allows(self, level: Level, identity: Identity) -> bool:
        """``check(level, identity).allowed``."""
        return self.check(level, identity).allowed

    def _verify(self, level: Level, who: Identity) -> Decision:
        name = level.value
        if level is L.ALLOW:
            return Decision(True, level, "anyone may do this")
        if who.scopes and not in_scope(level, who.scopes):
            return Decision(False, level, f"the token of {who.name} is limited by its scope to "
                                          f"{' '.join(who.scopes)}, which does not include {name}")
        if who.unmapped and level is not L.READ:
            why = ("it proved no identity (no token, pool key or listed SSH key)" if who.remote
                   else "the uid has no account in the password database")
            return Decision(False, level, f"{who.name} is refused every level above READ: {why}")
        allow, deny = self.allow.get(level), self.deny.get(level)
        if deny is not None and deny.everyone:
            return Decision(False, level, f"{deny.source} = * refuses everyone")
        if allow is None and level not in (L.READ, L.WRITE):
            return Decision(False, level, f"no ALLOW_{name} list: nobody has {name}")
        if deny is not None:
            entry = deny.match(who, self.local_hosts)
            if entry is not None:
                return Decision(False, level, f"{deny.source} lists {entry.text}")
        if allow is not None and allow.builtin and who.unmapped and who.remote:
            return Decision(False, level, f"{who.name} from another host may read only where ALLOW_{name} "
                                          "is configured to let it (the built-in default does not)")
        if allow is not None:
            if allow.everyone:
                return Decision(True, level, f"{allow.source} = * allows everyone")
            entry = allow.match(who, self.local_hosts)
            if entry is not None:
                return Decision(True, level, f"{allow.source} lists {entry.text}")
        for parent in DIRECTLY_IMPLIED_BY.get(level, ()):
            above = self.check(parent, who)
            if above.allowed:
                return Decision(True, level, f"{name} is implied by {parent.value}: {above.reason}")
        where = allow.source if allow is not None else f"no ALLOW_{name} list"
        return Decision(False, level, f"{where} does not name {who.name}"
                        + (f", nor does any level that implies {name}" if level in DIRECTLY_IMPLIED_BY else ""))


# --- from the configuration ------------------------------------------------------------------

def default_lists(uid_domain: str, pool_user: str, pool_is_root: bool,
                  trust_domain: str | None = None) -> dict[Level, str]:
    """The ALLOW lists used when the configuration sets none of a level's chain.

    A personal pool, as HTCondor's ``use SECURITY : USER_BASED`` sets one up: everyone may
    read; everyone may write when the daemons run as root (each user's jobs run as that user;
    the schedd lets users act only on their own jobs), otherwise only the pool's owner; the
    daemon identity (root and the pool's account) administers and is the only DAEMON and
    NEGOTIATOR. CONFIG has no list: nobody changes configuration remotely.

    A host in network mode (``trust_domain`` given) also lets the pool's daemons on other hosts,
    ``condor_pool@TRUST_DOMAIN``, administer and be DAEMON and NEGOTIATOR (as ``use SECURITY :
    recommended_v9_0`` does with ``condor_pool@*``), and lets every authenticated user write
    (their own jobs only; ``*@unmapped`` never writes). A remote peer that proved nothing may
    not even read unless ALLOW_READ is configured to let it.
    """
    local = [f"root@{uid_domain}", f"{pool_user}@{uid_domain}"]
    pool = [f"condor_pool@{trust_domain}"] if trust_domain else []
    daemons = ", ".join(dict.fromkeys(local + pool))
    write = "*" if pool_is_root or trust_domain else ", ".join(dict.fromkeys(local))
    return {L.READ: "*", L.WRITE: write, L.ADMINISTRATOR: daemons, L.DAEMON: daemons, L.NEGOTIATOR: daemons}


#: lookup(name) -> (value or None when the name is set nowhere, where it is set)
Lookup = Callable[[str], tuple[str | None, str]]


def _chain(kind: str, level: Level, subsys: str) -> list[str]:
    names = [f"{kind}_{level.value}_{subsys}", f"{kind}_{level.value}"]
    fallback = CONFIG_FALLBACK.get(level)
    if fallback is not None:
        names += [f"{kind}_{fallback.value}_{subsys}", f"{kind}_{fallback.value}"]
    return names + [f"{kind}_DEFAULT_{subsys}", f"{kind}_DEFAULT"]


def _resolve(kind: str, level: Level, subsys: str, lookup: Lookup,
             defaults: Mapping[Level, str]) -> AccessList | None:
    any_set = False
    for name in _chain(kind, level, subsys):
        value, where = lookup(name)
        if value is None:
            continue
        any_set = True
        entries = parse_list(value)
        if entries:
            return AccessList(entries, f"{name}{f' ({where})' if where else ''}")
    if any_set or kind != "ALLOW":
        return None
    text = defaults.get(CONFIG_FALLBACK.get(level, level)) or defaults.get(level)
    if not text:
        return None
    return AccessList(parse_list(text), f"ALLOW_{level.value} (built-in default: {text})", builtin=True)


def build_policy(subsystem: str, lookup: Lookup, *, uid_domain: str, pool_user: str, pool_is_root: bool,
                 local_hosts: Iterable[str] = (), trust_domain: str | None = None,
                 extra: Mapping[str, Iterable[str]] | None = None) -> Policy:
    """The policy of daemon ``subsystem`` (``SCHEDD``) from ``lookup`` of configuration names
    (``trust_domain``: the host is in network mode, see :func:`default_lists`; ``extra``: level
    name -> entries appended to its ALLOW list, what flocking grants, :mod:`htc.wire.flock_access`)."""
    subsys = subsystem.upper()
    defaults = default_lists(uid_domain, pool_user, pool_is_root, trust_domain)
    levels = [lv for lv in Level if lv is not L.ALLOW]
    allow = {lv: _resolve("ALLOW", lv, subsys, lookup, defaults) for lv in levels}
    for name, entries in (extra or {}).items():
        added = parse_list(", ".join(entries))
        current = allow[Level(name)]
        if not added or (current is not None and current.everyone):
            continue
        if current is None:
            allow[Level(name)] = AccessList(added, "FLOCK_FROM/FLOCK_TO (flocking)")
        else:
            allow[Level(name)] = AccessList(current.entries + added, f"{current.source} and FLOCK_FROM/FLOCK_TO",
                                            builtin=current.builtin)
    deny = {lv: _resolve("DENY", lv, subsys, lookup, defaults) for lv in levels}
    hosts = {h.lower().rstrip(".") for h in local_hosts if h} | {"localhost", "127.0.0.1", "::1"}
    return Policy(allow, deny, frozenset(hosts))


def network_trust_domain(config) -> str | None:
    """The pool's TRUST_DOMAIN when this host is in network mode (COLLECTOR_HOST names a real
    port; a personal pool's ``127.0.0.1:0`` does not), else None.

    TRUST_DOMAIN defaults to COLLECTOR_HOST, as in HTCondor; it is the issuer of the pool's
    tokens and the domain of its daemons' identity ``condor_pool@TRUST_DOMAIN``.
    """
    from htc.wire.address import BadAddress, parse_host_port

    collector = (config.get("COLLECTOR_HOST") or "").strip()
    if not collector:
        return None
    try:
        address = parse_host_port(collector)
    except BadAddress:
        return None
    if address.port == 0:
        return None
    return (config.get("TRUST_DOMAIN") or "").strip() or collector


def policy_from_config(config, *, pool_uid: int, user_of_uid: Callable[[int], str | None]) -> Policy:
    """The policy a daemon reads from its :class:`~htc.config.Config` (its daemons run as ``pool_uid``)."""
    def lookup(name: str) -> tuple[str | None, str]:
        origin = config.origin(name)
        if origin is None or origin.kind == "default":
            return None, ""
        where = config.where(name)
        text = f"{where[0]}:{where[1]}" if isinstance(where, tuple) else str(where)
        return config.get(name) or "", text

    domain = network_trust_domain(config)
    hosts = [config.get(n) or "" for n in ("FULL_HOSTNAME", "HOSTNAME", "IP_ADDRESS", "IPV4_ADDRESS",
                                           "IPV6_ADDRESS")]
    return build_policy(config.subsystem, lookup, uid_domain=config.get("UID_DOMAIN") or "localhost",
                        pool_user=user_of_uid(pool_uid) or str(pool_uid), pool_is_root=pool_uid == 0,
                        local_hosts=hosts, trust_domain=domain,
                        extra=flock_entries(config.subsystem, config.get) if domain else None)


@dataclass
class Authorizer:
    """What a daemon's service asks before a request reaches the core (see the module header).

    Args:
        daemon: the kind of daemon (``"schedd"``), which picks its table in :data:`REQUIRED`.
        policy: its ALLOW/DENY policy.
        uid_domain: the domain of identities (UID_DOMAIN).
        daemon_uids: the daemon identity's uids (root and the pool's account).
        user_of_uid: the password database.
        trust_domain: the pool's TRUST_DOMAIN (network mode), or None on a personal pool.
        host_names: the names of a network address (reverse lookup), asked only when the
            policy has host-name patterns.
    """

    daemon: str
    policy: Policy
    uid_domain: str
    daemon_uids: frozenset[int]
    user_of_uid: Callable[[int], str | None]
    trust_domain: str | None = None
    host_names: Callable[[str], tuple[str, ...]] = lambda host: ()

    def identify(self, uid: int | None, pid: int | None) -> Identity:
        """The identity of a peer with kernel-given ``uid`` and ``pid``."""
        return identify(uid, pid, uid_domain=self.uid_domain, user_of_uid=self.user_of_uid,
                        daemon_uids=self.daemon_uids)

    def identify_peer(self, peer) -> Identity:
        """The identity of a connection's :class:`~htc.wire.transport.PeerInfo`: from the network
        (``host``, ``identity``, ``authenticated_by``) or from the kernel (uid)."""
        if peer.host is None:
            return self.identify(peer.uid, peer.pid)
        names = self.host_names(peer.host) if self.policy.needs_host_names else ()
        return identify_remote(peer.identity, peer.host, peer.authenticated_by,
                               trust_domain=self.trust_domain or self.uid_domain, host_names=names,
                               scopes=peer.scopes)

    def check(self, msg: m.Message, identity: Identity) -> Decision:
        """Whether ``identity`` may send ``msg`` to this daemon."""
        return self.policy.check(level_for(self.daemon, msg), identity)

    def refusal(self, msg: m.Message, identity: Identity, decision: Decision) -> str:
        """The text of the ErrorReply for a refused request."""
        return (f"permission denied: {identity.describe()} may not send {type(msg).__name__} to the "
                f"{self.daemon}: that needs {decision.level.value} access, and {decision.reason}")

    def is_administrator(self, identity: Identity) -> bool:
        """Whether the policy grants ``identity`` ADMINISTRATOR (acts on every user's jobs)."""
        return self.policy.allows(L.ADMINISTRATOR, identity)

    def warnings(self) -> list[str]:
        """Problems worth a line in the daemon log: the daemon identity refused what it needs."""
        out = []
        whos = [self.identify(uid, None) for uid in sorted(self.daemon_uids)]
        if self.trust_domain:
            whos.append(identify_remote(None, "0.0.0.0", "pool", trust_domain=self.trust_domain))
        for who in whos:
            for level in (L.DAEMON, L.NEGOTIATOR, L.ADMINISTRATOR):
                decision = self.policy.check(level, who)
                if not decision.allowed:
                    out.append(f"the pool's own daemons ({who.name}) are refused {level.value} here "
                               f"({decision.reason}); requests between daemons will fail")
        return out


def authorizer_from_config(daemon: str, config, *, pool_uid: int,
                           user_of_uid: Callable[[int], str | None],
                           host_names: Callable[[str], tuple[str, ...]] | None = None) -> Authorizer:
    """The :class:`Authorizer` of ``daemon`` from its configuration; its daemons run as ``pool_uid``."""
    policy = policy_from_config(config, pool_uid=pool_uid, user_of_uid=user_of_uid)
    return Authorizer(daemon, policy, config.get("UID_DOMAIN") or "localhost", frozenset({0, pool_uid}),
                      user_of_uid, network_trust_domain(config), host_names or (lambda host: ()))

"""The shared port's service: keys checked and certified, the SSH server run, refusals logged.

:func:`make_service` refuses to build the daemon when the pool key
(SEC_TOKEN_POOL_SIGNING_KEY_FILE) or the host key (``$HTC_HOME/ssh/host_key``, created 0600 on
first start) could be read by other users, naming the file and its mode (``python -m
htc.daemons`` then exits with status 4, so the master does not restart it in a loop). At start the
host key is certified by the pool's SSH CA (:mod:`htc.wire.ssh_keys`). Tokens presented as SSH
passwords are checked against the pool key with TRUST_DOMAIN as issuer; SSH public keys listed in
SHARED_PORT_AUTHORIZED_KEYS are the other way in; every refused login is logged as
``PERMISSION DENIED`` with the client's address and why.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import sys
import time
from dataclasses import replace

from htc.daemons.clock import REAL, Clock
from htc.daemons.network import POOL_USER, trust_domain
from htc.daemons.service import DaemonPaths, DaemonService, load_daemon_config
from htc.daemons.settings import from_config
from htc.daemons.shared_port.core import SharedPort
from htc.daemons.shared_port.events import Listen, ListenFailed
from htc.daemons.shared_port.settings import SharedPortSettings
from htc.errors import UsageError
from htc.wire import tokens
from htc.wire.poolkey import read_pool_key
from htc.wire.ssh_keys import certify_host_key, load_or_create_host_key, pool_ca, read_authorized_keys
from htc.wire.ssh_server import SharedPortServer

#: the shared port's own socket name (Ping, Reconfig); never a forwarding target
ADDRESS = "shared_port"


def host_key_path(paths: DaemonPaths):
    """``$HTC_HOME/ssh/host_key``: this host's SSH key."""
    return paths.home / "ssh" / "host_key"


def settings_from_config(config) -> SharedPortSettings:
    """Build the shared port's settings from the configuration (SHARED_PORT subsystem)."""
    settings = from_config(SharedPortSettings, config)
    if not settings.trust_domain:
        settings = replace(settings, trust_domain=trust_domain(config))
    return settings


#: glibc's mallopt(M_MMAP_THRESHOLD, ...): a fixed threshold, so large buffers go back at once
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 512 * 1024
#: glibc's mallopt(M_TRIM_THRESHOLD, ...): free heap top kept rather than given back at each free
_M_TRIM_THRESHOLD = -1
_TRIM_THRESHOLD = 2 * 1024 * 1024


def keep_relay_memory_bounded() -> bool:
    """Fix glibc's mmap threshold at 512 KiB and its trim threshold at 2 MiB (True when set).

    The shared port relays a stream of SSH-window-sized buffers. glibc raises its mmap threshold
    to the largest block freed (up to 32 MiB), so those buffers then come from the heap, which
    keeps them: the relay's peak memory grew with the bytes passed through (about 60 MiB for 96
    MiB), though flow control held at most a window at a time. A fixed threshold turns off that
    adjustment (9 MiB for 192 MiB).

    The threshold lies above asyncio's 256 KiB reads, and the heap keeps up to 2 MiB free at its
    top: each read of a small message allocates 256 KiB and gives all but the message back. With
    the threshold at 128 KiB that was an mmap, an mremap and a munmap whenever the heap had no
    free 256 KiB at hand, which depended on its layout (strace -c counted 0 or 3 of each per
    sequential remote executor call; now 0); a top trimmed at every free would be two brk calls.
    Peak growth for 96 then 192 MiB relayed (tests/system/test_shared_port.py): 20-21 MiB and 0-2
    MiB more with 128 KiB, 22-24 MiB and 0-3 MiB more now.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(libc.mallopt(_M_TRIM_THRESHOLD,
                                                                                           _TRIM_THRESHOLD))
    except (OSError, AttributeError):
        return False  # not glibc: its allocator does not move the threshold


def make_service(paths: DaemonPaths, clock: Clock = REAL) -> SharedPortService:
    """The shared port's service for the pool at ``paths`` (used by ``python -m htc.daemons``).

    Raises:
        UsageError: the configuration is broken, the pool key is missing or unsafe, or the host
            key is unsafe (the text names the file and what to do).
    """
    def settings() -> SharedPortSettings:
        return settings_from_config(load_daemon_config("SHARED_PORT"))

    keep_relay_memory_bounded()
    first = settings()
    if not first.pool_key_file:
        raise UsageError("the shared port needs the pool key: set SEC_TOKEN_POOL_SIGNING_KEY_FILE")
    if not first.trust_domain:
        raise UsageError("the shared port needs TRUST_DOMAIN (or COLLECTOR_HOST) to check tokens' issuer")
    pool_key = read_pool_key(first.pool_key_file)
    host_key, created = load_or_create_host_key(host_key_path(paths))
    if first.authorized_keys:
        read_authorized_keys(first.authorized_keys)  # refuse a broken or unsafe file now, not per login
    service = SharedPortService(SharedPort(first), paths, settings, pool_key, host_key, clock=clock)
    if created:
        service.log.info("created this host's SSH key %s", host_key_path(paths))
    return service


class SharedPortService(DaemonService):
    """Runs the SSH server the core asks for; logs every refused login with its address."""

    def __init__(self, core: SharedPort, paths: DaemonPaths, reload_settings, pool_key: bytes, host_key,
                 clock: Clock = REAL):
        super().__init__("shared_port", core, paths.transport(), address=ADDRESS,
                         log_file=paths.log_file("shared_port"), reload_settings=reload_settings, clock=clock)
        self.paths = paths
        self.pool_key = pool_key
        self.host_key = host_key
        self.server: SharedPortServer | None = None
        self.register_action(Listen, self._do_listen)

    def _verify(self, token: str) -> tuple[tokens.TokenClaims, str]:
        """The claims a token proves (identity, scopes) and how (``pool`` for this pool's daemons).

        A token of another trust domain is refused, except (when this host flocks: FLOCK_FROM or
        FLOCK_TO is set) the daemon token of a pool sharing the pool key, ``condor_pool@D``
        issued by ``D``: it comes in as that identity, ``by token``, which the daemons' lists
        grant only what FLOCK_FROM / FLOCK_TO add (htc.wire.flock_access).
        """
        settings = self.core.settings
        now = time.time()
        try:
            claims = tokens.verify(token, self.pool_key, now=now, issuer=settings.trust_domain)
        except tokens.TokenError as exc:
            claims = tokens.verify(token, self.pool_key, now=now)  # signature and times; any issuer
            if claims.identity.lower() != f"{POOL_USER}@{claims.issuer}".lower():
                raise
            if not (settings.flock_from or settings.flock_to):
                raise tokens.TokenError(f"{exc}; it is a daemon of another pool: list its host in FLOCK_FROM "
                                        "to let it flock here") from None
            return claims, "token"
        return claims, "pool" if claims.identity.lower().startswith(f"{POOL_USER}@") else "token"

    def _refused(self, address: str, username: str, why: str) -> None:
        if not username:
            self.log.warning("PERMISSION DENIED: refused the SSH connection from %s: %s", address, why)
            return
        self.log.warning("PERMISSION DENIED: refused the SSH login of %r from %s: %s", username[:100], address, why)

    def _do_listen(self, action: Listen) -> None:
        self.start_task(self._listen(action), "listen")

    async def _listen(self, action: Listen) -> None:
        settings = self.core.settings
        cert = certify_host_key(pool_ca(self.pool_key), self.host_key, now=time.time())
        authorized = read_authorized_keys(settings.authorized_keys) if settings.authorized_keys else {}
        server = SharedPortServer(self.paths.sockets, (self.host_key, cert), self._verify,
                                  on_refusal=self._refused, own_name=ADDRESS, authorized_keys=authorized)
        try:
            await server.start(action.interface, action.port, keepalive_interval=settings.keepalive_interval,
                               keepalive_count_max=settings.keepalive_count_max, ciphers=settings.ciphers or None,
                               login_timeout=settings.login_timeout)
        except OSError as exc:
            self.feed(ListenFailed(str(exc)))
            return
        self.server = server
        self.log.info("shared port (pid %d) accepting SSH on %s:%d", os.getpid(),
                      action.interface or "*", server.port)
        try:
            await asyncio.Event().wait()  # serve until the service cancels this task
        finally:
            await server.aclose()

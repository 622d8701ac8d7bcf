"""SSH keys of a pool: each host's key, the pool's certificate authority, and known hosts.

Theory of operation
-------------------
Every host of a network pool runs one SSH server (the shared port). Its **host key** is an
Ed25519 key created on first start at ``$HTC_HOME/ssh/host_key`` (mode 0600, in a 0700
directory) and reused afterwards; :func:`load_or_create_host_key` refuses a key file that other
users could read, naming it and its mode, because whoever reads it can pose as the host.

The pool's **certificate authority** is an Ed25519 key whose 32-byte seed is derived from the pool
key (:func:`htc.wire.poolkey.derive` with label ``b"ssh-ca"``), so every holder of the pool key
has the same CA and nothing more has to be copied between hosts. At each start the shared port
certifies its host key with it (:func:`certify_host_key`: a host certificate without principals,
valid for any name of the host, since every host holding the pool key is equally trusted).
Clients holding the pool key trust exactly that CA (:func:`pool_known_hosts`).

A client without the pool key (a laptop with only a user token) cannot check the certificate; it
*trusts on first use*: :class:`KnownHosts` records the host key the first time it meets
``host:port`` in a known_hosts file under its HTC home, and refuses a different key later
(someone may be in the middle). The file uses OpenSSH's format (``[host]:port ssh-ed25519 AAAA...``).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import asyncssh
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from htc.errors import UsageError
from htc.wire.poolkey import derive

__all__ = ["HostKeyError", "KnownHosts", "certify_host_key", "load_or_create_host_key", "pool_ca",
           "pool_known_hosts"]

#: how long a host certificate made at start stays valid (the shared port makes a new one each start)
CERT_LIFETIME = 365 * 24 * 3600.0
#: the algorithm every htc host key uses
HOST_KEY_ALG = "ssh-ed25519"


class HostKeyError(UsageError):
    """The host key file is unsafe or unreadable; the message names it and says what to do."""


def _check_private(path: Path, st: os.stat_result, what: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise HostKeyError(f"refusing the {what} {path}: it is not a regular file")
    if st.st_mode & 0o077:
        raise HostKeyError(f"refusing the {what} {path}: it has mode {stat.S_IMODE(st.st_mode):04o}, so other "
                           f"users could read it and pose as this host; run 'chmod 600 {path}'")
    if st.st_uid not in (0, os.geteuid()):
        raise HostKeyError(f"refusing the {what} {path}: it belongs to uid {st.st_uid}, neither root nor "
                           f"this process's user ({os.geteuid()})")


def load_or_create_host_key(path: str | os.PathLike) -> tuple[asyncssh.SSHKey, bool]:
    """This host's SSH key at ``path``, created (Ed25519, mode 0600) when missing.

    Returns:
        ``(key, created)``.

    Raises:
        HostKeyError: the file is readable by others, owned by someone else, or not a key.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return _create_host_key(path), True
    except OSError as exc:
        raise HostKeyError(f"cannot read the host key {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as f:
        _check_private(path, os.fstat(f.fileno()), "host key")
        data = f.read()
    try:
        return asyncssh.import_private_key(data), False
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise HostKeyError(f"the host key {path} is not an SSH private key ({exc}); move it away and a new "
                           "one is made at the next start") from None


def _create_host_key(path: Path) -> asyncssh.SSHKey:
    key = asyncssh.generate_private_key(HOST_KEY_ALG, comment=f"htc host key {path}")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key.export_private_key())
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # never replaces a key another process made meanwhile
        except FileExistsError:
            return load_or_create_host_key(path)[0]
    except OSError as exc:
        raise HostKeyError(f"cannot create the host key {path}: {exc.strerror}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return key


def pool_ca(pool_key: bytes) -> asyncssh.SSHKey:
    """The pool's SSH certificate authority: an Ed25519 key seeded from the pool key."""
    seed = derive(pool_key, b"ssh-ca")
    pem = Ed25519PrivateKey.from_private_bytes(seed).private_bytes(
        Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption())
    return asyncssh.import_private_key(pem)


def certify_host_key(ca: asyncssh.SSHKey, host_key: asyncssh.SSHKey, *, now: float | None = None,
                     name: str = "htc host") -> asyncssh.SSHCertificate:
    """A host certificate for ``host_key`` signed by the pool CA (no principals: any name of the host)."""
    now = time.time() if now is None else now
    return ca.generate_host_certificate(host_key, name, valid_after=int(now - 300),
                                        valid_before=int(now + CERT_LIFETIME))


def pool_known_hosts(pool_key: bytes) -> tuple[list, list, list]:
    """asyncssh's ``known_hosts`` for a client holding the pool key: trust the pool CA, nothing else."""
    return [], [pool_ca(pool_key).convert_to_public()], []


class KnownHosts:
    """Trust on first use for clients without the pool key: host keys recorded in ``path``.

    Args:
        path: the known_hosts file (created 0600 with its directory on the first record).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    @staticmethod
    def _pattern(host: str, port: int) -> str:
        return f"[{host}]:{port}"

    def lookup(self, host: str, port: int) -> list[asyncssh.SSHKey]:
        """The keys recorded for ``host:port`` (empty: never met)."""
        wanted = self._pattern(host, port)
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return []
        keys = []
        for line in lines:
            fields = line.split()
            if len(fields) >= 3 and wanted in fields[0].split(","):
                try:
                    keys.append(asyncssh.import_public_key(f"{fields[1]} {fields[2]}"))
                except (asyncssh.KeyImportError, ValueError):
                    continue  # a damaged line trusts nothing; the others still count
        return keys

    def check(self, host: str, port: int, key: asyncssh.SSHKey) -> bool:
        """Whether ``key`` may be ``host:port``'s: recorded before, or recorded now (first use)."""
        known = self.lookup(host, port)
        if known:
            return key in known
        self.record(host, port, key)
        return True

    def record(self, host: str, port: int, key: asyncssh.SSHKey) -> None:
        """Append ``host:port``'s key to the file (mode 0600)."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        line = f"{self._pattern(host, port)} {key.export_public_key().decode().split()[0]} " \
               f"{key.export_public_key().decode().split()[1]}\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "a") as f:
            f.write(line)

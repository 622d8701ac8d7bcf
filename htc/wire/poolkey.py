"""The pool's shared secret: reading it safely, creating it, and the keys derived from it.

Theory of operation
-------------------
A multi-host pool shares one secret, the file named by ``SEC_TOKEN_POOL_SIGNING_KEY_FILE`` (any
random bytes, e.g. ``head -c 64 /dev/urandom``, copied to every host). Whoever holds it speaks for
the pool: daemons mint their own tokens with it and recognise each other's, and ``htc token create``
issues users' tokens with it. Everything else is *derived* from it with HMAC-SHA256 under a label,
so one secret never serves two purposes:

* :func:`token_key` signs and checks identity tokens (:mod:`htc.wire.tokens`);
* :func:`derive` gives any other use its own 32 bytes (e.g. the seed of the pool's SSH
  certificate authority, label ``b"ssh-ca"``).

A key file that another user could read is no secret: :func:`read_pool_key` refuses it, naming the
file and its mode, as a daemon must refuse to start on it. :func:`ensure_pool_key` creates a
missing one (mode 0600, written whole or not at all) and says whether it did.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from htc.errors import UsageError

__all__ = ["PoolKeyError", "derive", "ensure_pool_key", "read_pool_key", "token_key"]

#: bytes in a key file htc creates; shorter files are refused below MIN_KEY_BYTES
NEW_KEY_BYTES = 64
MIN_KEY_BYTES = 16


class PoolKeyError(UsageError):
    """The pool key file is missing, unsafe or too short; the message says which and what to do."""


def _unsafe(path: Path, st: os.stat_result) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if st.st_mode & 0o077:
        return (f"{path} has mode {stat.S_IMODE(st.st_mode):04o}: other users could read the pool's "
                f"secret; run 'chmod 600 {path}'")
    if st.st_uid not in (0, os.geteuid()):
        return f"{path} belongs to uid {st.st_uid}, neither root nor this process's user ({os.geteuid()})"
    return None


def read_pool_key(path: str | os.PathLike) -> bytes:
    """The pool key in ``path``, refused unless only its owner can read it.

    Raises:
        PoolKeyError: no such file, unsafe mode or owner, or fewer than 16 bytes.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise PoolKeyError(f"the pool key file {path} does not exist; copy the pool's key there "
                           "(SEC_TOKEN_POOL_SIGNING_KEY_FILE) or run 'htc pool start' on the "
                           "central manager to create one") from None
    except OSError as exc:
        raise PoolKeyError(f"cannot read the pool key file {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as f:
        problem = _unsafe(path, os.fstat(f.fileno()))
        if problem:
            raise PoolKeyError(f"refusing the pool key: {problem}")
        key = f.read()
    if len(key) < MIN_KEY_BYTES:
        raise PoolKeyError(f"the pool key file {path} holds {len(key)} bytes; a key needs at least "
                           f"{MIN_KEY_BYTES} random bytes (e.g. head -c 64 /dev/urandom > {path})")
    return key


def ensure_pool_key(path: str | os.PathLike) -> tuple[bytes, bool]:
    """The pool key in ``path``, created (64 random bytes, mode 0600) when missing.

    Returns:
        ``(key, created)``.

    Raises:
        PoolKeyError: an existing file is unsafe or too short, or it cannot be created.
    """
    path = Path(path)
    if path.exists() or path.is_symlink():
        return read_pool_key(path), False
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(NEW_KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # never replaces a key another process made meanwhile
        except FileExistsError:
            return read_pool_key(path), False
        return read_pool_key(path), True
    except OSError as exc:
        raise PoolKeyError(f"cannot create the pool key file {path}: {exc.strerror}") from exc
    finally:
        tmp.unlink(missing_ok=True)


def derive(pool_key: bytes, label: bytes) -> bytes:
    """32 bytes for the use named ``label``, derived from the pool key (HMAC-SHA256)."""
    return hmac.new(pool_key, b"htc pool key\0" + label, hashlib.sha256).digest()


def token_key(pool_key: bytes) -> bytes:
    """The key that signs and checks identity tokens."""
    return derive(pool_key, b"idtoken")

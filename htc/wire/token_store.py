"""Where a client keeps its identity tokens, and which one it presents to a pool.

Theory of operation
-------------------
A token (:mod:`htc.wire.tokens`) is a password: whoever holds the file speaks as its identity.
Clients keep them one per file in their *token directory*, as HTCondor's ``~/.condor/tokens.d``:

* ``SEC_TOKEN_DIRECTORY`` when set; otherwise ``~/.htc/tokens.d`` in the home directory of the
  user running the tool (from the password database, not ``$HOME`` alone, so ``sudo`` does not
  pick up another user's tokens). It is per user on purpose, not under ``HTC_HOME``: a root
  pool's home is shared by every user of the host, a token is one person's.
* The directory is created 0700 and each file 0600 (:func:`save_token` writes it whole, then
  renames it into place). A file that others could read, or that another user owns, is not
  used (:func:`find_token` skips it and says why in :func:`list_tokens`): it is no secret.
* A client that talks to a pool presents the first token, by file name, whose issuer (``iss``)
  is the pool's TRUST_DOMAIN (:func:`find_token`), as HTCondor picks a token by the server's
  trust domain. The client cannot check the signature (it has no pool key); the server does.

:func:`peek` reads a token's header and claims without checking the signature, for choosing and
listing only.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from htc.errors import UsageError

__all__ = ["TokenFile", "TokenStoreError", "default_directory", "find_token", "list_tokens", "peek",
           "save_token", "token_directory"]

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+-]*\Z")


class TokenStoreError(UsageError):
    """A token cannot be saved or read; the message names the file and what to do."""


@dataclass(frozen=True)
class TokenFile:
    """One file of the token directory: its token, what it says, and why it is not used (if so)."""

    path: Path
    token: str
    header: dict
    claims: dict
    problem: str = ""


def default_directory() -> Path:
    """``~/.htc/tokens.d`` of the user this process runs as."""
    import pwd

    try:
        home = pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        home = os.path.expanduser("~")
    return Path(home) / ".htc" / "tokens.d"


def token_directory(config=None) -> Path:
    """The token directory: ``SEC_TOKEN_DIRECTORY`` of ``config`` when set, else the default."""
    value = (config.get("SEC_TOKEN_DIRECTORY") or "").strip() if config is not None else ""
    return Path(os.path.expanduser(value)) if value else default_directory()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def peek(token: str) -> tuple[dict, dict]:
    """The header and claims of ``token``, *not verified* (for choosing and listing).

    Raises:
        ValueError: it is not a JWT.
    """
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise ValueError("not a token (a token has three dot-separated parts)")
    try:
        header, claims = json.loads(_unb64(parts[0])), json.loads(_unb64(parts[1]))
    except (ValueError, binascii.Error) as exc:
        raise ValueError(f"not a token ({exc})") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise ValueError("not a token (its header or claims are not JSON objects)")
    return header, claims


def save_token(directory: str | os.PathLike, name: str, token: str) -> Path:
    """Write ``token`` to ``directory/name`` (mode 0600; the directory 0700 if created).

    Raises:
        TokenStoreError: a bad file name, or the file cannot be written.
    """
    if not _NAME.match(name):
        raise TokenStoreError(f"token name {name!r} must be a plain file name (letters, digits, _ . @ + -), "
                              "not a path")
    directory = Path(directory)
    path = directory / name
    tmp = directory / f".{name}.{os.getpid()}.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token.strip() + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise TokenStoreError(f"cannot save the token as {path}: {exc.strerror}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _read(path: Path) -> TokenFile | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None  # vanished, a link, or unreadable: not a token of ours
    with os.fdopen(fd, "r", errors="replace") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > 65536:
            return None
        text = f.read().strip()
    problem = ""
    if st.st_mode & 0o077:
        problem = f"mode {stat.S_IMODE(st.st_mode):04o} lets others read it (chmod 600 {path})"
    elif st.st_uid not in (0, os.geteuid()):
        problem = f"it belongs to uid {st.st_uid}, not to you"
    try:
        header, claims = peek(text)
    except ValueError as exc:
        header, claims, problem = {}, {}, problem or str(exc)
    return TokenFile(path, text, header, claims, problem)


def list_tokens(directory: str | os.PathLike) -> list[TokenFile]:
    """Every token file of ``directory`` in file-name order (hidden files skipped)."""
    directory = Path(directory)
    try:
        names = sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise TokenStoreError(f"cannot read the token directory {directory}: {exc.strerror}") from exc
    return [found for found in (_read(directory / n) for n in names) if found is not None]


def find_token(directory: str | os.PathLike, issuer: str | None = None) -> TokenFile | None:
    """The first usable token of ``directory`` issued by ``issuer`` (None: by anyone), or None."""
    for found in list_tokens(directory):
        if found.problem:
            continue
        if issuer is None or found.claims.get("iss") == issuer:
            return found
    return None

"""Identity tokens: who a remote peer is, vouched for by the pool key (as HTCondor's IDTOKENS).

Theory of operation
-------------------
A token is a JSON Web Token (RFC 7519, compact form, HMAC-SHA256) signed with the key
:func:`htc.wire.poolkey.token_key` derives from the pool's secret. It says *who* (``sub``,
``alice@pool``), *who issued it* (``iss``, the pool's TRUST_DOMAIN), when (``iat``), until when
(``exp``, optional), its id (``jti``) and optionally which authorization levels it may be used for
(``scope``: ``"condor:/READ condor:/WRITE"``, HTCondor's spelling; absent means no limit beyond
the pool's ALLOW/DENY lists). The header's ``kid`` is ``"POOL"``, HTCondor's name for the pool key.

* ``htc token create -identity alice@pool`` mints one for a user (:func:`mint`).
* A daemon holding the pool key mints its own, for ``condor_pool@TRUST_DOMAIN``, when it talks to
  another host; no token file is needed on a host that has the key.
* A server checks a presented token with :func:`verify`: signature first (constant-time), then
  issuer and expiry. Every failure is a :class:`TokenError` naming what was wrong, never the token
  itself (a token is a password: it is not logged).

Nothing here does I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass

from htc.errors import PeerError
from htc.wire.poolkey import token_key

__all__ = ["TokenClaims", "TokenError", "mint", "parse_scopes", "verify"]

KEY_ID = "POOL"
_IDENTITY = re.compile(r"[^@\s/]+@[^@\s/]+\Z")
_LEVEL = re.compile(r"condor:/([A-Z_]+)\Z")


class TokenError(PeerError):
    """A presented token is malformed, forged, expired or from another pool."""

    code = "bad_token"


@dataclass(frozen=True)
class TokenClaims:
    """What a verified token says."""

    identity: str
    issuer: str
    issued_at: int
    token_id: str
    expires: int | None = None
    scopes: tuple[str, ...] = ()  # authorization level names (READ, WRITE, ...); () = no limit


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(key: bytes, signing_input: str) -> bytes:
    return hmac.new(token_key(key), signing_input.encode("ascii"), hashlib.sha256).digest()


def parse_scopes(text: str) -> tuple[str, ...]:
    """``"condor:/READ condor:/WRITE"`` -> ``("READ", "WRITE")``; other scopes are ignored."""
    return tuple(m[1] for m in (_LEVEL.match(s) for s in text.split()) if m)


def mint(pool_key: bytes, identity: str, *, issuer: str, now: float, lifetime: float | None = None,
         scopes: tuple[str, ...] = (), token_id: str | None = None) -> str:
    """A token for ``identity`` (``user@domain``) issued by ``issuer`` at ``now``.

    Raises:
        ValueError: ``identity`` is not ``user@domain`` or ``lifetime`` is not positive.
    """
    if not _IDENTITY.match(identity):
        raise ValueError(f"token identity {identity!r} must be user@domain (e.g. alice@pool)")
    claims: dict[str, object] = {"sub": identity, "iss": issuer, "iat": int(now),
                                 "jti": token_id or secrets.token_hex(16)}
    if lifetime is not None:
        if lifetime <= 0:
            raise ValueError(f"a token lifetime must be positive, not {lifetime}")
        claims["exp"] = int(now + lifetime)
    if scopes:
        claims["scope"] = " ".join(f"condor:/{s}" for s in scopes)
    header = _b64(json.dumps({"alg": "HS256", "kid": KEY_ID, "typ": "JWT"}, separators=(",", ":")).encode())
    body = _b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
    return f"{header}.{body}.{_b64(_sign(pool_key, f'{header}.{body}'))}"


def verify(token: str, pool_key: bytes, *, now: float, issuer: str | None = None) -> TokenClaims:
    """The claims of ``token`` if the pool key signed it and it is still valid at ``now``.

    ``issuer``: when given, the token's ``iss`` must equal it (a token of another pool is refused).

    Raises:
        TokenError: malformed, bad signature, wrong issuer, expired, or not yet issued.
    """
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise TokenError("a token has three dot-separated parts; this is not a token")
    try:
        header = json.loads(_unb64(parts[0]))
        signature = _unb64(parts[2])
    except (ValueError, binascii.Error) as exc:
        raise TokenError(f"the token's header or signature is not valid base64url JSON ({exc})") from None
    if not isinstance(header, dict) or header.get("alg") != "HS256":
        raise TokenError("the token is not signed with HS256 (the only algorithm htc accepts)")
    if not hmac.compare_digest(signature, _sign(pool_key, f"{parts[0]}.{parts[1]}")):
        raise TokenError("the token's signature does not match this pool's key")
    try:
        claims = json.loads(_unb64(parts[1]))
    except (ValueError, binascii.Error) as exc:
        raise TokenError(f"the token's claims are not valid base64url JSON ({exc})") from None
    if not isinstance(claims, dict):
        raise TokenError("the token's claims are not a JSON object")
    sub, iss, iat = claims.get("sub"), claims.get("iss"), claims.get("iat")
    exp, jti, scope = claims.get("exp"), claims.get("jti", ""), claims.get("scope", "")
    if not isinstance(sub, str) or not _IDENTITY.match(sub):
        raise TokenError("the token names no identity of the form user@domain")
    if not isinstance(iss, str) or not isinstance(iat, int) or not isinstance(jti, str):
        raise TokenError("the token lacks its issuer, issue time or id")
    if exp is not None and not isinstance(exp, int):
        raise TokenError("the token's expiry is not a number")
    if not isinstance(scope, str):
        raise TokenError("the token's scope is not a string")
    if issuer is not None and iss != issuer:
        raise TokenError(f"the token was issued by {iss!r}, not by this pool ({issuer!r})")
    if exp is not None and now >= exp:
        raise TokenError(f"the token for {sub} expired")
    if iat > now + 300:
        raise TokenError(f"the token for {sub} is issued in the future (clocks more than 5 minutes apart?)")
    return TokenClaims(sub, iss, iat, jti, exp, parse_scopes(scope))

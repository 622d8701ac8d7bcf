"""``htc token create`` and ``htc token list``: condor_token_create and condor_token_list.

``create`` mints an identity token (:func:`htc.wire.tokens.mint`) signed with the pool key
(``SEC_TOKEN_POOL_SIGNING_KEY_FILE``, or ``-key``), issued by the pool's ``TRUST_DOMAIN``; it
prints the token, or with ``-token NAME`` saves it in the token directory
(:mod:`htc.wire.token_store`) mode 0600. Only someone who can read the pool key can mint: on a
pool's hosts that is root (or the pool's account); a user gets a token from them.

``list`` prints each token of the token directory as condor_token_list does
(``Header: {...} Payload: {...} File: PATH``); a file not used (others may read it, another
user owns it, not a token) is listed with the reason.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from htc.cli.options import add_command, add_option
from htc.errors import UsageError
from htc.wire import token_store
from htc.wire.authz import Level
from htc.wire.poolkey import read_pool_key
from htc.wire.tokens import mint, parse_scopes

#: HTCondor's name for the pool signing key (condor_token_create -key POOL)
POOL_KEY_NAME = "POOL"


def _config():
    from htc.config import load_config

    return load_config()


def _levels(names: list[str]) -> tuple[str, ...]:
    known = {lv.value for lv in Level}
    out = []
    for name in names:
        level = name.strip().upper()
        if level not in known:
            raise UsageError(f"-authz {name}: not an authorization level; use one of {', '.join(sorted(known))}")
        out.append(level)
    return tuple(dict.fromkeys(out))


def create(args: argparse.Namespace) -> int:
    """htc token create: mint a token for ``-identity``, print it or save it as ``-token NAME``."""
    config = _config()
    key_file = args.key if args.key and args.key != POOL_KEY_NAME else None
    key_file = key_file or str(config.get("SEC_TOKEN_POOL_SIGNING_KEY_FILE") or "")
    if not key_file:
        raise UsageError("no pool key: set SEC_TOKEN_POOL_SIGNING_KEY_FILE or give -key FILE")
    key = read_pool_key(key_file)
    issuer = str(config.get("TRUST_DOMAIN") or config.get("COLLECTOR_HOST") or "").strip()
    if not issuer:
        raise UsageError("no TRUST_DOMAIN (nor COLLECTOR_HOST) is configured: the token needs an issuer")
    scopes = _levels(args.authz or []) + parse_scopes(args.scope or "")
    if args.scope and not parse_scopes(args.scope):
        raise UsageError(f"-scope {args.scope!r} names no authorization level; write e.g. 'condor:/READ condor:/WRITE'")
    if args.lifetime is not None and args.lifetime <= 0:
        raise UsageError(f"-lifetime {args.lifetime}: a lifetime is a positive number of seconds")
    try:
        token = mint(key, args.identity, issuer=issuer, now=time.time(), lifetime=args.lifetime,
                     scopes=tuple(dict.fromkeys(scopes)))
    except ValueError as exc:
        raise UsageError(f"-identity: {exc}") from None
    if args.token:
        token_store.save_token(token_store.token_directory(config), args.token, token)
    else:
        print(token)
    return 0


def list_(args: argparse.Namespace) -> int:
    """htc token list: the tokens of the token directory, as condor_token_list prints them."""
    directory = Path(args.dir) if args.dir else token_store.token_directory(_config())
    for found in token_store.list_tokens(directory):
        header = json.dumps(found.header, separators=(",", ":"))
        payload = json.dumps(found.claims, separators=(",", ":"), sort_keys=True)
        line = f"Header: {header} Payload: {payload} File: {found.path}"
        print(line + (f" (not used: {found.problem})" if found.problem else ""))
    return 0


def register(sub) -> None:
    """Add ``htc token create|list``."""
    p = add_command(sub, "token", "create or list identity tokens (condor_token_create, condor_token_list)", [
        "htc token create -identity alice@pool                 # print a token for alice",
        "htc token create -identity alice@pool -token pool     # save it as ~/.htc/tokens.d/pool",
        "htc token create -identity bob@pool -lifetime 86400 -authz READ",
        "htc token list",
    ], description="Identity tokens prove who a client is to the pool's daemons on other hosts. 'create' "
       "signs one with the pool key (SEC_TOKEN_POOL_SIGNING_KEY_FILE; only its readers can mint); 'list' shows "
       "those in the token directory (SEC_TOKEN_DIRECTORY, default ~/.htc/tokens.d).")
    tsub = p.add_subparsers(dest="token_command", metavar="{create,list}", required=True)
    c = tsub.add_parser("create", help="mint a token for an identity",
                        description="Mint a token for -identity, signed with the pool key, issued by TRUST_DOMAIN.")
    add_option(c, "identity", required=True, metavar="USER@DOMAIN", help="who the token speaks for (alice@pool)")
    add_option(c, "lifetime", type=int, metavar="SECONDS", help="valid for this long (default: no expiry)")
    add_option(c, "authz", action="append", metavar="LEVEL",
               help="limit the token to this authorization level (repeatable: READ, WRITE, ...)")
    add_option(c, "scope", metavar="SCOPES", help="limit by scopes, HTCondor's 'condor:/READ condor:/WRITE'")
    add_option(c, "token", metavar="NAME", help="save it as NAME in the token directory instead of printing it")
    add_option(c, "key", metavar="FILE",
               help="the pool key file (default: SEC_TOKEN_POOL_SIGNING_KEY_FILE; POOL means the default)")
    c.set_defaults(func=create)
    ls = tsub.add_parser("list", help="list the tokens of the token directory",
                         description="Each token's header and claims (not verified) and its file.")
    add_option(ls, "dir", metavar="DIRECTORY", help="list this directory instead of the token directory")
    ls.set_defaults(func=list_)

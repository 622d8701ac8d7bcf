"""Environment, argument-list and user builtins (condor_utils compat_classad.cpp, env.cpp).

Job environments come in two syntaxes.  V1 is ``NAME=value`` entries separated by ``;``
(or by a leading delimiter character that announces another one: ``"|A=1|B=2"``).  V2
is ``NAME=value`` words separated by whitespace, where single quotes quote and ``''``
inside quotes is a literal quote.  ``envV1ToV2`` and ``mergeEnvironment`` parse into an
environment (later entries win) and print it as V2, sorted by name as HTCondor's
``std::map`` is; a value is quoted one whitespace or quote character at a time, exactly
as ``join_args`` does (``A=hello' 'world``).
"""

from __future__ import annotations

import pwd

from htc.classad.arglist import SPACE, UnbalancedQuote, join_v2, split_v2
from htc.classad.builtins_common import is_int
from htc.classad.values import Error, Undefined

_ARG_SPACE = SPACE
_PERMITTED_V1_DELIMS = "!#$%&*+,-/:;<>?@^`|~\x1f"
# Marks an environment entry kept verbatim without "=value" (an unexpanded $$() macro).
_NO_VALUE = object()


class _BadEnvironment(Exception):
    """An environment or argument string that HTCondor's parser rejects."""


def split_args_v2(text: str) -> list[str]:
    """Split a raw V2 argument string (``split_args``; the rule is :mod:`htc.classad.arglist`)."""
    try:
        return split_v2(text)
    except UnbalancedQuote:
        raise _BadEnvironment("unbalanced single quote") from None


#: quote and join arguments as raw V2 (``join_args``)
join_args_v2 = join_v2


class Environment:
    """An ordered-by-name environment built the way HTCondor's ``Env`` class builds it."""

    def __init__(self) -> None:
        self.table: dict[str, object] = {}

    def set_entry(self, entry: str) -> None:
        eq = entry.find("=")
        if eq < 0 and "$$" in entry:
            self.table[entry] = _NO_VALUE
            return
        if eq <= 0:
            raise _BadEnvironment(f"bad environment entry {entry!r}")
        self.table[entry[:eq]] = entry[eq + 1:]

    def merge_v2(self, text: str) -> None:
        for entry in split_args_v2(text):
            self.set_entry(entry)

    def merge_v1(self, text: str) -> None:
        """``MergeFromV1AutoDelim`` with the Unix default delimiter ``;``."""
        if not text:
            return
        delim = ";"
        if text[0] == delim:
            text = text[1:]
        elif text[0] in _PERMITTED_V1_DELIMS:
            delim, text = text[0], text[1:]
        i, n = 0, len(text)
        while i < n:
            while i < n and text[i] in " \t\n\r":
                i += 1
            start = i
            while i < n and text[i] != "\n" and text[i] != delim:
                i += 1
            entry = text[start:i]
            i += 1
            if entry:
                self.set_entry(entry)

    def v2_string(self) -> str:
        entries = []
        # std::map<std::string, ...> orders names by bytes.
        for name in sorted(self.table, key=lambda k: k.encode("utf-8", "surrogateescape")):
            value = self.table[name]
            entries.append(name if value is _NO_VALUE else f"{name}={value}")
        return join_args_v2(entries)


def fn_envv1tov2(args: list) -> object:
    """``envV1ToV2(env)``: a V1 environment string rewritten as V2 (UNDEFINED stays so)."""
    if len(args) != 1:
        return Error
    if args[0] is Undefined:
        return Undefined
    if not isinstance(args[0], str):
        return Error
    env = Environment()
    try:
        env.merge_v1(args[0])
    except _BadEnvironment:
        return Error
    return env.v2_string()


def fn_mergeenvironment(args: list) -> object:
    """``mergeEnvironment(env, ...)``: merge V2 environments left to right.

    UNDEFINED arguments are skipped, so optional attributes can be passed directly.
    """
    env = Environment()
    for arg in args:
        if arg is Undefined:
            continue
        if not isinstance(arg, str):
            return Error
        try:
            env.merge_v2(arg)
        except _BadEnvironment:
            return Error
    return env.v2_string()


def _version_argument(args: list) -> object:
    if len(args) == 1:
        return 2
    version = args[1]
    if not is_int(version) or version not in (1, 2):
        return Error
    return version


def fn_argstolist(args: list) -> object:
    """``argsToList(args [, version])``: split a V2 (default) or V1 argument string."""
    if len(args) not in (1, 2):
        return Error
    version = _version_argument(args)
    if version is Error or not isinstance(args[0], str):
        return Error
    if version == 1:
        return [word for word in _split_v1(args[0]) if word]
    try:
        return split_args_v2(args[0])
    except _BadEnvironment:
        return Error


def _split_v1(text: str) -> list[str]:
    words, current = [], ""
    for ch in text:
        if ch in _ARG_SPACE:
            words.append(current)
            current = ""
        else:
            current += ch
    words.append(current)
    return words


def fn_listtoargs(args: list) -> object:
    """``listToArgs(list [, version])``: join strings into a V2 (default) or V1 string."""
    if len(args) not in (1, 2):
        return Error
    version = _version_argument(args)
    if version is Error or not isinstance(args[0], list):
        return Error
    items = args[0]
    if not all(isinstance(item, str) for item in items):
        return Error
    if version == 1:
        # V1 has no quoting, so an argument holding whitespace cannot be written.
        if any(ch in _ARG_SPACE for item in items for ch in item):
            return Error
        return " ".join(items)
    return join_args_v2(items)


def fn_userhome(args: list) -> object:
    """``userHome(user [, default])``: the user's home directory from the password database."""
    if len(args) not in (1, 2):
        return Error
    default = args[1] if len(args) == 2 and isinstance(args[1], str) else ""
    user = args[0]
    if user is Undefined and not default:
        return Undefined
    if not isinstance(user, str):
        return default or Error
    try:
        home = pwd.getpwnam(user).pw_dir
    except (KeyError, UnicodeEncodeError, ValueError):
        return default or Undefined
    return home or default or Undefined


# userMap(mapName, input [, preferred [, default]]) consults named maps.  Maps come from
# configuration (CLASSAD_USER_MAPFILE_<name> / CLASSAD_USER_MAPDATA_<name>); the config
# layer installs each as a callable returning the comma-separated mapped value or None.
USER_MAPS: dict[str, object] = {}


def register_user_map(name: str, mapper) -> None:
    """Install the map ``name``: ``mapper(input) -> "a,b,c" | None``."""
    USER_MAPS[name.lower()] = mapper


def fn_usermap(args: list) -> object:
    """``userMap(map, input [, preferred [, default]])``.

    Two arguments give the mapped comma-separated list; three or four pick the preferred
    item if present (case-insensitively) or else the first one.  Without a mapping the
    result is the default, or UNDEFINED.
    """
    if not 2 <= len(args) <= 4:
        return Error
    map_name, user = args[0], args[1]
    default = args[3] if len(args) == 4 else Undefined
    if not isinstance(map_name, str) or not isinstance(user, str):
        if map_name is Error or user is Error:
            return Error
        return default
    mapper = USER_MAPS.get(map_name.lower())
    output = mapper(user) if mapper is not None else None
    if output is None:
        return default
    if len(args) == 2:
        return output
    items = [item.strip() for item in output.split(",") if item.strip()]
    preferred = args[2] if isinstance(args[2], str) else None
    if preferred is not None:
        for item in items:
            if item.lower() == preferred.lower():
                return item
    if items:
        return items[0]
    return default


FUNCTIONS = {
    "envv1tov2": fn_envv1tov2,
    "mergeenvironment": fn_mergeenvironment,
    "argstolist": fn_argstolist,
    "listtoargs": fn_listtoargs,
    "userhome": fn_userhome,
    "usermap": fn_usermap,
}

"""Is a file safe to trust? Nobody but root and the reader may change it or the way to it.

A daemon obeys its configuration: a file another user can change, or a directory on the way to
it that another user can write (and so rename the file, or put another in its place), lets that
user run the daemon. So a daemon refuses such configuration, and every reader refuses to run
the command of an ``include command`` line (or a ``LOCAL_CONFIG_FILE`` ending in ``|``) from
such a file, saying which path is the problem and why.

The rule, for the file and for every directory from it up to ``/`` (both as named and after
resolving symbolic links):

* its owner is root or the reading process's user;
* it is not writable by its group or by others -- except a directory with the sticky bit
  (``/tmp``, mode 1777), where others may add entries but cannot rename or remove ours; what
  lies below it must then pass on its own.

:func:`make_dir` creates the pool's own directories with an explicit mode, whatever the umask
of whoever runs first.
"""

from __future__ import annotations

import os
import stat

__all__ = ["unsafe_reason", "trusted_uids", "make_dir", "DIR_MODE", "FILE_MODE"]

#: mode of the pool's directories: the owner writes, everyone traverses and reads
DIR_MODE = 0o755
#: mode of the pool's configuration files
FILE_MODE = 0o644


def trusted_uids() -> frozenset[int]:
    """Root and the user this process runs as."""
    return frozenset({0, os.geteuid()})


def _component_problem(path: str, st: os.stat_result, trusted: frozenset[int], last: bool) -> str | None:
    mode = stat.S_IMODE(st.st_mode)
    kind = "directory" if stat.S_ISDIR(st.st_mode) else "file"
    if st.st_uid not in trusted:
        return f"{kind} {path} belongs to uid {st.st_uid}, who could change it (only root or uid " \
               f"{os.geteuid()} may own it)"
    if mode & 0o022:
        if stat.S_ISDIR(st.st_mode) and mode & stat.S_ISVTX and not last:
            return None  # sticky: others may add entries, not rename or remove ours
        who = "others" if mode & 0o002 else "its group"
        return f"{kind} {path} (mode {mode:04o}) is writable by {who}; run chmod go-w {path}"
    return None


def _chain(path: str) -> list[str]:
    out = [path]
    while True:
        parent = os.path.dirname(out[-1])
        if parent == out[-1]:
            return out
        out.append(parent)


def unsafe_reason(path: str, trusted: frozenset[int] | None = None) -> str | None:
    """Why ``path`` cannot be trusted (None: it can); see the module header for the rule.

    A path that does not exist is not judged here (None): reading it will say so.
    """
    trusted = trusted_uids() if trusted is None else trusted
    named = os.path.abspath(path)
    real = os.path.realpath(named)
    for chain in (_chain(named), _chain(real)):
        for i, component in enumerate(chain):
            try:
                st = os.stat(component) if i else os.lstat(component)
            except OSError:
                return None if i == 0 else f"cannot check {component}"
            if i == 0 and stat.S_ISLNK(st.st_mode):
                continue  # a link cannot be changed, only replaced: its directory is checked next
            problem = _component_problem(component, st, trusted, last=i == 0)
            if problem is not None:
                return problem
    return None


def make_dir(path: str, mode: int = DIR_MODE) -> bool:
    """Create directory ``path`` (its parents must exist) with exactly ``mode``; True if it was made.

    An existing directory is left as it is (the checks above judge it).
    """
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        return False
    os.chmod(path, mode)  # the umask may have taken bits away (or the caller's mode was wider)
    return True

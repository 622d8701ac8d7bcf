"""EXECUTE as the startd will use it, so that ``htc config_val EXECUTE`` says where jobs run.

A startd running as root runs each job as its owner or a slot account, and that user must be
able to traverse every directory down to its sandbox. EXECUTE's default, ``$(LOCAL_DIR)/execute``,
is ``/root/.htc/execute`` for root, behind mode 0700: no job could start. When EXECUTE is left
at its default, the process is root and other users cannot reach that directory, EXECUTE's
value *is* a per-pool directory under :data:`SHARED_EXECUTE_ROOT` instead
(``/var/lib/htc/execute/<hash of HTC_HOME>``): :func:`execute_default` computes it when the
configuration is loaded (origin ``detected``), every reader of the knob sees it, and the startd
makes it safely (:mod:`htc.daemons.execute_dir`) and removes it when it stops. An
administrator's own EXECUTE is always kept.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import stat
from pathlib import Path

__all__ = ["DEFAULT_EXECUTE", "SHARED_EXECUTE_ROOT", "execute_default", "shared_execute_path",
           "unreachable_parent"]

#: where per-pool execute directories go when EXECUTE is out of the job users' reach
SHARED_EXECUTE_ROOT = Path("/var/lib/htc/execute")

#: EXECUTE's default (the param table's, and what a generated htc_config says)
DEFAULT_EXECUTE = "$(LOCAL_DIR)/execute"


def unreachable_parent(path: Path, user: pwd.struct_passwd | int | None = None, gid: int | None = None,
                       groups: tuple[int, ...] = ()) -> tuple[Path, int] | None:
    """The first existing directory on the way to ``path`` that ``user`` may not traverse.

    ``user`` is a password entry, or a uid (with ``gid`` and its supplementary ``groups``), or
    None: any user at all (who gets only the "other" permission bits). Directories that do not
    exist yet are skipped: root creates them mode 0755.

    Returns:
        ``(directory, mode)``, or None when ``user`` can get through to ``path``.
    """
    path = Path(path)
    if isinstance(user, pwd.struct_passwd):
        uid, gids = user.pw_uid, {user.pw_gid}
    else:
        uid, gids = user, {g for g in (gid, *groups) if g is not None}
    for directory in [*reversed(path.parents), path]:
        try:
            st = directory.stat()
        except FileNotFoundError:
            continue
        if uid is not None and st.st_uid == uid:
            ok = st.st_mode & 0o100
        elif st.st_gid in gids:
            ok = st.st_mode & 0o010
        else:
            ok = st.st_mode & 0o001
        if not ok:
            return directory, stat.S_IMODE(st.st_mode)
    return None


def shared_execute_path(home: Path | str, root: Path = SHARED_EXECUTE_ROOT) -> Path:
    """``root/<hash of home>``: the per-pool execute directory of the pool at ``home``."""
    digest = hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:16]
    return root / digest


def execute_default(default_path: str, home: Path | str, root: Path = SHARED_EXECUTE_ROOT) -> str | None:
    """EXECUTE's value when it is left at its default (``default_path``, expanded): the per-pool
    directory when the process is root and other users cannot reach ``default_path``; None
    when the default stands."""
    if os.geteuid() != 0 or not default_path or unreachable_parent(Path(default_path)) is None:
        return None
    shared = shared_execute_path(home, root)
    if unreachable_parent(shared) is not None:
        return None  # no better: keep EXECUTE and let the starter name the directory
    return str(shared)

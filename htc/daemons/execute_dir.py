"""Where a startd makes its jobs' sandboxes: EXECUTE, or a directory every job's user can reach.

Theory of operation
-------------------
A startd running as root runs each job as its owner or as the slot's account
(:mod:`htc.daemons.run_as`), and that user must be able to *traverse* every directory down to
its sandbox: since any local user may own a job, every directory on the way must be
traversable by everyone (``o+x``). A personal pool's EXECUTE is
``$(LOCAL_DIR)/execute`` = ``$HTC_HOME/execute``, and the default home is ``~/.htc``: for root
that is ``/root/.htc/execute``, and ``/root`` is mode 0700. So is pytest's
``/tmp/pytest-of-root``. Left alone, every job would fail to start.

:func:`resolve_execute_dir` keeps EXECUTE whenever it works: when the startd is not root, when
the slot user can traverse the way down, and whenever an administrator set EXECUTE to anything
but its default. Only when EXECUTE is left at its default and others cannot reach it
does the startd use a per-pool directory of its own instead (and the configuration already says
so: EXECUTE's value is that directory, :mod:`htc.config.execute`, so ``htc config_val EXECUTE``
names where jobs run),
``/var/lib/htc/execute/<hash of HTC_HOME>`` (:data:`SHARED_EXECUTE_ROOT`): made by root, mode
0755 all the way, never group- or world-writable, so nobody else can plant or swap a
directory in it. The sandboxes inside are handed to the job's user as always (mode 0700). The
startd logs the directory it chose and why (StartLog), and removes it when it stops if it is
empty (a throw-away pool leaves nothing behind; the next start makes it again).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from htc.config.execute import DEFAULT_EXECUTE, SHARED_EXECUTE_ROOT, shared_execute_path, unreachable_parent
from htc.errors import UsageError

__all__ = ["SHARED_EXECUTE_ROOT", "DEFAULT_EXECUTE", "unreachable_parent", "shared_execute_dir",
           "shared_execute_path", "resolve_execute_dir"]

def _own_directory(path: Path) -> None:
    """Make ``path`` (mode 0755), or check that an existing one is ours and safe to use.

    Raises:
        UsageError: it is a symlink, not a directory, not ours, or writable by others.
    """
    with contextlib.suppress(FileExistsError):  # an existing one is checked below
        path.mkdir(mode=0o755)
        os.chmod(path, 0o755)  # the umask may have taken bits away
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise UsageError(f"{path} must be a directory owned by uid {os.geteuid()} and writable by nobody else "
                         f"(it is {stat.filemode(st.st_mode)}, uid {st.st_uid}); remove it, or set EXECUTE to a "
                         "directory every user may traverse")


def shared_execute_dir(home: Path, root: Path = SHARED_EXECUTE_ROOT) -> Path:
    """The per-pool execute directory ``root/<hash of home>``, made if missing (mode 0755).

    Raises:
        UsageError: the directory or one above it inside ``root`` is unsafe (see :func:`_own_directory`).
        OSError: it cannot be made (a read-only file system).
    """
    for parent in [*reversed(root.parents)][1:]:
        if not parent.exists():
            _own_directory(parent)
    _own_directory(root)
    leaf = shared_execute_path(home, root)
    _own_directory(leaf)
    return leaf


def resolve_execute_dir(configured: Path, *, home: Path, is_default: bool, slot_user: str | None = None,
                        root: Path = SHARED_EXECUTE_ROOT) -> tuple[Path, str]:
    """The directory the startd should make sandboxes in, and why it is not ``configured``.

    Args:
        configured: EXECUTE as configured.
        home: the pool's ``$HTC_HOME`` (names the per-pool directory).
        is_default: EXECUTE is left at its default (:data:`DEFAULT_EXECUTE`); an administrator's
            own setting is always kept.
        slot_user: unused (every job's user must reach it: any local user may own a job).
        root: where per-pool directories go (tests point it elsewhere).

    Returns:
        ``(directory, reason)``; ``reason`` is empty when ``configured`` is used, else one line
        for the log saying why and where jobs run.
    """
    if os.geteuid() != 0 or not is_default:
        return configured, ""
    if Path(configured) == shared_execute_path(home, root):
        # The configuration already chose it (htc.config.execute: EXECUTE says where jobs run)
        try:
            made = shared_execute_dir(home, root)
        except (UsageError, OSError) as exc:
            return configured, (f"EXECUTE {configured} could not be made: {exc}; jobs will fail to start "
                                "until EXECUTE names a directory every user may traverse")
        return made, (f"EXECUTE's default {DEFAULT_EXECUTE} cannot be reached by the jobs' users (a root "
                      f"startd under a private home); jobs run in {made} instead (set EXECUTE to choose "
                      "another directory)")
    blocked = unreachable_parent(configured)
    if blocked is None:
        return configured, ""
    try:
        shared = shared_execute_dir(home, root)
    except (UsageError, OSError) as exc:
        return configured, (f"EXECUTE {configured} cannot be reached by the jobs' users and no "
                            f"directory of its own could be made under {root}: {exc}; jobs will fail to start "
                            "until EXECUTE names a directory every user may traverse")
    if unreachable_parent(shared) is not None:
        return configured, ""  # no better: keep EXECUTE and let the starter name the directory
    where, mode = blocked
    return shared, (f"EXECUTE {configured} cannot be reached by the jobs' users ({where} is mode "
                    f"{mode:04o}); jobs run in {shared} instead (set EXECUTE to choose another directory)")

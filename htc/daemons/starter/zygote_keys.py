"""Which jobs a zygote may fork, and which zygote serves them (:mod:`htc.daemons.starter.zygote`).

**When.** A job is eligible when the starter would run ``[PYTHON, "-m", MODULE, args...]`` with
``MODULE`` in ``StarterSettings.zygote_modules`` (default: the executor's worker and lane), the
interpreter was not transferred into the sandbox, and ``StarterSettings.use_zygote`` is on
(:func:`eligible_module`; the starter checks the rest).

**Which zygote.** One per :class:`ZygoteKey`: the interpreter path, the module, the job user's
uid, gid and groups, and the job environment's variables that decide what a Python imports and
how it starts (``PYTHON*``, ``LANG``/``LC_*``, ``HOME``: :func:`zygote_environment`). So jobs of
different users, or of different interpreters or start-up settings, never share a zygote, and
nothing else of one job's environment reaches another's. Every other job may be forked and
exec'd by the one *exec zygote* (:meth:`ZygoteKey.for_exec`, module :data:`EXEC_MODULE`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["EXEC_MODULE", "ZygoteKey", "eligible_module", "zygote_environment"]

#: The module of the exec zygote's key: it imports nothing, its children exec the job.
EXEC_MODULE = ""


def eligible_module(argv: Sequence[str], modules: Iterable[str]) -> str | None:
    """The module a zygote would run for ``argv`` (``[python, "-m", MODULE, ...]``), or None."""
    if len(argv) >= 3 and argv[1] == "-m" and argv[2] in tuple(modules):
        return argv[2]
    return None


def zygote_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The part of a job's environment a zygote starts with (what decides imports and startup)."""
    return {name: value for name, value in env.items()
            if name.startswith(("PYTHON", "LC_")) or name in ("LANG", "LANGUAGE", "HOME")}


@dataclass(frozen=True)
class ZygoteKey:
    """What makes two jobs able to share a zygote."""

    python: str
    module: str
    uid: int | None
    gid: int | None
    env: tuple[tuple[str, str], ...]
    groups: tuple[int, ...] = ()  # the user's supplementary groups (set before the uid)

    @classmethod
    def for_job(cls, argv: Sequence[str], module: str, uid: int | None, gid: int | None,
                env: Mapping[str, str], groups: Sequence[int] = ()) -> ZygoteKey:
        """The key of the job whose argv, user (uid, gid, groups) and full environment are given."""
        return cls(os.path.abspath(argv[0]), module, uid, gid, tuple(sorted(zygote_environment(env).items())),
                   tuple(groups))

    @classmethod
    def for_exec(cls, python: str | None = None) -> ZygoteKey:
        """The key of the exec zygote: root (no uid), the startd's interpreter, no environment."""
        return cls(python or sys.executable, EXEC_MODULE, None, None, ())

    @property
    def is_exec(self) -> bool:
        """True for the exec zygote (which forks and execs any executable)."""
        return self.module == EXEC_MODULE

    @property
    def what(self) -> str:
        """How logs name the zygote."""
        return "exec jobs" if self.is_exec else self.module

"""A Python that the pool's slot user can run, for executors whose client runs as root.

A function job runs ``python -m htc.executors.worker`` on the execute side *as the slot user*
when the startd is root (``htc-slot<N>``: jobs never run as root). That user must be able
to read the interpreter, htc and the serializers. An installation under ``/root`` (mode 0700),
the usual place for a root's virtualenv, is out of its reach. ``HTCExecutor()`` with no
``python=`` handles that itself, with every package of the client
(:mod:`htc.executors.client_env`); for an interpreter named by hand, what an administrator does
for execute nodes -- install htc where every user can read it -- :func:`shared_python` does for
one machine (htc and its serializers only):

>>> python, environment = shared_python("/var/lib/htc/python")          # doctest: +SKIP
>>> HTCExecutor(python=python, environment=environment)                 # doctest: +SKIP

Theory of operation
-------------------
Not root, or root with an installation the slot user can already reach: nothing to do, the
answer is this interpreter and no extra environment. Otherwise the packages a function job
imports (htc with its executors and dag parts, cloudpickle, msgspec, dill) are copied with their
``.dist-info`` metadata (the worker compares the versions the call was pickled with) into
``ROOT/site``, byte-compiled (the slot user cannot write ``__pycache__``; without it every job
would compile htc from source), and made world-readable; the interpreter is this one when the
slot user can run it, else a system ``pythonX.Y`` of the same minor version. The answer is
that interpreter and ``PYTHONPATH=ROOT/site``. Calling it again with the same ``ROOT`` reuses
the copy when it is complete.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

from htc.errors import HTCError

__all__ = ["shared_python"]

#: what a function job imports besides the standard library
PACKAGES = ("cloudpickle", "msgspec", "dill")
_DONE = ".htc-shared-python-complete"


def _readable_by(path: Path, user: pwd.struct_passwd) -> bool:
    """Whether ``user`` (by the "other" permission bits: not root, not the owner) may read
    ``path`` and traverse every directory above it."""
    try:
        resolved = path.resolve()
        for parent in [*reversed(resolved.parents)]:
            st = parent.stat()
            if st.st_uid != user.pw_uid and not st.st_mode & 0o001:
                return False
        st = resolved.stat()
    except OSError:
        return False
    return st.st_uid == user.pw_uid or bool(st.st_mode & 0o004)


def _sources() -> dict[str, Path]:
    """Where the packages come from: top-level name -> directory of its ``__init__``."""
    import importlib.util

    import htc
    import htc.executors

    # htc.dag is found, not imported: the executor uses no code of the DAG layer beside it
    dag = importlib.util.find_spec("htc.dag")
    found = {"htc": Path(htc.__file__).parent, "htc/executors": Path(htc.executors.__file__).parent,
             "htc/dag": Path(dag.origin).parent}
    for name in PACKAGES:
        module = __import__(name)
        found[name] = Path(module.__file__).parent
    return found


def _reachable_install(user: pwd.struct_passwd) -> bool:
    return _readable_by(Path(sys.executable), user) and all(
        _readable_by(path / "__init__.py", user) for path in _sources().values())


def _system_python(user: pwd.struct_passwd) -> str:
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(sys.executable), Path(sys.executable).resolve(),
                  *(Path(folder) / minor for folder in ("/usr/bin", "/usr/local/bin", "/bin"))]
    for candidate in candidates:
        if candidate.exists() and _readable_by(candidate, user) and os.stat(candidate).st_mode & 0o001:
            if candidate == Path(sys.executable) and sys.prefix != sys.base_prefix:
                continue  # a venv's interpreter would bring the venv's unreachable site-packages
            return str(candidate)
    raise HTCError(f"no {minor} that the slot user {user.pw_name!r} may run was found (looked at "
                   f"{', '.join(str(c) for c in candidates)}); install one there, or install htc for a "
                   "Python every user can reach and pass python=... to HTCExecutor")


def _copy(site: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    sources = _sources()
    shutil.copytree(sources["htc"], site / "htc", ignore=shutil.ignore_patterns(
        "__pycache__", "*.pyc", "executors", "dag"))
    for part in ("executors", "dag"):
        target = site / "htc" / part
        if not target.exists():
            shutil.copytree(sources[f"htc/{part}"], target, ignore=ignore)
    for name in PACKAGES:
        shutil.copytree(sources[name], site / sources[name].name, ignore=ignore, dirs_exist_ok=True)
    for dist in ("htc", *PACKAGES):
        info = getattr(metadata.distribution(dist), "_path", None)
        if info is not None and Path(info).is_dir():
            shutil.copytree(info, site / Path(info).name, dirs_exist_ok=True)


def shared_python(root: str | os.PathLike, *, slot_user: str = "nobody") -> tuple[str, dict[str, str]]:
    """The ``python=`` and ``environment=`` for HTCExecutor that let ``slot_user`` run the calls.

    Args:
        root: a directory for the copy (made if missing; every user must be able to traverse
            to it, e.g. under ``/var/lib`` or ``/opt``, not under ``/root``).
        slot_user: the user jobs run as (the startd's ``SLOT<N>_USER``; default ``nobody``).

    Returns:
        ``(python, environment)``: this interpreter and ``{}`` when no copy is needed.

    Raises:
        HTCError: ``root`` is not reachable by ``slot_user``, or no usable interpreter exists.
    """
    if os.geteuid() != 0:
        return sys.executable, {}
    try:
        user = pwd.getpwnam(slot_user)
    except KeyError:
        raise HTCError(f"slot user {slot_user!r} does not exist; name the user the pool's jobs run as") from None
    if _reachable_install(user):
        return sys.executable, {}
    root = Path(root)
    site = root / "site"
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    if not _readable_by(root, user):
        raise HTCError(f"slot user {slot_user!r} cannot reach {root}: a directory above it is closed to other "
                       "users; pick a root every user may traverse (e.g. under /var/lib or /opt)")
    python = _system_python(user)
    if not (root / _DONE).exists():
        shutil.rmtree(site, ignore_errors=True)
        site.mkdir(parents=True)
        _copy(site)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        done = subprocess.run([python, "-m", "compileall", "-q", "-j", "0", str(site)], capture_output=True,
                              text=True, env=env)
        if done.returncode != 0:
            raise HTCError(f"{python} could not byte-compile the copy in {site}: "
                           f"{(done.stdout + done.stderr).strip()[-500:]}")
        for path in [root, *root.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() else 0o644)
        (root / _DONE).touch(mode=0o644)
    return python, {"PYTHONPATH": str(site)}

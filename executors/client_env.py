"""The client's own Python environment, made runnable by the slot accounts of a root client.

A root client's calls run as a slot account of the pool (``htc-slot<N>``: jobs never run as
root, :mod:`htc.daemons.run_as`). That account is "other" to every file of root, and the usual
place of a root's environment -- ``/root/project/.venv``, pyenv or uv under ``/root`` -- sits
behind ``/root`` (mode 0700). :func:`client_python` gives the executor an interpreter the slot
account can run that imports what the client imports: the same packages, at the same versions.

Theory of operation
-------------------
**What the client imports from** is its ``sys.path`` after ``site`` ran (so every ``.pth`` file
already had its say), less three kinds of entries: the first one (the script's directory or
the current directory: its modules are pickled by value, :mod:`htc.executors.serialize`), the
standard library (the job's interpreter brings its own), and any entry that is ``/``, the
home directory, one of its parents, or the current directory (never copied wholesale). The
sources of editable installs (setuptools' ``__editable___*_finder`` modules: ``pip install -e``)
are added: they are found through a finder, not through ``sys.path``.

**Reachable entries are used where they are**: a directory the slot account can traverse to and
read (by the "other" permission bits all the way down; a standard container or a venv under
``/usr``, ``/opt`` or ``/srv``) is not copied.

**Unreachable entries are mirrored** under ``/var/cache/htc/python/<key>/tree/<their absolute
path>``: each file hard-linked when it is on the same file system and already readable by
everyone (the link then shares a root-owned inode no other user may write), else copied and
made readable (mode ``u+rw,go+r``, never group- or world-writable). The ``MAPPING`` of a
mirrored editable finder is rewritten (in a new file, never through the link) to point at the
mirrored sources. The *key* is a digest of the interpreter, the entries and, for every file of
a mirrored entry (``__pycache__`` aside), its path, size and modification time: an unchanged
environment reuses its mirror, a ``pip install`` makes a new one. A mirror is built in a
temporary directory under a lock and renamed into place, so a job never sees half a mirror;
mirrors unused for a day are removed when another is built.

**The interpreter** is the client's own base interpreter when the slot account can run it,
else the system's ``pythonX.Y`` of the same minor version (the same ABI: compiled extensions
load). The job runs it through a small virtual environment in the mirror, ``venv/``:
``pyvenv.cfg`` (``include-system-site-packages = false``, so nothing else the interpreter has
installed leaks in) and one ``.pth`` file that adds the entries, in the client's order, with
``site.addsitedir`` (their ``.pth`` files run, editable installs included). The mirror's
sources are byte-compiled, since the slot account cannot write ``__pycache__``.

**What the job can do to the client's files**: nothing. It runs as another uid; the mirror and
every directory above it are root's and writable by nobody else; a hard link is an inode the
job can read and not write. What becomes readable to every local user is a copy of the
client's import path (not its home, its project's other files, or its results).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pwd
import shutil
import stat
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from htc.errors import HTCError
from htc.executors.execute_env import _readable_by

__all__ = ["MIRROR_ROOT", "client_python"]

#: where mirrors of a root client's environment go (a cache: anything there can be made again)
MIRROR_ROOT = Path("/var/cache/htc/python")
#: a mirror unused for this long is removed when another one is built
UNUSED_FOR = 24 * 3600.0
_DONE = ".complete"
_USED = ".last-used"
_PTH = "_htc_client_path.pth"


def _stdlib() -> set[str]:
    paths = sysconfig.get_paths()
    std = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib")}
    std |= {os.path.join(p, "lib-dynload") for p in list(std)}
    std.add(os.path.realpath(os.path.join(sys.base_prefix, "lib",
                                          f"python{sys.version_info.major}{sys.version_info.minor}.zip")))
    return std


def _never_copied() -> set[str]:
    home = Path.home().resolve()
    never = {"/", str(home), *(str(p) for p in home.parents)}
    with contextlib.suppress(OSError):
        never.add(os.path.realpath(os.getcwd()))
    return never


def _editable_finders() -> dict[str, list[str]]:
    """setuptools' editable finders (``pip install -e``): the directory of each finder module ->
    the source directories it maps packages to."""
    found: dict[str, list[str]] = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("__editable___") and name.endswith("_finder"):
            mapping = getattr(module, "MAPPING", None)
            if isinstance(mapping, dict):
                where = os.path.dirname(os.path.realpath(getattr(module, "__file__", None) or "."))
                found.setdefault(where, []).extend(os.path.realpath(p) for p in mapping.values() if isinstance(p, str))
    return found


def _editable_sources() -> list[str]:
    """The directories setuptools' editable finders map packages to."""
    return [source for sources in _editable_finders().values() for source in sources]


def import_path() -> list[str]:
    """The client's import path as a job needs it (see the module docstring), real paths, in order."""
    skip = _stdlib() | _never_copied()
    entries = []
    first = 0 if getattr(sys.flags, "safe_path", False) else 1  # -P: no script directory in front
    for entry in sys.path[first:]:
        if not entry:
            continue
        real = os.path.realpath(entry)
        if real in skip or real in entries or not os.path.exists(real):
            continue
        entries.append(real)
    return entries


def _interpreter(user: pwd.struct_passwd) -> str:
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = getattr(sys, "_base_executable", sys.executable)
    candidates = [os.path.realpath(base), *(os.path.join(d, minor) for d in ("/usr/bin", "/usr/local/bin", "/bin"))]
    for candidate in candidates:
        if os.path.isfile(candidate) and _readable_by(Path(candidate), user) and os.stat(candidate).st_mode & 0o001:
            return os.path.realpath(candidate)
    raise HTCError(f"the slot accounts that run a root client's calls (jobs never run as root) cannot run this "
                   f"Python ({os.path.realpath(base)}), and no system {minor} was found (looked at "
                   f"{', '.join(candidates[1:])}); install one there (e.g. apt-get install {minor}), or pass "
                   "HTCExecutor(python=...) an interpreter every user can run (docs/executor.md, 'Running as root')")


def _walk(top: str):
    """(directory, [file names]) below ``top``, ``__pycache__`` aside, symbolic links to directories not followed."""
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        yield folder, sorted(files)


def _key(interpreter: str, entries: list[str], mirrored: list[str]) -> str:
    h = hashlib.blake2b(digest_size=10)
    h.update(f"{interpreter}\0{sys.version}\0".encode())
    for entry in entries:
        h.update(f"e{entry}\0{entry in mirrored}\0".encode())
    for top in mirrored:
        if os.path.isfile(top):
            st = os.stat(top)
            h.update(f"f{top}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
            continue
        for folder, files in _walk(top):
            h.update(f"d{folder}\0".encode())
            for name in files:
                with contextlib.suppress(OSError):
                    st = os.stat(os.path.join(folder, name))
                    h.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def _place(src: str, dst: str) -> None:
    """``dst`` becomes a hard link to ``src`` (when already readable by all), else a readable copy."""
    st = os.stat(src)
    if stat.S_IMODE(st.st_mode) & 0o444 == 0o444 and not st.st_mode & 0o022 and st.st_uid == 0:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass  # another file system, or links not allowed there: copy it instead
    shutil.copy2(src, dst)
    os.chmod(dst, (stat.S_IMODE(st.st_mode) | 0o644) & 0o755)


def _mirror(src: str, dst: str, uncompiled: list[str]) -> None:
    """Mirror ``src`` at ``dst``; the mirrored sources without a byte-compiled file go to ``uncompiled``."""
    if os.path.isfile(src):
        os.makedirs(os.path.dirname(dst), mode=0o755, exist_ok=True)
        _place(src, dst)
        return
    tag = f".{sys.implementation.cache_tag}.pyc"
    for folder, dirs, files in os.walk(src):
        target = os.path.join(dst, os.path.relpath(folder, src))
        os.makedirs(target, mode=0o755, exist_ok=True)
        compiled = set()
        if "__pycache__" in dirs:
            with contextlib.suppress(OSError):
                compiled = {n[:-len(tag)] for n in os.listdir(os.path.join(folder, "__pycache__")) if n.endswith(tag)}
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(folder, d)))]:
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                with contextlib.suppress(OSError):
                    _place(path, os.path.join(target, name))
                    if name.endswith(".py") and name[:-3] not in compiled and "__pycache__" not in folder:
                        uncompiled.append(os.path.join(target, name))
            elif os.path.isdir(path):  # a link to a directory: mirror what it points at
                real = os.path.realpath(path)
                if not (real + os.sep).startswith(os.path.realpath(src) + os.sep):
                    _mirror(real, os.path.join(target, name), uncompiled)


def _rewrite_finders(tree: Path, moved: dict[str, str], uncompiled: list[str]) -> None:
    """Point every mirrored editable finder's MAPPING at the mirrored sources (a new file each)."""
    for finder in tree.rglob("__editable___*_finder.py"):
        text = original = finder.read_text()
        for old, new in moved.items():
            text = text.replace(repr(old), repr(new)).replace(repr(old + os.sep)[:-1], repr(new + os.sep)[:-1])
        if text != original:
            finder.unlink()  # a hard link to the client's own file: never written through
            finder.write_text(text)
            (finder.parent / "__pycache__" / f"{finder.stem}.{sys.implementation.cache_tag}.pyc").unlink(missing_ok=True)
            uncompiled.append(str(finder))


def _check_root(root: Path) -> None:
    """``root`` and every directory above it: root's, not writable by group or others."""
    for path in (*reversed(root.parents), root):
        if not path.exists():
            path.mkdir(mode=0o755)
            path.chmod(0o755)  # whatever the umask: the slot accounts traverse it
    for path in (root, *root.parents):
        st = path.stat()
        sticky = path != root and st.st_mode & stat.S_ISVTX  # /tmp: others cannot replace root's entries
        if st.st_uid != 0 or (st.st_mode & 0o022 and not sticky):
            raise HTCError(f"{path} is not root's or may be written by others: a mirror of the client's Python there "
                           "could be changed under the jobs; pick another root")
        if not st.st_mode & 0o001:
            raise HTCError(f"{path} is closed to other users (mode {stat.filemode(st.st_mode)}): the slot accounts "
                           "could not reach a mirror under it")


def _build(root: Path, key: str, interpreter: str, entries: list[str], mirrored: list[str]) -> None:
    final = root / key
    build = root / f".build-{key}-{os.getpid()}"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(mode=0o755)
    try:
        moved: dict[str, str] = {}
        uncompiled: list[str] = []
        for top in mirrored:
            _mirror(top, str(build / "tree" / top.lstrip("/")), uncompiled)
            moved[top] = str(final / "tree" / top.lstrip("/"))
        if (build / "tree").exists():
            _rewrite_finders(build / "tree", moved, uncompiled)
        minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
        venv = build / "venv"
        (venv / "bin").mkdir(parents=True, mode=0o755)
        site = venv / "lib" / minor / "site-packages"
        site.mkdir(parents=True, mode=0o755)
        (venv / "pyvenv.cfg").write_text(f"home = {os.path.dirname(interpreter)}\n"
                                         "include-system-site-packages = false\n")
        os.symlink(interpreter, venv / "bin" / minor)
        os.symlink(minor, venv / "bin" / "python3")
        os.symlink(minor, venv / "bin" / "python")
        paths = [moved.get(e, e) for e in entries]
        (site / _PTH).write_text(f"import site; list(map(site.addsitedir, {paths!r}))\n")
        for path in [build, *build.rglob("*")]:
            if path.is_symlink():
                continue
            st = path.stat()
            if path.is_dir() or st.st_nlink == 1:  # a hard link is the client's inode: left alone
                os.chmod(path, 0o755 if path.is_dir() else (stat.S_IMODE(st.st_mode) | 0o644) & 0o755)
        if uncompiled:
            # the slot accounts cannot write __pycache__: without this every job would compile what
            # pip did not (an editable install's sources) at every start
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
            subprocess.run([interpreter, "-m", "compileall", "-q", "-i", "-"], input="\n".join(uncompiled),
                           capture_output=True, text=True, env=env, timeout=600)
            for cache in (build / "tree").rglob("__pycache__"):
                for path in [cache, *cache.iterdir()]:
                    if path.stat().st_nlink == 1 or path.is_dir():
                        os.chmod(path, 0o755 if path.is_dir() else 0o644)
        (build / _DONE).touch(mode=0o644)
        os.rename(build, final)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise


def _forget_unused(root: Path, keep: str) -> None:
    now = time.time()
    for path in root.iterdir():
        if path.name == keep or not path.is_dir():
            continue
        used = path / _USED
        try:
            when = used.stat().st_mtime if used.exists() else path.stat().st_mtime
        except OSError:
            continue
        if now - when > UNUSED_FOR:
            shutil.rmtree(path, ignore_errors=True)


def client_python(*, slot_user: str = "nobody", root: str | os.PathLike = MIRROR_ROOT) -> str:
    """An interpreter the slot accounts can run that imports what this client imports.

    Not root, or root whose interpreter and import path every user can already read: this
    interpreter. Otherwise the ``python`` of a mirror under ``root`` (see the module docstring).

    Args:
        slot_user: an account that stands for the slot accounts (they are "other" to root's files).
        root: where mirrors go (made if missing; it and every directory above must be root's, not
            writable by others, and traversable by everyone).

    Raises:
        HTCError: no interpreter the slot accounts can run, or ``root`` is not a safe place.
    """
    if os.geteuid() != 0:
        return sys.executable
    try:
        user = pwd.getpwnam(slot_user)
    except KeyError:
        raise HTCError(f"slot user {slot_user!r} does not exist; name an account as unprivileged as the "
                       "pool's slot accounts") from None
    entries = import_path()
    for source in _editable_sources():
        if source not in entries and os.path.exists(source) and source not in _never_copied():
            entries.append(source)
    mirrored = [e for e in entries if not _readable_by(Path(e), user)
                or (os.path.isdir(e) and not os.stat(e).st_mode & 0o001)]
    for where, sources in _editable_finders().items():  # a finder of mirrored sources is rewritten: mirror it
        if where in entries and where not in mirrored and any(source in mirrored for source in sources):
            mirrored.append(where)
    if not mirrored and _readable_by(Path(sys.executable), user) \
            and os.stat(os.path.realpath(sys.executable)).st_mode & 0o001:
        return sys.executable  # a container's or system's Python every user can read: nothing to do
    interpreter = _interpreter(user)
    root = Path(root)
    _check_root(root)
    # the editable finders' sources are reached through the finder, not the path
    path_entries = [e for e in entries if e not in _editable_sources() or e in import_path()]
    key = _key(interpreter, path_entries, mirrored)
    final = root / key
    if not (final / _DONE).exists():
        with open(root / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (final / _DONE).exists():
                shutil.rmtree(final, ignore_errors=True)
                _build(root, key, interpreter, path_entries, mirrored)
                _forget_unused(root, key)
    with contextlib.suppress(OSError):
        (final / _USED).touch(mode=0o644)
    return str(final / "venv" / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")

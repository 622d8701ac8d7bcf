"""Compiling the runtime's C sources, once per source version, into a cache.

Theory of operation
-------------------
The C sources ship as package data in ``htc/runtime/c``. Two kinds of artifact are built from
them:

* the preload library ``libjobrt.so``: every ``jobrt_*.c`` except the programs' own sources
  (``jobrt_restart*.c``, ``jobrt_dump*.c``), compiled with ``-shared -fPIC -O2``;
* a program such as ``jobrt-restart``: the sources ``<name with - as _>*.c``, compiled with the
  flags of its row in :data:`PROGRAMS`.

The cache directory of an artifact is named by a hash of every file in ``htc/runtime/c`` (the
header too), the artifact's flags and the compiler's identity (``cc --version`` and
``-dumpmachine``), so an edited source, a changed flag or an upgraded compiler each yield a new
directory and a stale binary is never reused.

Two caches. The **machine's** (:func:`shared_root`) is ``$HTC_RUNTIME_CACHE`` if set, else
``/var/cache/htc/runtime`` for root, else ``$XDG_CACHE_HOME/htc/runtime`` or
``~/.cache/htc/runtime``. A caller may name **its own** with the ``cache`` argument -- the startd
gives its starters a directory beside EXECUTE that every job's user can read -- and then an
artifact missing there is taken from the machine's cache (built there first if it is missing
too) and copied in: a new pool, with a new EXECUTE, does not compile the runtime again (30-60 s
of compiling before its first standard-universe job). The machine's cache is used only while no
one else can change what is in it: its directories and files must be owned by this user or root
and writable by no one else, their group only when it is this process's own (:func:`_trusted`);
otherwise a build that names its own cache compiles into it alone, and one that does not is
refused, saying what to fix. Directories the build creates are 0755.

A build compiles into a private temporary directory inside the cache directory and then
``os.replace``\\ s the result onto its final name; a copy is written beside its target and
renamed the same way. Renaming is atomic, so two processes that build at once both succeed (the
later rename replaces an identical file) and a reader never sees a half-written binary. Failures
raise :class:`RuntimeUnavailable`, a :class:`UsageError`: no compiler, no static C library, a
compile error (quoting the compiler's first lines), or a machine cache others can write.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from htc.errors import UsageError

_log = logging.getLogger(__name__)

#: where the C sources live (installed as package data)
SOURCE_DIR = Path(__file__).with_name("c")

#: the preload library's file name
LIBRARY_NAME = "libjobrt.so"

#: flags of the preload library (position independent, optimised, warnings on)
LIBRARY_FLAGS: tuple[str, ...] = ("-shared", "-fPIC", "-O2", "-Wall", "-D_GNU_SOURCE")
#: libraries the preload library links against (after the sources)
LIBRARY_LIBS: tuple[str, ...] = ("-ldl",)

#: sources of the programs, which the library leaves out
PROGRAM_PREFIXES = ("jobrt_restart", "jobrt_dump")

#: what to install when a piece of the toolchain is missing (Debian/Ubuntu names)
INSTALL_HINT = "install a C compiler and the static C library (Debian/Ubuntu: apt-get install gcc libc6-dev)"


@dataclass(frozen=True)
class ProgramSpec:
    """How one program of the runtime is compiled and linked."""

    flags: tuple[str, ...]
    #: extra arguments after the sources (libraries)
    libs: tuple[str, ...] = ()
    #: linked statically: needs the static C library (or none at all, with -nostdlib)
    static: bool = False


#: per-program flags; a program's sources are ``c/<name with - as _>*.c``
PROGRAMS: dict[str, ProgramSpec] = {
    # The restarter replaces its whole address space, so it must live where no job maps
    # anything: static, freestanding, at a fixed high link address, on a stack in its own .bss.
    "jobrt-restart": ProgramSpec(
        flags=("-O2", "-Wall", "-D_GNU_SOURCE", "-static", "-nostdlib", "-ffreestanding",
               "-fno-stack-protector", "-fpie", "-no-pie", "-Wl,-Ttext-segment=0x100000000000"),
        libs=("-lgcc",),
        static=True,
    ),
    # The ptrace dumper is an ordinary program; static so that it runs wherever the job runs.
    "jobrt-dump": ProgramSpec(flags=("-O2", "-Wall", "-D_GNU_SOURCE", "-static"), static=True),
}


class RuntimeUnavailable(UsageError):
    """The runtime cannot be built or run on this host (compiler, static libc, kernel feature)."""


def compiler() -> str:
    """Return the path of the C compiler: ``$CC`` if set, else ``cc``, else ``gcc``.

    Raises :class:`RuntimeUnavailable` when there is none.
    """
    wanted = os.environ.get("CC", "").split()
    candidates = [wanted[0]] if wanted else ["cc", "gcc"]
    for name in candidates:
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeUnavailable(
        f"no C compiler found (looked for {', '.join(candidates)} on PATH): the job runtime "
        f"compiles its C sources on first use; {INSTALL_HINT}, or set CC"
    )


@lru_cache(maxsize=8)
def _compiler_identity(cc: str) -> str:
    """Return the compiler's version banner and target, which go into the cache key."""
    out = []
    for flag in ("--version", "-dumpmachine"):
        try:
            done = subprocess.run([cc, flag], capture_output=True, text=True, timeout=60)
        except OSError as err:
            raise RuntimeUnavailable(f"the C compiler {cc} does not run ({err}); {INSTALL_HINT}") from err
        out.append(done.stdout.strip())
    return "\n".join(out)


#: the machine's cache of a root process (one that is not root uses its home's cache)
ROOT_CACHE = Path("/var/cache/htc/runtime")


def shared_root() -> Path:
    """Return the machine's cache root: ``$HTC_RUNTIME_CACHE``, ``/var/cache/htc/runtime`` for
    root, else ``$XDG_CACHE_HOME/htc/runtime`` or ``~/.cache/htc/runtime``."""
    if os.environ.get("HTC_RUNTIME_CACHE"):
        return Path(os.environ["HTC_RUNTIME_CACHE"])
    if os.geteuid() == 0:
        return ROOT_CACHE
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "htc" / "runtime"


def cache_root(cache: Path | str | None = None) -> Path:
    """Return the cache root: ``cache`` when given, else the machine's (:func:`shared_root`)."""
    return Path(cache) if cache is not None else shared_root()


def _trusted(path: Path) -> str | None:
    """None when ``path`` (not a link) is owned by this user or root and writable by no one
    else -- group-writable only for this process's own group (a user's private group, which a
    umask of 002 gives every file); otherwise why it is not to be trusted."""
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if st.st_uid not in (os.geteuid(), 0):
        return f"{path} belongs to uid {st.st_uid}"
    if st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and st.st_gid != os.getegid()):
        return f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):04o}, group {st.st_gid})"
    return None


def _make_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents, each 0755 whatever the umask."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # (another process made it first)
            directory.mkdir(mode=0o755)
            directory.chmod(0o755)


def _shared_directory(root: Path, key: str) -> Path:
    """The machine cache's directory of ``key``, created if need be.

    Raises:
        RuntimeUnavailable: the cache (root or key directory) is not to be trusted (:func:`_trusted`).
        OSError: it cannot be created.
    """
    directory = root / key
    _make_dirs(directory)
    for path in (root, directory):
        why = _trusted(path)
        if why is not None:
            raise RuntimeUnavailable(
                f"the runtime cache {root} is not safe to run programs from: {why}; make it yours and "
                f"not writable by others (chmod go-w), or set HTC_RUNTIME_CACHE to a directory you own")
    return directory


def _copy_in(source: Path, target: Path) -> Path:
    """Copy the cached artifact ``source`` to ``target`` atomically (0755); return ``target``."""
    _make_dirs(target.parent)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".copy-")
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out)
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return target


def _sources_digest() -> str:
    """Hash every file of the source directory (names and contents)."""
    h = hashlib.sha256()
    for path in sorted(SOURCE_DIR.iterdir()):
        if path.is_file() and path.suffix in (".c", ".h"):
            h.update(path.name.encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def _key(cc: str, flags: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    h.update(_sources_digest().encode())
    h.update("\0".join(flags).encode())
    h.update(_compiler_identity(cc).encode())
    return h.hexdigest()[:20]


def library_sources() -> list[Path]:
    """Return the sources of the preload library (sorted)."""
    return sorted(
        p for p in SOURCE_DIR.glob("jobrt_*.c") if not p.name.startswith(PROGRAM_PREFIXES)
    )


def program_sources(name: str) -> list[Path]:
    """Return the sources of program ``name`` (``c/<name with - as _>*.c``, sorted)."""
    return sorted(SOURCE_DIR.glob(name.replace("-", "_") + "*.c"))


def library(cache: Path | str | None = None) -> Path:
    """Build (or return the cached) ``libjobrt.so`` and return its path."""
    key_flags = LIBRARY_FLAGS + ("--",) + LIBRARY_LIBS  # "--" only separates the two in the key
    return _build(LIBRARY_NAME, library_sources(), LIBRARY_FLAGS, LIBRARY_LIBS, key_flags, False, cache)


def program(name: str, cache: Path | str | None = None) -> Path:
    """Build (or return the cached) program ``name`` (a key of :data:`PROGRAMS`); return its path."""
    spec = PROGRAMS.get(name)
    if spec is None:
        raise RuntimeUnavailable(
            f"the runtime has no program named {name!r}; it has {', '.join(sorted(PROGRAMS))}"
        )
    sources = program_sources(name)
    key_flags = spec.flags + ("--",) + spec.libs
    return _build(name, sources, spec.flags, spec.libs, key_flags, spec.static, cache)


def _build(artifact: str, sources: list[Path], flags: tuple[str, ...], libs: tuple[str, ...],
           key_flags: tuple[str, ...], static: bool, cache: Path | str | None) -> Path:
    if not sources:
        raise RuntimeUnavailable(
            f"no C sources for {artifact} in {SOURCE_DIR}: the htc installation is incomplete "
            "(the runtime's C sources ship as package data); reinstall htc"
        )
    cc = compiler()
    key = _key(cc, key_flags)
    own = Path(cache) / key if cache is not None else None
    if own is not None and (own / artifact).exists():
        return own / artifact
    root = shared_root()
    try:
        shared = _shared_directory(root, key)
    except (RuntimeUnavailable, OSError) as err:
        if own is None:
            if isinstance(err, RuntimeUnavailable):
                raise
            raise RuntimeUnavailable(f"cannot create the runtime cache {root / key}: {err}; set "
                                     "HTC_RUNTIME_CACHE to a directory you can write") from err
        _log.warning("not using the machine's runtime cache: %s", err)
        _make_dirs(own)
        return _compile(artifact, sources, flags, libs, static, cc, own)
    found = shared / artifact
    if not found.exists():
        _compile(artifact, sources, flags, libs, static, cc, shared)
    elif (why := _trusted(found)) is not None:
        raise RuntimeUnavailable(f"the runtime cache holds an artifact others could have changed: {why}; "
                                 f"remove it (it is built again) or set HTC_RUNTIME_CACHE to a directory you own")
    return found if own is None or own == shared else _copy_in(found, own / artifact)


def _compile(artifact: str, sources: list[Path], flags: tuple[str, ...], libs: tuple[str, ...], static: bool,
             cc: str, directory: Path) -> Path:
    """Compile ``artifact`` into ``directory`` (atomically); return its path."""
    target = directory / artifact
    with tempfile.TemporaryDirectory(dir=directory, prefix=".build-") as tmp:
        out = Path(tmp) / artifact
        cmd = [cc, *flags, "-I", str(SOURCE_DIR), "-o", str(out), *map(str, sources), *libs]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except OSError as err:
            raise RuntimeUnavailable(f"the C compiler {cc} does not run ({err}); {INSTALL_HINT}") from err
        if done.returncode != 0:
            raise _compile_error(artifact, cc, done.stderr, static)
        out.chmod(0o755)  # (whatever the umask: the jobs' users run it)
        os.replace(out, target)
    return target


def _compile_error(artifact: str, cc: str, stderr: str, static: bool) -> RuntimeUnavailable:
    """Turn a failed compiler run into an error that says why and what to do."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line]   # the errors first, then the context
    quoted = "\n  ".join((errors or lines)[:8]) or "(no output)"
    if static and any("cannot find -lc" in line or "cannot find -lgcc" in line for line in lines):
        return RuntimeUnavailable(
            f"cannot link {artifact} statically: the static C library is missing; {INSTALL_HINT}\n  {quoted}"
        )
    return RuntimeUnavailable(
        f"compiling {artifact} with {cc} failed (a bug in htc's runtime sources or an unsupported "
        f"compiler; report it with this output):\n  {quoted}"
    )

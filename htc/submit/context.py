"""The state one job-ad build reads and writes.

A job ad is built by running the *commands* (HTCondor's ``SubmitHash::SetXxx`` methods,
listed in order in :mod:`htc.submit.builder`) over a :class:`JobContext`.  Every command reads submit values through
:meth:`JobContext.param` and job attributes through :meth:`JobContext.get`, and writes
attributes as ClassAd expression text.  The context records, per command, which per-proc
macros and which attributes it read and which attributes it wrote; the cluster planner
uses that to re-run only the commands that differ from proc to proc.

Attributes are case-insensitive (keyed by lower-case name, first spelling kept).  A proc
after the first reads through to the first proc's ad (``base``) like HTCondor's proc ads
chained to their cluster ad, so a command left unset for a later proc inherits.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import NamedTuple

from htc.submit import exprtext
from htc.submit.errors import SubmitError
from htc.submit.macros import Expander
from htc.submit.settings import SubmitSettings


class Attr(NamedTuple):
    """One job attribute: its spelling, ClassAd text, and Python value when a literal."""

    name: str
    text: str
    value: object = None


def real_text(v: float) -> str:
    """A real the way old-syntax ClassAds print it (``0.0``, ``1.5``)."""
    r = repr(float(v))
    return r if ("." in r or "e" in r or "n" in r) else r + ".0"


class Universe(NamedTuple):
    """The cluster's universe, fixed by its first proc."""

    number: int
    topping: str = ""  # "docker", "container", "python" or ""


class JobContext:
    """Everything one run of the commands sees; see the module docstring."""

    def __init__(self, *, settings: SubmitSettings, expander: Expander,
                 base: Mapping[str, Attr] | None, cluster_id: int, proc_id: int, qdate: int,
                 owner: str | None, cwd: str, submit_file: str | None, universe: Universe | None,
                 queue_line: int, file: str | None):
        self.s = settings
        self.ex = expander
        self.base: Mapping[str, Attr] = base or {}
        self.out: dict[str, Attr] = {}
        self.cluster_id = cluster_id
        self.proc_id = proc_id
        self.qdate = qdate
        self.owner = owner
        self.cwd = cwd
        self.submit_file = submit_file
        self.universe = universe
        self.queue_line = queue_line
        self.file = file
        self.warnings: list[str] = []
        self.reads: set[str] | None = None
        self.writes: list[str] | None = None
        #: whether files may be looked at (False when the schedd expands a description as root)
        self.host_access = True
        #: condor_submit's file check (``check_file(role, path, transfer)``, raising SubmitError),
        #: called with each executable; None: no checks (the bindings, the schedd)
        self.check_file = None
        #: when a list: each host lookup a command makes is appended as ``(command index, path,
        #: signature)`` (see :meth:`observe`), so a reused expansion can tell the host changed
        self.host_log: list | None = None
        #: the index in ``builder.COMMANDS`` of the command running (set by ``run_commands``)
        self.command_index = -1

    def observe(self, path: str, walks: bool = False) -> None:
        """Note that the running command looked at ``path`` on this host (its existence, mode or
        size): with :attr:`host_log` set, its stat signature is recorded -- None when the
        command walks a directory (``walks``), whose contents no signature covers."""
        if self.host_log is not None:
            sig = stat_signature(path)
            self.host_log.append((self.command_index, path, None if walks and sig[0] == "dir" else sig))

    # -- errors --------------------------------------------------------------------------
    def fail(self, message: str, command: str | None = None) -> SubmitError:
        """An error located at the line defining ``command`` (or at the queue statement)."""
        m = self.ex.table.macro(command) if command else None
        if m is not None and m.line is not None:
            return SubmitError(message, file=m.file or self.file, line=m.line, command=m.name)
        return SubmitError(message, file=self.file, line=self.queue_line,
                           command=command or "queue")

    # -- submit values ---------------------------------------------------------------------
    def param(self, key: str, alt: str | None = None) -> str | None:
        """Expanded value of a command (None when unset or empty), like ``submit_param``."""
        try:
            return self.ex.param(key, alt)
        except SubmitError as e:
            used = key if self.ex.table.macro(key) is not None or alt is None else alt
            raise self.fail(e.reason, used) from None

    def defined(self, key: str) -> bool:
        """Whether the description itself defines ``key`` (defaults do not count)."""
        return key in self.ex.table

    def param_bool(self, key: str, alt: str | None, default: bool) -> tuple[bool, bool]:
        """A boolean command; returns ``(value, given)``.

        Raises:
            SubmitError: "<key>=<value> is invalid, must eval to a boolean."
        """
        v = self.param(key, alt)
        if v is None:
            return default, False
        b = exprtext.eval_bool(v)
        if b is None:
            raise self.fail(f"{key}={v} is invalid, must eval to a boolean.", key)
        return b, True

    def param_int(self, key: str, alt: str | None = None, int_range: bool = False) -> int | None:
        """An integer command (None when unset).

        Raises:
            SubmitError: "<key>=<value> is invalid, must eval to an integer."
        """
        v = self.param(key, alt)
        if v is None:
            return None
        i = exprtext.eval_int(v)
        if i is None or (int_range and not -2**31 <= i < 2**31 - 1):
            raise self.fail(f"{key}={v} is invalid, must eval to an integer.", key)
        return i

    # -- job attributes ------------------------------------------------------------------
    def get(self, attr: str) -> Attr | None:
        """An attribute of the ad so far (this proc, then proc 0), recorded as read."""
        key = attr.lower()
        if self.reads is not None:
            self.reads.add(key)
        a = self.out.get(key)
        return a if a is not None else self.base.get(key)

    def has(self, attr: str) -> bool:
        """Whether the ad has ``attr`` (recorded as a read)."""
        return self.get(attr) is not None

    def get_value(self, attr: str, kind: type, default=None):
        """The literal value of ``attr`` if it is of ``kind``, else ``default``."""
        a = self.get(attr)
        if a is None or not isinstance(a.value, kind) or (kind is int and isinstance(a.value, bool)):
            return default
        return a.value

    def attr_names(self) -> list[str]:
        """Every attribute name in the ad so far (recorded as a read of all of them)."""
        names = {k: a.name for k, a in self.base.items()}
        names.update({k: a.name for k, a in self.out.items()})
        if self.reads is not None:
            self.reads.add("*")
        return list(names.values())

    def _put(self, attr: str, text: str, value) -> None:
        key = attr.lower()
        old = self.out.get(key) or self.base.get(key)
        self.out[key] = Attr(old.name if old is not None else attr, text, value)
        if self.writes is not None:
            self.writes.append(key)

    def assign_str(self, attr: str, s: str) -> None:
        """Set a string attribute."""
        self._put(attr, exprtext.quote(s), s)

    def assign_int(self, attr: str, i: int) -> None:
        """Set an integer attribute."""
        self._put(attr, str(int(i)), int(i))

    def assign_bool(self, attr: str, b: bool) -> None:
        """Set a boolean attribute."""
        self._put(attr, "true" if b else "false", bool(b))

    def assign_real(self, attr: str, r: float) -> None:
        """Set a real attribute."""
        self._put(attr, real_text(r), float(r))

    def assign_expr(self, attr: str, text: str, command: str | None = None) -> None:
        """Assign an expression, checked by the ClassAd parser and kept in canonical form.

        Raises:
            SubmitError: "Parse error in expression", located at ``command``.
        """
        try:
            canon = exprtext.check(attr, text)
        except SubmitError as e:
            raise self.fail(e.reason, command) from None
        self._put(attr, canon, _literal_value(canon))

    # -- paths ---------------------------------------------------------------------------
    @property
    def iwd(self) -> str:
        """The job's initial directory (the submit directory until ``Iwd`` is set)."""
        a = self.get("Iwd")
        return a.value if a is not None and isinstance(a.value, str) else self.cwd

    def measure(self, name: str) -> int:
        """The size of a file or directory the job names, in KiB (0 without host access: the
        schedd, expanding as root, neither reveals sizes nor walks a tree like ``/`` for it)."""
        if not self.host_access:
            return 0
        path = self.full_path(name)
        self.observe(path, walks=True)
        return size_kb(path)

    def full_path(self, name: str, use_iwd: bool = True) -> str:
        """HTCondor's ``full_path``: absolute, relative to the iwd (or the submit dir)."""
        if name.startswith("/"):
            return compress_path(name)
        return compress_path("/" + (self.iwd if use_iwd else self.cwd) + "/" + name)


def compress_path(path: str) -> str:
    """Collapse repeated '/' (HTCondor's ``compress_path``; '..' is left alone)."""
    while "//" in path:
        path = path.replace("//", "/")
    return path


def _literal_value(text: str):
    t = text
    if t in ("true", "false"):
        return t == "true"
    if t.startswith('"') and t.endswith('"') and len(t) >= 2 and '"' not in t[1:-1].replace('\\"', ""):
        return t[1:-1].replace('\\"', '"')
    n = exprtext.literal_number(t)
    if n is not None:
        return int(t) if n.is_integer() and "." not in t and "e" not in t.lower() else n
    return None


def stat_signature(path: str) -> tuple:
    """What a command's look at ``path`` depended on: its identity, size, times and mode (a
    directory is ``("dir",)``: its contents' sizes are not in its own stat), or the errno."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return ("error", exc.errno)
    if stat.S_ISDIR(st.st_mode):
        return ("dir", st.st_dev, st.st_ino, st.st_mode, st.st_ctime_ns)
    return ("file", st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def size_kb(path: str) -> int:
    """Size in KiB, rounded up, as submit measures executables and inputs (0 if missing)."""
    if "://" in path:
        return 0
    try:
        st = os.stat(path)
    except OSError:
        return 0
    if os.path.isdir(path):
        total = 0
        for root, _dirs, files in os.walk(path):
            for f in files:
                try:
                    total += os.stat(os.path.join(root, f)).st_size
                except OSError:
                    continue  # a file that vanished while we walk counts as empty
        return (total + 1023) // 1024
    return (st.st_size + 1023) // 1024

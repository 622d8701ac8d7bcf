"""An executor session on disk: one directory per call, a journal, and a lock.

``$HTC_HOME/executor/<session>/`` holds::

    session.json        name, backend, pool address, created, named or not
    session.lock        held (flock) by the one executor attached to the session
    journal.jsonl       one line per call made, and per job id learned
    calls/<call_id>/    the call's Iwd: htc_call.pkl, parents' results, htc_result.pkl,
                        htc_checkpoint.pkl, stdout, stderr

The call directory is the job's initial directory (``Iwd``): its input is transferred from
there and its output back there, so the execute node never talks to the client -- the files
move between the starter and the schedd's shadow. The journal lets ``attach`` rebuild the
futures of a session after the client died: which calls exist, what they wait for, with
which options, and which job runs each. A session's results stay until it is forgotten
(:meth:`Spool.remove`, ``htc.executors.forget``) or expires (``result_lifetime``, default a
week, checked when an executor starts).

Journal lines are appended with one ``write`` each, so a killed client leaves at worst a
truncated last line, which :meth:`Spool.journal` skips.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from htc.executors import callfile as cf
from htc.executors.errors import SessionError
from htc.executors.options import CallOptions

__all__ = ["Spool", "executor_root", "sessions", "valid_session_name"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
STDOUT = "stdout"
STDERR = "stderr"


def executor_root() -> Path:
    """``$HTC_HOME/executor``: where sessions live."""
    from htc.config import htc_home

    return Path(htc_home()) / "executor"


def valid_session_name(name: str) -> str:
    """Check a session name.

    Raises:
        SessionError: not 1-100 letters, digits, ``_``, ``.`` or ``-`` starting with a letter or digit.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise SessionError(f"session name {name!r} is not usable; use letters, digits, '_', '.' and '-' "
                           "(starting with a letter or digit, at most 100)")
    return name


def options_to_json(options: CallOptions) -> dict[str, Any]:
    """Options as JSON data for the journal."""
    data = asdict(options)
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in data.items()}


def options_from_json(data: dict[str, Any]) -> CallOptions:
    """Options back from the journal (unknown names from a newer htc are dropped)."""
    known = set(CallOptions.names())
    return CallOptions().merge(**{k: v for k, v in data.items() if k in known})


class Spool:
    """One session's directory. See the module docstring.

    Args:
        name: the session's name.
        root: where sessions live (default: :func:`executor_root`).
    """

    def __init__(self, name: str, root: Path | None = None):
        self.name = valid_session_name(name)
        self.path = (root or executor_root()) / name
        self.calls = self.path / "calls"
        self._lock_fd: int | None = None
        self._journal_fd: int | None = None
        self._record_lock = threading.Lock()

    # --- the session ------------------------------------------------------------------------
    def exists(self) -> bool:
        """True when the session has been created."""
        return (self.path / "session.json").exists()

    def create(self, info: dict[str, Any]) -> None:
        """Make the directories and write ``session.json`` (keeping ``created`` of an existing one)."""
        self.calls.mkdir(parents=True, exist_ok=True)
        old = self.info() if self.exists() else {}
        data = {**info, "name": self.name, "created": old.get("created", time.time()), "updated": time.time()}
        cf.write_atomic(self.path / "session.json", json.dumps(data, indent=1).encode())

    def info(self) -> dict[str, Any]:
        """``session.json`` as a dict.

        Raises:
            SessionError: no such session.
        """
        try:
            return json.loads((self.path / "session.json").read_text())
        except FileNotFoundError:
            raise SessionError(f"there is no executor session {self.name!r} under {self.path.parent}; "
                               "htc.executors.sessions() lists them") from None

    def lock(self) -> None:
        """Take the session for this process (released when it exits, however it exits).

        Raises:
            SessionError: another live executor holds it.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / "session.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise SessionError(f"executor session {self.name!r} is in use by pid {holder}; shut that executor "
                               "down (or wait for it to exit) before attaching") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd

    def unlock(self) -> None:
        """Release the session (and close the journal)."""
        with self._record_lock:
            if self._journal_fd is not None:
                os.close(self._journal_fd)
                self._journal_fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def remove(self) -> None:
        """Delete the session and every result in it."""
        self.unlock()
        shutil.rmtree(self.path, ignore_errors=True)

    # --- the journal -------------------------------------------------------------------------
    def record(self, entries: Iterable[dict[str, Any]]) -> None:
        """Append entries to the journal, all in one write (from any thread)."""
        data = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries).encode()
        if not data:
            return
        with self._record_lock:
            if self._journal_fd is None:
                self._journal_fd = os.open(self.path / "journal.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                                           0o644)
            os.write(self._journal_fd, data)

    def journal(self) -> Iterator[dict[str, Any]]:
        """Every complete journal entry, oldest first."""
        try:
            text = (self.path / "journal.jsonl").read_text()
        except FileNotFoundError:
            return
        for line in text.splitlines():
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line of a client killed mid-write

    # --- calls ---------------------------------------------------------------------------------
    def call_dir(self, call_id: str) -> Path:
        """The call's directory (its job's Iwd)."""
        return self.calls / call_id

    def prepare(self, call_id: str, data: bytes | None, parents: Iterable[str]) -> Path:
        """Make the call's directory with its call file (when ``data``) and its parents' results.

        Returns:
            The directory.

        Raises:
            CallFileError: a parent's result is missing.
        """
        where = self.call_dir(call_id)
        where.mkdir(parents=True, exist_ok=True)
        if data is not None:
            cf.write_atomic(where / cf.CALL_FILE, data)
        for parent in parents:
            source = self.call_dir(parent) / cf.RESULT_FILE
            target = where / cf.parent_file(parent)
            if target.exists():
                continue
            try:
                os.link(source, target)
            except FileNotFoundError:
                raise cf.CallFileError(f"the result of parent call {parent} is missing from {source}") from None
            except OSError:
                shutil.copyfile(source, target)
        return where

    def result_path(self, call_id: str) -> Path:
        """Where the call's result file arrives."""
        return self.call_dir(call_id) / cf.RESULT_FILE

    def output_path(self, call_id: str, stream: str) -> Path:
        """Where the call's ``stdout`` or ``stderr`` arrives."""
        return self.call_dir(call_id) / (STDOUT if stream == "stdout" else STDERR)

    def forget_call(self, call_id: str) -> None:
        """Delete one call's directory."""
        shutil.rmtree(self.call_dir(call_id), ignore_errors=True)

    def expire(self, lifetime: float, now: float | None = None) -> list[str]:
        """Delete call directories whose result is older than ``lifetime`` seconds.

        Returns:
            The call ids deleted.
        """
        now = time.time() if now is None else now
        gone = []
        if not self.calls.exists():
            return gone
        for d in self.calls.iterdir():
            result = d / cf.RESULT_FILE
            try:
                if now - result.stat().st_mtime > lifetime:
                    shutil.rmtree(d, ignore_errors=True)
                    gone.append(d.name)
            except FileNotFoundError:
                continue
        return gone


def sessions(root: Path | None = None) -> list[dict[str, Any]]:
    """Every executor session under ``$HTC_HOME/executor`` (their ``session.json``), oldest first."""
    root = root or executor_root()
    out = []
    if root.exists():
        for d in root.iterdir():
            try:
                out.append(json.loads((d / "session.json").read_text()))
            except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
                continue
    return sorted(out, key=lambda s: s.get("created", 0))

"""The files a function job is made of: the call going in, the result coming out, checkpoints.

A function job's sandbox holds (names fixed, so the submit side and the worker agree):

=========================  ===============================================================
``htc_call.pkl``           the call: a header, then ``(fn, args, kwargs)`` pickled; or
``<call id>.call``         the same, named after the call (a call whose files share the
                           session's ``calls/`` directory with the others'; see
                           :mod:`htc.executors.spool`)
``<parent id>.result``     the result file of each parent call whose future was an argument
``htc_checkpoint.pkl``     the latest ``htc.checkpoint(state)`` (brought back on a restart)
``htc_result.pkl``         the outcome: a header, then the value or exception pickled
=========================  ===============================================================

Each ``.pkl`` file is ``MAGIC`` (8 bytes), the header's length (4 bytes, big-endian), the
header as JSON, then the payload. The header is readable without unpickling anything, so the
worker can check versions before it touches the payload, and the client can learn how a call
ended (and where) without importing the packages the result needs.

Files are written whole and renamed into place: a reader never sees half a file, even when a
job is killed mid-write.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from htc.errors import PeerError

__all__ = [
    "CALL_FILE", "CHECKPOINT_FILE", "RESULT_FILE", "CallFileError", "CallHeader", "ResultHeader",
    "call_file_in", "is_call_file", "parent_file", "read_call", "read_result", "write_atomic", "write_call",
    "write_result",
]

CALL_FILE = "htc_call.pkl"
RESULT_FILE = "htc_result.pkl"
CHECKPOINT_FILE = "htc_checkpoint.pkl"
_CALL_MAGIC = b"HTCcall1"
_RESULT_MAGIC = b"HTCrslt1"
_LEN = struct.Struct(">I")
#: the header's JSON (msgspec: a few times quicker than json, the same JSON)
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


#: how a call file named after its call ends
CALL_SUFFIX = ".call"


def parent_file(call_id: str) -> str:
    """The sandbox name of parent call ``call_id``'s result (its name in a shared ``calls/``)."""
    return f"{call_id}.result"


def is_call_file(name: str) -> bool:
    """True for the name of a call file: ``htc_call.pkl`` or ``<call id>.call``."""
    return name == CALL_FILE or (name.endswith(CALL_SUFFIX) and len(name) > len(CALL_SUFFIX))


def call_file_in(names: Iterable[str], where: str = "the sandbox") -> str:
    """The one call file among ``names``.

    Raises:
        CallFileError: there is none, or more than one.
    """
    found = sorted(n for n in names if is_call_file(n))
    if not found:
        raise CallFileError(f"the call file is missing from {where} (no {CALL_FILE} or <call id>{CALL_SUFFIX}); "
                            "the job's input was not transferred")
    if len(found) > 1:
        raise CallFileError(f"{where} holds {len(found)} call files ({', '.join(found)}); a function job "
                            "runs exactly one")
    return found[0]


class CallFileError(PeerError):
    """A call, result or checkpoint file is missing, truncated or not one of htc's."""


@dataclass(frozen=True, kw_only=True)
class CallHeader:
    """What the worker needs to know before it unpickles a call."""

    call_id: str
    #: ``module.qualname`` of the function, for messages
    function: str
    python: str
    serializer: str = "cloudpickle"
    #: top-level package -> version on the submit side
    packages: dict[str, str] = field(default_factory=dict)
    #: call ids whose results replace the futures among the arguments
    parents: tuple[str, ...] = ()
    check_versions: bool = True
    #: seconds the call may run (None: no limit)
    timeout: float | None = None
    #: the payload's args is ``(chunk,)``, a list of argument tuples (``map`` with ``chunksize > 1``)
    chunked: bool = False


Outcome = Literal["value", "exception", "error"]


@dataclass(frozen=True, kw_only=True)
class ResultHeader:
    """How a call ended.

    ``outcome`` is ``value`` (the function returned), ``exception`` (it raised; the payload is
    the exception) or ``error`` (the call could not run: a version mismatch or a call file
    that would not unpickle; the payload is an htc exception saying so).
    """

    call_id: str
    outcome: Outcome
    serializer: str = "cloudpickle"
    #: ``module.qualname`` of the exception's type
    exception_type: str = ""
    #: the remote traceback, formatted
    traceback: str = ""
    host: str = ""
    pid: int = 0
    started_at: float = 0.0
    finished_at: float = 0.0
    #: the call resumed from a checkpoint taken by an earlier run
    resumed: bool = False
    packages: dict[str, str] = field(default_factory=dict)


# Headers are JSON read with the standard library: the worker starts once per job, and every
# import it avoids is time saved on every execute node.
_TYPES = {"str": str, "int": int, "float": float, "bool": bool}


class _Fields:
    """A header class's fields, looked up once: (name, required, expected type) each."""

    def __init__(self, cls: type):
        self.names = tuple(f.name for f in dataclasses.fields(cls))
        self.known = frozenset(self.names)
        self.checks = tuple(
            (f.name, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
             _TYPES.get(f.type.split(" |")[0]) if isinstance(f.type, str) else None, f.type)
            for f in dataclasses.fields(cls))


_ABSENT = object()
_fields = functools.cache(_Fields)


def _decode_header(cls, data: bytes) -> Any:
    raw = _decode(data)
    if not isinstance(raw, dict):
        raise ValueError("the header is not a JSON object")
    table = _fields(cls)
    # (names from a newer htc are ignored)
    values = raw if raw.keys() <= table.known else {k: v for k, v in raw.items() if k in table.known}
    for name, required, expected, declared in table.checks:
        value = values.get(name, _ABSENT)
        if value is _ABSENT:
            if required:
                raise ValueError(f"the header has no {name!r}")
            continue
        if expected is not None and value is not None and not isinstance(value, expected):
            if not (expected is float and isinstance(value, int)):
                raise ValueError(f"header field {name!r} is {value!r}, not a {declared}")
    parents = values.get("parents")
    if isinstance(parents, list):
        values["parents"] = tuple(parents)
    return cls(**values)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary name and a rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def overwrite(fd: int, data: bytes) -> None:
    """Write ``data`` over the open file ``fd`` from its start and cut the file to its length
    (a file reused for new contents: no inode to make)."""
    view, at = memoryview(data), 0
    while at < len(data):
        at += os.pwrite(fd, view[at:], at)
    # Cut to length after the write, not to zero before it: ext4 flushes a file emptied and
    # rewritten when it is closed (auto_da_alloc), which costs more than the whole write.
    os.ftruncate(fd, len(data))


def read_whole(path: Path | str) -> bytes:
    """A file's bytes, in fewer system calls than ``Path.read_bytes`` (a client reads one per call).

    Raises:
        OSError: as ``open`` would (FileNotFoundError for a missing file).
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return read_fd(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def read_fd(fd: int, size: int) -> bytes:
    """The rest of open file ``fd``, whose size was ``size``: one read when it has not grown."""
    parts, at = [], 0
    while True:
        want = max(size - at, 0) + 1  # a byte more than is left: a short read is the end
        chunk = os.read(fd, want)
        parts.append(chunk)
        at += len(chunk)
        if len(chunk) < want:
            return b"".join(parts)


def _pack(magic: bytes, header: Any, payload: bytes) -> bytes:
    # A shallow dict: the fields are plain values, dicts and tuples (asdict's deep copy costs
    # more than the rest of the packing).
    head = _encode({name: getattr(header, name) for name in _fields(type(header)).names})
    return b"".join((magic, _LEN.pack(len(head)), head, payload))


def _unpack(data: bytes, magic: bytes, cls: type, what: str, where: str):
    if len(data) < 12 or data[:8] != magic:
        raise CallFileError(f"{where} is not an htc {what} file (it is {len(data)} bytes and does not start "
                            f"with {magic!r}); it may have been truncated by a full disk or a killed writer")
    (size,) = _LEN.unpack_from(data, 8)
    if 12 + size > len(data):
        raise CallFileError(f"{where} is truncated: its header says {size} bytes but the file ends first")
    try:
        header = _decode_header(cls, data[12:12 + size])
    except (ValueError, TypeError, msgspec.DecodeError) as exc:
        raise CallFileError(f"{where} has an unreadable header: {exc}") from None
    return header, data[12 + size:]


def pack_call(header: CallHeader, payload: bytes) -> bytes:
    """A call file's bytes."""
    return _pack(_CALL_MAGIC, header, payload)


def unpack_call(data: bytes, where: str = "the call") -> tuple[CallHeader, bytes]:
    """Split a call file's bytes into header and payload.

    Raises:
        CallFileError: the bytes are not a complete call file.
    """
    return _unpack(data, _CALL_MAGIC, CallHeader, "call", where)


def pack_result(header: ResultHeader, payload: bytes) -> bytes:
    """A result file's bytes."""
    return _pack(_RESULT_MAGIC, header, payload)


def unpack_result(data: bytes, where: str = "the result") -> tuple[ResultHeader, bytes]:
    """Split a result file's bytes into header and payload.

    Raises:
        CallFileError: the bytes are not a complete result file.
    """
    return _unpack(data, _RESULT_MAGIC, ResultHeader, "result", where)


def write_call(path: Path, header: CallHeader, payload: bytes) -> None:
    """Write a call file atomically."""
    write_atomic(path, pack_call(header, payload))


def read_call(path: Path) -> tuple[CallHeader, bytes]:
    """Read a call file.

    Raises:
        CallFileError: missing or damaged.
    """
    try:
        data = read_whole(path)
    except FileNotFoundError:
        raise CallFileError(f"the call file {path} is missing; the job's input was not transferred") from None
    return unpack_call(data, str(path))


def write_result(path: Path, header: ResultHeader, payload: bytes) -> None:
    """Write a result file atomically."""
    write_atomic(path, pack_result(header, payload))


def read_result(path: Path) -> tuple[ResultHeader, bytes]:
    """Read a result file.

    Raises:
        CallFileError: missing or damaged.
    """
    try:
        data = read_whole(path)
    except FileNotFoundError:
        raise CallFileError(f"the result file {path} is missing") from None
    return unpack_result(data, str(path))

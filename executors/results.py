"""A call's result file, read back into the value it returned or the exception it raised.

The worker writes one result file per call (:mod:`htc.wire.callfile`): a header (outcome,
serializer, the host, the remote traceback) and the pickled value or exception.
:func:`decode_result` unpickles it here, in the caller's process; an exception gets the
remote traceback as its ``__cause__`` (as :class:`concurrent.futures.ProcessPoolExecutor`
does), filled in with the source lines the execute side could not read, and a note naming
the job and the call.
"""

from __future__ import annotations

import linecache
import re
from typing import Any

from htc.executors.errors import JobFailed, RemoteTraceback, SerializationError
from htc.executors.serialize import loads
from htc.wire import callfile as cf

__all__ = ["decode_result"]

_TB_FRAME = re.compile(r'^  File "(.+)", line (\d+), in .+$')


def _with_source(tb: str) -> str:
    """Fill in the source lines the execute side could not read (code from ``__main__``, a
    notebook cell, a file only this machine has) from this process's ``linecache``."""
    lines = tb.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        out.append(line)
        frame = _TB_FRAME.match(line)
        if frame and not (i + 1 < len(lines) and lines[i + 1].startswith("    ")):
            source = linecache.getline(frame.group(1), int(frame.group(2))).strip()
            if source:
                out.append(f"    {source}")
    return "\n".join(out) + ("\n" if tb.endswith("\n") else "")


def decode_result(data: bytes, label: str, job: str) -> tuple[bool, Any, str]:
    """What call ``label`` (job ``job``) returned or raised, from its result file ``data``.

    Returns:
        ``(ok, value, host)``: ``ok`` with the returned value, or not ok with the exception to
        raise (a :class:`SerializationError` when the file cannot be read here); ``host`` is
        where the call ran, as the file says ("" when unknown or unreadable).
    """
    host = ""
    try:
        header, payload = cf.unpack_result(data, f"the result of job {job}")
        host = header.host or ""
        obj = loads(payload, header.serializer)
    except Exception as exc:  # noqa: BLE001
        return False, SerializationError(
            f"the result of call {label} (job {job}) came back but cannot be unpickled here "
            f"({type(exc).__name__}: {exc}); install the packages its value needs on this side"), host
    if header.outcome == "value":
        return True, obj, host
    if not isinstance(obj, BaseException):
        obj = JobFailed(f"call {label} (job {job}) ended with {obj!r} instead of an exception", job)
    if header.traceback:
        obj.__cause__ = RemoteTraceback(_with_source(header.traceback))
    where = f" on {header.host}" if header.host else ""
    hint = "" if header.outcome == "exception" else "; the job's stderr is in future.stderr"
    obj.add_note(f"(raised in job {job}, call {label}{where}{hint})")
    return False, obj, host

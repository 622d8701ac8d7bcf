"""What the schedd's shadow and the starter agree on about a job's files.

The schedd (its shadows, its call lanes) and the starter read the same job-ad attributes the
same way: the comma-separated transfer lists, ``TransferOutputRemaps``, which of the job's
streams are streamed while it runs (``stream_output``/``stream_error``) and what the sandbox
calls the captured stdout and stderr. Each rule is here once, so the two sides cannot drift; the
starter's :mod:`~htc.daemons.starter.sandbox` does the file work itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from htc.errors import HTCError

#: where the starter captures the job's stdout and stderr in the sandbox (HTCondor's names)
STDOUT_NAME = "_condor_stdout"
STDERR_NAME = "_condor_stderr"
#: the name of a transferred executable in the sandbox (HTCondor's CONDOR_EXEC)
CONDOR_EXEC = "condor_exec.exe"


class TransferError(HTCError):
    """A file could not be moved into or out of a sandbox (HTCondor would hold the job)."""


def split_list(value: Any) -> list[str]:
    """A comma-separated file list attribute as a list (empty when absent)."""
    if not isinstance(value, str):
        return []
    return [item.strip() for item in value.split(",") if item.strip()]


def parse_remaps(value: Any) -> dict[str, str]:
    """``TransferOutputRemaps`` as ``{name: destination}``.

    Raises:
        TransferError: an entry without ``=``.
    """
    if not isinstance(value, str) or not value.strip():
        return {}
    # Nothing escaped (what an executor's calls set): plain splits read it the same way.
    return _split_escaped_remaps(value) if "\\" in value else _split_plain_remaps(value)


def _split_plain_remaps(value: str) -> dict[str, str]:
    remaps = {}
    for entry in value.split(";"):
        entry = entry.strip()
        if entry:
            name, eq, destination = entry.partition("=")
            if not eq:
                raise _no_equals(entry)
            remaps[name.strip()] = destination.strip()
    return remaps


def _split_escaped_remaps(value: str) -> dict[str, str]:
    entries, buf, i = [], "", 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            buf += "\\" + value[i + 1]  # keep escapes until the '=' split
            i += 2
            continue
        if ch == ";":
            entries.append(buf)
            buf = ""
        else:
            buf += ch
        i += 1
    entries.append(buf)
    remaps = {}
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        pos = next((k for k in range(len(entry)) if entry[k] == "=" and (k == 0 or entry[k - 1] != "\\")), -1)
        if pos < 0:
            raise _no_equals(entry)
        unescape = lambda s: s.strip().replace("\\;", ";").replace("\\=", "=")  # noqa: E731
        remaps[unescape(entry[:pos])] = unescape(entry[pos + 1:])
    return remaps


def _no_equals(entry: str) -> TransferError:
    return TransferError(f"TransferOutputRemaps entry {entry!r} has no '='; write it as 'name = destination'")


def _flag(job_ad: Mapping[str, Any], name: str) -> bool:
    value = job_ad.get(name)
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _target(job_ad: Mapping[str, Any], attr: str) -> str | None:
    value = job_ad.get(attr)
    return value if isinstance(value, str) and value and value != "/dev/null" else None


def streamed_files(job_ad: Mapping[str, Any]) -> dict[str, str]:
    """The job's streamed streams: ``{"stdout": "_condor_stdout", "stderr": "_condor_stderr"}``
    or part of it (the sandbox file of each); empty when nothing is streamed."""
    if str(job_ad.get("ShouldTransferFiles", "")).upper() == "NO":
        return {}

    def captured(attr: str) -> bool:
        return _target(job_ad, attr) is not None and job_ad.get("Transfer" + attr, True) is not False

    out: dict[str, str] = {}
    same = captured("Out") and job_ad.get("Err") == job_ad.get("Out")
    if captured("Out") and (_flag(job_ad, "StreamOut") or (same and _flag(job_ad, "StreamErr"))):
        out["stdout"] = STDOUT_NAME
    if not same and captured("Err") and _flag(job_ad, "StreamErr"):
        out["stderr"] = STDERR_NAME
    return out


def over_wire(job_ad: Mapping[str, Any], filesystem_domain: str | None) -> bool:
    """Whether the job's files travel over the connection rather than by the file system: it
    transfers files (``ShouldTransferFiles`` is not NO) and its ``FileSystemDomain`` (the
    submit host's FILESYSTEM_DOMAIN) differs from the execute machine's ``filesystem_domain``,
    as HTCondor decides. A job without a ``FileSystemDomain`` shares the execute side's."""
    if str(job_ad.get("ShouldTransferFiles", "")).upper() == "NO":
        return False
    domain = job_ad.get("FileSystemDomain")
    if not isinstance(domain, str) or not domain or not filesystem_domain:
        return False
    return domain.lower() != filesystem_domain.lower()


def local_path(source: str, base: Any) -> Any:
    """The local path an input ``source`` names (``file://`` URLs included), relative ones under
    ``base`` (a :class:`pathlib.Path`).

    Raises:
        TransferError: a URL of a scheme htc has no transfer plugin for.
    """
    from pathlib import Path

    if "://" in source:
        scheme, _, rest = source.partition("://")
        if scheme.lower() != "file":
            raise TransferError(f"cannot transfer {source!r}: no file transfer plugin for '{scheme}://' URLs in htc; "
                                "use a local path or file:// URL")
        return Path(rest)
    path = Path(source)
    return path if path.is_absolute() else Path(base) / path

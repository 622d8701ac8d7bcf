"""Per-call options: what a call asks of the pool, checked when it is given.

``HTCExecutor(request_memory="2GB")`` sets defaults for every call;
``executor.options(request_cpus=2).submit(fn)`` overrides them for some calls. Both go
through :meth:`CallOptions.merge`, which rejects unknown names and bad values at once (a typo
never becomes a silently ignored option) and normalises units: memory in MiB, disk in KiB,
as the job ad carries them.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from htc.executors.errors import OptionError
from htc.executors.serialize import SERIALIZERS

__all__ = ["TRANSPARENT", "CallOptions", "parse_size", "transparent"]

#: ``checkpoint="transparent"``: the call runs under htc's checkpointing runtime (docs/executor.md)
TRANSPARENT = "transparent"

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)(I?B)?\s*$", re.I)
_SCALE = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def parse_size(value: int | float | str, name: str, unit: str = "MB") -> int:
    """A size as condor_submit reads ``request_memory``: a bare number is in ``unit``.

    Args:
        value: ``2048``, ``"4GB"``, ``"512M"``, ``"1.5 GiB"``.
        name: the option, for messages.
        unit: ``"MB"`` (result in MiB) or ``"KB"`` (result in KiB).

    Returns:
        The size rounded up to a whole unit.

    Raises:
        OptionError: not a size.
    """
    if isinstance(value, bool):
        raise OptionError(f"{name}={value!r} is not a size; give a number of {unit} or text like '4GB'")
    if isinstance(value, (int, float)):
        if value <= 0:
            raise OptionError(f"{name}={value!r} must be positive")
        return math.ceil(value)
    m = _SIZE.match(str(value))
    if not m:
        raise OptionError(f"{name}={value!r} is not a size; write e.g. 4GB, 512MB or a number of {unit}")
    number, suffix = float(m.group(1)), m.group(2).upper()
    mib = number * _SCALE[suffix] if suffix else number * (1 if unit == "MB" else 1 / 1024)
    size = mib if unit == "MB" else mib * 1024
    if size <= 0:
        raise OptionError(f"{name}={value!r} must be positive")
    return math.ceil(size)


@dataclass(frozen=True)
class CallOptions:
    """Everything a call may ask for; defaults fit a small Python function."""

    request_cpus: int = 1
    #: MiB
    request_memory: int = 512
    #: KiB
    request_disk: int = 1024 * 1024
    request_gpus: int = 0
    #: ClassAd expression a slot must satisfy (added to htc's own requirements)
    requirements: str = ""
    rank: str = ""
    #: JobPrio: higher runs first among your own jobs
    priority: int = 0
    #: times to run the call again after it *raised* (infrastructure failures are always retried)
    max_retries: int = 0
    #: how often an infrastructure failure (transfer, starter, shadow) is retried before the call fails
    infrastructure_retries: int = 3
    #: survive evictions: True keeps ``htc.checkpoint`` state (transfers it back on eviction);
    #: ``"transparent"`` also runs the call under the checkpointing runtime (a standard-universe
    #: job), so an unmodified function resumes where it was (:data:`TRANSPARENT`)
    checkpoint: bool | str = False
    transfer_input_files: tuple[str, ...] = ()
    transfer_output_files: tuple[str, ...] = ()
    #: seconds the call may run, enforced on the execute side (None: no limit)
    timeout: float | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    serializer: str = "cloudpickle"
    check_versions: bool = True
    #: the interpreter that runs the call on the execute side (None: this one, ``sys.executable``)
    python: str | None = None
    #: write stdout/stderr where the client can read them while the call runs
    stream_output: bool = False
    #: extra submit commands, ``{"+ProjectName": '"sweep"'}``
    submit: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every option name."""
        return tuple(f.name for f in fields(cls))

    def merge(self, **changes: Any) -> CallOptions:
        """These options with ``changes`` applied, each checked and normalised.

        Raises:
            OptionError: an unknown option (the message lists the known ones) or a bad value.
        """
        unknown = sorted(set(changes) - set(self.names()))
        if unknown:
            raise OptionError(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                              f"the options are {', '.join(self.names())}")
        clean = {name: _CHECKS[name](name, value) for name, value in changes.items()}
        return replace(self, **clean)


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise OptionError(f"{name}={value!r} must be a whole number >= {minimum}")
    return value


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise OptionError(f"{name}={value!r} must be a whole number")
    return value


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise OptionError(f"{name}={value!r} must be True or False")
    return value


def _checkpoint(name: str, value: Any) -> bool | str:
    if isinstance(value, bool) or value == TRANSPARENT:
        return value
    raise OptionError(f"{name}={value!r} must be False, True (keep htc.checkpoint state across evictions) or "
                      f"{TRANSPARENT!r} (also checkpoint the whole interpreter, so an unmodified function survives "
                      "eviction)")


def transparent(options: CallOptions) -> bool:
    """True when the calls run under the checkpointing runtime (``checkpoint="transparent"``)."""
    return options.checkpoint == TRANSPARENT


def _expression(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise OptionError(f"{name}={value!r} must be a ClassAd expression as text, e.g. 'Memory >= 4096'")
    if value.strip():
        from htc.classad import ExprTree
        from htc.classad.errors import ClassAdParseError

        try:
            ExprTree(value)
        except ClassAdParseError as exc:
            raise OptionError(f"{name}={value!r} is not a ClassAd expression: {exc}") from None
    return value.strip()


def _files(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    if not isinstance(value, Sequence) or isinstance(value, bytes):
        raise OptionError(f"{name}={value!r} must be a list of paths")
    out = []
    for item in value:
        text = os.fspath(item)
        if "," in text:
            raise OptionError(f"{name}: {text!r} contains a comma, which the file list cannot carry; rename it")
        out.append(text)
    return tuple(out)


def _timeout(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise OptionError(f"{name}={value!r} must be a positive number of seconds (or None for no limit)")
    return float(value)


def _mapping(name: str, value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise OptionError(f"{name}={value!r} must be a dict of str to str")
    return dict(value)


def _serializer(name: str, value: Any) -> str:
    if value not in SERIALIZERS:
        raise OptionError(f"{name}={value!r} is not known; use one of {', '.join(SERIALIZERS)}")
    if value == "dill":
        try:
            import dill  # noqa: F401
        except ImportError:
            raise OptionError("serializer='dill' needs the dill package; pip install dill") from None
    return value


def _python(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not os.path.isabs(os.fspath(value)):
        raise OptionError(f"{name}={value!r} must be the absolute path of a Python interpreter on the execute side")
    return os.fspath(value)


_CHECKS = {
    "request_cpus": _positive_int,
    "request_memory": lambda n, v: parse_size(v, n, "MB"),
    "request_disk": lambda n, v: parse_size(v, n, "KB"),
    "request_gpus": lambda n, v: _positive_int(n, v, 0),
    "requirements": _expression,
    "rank": _expression,
    "priority": _int,
    "max_retries": lambda n, v: _positive_int(n, v, 0),
    "infrastructure_retries": lambda n, v: _positive_int(n, v, 0),
    "checkpoint": _checkpoint,
    "transfer_input_files": _files,
    "transfer_output_files": _files,
    "timeout": _timeout,
    "environment": _mapping,
    "serializer": _serializer,
    "check_versions": _bool,
    "python": _python,
    "stream_output": _bool,
    "submit": _mapping,
}

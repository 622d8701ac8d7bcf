"""Every daemon's settings come from the param table the same way.

A daemon's settings are a frozen dataclass. A field that a knob configures says so where it is
declared, with :func:`knob`; :func:`from_config` then builds the settings from a configuration
by reading each such knob through the param table (``config.param``: typed, defaulted and
documented in :mod:`htc.config.params`) and converting it to the field's type::

    @dataclass(frozen=True)
    class CollectorSettings:
        name: str = knob("COLLECTOR_NAME", "", convert=collector_name)
        classad_lifetime: float = knob("CLASSAD_LIFETIME", 900.0)
        pid: int = 0                                  # not a knob: the caller passes it

    settings = from_config(CollectorSettings, config, pid=os.getpid())

The dataclass default is what a core test gets without any configuration; a running daemon
always gets the param table's value. Fields without a knob take what the caller passes (the
daemon's address, its pid) or their default. The daemon's docs table of knobs is the list of
:func:`knobs_of` its settings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: converters for the field types a knob can fill (the param table already typed the value;
#: these make ``None`` of an unset knob and ``"5"`` of a string-typed one what the field holds)
_CONVERT: dict[str, Callable[[Any], Any]] = {
    "float": float,
    "int": int,
    "bool": bool,
    "str": lambda value: "" if value is None else str(value),
}


def knob(name: str, default: Any, *, convert: Callable[[Any], Any] | None = None) -> Any:
    """Declare a settings field configured by the knob ``name``.

    Args:
        name: the knob, as declared in the param table.
        default: the field's value when the settings are built without a configuration (tests).
        convert: turns the knob's typed value into the field's value, for fields that are not a
            plain ``float``/``int``/``bool``/``str`` (a list of daemon names, an optional
            expression). It gets the value ``config.param`` returned.
    """
    return dataclasses.field(default=default, metadata={"knob": name, "convert": convert})


def knobs_of(cls: type) -> dict[str, str]:
    """``{field name: knob}`` for every knob-configured field of settings class ``cls``."""
    return {f.name: f.metadata["knob"] for f in dataclasses.fields(cls) if "knob" in f.metadata}


def from_config(cls: type[T], config: Any, **given: Any) -> T:
    """Build settings ``cls`` from ``config``.

    Args:
        cls: a dataclass whose knob fields are declared with :func:`knob`.
        config: a loaded configuration (``config.param(name)`` gives a knob's typed value).
        given: values for fields that are not knobs (or that the caller decides instead).

    Raises:
        UsageError: from the dataclass's own checks, or a knob whose value the field cannot take
            (the message names the knob).
        TypeError: a knob field of a type this module has no converter for, without ``convert``
            (a bug in the settings class).
    """
    from htc.errors import UsageError

    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in given or "knob" not in f.metadata:
            continue
        name = f.metadata["knob"]
        convert = f.metadata["convert"] or _CONVERT.get(str(f.type))
        if convert is None:
            raise TypeError(f"{cls.__name__}.{f.name} ({f.type}) is set by {name} but has no converter; "
                            "pass convert= to knob()")
        try:
            values[f.name] = convert(config.param(name))
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{name}: {exc}; fix the knob in the configuration") from None
    return cls(**values, **given)

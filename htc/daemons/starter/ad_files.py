"""The text of a sandbox's ``.job.ad`` and ``.machine.ad``: old-syntax ClassAds, line by line.

Every job's starter writes both files (HTCondor's ``_CONDOR_JOB_AD`` and
``_CONDOR_MACHINE_AD``), and one startd's jobs write nearly the same lines again and again: a
cluster's procs, or a DAG's nodes, differ in a few attributes, and a slot's ad in fewer.
Building a ClassAd of the whole ad to print it costs a syntax tree per attribute each time, so
:func:`ad_file_text` prints each ``Name = value`` line once per process and looks it up after
that: the same line ``ClassAd.printOld`` writes for that attribute, since it prints every
attribute on a line of its own, in the ad's order, from the attribute's value alone.

Only values whose equality means the same printed text are looked up (strings, integers,
booleans, undefined and error; not floats: ``0.0 == -0.0``; not lists). An ad with names that
differ only in case, or no attributes at all, is printed whole, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from htc.classad import ClassAd, Value

__all__ = ["ad_file_text"]

#: printed lines by (name, value's class, value)
_LINES: dict[tuple[str, type, Any], str] = {}
_MAX_LINES = 20_000
#: the longest line remembered (a longer one is printed every time)
_MAX_KEPT = 1024
_KEYED = frozenset({str, int, bool, Value})


def ad_file_text(ad: Mapping[str, Any]) -> bytes:
    """``ClassAd(dict(ad)).printOld()``, encoded, with each line printed once per process.

    Raises:
        ClassAdValueError: as ``ClassAd(dict(ad))`` raises it (a value with no ClassAd equivalent).
    """
    lines: list[str] = []
    names: set[str] = set()
    for name, value in ad.items():
        if not isinstance(name, str) or name.lower() in names:
            return _whole(ad)
        names.add(name.lower())
        cls = value.__class__
        key = (name, cls, value) if cls in _KEYED else None
        line = _LINES.get(key) if key is not None else None
        if line is None:
            line = ClassAd({name: value}).printOld()
            if key is not None and len(line) <= _MAX_KEPT:
                if len(_LINES) >= _MAX_LINES:
                    _LINES.clear()
                _LINES[key] = line
        lines.append(line)
    if not lines:
        return _whole(ad)
    return "".join(lines).encode()


def _whole(ad: Mapping[str, Any]) -> bytes:
    return ClassAd(dict(ad)).printOld().encode()

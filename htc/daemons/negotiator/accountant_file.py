"""The accountant's saved form: what :class:`~htc.daemons.negotiator.accountant.Accountant`
persists, and how its file is read back.

Theory of operation
-------------------
The accountant is plain data. Its state is the submitters' records (:class:`Customer`, HTCondor's
``Customer.<name>`` record), its match records (:mod:`htc.daemons.negotiator.match_records`)
and the Up-Down index (:mod:`htc.daemons.negotiator.updown`). :meth:`Accountant.saved` takes
them as a :class:`SavedAccountant`: cheap to take (a copy of each customer's fields, the runs of
carves kept as runs), expanded into the snapshot's JSON-ready data (:meth:`SavedAccountant.data`)
or text (:meth:`SavedAccountant.text`) only when the service writes it. :func:`read_snapshot`
checks a snapshot read back (its version, its numbers, each record's fields) and rebuilds the
parts :meth:`Accountant.restore` assembles, or says what is wrong and what to do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter

from htc.daemons.negotiator.match_records import MatchRecords, SavedRecords, checked
from htc.daemons.negotiator.updown import UpDownIndex
from htc.errors import UsageError

#: Version of the snapshot format written by :meth:`SavedAccountant.data`.
SNAPSHOT_VERSION = 1


@dataclass
class Customer:
    """Mutable per-submitter state (HTCondor's ``Customer.<name>`` record)."""

    priority: float
    factor: float
    factor_is_set: bool = False
    resources_used: int = 0
    weighted_resources_used: float = 0.0
    weighted_uncharged_time: float = 0.0
    weighted_accumulated_usage: float = 0.0
    begin_usage_time: float | None = None
    last_usage_time: float | None = None


CUSTOMER_FIELDS = tuple(Customer.__dataclass_fields__)
#: a customer's fields, in the order of :data:`CUSTOMER_FIELDS`, as a tuple
customer_values = attrgetter(*CUSTOMER_FIELDS)


@dataclass(frozen=True)
class SavedAccountant:
    """The accountant at one moment (:meth:`Accountant.saved`), to persist: cheap to take,
    expanded into the snapshot's JSON-ready data by :meth:`data` when it is written."""

    last_update_time: float | None
    #: ``(name, fields)`` per submitter, sorted by name; the fields as :data:`CUSTOMER_FIELDS`
    customers: tuple[tuple[str, tuple], ...]
    records: SavedRecords
    #: :meth:`UpDownIndex.snapshot`'s data (made for this object alone)
    updown: dict

    def data(self) -> dict:
        """:meth:`Accountant.snapshot`'s data: ``version``, ``last_update_time``,
        ``customers`` (sorted by name), ``matches`` (in the order charged) and ``updown``.
        It is to write or restore from, not to edit in place (see :meth:`SavedRecords.data`)."""
        return self._with(self.records.data())

    def text(self) -> str:
        """``json.dumps(self.data(), sort_keys=True)``: the file's text, its matches written
        from one text per record (:meth:`SavedRecords.text`), not from a dict per name."""
        parts = {key: json.dumps(value, sort_keys=True)
                 for key, value in self._with({}).items()}
        parts["matches"] = self.records.text()
        return "{" + ", ".join([f"{json.dumps(key)}: {text}"
                                for key, text in sorted(parts.items())]) + "}"

    def _with(self, matches: dict) -> dict:
        return {
            "version": SNAPSHOT_VERSION,
            "last_update_time": self.last_update_time,
            "customers": {n: dict(zip(CUSTOMER_FIELDS, values)) for n, values in self.customers},
            "matches": matches,
            "updown": self.updown,
        }


@dataclass(frozen=True)
class ReadSnapshot:
    """A snapshot's parts, checked and rebuilt (:func:`read_snapshot`)."""

    last_update_time: float | None
    customers: dict[str, Customer]
    records: MatchRecords
    #: ``None`` in snapshots written before UPDOWN
    updown: UpDownIndex | None


def read_snapshot(data: Mapping) -> ReadSnapshot:
    """Check :meth:`SavedAccountant.data` as read back (from JSON) and rebuild its parts.

    Raises:
        UsageError: the data is not a snapshot of this version, or is damaged; move the file
            aside to start with fresh priorities.
    """
    where = "accountant snapshot"
    if not isinstance(data, Mapping) or data.get("version") != SNAPSHOT_VERSION:
        version = data.get("version") if isinstance(data, Mapping) else type(data).__name__
        raise UsageError(
            f"{where} has version {version!r}, expected {SNAPSHOT_VERSION}; "
            "move the file aside to start with fresh user priorities"
        )
    last_update_time = _number_or_none(data.get("last_update_time"), where)
    try:
        customers = {str(name): Customer(**checked(fields, CUSTOMER_FIELDS))
                     for name, fields in dict(data["customers"]).items()}
        records = MatchRecords()
        records.restore(data["matches"])
        updown = None
        if data.get("updown") is not None:  # absent in snapshots written before UPDOWN
            updown = UpDownIndex.restore(data["updown"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(
            f"{where} is damaged ({exc}); move the file aside to start with fresh "
            "user priorities"
        ) from None
    return ReadSnapshot(last_update_time, customers, records, updown)


def _number_or_none(value: object, where: str) -> float | None:
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    raise UsageError(f"{where}: last_update_time must be a number or null, got {value!r}")

"""The accountant's match records: which submitter each claimed resource is charged to.

Theory of operation
-------------------
HTCondor's accountant keeps a ``Resource.<name>`` record per claimed resource: its submitter,
slot weight and start time (:class:`MatchRecord`). :class:`MatchRecords` holds them by resource
name, in the order they were charged (the order :meth:`~.accountant.Accountant.check_matches`
releases them in, which its float sums follow). The accountant does the charging arithmetic;
this module only stores the records and writes and reads them in the snapshot.

A cycle charges a *pseudo-resource* ``f"{slot}#carve{k}"`` per carve of a partitionable slot
(the real dynamic slot replaces it in the next cycle's ``check_matches``): case 1 of
``benchmarks/negotiator_bench.py`` makes 81,642 of them in 14,391 runs. A run of carves
is stored as one entry, ``(slot, first, count, record)``, in a *tail* after every named record
(:meth:`MatchRecords.add_run`); a resource charged after it (a static slot) joins the tail as
``(name, record)``, so the order charged stays the order kept. The carve names are made only
where something reads the records one by one (:attr:`MatchRecords.charged` expands the tail
into them, once: a carve looked up by name, a resource of the tail removed) or writes them
(:meth:`SavedRecords.text`, as the service writes the accountant's file: the core hands over
:meth:`MatchRecords.saved`, runs as runs); the next cycle's reconciliation releases the runs
without naming them (:meth:`MatchRecords.detach_tail`). A run is stored so only when none of its names
can be a record already: no named record is a carve and no run of the slot overlaps it;
otherwise the accountant charges its resources one by one, as before.

Records charged alike share one object (:meth:`MatchRecords.record`), and the snapshot one
dict per object: a cycle's matches hold a few hundred records.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from json.encoder import encode_basestring_ascii as _encode  # (json.dumps's, for a str key)

__all__ = ["MatchRecord", "MatchRecords", "SavedRecords"]


@dataclass(frozen=True, slots=True)
class MatchRecord:
    """Per-resource state (HTCondor's ``Resource.<name>`` record); never changed, so that
    resources charged alike share one (:meth:`MatchRecords.record`)."""

    customer: str
    weight: float
    start_time: float


MATCH_FIELDS = tuple(MatchRecord.__dataclass_fields__)
_CARVE = "#carve"


#: ``str(k)`` for the carve numbers seen so far (a cycle names the same few again and again)
_NUMBERS: list[str] = [str(k) for k in range(256)]


def _numbers(first: int, end: int) -> list[str]:
    if end > len(_NUMBERS):
        _NUMBERS.extend(map(str, range(len(_NUMBERS), end)))
    return _NUMBERS[first:end]


def carve_names(slot: str, first: int, count: int) -> list[str]:
    """The pseudo-resource names of ``count`` carves of ``slot`` from the ``first``:
    ``f"{slot}#carve{first + i}"``."""
    if first < 0:
        return [f"{slot}#carve{first + i}" for i in range(count)]
    return list(map(f"{slot}#carve".__add__, _numbers(first, first + count)))


class MatchRecords:
    """The match records of one accountant (see the module docstring)."""

    def __init__(self) -> None:
        #: resource name -> its record, in the order charged; the tail comes after them all
        self._charged: dict[str, MatchRecord] = {}
        #: what was charged after a run, in order: runs of carves ``(slot, first, count,
        #: record)`` and resources without a carve name ``(name, record)``
        self._tail: list[tuple] = []
        #: the resources of the tail, by name
        self._singles: dict[str, MatchRecord] = {}
        #: slot -> the ``(first, end)`` carve numbers of its runs
        self._spans: dict[str, list[tuple[int, int]]] = {}
        #: how many names of ``_charged`` are carves (``...#carve...``)
        self._carves = 0
        #: the record made last, for the next one charged alike (:meth:`record`)
        self._last: MatchRecord | None = None

    def record(self, customer: str, weight: float, now: float) -> MatchRecord:
        """A record of ``customer``, ``weight`` and ``now``: the last one made when it holds
        the same. Same means the same type and value, not 0 (-0.0 == 0.0 and 1 == 1.0 are not
        written alike) and not NaN, so that the snapshot's text does not change."""
        last = self._last
        if (last is not None and last.customer == customer
                and weight and last.weight == weight and last.weight.__class__ is weight.__class__
                and now and last.start_time == now and last.start_time.__class__ is now.__class__):
            return last
        last = self._last = MatchRecord(customer, weight, now)
        return last

    # ---------------------------------------------------------------- by name

    @property
    def charged(self) -> dict[str, MatchRecord]:
        """Every record by resource name, in the order charged (the tail expanded, once).
        The caller changes it only through :meth:`put`, :meth:`put_new` and :meth:`pop`."""
        tail = self._tail
        if tail:
            charged = self._charged
            for entry in tail:
                if len(entry) == 2:
                    charged[entry[0]] = entry[1]
                    continue
                slot, first, count, record = entry
                # (a run is disjoint from everything before it: add_run checked)
                charged.update(dict.fromkeys(carve_names(slot, first, count), record))
                self._carves += count
            tail.clear()
            self._singles.clear()
            self._spans.clear()
        return self._charged

    def get(self, resource: str) -> MatchRecord | None:
        if _CARVE in resource:
            return self.charged.get(resource)  # (it may be a run's)
        record = self._charged.get(resource)
        return self._singles.get(resource) if record is None else record

    def put(self, resource: str, record: MatchRecord) -> None:
        """Record ``resource``, which has no record, after every other."""
        if self._tail and _CARVE not in resource:
            self._singles[resource] = record  # (after the runs, without naming them)
            self._tail.append((resource, record))
            return
        charged = self.charged
        if _CARVE in resource and resource not in charged:
            self._carves += 1
        charged[resource] = record

    def put_new(self, fresh: dict[str, MatchRecord]) -> bool:
        """Record each of ``fresh`` in turn when none has a record (True); else nothing."""
        charged = self.charged
        if not charged.keys().isdisjoint(fresh):
            return False
        charged.update(fresh)
        self._carves += sum(map(str.__contains__, fresh, repeat(_CARVE)))
        return True

    def pop(self, resource: str) -> MatchRecord | None:
        if _CARVE not in resource and resource not in self._singles:
            return self._charged.pop(resource, None)  # (the tail's order stays as it is)
        record = self.charged.pop(resource, None)
        if record is not None and _CARVE in resource:
            self._carves -= 1
        return record

    # ---------------------------------------------------------------- runs

    def add_run(self, slot: str, first: int, count: int, record: MatchRecord) -> bool:
        """Record the carves ``first .. first + count - 1`` of ``slot`` as one run, when none
        of their names can have a record already (no named record is a carve, no run of
        ``slot`` overlaps them); else record nothing and return False."""
        if self._carves or not self._take_span(slot, first, first + count):
            return False
        self._tail.append((slot, first, count, record))
        return True

    def _take_span(self, slot: str, first: int, end: int) -> bool:
        """Note the carve numbers ``first .. end - 1`` of ``slot`` as a run's, when no run of
        ``slot`` overlaps them (True); else note nothing."""
        spans = self._spans.get(slot)
        if spans is None:
            self._spans[slot] = [(first, end)]
            return True
        for a, b in spans:
            if a < end and first < b:
                return False
        spans.append((first, end))
        return True

    def add_runs(self, customer: str, runs: Sequence[tuple], now: float) -> int:
        """:meth:`add_run` of each ``(slot, first, count, weight)`` of ``runs`` in turn, its
        record ``self.record(customer, weight, now)``, a run of no carve (``count`` <= 0)
        passed over, until one cannot be recorded so; returns how many of ``runs`` were
        (all of them, or the index of that one, of which nothing is recorded)."""
        if self._carves:
            return 0
        take_span, append, record = self._take_span, self._tail.append, self.record
        shared = None  # (the last record made: self._last, of this customer and now)
        # (record's test of the time, whose start time is now or the same number)
        same_time = bool(now and now == now)
        for done, (slot, first, count, weight) in enumerate(runs):
            if count <= 0:
                continue
            # (record's test, the customer and the time being the last record's already)
            if not (shared is not None and same_time and weight and weight == shared.weight
                    and weight.__class__ is shared.weight.__class__):
                shared = record(customer, weight, now)
            if not take_span(slot, first, first + count):
                return done
            append((slot, first, count, shared))
        return len(runs)

    def detach_tail(self, claimed: Mapping) -> list[tuple]:
        """For a reconciliation with the ``claimed`` resources: the tail, taken out of the
        records in order (runs as ``(slot, first, count, record)``, the others as ``(name,
        record)``), when none of its runs' resources is claimed; else nothing, the tail
        expanded into :attr:`charged`."""
        tail = self._tail
        if not tail:
            return []
        if any(map(str.__contains__, claimed, repeat(_CARVE))):
            self.charged  # (a carve may be claimed: each is read by its name)
            return []
        out = list(tail)
        tail.clear()
        self._singles.clear()
        self._spans.clear()
        return out

    # ---------------------------------------------------------------- persistence

    def saved(self) -> SavedRecords:
        """The records as they are now, to write later (:meth:`SavedRecords.data`): a copy of
        the named ones and the tail as it is (its entries are tuples of immutable parts), so
        that taking it names no carve."""
        return SavedRecords(dict(self._charged), tuple(self._tail))

    def snapshot(self) -> dict:
        """The records as JSON-ready data (:meth:`SavedRecords.data`)."""
        return SavedRecords(self._charged, tuple(self._tail)).data()

    def restore(self, data: Mapping) -> None:
        """Add the records of :meth:`snapshot`'s ``data``.

        Raises:
            ValueError: a record lacks a field or has one too many.
        """
        for name, fields in dict(data).items():
            self.put(str(name), MatchRecord(**checked(fields, MATCH_FIELDS)))


@dataclass(frozen=True, slots=True)
class SavedRecords:
    """The match records at one moment (:meth:`MatchRecords.saved`): the named ones, by name
    in the order charged, then the tail, runs of carves as runs. Taking it costs a copy of a
    dict and of a list; naming the carves waits for :meth:`text` (or :meth:`data`), which the
    negotiator's service calls as it writes the accountant's file."""

    charged: Mapping[str, MatchRecord]
    tail: tuple[tuple, ...]

    def data(self) -> dict:
        """The records as JSON-ready data, ``{name: {customer, weight, start_time}}``, in the
        order charged (the tail's as :attr:`MatchRecords.charged` would name them). Entries of
        a shared record share its dict: the data is to write or restore from, not to edit in
        place."""
        return dict(self._named(_fields))

    def text(self) -> str:
        """``json.dumps(self.data(), sort_keys=True)``, made with one text per record (a cycle's
        matches hold a few hundred) rather than one dict per name to encode."""
        texts = dict(self._named(_record_text))  # name -> its record's text
        if not texts:
            return "{}"
        # (the names sorted, as json.dumps sorts them: alone, as strings, not as (name, text) pairs)
        return "{" + ", ".join([f"{_encode(name)}: {texts[name]}" for name in sorted(texts)]) + "}"

    def _named(self, make) -> zip:
        """``(name, make(record))`` per record in the order charged; ``make`` is called once
        per record object, its result shared by the names of that record."""
        charged, tail = self.charged, self.tail
        records = list(charged.values())
        keys = list(map(id, records))
        unique = dict(zip(keys, records))
        unique.update((id(entry[-1]), entry[-1]) for entry in tail)
        made = {key: make(m) for key, m in unique.items()}
        names, values = list(charged), list(map(made.__getitem__, keys))
        add_names, add_values = names.extend, values.extend
        for entry in tail:  # (as charged expands them)
            if len(entry) == 2:
                names.append(entry[0])
                values.append(made[id(entry[1])])
                continue
            slot, first, count, record = entry
            add_names(carve_names(slot, first, count))
            add_values(repeat(made[id(record)], count))
        return zip(names, values)


def _fields(m: MatchRecord) -> dict:
    return {"customer": m.customer, "weight": m.weight, "start_time": m.start_time}


def _record_text(m: MatchRecord) -> str:
    return json.dumps(_fields(m), sort_keys=True)


def checked(fields: object, names: tuple[str, ...]) -> dict:
    """``fields`` as a dict, when it is a mapping of exactly ``names``; else ValueError."""
    if not isinstance(fields, Mapping) or set(fields) != set(names):
        raise ValueError(f"record {fields!r} must have exactly the fields {', '.join(names)}")
    return dict(fields)

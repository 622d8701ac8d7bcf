"""The negotiator's accountant: who used how much of the pool, and who goes first.

Theory of operation
-------------------
HTCondor shares a pool by *usage*, not by jobs. For every submitter (``alice@example.net``,
``group_physics.einstein@example.net``, ``nice-user.bob@example.net``; how those names are
formed is :mod:`htc.daemons.negotiator.submitters`) the accountant keeps

* the **real user priority** (RUP): an exponential moving average of the slot weight (cores, by
  default) the submitter holds. Each update, with ``dt`` seconds since the previous one and
  ``h = PRIORITY_HALFLIFE``::

      aging = 0.5 ** (dt / h)
      RUP   = max(0.5, RUP * aging + recent_usage * (1 - aging))

  ``recent_usage`` is the weight held now plus a correction ("uncharged time") for claims that
  began or ended between two updates, so every second of every claim is charged exactly once.
  Holding N cores steadily drives RUP to N; holding nothing halves it every half-life, down to
  the floor of 0.5 where every submitter starts.
* the **priority factor**, fixed on first sight (nice users 1e10, ``GROUP_PRIO_FACTOR_<g>``,
  remote users 1e7 when ``ACCOUNTANT_LOCAL_DOMAIN`` is set, else ``DEFAULT_PRIO_FACTOR`` =
  1000) and changed only by an administrator;
* the **effective user priority** EUP = RUP x factor. Lower is better.

The accountant also keeps one *match record* per claimed resource (slot name -> submitter,
weight, start time; :mod:`htc.daemons.negotiator.match_records`). The negotiator adds a record
for every match it makes and, at the start of each cycle, reconciles the records with what the
slot ads say is claimed (:meth:`Accountant.check_matches`), exactly like HTCondor's
``CheckMatches``.

Fair share is computed from the EUPs by :mod:`htc.daemons.negotiator.fair_share` (each submitter's share
of the pool is proportional to 1/EUP, minus what it already holds), which also holds the one
function that orders the submitters of a cycle.

The accountant is plain data: :meth:`Accountant.snapshot` returns a JSON-ready ``dict`` and
:meth:`Accountant.restore` rebuilds it; the negotiator's service persists the snapshot. The core
hands the service :meth:`Accountant.saved` (:class:`SavedAccountant`), the same state with its
runs of carves kept as runs, and the service expands it as it writes: after a cycle of 81,642
carves that costs a copy of 14,391 runs in the cycle rather than 81,642 names. The saved form
and the reading of a snapshot back are :mod:`htc.daemons.negotiator.accountant_file`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import mul

from htc.daemons.negotiator.accountant_file import (Customer, SavedAccountant, customer_values,
                                                    read_snapshot)
from htc.daemons.negotiator.match_records import MatchRecord, MatchRecords, carve_names
from htc.daemons.negotiator.slotreads import added
from htc.daemons.negotiator.submitters import accounting_group_of
from htc.daemons.negotiator.updown import UpDownIndex
from htc.daemons.settings import knob
from htc.errors import UsageError

@dataclass(frozen=True)
class AccountantSettings:
    """The knobs the accountant reads, with HTCondor's defaults.

    ``group_names`` is ``GROUP_NAMES`` (hierarchical names such as ``group_a.sub``);
    ``group_prio_factors`` maps a group name to its ``GROUP_PRIO_FACTOR_<group>`` (read by
    ``NegotiatorSettings.from_config`` for each group of ``GROUP_NAMES``). Built from the param table by
    ``htc.daemons.settings.from_config(AccountantSettings, config)``.
    """

    priority_halflife: float = knob("PRIORITY_HALFLIFE", 86400.0)
    default_prio_factor: float = knob("DEFAULT_PRIO_FACTOR", 1000.0)
    nice_user_prio_factor: float = knob("NICE_USER_PRIO_FACTOR", 1e10)
    remote_prio_factor: float = knob("REMOTE_PRIO_FACTOR", 1e7)
    local_domain: str | None = knob("ACCOUNTANT_LOCAL_DOMAIN", None, convert=lambda domain: domain or None)
    group_names: tuple[str, ...] = knob("GROUP_NAMES", (), convert=lambda names: tuple(names or ()))
    group_prio_factors: Mapping[str, float] = field(default_factory=dict)
    nice_user_group: str = knob("NICE_USER_ACCOUNTING_GROUP_NAME", "nice-user",
                                convert=lambda name: name or "nice-user")
    min_priority: float = 0.5

    def __post_init__(self) -> None:
        if not self.priority_halflife > 0:
            raise UsageError(
                f"PRIORITY_HALFLIFE must be a positive number of seconds, got "
                f"{self.priority_halflife!r}; HTCondor's default is 86400 (one day)"
            )
        for name, value in (
            ("DEFAULT_PRIO_FACTOR", self.default_prio_factor),
            ("NICE_USER_PRIO_FACTOR", self.nice_user_prio_factor),
            ("REMOTE_PRIO_FACTOR", self.remote_prio_factor),
            *((f"GROUP_PRIO_FACTOR_{g}", f) for g, f in self.group_prio_factors.items()),
        ):
            if not value > 0:
                raise UsageError(f"{name} must be a positive number, got {value!r}")


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class SubmitterPriority:
    """One line of ``htc userprio``: a submitter's priorities and usage."""

    name: str
    real_priority: float
    priority_factor: float
    effective_priority: float
    weighted_resources_used: float
    resources_used: int
    weighted_accumulated_usage: float
    begin_usage_time: float | None
    last_usage_time: float | None


class Accountant:
    """Per-submitter usage, priorities and match records of one pool.

    Args:
        settings: the accountant knobs (defaults are HTCondor's).
        now: the time the accountant starts counting from; the first
            :meth:`update_priorities` call starts it if omitted.
    """

    def __init__(self, settings: AccountantSettings | None = None, now: float | None = None):
        self.settings = settings or AccountantSettings()
        self.last_update_time: float | None = now
        self._customers: dict[str, Customer] = {}
        #: one record per claimed resource (and per carve of this cycle), in the order charged
        self._records = MatchRecords()
        #: the Up-Down schedule indices (``NEGOTIATOR_POLICY = UPDOWN``), persisted alongside
        self.updown = UpDownIndex()

    # ------------------------------------------------------------------ customers

    def _customer(self, name: str) -> Customer:
        rec = self._customers.get(name)
        if rec is None:
            rec = Customer(priority=self.settings.min_priority, factor=self.initial_factor(name))
            self._customers[name] = rec
        return rec

    def initial_factor(self, name: str) -> float:
        """Return the priority factor a submitter gets when first seen.

        Args:
            name: the submitter name.

        Returns:
            ``NICE_USER_PRIO_FACTOR`` for ``nice-user.*``; the group's
            ``GROUP_PRIO_FACTOR_<g>`` if set; ``REMOTE_PRIO_FACTOR`` for a domain other than
            ``ACCOUNTANT_LOCAL_DOMAIN`` (when set); else ``DEFAULT_PRIO_FACTOR``.
        """
        s = self.settings
        if name.lower().startswith(s.nice_user_group.lower() + "."):
            return s.nice_user_prio_factor
        group = accounting_group_of(name, s.group_names or tuple(s.group_prio_factors))
        if group is not None:
            for g, factor in s.group_prio_factors.items():
                if g.lower() == group.lower():
                    return factor
        if s.local_domain is not None:
            domain = name.rsplit("@", 1)[1] if "@" in name else ""
            if domain.lower() != s.local_domain.lower():
                return s.remote_prio_factor
        return s.default_prio_factor

    def real_priority(self, name: str) -> float:
        """Return the submitter's RUP (0.5 for a submitter never seen)."""
        rec = self._customers.get(name)
        return rec.priority if rec else self.settings.min_priority

    def priority_factor(self, name: str) -> float:
        """Return the submitter's priority factor (its initial factor if never seen)."""
        rec = self._customers.get(name)
        return rec.factor if rec else self.initial_factor(name)

    def effective_priority(self, name: str) -> float:
        """Return the submitter's EUP = RUP x factor; lower is better."""
        return self.real_priority(name) * self.priority_factor(name)

    def weighted_resources_used(self, name: str) -> float:
        """Return the slot weight the submitter holds now (claims plus this cycle's matches)."""
        rec = self._customers.get(name)
        return rec.weighted_resources_used if rec else 0.0

    def submitters(self) -> list[str]:
        """Return the names of all submitters the accountant knows, sorted."""
        return sorted(self._customers)

    def records(self) -> list[SubmitterPriority]:
        """Return every submitter's priorities, best (lowest EUP) first, for ``htc userprio``."""
        out = [
            SubmitterPriority(
                name=name,
                real_priority=rec.priority,
                priority_factor=rec.factor,
                effective_priority=rec.priority * rec.factor,
                weighted_resources_used=rec.weighted_resources_used,
                resources_used=rec.resources_used,
                weighted_accumulated_usage=rec.weighted_accumulated_usage,
                begin_usage_time=rec.begin_usage_time,
                last_usage_time=rec.last_usage_time,
            )
            for name, rec in self._customers.items()
        ]
        out.sort(key=lambda r: (r.effective_priority, r.name))
        return out

    def accounting_ads(self, shares: Mapping[str, float] | None = None) -> list[dict]:
        """Return one HTCondor-style Accounting ad per submitter, for the collector.

        ``htc userprio`` reads these (``Priority`` is the *effective* priority there, as in
        HTCondor's ``condor_status -accounting``).

        Args:
            shares: each submitter's pie share in the last cycle (``SubmitterShare``).

        Returns:
            Plain dicts of ClassAd attributes, best (lowest EUP) first.
        """
        shares = shares or {}
        groups = self.settings.group_names
        return [{
            "MyType": "Accounting", "Name": r.name, "Priority": r.effective_priority,
            "PriorityFactor": r.priority_factor, "RealPriority": r.real_priority,
            "ResourcesUsed": r.resources_used, "WeightedResourcesUsed": r.weighted_resources_used,
            "WeightedAccumulatedUsage": r.weighted_accumulated_usage,
            "BeginUsageTime": r.begin_usage_time, "LastUsageTime": r.last_usage_time,
            "AccountingGroup": accounting_group_of(r.name, groups) or "<none>",
            "IsAccountingGroup": False, "SubmitterShare": shares.get(r.name, 0.0),
            "LastUpdate": self.last_update_time,
        } for r in self.records()]

    # ------------------------------------------------------------------ administration

    def set_priority_factor(self, name: str, factor: float) -> None:
        """Set a submitter's priority factor (``condor_userprio -setfactor``).

        Raises:
            UsageError: ``factor`` is below 1 (HTCondor refuses those too).
        """
        if not (isinstance(factor, (int, float)) and factor >= 1):
            raise UsageError(
                f"priority factor for {name} must be a number >= 1, got {factor!r}; "
                "larger factors mean a worse effective priority"
            )
        rec = self._customer(name)
        rec.factor = float(factor)
        rec.factor_is_set = True

    def set_real_priority(self, name: str, priority: float) -> None:
        """Set a submitter's RUP (``condor_userprio -setprio``).

        Raises:
            UsageError: ``priority`` is below the 0.5 minimum.
        """
        if not (isinstance(priority, (int, float)) and priority >= self.settings.min_priority):
            raise UsageError(
                f"real priority for {name} must be a number >= {self.settings.min_priority}, "
                f"got {priority!r}"
            )
        self._customer(name).priority = float(priority)

    def set_accumulated_usage(self, name: str, seconds: float) -> None:
        """Set a submitter's accumulated (weighted) usage in slot-seconds
        (``condor_userprio -setaccum``).

        Raises:
            UsageError: ``seconds`` is negative.
        """
        if not (isinstance(seconds, (int, float)) and seconds >= 0):
            raise UsageError(f"accumulated usage for {name} must be zero or more seconds, "
                             f"got {seconds!r}")
        self._customer(name).weighted_accumulated_usage = float(seconds)

    def reset_usage(self, name: str) -> None:
        """Forget a submitter's past usage (``condor_userprio -resetusage``)."""
        rec = self._customer(name)
        rec.priority = self.settings.min_priority
        rec.weighted_accumulated_usage = 0.0
        rec.begin_usage_time = None

    # ------------------------------------------------------------------ priorities

    def update_priorities(self, now: float) -> None:
        """Age every submitter's RUP to ``now`` and charge the usage since the last update.

        HTCondor calls this at the start of every negotiation cycle. A clock that went
        backwards restarts the interval without charging anything.

        Args:
            now: the current time (seconds).
        """
        if self.last_update_time is None:
            self.last_update_time = now
            return
        time_passed = now - self.last_update_time
        if time_passed <= 0:
            if time_passed < 0:
                self.last_update_time = now
            return
        aging = 0.5 ** (time_passed / self.settings.priority_halflife)
        floor = self.settings.min_priority
        for rec in self._customers.values():
            recent = rec.weighted_resources_used + rec.weighted_uncharged_time / time_passed
            rec.priority = max(floor, rec.priority * aging + recent * (1.0 - aging))
            rec.weighted_accumulated_usage += (
                rec.weighted_resources_used * time_passed + rec.weighted_uncharged_time
            )
            if rec.weighted_accumulated_usage > 0 and rec.begin_usage_time is None:
                rec.begin_usage_time = now
            if recent > 0:
                rec.last_usage_time = now
            rec.weighted_uncharged_time = 0.0
        self.last_update_time = now

    # ------------------------------------------------------------------ matches

    def add_match(self, customer: str, resource: str, weight: float, now: float) -> None:
        """Charge ``customer`` for ``resource`` from ``now`` on.

        A resource held by another submitter is first released from it (that is how a
        preemption moves usage from victim to winner).

        Args:
            customer: the submitter name.
            resource: a unique resource name (the slot's ``Name``).
            weight: the slot weight (``SlotWeight``, by default its ``Cpus``).
            now: the current time.
        """
        records = self._records
        current = records.get(resource)
        if current is not None:
            if current.customer == customer:
                return
            self.remove_match(resource, now)
        if self.last_update_time is None:
            self.last_update_time = now
        rec = self._customer(customer)
        rec.resources_used += 1
        rec.weighted_resources_used += weight
        # The next update charges the whole interval; take back the part before the match.
        rec.weighted_uncharged_time -= (now - self.last_update_time) * weight
        records.put(resource, records.record(customer, weight, now))

    def add_matches(self, customer: str, resources: Sequence[str], weight: float,
                    now: float) -> None:
        """:meth:`add_match` for each of ``resources`` in turn: the same charges, added in the
        same order, with the submitter's record looked up once. The new match records are one
        shared record (they hold the same customer, weight and start, and a record is never
        changed, only replaced)."""
        if not resources:
            return
        records = self._records
        fresh = dict.fromkeys(resources, records.record(customer, weight, now))
        if len(fresh) < len(resources) or not records.put_new(fresh):
            for resource in resources:  # a re-charge or a move among them: one by one
                self.add_match(customer, resource, weight, now)
            return
        self._charge(customer, len(fresh), weight, now)

    def add_carves(self, customer: str, slot: str, first: int, count: int, weight: float,
                   now: float) -> None:
        """:meth:`add_matches` of the ``count`` pseudo-resources ``f"{slot}#carve{first + i}"``
        (a run of carves from one partitionable slot, ``first`` an int; the real dynamic
        slots replace them in the next cycle's :meth:`check_matches`): the same charges in
        the same order, the records kept as one entry (:mod:`.match_records`)."""
        if count <= 0:
            return
        records = self._records
        if not records.add_run(slot, first, count, records.record(customer, weight, now)):
            self.add_matches(customer, carve_names(slot, first, count), weight, now)
            return
        self._charge(customer, count, weight, now)

    def add_carve_runs(self, customer: str, runs: Sequence[tuple], now: float) -> None:
        """:meth:`add_carves` of each ``(slot, first, count, weight)`` of ``runs`` in turn (one
        request's runs): the same records and the same charges, each float addition made in
        the same order, the submitter's record looked up once."""
        done = self._records.add_runs(customer, runs, now)
        charged = [run for run in (runs if done == len(runs) else runs[:done]) if run[2] > 0]
        if charged:  # (as _charge of each, the record looked up at the first)
            if self.last_update_time is None:
                self.last_update_time = now
            rec = self._customer(customer)
            since = now - self.last_update_time
            counts = [run[2] for run in charged]
            weights = [run[3] for run in charged]
            used = rec.resources_used
            if used.__class__ is int:
                used += sum(counts)
            else:  # (a restored float: one addition per run)
                for count in counts:
                    used += count
            rec.resources_used = used
            rec.weighted_resources_used = _added_all(rec.weighted_resources_used, weights, counts)
            # (x - charge is x + -charge, exactly)
            rec.weighted_uncharged_time = _added_all(
                rec.weighted_uncharged_time, [-(since * weight) for weight in weights], counts)
        for slot, first, count, weight in runs[done:]:  # (one could not be kept as a run)
            self.add_carves(customer, slot, first, count, weight, now)

    def _charge(self, customer: str, count: int, weight: float, now: float) -> None:
        """Charge ``customer`` for ``count`` new resources of ``weight`` from ``now`` on, as
        ``count`` calls of :meth:`add_match` would (one float addition per resource)."""
        if self.last_update_time is None:
            self.last_update_time = now
        rec = self._customer(customer)
        rec.resources_used += count
        charge = (now - self.last_update_time) * weight
        if count == 1:
            rec.weighted_resources_used += weight
            rec.weighted_uncharged_time -= charge
            return
        rec.weighted_resources_used = added(rec.weighted_resources_used, weight, count)
        # (x - charge is x + -charge, exactly)
        rec.weighted_uncharged_time = added(rec.weighted_uncharged_time, -charge, count)

    @property
    def _matches(self) -> dict[str, MatchRecord]:
        """Every match record by resource name, in the order charged (read only)."""
        return self._records.charged

    def remove_match(self, resource: str, now: float) -> None:
        """Stop charging for ``resource`` (claim ended); unknown resources are ignored."""
        match = self._records.pop(resource)
        if match is not None:
            self._release(match, 1, now)

    def _release(self, match: MatchRecord, count: int, now: float) -> None:
        """Stop charging for ``count`` resources of the record ``match``, one after another."""
        rec = self._customer(match.customer)
        weight = match.weight
        # The next update charges only what is held then, so add the part of this interval held
        # until now. For a match made in this interval add_match took back the part before it
        # started; adding the whole interval so far leaves exactly start..now. (Adding
        # now - max(start, last update) instead would charge a claim that starts and ends
        # between two updates its length minus the gap before it started.)
        since = self.last_update_time if self.last_update_time is not None else match.start_time
        if count > 1 and weight > 0 and rec.resources_used.__class__ is int:
            # each step lowers the weight held, so none was clamped at 0 when the last is
            # above it: then the steps are one addition after another (added)
            left = added(rec.weighted_resources_used, -weight, count)
            if left > 0:
                rec.resources_used = max(0, rec.resources_used - count)
                rec.weighted_resources_used = left
                rec.weighted_uncharged_time = added(rec.weighted_uncharged_time,
                                                    (now - since) * weight, count)
                return
        for _ in range(count):
            rec.resources_used = max(0, rec.resources_used - 1)
            rec.weighted_resources_used = max(0.0, rec.weighted_resources_used - weight)
            rec.weighted_uncharged_time += (now - since) * weight

    def match_of(self, resource: str) -> tuple[str, float] | None:
        """Return ``(customer, weight)`` of the match on ``resource``, or ``None``."""
        m = self._records.get(resource)
        return (m.customer, m.weight) if m else None

    def check_matches(self, claimed: Mapping[str, tuple[str, float]], now: float) -> None:
        """Reconcile match records with the pool (HTCondor's ``CheckMatches``).

        Args:
            claimed: every claimed resource the slot ads report, as
                ``{resource_name: (submitter, slot_weight)}``.
            now: the current time.
        """
        records = self._records
        tail = records.detach_tail(claimed)  # (the last records: reconciled after the others)
        charged = records.charged
        get = claimed.get
        # (whether one goes does not depend on another going: the removals in the order kept)
        for resource in [resource for resource, m in charged.items()
                         if (want := get(resource)) is None or want[0] != m.customer]:
            self.remove_match(resource, now)
        for entry in tail:
            if len(entry) == 4:  # a run of carves, none of them claimed
                self._release(entry[3], entry[2], now)
                continue
            resource, record = entry
            want = claimed.get(resource)
            if want is None or want[0] != record.customer:
                self._release(record, 1, now)
            else:
                records.put(resource, record)  # (kept, after the others as before)
        if claimed.keys() <= charged.keys():
            return  # (nothing new claimed: a pool between two cycles' matches)
        fresh = [(resource, want) for resource, want in claimed.items() if resource not in charged]
        for customer, resources, weight in _alike(fresh):
            self.add_matches(customer, resources, weight, now)

    # ------------------------------------------------------------------ persistence

    def saved(self) -> SavedAccountant:
        """Return the accountant as it is now, to persist later (:meth:`SavedAccountant.data`
        gives :meth:`snapshot`'s data): a copy of the customers' fields, the Up-Down index's
        data and the match records, runs of carves as runs (:meth:`MatchRecords.saved`). The
        core hands this to its service after every cycle, which names the carves as it writes."""
        return SavedAccountant(
            self.last_update_time,
            tuple((n, customer_values(r)) for n, r in sorted(self._customers.items())),
            self._records.saved(), self.updown.snapshot())

    def snapshot(self) -> dict:
        """Return the whole accountant as plain JSON-ready data (for the service to persist;
        its ``matches`` come in the order charged, and the service writes them sorted)."""
        return self.saved().data()

    @classmethod
    def restore(cls, data: Mapping, settings: AccountantSettings | None = None) -> Accountant:
        """Rebuild an accountant from :meth:`snapshot` output.

        Args:
            data: the snapshot (as read back from JSON).
            settings: the knobs to use from now on (factors already stored are kept).

        Returns:
            A new :class:`Accountant`.

        Raises:
            UsageError: the data is not a snapshot of this version; move the file aside to
                start with fresh priorities.
        """
        read = read_snapshot(data)
        acct = cls(settings, now=read.last_update_time)
        acct._customers = read.customers
        acct._records = read.records
        if read.updown is not None:
            acct.updown = read.updown
        return acct


def _alike(claims: list[tuple[str, tuple[str, float]]]) -> list[tuple[str, list[str], float]]:
    """``claims`` (``(resource, (customer, weight))`` in order) as runs of resources charged
    alike, ``(customer, resources, weight)`` in order: :meth:`Accountant.add_matches` of each
    run in turn charges as :meth:`Accountant.add_match` of each claim would. Alike means the
    same customer and a weight of the same type and value, not 0 and not NaN (as
    :meth:`MatchRecords.record`: -0.0 and 0.0, 1 and 1.0 add and write differently)."""
    out: list[tuple[str, list[str], float]] = []
    last_customer, last_weight, names = None, None, []
    for resource, (customer, weight) in claims:
        if (weight and customer == last_customer and weight == last_weight
                and weight.__class__ is last_weight.__class__):
            names.append(resource)
            continue
        names = [resource]
        out.append((customer, names, weight))
        last_customer, last_weight = customer, weight
    return out



_EXACT_SUM = 2.0 ** 52  # (below it every partial sum of integral floats is exact, with room)


def _added_all(value, steps: list, counts: list):
    """``value`` with ``steps[i]`` added ``counts[i]`` times, one addition after another
    (:func:`~.slotreads.added` of each in turn). Where the value and every step are integral
    floats and their magnitudes sum to less than 2**52, every partial sum is an integer a
    float holds exactly, so the sum made at once is the same float; a zero is summed one by
    one all the same (its sign depends on the order of the additions)."""
    if value.__class__ is float and value.is_integer():
        try:
            integral = all(map(float.is_integer, steps))
        except TypeError:  # (a step that is not a float)
            integral = False
        if integral and abs(value) + sum(map(mul, map(abs, steps), counts)) < _EXACT_SUM:
            total = value + sum(map(mul, steps, counts))
            if total:
                return total
    for step, count in zip(steps, counts):
        value = added(value, step, count)
    return value

"""The Up-Down policy of the 1988 Condor paper ("UD-1988"), as an alternative to fair share.

Theory of operation
-------------------
``NEGOTIATOR_POLICY = UPDOWN`` replaces HTCondor's accountant-driven pie with the coordinator of
Litzkow, Livny and Mutka (ICDCS 1988), in the most faithful reading we could establish
(docs/fair-share.md; the reference is ``fair-share.md`` §1.5). Every *entity* -- a submitter,
or with ``UPDOWN_ENTITY = SCHEDD`` a submitting station -- has a **schedule index** SI,
0 at first sight; lower is better. At every negotiation cycle, with ``dt`` the minutes since the
previous one (``UPDOWN_UNIT`` seconds make one index unit)::

    holds n > 0 machines      SI += n * f(SI, dt)           f = dt        ("up")
    else has waiting jobs     SI -= g(SI, dt)               g = dt        ("down")
    else SI > 0               SI -= h(SI, dt)               h: clamp to UPDOWN_CAP, else dt,
                                                               never below 0
    else SI < 0               SI += l(SI, dt)               l = dt, never above 0

so a heavy user's index grows by one per running job per minute, a light user who waits goes
negative at once, and an entity that stops asking is clamped to ``UPDOWN_CAP`` (600 job-minutes)
and forgets linearly. f, g, h and l are the fields of :class:`UpDownFunctions`, pluggable.

The negotiator then (:mod:`htc.daemons.negotiator.cycle`):

* orders submitters by SI ascending (:func:`order_by_index`), with no pie: each takes what it
  can, up to ``UPDOWN_PLACEMENTS_PER_CYCLE`` matches per entity (0: no throttle; the paper placed
  one job per poll);
* gives a request an idle slot when one matches; only when none does, it may preempt a running
  job of another entity whose SI is **strictly greater** (:func:`updown_may_preempt`), choosing
  the victim with the largest SI, then the most recently started job (least badput). The rules
  of :func:`~htc.daemons.negotiator.preemption.decide_preemption` still apply (machine RANK,
  retirement, ``NEGOTIATOR_CONSIDER_PREEMPTION``); ``PREEMPTION_REQUIREMENTS`` and
  ``PREEMPTION_RANK`` are HTCondor's policy and are not read under UPDOWN.

``UPDOWN_RULE = UPDATE_PRIO`` swaps the update for the Condor 4.x central manager's machine-level
rule of the Technical Summary (``UPDATE_PRIO : Prio + Users - Running``, higher better), kept
here with the sign turned so that lower stays better: every cycle
``SI += running jobs - users with jobs queued`` (no time factor, no decay).

The index is plain data persisted with the accountant (:meth:`UpDownIndex.snapshot`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from htc.daemons.settings import knob
from htc.errors import UsageError

__all__ = ["UpDownSettings", "UpDownFunctions", "UpDownIndex", "UD_1988", "POLICIES",
           "order_by_index", "updown_may_preempt", "entity_of"]

#: the values ``NEGOTIATOR_POLICY`` takes
POLICIES = ("HTCONDOR", "UPDOWN")
_RULES = ("UD1988", "UPDATE_PRIO")
_ENTITIES = ("SUBMITTER", "SCHEDD")


def _choice(name: str, choices: tuple[str, ...]) -> Callable[[object], str]:
    def convert(value: object) -> str:
        text = str(value or choices[0]).strip().upper()
        if text not in choices:
            raise UsageError(f"{name} = {value!r} is not one of {', '.join(choices)}")
        return text
    return convert


@dataclass(frozen=True)
class UpDownSettings:
    """The knobs of the Up-Down policy (read only when ``NEGOTIATOR_POLICY = UPDOWN``)."""

    cap: float = knob("UPDOWN_CAP", 600.0)  # index units (job-minutes) an idle entity keeps
    unit: float = knob("UPDOWN_UNIT", 60.0)  # seconds per index unit (one minute)
    entity: str = knob("UPDOWN_ENTITY", "SUBMITTER", convert=_choice("UPDOWN_ENTITY", _ENTITIES))
    rule: str = knob("UPDOWN_RULE", "UD1988", convert=_choice("UPDOWN_RULE", _RULES))
    placements_per_cycle: int = knob("UPDOWN_PLACEMENTS_PER_CYCLE", 0)

    def __post_init__(self) -> None:
        if not self.cap >= 0:
            raise UsageError(f"UPDOWN_CAP must be zero or more index units, got {self.cap!r}")
        if not self.unit > 0:
            raise UsageError(f"UPDOWN_UNIT must be a positive number of seconds, got {self.unit!r}")
        if not (isinstance(self.placements_per_cycle, int) and self.placements_per_cycle >= 0):
            raise UsageError("UPDOWN_PLACEMENTS_PER_CYCLE must be 0 (no throttle) or a positive "
                             f"number of matches, got {self.placements_per_cycle!r}")
        for name, value, choices in (("UPDOWN_ENTITY", self.entity, _ENTITIES),
                                     ("UPDOWN_RULE", self.rule, _RULES)):
            if value not in choices:
                raise UsageError(f"{name} = {value!r} is not one of {', '.join(choices)}")


def _up(index: float, dt: float, cap: float) -> float:
    return dt


def _down(index: float, dt: float, cap: float) -> float:
    return dt


def _forget_positive(index: float, dt: float, cap: float) -> float:
    return index - cap if index > cap else min(dt, index)


def _forget_negative(index: float, dt: float, cap: float) -> float:
    return min(dt, -index)


@dataclass(frozen=True)
class UpDownFunctions:
    """The four update functions of Up-Down, each ``(index, dt, cap) -> amount >= 0``.

    ``f`` is added per machine held, ``g`` subtracted while waiting, ``h`` subtracted from a
    positive index of an entity that wants nothing, ``l`` added to a negative one.
    """

    f: Callable[[float, float, float], float] = _up
    g: Callable[[float, float, float], float] = _down
    h: Callable[[float, float, float], float] = _forget_positive
    l: Callable[[float, float, float], float] = _forget_negative  # noqa: E741 - the paper's name


#: Condor's own functions (up_down.C, 1994): the index counts job-minutes
UD_1988 = UpDownFunctions()


def entity_of(submitter: str, schedd: str, settings: UpDownSettings) -> str:
    """Return the entity a submitter's jobs are indexed under (the submitter, or its schedd)."""
    return schedd if settings.entity == "SCHEDD" else submitter


class UpDownIndex:
    """Every entity's schedule index and when it was last updated (plain, persisted data).

    Args:
        functions: the update functions (the paper's by default).
    """

    def __init__(self, functions: UpDownFunctions = UD_1988):
        self.functions = functions
        self.last_update_time: float | None = None
        self._index: dict[str, float] = {}

    def index(self, entity: str) -> float:
        """Return the entity's schedule index (0 for an entity never seen); lower is better."""
        return self._index.get(entity, 0.0)

    def indices(self) -> dict[str, float]:
        """Return every known entity's index."""
        return dict(self._index)

    def set_index(self, entity: str, value: float) -> None:
        """Set an entity's index (administration and tests)."""
        self._index[entity] = float(value)

    def update(self, now: float, running: Mapping[str, float], queued: Mapping[str, int],
               settings: UpDownSettings) -> None:
        """Apply one poll: raise holders, lower waiters, let the others forget.

        Args:
            now: the current time (seconds); the first call only starts the clock (UD1988).
            running: machines (running jobs) each entity holds now.
            queued: for each entity, how many of its users have jobs waiting (0 or absent: none
                waiting).
            settings: the Up-Down knobs.
        """
        if settings.rule == "UPDATE_PRIO":
            for entity in set(running) | set(queued):
                users = queued.get(entity, 0)
                held = running.get(entity, 0)
                if users or held:
                    self._index[entity] = self.index(entity) + held - users
            self.last_update_time = now
            return
        if self.last_update_time is None or now < self.last_update_time:
            self.last_update_time = now
            return
        dt = (now - self.last_update_time) / settings.unit
        self.last_update_time = now
        if dt <= 0:
            return
        fn, cap = self.functions, settings.cap
        for entity in set(self._index) | set(running) | set(queued):
            si = self.index(entity)
            held = running.get(entity, 0)
            if held > 0:
                si += held * fn.f(si, dt, cap)
            elif queued.get(entity, 0) > 0:
                si -= fn.g(si, dt, cap)
            elif si > 0:
                si = max(0.0, si - fn.h(si, dt, cap))
            elif si < 0:
                si = min(0.0, si + fn.l(si, dt, cap))
            if si == 0.0 and entity not in running and entity not in queued:
                self._index.pop(entity, None)  # forgotten entirely: back to the initial 0
            else:
                self._index[entity] = si

    def snapshot(self) -> dict:
        """Return the index as JSON-ready data."""
        return {"last_update_time": self.last_update_time, "index": dict(sorted(self._index.items()))}

    @classmethod
    def restore(cls, data: Mapping, functions: UpDownFunctions = UD_1988) -> UpDownIndex:
        """Rebuild an index from :meth:`snapshot` output.

        Raises:
            UsageError: the data is damaged.
        """
        out = cls(functions)
        try:
            last = data.get("last_update_time")
            out.last_update_time = None if last is None else float(last)
            out._index = {str(k): float(v) for k, v in dict(data["index"]).items()}
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"Up-Down index in the accountant snapshot is damaged ({exc}); move "
                             "the file aside to start with fresh priorities") from None
        return out


def poll_counts(submitters: Iterable, settings: UpDownSettings
                ) -> tuple[dict[str, float], dict[str, int]]:
    """Return ``(running, queued)`` per entity from the cycle's submitter ads.

    ``running`` sums ``RunningJobs``; ``queued`` counts the submitters with idle jobs
    (UD1988 reads it as "has waiting jobs"; UPDATE_PRIO as its "Users").
    """
    running: dict[str, float] = {}
    queued: dict[str, int] = {}
    for sub in submitters:
        entity = entity_of(sub.name, sub.schedd, settings)
        if sub.running_jobs > 0:
            running[entity] = running.get(entity, 0) + sub.running_jobs
        if sub.idle_jobs > 0:
            queued[entity] = queued.get(entity, 0) + 1
    return running, queued


def order_by_index(entries: Iterable[tuple[str, str]], index: UpDownIndex,
                   settings: UpDownSettings) -> list[tuple[str, str]]:
    """Order ``(submitter, schedd)`` pairs by schedule index ascending (then name, schedd)."""
    return sorted(entries, key=lambda e: (index.index(entity_of(e[0], e[1], settings)), e[0], e[1]))


def updown_may_preempt(requester_index: float, victim_index: float) -> bool:
    """The Up-Down preemption rule: only a strictly worse (greater) index loses its machine."""
    return victim_index > requester_index

"""Job policy: ``periodic_*`` and ``on_exit_*`` expressions, decided without side effects.

Theory of operation
-------------------
This module mirrors HTCondor's ``UserPolicy::AnalyzePolicy``. It reads a job ad and returns a
:class:`Decision` (hold, release, remove, requeue, complete) or nothing; the queue records the
exit attributes and the schedd acts on the decision (``JobQueue.apply``), writing the event.

Periodic check (every ``PERIODIC_EXPR_INTERVAL``, for every job still in the queue), first
rule that fires wins:

1. not Held: ``PeriodicHold``, then the ``SYSTEM_PERIODIC_HOLD`` knob -> hold;
2. Held: ``PeriodicRelease``, then ``SYSTEM_PERIODIC_RELEASE`` -> release;
3. ``PeriodicRemove``, then ``SYSTEM_PERIODIC_REMOVE`` -> remove.

On exit, the periodic rules first, then ``OnExitHold`` -> hold, then ``OnExitRemove`` ->
complete if true (or absent), requeue if false. ``max_retries`` is part of OnExitRemove as
``condor_submit`` writes it (``NumJobCompletions > JobMaxRetries || ExitCode =?= 0``); an ad
with ``JobMaxRetries`` and no OnExitRemove gets that expression as its default.

A job attribute that evaluates to a number fires when non-zero. One that evaluates to
anything else (undefined, error, a string) puts the job on hold with HoldReasonCode 5
(JobPolicyUndefined) -- except a literal ``undefined``, which counts as false. A system knob
that is not a non-zero number simply does not fire. Hold reasons and sub-codes come from
``<Attr>Reason`` / ``<Attr>SubCode`` (``PeriodicHoldReason``, ``OnExitHoldSubCode``...) or
``SYSTEM_PERIODIC_HOLD_REASON`` / ``_SUBCODE``; otherwise the reason is HTCondor's sentence
``The job attribute PeriodicHold expression '...' evaluated to TRUE``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from htc.classad import Error, Undefined
from htc.jobqueue.ads import JobAd
from htc.jobqueue.expr import GroupedEvaluator, parse
from htc.jobqueue.states import HoldReasonCode, JobStatus

DEFAULT_MAX_RETRIES_REMOVE = "NumJobCompletions > JobMaxRetries || ExitCode =?= 0"


class Action(enum.Enum):
    """What the schedd should do with a job."""

    HOLD = "hold"          # -> Held, HoldReason/Code/SubCode from the decision
    RELEASE = "release"    # Held -> Idle
    REMOVE = "remove"      # -> Removed
    REQUEUE = "requeue"    # exited, policy says run again: -> Idle
    COMPLETE = "complete"  # exited and done: -> Completed


@dataclass(frozen=True)
class Decision:
    """A policy outcome for one job; ``JobQueue.apply`` carries it out."""

    job_id: tuple[int, int]
    action: Action
    reason: str
    code: int = 0
    subcode: int = 0
    #: the attribute or knob that fired (``PeriodicHold``, ``SYSTEM_PERIODIC_REMOVE``...)
    fired_by: str | None = None


@dataclass(frozen=True)
class ExitInfo:
    """How a job's process ended: an exit code, or a signal."""

    exit_code: int | None = None
    exit_signal: int | None = None
    core_dumped: bool = False

    @property
    def by_signal(self) -> bool:
        return self.exit_signal is not None


@dataclass(frozen=True)
class SystemPolicy:
    """The schedd's ``SYSTEM_PERIODIC_*`` knobs (expression texts; None when unset)."""

    periodic_hold: str | None = None
    periodic_hold_reason: str | None = None
    periodic_hold_subcode: str | None = None
    periodic_release: str | None = None
    periodic_remove: str | None = None

    def __post_init__(self) -> None:
        for text in (self.periodic_hold, self.periodic_hold_reason, self.periodic_hold_subcode,
                     self.periodic_release, self.periodic_remove):
            if text is not None:
                parse(text)


class PolicyEvaluator:
    """Decides policy for many jobs, sharing evaluations between procs of a cluster."""

    def __init__(self, system: SystemPolicy, now: float | None):
        self.system = system
        self.now = now
        self._evaluators: dict[str, GroupedEvaluator] = {}

    def _value(self, job: JobAd, text: str) -> object:
        ev = self._evaluators.get(text)
        if ev is None:
            ev = self._evaluators[text] = GroupedEvaluator(text, self.now)
        return ev.value(job)

    def _job_attr(self, job: JobAd, attr: str, default: str | None = None) -> int | None:
        """1 fired, 0 not fired, -1 undefined (fires a JobPolicyUndefined hold), None absent."""
        text = job.get(attr, default)
        if text is None:
            return None
        value = self._value(job, text)
        if isinstance(value, (bool, int, float)) and value is not Undefined:
            return 1 if value else 0
        if text.strip().lower() == "undefined":
            return 0
        return -1

    def _system(self, job: JobAd, text: str | None) -> bool:
        if text is None:
            return False
        value = self._value(job, text)
        return isinstance(value, (bool, int, float)) and bool(value)

    def _fire(self, job: JobAd, action: Action, attr: str, result: int, default_text: str | None = None) -> Decision:
        text = job.get(attr, default_text) or ""
        if result < 0:
            return Decision(job.job_id, Action.HOLD,
                            f"The job attribute {attr} expression '{text}' evaluated to UNDEFINED",
                            HoldReasonCode.JobPolicyUndefined, 0, attr)
        reason, subcode = None, 0
        if action is Action.HOLD:
            reason = self._string(job, job.get(f"{attr}Reason"))
            subcode = self._int(job, job.get(f"{attr}SubCode"))
        if not reason:
            word = "FALSE" if action is Action.REQUEUE else "TRUE"
            reason = f"The job attribute {attr} expression '{text}' evaluated to {word}"
        code = HoldReasonCode.JobPolicy if action is Action.HOLD else 0
        return Decision(job.job_id, action, reason, code, subcode, attr)

    def _fire_system(self, job: JobAd, action: Action, knob: str, text: str) -> Decision:
        reason, subcode = None, 0
        if action is Action.HOLD:
            reason = self._string(job, self.system.periodic_hold_reason)
            subcode = self._int(job, self.system.periodic_hold_subcode)
        if not reason:
            reason = f"The system macro {knob} expression '{text}' evaluated to TRUE"
        code = HoldReasonCode.SystemPolicy if action is Action.HOLD else 0
        return Decision(job.job_id, action, reason, code, subcode, knob)

    def _string(self, job: JobAd, text: str | None) -> str | None:
        if text is None:
            return None
        value = self._value(job, text)
        return value if isinstance(value, str) else None

    def _int(self, job: JobAd, text: str | None) -> int:
        if text is None:
            return 0
        value = self._value(job, text)
        if isinstance(value, bool) or value is Undefined or value is Error:
            return 0
        return int(value) if isinstance(value, (int, float)) else 0

    def periodic(self, job: JobAd) -> Decision | None:
        """The periodic decision for one job, or None when nothing fires."""
        held = job.status == JobStatus.HELD
        if not held:
            fired = self._job_attr(job, "PeriodicHold")
            if fired:
                return self._fire(job, Action.HOLD, "PeriodicHold", fired)
            if self._system(job, self.system.periodic_hold):
                return self._fire_system(job, Action.HOLD, "SYSTEM_PERIODIC_HOLD", self.system.periodic_hold)
        else:
            fired = self._job_attr(job, "PeriodicRelease")
            if fired:
                return self._fire(job, Action.RELEASE, "PeriodicRelease", fired)
            if self._system(job, self.system.periodic_release):
                return self._fire_system(job, Action.RELEASE, "SYSTEM_PERIODIC_RELEASE",
                                         self.system.periodic_release)
        fired = self._job_attr(job, "PeriodicRemove")
        if fired:
            return self._fire(job, Action.REMOVE, "PeriodicRemove", fired)
        if self._system(job, self.system.periodic_remove):
            return self._fire_system(job, Action.REMOVE, "SYSTEM_PERIODIC_REMOVE", self.system.periodic_remove)
        return None

    def on_exit(self, job: JobAd) -> Decision:
        """The decision for a job whose exit attributes (ExitCode...) are already in its ad."""
        decision = self.periodic(job)
        if decision is not None:
            return decision
        fired = self._job_attr(job, "OnExitHold")
        if fired:
            return self._fire(job, Action.HOLD, "OnExitHold", fired)
        default = DEFAULT_MAX_RETRIES_REMOVE if "JobMaxRetries" in job else None
        fired = self._job_attr(job, "OnExitRemove", default)
        if fired is None or fired == 1:
            reason = "Job terminated" if fired is None else (
                f"The job attribute OnExitRemove expression '{job.get('OnExitRemove', default)}' "
                "evaluated to TRUE")
            return Decision(job.job_id, Action.COMPLETE, reason, 0, 0, "OnExitRemove")
        if fired < 0:
            return self._fire(job, Action.HOLD, "OnExitRemove", fired, default)
        return self._fire(job, Action.REQUEUE, "OnExitRemove", 0, default)


def exit_attributes(info: ExitInfo, completions: int) -> dict[str, str]:
    """The attributes an exit records in the job ad (expression texts)."""
    attrs = {
        "ExitBySignal": "true" if info.by_signal else "false",
        "NumJobCompletions": str(completions),
        "JobCoreDumped": "true" if info.core_dumped else "false",
    }
    if info.by_signal:
        attrs["ExitSignal"] = str(info.exit_signal)
        attrs["ExitCode"] = "undefined"
    else:
        attrs["ExitCode"] = str(info.exit_code if info.exit_code is not None else 0)
        attrs["ExitSignal"] = "undefined"
    return attrs

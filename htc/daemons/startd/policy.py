"""The startd's policy: the expressions that decide when a slot starts, suspends, vacates.

The core asks one question of a policy object: *what does expression NAME say about this slot
(and this job)?* -- :meth:`Policy.evaluate` for booleans, :meth:`Policy.number` for times and
ranks. Two implementations:

* :class:`ClassAdPolicy` -- HTCondor's way: ClassAd expressions (START, SUSPEND, ...) evaluated
  with the slot ad as MY and the job ad as TARGET. The expressions also see each other by name
  (the desktop PREEMPT refers to ``SUSPEND`` and ``WANT_SUSPEND``), as in HTCondor.
  ``time()`` inside an expression is the core's ``now``, so a fake clock drives the whole policy.
* :class:`FixedPolicy` -- constants or Python callables; for tests and the simulator.

The knob names are HTCondor's: START, IS_OWNER, SUSPEND, CONTINUE, PREEMPT, KILL, WANT_SUSPEND,
WANT_VACATE, RANK, MaxJobRetirementTime, MachineMaxVacateTime, PERIODIC_CHECKPOINT, and CpuBusy (the latched
"non-HTCondor load is high" test the desktop SUSPEND uses through CpuBusyTime). A knob with a
``_VANILLA`` twin (``SUSPEND_VANILLA``) uses the twin for vanilla jobs (JobUniverse 5).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from htc.errors import UsageError

Ad = Mapping[str, Any]

#: Built-in defaults of a dedicated execution point (HTCondor's param table, reference §5.4).
DEDICATED: dict[str, str] = {
    "START": "True",
    "IS_OWNER": "False",
    "SUSPEND": "False",
    "CONTINUE": "True",
    "PREEMPT": "False",
    "KILL": "False",
    "WANT_SUSPEND": "False",
    "WANT_VACATE": "True",
    "RANK": "0",
    "MaxJobRetirementTime": "0",
    "MachineMaxVacateTime": "600",
    "CpuBusy": "False",
    # when a running standard-universe job is checkpointed (htc.daemons.startd.periodic_checkpoint)
    "PERIODIC_CHECKPOINT": "((time() - LastPeriodicCheckpoint)/60.0) > 180.0",
}

_ACTIVITY_TIMER = "(time() - EnteredCurrentActivity)"
_ACTIVATION_TIMER = "ifThenElse(JobStart =!= UNDEFINED, (time() - JobStart), 0)"
_NON_CONDOR_LOAD = "(LoadAvg - CondorLoadAvg)"

#: ``use POLICY : Desktop`` as HTCondor 25 expands it (reference §5.4): start after 15 idle
#: minutes with little owner load, suspend when the owner returns, vacate after 10 minutes
#: suspended, continue after 5 idle minutes.
DESKTOP: dict[str, str] = {
    "START": f"((KeyboardIdle > 15 * 60) && (({_NON_CONDOR_LOAD} <= 0.3) || "
    '(State != "Unclaimed" && State != "Owner")))',
    "IS_OWNER": "(START =?= False)",
    "CpuBusy": f"({_NON_CONDOR_LOAD} >= 0.5)",
    "SUSPEND": "((KeyboardIdle < 60) || ((IfThenElse(CpuBusyValue is 1, time() - CpuBusyTime, 0) > 120) "
    f"&& {_ACTIVATION_TIMER} > 90))",
    "WANT_SUSPEND": "(((TARGET.ImageSize < (15 * 1024)) || ((KeyboardIdle < 60) == False) || "
    "(TARGET.JobUniverse == 5)) && SUSPEND)",
    "WANT_VACATE": f"({_ACTIVATION_TIMER} > 600 || (TARGET.JobUniverse == 5))",
    "CONTINUE": f"(({_NON_CONDOR_LOAD} <= 0.3) && ({_ACTIVITY_TIMER} > 10) && (KeyboardIdle > 300))",
    "PREEMPT": f'(((Activity == "Suspended") && ({_ACTIVITY_TIMER} > 600)) || (SUSPEND && (WANT_SUSPEND == False)))',
    "KILL": "False",
    "RANK": "0",
    "MaxJobRetirementTime": "0",
    "MachineMaxVacateTime": "600",
}

#: Knobs a policy must answer for; the core asks for no others.
KNOBS = tuple(DEDICATED)


class Policy(Protocol):
    """What the startd core needs from a policy."""

    def evaluate(self, name: str, slot_ad: Ad, job_ad: Ad | None, *, now: float, undefined: bool = False) -> bool:
        """True when knob ``name`` is true; UNDEFINED or ERROR give ``undefined``.

        ``undefined=True`` asks "is it *not false*?", which is how HTCondor reads START
        "locally" (without a job): ``START = Owner == "bob"`` is undefined, not false.
        """

    def number(self, name: str, slot_ad: Ad, job_ad: Ad | None, *, now: float) -> float | None:
        """The knob's numeric value, or None when it is not a number."""

    def advertised(self, partitionable: bool) -> dict[str, Any]:
        """``Start``, ``Rank`` and ``Requirements`` for the slot ad (p-slots add resource checks)."""


def _truth(value: Any, undefined: bool) -> bool:
    # HTCondor's EvalBool: booleans as they are, numbers non-zero; strings, lists, UNDEFINED
    # and ERROR have no truth value and take the caller's ``undefined``.
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    return undefined


class FixedPolicy:
    """A policy of constants and callables: ``FixedPolicy(START=True, SUSPEND=lambda s, j, now: ...)``.

    Knobs not given take the dedicated defaults (:data:`DEDICATED`), except ``IS_OWNER`` which,
    when not given, is ``START`` evaluated without a job being false -- the desktop rule.
    """

    def __init__(self, **values: Any):
        unknown = sorted(set(values) - set(KNOBS) - {k + "_VANILLA" for k in KNOBS})
        if unknown:
            raise UsageError(f"FixedPolicy: unknown knob(s) {unknown}; known knobs are {list(KNOBS)}")
        self.values = dict(values)

    def _raw(self, name: str, slot_ad: Ad, job_ad: Ad | None, now: float) -> Any:
        if job_ad is not None and job_ad.get("JobUniverse") == 5 and name + "_VANILLA" in self.values:
            name = name + "_VANILLA"
        if name == "IS_OWNER" and name not in self.values:
            return not _truth(self._raw("START", slot_ad, None, now), True)
        value = self.values.get(name)
        if value is None:
            value = {"True": True, "False": False}.get(DEDICATED[name], None)
            if value is None:
                value = float(DEDICATED[name])
        return value(slot_ad, job_ad, now) if callable(value) else value

    def evaluate(self, name: str, slot_ad: Ad, job_ad: Ad | None, *, now: float, undefined: bool = False) -> bool:
        """True when the knob's constant (or callable's result) is true; None counts as undefined."""
        return _truth(self._raw(name, slot_ad, job_ad, now), undefined)

    def number(self, name: str, slot_ad: Ad, job_ad: Ad | None, *, now: float) -> float | None:
        """The knob's numeric value, or None."""
        value = self._raw(name, slot_ad, job_ad, now)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)

    def advertised(self, partitionable: bool) -> dict[str, Any]:
        """Constants are advertised as they are; callables cannot be, so they are left out.

        A p-slot's resource check is the core's business here (no expressions to combine).
        """
        out = {}
        for knob, attr in (("START", "Start"), ("RANK", "Rank")):
            value = self.values.get(knob, True if knob == "START" else 0.0)
            if not callable(value):
                out[attr] = value
        if "Start" in out:
            out["Requirements"] = out["Start"]
        return out


# `time()` outside string literals; replaced by a reference to the evaluation time so that the
# core's clock (fake in tests, simulated in htc.sim) drives every timer in the policy.
_TIME_CALL = re.compile(r'"(?:[^"\\]|\\.)*"|\btime\s*\(\s*\)', re.IGNORECASE)
_NOW_ATTR = "HtcPolicyNow"


def _requirements(text: str):
    from htc.classad import ExprTree

    return ExprTree(text)


_REQUIREMENTS = _requirements("START")
#: HTCondor's p-slot: START plus "the request fits in what is left" (parsed once: every slot ad has it)
_PSLOT_REQUIREMENTS = _requirements(
    "(START) && (TARGET.RequestCpus <= MY.Cpus) && (TARGET.RequestMemory <= MY.Memory)"
    " && (TARGET.RequestDisk <= MY.Disk)")


def _pin_clock(text: str) -> str:
    return _TIME_CALL.sub(lambda m: m.group(0) if m.group(0).startswith('"') else f"MY.{_NOW_ATTR}", text)


class ClassAdPolicy:
    """Policy knobs as ClassAd expressions (HTCondor's way).

    Args:
        expressions: knob name -> expression text; knobs left out take :data:`DEDICATED`.
            ``ClassAdPolicy(DESKTOP)`` is the desktop policy.

    Raises:
        UsageError: an expression does not parse (the message names the knob).
    """

    def __init__(self, expressions: Mapping[str, str] | None = None):
        from htc.classad import ExprTree

        merged = dict(DEDICATED)
        merged.update(expressions or {})
        self.texts = merged
        self._exprs: dict[str, Any] = {}
        for name, text in merged.items():
            try:
                self._exprs[name] = ExprTree(_pin_clock(str(text)))
            except Exception as exc:  # the parser's own error type is htc.classad's business
                raise UsageError(f"startd policy: {name} = {text!r} is not a valid ClassAd expression: {exc}") from exc
        self._published = {name: ExprTree(str(text)) for name, text in merged.items()}
        # Knobs that are plain literals (the dedicated policy: START = True, SUSPEND = False, ...)
        # need no ads to evaluate: the startd asks several of them on every event.
        from htc.classad.ast import Literal

        self._constants = {name: expr.node.value for name, expr in self._exprs.items()
                           if isinstance(expr.node, Literal)}

    def _scope(self, slot_ad: Ad, now: float):
        from htc.classad import ClassAd

        ad = ClassAd()
        for key, value in slot_ad.items():
            ad[key] = value
        # Knobs are visible by name (PREEMPT mentions SUSPEND), as in the startd's internal ad.
        for name, expr in self._exprs.items():
            ad[name] = expr
        ad[_NOW_ATTR] = int(now)
        return ad

    def _value(self, name: str, slot_ad: Ad, job_ad: Ad | None, now: float) -> Any:
        from htc.classad import ClassAd

        if job_ad is not None and job_ad.get("JobUniverse") == 5 and name + "_VANILLA" in self._exprs:
            name = name + "_VANILLA"
        if name in self._constants:
            return self._constants[name]
        expr = self._exprs.get(name)
        if expr is None:
            raise UsageError(f"startd policy: no knob named {name!r}; known knobs are {sorted(self._exprs)}")
        target = None
        if job_ad is not None:
            target = ClassAd()
            for key, value in job_ad.items():
                target[key] = value
        return expr.eval(scope=self._scope(slot_ad, now), target=target)

    def evaluate(self, name: str, slot_ad: Ad, job_ad: Ad | None, *, now: float, undefined: bool = False) -> bool:
        """True when the knob evaluates to true; UNDEFINED and ERROR give ``undefined``."""
        return _truth(self._value(name, slot_ad, job_ad, now), undefined)

    def number(self, name: str, slot_ad: Ad, job_ad: Ad | None, *, now: float) -> float | None:
        """The knob's numeric value, or None when it evaluates to something else."""
        value = self._value(name, slot_ad, job_ad, now)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)

    def advertised(self, partitionable: bool) -> dict[str, Any]:
        """``Start``, ``Rank`` and ``Requirements`` as expressions, as HTCondor publishes them."""
        return {
            "Start": self._published["START"],
            "Rank": self._published["RANK"],
            "Requirements": _PSLOT_REQUIREMENTS if partitionable else _REQUIREMENTS,
            # The policy itself, so that `htc status -l` shows what the slot runs on.
            **{name: expr for name, expr in self._published.items() if name not in ("START", "RANK")},
        }

"""Scenarios: the pool, its owners, the users, the policy -- built in (condor88) or from TOML.

A :class:`Scenario` is everything a run needs; :func:`condor88` builds the 1988 paper's setting
(docs/fair-share.md, "The condor88 scenario") and :func:`load` reads a scenario file (the format
is documented in docs/fair-share.md, "Scenario files"; examples/sim_small.toml is one).

Policies (:data:`POLICIES`) are sets of negotiator knobs, applied to the real
:class:`~htc.daemons.negotiator.settings.NegotiatorSettings` by knob name, exactly as a
configuration file would set them:

* ``HTCONDOR`` -- HTCondor's defaults: the accountant's fair share, no priority preemption;
* ``HTCONDOR_PREEMPT`` -- plus the classic desktop ``PREEMPTION_REQUIREMENTS`` (the running
  user's EUP more than 1.2x worse, and the job placed more than an hour ago);
* ``UPDOWN`` -- ``NEGOTIATOR_POLICY = UPDOWN``, the 1988 Up-Down index (needs a negotiator that
  has that knob);
* ``FIFO`` -- no fair share: one submitter name for every job (see :mod:`htc.sim.schedd`) and
  ``NEGOTIATOR_IGNORE_USER_PRIORITIES``.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.settings import knobs_of
from htc.errors import UsageError
from htc.sim.owner import DAY, HOUR, OwnerModel
from htc.sim.pool import CONDOR88_POLICY
from htc.sim.workload import UserSpec

__all__ = ["POLICIES", "Scenario", "condor88", "load", "negotiator_settings"]

#: the classic desktop policy's PREEMPTION_REQUIREMENTS (reference §4.4), with the claim's age
#: read from the slot's TotalJobRunTime
UWCS_PREEMPTION_REQUIREMENTS = (
    "(SubmitterGroup =?= RemoteGroup) && (MY.TotalJobRunTime > 1 * 3600) && "
    "(RemoteUserPrio > TARGET.SubmitterUserPrio * 1.2)")

#: policy name -> (negotiator knobs, FIFO submission)
POLICIES: dict[str, tuple[dict[str, Any], bool]] = {
    "HTCONDOR": ({}, False),
    "HTCONDOR_PREEMPT": ({"PREEMPTION_REQUIREMENTS": UWCS_PREEMPTION_REQUIREMENTS}, False),
    "UPDOWN": ({"NEGOTIATOR_POLICY": "UPDOWN"}, False),
    "FIFO": ({"NEGOTIATOR_IGNORE_USER_PRIORITIES": True}, True),
}


@dataclass(frozen=True)
class Scenario:
    """One simulation run's inputs (times in seconds)."""

    name: str
    machines: int
    horizon: float
    users: tuple[UserSpec, ...]
    policy: str = "HTCONDOR"
    seed: int = 1
    owner: OwnerModel = field(default_factory=OwnerModel)
    negotiator: Mapping[str, Any] = field(default_factory=lambda: {"NEGOTIATOR_INTERVAL": 120})
    startd: Mapping[str, str] = field(default_factory=lambda: dict(CONDOR88_POLICY))
    startd_poll: float = 30.0
    drain: float = 30 * DAY  # after the horizon: no arrivals, run until the queue is empty
    sample_every: float = HOUR

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise UsageError(f"unknown policy {self.policy!r}; choose one of {', '.join(POLICIES)}")
        if self.machines < 1 or self.horizon <= 0:
            raise UsageError("a scenario needs at least one machine and a positive length")
        if not self.users:
            raise UsageError("a scenario needs at least one user")

    def with_policy(self, policy: str, seed: int | None = None) -> Scenario:
        """The same scenario under another policy (and seed)."""
        return dataclasses.replace(self, policy=policy, seed=self.seed if seed is None else seed)


def negotiator_settings(policy: str, knobs: Mapping[str, Any]) -> NegotiatorSettings:
    """Build the negotiator's settings: the policy's knobs, then the scenario's, by knob name
    (knobs of the nested settings -- the accountant's, Up-Down's -- included).

    Raises:
        UsageError: a knob the negotiator does not have (UPDOWN names the knob it needs).
    """
    values = {**POLICIES[policy][0], **knobs}
    where: dict[str, tuple[str | None, str]] = {
        knob: (None, name) for name, knob in knobs_of(NegotiatorSettings).items()}
    nested: dict[str, dict[str, Any]] = {}
    for f in dataclasses.fields(NegotiatorSettings):
        factory = f.default_factory
        if dataclasses.is_dataclass(factory) and isinstance(factory, type):
            nested[f.name] = {}
            where.update({knob: (f.name, name) for name, knob in knobs_of(factory).items()})
    core: dict[str, Any] = {}
    for knob, value in values.items():
        if knob not in where:
            if knob == "NEGOTIATOR_POLICY":
                raise UsageError("policy UPDOWN needs the negotiator's NEGOTIATOR_POLICY knob, "
                                 "which this build does not have (it comes with the Up-Down "
                                 "policy)")
            raise UsageError(f"the negotiator has no knob {knob!r}")
        parent, name = where[knob]
        (core if parent is None else nested[parent])[name] = value
    for f in dataclasses.fields(NegotiatorSettings):
        if f.name in nested:
            core[f.name] = f.default_factory(**nested[f.name])
    return NegotiatorSettings(**core)


def condor88(policy: str = "HTCONDOR", seed: int = 1, *, days: float = 30,
             fixed_heavy: bool = False) -> Scenario:
    """The 1988 paper's setting: 23 workstations, one heavy user, six light users.

    Args:
        policy: one of :data:`POLICIES`.
        seed: fixes owners and workload (the same seed gives the same jobs under every policy).
        days: length of the submission period.
        fixed_heavy: the heavy user submits 65 jobs every 62 h instead of random batches
            (less seed-to-seed spread, for short runs).
    """
    heavy = UserSpec("A", "heavy", 50, 80, mean_gap=2.6 * DAY, demand_median=2.7 * HOUR,
                     period=62 * HOUR if fixed_heavy else None,
                     first_batch=6 * HOUR if fixed_heavy else 0.0)
    if fixed_heavy:
        heavy = dataclasses.replace(heavy, batch_min=65, batch_max=65)
    light = tuple(UserSpec(f"L{i}", "light", 1, 5, mean_gap=0.6 * DAY, window=(9, 18),
                           demand_median=2.0 * HOUR) for i in range(6))
    return Scenario("condor88", 23, days * DAY, (heavy, *light), policy=policy, seed=seed)


# --------------------------------------------------------------------------- scenario files

_TOP = {"name", "machines", "days", "seed", "policy", "drain_days", "startd_poll_seconds",
        "owner", "users", "negotiator", "startd"}
_OWNER = {"enabled": "enabled", "busy_mean_minutes": "busy_mean", "start_busy": "start_busy",
          "weekend_load": "weekend_load", "weekday_load": "weekday_load",
          "scale_range": "scale_range", "multiplier_range": "multiplier_range"}
_USER = {"name", "class", "count", "batch", "mean_gap_hours", "period_hours", "first_batch_hours",
         "window_hours", "demand_median_hours", "demand_sigma", "demand_min_hours",
         "demand_max_hours"}


def _unknown(kind: str, given: Mapping, known) -> None:
    extra = sorted(set(given) - set(known))
    if extra:
        raise UsageError(f"scenario {kind}: unknown key(s) {', '.join(extra)}; "
                         f"known: {', '.join(sorted(known))}")


def _owner(data: Mapping) -> OwnerModel:
    _unknown("[owner]", data, _OWNER)
    values = {_OWNER[k]: v for k, v in data.items()}
    if "busy_mean" in values:
        values["busy_mean"] = float(values["busy_mean"]) * 60
    if "weekday_load" in values:
        values["weekday_load"] = tuple((int(h), float(u)) for h, u in values["weekday_load"])
    for key in ("scale_range", "multiplier_range"):
        if key in values:
            values[key] = tuple(float(v) for v in values[key])
    return OwnerModel(**values)


def _users(entries: list) -> tuple[UserSpec, ...]:
    users = []
    for data in entries:
        _unknown("[[users]]", data, _USER)
        if "name" not in data:
            raise UsageError("scenario [[users]]: every user needs a name")
        batch = data.get("batch", [1, 5])
        kw: dict[str, Any] = {"cls": data.get("class", "light"), "batch_min": int(batch[0]),
                              "batch_max": int(batch[-1])}
        hours = {"mean_gap_hours": "mean_gap", "period_hours": "period",
                 "first_batch_hours": "first_batch", "demand_median_hours": "demand_median",
                 "demand_min_hours": "demand_min", "demand_max_hours": "demand_max"}
        for key, name in hours.items():
            if key in data:
                kw[name] = float(data[key]) * HOUR
        if "demand_sigma" in data:
            kw["demand_sigma"] = float(data["demand_sigma"])
        if "window_hours" in data:
            kw["window"] = (float(data["window_hours"][0]), float(data["window_hours"][1]))
        count = int(data.get("count", 1))
        for i in range(count):
            name = data["name"] if count == 1 else f"{data['name']}{i}"
            users.append(UserSpec(name, **kw))
    return tuple(users)


def load(path: str | Path, *, policy: str | None = None, seed: int | None = None) -> Scenario:
    """Read a scenario file (TOML); ``policy``/``seed`` override the file's.

    Raises:
        UsageError: the file cannot be read or says something this format does not have.
    """
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read scenario {path}: {exc}") from exc
    _unknown("file", data, _TOP)
    startd = dict(CONDOR88_POLICY)
    startd.update({str(k): str(v) for k, v in data.get("startd", {}).items()})
    return Scenario(
        name=str(data.get("name", Path(path).stem)), machines=int(data.get("machines", 23)),
        horizon=float(data.get("days", 30)) * DAY, users=_users(data.get("users", [])),
        policy=policy or str(data.get("policy", "HTCONDOR")).upper(),
        seed=int(seed if seed is not None else data.get("seed", 1)),
        owner=_owner(data.get("owner", {})),
        negotiator={"NEGOTIATOR_INTERVAL": 120, **data.get("negotiator", {})},
        startd=startd, startd_poll=float(data.get("startd_poll_seconds", 30)),
        drain=float(data.get("drain_days", 30)) * DAY)

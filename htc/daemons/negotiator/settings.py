"""The knobs the negotiator reads, with HTCondor's defaults, checked once.

Each field configured by a knob says so where it is declared (:func:`htc.daemons.settings.knob`);
the service builds the settings from the param table (:meth:`NegotiatorSettings.from_config`,
:func:`htc.daemons.settings.from_config`); the core never reads configuration itself. Policy
expressions are given as ClassAd text and parsed here, so a typo in ``PREEMPTION_REQUIREMENTS``
is reported when the daemon starts, not in the middle of a cycle.

:class:`NegotiatorSettings` is what the core needs; :class:`NegotiatorServiceSettings` adds
what only the service and its wire adapter need (where the accountant is saved, whom to tell).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from htc.classad import ExprTree
from htc.config.evaluate import to_bool
from htc.daemons import settings as knobs
from htc.daemons.negotiator.accountant import AccountantSettings
from htc.daemons.negotiator.groups import GroupSettings
from htc.daemons.negotiator.updown import POLICIES, UpDownSettings
from htc.daemons.settings import knob
from htc.errors import UsageError

__all__ = ["NegotiatorSettings", "NegotiatorServiceSettings", "DEFAULT_PRE_JOB_RANK",
           "DEFAULT_POST_JOB_RANK", "DEFAULT_PREEMPTION_RANK", "UWCS_PREEMPTION_REQUIREMENTS"]

#: HTCondor's defaults (param table of 25.x, see htcondor-semantics.md §4.1).
DEFAULT_PRE_JOB_RANK = (
    "(10000000 * My.Rank) + (1000000 * (RemoteOwner =?= UNDEFINED)) - (100000 * Cpus) - Memory"
)
DEFAULT_POST_JOB_RANK = (
    "(RemoteOwner =?= UNDEFINED) * (ifthenElse(isUndefined(KFlops), 1000, Kflops) - SlotID"
    " - 1.0e10*(Offline=?=True))"
)
DEFAULT_PREEMPTION_RANK = (
    "(RemoteUserPrio * 1000000) - ifThenElse(isUndefined(TotalJobRuntime), 0, TotalJobRuntime)"
)
#: The classic desktop policy (``use POLICY : UWCS_DESKTOP``), for pools that want priority
#: preemption: only claims older than an hour, only for a 20 % better effective priority.
UWCS_PREEMPTION_REQUIREMENTS = (
    "((SubmitterGroup =?= RemoteGroup) && ((time() - EnteredCurrentState) > (1 * 3600))"
    " && (RemoteUserPrio > TARGET.SubmitterUserPrio * 1.2)) || (MY.NiceUser == True)"
)


def _text_or_none(value: str | None) -> str | None:
    return value or None


def _policy(value: str | None) -> str:
    text = str(value or "HTCONDOR").strip().upper()
    if text not in POLICIES:
        raise UsageError(f"NEGOTIATOR_POLICY = {value!r} is not one of {', '.join(POLICIES)}: "
                         "HTCONDOR is the accountant's fair share, UPDOWN the 1988 Up-Down index")
    return text


def _float(name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"{name} = {text!r} is not a number") from None


def _bool(name: str, text: str) -> bool:
    value, clean = to_bool(text)
    if not clean:
        raise UsageError(f"{name} = {text!r} is not True or False")
    return value


def _per_group(config, prefix: str, names: tuple[str, ...], convert) -> dict:
    """``{group: value}`` of the pattern knob ``<prefix>_<group>`` for each configured group."""
    out = {}
    for group in names:
        knob_name = f"{prefix}_{group}"
        text = config.get(knob_name)
        if text is not None and text.strip():
            out[group] = convert(knob_name, text.strip())
    return out


def _parse(name: str, text: str | None) -> ExprTree | None:
    if text is None or not str(text).strip():
        return None
    try:
        return ExprTree(str(text))
    except Exception as exc:  # the ClassAd parser's message names the position
        raise UsageError(f"{name} = {text!r} is not a ClassAd expression: {exc}") from exc


@dataclass(frozen=True)
class NegotiatorSettings:
    """Everything the negotiator core needs to know about its configuration.

    Times are seconds. ``trigger_delay`` is htc's coalescing gap: a reschedule request starts a
    cycle no sooner than this after it arrives, so a burst of submits yields one cycle.
    ``cycle_delay`` paces periodic cycles only; ``min_interval`` paces every cycle (htc's
    default is 0, HTCondor's 5 s: see docs/negotiator.md).
    """

    interval: float = knob("NEGOTIATOR_INTERVAL", 60.0)
    #: from the end of one cycle to the next periodic one
    cycle_delay: float = knob("NEGOTIATOR_CYCLE_DELAY", 20.0)
    min_interval: float = knob("NEGOTIATOR_MIN_INTERVAL", 0.0)  # between two cycle starts
    trigger_delay: float = 0.01
    timeout: float = knob("NEGOTIATOR_TIMEOUT", 30.0)  # wait for the collector / a schedd
    consider_preemption: bool = knob("NEGOTIATOR_CONSIDER_PREEMPTION", True)
    consider_early_preemption: bool = knob("NEGOTIATOR_CONSIDER_EARLY_PREEMPTION", False)
    preemption_requirements: str | None = knob("PREEMPTION_REQUIREMENTS", "False", convert=_text_or_none)
    preemption_rank: str | None = knob("PREEMPTION_RANK", DEFAULT_PREEMPTION_RANK, convert=_text_or_none)
    pre_job_rank: str | None = knob("NEGOTIATOR_PRE_JOB_RANK", DEFAULT_PRE_JOB_RANK, convert=_text_or_none)
    post_job_rank: str | None = knob("NEGOTIATOR_POST_JOB_RANK", DEFAULT_POST_JOB_RANK, convert=_text_or_none)
    use_slot_weights: bool = knob("NEGOTIATOR_USE_SLOT_WEIGHTS", True)
    ignore_user_priorities: bool = knob("NEGOTIATOR_IGNORE_USER_PRIORITIES", False)
    startd_job_attrs: tuple[str, ...] = knob("STARTD_JOB_ATTRS", (), convert=lambda names: tuple(names or ()))
    #: how a partitionable slot rounds requests up when carving (MODIFY_REQUEST_EXPR_*)
    cpus_quantum: float = 1.0
    memory_quantum: float = 128.0
    disk_quantum: float = 1024.0
    name: str = "negotiator"
    accountant: AccountantSettings = field(default_factory=AccountantSettings)
    #: HTCONDOR (the accountant's pie) or UPDOWN (the 1988 schedule index, :mod:`.updown`)
    policy: str = knob("NEGOTIATOR_POLICY", "HTCONDOR", convert=_policy)
    updown: UpDownSettings = field(default_factory=UpDownSettings)
    #: group quotas (used when ``GROUP_NAMES`` is set), :mod:`.groups`
    groups: GroupSettings = field(default_factory=GroupSettings)

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", _policy(self.policy))
        for name, value in (("NEGOTIATOR_INTERVAL", self.interval),
                            ("NEGOTIATOR_TIMEOUT", self.timeout)):
            if not value > 0:
                raise UsageError(f"{name} must be a positive number of seconds, got {value!r}")
        for name, value in (("NEGOTIATOR_CYCLE_DELAY", self.cycle_delay),
                            ("NEGOTIATOR_MIN_INTERVAL", self.min_interval),
                            ("trigger_delay", self.trigger_delay)):
            if not value >= 0:
                raise UsageError(f"{name} must be zero or more seconds, got {value!r}")
        # Parse every policy expression now so that a typo stops the daemon at start-up.
        object.__setattr__(self, "_compiled", {
            "preemption_requirements": _parse("PREEMPTION_REQUIREMENTS",
                                              self.preemption_requirements),
            "preemption_rank": _parse("PREEMPTION_RANK", self.preemption_rank),
            "pre_job_rank": _parse("NEGOTIATOR_PRE_JOB_RANK", self.pre_job_rank),
            "post_job_rank": _parse("NEGOTIATOR_POST_JOB_RANK", self.post_job_rank),
        })

    @classmethod
    def from_config(cls, config, **overrides) -> NegotiatorSettings:
        """Build settings from a loaded configuration (``htc.config.load_config("NEGOTIATOR")``).

        Args:
            config: anything with ``param(NAME)`` returning typed values of the param table.
            overrides: fields to set directly (``trigger_delay``, ``name``, ...).

        Returns:
            The settings.

        Raises:
            UsageError: a knob has a value the negotiator cannot use (the message names it).
        """
        names = tuple(config.param("GROUP_NAMES") or ())
        per_group = {knob_name: _per_group(config, knob_name, names, convert)
                     for knob_name, convert in (("GROUP_PRIO_FACTOR", _float),
                                                ("GROUP_QUOTA", _float),
                                                ("GROUP_QUOTA_DYNAMIC", _float),
                                                ("GROUP_ACCEPT_SURPLUS", _bool))}
        accountant = knobs.from_config(AccountantSettings, config,
                                       group_prio_factors=per_group["GROUP_PRIO_FACTOR"])
        updown = knobs.from_config(UpDownSettings, config)
        groups = knobs.from_config(
            GroupSettings, config, static_quotas=per_group["GROUP_QUOTA"],
            dynamic_quotas=per_group["GROUP_QUOTA_DYNAMIC"],
            accept_surplus_by_group=per_group["GROUP_ACCEPT_SURPLUS"])
        return knobs.from_config(cls, config, **{"accountant": accountant, "updown": updown,
                                                 "groups": groups, **overrides})

    def compiled(self, name: str) -> ExprTree | None:
        """Return the parsed policy expression ``name`` (None when unset)."""
        return self._compiled[name]  # type: ignore[attr-defined]

    @property
    def updown_policy(self) -> bool:
        """True when ``NEGOTIATOR_POLICY = UPDOWN``."""
        return self.policy == "UPDOWN"

    @property
    def never_priority_preempts(self) -> bool:
        """True when PREEMPTION_REQUIREMENTS is literally False (HTCondor's default) and the
        policy is not UPDOWN (which preempts on any strict index inversion)."""
        if self.updown_policy:
            return False
        expr = self.compiled("preemption_requirements")
        return expr is not None and repr(expr).strip().lower() == "false"

    def policy_texts(self) -> tuple[str, ...]:
        """The policy expressions whose references are significant attributes."""
        return tuple(t for t in (self.preemption_requirements, self.preemption_rank,
                                 self.pre_job_rank, self.post_job_rank) if t)


@dataclass(frozen=True)
class NegotiatorServiceSettings:
    """The core's settings plus what only the service needs."""

    core: NegotiatorSettings
    accountant_file: Path               # ACCOUNTANT_DATABASE_FILE
    inform_startd: bool = knob("NEGOTIATOR_INFORM_STARTD", False)
    collector: str = "collector"
    address: str = "negotiator"
    name: str = "negotiator"            # the Name of its Negotiator ad
    machine: str = "localhost"
    pid: int = 0
    ad_lifetime: int = 900              # CLASSAD_LIFETIME

"""The knobs the negotiator core reads, with HTCondor's defaults, checked once.

The service reads the configuration (``htc.config``) and builds a :class:`NegotiatorSettings`;
the core never reads configuration itself. Policy expressions are given as ClassAd text and
parsed here, so a typo in ``PREEMPTION_REQUIREMENTS`` is reported when the daemon starts, not
in the middle of a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from htc.classad import ExprTree
from htc.daemons.negotiator.accountant import AccountantSettings
from htc.errors import UsageError

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


def _parse(knob: str, text: str | None) -> ExprTree | None:
    if text is None or not str(text).strip():
        return None
    try:
        return ExprTree(str(text))
    except Exception as exc:  # the ClassAd parser's message names the position
        raise UsageError(f"{knob} = {text!r} is not a ClassAd expression: {exc}") from exc


@dataclass(frozen=True)
class NegotiatorSettings:
    """Everything the negotiator core needs to know about its configuration.

    Times are seconds. ``trigger_delay`` is htc's coalescing gap: a reschedule request starts a
    cycle no sooner than this after it arrives, so a burst of submits yields one cycle.
    ``cycle_delay`` paces periodic cycles only; ``min_interval`` paces every cycle (htc's
    default is 0, HTCondor's 5 s: see docs/negotiator.md).
    """

    interval: float = 60.0  # NEGOTIATOR_INTERVAL
    cycle_delay: float = 20.0  # NEGOTIATOR_CYCLE_DELAY: from the end of one cycle to the next periodic one
    min_interval: float = 0.0  # NEGOTIATOR_MIN_INTERVAL: between two cycle starts
    trigger_delay: float = 0.01
    timeout: float = 30.0  # NEGOTIATOR_TIMEOUT: wait for the collector / a schedd
    consider_preemption: bool = True  # NEGOTIATOR_CONSIDER_PREEMPTION
    consider_early_preemption: bool = False  # NEGOTIATOR_CONSIDER_EARLY_PREEMPTION
    preemption_requirements: str | None = "False"  # PREEMPTION_REQUIREMENTS
    preemption_rank: str | None = DEFAULT_PREEMPTION_RANK  # PREEMPTION_RANK
    pre_job_rank: str | None = DEFAULT_PRE_JOB_RANK  # NEGOTIATOR_PRE_JOB_RANK
    post_job_rank: str | None = DEFAULT_POST_JOB_RANK  # NEGOTIATOR_POST_JOB_RANK
    use_slot_weights: bool = True  # NEGOTIATOR_USE_SLOT_WEIGHTS
    ignore_user_priorities: bool = False  # NEGOTIATOR_IGNORE_USER_PRIORITIES
    startd_job_attrs: tuple[str, ...] = ()  # STARTD_JOB_ATTRS
    #: how a partitionable slot rounds requests up when carving (MODIFY_REQUEST_EXPR_*)
    cpus_quantum: float = 1.0
    memory_quantum: float = 128.0
    disk_quantum: float = 1024.0
    name: str = "negotiator"
    accountant: AccountantSettings = field(default_factory=AccountantSettings)

    def __post_init__(self) -> None:
        for knob, value in (("NEGOTIATOR_INTERVAL", self.interval),
                            ("NEGOTIATOR_TIMEOUT", self.timeout)):
            if not value > 0:
                raise UsageError(f"{knob} must be a positive number of seconds, got {value!r}")
        for knob, value in (("NEGOTIATOR_CYCLE_DELAY", self.cycle_delay),
                            ("NEGOTIATOR_MIN_INTERVAL", self.min_interval),
                            ("trigger_delay", self.trigger_delay)):
            if not value >= 0:
                raise UsageError(f"{knob} must be zero or more seconds, got {value!r}")
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
        group_names = tuple(config.param("GROUP_NAMES") or ())
        accountant = AccountantSettings(
            priority_halflife=config.param("PRIORITY_HALFLIFE"),
            default_prio_factor=config.param("DEFAULT_PRIO_FACTOR"),
            nice_user_prio_factor=config.param("NICE_USER_PRIO_FACTOR"),
            remote_prio_factor=config.param("REMOTE_PRIO_FACTOR"),
            local_domain=config.param("ACCOUNTANT_LOCAL_DOMAIN") or None,
            group_names=group_names,
            nice_user_group=config.param("NICE_USER_ACCOUNTING_GROUP_NAME") or "nice-user",
        )
        values = dict(
            interval=float(config.param("NEGOTIATOR_INTERVAL")),
            cycle_delay=float(config.param("NEGOTIATOR_CYCLE_DELAY")),
            min_interval=float(config.param("NEGOTIATOR_MIN_INTERVAL")),
            timeout=float(config.param("NEGOTIATOR_TIMEOUT")),
            consider_preemption=config.param("NEGOTIATOR_CONSIDER_PREEMPTION"),
            consider_early_preemption=config.param("NEGOTIATOR_CONSIDER_EARLY_PREEMPTION"),
            preemption_requirements=config.param("PREEMPTION_REQUIREMENTS") or None,
            preemption_rank=config.param("PREEMPTION_RANK") or None,
            pre_job_rank=config.param("NEGOTIATOR_PRE_JOB_RANK") or None,
            post_job_rank=config.param("NEGOTIATOR_POST_JOB_RANK") or None,
            use_slot_weights=config.param("NEGOTIATOR_USE_SLOT_WEIGHTS"),
            ignore_user_priorities=config.param("NEGOTIATOR_IGNORE_USER_PRIORITIES"),
            startd_job_attrs=tuple(config.param("STARTD_JOB_ATTRS") or ()),
            accountant=accountant,
        )
        values.update(overrides)
        return cls(**values)

    def compiled(self, name: str) -> ExprTree | None:
        """Return the parsed policy expression ``name`` (None when unset)."""
        return self._compiled[name]  # type: ignore[attr-defined]

    @property
    def never_priority_preempts(self) -> bool:
        """True when PREEMPTION_REQUIREMENTS is literally False (HTCondor's default)."""
        expr = self.compiled("preemption_requirements")
        return expr is not None and repr(expr).strip().lower() == "false"

    def policy_texts(self) -> tuple[str, ...]:
        """The policy expressions whose references are significant attributes."""
        return tuple(t for t in (self.preemption_requirements, self.preemption_rank,
                                 self.pre_job_rank, self.post_job_rank) if t)

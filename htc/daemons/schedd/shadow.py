"""The shadow of one running job, as the schedd follows it, and helpers on job ads and ids.

HTCondor runs one ``condor_shadow`` process per running job; htc keeps a :class:`Shadow` record
per running job inside the schedd core instead, moved by the table
:data:`~htc.daemons.schedd.states.SHADOW`. What the schedd does with its shadows is
:mod:`htc.daemons.schedd.shadows`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from htc.classad import ClassAd
from htc.daemons.schedd.states import SHADOW, ShadowEvent, ShadowState, transition
from htc.jobqueue.ads import items_text
from htc.jobqueue.expr import job_classad
from htc.jobqueue.records import JobId

__all__ = ["Shadow", "ad_text", "ad_values", "job_duration_limit", "parse_job_id"]


@dataclass(eq=False)
class Shadow:
    """One running job, as the schedd follows it."""

    job_id: JobId
    claim_id: str
    state: ShadowState
    started: float
    stop: str | None = None  # "remove", "hold" or "vacate" once a stop was asked for
    executed: bool = False  # the EXECUTE event is written
    call_pending: bool = False  # an ActivateClaim (or reconnecting keep-alive) is on its way
    acknowledged: bool = False  # the startd confirmed the activation (recorded in the job ad)
    retry_at: float | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    logged_image_size: int = 0
    state_sequence: int = -1  # the newest JobStateSequence the startd reported (updates or answers)
    duration_limit: float | None = None  # AllowedJobDuration (s) while it is still to be enforced
    left_queue: bool = False  # its end moved the job to the history (nothing to look up after)
    submit_cpu: float = 0.0  # CPU seconds the schedd spent on this run (htc.daemons.schedd.leverage)
    submit_cpu_parts: dict[str, float] = field(default_factory=dict)  # submit_cpu by part (leverage.PARTS)

    @property
    def duration_deadline(self) -> float | None:
        """When the run breaks its AllowedJobDuration (None: no limit, or already acted on)."""
        if self.duration_limit is None or self.stop is not None:
            return None
        return self.started + self.duration_limit

    @property
    def label(self) -> str:
        """``shadow 12.3`` -- for errors and logs."""
        return f"shadow {self.job_id[0]}.{self.job_id[1]}"

    def step(self, event: ShadowEvent) -> None:
        """Move by ``event`` through :data:`~htc.daemons.schedd.states.SHADOW`.

        Raises:
            IllegalTransition: the table has no such step from the shadow's state.
        """
        self.state = transition(SHADOW, self.label, self.state, event)


def job_duration_limit(job) -> float | None:
    """A stored job's ``AllowedJobDuration`` in seconds, evaluated in the job's scope; None
    (no limit) unless it is a positive number."""
    if "AllowedJobDuration" not in job:  # case-insensitive, as JobAd lookups are
        return None
    try:
        value = job_classad(job).eval("AllowedJobDuration")
    except Exception:  # noqa: BLE001 -- a broken expression is no limit, as HTCondor reads it
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 < value < float("inf") else None


def ad_text(attrs) -> str:
    """A stored ad (attribute -> expression text) as new-syntax ClassAd text for the wire."""
    return "[ " + items_text(attrs.items()) + " ]"


def parse_job_id(text: str) -> JobId:
    """``"12.3"`` as ``(12, 3)`` (a bare cluster is proc 0)."""
    cluster, _, proc = text.partition(".")
    return int(cluster), int(proc or 0)


def ad_values(text: str) -> dict[str, Any]:
    """A ClassAd text's attributes as Python values (expressions left as ExprTree)."""
    if not text:
        return {}
    ad = ClassAd(text)
    return {key: ad[key] for key in ad}

"""The negotiator's cycle as a state machine: its phases and the legal steps between them.

Theory of operation
-------------------
A negotiation cycle runs through the phases HTCondor's ``negotiationTime`` runs through,
except that htc waits for its peers' answers as events instead of blocking on them::

    IDLE --CYCLE_DUE--> FETCHING --ASKED_SCHEDDS--> REQUESTING --MATCHED--> IDLE
                           |  \\--MATCHED (no submitter has idle jobs)--------> IDLE
                           \\--ABORTED (the collector failed or was silent)---> IDLE

* ``FETCHING`` is HTCondor's phase 1, "obtaining ads from the collector".
* Phases 2 and 3 (accounting, sorting the submitters) take no time to wait for: they happen
  when the collector's answer arrives, before the schedds are asked.
* ``REQUESTING`` is the waiting part of HTCondor's phase 4 ("negotiating"): each schedd is
  asked for its resource requests; when all have answered (or ``NEGOTIATOR_TIMEOUT`` passed),
  the matchmaking runs in one go and the cycle is over.

The core (:mod:`htc.daemons.negotiator.core`) decides which step happens, by looking at the
event and its own records (is the cycle due yet? did every schedd answer?); this module holds
the table of legal steps, applied with :func:`htc.transitions.transition` and nothing else.
"""

from __future__ import annotations

import enum

from htc.transitions import transition

__all__ = ["Phase", "Step", "TABLE", "step"]


class Phase(enum.Enum):
    """Where the core is in a negotiation cycle (the value is what statistics report)."""

    IDLE = "idle"
    FETCHING = "fetching"  # waiting for the collector's slot and submitter ads
    REQUESTING = "requesting"  # waiting for the schedds' resource requests


class Step(enum.Enum):
    """What moves the cycle on; the core derives these from events."""

    CYCLE_DUE = "the next cycle is due: ask the collector for the pool"
    ASKED_SCHEDDS = "the pool arrived and submitters have idle jobs: ask their schedds"
    MATCHED = "the matchmaking ran (every schedd answered, the timeout passed, or none to ask)"
    ABORTED = "the collector failed or did not answer: the cycle is abandoned"


P, S = Phase, Step

#: (phase, step) -> the next phase. The whole state machine; nothing else moves the cycle.
TABLE: dict[tuple[Phase, Step], Phase] = {
    (P.IDLE, S.CYCLE_DUE): P.FETCHING,
    (P.FETCHING, S.ASKED_SCHEDDS): P.REQUESTING,
    (P.FETCHING, S.MATCHED): P.IDLE,
    (P.FETCHING, S.ABORTED): P.IDLE,
    (P.REQUESTING, S.MATCHED): P.IDLE,
}


def step(phase: Phase, what: Step) -> Phase:
    """The phase ``what`` leads to from ``phase``.

    Raises:
        IllegalTransition: the table has no such step (a bug in the core).
    """
    return transition(TABLE, "negotiator", phase, what)

"""The schedd's state tables: the shadow of a running job, and a claim on a startd's slot.

Both are applied only through :func:`htc.transitions.transition`; an illegal step raises
:class:`~htc.transitions.IllegalTransition` naming the machine (``shadow 12.3``, ``claim
slot1@exec``), the state and the event. docs/pool.md embeds :func:`machine_table` (a test keeps
it current).

The shadow (:mod:`htc.daemons.schedd.shadows`)::

    ACTIVATING --ActivateClaim acked--> RUNNING <--starter says--> SUSPENDED
        |  no answer                        |
        v                                   | hold / remove / vacate: Vacate sent to the startd
    RECONNECTING --acked--> RUNNING ...     v
                                         STOPPING
    any state --JobExited / claim lost / activation refused--> DONE (the record is dropped)

A claim (:mod:`htc.daemons.schedd.claims`)::

    REQUESTED --granted--> IDLE --activate--> ACTIVE --job_done--> IDLE ...
        | refused             | release / lost     | lost (startd dropped it, lease over)
        v                     v                    v
       GONE                  GONE                 GONE
"""

from __future__ import annotations

import enum

from htc.transitions import transition

__all__ = ["CLAIM", "SHADOW", "ClaimEvent", "ClaimState", "ShadowEvent", "ShadowState", "machine_table",
           "transition"]


class ShadowState(enum.Enum):
    """Where a shadow stands."""

    ACTIVATING = "Activating"      # ActivateClaim sent for a fresh start
    RECONNECTING = "Reconnecting"  # the startd did not answer, or the schedd restarted
    RUNNING = "Running"
    SUSPENDED = "Suspended"
    STOPPING = "Stopping"          # Vacate sent (condor_rm, condor_hold, condor_vacate_job, policy)
    DONE = "Done"


class ShadowEvent(enum.Enum):
    """What can happen to a shadow."""

    ACTIVATED = "activation acknowledged"
    UNANSWERED = "startd did not answer"
    SUSPENDED = "starter reports the job suspended"
    UNSUSPENDED = "starter reports the job running"
    STOP = "stop requested"
    ENDED = "job ended, claim lost or activation refused"


_S, _E = ShadowState, ShadowEvent

#: The shadow's legal steps. ENDED is legal from every live state.
SHADOW: dict[tuple[ShadowState, ShadowEvent], ShadowState] = {
    (_S.ACTIVATING, _E.ACTIVATED): _S.RUNNING,
    (_S.ACTIVATING, _E.UNANSWERED): _S.RECONNECTING,
    (_S.ACTIVATING, _E.SUSPENDED): _S.SUSPENDED,  # an update can overtake the activation's answer
    (_S.ACTIVATING, _E.UNSUSPENDED): _S.RUNNING,
    (_S.ACTIVATING, _E.STOP): _S.STOPPING,
    (_S.RECONNECTING, _E.ACTIVATED): _S.RUNNING,
    (_S.RECONNECTING, _E.UNANSWERED): _S.RECONNECTING,
    (_S.RECONNECTING, _E.SUSPENDED): _S.SUSPENDED,
    (_S.RECONNECTING, _E.UNSUSPENDED): _S.RUNNING,
    (_S.RECONNECTING, _E.STOP): _S.STOPPING,
    (_S.RUNNING, _E.ACTIVATED): _S.RUNNING,
    (_S.RUNNING, _E.UNSUSPENDED): _S.RUNNING,
    (_S.RUNNING, _E.SUSPENDED): _S.SUSPENDED,
    (_S.RUNNING, _E.STOP): _S.STOPPING,
    (_S.SUSPENDED, _E.SUSPENDED): _S.SUSPENDED,
    (_S.SUSPENDED, _E.UNSUSPENDED): _S.RUNNING,
    (_S.SUSPENDED, _E.STOP): _S.STOPPING,
    (_S.STOPPING, _E.ACTIVATED): _S.STOPPING,
    (_S.STOPPING, _E.UNANSWERED): _S.STOPPING,
    (_S.STOPPING, _E.SUSPENDED): _S.STOPPING,
    (_S.STOPPING, _E.UNSUSPENDED): _S.STOPPING,
    (_S.STOPPING, _E.STOP): _S.STOPPING,
    **{(state, _E.ENDED): _S.DONE for state in ShadowState if state is not _S.DONE},
}


class ClaimState(enum.Enum):
    """Where one of the schedd's claims stands."""

    REQUESTED = "Requested"  # RequestClaim sent, no answer yet
    IDLE = "Idle"            # claimed, no job on it
    ACTIVE = "Active"        # a shadow runs a job on it
    GONE = "Gone"


class ClaimEvent(enum.Enum):
    """What can happen to a claim."""

    GRANTED = "granted"
    REFUSED = "refused"
    LOST = "lost"
    ACTIVATE = "activate"
    JOB_DONE = "job_done"
    RELEASE = "release"


_C, _T = ClaimState, ClaimEvent

#: The claim's legal steps: (state, event) -> new state.
CLAIM: dict[tuple[ClaimState, ClaimEvent], ClaimState] = {
    (_C.REQUESTED, _T.GRANTED): _C.IDLE,
    (_C.REQUESTED, _T.REFUSED): _C.GONE,
    (_C.REQUESTED, _T.LOST): _C.GONE,
    (_C.IDLE, _T.ACTIVATE): _C.ACTIVE,
    (_C.IDLE, _T.RELEASE): _C.GONE,
    (_C.IDLE, _T.LOST): _C.GONE,
    (_C.ACTIVE, _T.JOB_DONE): _C.IDLE,
    (_C.ACTIVE, _T.RELEASE): _C.GONE,
    (_C.ACTIVE, _T.LOST): _C.GONE,
}


def machine_table() -> str:
    """The shadow and claim tables as Markdown (docs/pool.md embeds it; a test keeps it current)."""
    lines = ["| machine | from | on | to |", "|---|---|---|---|"]
    lines += [f"| shadow | {old.value} | {event.value} | {new.value} |" for (old, event), new in SHADOW.items()]
    lines += [f"| claim | {old.value} | {event.value} | {new.value} |" for (old, event), new in CLAIM.items()]
    return "\n".join(lines)

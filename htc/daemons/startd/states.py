"""The startd's slot state machine, as a table.

Theory of operation
-------------------
Every slot of a startd is in one (state, activity) pair, named exactly as HTCondor names them
(``Owner/Idle``, ``Claimed/Busy``, ``Preempting/Vacating`` ...). The slot moves only when a
*trigger* fires; the core (:mod:`htc.daemons.startd.core`) decides which trigger fires by looking at
events (a claim request, a starter exiting, a drain command) and at the policy expressions it
evaluates (START, SUSPEND, PREEMPT ...). This module knows nothing about those reasons: it holds
the table of legal steps.

Each row carries the labels the HTCondor manual gives the step
(``docs/admin-manual/ep-policy-configuration.rst``):

* ``letter`` -- the label on the *state* diagram (A-P); only rows that change the state have one.
* ``number`` -- the label on the *state and activity* diagram (1-37).

The manual's prose and its activity figure disagree on which of 22-25 leaves Vacating and which
leaves Killing; we follow the prose: Vacating->Owner 22, Vacating->Claimed 23,
Killing->Claimed 24, Killing->Owner 25. A few steps the manual leaves unlabelled (an eviction
that skips retirement, a job exiting while suspended) carry the state letter only.

Backfill and Benchmarking are not implemented (htc runs no backfill manager, and its benchmark
runs in the sensors, outside the slot's activity), so their rows (E, K, L, M, 3, 4, 7, 26-32)
are absent. An absent row is an illegal step. The core applies the table with
:func:`htc.transitions.transition` (the slot's state is the pair ``(state, activity)``), whose
:class:`~htc.transitions.IllegalTransition` says what :func:`refusal` writes.

The docs' diagram is generated from :data:`TABLE` by :func:`state_diagram`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from htc.transitions import legal_events


class State(enum.StrEnum):
    """A slot's state, spelled as in the ``State`` attribute of HTCondor machine ads."""

    OWNER = "Owner"
    UNCLAIMED = "Unclaimed"
    MATCHED = "Matched"
    CLAIMED = "Claimed"
    PREEMPTING = "Preempting"
    DRAINED = "Drained"


class Activity(enum.StrEnum):
    """A slot's activity, spelled as in the ``Activity`` attribute of machine ads."""

    IDLE = "Idle"
    BUSY = "Busy"
    SUSPENDED = "Suspended"
    RETIRING = "Retiring"
    VACATING = "Vacating"
    KILLING = "Killing"


class Trigger(enum.Enum):
    """Why a slot steps; the core derives these from events and policy evaluation."""

    NOT_OWNER = "IS_OWNER false"
    OWNER = "IS_OWNER true"
    MATCH = "match notified"
    CLAIM = "claim request accepted"
    MATCH_LOST = "match timeout / START false / vacate"
    ACTIVATE = "claim activated"
    STARTER_EXITED = "starter exited"
    SUSPEND = "WANT_SUSPEND && SUSPEND"
    CONTINUE = "CONTINUE"
    RETIRE = "PREEMPT / better match / drain"
    UNRETIRE = "preempting claim went away"
    EVICT_VACATE = "evict (vacate, release, lease, retirement over), WANT_VACATE true"
    EVICT_KILL = "evict, WANT_VACATE false or a fast vacate"
    KILL = "KILL true or vacate time over"
    TO_OWNER = "preemption done"
    TO_NEW_CLAIM = "preemption done, better claim waiting"
    DRAIN = "drain"
    ALL_DRAINED = "every slot drained"
    DRAIN_OVER = "drain finalized or cancelled"


S, A, T = State, Activity, Trigger


@dataclass(frozen=True, slots=True)
class Transition:
    """One legal step: where it goes and the manual's labels for it."""

    state: State
    activity: Activity
    letter: str | None
    number: int | None


def _row(state: State, activity: Activity, letter: str | None, number: int | None) -> Transition:
    return Transition(state, activity, letter, number)


#: (state, activity, trigger) -> Transition. The whole state machine; nothing else moves a slot.
TABLE: dict[tuple[State, Activity, Trigger], Transition] = {
    # Owner
    (S.OWNER, A.IDLE, T.NOT_OWNER): _row(S.UNCLAIMED, A.IDLE, "A", 1),
    (S.OWNER, A.IDLE, T.DRAIN): _row(S.DRAINED, A.RETIRING, "N", 36),
    # Unclaimed
    (S.UNCLAIMED, A.IDLE, T.OWNER): _row(S.OWNER, A.IDLE, "B", 2),
    (S.UNCLAIMED, A.IDLE, T.MATCH): _row(S.MATCHED, A.IDLE, "C", 6),
    (S.UNCLAIMED, A.IDLE, T.CLAIM): _row(S.CLAIMED, A.IDLE, "D", 5),
    (S.UNCLAIMED, A.IDLE, T.DRAIN): _row(S.DRAINED, A.RETIRING, "P", 37),
    # Matched
    (S.MATCHED, A.IDLE, T.MATCH_LOST): _row(S.OWNER, A.IDLE, "F", 8),
    (S.MATCHED, A.IDLE, T.CLAIM): _row(S.CLAIMED, A.IDLE, "G", 9),
    # Claimed
    (S.CLAIMED, A.IDLE, T.EVICT_VACATE): _row(S.PREEMPTING, A.VACATING, "H", 10),
    (S.CLAIMED, A.IDLE, T.EVICT_KILL): _row(S.PREEMPTING, A.KILLING, "H", 10),
    (S.CLAIMED, A.IDLE, T.ACTIVATE): _row(S.CLAIMED, A.BUSY, None, 11),
    (S.CLAIMED, A.BUSY, T.STARTER_EXITED): _row(S.CLAIMED, A.IDLE, None, 12),
    (S.CLAIMED, A.BUSY, T.RETIRE): _row(S.CLAIMED, A.RETIRING, None, 13),
    (S.CLAIMED, A.BUSY, T.SUSPEND): _row(S.CLAIMED, A.SUSPENDED, None, 14),
    (S.CLAIMED, A.BUSY, T.EVICT_VACATE): _row(S.PREEMPTING, A.VACATING, "H", None),
    (S.CLAIMED, A.BUSY, T.EVICT_KILL): _row(S.PREEMPTING, A.KILLING, "H", None),
    (S.CLAIMED, A.SUSPENDED, T.CONTINUE): _row(S.CLAIMED, A.BUSY, None, 15),
    (S.CLAIMED, A.SUSPENDED, T.RETIRE): _row(S.CLAIMED, A.RETIRING, None, 16),
    (S.CLAIMED, A.SUSPENDED, T.EVICT_VACATE): _row(S.PREEMPTING, A.VACATING, "H", 17),
    (S.CLAIMED, A.SUSPENDED, T.EVICT_KILL): _row(S.PREEMPTING, A.KILLING, "H", 17),
    (S.CLAIMED, A.SUSPENDED, T.STARTER_EXITED): _row(S.CLAIMED, A.IDLE, None, None),
    (S.CLAIMED, A.RETIRING, T.STARTER_EXITED): _row(S.PREEMPTING, A.VACATING, "H", 18),
    (S.CLAIMED, A.RETIRING, T.EVICT_VACATE): _row(S.PREEMPTING, A.VACATING, "H", 18),
    (S.CLAIMED, A.RETIRING, T.EVICT_KILL): _row(S.PREEMPTING, A.KILLING, "H", 18),
    (S.CLAIMED, A.RETIRING, T.UNRETIRE): _row(S.CLAIMED, A.BUSY, None, 19),
    (S.CLAIMED, A.RETIRING, T.SUSPEND): _row(S.CLAIMED, A.SUSPENDED, None, 20),
    # Preempting
    (S.PREEMPTING, A.VACATING, T.KILL): _row(S.PREEMPTING, A.KILLING, None, 21),
    (S.PREEMPTING, A.VACATING, T.TO_OWNER): _row(S.OWNER, A.IDLE, "J", 22),
    (S.PREEMPTING, A.VACATING, T.TO_NEW_CLAIM): _row(S.CLAIMED, A.IDLE, "I", 23),
    (S.PREEMPTING, A.KILLING, T.TO_NEW_CLAIM): _row(S.CLAIMED, A.IDLE, "I", 24),
    (S.PREEMPTING, A.KILLING, T.TO_OWNER): _row(S.OWNER, A.IDLE, "J", 25),
    # Drained
    (S.DRAINED, A.RETIRING, T.ALL_DRAINED): _row(S.DRAINED, A.IDLE, None, 33),
    (S.DRAINED, A.IDLE, T.DRAIN_OVER): _row(S.OWNER, A.IDLE, "O", 34),
    (S.DRAINED, A.RETIRING, T.DRAIN_OVER): _row(S.OWNER, A.IDLE, "O", 35),
}


def refusal(daemon: str, slot: str, state: State, activity: Activity, trigger: Trigger) -> str:
    """The message of the :class:`~htc.transitions.IllegalTransition` a slot raises when the
    table has no row for ``trigger`` from ``state``/``activity`` (the ``explain`` of
    :func:`htc.transitions.transition`): it names the daemon, the slot, where it is, what it was
    asked and what would have been legal.
    """
    legal = sorted(t.name for t in legal_events(TABLE, (state, activity)))
    return (f"{daemon}: slot {slot} is {state}/{activity} and cannot take '{trigger.value}' "
            f"({trigger.name}); from {state}/{activity} the legal triggers are "
            f"{', '.join(legal) or 'none'}. This is a bug in the startd core or a message sent "
            "to the wrong slot.")


def _label(t: Transition) -> str:
    parts = [p for p in (t.letter, None if t.number is None else str(t.number)) if p]
    return "/".join(parts)


def state_diagram(fmt: str = "mermaid", *, activities: bool = True) -> str:
    """Render the table as a diagram for the docs.

    Args:
        fmt: ``"mermaid"`` (a ``stateDiagram-v2``) or ``"dot"`` (Graphviz).
        activities: draw state/activity pairs (True) or states only, labelled with letters.

    Returns:
        The diagram's source text.

    Raises:
        UsageError: an unknown ``fmt``.
    """
    from htc.errors import UsageError

    def node(state: State, activity: Activity) -> str:
        return f"{state}_{activity}" if activities else str(state)

    edges: dict[tuple[str, str], list[str]] = {}
    for (state, activity, trigger), t in TABLE.items():
        src, dst = node(state, activity), node(t.state, t.activity)
        if not activities and (src == dst or t.letter is None):
            continue
        label = _label(t) if activities else t.letter
        text = " ".join(p for p in (label, trigger.name.lower()) if p) if activities else label
        edges.setdefault((src, dst), [])
        if text not in edges[(src, dst)]:
            edges[(src, dst)].append(text)
    start = node(S.OWNER, A.IDLE)
    if fmt == "mermaid":
        lines = ["stateDiagram-v2", f"    [*] --> {start}"]
        for (src, dst), labels in edges.items():
            lines.append(f"    {src} --> {dst}: {', '.join(labels)}")
        return "\n".join(lines) + "\n"
    if fmt == "dot":
        lines = ["digraph startd {", "    rankdir=LR;", '    start [shape=point];', f'    start -> "{start}";']
        for (src, dst), labels in edges.items():
            lines.append(f'    "{src}" -> "{dst}" [label="{", ".join(labels)}"];')
        lines.append("}")
        return "\n".join(lines) + "\n"
    raise UsageError(f"state_diagram: unknown format {fmt!r}; use 'mermaid' or 'dot'")

"""The ready queue (which node is submitted next) and the throttles that hold submissions back.

Order (HTCondor's ``DagPriorityQ``): higher PRIORITY first; among equal priorities, nodes put
at the head (a retried node with DAGMAN_RETRY_NODE_FIRST, newly ready nodes with
DAGMAN_SUBMIT_DEPTH_FIRST, a failed submission with DAGMAN_RETRY_SUBMIT_FIRST) come first, most
recent first; then the others first come, first served. The nodes ready at the start are
queued in DAG-file order.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass


class ReadyQueue:
    """Nodes ready to submit, ordered as the module docstring says."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int, str]] = []
        self._members: dict[str, tuple[int, int, int, str]] = {}
        self._generation = 0

    def push(self, name: str, priority: int, *, head: bool = False) -> None:
        """Queue ``name`` with ``priority`` (``head``: before the others of that priority)."""
        self._generation += 1
        if head:
            key = (-priority, 0, -self._generation, name)
        else:
            key = (-priority, 1, self._generation, name)
        self._members[name] = key
        heapq.heappush(self._heap, key)

    def remove(self, name: str) -> None:
        """Take ``name`` out of the queue (if it is in it)."""
        self._members.pop(name, None)

    def pop(self) -> tuple[int, int, int, str] | None:
        """Take the first node out of the queue: its key (the name is ``key[3]``), or None."""
        while self._heap:
            key = heapq.heappop(self._heap)
            if self._members.get(key[3]) == key:
                del self._members[key[3]]
                return key
        return None

    def restore(self, key: tuple[int, int, int, str]) -> None:
        """Put a popped node back with the key it had."""
        self._members[key[3]] = key
        heapq.heappush(self._heap, key)

    def ordered(self) -> list[str]:
        """The queued names, first to submit first."""
        return [key[3] for key in sorted(self._members.values())]

    def __contains__(self, name: object) -> bool:
        return name in self._members

    def __len__(self) -> int:
        return len(self._members)


#: held at max_idle, submissions resume with this part of the limit free (see Throttles.may_submit)
IDLE_REFILL_PARTS = 20


@dataclass
class Throttles:
    """Limits on what runs at once (0: no limit), as the DAGMAN_* knobs and -max* flags say."""

    max_jobs: int = 0
    max_idle: int = 0
    max_pre: int = 0
    max_post: int = 0
    max_hold: int = 0

    def may_submit(self, submitted_nodes: int, idle_procs: int, refilling: bool = False) -> str | None:
        """None if one more node may be submitted, else why not (for dagman.out).

        ``refilling``: submissions wait for the max_idle limit already (the last answer was that
        it is reached, not long ago: the engine bounds it); they go on once :meth:`idle_refill`
        procs of room are free, so that a DAG held at the limit submits its nodes in batches of
        that many as jobs start, rather than one per job start (a Submit, a commit and an fsync
        in the schedd each). The limit itself is never passed: only when a held-back node goes
        is later, as DAGMan's own submissions wait for its next log scan.
        """
        if self.max_jobs and submitted_nodes >= self.max_jobs:
            return f"max_jobs ({self.max_jobs}) limit reached"
        if self.max_idle and idle_procs > self.max_idle - (self.idle_refill() if refilling else 1):
            return f"max_idle ({self.max_idle}) limit reached"
        return None

    def idle_refill(self) -> int:
        """Free idle room (procs) that resumes submissions held at max_idle: a twentieth of the
        limit (50 of the default 1,000, DAGMAN_SUBMIT_BATCH_SIZE's default), at least 1."""
        return max(1, self.max_idle // IDLE_REFILL_PARTS)

    def may_run_script(self, kind: str, running: int) -> bool:
        """True if one more ``kind`` script may start while ``running`` of them run."""
        limit = {"PRE": self.max_pre, "POST": self.max_post, "HOLD": self.max_hold}[kind]
        return not limit or running < limit


def category_full(maxjobs: dict[str, int], category: str | None, running: dict[str, int]) -> bool:
    """True if ``category`` (MAXJOBS) already has its most nodes submitted."""
    if not category or category not in maxjobs:
        return False
    return running.get(category, 0) >= maxjobs[category]

"""One run of a DAG: the node states, driven by events, answering with actions (sans-IO)."""

from __future__ import annotations

from htc.dag.engine.events import Action
from htc.dag.engine.options import Options
from htc.dag.engine.states import NodeStatus
from htc.dag.model import Dag


class DagRun:
    """The state of one DAG run. ``handle(event, now)`` returns the actions to perform."""

    def __init__(self, dag: Dag, options: Options | None = None):
        self.dag = dag
        self.options = options or Options()
        self._status = {name: NodeStatus.NOT_READY for name in dag.nodes}

    def handle(self, event: object, now: float) -> list[Action]:
        """Apply ``event`` (see :mod:`htc.dag.engine.events`) at time ``now``; return actions."""
        return []

    def next_deadline(self) -> float | None:
        """When to call ``handle(Tick(), now)`` next (DEFERred scripts, status file), or None."""
        return None

    def node_status(self, name: str) -> NodeStatus:
        """The state of node ``name``."""
        return self._status[name]

    def counts(self) -> dict[str, int]:
        """How many nodes are in each state: done, failed, queued, ready, ... and total."""
        return {}

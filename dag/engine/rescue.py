"""Rescue DAGs: their text (format 2.1.0), their names, the newest one, and applying one.

A rescue DAG is a *partial* DAG file applied on top of the original: ``DONE`` for each node
that succeeded (never the FINAL node; a failed node whose children are all WEAK too), and --
only when DAGMAN_RESET_RETRIES_UPON_RESCUE is False -- ``RETRY`` lines with the retries left
(HTCondor's ``Dag::WriteRescue``). It is named ``<dag file>.rescueNNN`` (``%03d``), numbered
after the newest existing one, up to DAGMAN_MAX_RESCUE_NUM (at the maximum, the last one is
overwritten). No file access here: the manager lists and reads the files.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from htc.dag.engine.states import NodeStatus
from htc.dag.model import Dag, NodeKind
from htc.errors import UsageError

RESCUE_DAG_VERSION = "2.1.0"

__all__ = ["RESCUE_DAG_VERSION", "RescueError", "apply_rescue", "newest_rescue", "rescue_name",
           "rescue_text"]


class RescueError(UsageError):
    """A rescue DAG file says something that does not fit the DAG it rescues."""


def rescue_name(dag_file: str, number: int) -> str:
    """``<dag_file>.rescueNNN``."""
    return f"{dag_file}.rescue{number:03d}"


def newest_rescue(dag_file: str, existing: list[str], max_num: int = 100) -> tuple[int, str] | None:
    """The highest-numbered rescue DAG of ``dag_file`` among ``existing`` file names.

    Args:
        dag_file: the primary DAG file, as the rescue names start with it.
        existing: names of files that exist (full paths or names, as ``dag_file`` is written).
        max_num: DAGMAN_MAX_RESCUE_NUM; higher numbers are ignored.

    Returns:
        ``(number, name)``, or None if there is none.
    """
    pattern = re.compile(re.escape(dag_file) + r"\.rescue(\d{3})$")
    best: tuple[int, str] | None = None
    for name in existing:
        m = pattern.fullmatch(name)
        if m and 0 < int(m.group(1)) <= max_num and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), name)
    return best


def rescue_text(dag: Dag, statuses: dict[str, NodeStatus], retries: dict[str, int], now: float,
                *, reset_retries: bool = True, header: str | None = None) -> str:
    """The rescue DAG of ``dag`` given each node's status and retries done so far.

    ``statuses`` has the nodes DAGMan counts (not SERVICE nodes), ``now`` is the time it is
    written (the ``# Created`` line), ``header`` replaces the two first lines (save points).
    """
    when = datetime.fromtimestamp(now, timezone.utc)
    lines = [header if header is not None else
             f"# Rescue DAG file, created after running\n#   the {dag.file} DAG file\n"]
    lines.append(f"# Created {when.month}/{when.day}/{when.year} "
                 f"{when.hour:02d}:{when.minute:02d}:{when.second:02d} UTC\n")
    failed = [n for n in dag.nodes if statuses.get(n) is NodeStatus.ERROR]
    done = sum(1 for n in dag.nodes if statuses.get(n) is NodeStatus.DONE)
    lines.append(f"# Rescue DAG version: {RESCUE_DAG_VERSION}\n#\n")
    lines.append(f"# Total number of Nodes: {len(statuses)}\n")
    lines.append(f"# Nodes premarked DONE: {done}\n")
    lines.append(f"# Nodes that failed: {len(failed)}\n")
    lines.append("#   " + "".join(f"{n}," for n in failed) + "<ENDLIST>\n\n")
    for name, node in dag.nodes.items():
        if name not in statuses:
            continue
        status = statuses[name]
        if node.kind is not NodeKind.FINAL:
            if status is NodeStatus.DONE:
                lines.append(f"DONE {name}\n")
            elif status is NodeStatus.ERROR and _all_children_weak(dag, name):
                lines.append("# Failed node with only weak child dependencies:\n")
                lines.append(f"DONE {name}\n")
        if node.retry > 0 and not reset_retries:
            done_retries = retries.get(name, 0)
            lines.append(f"# {done_retries} of {node.retry} retries already performed; "
                         f"{node.retry - done_retries} remaining\n")
            unless = (f" UNLESS-EXIT {node.retry_unless_exit}"
                      if node.retry_unless_exit is not None else "")
            lines.append(f"RETRY {name} {node.retry - done_retries}{unless}\n")
    return "".join(lines)


def _all_children_weak(dag: Dag, name: str) -> bool:
    children = dag.children(name)
    return bool(children) and all(dag.is_weak(name, c) for c in children)


def apply_rescue(dag: Dag, text: str, file: str = "<rescue DAG>") -> list[str]:
    """Apply a rescue DAG's ``DONE`` and ``RETRY`` lines to ``dag``; return the DONE nodes.

    Raises:
        RescueError: a line names a node the DAG does not have, or is not a rescue command
            (the message names the file and line).
    """
    done: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("//"):
            continue
        words = line.split()
        command = words[0].upper().replace("-", "_")
        where = f"{file}:{number}"
        if command not in ("DONE", "RETRY") or len(words) < 2:
            raise RescueError(f"{where}: {line!r} is not a rescue DAG line (DONE node or "
                              "RETRY node N [UNLESS-EXIT code]); was the file edited by hand?")
        name = words[1]
        if name not in dag.nodes:
            raise RescueError(f"{where}: the rescue DAG names node {name!r}, which the DAG "
                              f"{dag.file or '(unsaved)'} does not have; run without the rescue "
                              "DAG (htc dag submit -force) or fix the file")
        node = dag.nodes[name]
        if command == "DONE":
            node.done = True
            done.append(name)
            continue
        try:
            node.retry = int(words[2])
            if len(words) >= 5 and words[3].upper().replace("_", "-") == "UNLESS-EXIT":
                node.retry_unless_exit = int(words[4])
        except (IndexError, ValueError):
            raise RescueError(f"{where}: RETRY needs a number of retries: {line!r}") from None
    return done

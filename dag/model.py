"""The parsed DAG: nodes with their settings, and the dependency graph on networkx.

This is the one data model of htc's DAGMan. The parser (:mod:`htc.dag.parser`) builds it from
DAG files, the Python API (:mod:`htc.dag.api`) builds it from code, the writer
(:mod:`htc.dag.writer`) turns it back into a DAG file, and the engine (:mod:`htc.dag.engine`)
runs it. It holds what the files *say*, resolved (splices inlined with their names prefixed,
INCLUDEs read, ALL_NODES applied, paths made absolute), and nothing about a run.

The graph is a :class:`networkx.DiGraph` whose nodes are node names (every node of the DAG is in
it, FINAL and SERVICE nodes too, without edges) and whose edges go parent -> child, with the
edge attribute ``weak`` (True for a ``WEAK PARENT ... CHILD`` edge: the child needs the parent
only finished, not successful); an edge the parser read also has ``source``, the
:class:`Source` of its first PARENT/CHILD (or CONNECT) line, for messages.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import networkx as nx

__all__ = ["Dag", "DotSpec", "Node", "NodeKind", "NodeStatusSpec", "Script", "Source", "Var"]


class NodeKind(enum.Enum):
    """What a node is, by the command that defined it."""

    JOB = "JOB"
    FINAL = "FINAL"
    SERVICE = "SERVICE"
    SUBDAG = "SUBDAG"              # SUBDAG EXTERNAL: the node's job is a nested DAG manager
    PROVISIONER = "PROVISIONER"


@dataclass(frozen=True)
class Source:
    """Where something was written: a file and a 1-based line (for messages and rescue DAGs)."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Script:
    """``SCRIPT [DEFER status time] [DEBUG file STDOUT|STDERR|ALL] PRE|POST|HOLD node exe args``.

    ``args`` are the words after the executable, unexpanded (``$JOB``, ``$RETURN`` ... are
    replaced by the engine when the script runs).
    """

    kind: str                      # "PRE", "POST" or "HOLD"
    executable: str
    args: list[str] = field(default_factory=list)
    defer_status: int | None = None
    defer_time: int = 0
    debug_file: str | None = None
    debug_stream: str | None = None  # "STDOUT", "STDERR" or "ALL"
    source: Source | None = None


@dataclass
class Var:
    """One ``VARS`` pair: ``name="value"``; ``prepend`` puts it before the submit file's text.

    ``prepend`` and ``append`` record an explicit ``VARS node PREPEND|APPEND``; with neither,
    ``DAGMAN_DEFAULT_APPEND_VARS`` decides (False: prepended), as in DAGMan.
    """

    name: str
    value: str
    prepend: bool = False
    append: bool = False


@dataclass
class Node:
    """One node of the DAG and everything the file says about it."""

    name: str                      # full name, splice prefixes included ("outer+inner+A")
    kind: NodeKind = NodeKind.JOB
    #: the submit file (absolute path) or, for SUBDAG EXTERNAL, the nested DAG file
    submit_file: str | None = None
    #: an inline submit description (``JOB A { ... }`` or a SUBMIT-DESCRIPTION's text)
    submit_text: str | None = None
    #: the SUBMIT-DESCRIPTION name the node refers to, if any (kept for writing the file back)
    description_name: str | None = None
    #: the node's directory, absolute (``DIR``, else the directory of the DAG file it came from)
    dir: str = ""
    noop: bool = False
    done: bool = False
    scripts: dict[str, Script] = field(default_factory=dict)   # by kind: "PRE", "POST", "HOLD"
    pre_skip: int | None = None
    retry: int = 0
    retry_unless_exit: int | None = None
    abort_status: int | None = None
    abort_return: int | None = None
    vars: list[Var] = field(default_factory=list)
    priority: int = 0
    category: str | None = None    # full name (splice-scoped unless it starts with "+")
    save_point: str | None = None  # SAVE_POINT_FILE (absolute path)
    #: TOLERANCE: job failures a multi-job node tolerates, as written ("3" or "10%")
    tolerance: str | None = None
    tolerance_mode: str | None = None  # "FAIL-FAST" or "WAIT" if given
    #: the DAG file that defined the node (for $(DAG_FILE)-like naming and messages)
    dag_file: str = ""
    source: Source | None = None


@dataclass
class DotSpec:
    """``DOT file [UPDATE|DONT-UPDATE] [OVERWRITE|DONT-OVERWRITE] [INCLUDE header]``."""

    file: str
    update: bool = False
    overwrite: bool = True
    include: str | None = None


@dataclass
class NodeStatusSpec:
    """``NODE_STATUS_FILE file [min-update-seconds] [ALWAYS-UPDATE]``."""

    file: str
    min_update: int = 60
    always_update: bool = False


@dataclass
class Dag:
    """A whole DAG: its nodes in file order, the graph, and the DAG-wide commands."""

    #: the primary DAG file (absolute path); "" for a DAG built in Python and not yet written
    file: str = ""
    nodes: dict[str, Node] = field(default_factory=dict)
    graph: nx.DiGraph = field(default_factory=nx.DiGraph)
    #: MAXJOBS: category (full name) -> most nodes of it submitted at once
    maxjobs: dict[str, int] = field(default_factory=dict)
    config: str | None = None          # CONFIG file (absolute)
    set_job_attrs: dict[str, str] = field(default_factory=dict)   # SET_JOB_ATTR, last wins
    env_get: list[str] = field(default_factory=list)               # ENV GET
    env_set: list[tuple[str, str]] = field(default_factory=list)   # ENV SET
    dot: DotSpec | None = None
    node_status: NodeStatusSpec | None = None
    jobstate_log: str | None = None
    #: REJECT was given (where); such a DAG must not run
    reject: Source | None = None
    #: SUBMIT-DESCRIPTION blocks by name (their text); nodes using one have ``description_name``
    submit_descriptions: dict[str, str] = field(default_factory=dict)
    #: what the parser noticed but DAGMan accepts (a setting given twice ...), "file:line text"
    warnings: list[str] = field(default_factory=list)

    # --- building ---------------------------------------------------------------------
    def add_node(self, node: Node) -> Node:
        """Add ``node`` (its name must be new) and return it."""
        if node.name in self.nodes:
            raise ValueError(f"node {node.name!r} is defined twice")
        self.nodes[node.name] = node
        self.graph.add_node(node.name)
        return node

    def add_edge(self, parent: str, child: str, *, weak: bool = False) -> None:
        """``PARENT parent CHILD child``; a strong edge wins over a weak one for the same pair."""
        if self.graph.has_edge(parent, child):
            weak = weak and self.graph.edges[parent, child]["weak"]
        self.graph.add_edge(parent, child, weak=weak)

    # --- reading ----------------------------------------------------------------------
    def parents(self, name: str) -> list[str]:
        """The node's parents, in the order their edges were added."""
        return list(self.graph.predecessors(name))

    def children(self, name: str) -> list[str]:
        """The node's children, in the order their edges were added."""
        return list(self.graph.successors(name))

    def is_weak(self, parent: str, child: str) -> bool:
        """True if ``child`` needs ``parent`` only finished (a WEAK edge)."""
        return bool(self.graph.edges[parent, child].get("weak", False))

    @property
    def final(self) -> Node | None:
        """The FINAL node, if the DAG has one."""
        return next((n for n in self.nodes.values() if n.kind is NodeKind.FINAL), None)

    def of_kind(self, *kinds: NodeKind) -> list[Node]:
        """The nodes of these kinds, in file order."""
        return [n for n in self.nodes.values() if n.kind in kinds]

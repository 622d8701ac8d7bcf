"""Checks of a whole DAG model, after parsing or before writing/running a DAG built in Python.

The parser refuses what it can see on one line (unknown commands and nodes, bad numbers); these
are the checks that need the whole DAG, as DAGMan makes them before it submits anything:

* every edge joins two defined nodes (a DAG built in Python may name one that is not there);
* no FINAL, SERVICE or PROVISIONER node is a parent or a child (DAGMan orders them itself);
* at most one FINAL and one PROVISIONER node;
* node names are words DAGMan can read back: no spaces or quotes, not ``PARENT``, ``CHILD`` or
  ``ALL_NODES``; ``+`` only between the parts of a spliced name (``outer+inner+A``);
* each node has a submit file or an inline submit description;
* no cycle: the message lists the cycle's nodes in order (:func:`networkx.find_cycle`).
"""

from __future__ import annotations

import re

import networkx as nx

from htc.dag.errors import DagError
from htc.dag.model import Dag, NodeKind

__all__ = ["RESERVED_NAMES", "validate_dag"]

#: names no node or splice may have, in any case (DAGMan's ``DAG::RESERVED``)
RESERVED_NAMES = frozenset({"PARENT", "CHILD", "ALL_NODES"})

_BAD_CHARS = re.compile(r"[\s\"']")
_ORDERED_BY_DAGMAN = frozenset({NodeKind.FINAL, NodeKind.SERVICE, NodeKind.PROVISIONER})


def _where(dag: Dag, name: str) -> dict:
    node = dag.nodes.get(name)
    src = node.source if node is not None else None
    if src is not None:
        return {"file": src.file, "line": src.line}
    return {"file": dag.file} if dag.file else {}


def validate_dag(dag: Dag) -> None:
    """Check ``dag`` as a whole; return quietly if DAGMan would accept it.

    Raises:
        DagError: what is wrong, naming the nodes (and the file and line that defined one);
            fix the DAG file (or the code that built the DAG) and try again.
    """
    unknown = [n for n in dag.graph.nodes if n not in dag.nodes]
    if unknown:
        raise DagError(f"edges name node(s) the DAG does not define: {', '.join(map(str, unknown))}"
                       "; define them (JOB ...) or remove the edges",
                       **({"file": dag.file} if dag.file else {}))
    counts: dict[NodeKind, list[str]] = {}
    for name, node in dag.nodes.items():
        _check_name(dag, name)
        if node.kind in _ORDERED_BY_DAGMAN:
            counts.setdefault(node.kind, []).append(name)
            if dag.graph.in_degree(name) or dag.graph.out_degree(name):
                raise DagError(f"{node.kind.value} node '{name}' cannot be a parent or a child "
                               "(DAGMan runs it at its own time); remove its PARENT/CHILD edges",
                               **_where(dag, name))
        if node.submit_file is None and node.submit_text is None:
            raise DagError(f"node '{name}' has neither a submit file nor a submit description",
                           **_where(dag, name))
    for kind in (NodeKind.FINAL, NodeKind.PROVISIONER):
        if len(counts.get(kind, ())) > 1:
            names = counts[kind]
            raise DagError(f"a DAG has at most one {kind.value} node, and this one has "
                           f"{len(names)}: {', '.join(names)}", **_where(dag, names[1]))
    if not nx.is_directed_acyclic_graph(dag.graph):
        cycle = nx.find_cycle(dag.graph)
        path = " -> ".join([cycle[0][0], *(child for _parent, child in cycle)])
        lines = [str(dag.graph.edges[e]["source"]) for e in cycle
                 if dag.graph.edges[e].get("source") is not None]
        said = f" (PARENT/CHILD lines {', '.join(lines)})" if lines else ""
        raise DagError(f"the DAG has a cycle: {path}{said}; remove one of these edges",
                       **_where(dag, cycle[0][0]))


def _check_name(dag: Dag, name: str) -> None:
    parts = name.split("+")
    if not name or _BAD_CHARS.search(name) or not all(parts):
        raise DagError(f"node name {name!r} cannot be written in a DAG file: names are one word "
                       "without quotes, and '+' only joins splice names to node names",
                       **_where(dag, name))
    if parts[-1].upper() in RESERVED_NAMES:
        raise DagError(f"node name '{name}' is a reserved word (PARENT, CHILD and ALL_NODES "
                       "cannot name nodes)", **_where(dag, name))

"""``htc dag show``: a DAG's graph as DOT text or a picture, its nodes coloured by state.

Theory of operation
-------------------
The graph comes from the parsed model (:class:`htc.dag.model.Dag`); the nodes' states come from
what a run leaves beside the DAG file (:mod:`htc.dag.states`), so the command works on a DAG that
never ran (every node NOT_READY, or DONE where the file says so), one that is running and one
that ended.

Rendering:

* ``.dot`` (or no ``-o``): DOT text, written here (no graphviz needed).
* ``.png``, ``.svg``, ``.pdf``: the ``dot`` program of graphviz if it is on ``PATH`` (the best
  layout); else matplotlib (the optional extra ``htc[dag-plot]``), drawing the graph in
  generations (parents above children) with networkx's multipartite layout.

:func:`register_show` adds the subcommand to the ``htc dag`` parser that :mod:`htc.dag.cli`
builds.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from htc.errors import UsageError

if TYPE_CHECKING:
    from htc.dag.model import Dag

# (networkx, the model and the event log are imported where used: every `htc` command registers
# `htc dag show`, and must not pay for them)

__all__ = ["COLOURS", "STATE_NAMES", "dot_text", "node_states", "register_show", "render", "show"]

#: DAGMan's node states, by their number in the node status file (``NodeStatus``)
STATE_NAMES = ("NOT_READY", "READY", "PRERUN", "SUBMITTED", "POSTRUN", "DONE", "ERROR", "FUTILE")
#: fill colour of each node state (DAGMan's state names)
COLOURS = {
    "NOT_READY": "white", "READY": "lightblue", "PRERUN": "khaki", "SUBMITTED": "gold",
    "POSTRUN": "khaki", "DONE": "palegreen", "ERROR": "salmon", "FUTILE": "lightgrey",
}
_SHAPES = {"JOB": "ellipse", "FINAL": "doubleoctagon", "SERVICE": "diamond", "SUBDAG": "box3d",
           "PROVISIONER": "house"}
_PICTURES = (".png", ".svg", ".pdf")


# --- the nodes' states, from the files a run leaves beside the DAG ------------------------------

_BLOCK = re.compile(r"\[(.*?)\]", re.S)
_NOTE = re.compile(r"DAG Node:\s*(\S+)")


def _attr(block: str, name: str) -> str | None:
    match = re.search(rf"(?im)^\s*{name}\s*=\s*(.*?);?\s*(?:/\*.*)?$", block)
    return match.group(1).strip().strip('"') if match else None


def states_from_status_file(path: str | os.PathLike) -> dict[str, str]:
    """Node name -> state from a node status file (``NODE_STATUS_FILE``: ClassAds, one per node,
    ``Type = "NodeStatus"``, ``Node``, ``NodeStatus`` 0..7)."""
    states = {}
    for block in _BLOCK.findall(Path(path).read_text(errors="replace")):
        if _attr(block, "Type") != "NodeStatus":
            continue
        name, number = _attr(block, "Node"), _attr(block, "NodeStatus")
        if name and number and number.isdigit() and int(number) < len(STATE_NAMES):
            states[name] = STATE_NAMES[int(number)]
    return states


def newest_rescue(dag_file: str) -> str | None:
    """The highest-numbered rescue DAG of ``dag_file`` (``file.dag.rescueNNN``), if any."""
    found = [f for f in glob.glob(glob.escape(dag_file) + ".rescue[0-9][0-9][0-9]")]
    return max(found) if found else None


def states_from_rescue(path: str | os.PathLike) -> dict[str, str]:
    """DONE for the rescue DAG's ``DONE`` lines, ERROR for the nodes its header says failed."""
    states = {}
    lines = Path(path).read_text(errors="replace").splitlines()
    for i, line in enumerate(lines):
        words = line.split()
        if len(words) == 2 and words[0].upper() == "DONE":
            states[words[1]] = "DONE"
        elif line.startswith("# Nodes that failed:") and i + 1 < len(lines):
            for name in lines[i + 1].lstrip("#").strip().split(","):
                if name and name != "<ENDLIST>" and not name.startswith("..."):
                    states.setdefault(name.strip(), "ERROR")
    return states


def states_from_nodes_log(dag: Dag, path: str | os.PathLike) -> dict[str, str]:
    """Node name -> state from the nodes log: its submit events name the node (``DAG Node: X``);
    a job's end makes the node DONE or ERROR, or POSTRUN when the node has a POST script (whose
    own event, 016, then decides)."""
    from htc.eventlog import (
        ClusterSubmitEvent, JobAbortedEvent, JobTerminatedEvent, PostScriptTerminatedEvent, PreSkipEvent, SubmitEvent,
        read_events,
    )

    states: dict[str, str] = {}
    by_cluster: dict[int, str] = {}
    procs: dict[int, list[int]] = {}  # cluster -> [submitted, ended, failed]
    for event in read_events(path):
        if isinstance(event, (SubmitEvent, ClusterSubmitEvent)):
            match = _NOTE.search(event.log_notes or "")
            if match:
                by_cluster[event.cluster] = match.group(1)
                states[match.group(1)] = "SUBMITTED"
                procs.setdefault(event.cluster, [0, 0, 0])[0] += 1
        elif isinstance(event, (JobTerminatedEvent, JobAbortedEvent)) and event.cluster in by_cluster:
            count = procs[event.cluster]
            count[1] += 1
            if not (isinstance(event, JobTerminatedEvent) and event.terminated_normally and event.return_value == 0):
                count[2] += 1
            if count[1] >= count[0]:
                name = by_cluster[event.cluster]
                node = dag.nodes.get(name)
                has_post = node is not None and "POST" in node.scripts
                states[name] = "POSTRUN" if has_post else ("ERROR" if count[2] else "DONE")
        elif isinstance(event, PostScriptTerminatedEvent):
            name = event.dag_node_name or by_cluster.get(event.cluster)
            if name:
                states[name] = "DONE" if event.terminated_normally and event.return_value == 0 else "ERROR"
        elif isinstance(event, PreSkipEvent) and event.dag_node_name:
            states[event.dag_node_name] = "DONE"
    return states


def _finished(dag_file: str) -> bool:
    try:
        with open(dag_file + ".dagman.out", "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            return b"EXITING WITH STATUS" in f.read()
    except OSError:
        return False


def _noop_nodes_done(dag: Dag, states: dict[str, str], finished: bool) -> None:
    """NOOP nodes run no job, so the nodes log never names them: the manager finishes one as soon
    as it is ready, so a NOOP node of a run whose parents are done is done (a FINAL one once the
    run has finished)."""
    import networkx as nx

    for name in nx.topological_sort(dag.graph):
        node = dag.nodes[name]
        if not node.noop or states[name] != "NOT_READY":
            continue
        if node.kind.value == "FINAL":
            if finished:
                states[name] = "DONE"
            continue
        if all(states[p] == "DONE" or (dag.is_weak(p, name) and states[p] == "ERROR") for p in dag.parents(name)):
            states[name] = "DONE"


def node_states(dag: Dag) -> dict[str, str]:
    """Every node's state (DAGMan's names, :data:`STATE_NAMES`) as the files beside the DAG say.

    The node status file (``NODE_STATUS_FILE``), when the DAG names one and it exists, is the
    manager's own word and wins. Otherwise: NOT_READY (DONE for ``DONE`` nodes), then the newest
    rescue DAG, then the nodes log (``FILE.dag.nodes.log``) replayed from its start (NOOP nodes,
    which it never names, are done once their parents are); once the DAG manager has exited (``FILE.dag.dagman.out`` ends with its EXITING line) the nodes that
    never ran below a failed node are FUTILE.
    """
    states = {name: "DONE" if node.done else "NOT_READY" for name, node in dag.nodes.items()}
    if not dag.file:
        return states
    if dag.node_status and os.path.isfile(dag.node_status.file):
        states.update(states_from_status_file(dag.node_status.file))
        return states
    rescue = newest_rescue(dag.file)
    if rescue:
        states.update((k, v) for k, v in states_from_rescue(rescue).items() if k in states)
    log = dag.file + ".nodes.log"
    if os.path.isfile(log):
        states.update((k, v) for k, v in states_from_nodes_log(dag, log).items() if k in states)
    finished = _finished(dag.file)
    if os.path.isfile(log):
        _noop_nodes_done(dag, states, finished)
    if finished:
        import networkx as nx

        for name in [n for n, s in states.items() if s == "ERROR"]:
            for below in nx.descendants(dag.graph, name):
                if states[below] == "NOT_READY":
                    states[below] = "FUTILE"
    return states


# --- drawing ------------------------------------------------------------------------------------


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot_text(dag: Dag, states: dict[str, str] | None = None, *, name: str | None = None) -> str:
    """The DAG as a DOT digraph: one node per DAG node (filled with its state's colour, the state
    under the name), one edge per dependency (dashed for WEAK edges).

    Args:
        dag: the parsed DAG.
        states: node name -> state name (``DONE``, ``ERROR``...); nodes not in it are drawn
            without a state.
        name: the graph's name (default: the DAG file's name).
    """
    states = states or {}
    title = name or (os.path.basename(dag.file) if dag.file else "DAG")
    lines = [f"digraph {_quote(title)} {{", "  rankdir=TB;", '  node [style=filled, fillcolor=white];']
    for node in dag.nodes.values():
        attrs = {"shape": _SHAPES.get(node.kind.value, "ellipse")}
        state = states.get(node.name)
        label = _quote(node.name)[1:-1]  # escaped; the "\\n" line breaks below stay DOT escapes
        if node.kind.value != "JOB":
            label += f"\\n({node.kind.value})"
        if state:
            attrs["fillcolor"] = COLOURS.get(state, "white")
            label += f"\\n{state}"
        if node.noop:
            attrs["style"] = "filled,dashed"
        body = ", ".join([f'label="{label}"', *(f"{k}={_quote(v)}" for k, v in attrs.items())])
        lines.append(f"  {_quote(node.name)} [{body}];")
    for parent, child, data in dag.graph.edges(data=True):
        style = " [style=dashed]" if data.get("weak") else ""
        lines.append(f"  {_quote(parent)} -> {_quote(child)}{style};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _draw_with_matplotlib(dag: Dag, states: dict[str, str], out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(f"cannot draw {out}: neither graphviz's 'dot' program nor matplotlib is installed; "
                         "install graphviz (apt-get install graphviz) or pip install 'htc[dag-plot]', "
                         "or write DOT text with -o FILE.dot") from None
    import networkx as nx

    graph = nx.DiGraph(dag.graph)
    for layer, names in enumerate(nx.topological_generations(graph)):
        for n in names:
            graph.nodes[n]["layer"] = -layer  # networkx draws the first layer on the left: turn it on its side
    pos = nx.multipartite_layout(graph, subset_key="layer", align="horizontal") if graph else {}
    width = max(4.0, min(40.0, 1.2 * max((len(g) for g in nx.topological_generations(graph)), default=1)))
    height = max(3.0, min(40.0, 1.0 * sum(1 for _ in nx.topological_generations(graph))))
    fig, ax = plt.subplots(figsize=(width, height))
    colours = [COLOURS.get(states.get(n, ""), "white") for n in graph.nodes]
    strong = [(u, v) for u, v, d in graph.edges(data=True) if not d.get("weak")]
    weak = [(u, v) for u, v, d in graph.edges(data=True) if d.get("weak")]
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_color=colours, edgecolors="black", node_size=900)
    nx.draw_networkx_labels(graph, pos, ax=ax, font_size=8)
    nx.draw_networkx_edges(graph, pos, ax=ax, edgelist=strong, arrows=True, node_size=900)
    nx.draw_networkx_edges(graph, pos, ax=ax, edgelist=weak, arrows=True, style="dashed", node_size=900)
    ax.set_title(os.path.basename(dag.file) if dag.file else "DAG")
    ax.set_axis_off()
    fig.savefig(out, format=out.suffix[1:], bbox_inches="tight")
    plt.close(fig)


def render(dag: Dag, out: str | os.PathLike, states: dict[str, str] | None = None, *,
           dot_program: str | None = None) -> str:
    """Write the DAG's picture or DOT text to ``out`` and say how it was made.

    Args:
        dag: the parsed DAG.
        out: ``.dot`` (DOT text), or ``.png`` / ``.svg`` / ``.pdf`` (a picture).
        states: node name -> state, for the colours.
        dot_program: the ``dot`` program to use (default: the one on ``PATH``, if any).

    Returns:
        ``"dot"`` (DOT text), ``"graphviz"`` or ``"matplotlib"``: what drew it.

    Raises:
        UsageError: an unknown file type, or no way to draw a picture (the message says what to
            install).
    """
    out = Path(out)
    states = states or {}
    suffix = out.suffix.lower()
    if suffix in (".dot", ".gv"):
        out.write_text(dot_text(dag, states))
        return "dot"
    if suffix not in _PICTURES:
        raise UsageError(f"cannot write {out}: give a file ending in .dot, {', '.join(_PICTURES)}")
    program = dot_program or shutil.which("dot")
    if program:
        proc = subprocess.run([program, f"-T{suffix[1:]}", "-o", str(out)], input=dot_text(dag, states),
                              text=True, capture_output=True, timeout=300)
        if proc.returncode != 0:
            raise UsageError(f"graphviz's {program} could not draw {out} (exit {proc.returncode}): "
                             f"{proc.stderr.strip()}; write DOT text with -o FILE.dot instead")
        return "graphviz"
    _draw_with_matplotlib(dag, states, out)
    return "matplotlib"


def show(args: argparse.Namespace) -> int:
    """``htc dag show FILE.dag [-o OUT]``: print or write the DAG's graph with its nodes' states."""
    from htc.dag.parser import parse_dag

    dag = parse_dag(args.dag_file)
    states = {} if args.no_states else node_states(dag)
    if not args.output:
        sys.stdout.write(dot_text(dag, states))
        return 0
    how = render(dag, args.output, states)
    counts: dict[str, int] = {}
    for state in states.values():
        counts[state] = counts.get(state, 0) + 1
    summary = ", ".join(f"{counts[s]} {s}" for s in STATE_NAMES if s in counts)
    print(f"{args.output}: {len(dag.nodes)} nodes, {dag.graph.number_of_edges()} edges"
          f"{' (' + summary + ')' if summary else ''}, drawn with {how}")
    return 0


def register_show(subparsers) -> argparse.ArgumentParser:
    """Add ``show`` to the ``htc dag`` subcommands (``subparsers`` from ``add_subparsers``)."""
    p = subparsers.add_parser(
        "show", help="draw a DAG's graph with its nodes' states (DOT text, or PNG/SVG/PDF)",
        description="Print the DAG as DOT text, or draw it to a file; nodes are coloured by their state "
                    "from the node status file, the nodes log and the rescue DAG beside the DAG file.",
        epilog="examples:\n  htc dag show diamond.dag > diamond.dot\n  htc dag show diamond.dag -o diamond.png",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dag_file", metavar="FILE.dag", help="the DAG file")
    p.add_argument("-o", "--output", metavar="OUT", help="write OUT (.dot, .png, .svg or .pdf) instead of printing DOT")
    p.add_argument("--no-states", action="store_true", help="draw the graph alone, without node states")
    p.set_defaults(func=show)
    return p

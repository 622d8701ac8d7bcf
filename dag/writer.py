"""The DAG writer: a :class:`~htc.dag.model.Dag` back into a DAG file DAGMan reads.

The text keeps the model's meaning, so that ``parse_dag_text(dag_text(dag), path)`` gives the
same nodes, edges and settings (the tests check it on every conformance file):

* DAG-wide commands first (CONFIG, JOBSTATE_LOG, NODE_STATUS_FILE, DOT, SET_JOB_ATTR, ENV,
  MAXJOBS), then SUBMIT-DESCRIPTION blocks, then each node with its commands, in file order,
  then the edges (one ``PARENT p CHILD ...`` line per parent, strong and WEAK apart), then
  REJECT if the DAG had it;
* inline submit descriptions are written inline (``JOB A {`` ... ``}``, or ``@=desc`` ...
  ``@desc`` when a line of the text starts with ``}``);
* files are written relative to the directory they resolve against when they lie under it,
  absolute otherwise; a node's DIR is written when it is not the DAG file's directory;
* ``ALL_NODES`` settings come out per node (the model holds them per node);
* **spliced nodes are written flat**: the writer keeps no SPLICE structure, so a spliced node
  is a plain JOB named with its full name, ``outer+inner+A``, and its edges are written as
  edges. Keeping the names keeps rescue DAGs and logs of the original run meaningful, but a name
  with ``+`` needs ``DAGMAN_ALLOW_ANY_NODE_NAME_CHARACTERS = True`` in DAGMan (and
  ``allow_any_node_name_characters=True`` in :func:`htc.dag.parser.parse_dag`); the file says
  so in a comment at its top. Splice-scoped categories keep their full names, which mean the
  same in a top-level file (``D0+cat1``).
"""

from __future__ import annotations

import os

from htc.dag.errors import DagError
from htc.dag.model import Dag, Node, NodeKind
from htc.dag.validate import validate_dag

__all__ = ["dag_text", "write_dag"]

_KEYWORD = {NodeKind.JOB: "JOB", NodeKind.FINAL: "FINAL", NodeKind.SERVICE: "SERVICE",
            NodeKind.PROVISIONER: "PROVISIONER", NodeKind.SUBDAG: "SUBDAG EXTERNAL"}


def write_dag(dag: Dag, path: str | os.PathLike) -> str:
    """Write ``dag`` to ``path`` as a DAG file (relative paths against ``path``'s directory).

    Args:
        dag: the DAG; it is validated first.
        path: the file to write (replaced if it exists).
    Returns:
        The absolute path written.
    Raises:
        DagError: the DAG is invalid (a cycle, a name DAGMan cannot read ...); nothing is written.
    """
    path = os.path.abspath(os.fspath(path))
    text = dag_text(dag, base_dir=os.path.dirname(path))
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def dag_text(dag: Dag, *, base_dir: str | None = None) -> str:
    """The text of a DAG file for ``dag`` (see the module docstring for its layout).

    Args:
        dag: the DAG; it is validated first.
        base_dir: the directory the file will be read from (relative paths are written against
            it); by default the directory of ``dag.file``, else the current directory.
    Returns:
        The file's text.
    Raises:
        DagError: the DAG is invalid; the message says what to fix.
    """
    validate_dag(dag)
    if base_dir is None:
        base_dir = os.path.dirname(dag.file) if dag.file else os.getcwd()
    out: list[str] = []
    if any("+" in name for name in dag.nodes):
        out += ["# Spliced nodes are written flat: their names keep the splice prefixes ('+'),",
                "# so DAGMan needs DAGMAN_ALLOW_ANY_NODE_NAME_CHARACTERS = True to read this file."]
    out += _settings(dag, base_dir)
    for name, text in _descriptions(dag).items():
        out.append(f"SUBMIT-DESCRIPTION {name} " + _block(text))
    for node in dag.nodes.values():
        out += _node(node, base_dir)
    out += _edges(dag)
    if dag.reject is not None:
        out.append(f"# REJECT was at {dag.reject}")
        out.append("REJECT")
    return "\n".join(out) + "\n"


def _quote(word: str) -> str:
    """A file name as one DAG word (quoted if it has spaces or quotes)."""
    if word and not any(c in word for c in " \t\"'\\"):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _rel(path: str, base: str) -> str:
    """``path`` relative to ``base`` when it lies under it; absolute otherwise; a relative
    ``path`` (a DAG built in Python) is written as given."""
    if not os.path.isabs(path) or not base:
        return path
    rel = os.path.relpath(path, base)
    return path if rel == ".." or rel.startswith(".." + os.sep) else rel


def _block(text: str) -> str:
    """An inline submit description: ``{`` lines ``}``, or ``@=desc`` ... ``@desc``."""
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith(("#", "//"))]
    if any(line.startswith("}") for line in lines):
        return "@=desc\n" + "".join(f"{line}\n" for line in lines) + "@desc"
    return "{\n" + "".join(f"\t{line}\n" for line in lines) + "}"


def _settings(dag: Dag, base: str) -> list[str]:
    out = []
    if dag.config:
        out.append(f"CONFIG {_quote(_rel(dag.config, base))}")
    if dag.jobstate_log:
        out.append(f"JOBSTATE_LOG {_quote(_rel(dag.jobstate_log, base))}")
    if dag.node_status:
        ns = dag.node_status
        out.append(f"NODE_STATUS_FILE {_quote(_rel(ns.file, base))} {ns.min_update}"
                   + (" ALWAYS-UPDATE" if ns.always_update else ""))
    if dag.dot:
        d = dag.dot
        out.append(f"DOT {_quote(_rel(d.file, base))} "
                   f"{'UPDATE' if d.update else 'DONT-UPDATE'} "
                   f"{'OVERWRITE' if d.overwrite else 'DONT-OVERWRITE'}"
                   + (f" INCLUDE {_quote(_rel(d.include, base))}" if d.include else ""))
    out += [f"SET_JOB_ATTR {k} = {v}" for k, v in dag.set_job_attrs.items()]
    if dag.env_get:
        out.append("ENV GET " + " ".join(dag.env_get))
    if dag.env_set:
        out.append("ENV SET " + ";".join(f"{k}={v}" for k, v in dag.env_set))
    out += [f"MAXJOBS {cat} {n}" for cat, n in dag.maxjobs.items()]
    return out


def _var_value(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _node(node: Node, base: str) -> list[str]:
    name = node.name
    line = f"{_KEYWORD[node.kind]} {name} "
    if node.description_name is not None:
        line += node.description_name
    elif node.submit_text is not None:
        line += _block(node.submit_text)
    else:
        line += _quote(_rel(node.submit_file, node.dir))
    if node.dir and os.path.normpath(node.dir) != os.path.normpath(base):
        line += f" DIR {_quote(_rel(node.dir, base))}"
    line += " NOOP" * node.noop + " DONE" * node.done
    out = [line]
    for kind in ("PRE", "POST", "HOLD"):
        s = node.scripts.get(kind)
        if s is None:
            continue
        if any(not w or any(c.isspace() for c in w) for w in (s.executable, *s.args)):
            raise DagError(f"the {kind} script of node '{name}' has an empty word or one with "
                           "spaces; DAGMan splits a SCRIPT line at spaces, so pass such "
                           "values another way (a VARS, a wrapper script)")
        words = ["SCRIPT"]
        if s.defer_status is not None:
            words += ["DEFER", str(s.defer_status), str(s.defer_time)]
        if s.debug_file is not None:
            words += ["DEBUG", _quote(_rel(s.debug_file, node.dir)), s.debug_stream or "ALL"]
        out.append(" ".join([*words, kind, name, s.executable, *s.args]))
    if node.pre_skip is not None:
        out.append(f"PRE_SKIP {name} {node.pre_skip}")
    if node.retry or node.retry_unless_exit is not None:
        out.append(f"RETRY {name} {node.retry}" + (
            f" UNLESS-EXIT {node.retry_unless_exit}" if node.retry_unless_exit is not None else ""))
    if node.abort_status is not None:
        out.append(f"ABORT-DAG-ON {name} {node.abort_status}" + (
            f" RETURN {node.abort_return}" if node.abort_return is not None else ""))
    for v in node.vars:
        if "\n" in v.value or "\r" in v.value or not v.name or " " in v.name or "=" in v.name:
            raise DagError(f"VARS {v.name!r} of node '{name}' cannot be written on a DAG line "
                           "(names are one word without '=', values have no line breaks)")
        mode = " PREPEND" if v.prepend else " APPEND" if v.append else ""
        out.append(f"VARS {name}{mode} {v.name}={_var_value(v.value)}")
    if node.priority:
        out.append(f"PRIORITY {name} {node.priority}")
    if node.category is not None:
        out.append(f"CATEGORY {name} {node.category}")
    if node.tolerance is not None:
        out.append(f"TOLERANCE {name} {node.tolerance}" + (
            f" {node.tolerance_mode}" if node.tolerance_mode else ""))
    if node.save_point is not None:
        out.append(f"SAVE_POINT_FILE {name} {_quote(node.save_point)}")
    return out


def _edges(dag: Dag) -> list[str]:
    out = []
    for parent in dag.nodes:
        strong, weak = [], []
        for child, attrs in dag.graph.adj[parent].items():
            (weak if attrs.get("weak") else strong).append(child)
        if strong:
            out.append(f"PARENT {parent} CHILD {' '.join(strong)}")
        if weak:
            out.append(f"WEAK PARENT {parent} CHILD {' '.join(weak)}")
    return out


def _descriptions(dag: Dag) -> dict[str, str]:
    """The SUBMIT-DESCRIPTION blocks to write: the DAG's, and any a node names but the DAG
    lacks (a DAG built in Python may set only ``description_name`` and ``submit_text``)."""
    blocks = dict(dag.submit_descriptions)
    for node in dag.nodes.values():
        name = node.description_name
        if name is None or name in blocks:
            continue
        if node.submit_text is None:
            raise DagError(f"node '{node.name}' uses SUBMIT-DESCRIPTION '{name}', which neither "
                           "the DAG nor the node holds; set Dag.submit_descriptions[name]")
        blocks[name] = node.submit_text
    return blocks

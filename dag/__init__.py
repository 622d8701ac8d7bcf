"""DAGMan for htc (import name ``htc.dag``): DAG files, the DAG manager, and a Python API.

``from htc.dag import DAG`` builds, reads, writes and submits DAGs from Python
(:mod:`htc.dag.api`); the DAG file language is :mod:`htc.dag.parser` / :mod:`htc.dag.writer`
over the one data model :mod:`htc.dag.model` (a networkx graph); :mod:`htc.dag.engine` decides
what a run does and :mod:`htc.dag.manager` does it; ``htc dag ...`` is :mod:`htc.dag.cli`. The
guide is docs/dagman.md.

Names are loaded when first used, so ``import htc.dag`` stays cheap (the DAG manager process
imports only what it runs).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from htc.dag.api import DAG, Layer, NodeRef
    from htc.dag.errors import DagError
    from htc.dag.handle import DagHandle, DagTimeout, submit_dag_file
    from htc.dag.model import Dag, Node, NodeKind, Script, Var
    from htc.dag.parser import parse_dag, parse_dag_text
    from htc.dag.writer import dag_text, write_dag

__all__ = [
    "DAG", "Dag", "DagError", "DagHandle", "DagTimeout", "Layer", "Node", "NodeKind", "NodeRef", "Script", "Var",
    "dag_text", "parse_dag", "parse_dag_text", "submit_dag_file", "write_dag",
]

_WHERE = {
    "DAG": "api", "Layer": "api", "NodeRef": "api",
    "DagHandle": "handle", "DagTimeout": "handle", "submit_dag_file": "handle",
    "Dag": "model", "Node": "model", "NodeKind": "model", "Script": "model", "Var": "model",
    "DagError": "errors", "parse_dag": "parser", "parse_dag_text": "parser",
    "dag_text": "writer", "write_dag": "writer",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'htc.dag' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"htc.dag.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])

"""The Python DAG API: ``from htc.dag import DAG``.

Build a DAG in code, write it as a DAG file that HTCondor's DAGMan would accept too, submit it
to the pool and follow it::

    from htc.dag import DAG

    dag = DAG("analysis")
    prep = dag.job("prep", {"executable": "/bin/echo", "arguments": "prep"})
    runs = dag.layer("run", {"executable": "/bin/echo", "arguments": "$(n)"}, vars=[{"n": i} for i in range(3)])
    total = dag.function("total", sum, [1, 2, 3])
    prep >> runs >> total
    handle = dag.submit()
    assert handle.wait(timeout=600) == 0
    print(handle.result("total"))          # 6

The model underneath is :class:`htc.dag.model.Dag` (its ``graph`` a networkx.DiGraph):
``dag.model`` is there for whatever the API does not say. ``DAG.read(path)`` parses a DAG file
into the same thing; ``dag.write(path)`` writes the ``.dag`` file with the submit files (and
function nodes' call files) it needs beside it.

Nodes are named by :class:`NodeRef`\\ s (what ``job``, ``function`` and ``final`` return, and
``dag["name"]``); ``a >> b`` makes ``b`` a child of ``a`` (either side may be a node, a
:class:`Layer` or a list of nodes) and returns ``b``, so ``a >> b >> c`` is a chain.
"""

from __future__ import annotations

import copy
import os
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from htc.dag import function_nodes as fnodes
from htc.dag.handle import DagHandle
from htc.dag.model import Dag, Node, NodeKind, Script, Var
from htc.errors import UsageError

__all__ = ["DAG", "Layer", "NodeRef"]

_RESERVED = {"PARENT", "CHILD", "ALL_NODES"}
_NOOP_SUBMIT = "# a NOOP node: DAGMan never submits it\nexecutable = /bin/true\nqueue\n"


class NodeRef:
    """A node of a :class:`DAG`, by name; ``a >> b`` adds the edge a -> b and returns ``b``."""

    __slots__ = ("dag", "name")

    def __init__(self, dag: DAG, name: str):
        self.dag = dag
        self.name = name

    @property
    def node(self) -> Node:
        """The model's :class:`~htc.dag.model.Node` (all its settings)."""
        return self.dag.model.nodes[self.name]

    def configure(self, **settings: Any) -> NodeRef:
        """Change the node's settings (the keyword arguments of :meth:`DAG.job`); returns the node."""
        self.dag._configure(self.node, **settings)
        return self

    def __rshift__(self, other):
        self.dag.edge(self, other)
        return other

    def __rrshift__(self, other):
        self.dag.edge(other, self)
        return self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NodeRef) and other.dag is self.dag and other.name == self.name

    def __hash__(self) -> int:
        return hash((id(self.dag), self.name))

    def __repr__(self) -> str:
        return f"<node {self.name!r} of DAG {self.dag.name!r}>"


class Layer(tuple):
    """Nodes made together (:meth:`DAG.layer`); ``>>`` on a layer joins every node of it."""

    def __rshift__(self, other):
        if self:
            self[0].dag.edge(self, other)
        return other

    def __rrshift__(self, other):
        if self:
            self[0].dag.edge(other, self)
        return self

    @property
    def names(self) -> list[str]:
        """The nodes' names, in order."""
        return [n.name for n in self]


def _submit_text(submit: Any, what: str) -> str:
    """Submit-description text from a dict of commands or text (a ``queue`` line added if none)."""
    if isinstance(submit, Mapping):
        text = "".join(f"{k} = {v}\n" for k, v in submit.items() if k.lower() != "queue")
    else:
        text = str(submit)
        if not text.endswith("\n"):
            text += "\n"
    if not any(line.strip().lower().startswith("queue") for line in text.splitlines()):
        text += "queue\n"
    if not text.strip():
        raise UsageError(f"{what}: the submit description is empty")
    return text


def _script(kind: str, spec: Any) -> Script:
    if isinstance(spec, Script):
        return Script(kind, spec.executable, list(spec.args), spec.defer_status, spec.defer_time, spec.debug_file,
                      spec.debug_stream)
    words = shlex.split(spec) if isinstance(spec, str) else [os.fspath(w) if isinstance(w, os.PathLike) else str(w)
                                                              for w in spec]
    if not words:
        raise UsageError(f"the {kind} script is empty; give a command line such as 'check.sh $JOB $RETURN'")
    return Script(kind, words[0], words[1:])


class DAG:
    """A DAG under construction (or read from a file), to write, submit and follow.

    Args:
        name: the DAG's name: its file is ``NAME.dag`` when :meth:`submit` writes it.
        python: the interpreter function nodes' jobs run (default: this one); the slot accounts
            must be able to run it (see :func:`htc.dag.function_nodes.submit_text`).
        environment: function nodes' job environment (default: this process's PYTHONPATH).
        model: the model to wrap (:meth:`read` passes the parsed file's).
    """

    def __init__(self, name: str = "dag", *, python: str | None = None, environment: dict[str, str] | None = None,
                 model: Dag | None = None):
        if not name or any(c in name for c in "/\\ \t\n"):
            raise UsageError(f"DAG name {name!r} cannot name a file; use letters, digits, '-' and '_'")
        self.name = name
        self.python = python
        self.environment = environment
        self.model = model if model is not None else Dag()
        #: function nodes -> their calls
        self.calls: dict[str, fnodes.FunctionCall] = {}
        #: nodes whose submit description the API made (written as NAME.sub files)
        self._generated: set[str] = set()
        #: extra submit commands of function nodes
        self._extra: dict[str, dict[str, str]] = {}
        #: SUBDAG nodes given as DAG objects (written with this one)
        self._subdags: dict[str, DAG] = {}

    # --- reading -------------------------------------------------------------------------------
    @classmethod
    def read(cls, path: str | os.PathLike, **options: Any) -> DAG:
        """Parse a DAG file (with its INCLUDEs and SPLICEs) into a DAG to change, write or submit;
        ``options`` are the constructor's (``python=``, ``environment=``).

        Raises:
            DagError: the file is not a valid DAG file (the message names the file and line).
        """
        from htc.dag.parser import parse_dag

        name = Path(path).name
        return cls(name[:-4] if name.endswith(".dag") else name, model=parse_dag(path), **options)

    def __getitem__(self, name: str) -> NodeRef:
        if name not in self.model.nodes:
            raise KeyError(f"DAG {self.name!r} has no node {name!r}")
        return NodeRef(self, name)

    def __contains__(self, name: object) -> bool:
        return (name.name if isinstance(name, NodeRef) else name) in self.model.nodes

    def __len__(self) -> int:
        return len(self.model.nodes)

    def __iter__(self) -> Iterator[NodeRef]:
        return (NodeRef(self, name) for name in list(self.model.nodes))

    @property
    def graph(self):
        """The dependency graph, a ``networkx.DiGraph`` (parent -> child; edge attribute ``weak``)."""
        return self.model.graph

    # --- nodes ---------------------------------------------------------------------------------
    def _new(self, name: str, kind: NodeKind) -> Node:
        if not isinstance(name, str) or not name or any(c.isspace() for c in name) or "+" in name \
                or name.upper() in _RESERVED:
            raise UsageError(f"{name!r} cannot be a node name: DAGMan names have no spaces and no '+', and "
                             "are not PARENT, CHILD or ALL_NODES")
        if name in self.model.nodes:
            raise UsageError(f"DAG {self.name!r} already has a node named {name!r}; node names must be unique")
        return self.model.add_node(Node(name=name, kind=kind))

    def _set_submit(self, node: Node, submit: Any, noop: bool) -> None:
        if submit is None:
            if not noop:
                raise UsageError(f"node {node.name!r} needs submit= (a submit file, submit text or a dict of "
                                 "submit commands), or noop=True")
            node.submit_text = _NOOP_SUBMIT
            self._generated.add(node.name)
        elif isinstance(submit, os.PathLike) or (isinstance(submit, str) and "\n" not in submit
                                                 and "=" not in submit):
            node.submit_file = os.path.abspath(os.fspath(submit))
        else:
            node.submit_text = _submit_text(submit, f"node {node.name!r}")
            self._generated.add(node.name)

    def _configure(self, node: Node, *, vars: Mapping[str, Any] | None = None, dir: str | os.PathLike | None = None,
                   retry: int | None = None, retry_unless_exit: int | None = None, pre: Any = None,
                   post: Any = None, priority: int | None = None, category: str | None = None,
                   noop: bool | None = None, done: bool | None = None, pre_skip: int | None = None,
                   abort_on: int | None = None, abort_return: int | None = None) -> None:
        if vars:
            for key, value in vars.items():
                node.vars = [v for v in node.vars if v.name != key] + [Var(str(key), str(value))]
        if dir is not None:
            if node.name in self.calls:
                raise UsageError(f"function node {node.name!r} runs in the DAG's directory; it takes no dir=")
            node.dir = os.path.abspath(os.fspath(dir))
        if retry is not None:
            if retry < 0:
                raise UsageError(f"node {node.name!r}: retry={retry} must be 0 or more")
            node.retry = retry
        if retry_unless_exit is not None:
            node.retry_unless_exit = retry_unless_exit
        for kind, spec in (("PRE", pre), ("POST", post)):
            if spec is not None:
                node.scripts[kind] = _script(kind, spec)
        if priority is not None:
            node.priority = priority
        if category is not None:
            node.category = category
        if noop is not None:
            node.noop = noop
        if done is not None:
            node.done = done
        if pre_skip is not None:
            node.pre_skip = pre_skip
        if abort_on is not None:
            node.abort_status, node.abort_return = abort_on, abort_return

    def job(self, name: str, submit: Any = None, **settings: Any) -> NodeRef:
        """A node that runs a submit description (DAGMan's ``JOB``).

        Args:
            name: the node's name (unique in the DAG).
            submit: a submit file's path, submit-description text, or a dict of submit commands
                (``{"executable": "run.sh", "arguments": "$(n)"}``); may be omitted for a NOOP node.
            settings: ``vars`` (dict: VARS), ``dir`` (DIR), ``retry`` (RETRY), ``retry_unless_exit``
                (UNLESS-EXIT), ``pre`` / ``post`` (a command line, a list of words, or a
                :class:`~htc.dag.model.Script`), ``priority`` (PRIORITY), ``category`` (CATEGORY),
                ``noop`` (NOOP), ``done`` (DONE), ``pre_skip`` (PRE_SKIP), ``abort_on`` /
                ``abort_return`` (ABORT-DAG-ON ... RETURN).

        Returns:
            The node, to join with edges (``a >> b``).
        """
        return self._make(name, NodeKind.JOB, submit, settings)

    def _make(self, name: str, kind: NodeKind, submit: Any, settings: dict[str, Any]) -> NodeRef:
        """A new node of ``kind`` with its submit description and settings (none if they fail)."""
        node = self._new(name, kind)
        try:
            self._set_submit(node, submit, bool(settings.get("noop")))
            self._configure(node, **settings)
        except BaseException:
            self._drop(name)
            raise
        return NodeRef(self, name)

    def _drop(self, name: str) -> None:
        self.model.nodes.pop(name, None)
        self.model.graph.remove_node(name)
        self._generated.discard(name)
        self.calls.pop(name, None)
        self._subdags.pop(name, None)

    def final(self, name: str, submit: Any = None, **settings: Any) -> NodeRef:
        """The FINAL node: it runs last, after success or failure, and its result is the DAG's.

        Takes the arguments of :meth:`job` (a FINAL node has no edges, retries, priority or category).
        """
        if self.model.final is not None:
            raise UsageError(f"DAG {self.name!r} already has a FINAL node ({self.model.final.name!r}); there is "
                             "at most one")
        bad = sorted(set(settings) & {"retry", "retry_unless_exit", "priority", "category", "abort_on"})
        if bad:
            raise UsageError(f"a FINAL node takes no {', '.join(bad)}")
        return self._make(name, NodeKind.FINAL, submit, settings)

    def service(self, name: str, submit: Any, **settings: Any) -> NodeRef:
        """A SERVICE node: started when the DAG starts, best effort, removed when it ends; its
        failure is ignored. Takes ``vars``, ``dir``, ``pre``, ``post`` and ``noop``."""
        bad = sorted(set(settings) - {"vars", "dir", "pre", "post", "noop"})
        if bad:
            raise UsageError(f"a SERVICE node takes no {', '.join(bad)}")
        return self._make(name, NodeKind.SERVICE, submit, settings)

    def subdag(self, name: str, dag: DAG | str | os.PathLike, **settings: Any) -> NodeRef:
        """A node that runs a whole DAG (``SUBDAG EXTERNAL``: its own DAG manager job).

        ``dag`` is a DAG file, or a :class:`DAG`, which :meth:`write` writes into the
        subdirectory ``NAME/`` (the node's DIR) as ``INNER.dag``. Takes the settings of :meth:`job`.
        """
        node = self._new(name, NodeKind.SUBDAG)
        try:
            if isinstance(dag, DAG):
                if dag is self:
                    raise UsageError(f"DAG {self.name!r} cannot be a SUBDAG of itself")
                self._subdags[name] = dag
            else:
                node.submit_file = os.path.abspath(os.fspath(dag))
            self._configure(node, **settings)
        except BaseException:
            self._drop(name)
            raise
        return NodeRef(self, name)

    def function(self, name: str, fn: Callable, *args: Any, **kwargs: Any) -> NodeRef:
        """A node whose job calls ``fn(*args, **kwargs)`` in the pool (the executor's worker).

        A function node among the arguments (anywhere inside lists, tuples and dicts) stands for
        its return value: the edge parent -> this node is added, and the job gets the value. Set
        node settings with ``.configure(retry=...)``, and submit commands with
        :meth:`submit_commands`. :meth:`DagHandle.result` reads the returned value.
        """
        def refers(obj: Any) -> str | None:
            if isinstance(obj, NodeRef) and obj.dag is self:
                if obj.name not in self.calls:
                    raise UsageError(f"node {obj.name!r} is an argument of function node {name!r} but is not a "
                                     "function node; only a function node's return value can be passed")
                return obj.name
            return None

        node = self._new(name, NodeKind.JOB)
        try:
            if any(c in name for c in ",/"):
                raise UsageError(f"function node name {name!r} names its files: it cannot hold ',' or '/'")
            call = fnodes.FunctionCall(fn, args, kwargs, refers)
        except BaseException:
            self._drop(name)
            raise
        node.dir = ""
        self.calls[name] = call
        for parent in call.parents:
            self.model.add_edge(parent, name)
        return NodeRef(self, name)

    def submit_commands(self, node: NodeRef | str, **commands: Any) -> None:
        """Add submit commands (``request_memory="2GB"``) to a function node's job."""
        name = node.name if isinstance(node, NodeRef) else node
        if name not in self.calls:
            raise UsageError(f"{name!r} is not a function node of DAG {self.name!r}")
        self._extra.setdefault(name, {}).update({k: str(v) for k, v in commands.items()})

    def layer(self, name: str, submit: Any, vars: Iterable[Mapping[str, Any]] | int = 1, **settings: Any) -> Layer:
        """Several nodes with one submit description, one per ``vars`` dict (or ``vars`` copies):
        ``NAME:0``, ``NAME:1``... (htcondor2.dags' names). Returns them as a :class:`Layer`."""
        rows = [{} for _ in range(vars)] if isinstance(vars, int) else [dict(v) for v in vars]
        nodes = []
        for i, row in enumerate(rows):
            nodes.append(self.job(f"{name}:{i}", submit, **{**settings, "vars": {**settings.get("vars", {}), **row}}))
        return Layer(nodes)

    def nodes(self, *names: str) -> Layer:
        """The named nodes (all of them without names), as a :class:`Layer`."""
        return Layer(self[n] for n in (names or list(self.model.nodes)))

    # --- edges and throttles --------------------------------------------------------------------
    def _names(self, side: Any) -> list[str]:
        # (JOB and SUBDAG nodes have edges; FINAL, SERVICE and PROVISIONER nodes have none)
        if isinstance(side, NodeRef):
            if side.dag is not self:
                raise UsageError(f"{side!r} belongs to another DAG")
            items = [side.name]
        elif isinstance(side, str):
            items = [side]
        elif isinstance(side, Iterable):
            items = [n for item in side for n in self._names(item)]
        else:
            raise UsageError(f"an edge joins nodes (or lists of nodes), not a {type(side).__name__}")
        for n in items:
            if n not in self.model.nodes:
                raise UsageError(f"DAG {self.name!r} has no node {n!r}")
            if self.model.nodes[n].kind not in (NodeKind.JOB, NodeKind.SUBDAG):
                raise UsageError(f"node {n!r} is a {self.model.nodes[n].kind.value} node; it cannot be in an edge")
        return items

    def edge(self, parents: Any, children: Any, *, weak: bool = False) -> None:
        """``PARENT parents CHILD children``: every parent before every child (``weak``: the child
        needs the parent only finished, not successful)."""
        ps, cs = self._names(parents), self._names(children)
        for p in ps:
            for c in cs:
                if p == c:
                    raise UsageError(f"node {p!r} cannot be its own parent")
                self.model.add_edge(p, c, weak=weak)

    def chain(self, *nodes: Any) -> None:
        """Edges from each node (or list of nodes) to the next."""
        for parent, child in zip(nodes, nodes[1:]):
            self.edge(parent, child)

    def fan_out(self, parent: Any, children: Any) -> None:
        """Every child after the parent."""
        self.edge(parent, children)

    def fan_in(self, parents: Any, child: Any) -> None:
        """The child after every parent."""
        self.edge(parents, child)

    def maxjobs(self, category: str, limit: int) -> None:
        """``MAXJOBS category limit``: at most ``limit`` nodes of ``category`` submitted at once."""
        if limit < 0:
            raise UsageError(f"MAXJOBS {category} {limit}: the limit must be 0 or more")
        self.model.maxjobs[category] = limit

    # --- files ----------------------------------------------------------------------------------
    def write(self, path: str | os.PathLike) -> Path:
        """Write the DAG file ``path`` and, beside it, the submit files of nodes given as text or
        dicts (``NODE.sub``) and the call and submit files of function nodes.

        Returns:
            The DAG file's absolute path.

        Raises:
            DagError: the DAG is not valid (a cycle, names the model rejects).
        """
        from htc.dag.writer import write_dag

        path = Path(path).absolute()
        directory = path.parent
        directory.mkdir(parents=True, exist_ok=True)
        model = self.written_model(path)
        for name, inner in self._subdags.items():
            node = model.nodes[name]
            node.dir = str(directory / name)
            node.submit_file = str(inner.write(directory / name / f"{inner.name}.dag"))
        for name, node in model.nodes.items():
            if name in self.calls:
                fnodes.write_call(directory, name, self.calls[name])
                node.submit_text = fnodes.submit_text(name, self.calls[name].parents, python=self.python,
                                                      environment=self.environment, extra=self._extra.get(name))
            if name in self.calls or name in self._generated:
                sub = directory / f"{name}.sub"
                sub.write_text(node.submit_text or "")
                node.submit_file, node.submit_text = str(sub), None
        write_dag(model, path)
        return path

    def written_model(self, path: str | os.PathLike) -> Dag:
        """A copy of the model as :meth:`write` writes it to ``path`` (files and dirs absolute)."""
        path = Path(path).absolute()
        model = copy.deepcopy(self.model)
        model.file = str(path)
        for node in model.nodes.values():
            if not node.dir:
                node.dir = str(path.parent)
            if not node.dag_file:
                node.dag_file = str(path)
        return model

    def submit(self, directory: str | os.PathLike | None = None, **options: Any) -> DagHandle:
        """Write the DAG into ``directory`` (default: ``./NAME``) as ``NAME.dag`` and submit it to the
        pool's schedd, as ``htc dag submit`` does.

        Args:
            directory: where the DAG's files go (created if needed).
            options: ``htc dag submit``'s options by name (``maxjobs=4``, ``force=True``...).

        Returns:
            A :class:`DagHandle` to follow it.

        Raises:
            UsageError: the DAG was refused (see :func:`~htc.dag.handle.submit_dag_file`), or this
                process is root and the pool's slot accounts could not run function nodes' Python.
        """
        from htc.dag.handle import submit_dag_file

        if self.calls:
            fnodes.check_python_for_root(self.python)
        path = self.write(Path(directory or Path.cwd() / self.name) / f"{self.name}.dag")
        return submit_dag_file(path, options, function_nodes=set(self.calls))

    def __repr__(self) -> str:
        return f"<DAG {self.name!r}: {len(self)} nodes, {self.graph.number_of_edges()} edges>"

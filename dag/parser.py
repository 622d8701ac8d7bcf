"""The DAG file parser: DAGMan's input language into a :class:`htc.dag.model.Dag`.

Theory of operation
-------------------
HTCondor reads a DAG file in two passes (semantics reference 3.1): first the commands that
define nodes (JOB, FINAL, PROVISIONER, SERVICE, SUBDAG, SPLICE, SUBMIT-DESCRIPTION), then all
the others, so ``PARENT``/``RETRY``/``VARS`` ... may name a node defined further down. Here the
first pass *is* the reading: each line is lexed (:mod:`htc.dag.lexer`); a node-defining command
runs at once (a SPLICE parses its whole file then, both passes, into its own
:class:`~htc.dag.splice.Scope`); an INCLUDE reads its file in place; every other command is
queued with its words and runs in the second pass, in file order -- which is what makes
``ALL_NODES`` and a later specific command override each other ("last one wins").

Paths: a relative file name resolves against the scope's directory (the primary DAG file's
directory; a splice's ``DIR``, relative to its includer's); a node's directory is its ``DIR``
(relative to that) or the scope's directory, and the node's submit file or SUBDAG file resolves
against the node's directory, as DAGMan runs ``condor_submit`` there. SCRIPT executables and
arguments are kept as written (the engine runs them in the node's directory).

Errors are :class:`~htc.dag.errors.DagError` naming the file and line, in DAGMan's words, and
they are raised before the model is handed on; :func:`htc.dag.validate.validate_dag` then checks
the whole graph (cycles, FINAL in edges). There is no lenient mode: a file DAGMan refuses (the
htcondor2.dags writer's ``CATEGORY cat 2`` for ``MAXJOBS cat 2``, say) is refused here too.

What wins when a file says a thing twice, as DAGMan does it (``DagProcessor``, ``Node``):

* node settings (RETRY, PRIORITY, CATEGORY, SCRIPT of a kind, PRE_SKIP, ABORT-DAG-ON ...) and
  MAXJOBS, SET_JOB_ATTR, DOT: the last one, so ALL_NODES and a specific command override each
  other in file order; a VARS name given again keeps its place and takes the new value;
* NODE_STATUS_FILE, JOBSTATE_LOG and a SUBMIT-DESCRIPTION name: the first one, with a warning
  (:attr:`Dag.warnings <htc.dag.model.Dag.warnings>`); two different CONFIG files: an error.

REJECT is recorded in :attr:`Dag.reject <htc.dag.model.Dag.reject>` (DAGMan refuses to run such
a DAG; the engine and manager do the refusing).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from htc.dag.commands import COMMANDS, resolve_path
from htc.dag.errors import DagError
from htc.dag.lexer import LexError, LineReader, Words
from htc.dag.model import Dag, Node, NodeKind, Source
from htc.dag.splice import Scope
from htc.dag.validate import RESERVED_NAMES, validate_dag

__all__ = ["apply_dag_file", "parse_dag", "parse_dag_text"]

#: keyword (upper case, "-" as "_") -> node kind, for the node-defining commands
NODE_COMMANDS = {"JOB": NodeKind.JOB, "FINAL": NodeKind.FINAL, "SERVICE": NodeKind.SERVICE,
                 "PROVISIONER": NodeKind.PROVISIONER, "SUBDAG": NodeKind.SUBDAG}


def parse_dag(path: str | os.PathLike, *, extra_files: Iterable[str | os.PathLike] = (),
              allow_any_node_name_characters: bool = False, munge_node_names: bool = True,
              rescue_file: str | os.PathLike | None = None, validate: bool = True) -> Dag:
    """Parse a DAG file (and the files it SPLICEs and INCLUDEs) into a validated model.

    Args:
        path: the primary DAG file; relative paths in it resolve against its directory.
        extra_files: more DAG files to parse into the same DAG, as ``condor_submit_dag a.dag
            b.dag`` does; each file's relative paths resolve against its own directory.
        munge_node_names: with more than one file, prefix each file's node names with its
            number, ``0.A``, ``1.A`` (``DAGMAN_MUNGE_NODE_NAMES``, True by default in DAGMan),
            so that the files' names cannot clash; False puts them in one namespace.
        allow_any_node_name_characters: accept ``+`` in node names
            (``DAGMAN_ALLOW_ANY_NODE_NAME_CHARACTERS``), as files written flat from splices need.
        rescue_file: a rescue DAG to read after the DAG's files (see :func:`apply_dag_file`).
        validate: check the graph as a whole (cycles ...); leave on unless you check later.
    Returns:
        The :class:`~htc.dag.model.Dag`.
    Raises:
        DagError: a file is missing or wrong; the message names the file and line.
    """
    files = [os.path.abspath(os.fspath(p)) for p in (path, *extra_files)]
    parse = _Parse(Dag(file=files[0]), allow_any_node_name_characters)
    munge = munge_node_names and len(files) > 1
    for number, f in enumerate(files):
        parse.top_file(f, _read(f, None), f"{number}." if munge else "")
    if rescue_file is not None:
        rescue = os.path.abspath(os.fspath(rescue_file))
        parse.top_file(rescue, _read(rescue, None), base_dir=os.path.dirname(files[0]))
    return parse.finish(validate)


def apply_dag_file(dag: Dag, path: str | os.PathLike, *, text: str | None = None,
                   validate: bool = True) -> Dag:
    """Parse one more DAG file onto ``dag``: a rescue DAG or a save point file.

    Such a file is a partial DAG (``DONE A``, ``RETRY B 2``) naming nodes of ``dag`` by their
    full names; DAGMan reads it after the DAG's own files, so its settings win.

    Args:
        dag: the DAG to change (in place).
        path: the file; its relative paths resolve against ``dag``'s directory.
        text: the file's text, if already read (``path`` then only names it).
        validate: check the DAG as a whole afterwards.
    Returns:
        ``dag``.
    Raises:
        DagError: the file is wrong (names a node ``dag`` lacks ...), naming the file and line.
    """
    file = os.path.abspath(os.fspath(path))
    parse = _Parse(dag, allow_any_names=True)
    base = os.path.dirname(dag.file) if dag.file else os.path.dirname(file)
    parse.top_file(file, _read(file, None) if text is None else text, base_dir=base)
    return parse.finish(validate)


def parse_dag_text(text: str, path: str | os.PathLike = "string.dag", *,
                   allow_any_node_name_characters: bool = False, validate: bool = True) -> Dag:
    """Parse DAG text as if it were the file ``path`` (relative paths resolve against its
    directory; SPLICE and INCLUDE files are read from there).

    Args, Returns and Raises: as :func:`parse_dag`.
    """
    file = os.path.abspath(os.fspath(path))
    parse = _Parse(Dag(file=file), allow_any_node_name_characters)
    parse.top_file(file, text)
    return parse.finish(validate)


def _read(path: str, src: Source | None, command: str | None = None) -> str:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.read()
    except OSError as e:
        where = {"file": src.file, "line": src.line, "command": command} if src else {}
        raise DagError(f"cannot read DAG file {path}: {e.strerror or e}", **where) from None


# The kinds as plain names: an Enum member looked up on its class is slow in Python 3.11, and
# the node-defining path runs once per node.
_JOB, _FINAL, _SUBDAG = NodeKind.JOB, NodeKind.FINAL, NodeKind.SUBDAG
_SERVICE, _PROVISIONER = NodeKind.SERVICE, NodeKind.PROVISIONER
_NOT_JOBS = frozenset({_FINAL, _SERVICE, _PROVISIONER})
_NOT_IN_ALL_NODES = frozenset({_FINAL, _SERVICE})
_SUBMITS_A_JOB = frozenset({_JOB, _SERVICE, _PROVISIONER})
_ONE_PER_DAG = frozenset({_FINAL, _PROVISIONER})

#: a second-pass command: (handler, scope, words after the keyword, source, keyword as written)
_Queued = tuple

#: keyword as written -> normalised (upper case, "-" as "_"); a cache, files repeat keywords
_NORMAL: dict[str, str] = {}


@dataclass
class _Parse:
    """One parse: the DAG being built and what the second pass and the end still need."""

    dag: Dag
    allow_any_names: bool
    #: node name -> its submit token, for JOBs whose token may name a SUBMIT-DESCRIPTION
    submit_tokens: dict[str, str] = field(default_factory=dict)
    #: files being read (INCLUDE and SPLICE chains), to refuse one that includes itself
    reading: list[str] = field(default_factory=list)

    # --- files and passes ---------------------------------------------------------------
    def top_file(self, file: str, text: str, munge: str = "", base_dir: str | None = None) -> None:
        """Parse one file given on the command line (its node names prefixed by ``munge``)."""
        scope = Scope(file=file, base_dir=base_dir or os.path.dirname(file), prefix=munge)
        self.parse_scope(scope, file, text)

    def parse_scope(self, scope: Scope, file: str, text: str) -> None:
        """Both passes over one scope's file (and what it INCLUDEs)."""
        queue: list[_Queued] = []
        self.read_file(scope, file, text, queue)
        for handler, in_scope, words, src, written in queue:
            try:
                handler(self, in_scope, words, src, written)
            except LexError as e:
                self.fail(src, written, str(e))

    def read_file(self, scope: Scope, file: str, text: str, queue: list[_Queued]) -> None:
        """The first pass over one file: define nodes, read INCLUDEs, queue the rest."""
        if file in self.reading:
            chain = " -> ".join([*self.reading[self.reading.index(file):], file])
            raise DagError(f"DAG file {file} includes itself ({chain})", file=file)
        self.reading.append(file)
        lines = LineReader(text)
        while (line := lines.next_line()) is not None:
            words = Words(line.text)
            src = Source(file, line.number)
            written = line.text.split(None, 1)[0]
            try:
                words.next()
                keyword = _NORMAL.get(written)
                if keyword is None:
                    keyword = _NORMAL.setdefault(written, written.upper().replace("-", "_"))
                if keyword in NODE_COMMANDS:
                    self.define_node(scope, NODE_COMMANDS[keyword], words, src, written, lines)
                elif keyword == "SPLICE":
                    self.splice(scope, words, src, written)
                elif keyword == "SUBMIT_DESCRIPTION":
                    self.submit_description(words, src, written, lines)
                elif keyword == "INCLUDE":
                    self.include(scope, words, src, written, queue)
                elif keyword in COMMANDS:
                    queue.append((COMMANDS[keyword], scope, words, src, written))
                else:
                    raise DagError(f"'{written}' is not a valid DAG command",
                                   file=file, line=line.number)
            except LexError as e:
                self.fail(src, written, str(e))
        self.reading.pop()

    def finish(self, validate: bool) -> Dag:
        """Resolve SUBMIT-DESCRIPTION names, then validate the whole DAG."""
        dag = self.dag
        for name, token in self.submit_tokens.items():
            node = dag.nodes[name]
            if token in dag.submit_descriptions:
                node.submit_file = None
                node.submit_text = dag.submit_descriptions[token]
                node.description_name = token
        if validate:
            validate_dag(dag)
        return dag

    # --- helpers ------------------------------------------------------------------------
    def fail(self, src: Source, command: str, reason: str) -> None:
        """Raise the DagError of a command that cannot be parsed."""
        raise DagError(reason, file=src.file, line=src.line, command=command)

    def check_name(self, name: str, src: Source, command: str, what: str = "Node") -> None:
        """Refuse reserved names and ``+`` (DAGMan: "Node name is a reserved word")."""
        if name.upper() in RESERVED_NAMES:
            self.fail(src, command, f"{what} name is a reserved word ('{name}': PARENT, CHILD "
                                    "and ALL_NODES cannot name nodes or splices)")
        if "+" in name and not self.allow_any_names:
            self.fail(src, command, f"{what} name contains illegal charater: '{name}' has '+', "
                                    "which is reserved for splice names (rename it, or set "
                                    "DAGMAN_ALLOW_ANY_NODE_NAME_CHARACTERS = True)")

    # --- the node-defining commands (first pass) ----------------------------------------
    def define_node(self, scope: Scope, kind: NodeKind, words: Words, src: Source, written: str,
                    lines: LineReader) -> None:
        """JOB, FINAL, PROVISIONER, SERVICE and SUBDAG EXTERNAL."""
        if kind is _SUBDAG and words.next().upper() != "EXTERNAL":
            self.fail(src, written, "Missing EXTERNAL keyword (SUBDAG EXTERNAL name file.dag)")
        name = words.next()
        if not name:
            self.fail(src, written, "Missing node name")
        self.check_name(name, src, written)
        desc = words.next(trim_quotes=True)
        if not desc:
            self.fail(src, written, "No submit description provided")
        text = None
        if kind is not _SUBDAG and (desc.startswith("{") or desc.startswith("@=")):
            text, rest = self.inline_block(desc, src, written, lines)
            words = Words(rest)
        node = Node(name=scope.full(name), kind=kind, dag_file=src.file, source=src,
                    dir=scope.base_dir)
        while word := words.next():
            option = word.upper()
            if option == "NOOP":
                node.noop = True
            elif option == "DONE":
                node.done = True
            elif option == "DIR":
                d = words.next(trim_quotes=True)
                if not d:
                    self.fail(src, written, "No directory path provided for DIR subcommand")
                node.dir = resolve_path(scope.base_dir, d)
            else:
                self.fail(src, written, f"Unexpected token '{word}'")
        if node.done and kind in _NOT_JOBS:
            self.fail(src, written, f"{kind.value} node '{name}' can not be marked as DONE")
        if text is not None:
            node.submit_text = text
        else:
            if kind in _SUBMITS_A_JOB and desc.endswith(".condor.sub"):
                self.fail(src, written, f"'{desc}' is a DAG's submit file: the use of the JOB "
                                        "keyword for nested DAGs is prohibited (write SUBDAG "
                                        "EXTERNAL name file.dag)")
            node.submit_file = resolve_path(node.dir, desc)
            if kind is not _SUBDAG:
                self.submit_tokens[node.name] = desc
        if kind in _ONE_PER_DAG:
            if scope.category_prefix and kind is _FINAL:     # (only splices have one)
                self.fail(src, written, f"FINAL node '{name}' is in a splice; a FINAL node "
                                        "belongs in the top-level DAG file")
            other = next((n for n in self.dag.nodes.values() if n.kind is kind), None)
            if other is not None:
                self.fail(src, written, f"a DAG has at most one {kind.value} node; "
                                        f"'{other.name}' is one already (at {other.source})")
        self.add_node(scope, node, src, written)

    def add_node(self, scope: Scope, node: Node, src: Source, written: str) -> None:
        """Add a node to the DAG and to its scope, refusing a name used before."""
        old = self.dag.nodes.get(node.name)
        if old is not None:
            self.fail(src, written, f"Node name '{node.name}' is already used "
                                    f"(defined at {old.source})")
        if node.name[len(scope.prefix):] in scope.splices:
            self.fail(src, written, f"'{node.name}' is already the name of a splice")
        self.dag.add_node(node)
        scope.local.append(node.name)
        scope.members.append(node.name)

    def inline_block(self, start: str, src: Source, written: str,
                     lines: LineReader) -> tuple[str, str]:
        """Read ``{ ... }`` or ``@=TAG ... @TAG``; return the text and the closing line's rest."""
        end = "}" if start.startswith("{") else "@" + start[2:]
        if end == "@":
            self.fail(src, written, "No inline description closing token specified (@=TOKEN)")
        block = lines.read_block(end)
        if block is None:
            self.fail(src, written, f"Missing inline description closing token: {end}")
        return block

    def submit_description(self, words: Words, src: Source, written: str,
                           lines: LineReader) -> None:
        """``SUBMIT-DESCRIPTION name { ... }`` (or ``@=TAG ... @TAG``)."""
        name = words.next()
        if not name:
            self.fail(src, written, "No submit description name provided")
        start = words.next()
        if not (start.startswith("{") or start.startswith("@=")):
            self.fail(src, written, "No inline description provided")
        text, _rest = self.inline_block(start, src, written, lines)
        if name in self.dag.submit_descriptions:     # DAGMan keeps the first, with a warning
            self.dag.warnings.append(f"{src} a submit description already exists with name "
                                     f"{name}, will not be overwritten")
            return
        self.dag.submit_descriptions[name] = text

    def splice(self, scope: Scope, words: Words, src: Source, written: str) -> None:
        """``SPLICE name file.dag [DIR d]``: parse the file into a nested scope now."""
        name = words.next()
        if not name:
            self.fail(src, written, "Missing splice name")
        self.check_name(name, src, written, "Splice")
        file = words.next(trim_quotes=True)
        if not file:
            self.fail(src, written, "Missing DAG file")
        base = scope.base_dir
        if word := words.next():
            if word.upper() != "DIR":
                self.fail(src, written, f"Unexpected token '{word}'")
            d = words.next(trim_quotes=True)
            if not d:
                self.fail(src, written, "No directory path provided for DIR subcommand")
            base = resolve_path(base, d)
            if extra := words.next():
                self.fail(src, written, f"Unexpected token '{extra}'")
        if name in scope.splices:
            self.fail(src, written, f"Splice name '{name}' is already used")
        if scope.full(name) in self.dag.nodes:
            self.fail(src, written, f"Splice name '{name}' is already the name of a node")
        path = resolve_path(base, file)
        prefix = scope.full(name) + "+"
        inner = Scope(file=path, base_dir=base, prefix=prefix, category_prefix=prefix)
        self.parse_scope(inner, path, _read(path, src, written))
        scope.splices[name] = inner
        scope.members.extend(inner.members)

    def include(self, scope: Scope, words: Words, src: Source, written: str,
                queue: list[_Queued]) -> None:
        """``INCLUDE file``: the file's text, as if written here (same scope, same passes)."""
        file = words.next(trim_quotes=True)
        if not file:
            self.fail(src, written, "No include file specified")
        if extra := words.next():
            self.fail(src, written, f"Unexpected token '{extra}'")
        path = resolve_path(scope.base_dir, file)
        self.read_file(scope, path, _read(path, src, written), queue)

    # --- resolving names (second pass) --------------------------------------------------
    def nodes_named(self, scope: Scope, name: str, src: Source, command: str, *,
                    all_nodes: bool = True, jobs_only: bool = False) -> list[Node]:
        """The nodes a command's node argument means: one node, or ALL_NODES of the scope.

        ALL_NODES means the scope's own nodes but its FINAL and SERVICE nodes, and, for a
        setting only JOB nodes take (``jobs_only``), but its PROVISIONER node too.
        """
        if name.upper() == "ALL_NODES":
            if not all_nodes:
                self.fail(src, command, f"{command} does not take ALL_NODES; name one node")
            skip = _NOT_JOBS if jobs_only else _NOT_IN_ALL_NODES
            return [self.dag.nodes[n] for n in scope.local if self.dag.nodes[n].kind not in skip]
        node = self.dag.nodes.get(scope.full(name))
        if node is None:
            self.fail(src, command, f"Unknown node '{name}': no JOB, FINAL, SUBDAG ... "
                                    f"command in {os.path.basename(scope.file)} defines it")
        return [node]

    def edge_ends(self, scope: Scope, name: str, src: Source, command: str,
                  parent_side: bool) -> list[str]:
        """A PARENT/CHILD operand: a node, or a splice's terminal (parent) / initial nodes."""
        node = self.dag.nodes.get(scope.full(name))
        if node is not None:
            if node.kind in _NOT_JOBS:
                self.fail(src, command, f"{node.kind.value} node '{name}' cannot be a parent "
                                        "or a child (DAGMan orders it itself)")
            return [node.name]
        inner = scope.splice(name)
        if inner is None:
            self.fail(src, command, f"Unknown node or splice '{name}': no JOB, SPLICE ... "
                                    f"command in {os.path.basename(scope.file)} defines it")
        initial, terminal = inner.ends(self.dag.graph)
        nodes = self.dag.nodes
        return [n for n in (terminal if parent_side else initial)
                if nodes[n].kind not in _NOT_JOBS]

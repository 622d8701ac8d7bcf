"""The second-pass commands of the DAG language: everything that is not a node definition.

Each handler takes the parse (:class:`htc.dag.parser._Parse`: the DAG being built, name
resolution, ``fail``), the scope the line belongs to, the line's remaining words, its source and
the keyword as written (for messages). Syntax and messages follow HTCondor's
``dag_parser.cpp`` (``Parse<Command>``); the table :data:`COMMANDS` maps each keyword (upper
case, ``-`` as ``_``) to its handler. The grammar of each is in its docstring, quoted from the
semantics reference, section 3.2.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from htc.dag.lexer import Words, unquote
from htc.dag.model import DotSpec, NodeKind, NodeStatusSpec, Script, Source, Var
from htc.dag.splice import Scope, category_name, connect_pairs

if TYPE_CHECKING:
    from collections.abc import Callable

    from htc.dag.parser import _Parse

__all__ = ["COMMANDS", "resolve_path"]


def _int(p: _Parse, word: str, src: Source, cmd: str, what: str, *, low: int | None = None,
         high: int | None = None) -> int:
    try:
        value = int(word)
    except ValueError:
        value = None
    if value is None or (low is not None and value < low) or (high is not None and value > high):
        rng = f" (must be {low}..{high})" if high is not None else (
            f" (must be {low} or more)" if low is not None else " (must be an integer)")
        p.fail(src, cmd, f"Invalid {what} '{word}'{rng}")
    return value


def _need(p: _Parse, word: str, src: Source, cmd: str, missing: str) -> str:
    if not word:
        p.fail(src, cmd, missing)
    return word


def _end(p: _Parse, words: Words, src: Source, cmd: str) -> None:
    if extra := words.next():
        p.fail(src, cmd, f"Unexpected token '{extra}'")


def _sub(word: str) -> str:
    """A sub-keyword normalised: upper case, ``_`` as ``-`` (``unless_exit`` = ``UNLESS-EXIT``)."""
    return word.upper().replace("_", "-")


def resolve_path(base: str, path: str) -> str:
    """``path`` made absolute against ``base`` (an absolute, normalised directory)."""
    if "/" not in path and path not in (".", ".."):
        return f"{base}/{path}" if base != "/" else f"/{path}"   # the common case, fast
    return os.path.normpath(os.path.join(base, path))


# --- edges ----------------------------------------------------------------------------------
def parent_child(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str,
                 weak: bool = False) -> None:
    """``[WEAK] PARENT p1 [p2 ...] CHILD c1 [c2 ...]``: every parent -> every child."""
    first = words.next()
    if not first or first.upper() == "CHILD":
        p.fail(src, cmd, "No parent node(s) specified")
    parents, children, side = [first], [], "parents"
    while word := words.next():
        if word.upper() == "CHILD" and side == "parents":
            side = "children"
        elif side == "parents":
            parents.append(word)
        else:
            children.append(word)
    if side == "parents":
        p.fail(src, cmd, "Missing CHILD specifier")
    if not children:
        p.fail(src, cmd, "No children node(s) specified")
    ps = [n for name in parents for n in p.edge_ends(scope, name, src, cmd, True)]
    cs = [n for name in children for n in p.edge_ends(scope, name, src, cmd, False)]
    graph = p.dag.graph
    for parent in ps:
        for child in cs:
            p.dag.add_edge(parent, child, weak=weak)
            graph.edges[parent, child].setdefault("source", src)


def weak_parent(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``WEAK PARENT ... CHILD ...``: the child needs its parents only finished."""
    if words.next().upper() != "PARENT":
        p.fail(src, cmd, "WEAK must be followed by PARENT (WEAK PARENT p CHILD c)")
    parent_child(p, scope, words, src, cmd, weak=True)


# --- node settings --------------------------------------------------------------------------
def script(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``SCRIPT [DEFER status time] [DEBUG file STDOUT|STDERR|ALL] PRE|POST|HOLD node exe
    [args...]``."""
    defer_status, defer_time, debug = None, 0, None
    while True:
        word = words.next()
        kind = _sub(word)
        if kind in ("PRE", "POST", "HOLD"):
            break
        if kind == "DEFER":
            defer_status = _int(p, _need(p, words.next(), src, cmd, "DEFER missing status value"),
                                src, cmd, "DEFER status value")
            defer_time = _int(p, _need(p, words.next(), src, cmd, "DEFER missing time value"),
                              src, cmd, "DEFER time value", low=0)
        elif kind == "DEBUG":
            file = _need(p, words.next(trim_quotes=True), src, cmd, "DEBUG missing filename")
            stream = _need(p, words.next(), src, cmd,
                           "DEBUG missing output stream type (STDOUT, STDERR, ALL)").upper()
            if stream not in ("STDOUT", "STDERR", "ALL"):
                p.fail(src, cmd, f"Unknown DEBUG output stream type '{stream}'")
            debug = (file, stream)
        else:
            p.fail(src, cmd, "Missing script type (PRE, POST, HOLD) and optional sub-commands "
                             "(DEFER, DEBUG)")
    name = _need(p, words.next(), src, cmd, "No node name specified")
    text = _need(p, words.remain(), src, cmd, "No script specified")
    exe, *args = text.split()
    for node in p.nodes_named(scope, name, src, cmd):
        if kind in node.scripts:
            p.dag.warnings.append(f"{src} node {node.name} already has {kind} script "
                                  f"<{node.scripts[kind].executable}> assigned; changing to "
                                  f"<{exe}>")
        node.scripts[kind] = Script(
            kind=kind, executable=exe, args=list(args), defer_status=defer_status,
            defer_time=defer_time, debug_file=resolve_path(node.dir, debug[0]) if debug else None,
            debug_stream=debug[1] if debug else None, source=src)


def pre_skip(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``PRE_SKIP node|ALL_NODES exit-code``."""
    name = _need(p, words.next(), src, cmd, "No node name specified")
    code = _int(p, _need(p, words.next(), src, cmd, "Missing exit code"), src, cmd, "exit code",
                low=0, high=255)
    _end(p, words, src, cmd)
    for node in p.nodes_named(scope, name, src, cmd):
        node.pre_skip = code


#: node kinds that are not JOB nodes for DAGMan (a SUBDAG EXTERNAL node is a JOB node)
_NOT_JOBS = frozenset({NodeKind.FINAL, NodeKind.SERVICE, NodeKind.PROVISIONER})


def _not_final(p: _Parse, nodes: list, src: Source, cmd: str, what: str,
               kinds: frozenset[NodeKind] = _NOT_JOBS) -> None:
    """Refuse a setting DAGMan takes for JOB nodes only, on a node the command names
    (``DagProcessor``: "FINAL node X can not have a retry specification")."""
    for node in nodes:
        if node.kind in kinds:
            p.fail(src, cmd, f"{node.kind.value} node '{node.name}' cannot have {what}")


def retry(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``RETRY node|ALL_NODES N [UNLESS-EXIT code]``."""
    name = _need(p, words.next(), src, cmd, "No node name specified")
    word = _need(p, words.next(), src, cmd, "Missing max retry value")
    count = _int(p, word, src, cmd, "max retry value", low=0)
    unless = None
    if word := words.next():
        if _sub(word) != "UNLESS-EXIT":
            p.fail(src, cmd, f"Unexpected token '{word}'")
        unless = _int(p, _need(p, words.next(), src, cmd, "UNLESS-EXIT missing exit code"),
                      src, cmd, "UNLESS-EXIT code")
        _end(p, words, src, cmd)
    nodes = p.nodes_named(scope, name, src, cmd, jobs_only=True)
    _not_final(p, nodes, src, cmd, "retries")
    for node in nodes:
        node.retry, node.retry_unless_exit = count, unless


def abort_dag_on(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``ABORT-DAG-ON node|ALL_NODES status [RETURN 0..255]``."""
    name = _need(p, words.next(), src, cmd, "No node name specified")
    status = _int(p, _need(p, words.next(), src, cmd, "Missing exit status to abort on"),
                  src, cmd, "exit status")
    ret = None
    if word := words.next():
        if word.upper() != "RETURN":
            p.fail(src, cmd, f"Unexpected token '{word}'")
        ret = _int(p, _need(p, words.next(), src, cmd, "RETURN is missing value"), src, cmd,
                   "RETURN code", low=0, high=255)
        _end(p, words, src, cmd)
    nodes = p.nodes_named(scope, name, src, cmd)
    _not_final(p, nodes, src, cmd, "an ABORT-DAG-ON condition", frozenset({NodeKind.FINAL}))
    for node in nodes:
        node.abort_status, node.abort_return = status, ret


def vars_(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``VARS node|ALL_NODES [PREPEND|APPEND] key="value" ...``; ``+key`` is ``My.key``.

    A name given again for the same node (same case) sets the earlier variable's value, in its
    place, with a warning (DAGMan's ``Node::AddVar``): the last value wins.
    """
    name = _need(p, words.next(), src, cmd, "No node name specified")
    word = words.next()
    prepend = append = False
    if word.upper() in ("PREPEND", "APPEND"):
        prepend, append = word.upper() == "PREPEND", word.upper() == "APPEND"
        word = words.next()
    pairs = []
    while word:
        key, eq, value = word.partition("=")
        if not eq:
            p.fail(src, cmd, f"Non key=value token specified: {word}")
        if not key:
            p.fail(src, cmd, "Invalid key=value pair: Missing key")
        if key == "+":
            p.fail(src, cmd, "Variable name must contain at least one alphanumeric character")
        if key.startswith("+"):
            key = "My." + key[1:]
        if key.lower().startswith("queue"):
            p.fail(src, cmd, f"Illegal variable name '{key}': name can not begin with 'queue'")
        pairs.append((key, unquote(value)))
        word = words.next()
    if not pairs:
        p.fail(src, cmd, "No key=value pairs specified")
    for node in p.nodes_named(scope, name, src, cmd):
        for key, value in pairs:
            old = next((v for v in node.vars if v.name == key), None)
            if old is None:
                node.vars.append(Var(key, value, prepend=prepend, append=append))
            else:                   # DAGMan keeps the variable's place and sets its value
                p.dag.warnings.append(f"{src} VARS {key} is already defined in node "
                                      f"{node.name}; setting it to {value!r}")
                old.value = value


def priority(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``PRIORITY node|ALL_NODES int``."""
    name = _need(p, words.next(), src, cmd, "No node name specified")
    value = _int(p, _need(p, words.next(), src, cmd, "Missing priority value"), src, cmd,
                 "priority value")
    _end(p, words, src, cmd)
    nodes = p.nodes_named(scope, name, src, cmd, jobs_only=True)
    _not_final(p, nodes, src, cmd, "a priority")
    for node in nodes:
        node.priority = value


def category(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``CATEGORY node|ALL_NODES category`` (scoped by splice unless it starts with ``+``)."""
    name = _need(p, words.next(), src, cmd, "No node name specified")
    cat = _need(p, words.next(), src, cmd, "No category name specified")
    _end(p, words, src, cmd)
    nodes = p.nodes_named(scope, name, src, cmd, jobs_only=True)
    _not_final(p, nodes, src, cmd, "a category")
    for node in nodes:
        node.category = category_name(scope, cat)


def tolerance(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``TOLERANCE node|ALL_NODES N[%] [FAIL-FAST|WAIT]``."""
    name = _need(p, words.next(), src, cmd, "No node name specified")
    value = _need(p, words.next(), src, cmd, "Missing tolerance value")
    _int(p, value[:-1] if value.endswith("%") else value, src, cmd, "tolerance value", low=0)
    mode = None
    if word := words.next():
        mode = _sub(word)
        if mode not in ("FAIL-FAST", "WAIT"):
            p.fail(src, cmd, f"Unexpected token '{word}' (FAIL-FAST or WAIT)")
        _end(p, words, src, cmd)
    for node in p.nodes_named(scope, name, src, cmd):
        node.tolerance, node.tolerance_mode = value, mode


def done(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``DONE node``: the node is already done (rescue DAGs write it)."""
    name = _need(p, words.next(), src, cmd, "No node name specified")
    _end(p, words, src, cmd)
    nodes = p.nodes_named(scope, name, src, cmd, all_nodes=False)
    _not_final(p, nodes, src, cmd, "DONE (it always runs)")
    for node in nodes:
        node.done = True


def save_point_file(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``SAVE_POINT_FILE node [file]``; a bare file name goes in ``save_files/``."""
    name = _need(p, words.next(), src, cmd, "No node name specified")
    file = words.next(trim_quotes=True) or f"{name}-{os.path.basename(src.file)}.save"
    _end(p, words, src, cmd)
    nodes = p.nodes_named(scope, name, src, cmd, all_nodes=False)
    _not_final(p, nodes, src, cmd, "a save point file")
    for node in nodes:
        base = scope.base_dir if os.sep in file else os.path.join(scope.base_dir, "save_files")
        node.save_point = resolve_path(base, file)


# --- DAG-wide settings ----------------------------------------------------------------------
def maxjobs(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``MAXJOBS category N`` (a splice's category is scoped, ``MAXJOBS D0+cat1 12``)."""
    cat = _need(p, words.next(), src, cmd, "No category name specified")
    limit = _int(p, _need(p, words.next(), src, cmd, "No throttle limit specified"), src, cmd,
                 "throttle limit", low=0)
    _end(p, words, src, cmd)
    p.dag.maxjobs[category_name(scope, cat)] = limit


def config(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``CONFIG file``: DAGMan's own configuration; one file per DAG."""
    file = _need(p, words.next(trim_quotes=True), src, cmd, "No configuration file specified")
    _end(p, words, src, cmd)
    path = resolve_path(scope.base_dir, file)
    if p.dag.config is not None and p.dag.config != path:
        p.fail(src, cmd, f"a DAG takes one configuration file, and {p.dag.config} was given "
                         f"before {path}; merge them into one")
    p.dag.config = path


def set_job_attr(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``SET_JOB_ATTR Attr = value``: an attribute of the DAGMan job's ad (last one wins)."""
    line = _need(p, words.remain(), src, cmd, "No attribute line (key = value) provided")
    key, eq, value = line.partition("=")
    if not eq or not key.strip() or not value.strip():
        p.fail(src, cmd, f"'{line}' is not an attribute line (Attr = value)")
    p.dag.set_job_attrs[key.strip()] = value.strip()


def env(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``ENV GET VAR1 [VAR2 ...]`` or ``ENV SET K=V;K2=V2`` (the DAGMan job's environment)."""
    action = _need(p, words.next(), src, cmd, "Missing action (SET or GET) and variables").upper()
    if action not in ("SET", "GET"):
        p.fail(src, cmd, f"Unexpected token '{action}' (SET or GET)")
    rest = _need(p, words.remain(), src, cmd, "No environment variables provided")
    if action == "GET":
        p.dag.env_get.extend(rest.replace(",", " ").split())
        return
    for item in filter(None, (i.strip() for i in rest.split(";"))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            p.fail(src, cmd, f"'{item}' is not KEY=VALUE")
        p.dag.env_set.append((key.strip(), value.strip()))


def dot(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``DOT file [UPDATE|DONT-UPDATE] [OVERWRITE|DONT-OVERWRITE] [INCLUDE header]``."""
    spec = DotSpec(resolve_path(scope.base_dir, _need(p, words.next(trim_quotes=True), src, cmd,
                                                  "No file specified")))
    while word := words.next():
        option = _sub(word)
        if option in ("UPDATE", "DONT-UPDATE"):
            spec.update = option == "UPDATE"
        elif option in ("OVERWRITE", "DONT-OVERWRITE"):
            spec.overwrite = option == "OVERWRITE"
        elif option == "INCLUDE":
            header = _need(p, words.next(trim_quotes=True), src, cmd, "Missing INCLUDE header file")
            spec.include = resolve_path(scope.base_dir, header)
        else:
            p.fail(src, cmd, f"Unexpected token '{word}'")
    p.dag.dot = spec


def node_status_file(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``NODE_STATUS_FILE file [min-update-seconds] [ALWAYS-UPDATE]``; the first one counts."""
    spec = NodeStatusSpec(resolve_path(scope.base_dir, _need(p, words.next(trim_quotes=True), src, cmd,
                                                         "No file specified")))
    while word := words.next():
        if _sub(word) == "ALWAYS-UPDATE":
            spec.always_update = True
        else:
            spec.min_update = _int(p, word, src, cmd, "minimum update time", low=0)
    if p.dag.node_status is not None:
        p.dag.warnings.append(f"{src} NODE_STATUS_FILE {spec.file} does not override the "
                              f"earlier {p.dag.node_status.file}")
        return
    p.dag.node_status = spec


def jobstate_log(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``JOBSTATE_LOG file``; the first one counts."""
    path = resolve_path(scope.base_dir, _need(p, words.next(trim_quotes=True), src, cmd,
                                          "No jobstate log file specified"))
    _end(p, words, src, cmd)
    if p.dag.jobstate_log is not None:
        p.dag.warnings.append(f"{src} JOBSTATE_LOG {path} does not override the earlier "
                              f"{p.dag.jobstate_log}")
        return
    p.dag.jobstate_log = path


def reject(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``REJECT``: the DAG must not run (where it was said is kept for the message)."""
    _end(p, words, src, cmd)
    if p.dag.reject is None:
        p.dag.reject = src


# --- splice pins ----------------------------------------------------------------------------
def connect(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``CONNECT splice1 splice2``: splice1's PIN_OUT n nodes -> splice2's PIN_IN n nodes."""
    names = words.next(), words.next()
    if not all(names):
        p.fail(src, cmd, "Missing splice(s) to connect")
    _end(p, words, src, cmd)
    splices = [scope.splice(n) for n in names]
    for name, inner in zip(names, splices):
        if inner is None:
            p.fail(src, cmd, f"Unknown splice '{name}': CONNECT joins two SPLICEs of this file")
    try:
        pairs = connect_pairs(*splices)
    except ValueError as e:
        p.fail(src, cmd, str(e))
    for parent, child in pairs:
        p.dag.add_edge(parent, child)
        p.dag.graph.edges[parent, child].setdefault("source", src)


def pin(p: _Parse, scope: Scope, words: Words, src: Source, cmd: str) -> None:
    """``PIN_IN node n`` / ``PIN_OUT node n`` (n >= 1): the node is on pin n of its splice."""
    name = _need(p, words.next(), src, cmd, "No node name specified")
    number = _int(p, _need(p, words.next(), src, cmd, "No pin number specified"), src, cmd,
                  "pin number", low=1)
    _end(p, words, src, cmd)
    pins = scope.pins_in if cmd.upper().replace("-", "_") == "PIN_IN" else scope.pins_out
    for node in p.nodes_named(scope, name, src, cmd, all_nodes=False):
        pins.setdefault(number, []).append(node.name)


#: keyword (upper case, "-" as "_") -> handler, for every command of the second pass
COMMANDS: dict[str, Callable[[_Parse, Scope, Words, Source, str], None]] = {
    "PARENT": parent_child, "WEAK": weak_parent, "SCRIPT": script, "PRE_SKIP": pre_skip,
    "RETRY": retry, "ABORT_DAG_ON": abort_dag_on, "VARS": vars_, "PRIORITY": priority,
    "CATEGORY": category, "TOLERANCE": tolerance, "DONE": done,
    "SAVE_POINT_FILE": save_point_file, "MAXJOBS": maxjobs, "CONFIG": config,
    "SET_JOB_ATTR": set_job_attr, "ENV": env, "DOT": dot, "NODE_STATUS_FILE": node_status_file,
    "JOBSTATE_LOG": jobstate_log, "REJECT": reject, "CONNECT": connect, "PIN_IN": pin,
    "PIN_OUT": pin,
}

"""Splice scopes: the namespace of one DAG file inside the whole DAG.

Theory of operation
-------------------
``SPLICE S file.dag`` inlines ``file.dag`` at parse time: each node ``X`` it defines becomes
``S+X`` in the whole DAG (nested: ``outer+inner+X``). A :class:`Scope` is one such namespace: the
primary file (prefix ``""``) or one splice (prefix ``"S+"``, ``"outer+inner+"``); the files a
scope INCLUDEs are part of it (INCLUDE is textual).

Inside a scope, names are the scope's own: ``VARS X ...`` in a splice means ``S+X``; a name with
a ``+`` reaches into a nested splice (``PARENT D0+A1 CHILD ...``), never out of the scope.
``ALL_NODES`` means the nodes the scope's own text defines (not those of its splices), without
FINAL and SERVICE nodes. A category name is scoped the same way (``cat1`` in splice ``D0`` is
``D0+cat1``) unless it starts with ``+`` (a global category, kept as written, ``+catS``).

A splice named in PARENT/CHILD stands for its *initial* nodes on the child side (those with no
parent inside the splice) and its *terminal* nodes on the parent side (no child inside it).
``CONNECT S1 S2`` joins the two splices pin by pin: every node S1 declares ``PIN_OUT node n`` for
becomes a parent of every node S2 declares ``PIN_IN node n`` for, for each pin number n; both
must number their pins 1..N with the same N.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

__all__ = ["Scope", "category_name", "connect_pairs"]


@dataclass
class Scope:
    """One DAG file's namespace (the primary file or a splice) while the DAG is being parsed."""

    file: str                      # the scope's DAG file (absolute)
    base_dir: str                  # relative paths in it resolve against this directory
    prefix: str = ""               # "" for the primary file, "S+" / "outer+inner+" for splices
    #: the prefix of category names: the splice prefix, but "" in a top-level file even when
    #: its node names are munged ("0." with several DAG files, as DAGMan does)
    category_prefix: str = ""
    #: full names of the nodes this scope's own text (and its INCLUDEs) defines, in order
    local: list[str] = field(default_factory=list)
    #: full names of every node in the scope, its splices' nodes too
    members: list[str] = field(default_factory=list)
    splices: dict[str, Scope] = field(default_factory=dict)
    pins_in: dict[int, list[str]] = field(default_factory=dict)
    pins_out: dict[int, list[str]] = field(default_factory=dict)
    _ends: tuple[list[str], list[str]] | None = None

    def full(self, name: str) -> str:
        """The full name of the node this scope calls ``name``."""
        return self.prefix + name

    def splice(self, name: str) -> Scope | None:
        """The splice this scope calls ``name`` (``inner`` or ``inner+deeper``), if any."""
        scope: Scope | None = self
        for part in name.split("+"):
            scope = scope.splices.get(part) if scope is not None else None
        return scope if scope is not self else None

    def ends(self, graph: nx.DiGraph) -> tuple[list[str], list[str]]:
        """The splice's (initial, terminal) nodes: no parent / no child inside the splice.

        Computed once, when the includer first names the splice in PARENT/CHILD: by then the
        splice's own edges are all in ``graph`` (a splice is parsed whole before its includer's
        second pass), and edges added later from outside do not change them.
        """
        if self._ends is None:
            inside = set(self.members)
            initial = [n for n in self.members
                       if not any(p in inside for p in graph.predecessors(n))]
            terminal = [n for n in self.members
                        if not any(c in inside for c in graph.successors(n))]
            self._ends = (initial, terminal)
        return self._ends


def category_name(scope: Scope, name: str) -> str:
    """A category's full name: global (``+cat``) as written, else scoped by the splice."""
    return name if name.startswith("+") else scope.category_prefix + name


def connect_pairs(out_scope: Scope, in_scope: Scope) -> list[tuple[str, str]]:
    """The (parent, child) edges of ``CONNECT out_scope in_scope``.

    Raises:
        ValueError: the pins do not match (the message says which); the caller adds the line.
    """
    outs, ins = out_scope.pins_out, in_scope.pins_in
    for what, scope, pins in (("PIN_OUT", out_scope, outs), ("PIN_IN", in_scope, ins)):
        if not pins:
            raise ValueError(f"splice {scope.prefix[:-1]!r} declares no {what} pins")
        missing = [i for i in range(1, max(pins) + 1) if i not in pins]
        if missing:
            raise ValueError(f"splice {scope.prefix[:-1]!r} has {what} pins up to {max(pins)} "
                             f"but none numbered {', '.join(map(str, missing))}; "
                             "number pins 1, 2, ... without gaps")
    if len(outs) != len(ins):
        raise ValueError(f"splice {out_scope.prefix[:-1]!r} has {len(outs)} PIN_OUT pins but "
                         f"splice {in_scope.prefix[:-1]!r} has {len(ins)} PIN_IN pins; "
                         "CONNECT needs the same number on both sides")
    return [(p, c) for i in sorted(outs) for p in outs[i] for c in ins[i]]

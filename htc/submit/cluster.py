"""A submitted cluster: the common cluster ad and fast per-proc ads.

Theory of operation
-------------------
For each queue statement the planner builds the statement's first proc completely, with
tracing (:func:`htc.submit.builder.run_commands`).  Commands that touched a per-proc macro
(Process, Step, Row, ItemIndex, Item, the loop variables, $RANDOM_*) -- and commands that
depend on their output -- are *per-proc*; the others give the same result for every proc.
The first statement's first proc, minus the per-proc attributes, is the cluster ad.

A later proc re-runs only the per-proc commands over its statement's static attributes,
reading through to proc 0's ad as HTCondor's proc ads read through to their cluster ad.
When the per-proc values are all plain numbers or plain words, the per-proc commands are
also run with two sets of *sentinel* values; if their outputs are the sentinels' text
substituted in, and that substitution reproduces two real procs exactly, each per-proc
attribute becomes a ``str.format`` template and a proc costs a few string formats.
Anything else (random choices, unit arithmetic, thresholds, odd item values) takes the
exact path of re-running the commands.

Every result is deterministic: $RANDOM_* draws from a generator seeded by the job id, so
``Submit(text, cwd=...).cluster(c).proc_ads(a, b)`` re-materialises the same procs later.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from htc.submit.builder import COMMANDS, Trace, dynamic_commands, run_commands
from htc.submit.commands import set_iwd
from htc.submit.context import Attr, JobContext, Universe
from htc.submit.errors import SubmitError
from htc.submit.macros import PER_PROC_NAMES, Expander
from htc.submit.parser import QueueStatement
from htc.submit.queue import load_items, selected_rows, split_item

#: the iwd command's place in the table: a later proc that does not re-run it takes proc 0's iwd
_IWD_INDEX = COMMANDS.index(set_iwd)
_INT_VALUE = re.compile(r"(0|[1-9][0-9]{0,8})\Z")
_WORD_VALUE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*\Z")
_NOT_WORDS = frozenset({"true", "false", "undefined", "error", "is", "isnt", "my", "target",
                        "parent", "yes", "no", "t", "f"})
_INT_SENTINELS = ("314159265", "271828182", "161803398", "141421356", "173205080", "223606797",
                  "264575131", "244948974", "282842712", "316227766", "331662479", "346410161")


@dataclass
class Proc:
    """Who a proc is: its id and the per-proc macro values it expands with."""

    proc_id: int
    step: int
    row: int
    loop: tuple[str, ...]


@dataclass
class StatementPlan:
    """One queue statement's procs and how to build their per-proc ads."""

    stmt: QueueStatement
    loop_names: tuple[str, ...]
    rows: list[tuple[int, tuple[str, ...]]]
    count: int
    first: int
    dyn: list[int] = field(default_factory=list)
    base: dict[str, Attr] = field(default_factory=dict)
    volatile: set[str] = field(default_factory=set)
    static_part: dict[str, str] = field(default_factory=dict)
    first_ad: dict[str, str] = field(default_factory=dict)
    templates: list[tuple[str, str]] | None = None

    @property
    def num_procs(self) -> int:
        """How many procs the statement queues."""
        return len(self.rows) * self.count

    def proc(self, i: int) -> Proc:
        """The ``i``-th proc of the statement (0-based)."""
        row, loop = self.rows[i // self.count]
        return Proc(self.first + i, i % self.count, row, loop)


def statement_rows(stmt: QueueStatement, cwd: str, env: dict[str, str], host_access: bool = True
                   ) -> tuple[tuple[str, ...], list[tuple[int, tuple[str, ...]]]]:
    """The loop variable names and (row, values) of every selected item of a statement."""
    qa = stmt.args
    names = tuple(qa.loop_vars)
    if not qa.mode:
        return names, [(0, ())]
    try:
        items = load_items(qa, cwd, env, host_access)
    except SubmitError as e:
        raise e.located(file=stmt.file, line=stmt.line, command="queue") from None
    rows = []
    current = ("",) * len(names)
    for r in selected_rows(qa, len(items)):
        values = split_item(items[r], len(names))
        if values is not None:
            current = tuple(values)
        rows.append((r, current))
    return names, rows


class Materializer:
    """Builds job ads for the procs of one cluster (see the module docstring)."""

    def __init__(self, sub, cluster_id: int, qdate: int, owner: str | None, first_proc: int = 0,
                 fast: bool = True, check=None, varying: frozenset[str] = frozenset()):
        self.sub = sub
        #: names (lower case) whose values change between submissions of this description
        #: (:mod:`htc.submit.reuse`): their use is traced as a per-proc macro's is
        self.varying = varying
        #: with ``varying``: what the reuse needs from the first proc's run (see :meth:`_analyse`)
        self.reuse_info: dict | None = None
        self.fast = fast
        self.cluster_id = cluster_id
        self.qdate = qdate
        self.owner = owner
        self.first_proc = first_proc
        self.defaults = sub.defaults_at(qdate)
        self.universe: Universe | None = None
        self.plans: list[StatementPlan] = []
        self.cluster_ad: dict[str, str] = {}
        self.proc0: dict[str, Attr] = {}
        self.warnings: list[str] = []
        first = first_proc
        for stmt in sub._description().queues:
            names, rows = statement_rows(stmt, sub.cwd, sub.env, sub.host_access)
            plan = StatementPlan(stmt, names, rows, stmt.args.count, first)
            first += plan.num_procs
            if plan.num_procs:
                self.plans.append(plan)
        self.num_procs = first - first_proc
        if check is not None:  # the procs are counted; none is built yet (limits refuse here)
            check(self.num_procs)
        for plan in self.plans:
            self._analyse(plan)

    # -- building one proc -----------------------------------------------------------------
    def context(self, plan: StatementPlan, p: Proc, base, values=None) -> JobContext:
        """A fresh build context for proc ``p``; ``values`` overrides its per-proc values."""
        sub = self.sub
        per_proc = PER_PROC_NAMES | {n.lower() for n in plan.loop_names} | self.varying
        pid, step, row = (str(p.proc_id), str(p.step), str(p.row)) if values is None else values[:3]
        loop_values = p.loop if values is None else values[3:]
        defaults = dict(self.defaults)
        defaults.update({"cluster": str(self.cluster_id), "clusterid": str(self.cluster_id),
                         "process": pid, "procid": pid, "step": step, "row": row,
                         "itemindex": row})
        if self.universe is not None and self.universe.number == 11:
            defaults["node"] = "#pArAlLeLnOdE#"
        loop = {n.lower(): v for n, v in zip(plan.loop_names, loop_values)}
        rng = random.Random(f"{self.cluster_id}.{p.proc_id}")
        ex = Expander(plan.stmt.macros, defaults, loop, sub.env, sub.cwd, rng, per_proc)
        ctx = JobContext(settings=sub.settings, expander=ex, base=base, cluster_id=self.cluster_id,
                         proc_id=p.proc_id, qdate=self.qdate, owner=self.owner, cwd=sub.cwd,
                         submit_file=sub.filename, universe=self.universe,
                         queue_line=plan.stmt.line, file=plan.stmt.file)
        ctx.host_access = sub.host_access
        ctx.check_file = sub.check_file if sub.host_access else None
        return ctx

    def _analyse(self, plan: StatementPlan) -> None:
        from htc.submit.commands import find_universe

        p = plan.proc(0)
        base = self.proc0 if self.plans and plan is not self.plans[0] else None
        ctx = self.context(plan, p, base)
        if self.varying:
            self._log_host(ctx)
        if self.universe is None:
            self.universe = ctx.universe = find_universe(ctx)
            if self.universe.number == 11:
                ctx.ex.defaults["node"] = "#pArAlLeLnOdE#"
        before = (set(ctx.ex.touched), len(ctx.warnings))
        traces: list[Trace] = []
        run_commands(ctx, None, traces)
        if self.varying and base is None:
            self.reuse_info = {"ctx": ctx, "traces": traces, "universe_touched": before[0],
                               "pre_warnings": ctx.warnings[:before[1]]}
        self.warnings.extend(ctx.warnings)
        final = dict(base or {})
        final.update(ctx.out)
        per_proc = PER_PROC_NAMES | {n.lower() for n in plan.loop_names}
        plan.dyn = dynamic_commands(traces, per_proc) if plan.num_procs > 1 else []
        plan.volatile = {a for t in traces if t.index in plan.dyn for a in t.writes}
        if base is None:
            self.proc0 = final
            self.cluster_ad = {a.name: a.text for k, a in final.items() if k not in plan.volatile}
        plan.base = dict(self.proc0)
        plan.base.update({k: a for k, a in ctx.out.items() if k not in plan.volatile})
        plan.static_part = {a.name: a.text for k, a in final.items()
                            if k not in plan.volatile and self.cluster_ad.get(a.name) != a.text}
        plan.first_ad = {a.name: a.text for k, a in final.items()
                         if k in plan.volatile or a.name in plan.static_part}
        if self.fast and plan.dyn and plan.num_procs > 2 and \
                not any(t.random for t in traces if t.index in plan.dyn):
            plan.templates = self._templates(plan)

    @staticmethod
    def _log_host(ctx: JobContext) -> None:
        """Record the host lookups of ``ctx``'s commands: file stats, and each ``check_file``
        call as ``(index, None, (role, path, transfer))`` (a reuse calls it again)."""
        ctx.host_log = []
        real = ctx.check_file
        if real is None:
            return

        def check(role: str, path: str, transfer: bool) -> None:
            ctx.host_log.append((ctx.command_index, None, (role, path, transfer)))
            real(role, path, transfer)

        ctx.check_file = check

    def _run_dynamic(self, plan: StatementPlan, p: Proc, values=None) -> dict[str, str]:
        ctx = self.context(plan, p, plan.base, values)
        if _IWD_INDEX not in plan.dyn:
            ctx.ex.cwd = ctx.iwd  # (run_commands sets it after the iwd command, not re-run here)
        run_commands(ctx, plan.dyn)
        out = {a.name: a.text for a in ctx.out.values()}
        for k in plan.volatile:
            if k not in ctx.out and k in plan.base:
                a = plan.base[k]
                out[a.name] = a.text
        return out

    def proc_ad(self, plan: StatementPlan, i: int) -> dict[str, str]:
        """The per-proc attributes of the ``i``-th proc of a statement (exact path)."""
        p = plan.proc(i)
        if i == 0:
            ad = dict(plan.first_ad)
        else:
            ad = dict(plan.static_part)
            ad.update(self._run_dynamic(plan, p))
        ad["ProcId"] = str(p.proc_id)
        return ad

    # -- templates ---------------------------------------------------------------------
    def _value_classes(self, plan: StatementPlan) -> list[str] | None:
        classes = ["int", "int", "int"]
        for j in range(len(plan.loop_names)):
            vals = {loop[j] for _, loop in plan.rows}
            if all(_INT_VALUE.match(v) for v in vals):
                classes.append("int")
            elif all(_WORD_VALUE.match(v) and v.split(".")[0].lower() not in _NOT_WORDS
                     for v in vals):
                classes.append("word")
            else:
                return None
        return classes

    def _templates(self, plan: StatementPlan) -> list[tuple[str, str]] | None:
        classes = self._value_classes(plan)
        if classes is None or len(classes) * 2 > len(_INT_SENTINELS):
            return None
        sentinels = []
        for k, cls in enumerate(classes):
            if cls == "int":
                sentinels.append((_INT_SENTINELS[2 * k], _INT_SENTINELS[2 * k + 1]))
            else:
                sentinels.append((f"htcSentinel{k}a", f"htcSentinel{k}b"))
        a_vals = tuple(s[0] for s in sentinels)
        b_vals = tuple(s[1] for s in sentinels)
        p1 = plan.proc(1)
        try:
            out_a = self._run_dynamic(plan, p1, a_vals)
            out_b = self._run_dynamic(plan, p1, b_vals)
        except SubmitError:
            return None
        if out_a.keys() != out_b.keys():
            return None
        templates = []
        for name, text in out_a.items():
            fmt = text.replace("{", "{{").replace("}", "}}")
            for k, s in enumerate(a_vals):
                fmt = fmt.replace(s, "{%d}" % k)
            if fmt.format(*b_vals) != out_b[name]:
                return None
            templates.append((name, fmt))
        checks = [1, 2] + ([plan.num_procs - 1] if plan.num_procs > 3 else [])
        for i in checks:
            exact = self.proc_ad(plan, i)
            if exact != self._templated_ad(plan, i, templates):
                return None
        return templates

    def _templated_ad(self, plan: StatementPlan, i: int, templates) -> dict[str, str]:
        row, loop = plan.rows[i // plan.count]
        pid = plan.first + i
        values = (str(pid), str(i % plan.count), str(row)) + loop
        ad = dict(plan.static_part)
        for name, fmt in templates:
            ad[name] = fmt.format(*values)
        ad["ProcId"] = str(pid)
        return ad

    def proc_ads(self, start: int, stop: int) -> Iterator[dict[str, str]]:
        """Per-proc ads for ProcIds ``start`` (inclusive) to ``stop`` (exclusive)."""
        for plan in self.plans:
            lo = max(start, plan.first)
            hi = min(stop, plan.first + plan.num_procs)
            if lo >= hi:
                continue
            templates = plan.templates
            if templates is None:
                for pid in range(lo, hi):
                    yield self.proc_ad(plan, pid - plan.first)
                continue
            yield from self._fast(plan, lo, hi, templates)

    def _fast(self, plan: StatementPlan, lo: int, hi: int, templates) -> Iterator[dict[str, str]]:
        static = plan.static_part
        count = plan.count
        rows = plan.rows
        first = plan.first
        if lo == first:
            yield self.proc_ad(plan, 0)
            lo += 1
        # attributes written by per-proc commands but the same for every proc need no format
        static = dict(static)
        static.update({n: f for n, f in templates if "{" not in f})
        pairs = [(n, f.format) for n, f in templates if "{" in f]
        for pid in range(lo, hi):
            i = pid - first
            row, loop = rows[i // count]
            spid = str(pid)
            values = (spid, str(i % count), str(row)) + loop
            ad = static.copy()
            for name, fmt in pairs:
                ad[name] = fmt(*values)
            ad["ProcId"] = spid
            yield ad


class SubmittedCluster:
    """A cluster ready for the job queue: one cluster ad and lazily built per-proc ads.

    ``cluster_ad | proc_ad`` is the complete job ad of a proc (attribute -> ClassAd
    expression text, in old ClassAd syntax as HTCondor's job queue stores it: a backslash in
    a string is literal; parse with ``htc.classad.parseOne(text, ParserType.Old)``).  To materialise procs later (``max_materialize``/``max_idle``),
    store :attr:`submit_text`, :attr:`cwd`, :attr:`filename`, :attr:`env`, :attr:`qdate`
    and :attr:`owner`, and call ``Submit(submit_text, filename=..., cwd=..., env=...)
    .cluster(cluster_id, qdate=..., owner=...).proc_ads(start, stop)``.
    """

    def __init__(self, m: Materializer):
        self._m = m
        self.cluster_id = m.cluster_id
        self.first_proc = m.first_proc
        self.cluster_ad: dict[str, str] = m.cluster_ad
        self.num_procs: int = m.num_procs
        self.submit_text: str = m.sub.submit_text
        self.cwd: str = m.sub.cwd
        self.filename: str | None = m.sub.filename
        self.env: Mapping[str, str] = m.sub.env
        self.qdate: int = m.qdate
        self.owner: str | None = m.owner
        self.warnings: list[str] = m.warnings

    @property
    def items(self) -> list[dict[str, str]]:
        """Per-proc loop values (lower-case names), one entry per proc, for inspection."""
        out = []
        for plan in self._m.plans:
            for i in range(plan.num_procs):
                p = plan.proc(i)
                out.append({n: v for n, v in zip(plan.loop_names, p.loop)})
        return out

    def proc_ads(self, start: int | None = None, stop: int | None = None
                 ) -> Iterator[dict[str, str]]:
        """Yield the per-proc attributes (``ProcId`` and per-proc commands) of procs.

        Args:
            start: first ProcId (inclusive); default the cluster's first.
            stop: last ProcId (exclusive); default all.
        Raises:
            SubmitError: a per-proc value is invalid for some proc (nothing is yielded past it).
        """
        end = self.first_proc + self.num_procs
        stop = end if stop is None else min(stop, end)
        start = self.first_proc if start is None else max(self.first_proc, start)
        return self._m.proc_ads(start, stop)

    def job_ads(self, start: int | None = None, stop: int | None = None
                ) -> Iterator[dict[str, str]]:
        """Yield complete job ads as text dicts (``cluster_ad | proc_ad``)."""
        for pad in self.proc_ads(start, stop):
            ad = dict(self.cluster_ad)
            ad.update(pad)
            yield ad

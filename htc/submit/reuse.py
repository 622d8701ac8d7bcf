"""Expanding one description again for a submission that differs only in some command values.

Theory of operation
-------------------
A DAG manager submits the same submit description for thousands of nodes; each node adds
its own ``-append`` commands (its VARS, ``JOB``, ``+DAGNodeName``, ``submit_event_notes``,
...) whose *names* are the same from node to node and whose *values* differ. Expanding the
description for every node runs every submit command again, though most of them never look
at those values.

:meth:`Reusable.analyse` expands the first submission completely, with the appended names as
*varying* names: the expander records which command looked one up (directly, through another
macro, through a macro function, or as a ``+attr`` value), as the cluster planner records the
use of ``$(Process)`` (:mod:`htc.submit.cluster`). Those commands, and every command that
reads an attribute one of them wrote or writes one they write
(:func:`htc.submit.builder.dynamic_commands`), are the *node commands*; the attributes the
others wrote are the same for every value of the varying names.

:meth:`Reusable.cluster` builds a later submission (the same description, cwd, file name,
settings, environment, submit time and appended names; other values) by running only the node
commands over those attributes, in their order, with the later submission's macros. What is
not a pure function of the description is checked again: each file or directory a skipped
command looked at (the initial directory, a file whose size it measured) must have the same
stat signature as before, and each ``check_file`` call a skipped command made (the
executable's check) is made again, in command order, so that it raises what a fresh
expansion would raise. The result is refused (None: the caller expands afresh) when it could
differ from a fresh expansion: a node command wrote an attribute it did not write before, a
measured directory (its contents have no signature), a universe that depends on a varying
name, more than one proc or queue statement.
"""

from __future__ import annotations

from htc.submit.builder import COMMANDS, Trace, dynamic_commands, run_commands
from htc.submit.cluster import Materializer, StatementPlan, SubmittedCluster
from htc.submit.context import stat_signature

__all__ = ["Reusable", "varying_name"]

_IWD_INDEX = next(i for i, c in enumerate(COMMANDS) if c.__name__ == "set_iwd")


def varying_name(command: str) -> str:
    """The macro name (lower case) a ``-append`` command sets: ``+X`` and ``-X`` set ``my.x``."""
    return ("my." + command[1:] if command[:1] in "+-" else command).lower()


class Reusable:
    """What a later submission of an analysed description can reuse (see the module docstring)."""

    def __init__(self, m: Materializer):
        info = m.reuse_info
        ctx, traces = info["ctx"], info["traces"]
        self.m = m
        self.plan = m.plans[0]
        self.dyn = dynamic_commands(traces, m.varying)
        dyn = set(self.dyn)
        #: per node command, the attributes it wrote (a later run may write no others)
        self.writes = {t.index: set(t.writes) for t in traces if t.index in dyn}
        volatile = {a for w in self.writes.values() for a in w}
        self.base = {k: a for k, a in ctx.out.items() if k not in volatile}
        self.order = list(ctx.out)
        self.iwd_cwd = None if _IWD_INDEX in dyn else ctx.ex.cwd
        #: per node command, the attributes commands after it that are not re-run wrote: it must
        #: not read them (it would see their values, which a fresh run writes only later)
        self.later: dict[int, set[str]] = {}
        written: set[str] = set()
        for t in reversed(traces):
            if t.index in dyn:
                self.later[t.index] = set(written)
            else:
                written.update(t.writes)
        self.warnings: dict[int, list[str]] = {t.index: t.warnings for t in traces}
        self.pre_warnings = info["pre_warnings"]
        self.stats = [(path, sig) for i, path, sig in ctx.host_log if path is not None and i not in dyn]
        self.checks: dict[int, list[tuple]] = {}
        for i, path, call in ctx.host_log:
            if path is None and i not in dyn:
                self.checks.setdefault(i, []).append(call)

    @classmethod
    def analyse(cls, sub, clusterid: int, qdate: int, varying: frozenset[str], check=None
                ) -> tuple[SubmittedCluster, Reusable | None]:
        """Expand ``sub`` completely (the result is ``sub.cluster(...)``'s) and say what a later
        submission with other values of the ``varying`` names can reuse (None: nothing).

        Raises:
            SubmitError: as ``sub.cluster`` does.
        """
        cluster = sub.cluster(clusterid, qdate=qdate, check=check, varying=varying)
        m = cluster._m
        info = m.reuse_info
        reusable = (info is not None and len(m.plans) == 1 and m.num_procs == 1 and sub._qargs is None
                    and not (info["universe_touched"] & varying)
                    and all(sig is not None for _, _, sig in info["ctx"].host_log))
        return cluster, (cls(m) if reusable else None)

    def cluster(self, sub, check=None) -> SubmittedCluster | None:
        """``sub``'s cluster (``sub`` is the analysed description with other values of the
        varying names), exactly as ``sub.cluster`` would build it; None when that cannot be
        shown (the caller expands ``sub`` afresh).

        Raises:
            SubmitError: as a fresh expansion of ``sub`` raises it.
        """
        m0 = self.m
        for path, sig in self.stats:
            if stat_signature(path) != sig:
                return None  # the host changed under a skipped command: expand afresh
        if check is not None:
            check(1)
        m = Materializer.__new__(Materializer)
        m.__dict__.update(m0.__dict__)
        m.sub = sub
        m.reuse_info = None
        stmt = sub._description().queues[0]
        p0 = self.plan
        plan = StatementPlan(stmt, p0.loop_names, p0.rows, p0.count, p0.first)
        ctx = m.context(plan, plan.proc(0), self.base)
        if self.iwd_cwd is not None:
            ctx.ex.cwd = self.iwd_cwd
        warnings = list(self.pre_warnings)
        dyn = self.writes
        for i in range(len(COMMANDS)):
            if i in dyn:
                traces: list[Trace] = []
                run_commands(ctx, [i], traces)
                t = traces[0]
                later = self.later[i]
                if not set(t.writes) <= dyn[i] or t.reads & later or (
                        "*" in t.reads and any(a.lower().startswith("request") for a in later)):
                    return None  # it wrote what it did not write before, or read ahead: not provably the same
                warnings.extend(t.warnings)
                continue
            if ctx.check_file is not None:
                for call in self.checks.get(i, ()):
                    ctx.check_file(*call)
            warnings.extend(self.warnings.get(i, ()))
        final = {k: ctx.out[k] if k in ctx.out else self.base[k]
                 for k in self.order if k in ctx.out or k in self.base}
        final.update(ctx.out)
        m.plans = [plan]
        m.proc0 = final
        m.cluster_ad = {a.name: a.text for a in final.values()}
        m.warnings = warnings
        return SubmittedCluster(m)

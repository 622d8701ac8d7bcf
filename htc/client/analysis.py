"""Why is my job not running? ``condor_q -better-analyze``, as a pure function of ads.

Theory of operation
-------------------
:func:`analyze_job` takes one job ad and the slot ads of the pool and returns a
:class:`JobAnalysis`; nothing here talks to a daemon, so the executor, the CLI and tests all
call it with whatever ads they hold.  The analysis has two halves, as HTCondor's has:

1. **Clause by clause.**  The job's ``Requirements`` is cut into *steps*, numbered exactly
   as HTCondor numbers them (``AnalyzeThisSubExpr``): a post-order walk in which every
   comparison, every operand of ``&&``/``||``/``!`` and every logic operator itself takes the
   next number; parentheses take none.  So ``A && B && C`` gives ``[0] A``, ``[1] B``,
   ``[2] [0] && [1]``, ``[3] C``, ``[4] [2] && [3]``.  Each step is evaluated on its own
   against every slot (MY = job, TARGET = slot) and counts the slots for which it is true.
   The table lists every leaf, and the logic steps that are *not* part of the top-level
   ``&&`` chain (an ``||`` of alternatives, a ``!``): the chain's own steps only restate
   the summary.  A leaf that reads nothing from the slot is decided by the job alone; it
   matches every slot or none.

2. **Slot by slot.**  Each slot falls into exactly one bucket, in HTCondor's order
   (``doJobRunAnalysis``/``checkOffer``): rejected by the job's Requirements; rejecting the
   job by its own Requirements (START); matching and running one of your jobs; matching
   and serving another user; matching and willing to run the job now.  Dynamic slots are
   left out, as HTCondor leaves them out (their partitionable parent stands for them); a
   partitionable slot too full for the job is tried again as if drained (its Cpus, Memory
   and Disk back at TotalSlot*), and counts as "would match if drained" when that fits.

:meth:`JobAnalysis.render` prints HTCondor's text (the Requirements, the attributes the job
defines, the step table, the run-analysis summary, the job's status), followed by htc's own
short answer to the question the user asked: which clauses rule out how many slots, and why
the job is not running.
"""

from __future__ import annotations

import datetime
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from htc.classad import ClassAd
from htc.classad import printing
from htc.classad.ad import external_refs
from htc.classad.ast import Binary, Conditional, Node, Paren, Unary
from htc.classad.compiler import evaluate
from htc.classad.match import requirements_hold
from htc.classad.operators import is_true_for_match

__all__ = ["Clause", "MatchCounts", "JobAnalysis", "PoolMatch", "analyze_job", "job_status_text", "pool_match"]

_LOGIC = {"&&", "||"}
_COMPARISON = {"==", "!=", "<", "<=", ">", ">=", "is", "isnt", "=?=", "=!="}
#: resources a drained partitionable slot gets back (HTCondor's default MachineResources)
_DRAIN_RESOURCES = ("Cpus", "Memory", "Disk")


@dataclass(frozen=True)
class Clause:
    """One numbered step of the job's Requirements and how many slots it matches alone."""

    step: int
    text: str
    matched: int
    #: the logic operator this step applies to earlier steps (``"[0] || [1]"``), or None for a leaf
    logic: str | None = None
    #: True for steps of the top-level ``&&`` chain, which the table does not show
    in_chain: bool = False
    #: True for an operand of that chain: a requirement every slot must meet on its own
    conjunct: bool = False

    @property
    def shown(self) -> bool:
        """Whether the step table lists this step (leaves, and logic outside the && chain)."""
        return self.logic is None or not self.in_chain


@dataclass(frozen=True)
class MatchCounts:
    """How many slots fall in each of HTCondor's run-analysis buckets."""

    slots: int = 0
    machines: int = 0
    rejected_by_job: int = 0
    reject_job: int = 0
    running_your_jobs: int = 0
    running_jobs: int = 0
    offline: int = 0
    willing: int = 0
    willing_if_drained: int = 0

    @property
    def serving_other_users(self) -> int:
        """Slots that match both ways but run another user's job."""
        return self.running_jobs - self.running_your_jobs

    @property
    def job_matches_slot(self) -> int:
        """Slots the job's Requirements accept."""
        return self.slots - self.rejected_by_job

    @property
    def both_match(self) -> int:
        """Slots where both Requirements hold."""
        return self.job_matches_slot - self.reject_job


@dataclass(frozen=True)
class PoolMatch:
    """How the slots of one pool match a job: the schedd's own pool or one of its FLOCK_TO pools."""

    name: str
    slots: int = 0
    matching: int = 0      # both Requirements hold
    willing: int = 0       # ... and the slot is free
    flocked: bool = False  # a FLOCK_TO pool, not the schedd's own
    error: str = ""        # the pool's collector could not be asked (why)

    def line(self) -> str:
        """``2 slots in pool cmb.test match (1 willing to run it now); a FLOCK_TO pool``."""
        where = "a FLOCK_TO pool" if self.flocked else "this schedd's own pool"
        if self.error:
            return f"pool {self.name} ({where}) could not be asked: {self.error}"
        return (f"{self.matching} of {self.slots} slots in pool {self.name} match "
                f"({self.willing} willing to run it now); {where}")


def pool_match(name: str, analysis: JobAnalysis, *, flocked: bool) -> PoolMatch:
    """The :class:`PoolMatch` of ``analysis`` (made against pool ``name``'s slots)."""
    c = analysis.counts
    return PoolMatch(name, c.slots, c.both_match, c.willing, flocked)


@dataclass(frozen=True)
class JobAnalysis:
    """The outcome of :func:`analyze_job`; :meth:`render` prints it as condor_q does."""

    job_id: str
    cluster: int
    proc: int
    requirements: str | None
    job_attributes: Mapping[str, str]
    clauses: tuple[Clause, ...]
    counts: MatchCounts
    status: str
    last_match: str
    reason: str
    willing_slots: tuple[str, ...] = field(default=())
    #: the operands of the Requirements' top-level && chain, as text
    conjuncts: tuple[str, ...] = field(default=())
    #: with FLOCK_TO: the own pool's and each flocked pool's matching slots (htc.daemons.schedd.flock)
    pools: tuple[PoolMatch, ...] = field(default=())

    def render(self, width: int = 80) -> str:
        """The analysis as text: HTCondor's ``-better-analyze`` sections, then htc's answer.

        Args:
            width: the console width the Requirements expression is wrapped to.

        Returns:
            Text ending in a newline.
        """
        rid = f"{self.cluster}.{self.proc:03d}"
        out: list[str] = []
        if self.requirements is not None:
            out.append(f"The Requirements expression for job {rid} is\n")
            out.append(_wrap_expression(self.conjuncts, width) + "\n")
            if self.job_attributes:
                out.append(f"Job {rid} defines the following attributes:\n")
                out.extend(f"    {name} = {text}" for name, text in self.job_attributes.items())
                out.append("")
            out.append(f"The Requirements expression for job {rid} reduces to these conditions:\n")
            out.append("         Slots")
            out.append("Step    Matched  Condition")
            out.append("-----  --------  ---------")
            for c in self.clauses:
                if c.shown:
                    label = f"[{c.step}]".ljust(5)
                    out.append(f"{label}{c.matched:>10}  {c.logic or c.text}")
            out.append("")
        else:
            out.append(f"Job {rid} has no Requirements expression; every slot's own requirements decide.\n")
        out.append(self._summary())
        if self.pools:
            out.append("\nPools where the job could run:")
            out.extend(f"  {p.line()}" for p in self.pools)
        if self.status:
            out.append(f"\n{self.cluster:03d}.{self.proc:03d}:  {self.status}\n")
        if self.last_match:
            out.append(self.last_match)
        out.append(self._answer())
        return "\n".join(out).rstrip("\n") + "\n"

    def _summary(self) -> str:
        c = self.counts
        lines = [f"\n{self.cluster:03d}.{self.proc:03d}:  Run analysis summary ignoring user priority.  "
                 f"Of {c.slots} slots on {c.machines} machines,",
                 f"  {c.rejected_by_job:5d} slots are rejected by your job's requirements",
                 f"  {c.reject_job:5d} slots reject your job because of their own requirements"]
        if c.running_your_jobs:
            lines.append(f"  {c.running_your_jobs:5d} slots match and are already running your jobs")
        if c.running_jobs:
            lines.append(f"  {c.serving_other_users:5d} slots match but are serving other users")
        if c.offline:
            lines.append(f"  {c.offline:5d} slots match but are currently offline")
        lines.append(f"  {c.willing:5d} slots match and are willing to run your job")
        if c.willing_if_drained:
            lines.append(f"  {c.willing_if_drained:5d} slots would match if drained")
        if not c.job_matches_slot or not c.both_match:
            lines.append("\nWARNING:  Be advised:")
            if not c.job_matches_slot:
                lines.append("   No machines matched the jobs's constraints")
            else:
                lines.append("   Job did not match any machines's constraints")
        return "\n".join(lines)

    def _answer(self) -> str:
        total = self.counts.slots
        running = self.status.startswith("Job is running")
        lines = [f"\nJob {self.job_id}:" if running else f"\nWhy job {self.job_id} is not running:"]
        for c in self.clauses:
            if c.conjunct and c.matched < total:
                lines.append(f"    [{c.step}] {c.logic or c.text} rules out {total - c.matched} of {total} slots")
        lines.append(f"    {self.reason}")
        return "\n".join(lines) + "\n"


# --- the clause walk ---------------------------------------------------------------------------


@dataclass
class _Step:
    node: Node
    logic: str | None
    children: tuple[int, ...]


def _strip(node: Node) -> Node:
    while isinstance(node, Paren):
        node = node.inner
    return node


def _steps(node: Node, must_store: bool, steps: list[_Step]) -> int:
    """Number the clauses of ``node`` as HTCondor's AnalyzeThisSubExpr does; return its step.

    Its recursion, run with a stack of our own: a Requirements of a 700-term ``||`` is as deep
    as it is long."""
    todo: list[tuple] = [("enter", node, must_store)]
    done: list[int] = []
    while todo:
        kind, n, store = todo.pop()
        if kind == "logic":
            right, left = done.pop(), done.pop()
            steps.append(_Step(n, f"[{left}] {n.op} [{right}]", (left, right)))
            done.append(len(steps) - 1)
        elif kind == "not":
            inner = done.pop()
            steps.append(_Step(n, f" ! [{inner}]", (inner,)))
            done.append(len(steps) - 1)
        elif isinstance(n, Paren):
            todo.append(("enter", n.inner, True))
        elif isinstance(n, Binary) and n.op in _LOGIC:
            todo.extend((("logic", n, True), ("enter", n.right, True), ("enter", n.left, True)))
        elif isinstance(n, Unary) and n.op == "!":
            todo.extend((("not", n, True), ("enter", n.operand, True)))
        elif (isinstance(n, Binary) and n.op in _COMPARISON) or store or isinstance(n, Conditional):
            steps.append(_Step(n, None, ()))
            done.append(len(steps) - 1)
        else:
            done.append(-1)
    return done.pop()


def _chain(steps: list[_Step], root: int) -> tuple[set[int], set[int]]:
    """The steps of the top-level && chain (the root and its && descendants), and the
    chain's operands (the root itself when it is not an &&)."""
    chain: set[int] = set()
    operands: set[int] = set()
    todo = [root]
    while todo:
        ix = todo.pop()
        if ix < 0:
            continue
        step = steps[ix]
        if step.logic is not None and isinstance(step.node, Binary) and step.node.op == "&&":
            chain.add(ix)
            todo.extend(step.children)
        else:
            operands.add(ix)
    return chain, operands


def _referenced_job_attributes(job: ClassAd, node: Node) -> dict[str, str]:
    """MY attributes the expression reads, transitively, with their raw text (HTCondor's
    ``AddReferencedAttribsToBuffer``), sorted by name."""
    seen: dict[str, str] = {}
    todo = [node]
    while todo:
        n = todo.pop()
        for ref in external_refs(n):
            if ref.startswith("target.") or ref in ("requirements",) or ref not in job or ref in seen:
                continue
            inner = job.table[ref]
            seen[ref] = printing.unparse(inner, old=True)
            todo.append(inner)
    names = job.spellings
    return {names[k]: seen[k] for k in sorted(seen, key=str.lower)}


def _conjuncts(node: Node) -> list[Node]:
    """The operands of the top-level && chain, left to right (a loop: chains may be long)."""
    out: list[Node] = []
    todo = [node]
    while todo:
        node = todo.pop()
        if isinstance(node, Binary) and node.op == "&&":
            todo.extend((node.right, node.left))
        else:
            out.append(node)
    return out


def _wrap_expression(parts: tuple[str, ...], width: int) -> str:
    """Indent by four and break between top-level ``&&`` operands to fit ``width``
    (as HTCondor's PrettyPrintExprTree does)."""
    pieces = [p + " &&" for p in parts[:-1]] + list(parts[-1:])
    lines: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + 1 + len(piece) > width - 4:
            lines.append(current)
            current = piece
        else:
            current = f"{current} {piece}" if current else piece
    if current:
        lines.append(current)
    return textwrap.indent("\n".join(lines), "    ")


# --- the slot walk -----------------------------------------------------------------------------


def _is_true(value) -> bool:
    return is_true_for_match(value)


def _bool_attr(ad: ClassAd, name: str) -> bool:
    try:
        return ad.eval(name) is True
    except KeyError:
        return False


def _string_attr(ad: ClassAd, name: str) -> str | None:
    try:
        value = ad.eval(name)
    except KeyError:
        return None
    return value if isinstance(value, str) else None


def _drained(slot: ClassAd) -> ClassAd | None:
    """The partitionable slot as if drained: its resources back at TotalSlot*."""
    over = slot.copy()
    changed = False
    for res in _DRAIN_RESOURCES:
        total = f"TotalSlot{res}"
        if total in slot:
            over[res] = slot.eval(total)
            changed = True
    return over if changed else None


def job_status_text(job: ClassAd, now: float | None = None) -> str:
    """HTCondor's one-line status of a job that analysis cannot explain by matching.

    Args:
        job: the job ad.
        now: the time (default: the ad's ServerTime or the clock).

    Returns:
        ``"Job is running."``, ``"Job is held.\\n\\nHold reason: ..."``, ``"Job is removed."``,
        ``"Job is completed."``, ``"Job is in cool down."``, or ``""`` for an idle job.
    """
    import time

    status = _int(job, "JobStatus", 1)
    if status in (2, 6, 7):
        return "Job is running."
    if status == 5:
        text = "Job is held."
        reason = _string_attr(job, "HoldReason")
        if reason:
            text += f"\n\nHold reason: {reason}"
        return text
    if status == 3:
        return "Job is removed."
    if status == 4:
        return "Job is completed."
    server_time = _int(job, "ServerTime", int(time.time() if now is None else now))
    if _int(job, "JobCoolDownExpiration", 0) > server_time:
        return "Job is in cool down."
    return ""


def _int(ad: ClassAd, name: str, default: int) -> int:
    try:
        value = ad.eval(name)
    except KeyError:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return int(value)


def _ctime(secs: int) -> str:
    return datetime.datetime.fromtimestamp(secs).strftime("%a %b %d %H:%M:%S %Y")


def _last_match_text(job: ClassAd) -> str:
    last = _int(job, "LastMatchTime", 0)
    rejected = _int(job, "LastRejMatchTime", 0)
    lines = []
    if last:
        lines.append(f"Last successful match: {_ctime(last)}")
    elif rejected:
        lines.append("No successful match recorded.")
    if rejected > last:
        lines.append(f"Last failed match: {_ctime(rejected)}")
        reason = _string_attr(job, "LastRejMatchReason")
        if reason:
            lines.append(f"Reason for last match failure: {reason}")
    return "\n".join(lines) + ("\n" if lines else "")


def analyze_job(job: ClassAd, slots: Iterable[ClassAd], *, now: float | None = None) -> JobAnalysis:
    """Explain how ``job`` matches the pool's slots, clause by clause and slot by slot.

    Args:
        job: the job ad (needs ClusterId and ProcId; Requirements, Owner/User as it has them).
        slots: machine (slot) ads, as ``htc status -long`` shows them.
        now: the time used for "cool down" (default: the clock).

    Returns:
        A :class:`JobAnalysis`; print ``analysis.render()``.
    """
    cluster, proc = _int(job, "ClusterId", 0), _int(job, "ProcId", 0)
    user = _string_attr(job, "User") or _string_attr(job, "Owner") or ""
    owner = _string_attr(job, "Owner") or ""
    slot_list = [s for s in slots if not _bool_attr(s, "DynamicSlot")]

    req = job.table.get("requirements")
    steps: list[_Step] = []
    chain: set[int] = set()
    operands: set[int] = set()
    if req is not None:
        root = _steps(req, True, steps)
        chain, operands = _chain(steps, root)

    # 1. the clause table: every step alone against every slot (a clause that reads only the
    #    job evaluates the same for each slot, so it counts all of them or none)
    matched = [0] * len(steps)
    for slot in slot_list:
        values: list[bool] = []
        for ix, step in enumerate(steps):
            if step.logic is None:
                values.append(_is_true(evaluate(step.node, job, slot)))
            elif step.node.op == "!":
                values.append(not values[step.children[0]])
            elif step.node.op == "&&":
                values.append(values[step.children[0]] and values[step.children[1]])
            else:
                values.append(values[step.children[0]] or values[step.children[1]])
            if values[ix]:
                matched[ix] += 1
    clauses = tuple(
        Clause(step=ix, text=printing.unparse(_strip(s.node), old=True), matched=matched[ix], logic=s.logic,
               in_chain=ix in chain, conjunct=ix in operands)
        for ix, s in enumerate(steps))

    # 2. the buckets, in HTCondor's order
    counts = dict(slots=0, rejected_by_job=0, reject_job=0, running_your_jobs=0, running_jobs=0,
                  offline=0, willing=0, willing_if_drained=0)
    machines: set[str] = set()
    willing: list[str] = []
    for slot in slot_list:
        machines.add(_string_attr(slot, "Machine") or _string_attr(slot, "Name") or str(id(slot)))
        counts["slots"] += 1
        offer, drained = slot, False
        if _bool_attr(slot, "PartitionableSlot") and not requirements_hold(job, slot):
            over = _drained(slot)
            if over is not None and requirements_hold(job, over) and requirements_hold(over, job):
                offer, drained = over, True
        if not requirements_hold(job, offer):
            counts["rejected_by_job"] += 1
            continue
        if not requirements_hold(offer, job):
            counts["reject_job"] += 1
            continue
        if _bool_attr(offer, "Offline"):
            counts["offline"] += 1
        remote = _string_attr(offer, "RemoteUser")
        if remote is None:
            if drained:
                counts["willing_if_drained"] += 1
            else:
                counts["willing"] += 1
                willing.append(_string_attr(slot, "Name") or "?")
            continue
        counts["running_jobs"] += 1
        if remote in (user, owner) or remote.split("@")[0] == owner:
            counts["running_your_jobs"] += 1
    result = MatchCounts(machines=len(machines), **counts)
    status = job_status_text(job, now)
    return JobAnalysis(
        job_id=f"{cluster}.{proc}", cluster=cluster, proc=proc,
        requirements=printing.unparse(req, old=True) if req is not None else None,
        job_attributes=_referenced_job_attributes(job, req) if req is not None else {},
        clauses=clauses, counts=result, status=status, last_match=_last_match_text(job),
        reason=_reason(job, status, clauses, result), willing_slots=tuple(willing),
        conjuncts=tuple(printing.unparse(n, old=True) for n in _conjuncts(req)) if req is not None else ())


def _reason(job: ClassAd, status: str, clauses: tuple[Clause, ...], c: MatchCounts) -> str:
    """One sentence: why the job is (not) running, from the most decisive fact."""
    if status.startswith("Job is running"):
        return "it is running."
    if status.startswith("Job is held"):
        reason = _string_attr(job, "HoldReason")
        return (f"it is held ({reason}); release it with 'htc release {job.eval('ClusterId')}."
                f"{job.eval('ProcId')}' once the cause is fixed." if reason else
                "it is held; release it with 'htc release'.")
    if status in ("Job is removed.", "Job is completed."):
        return f"it has left the running: {status[7:-1]}."
    if status == "Job is in cool down.":
        return "it is in cool down after a failed start; it becomes eligible again when that expires."
    if c.slots == 0:
        return "the pool has no slots (is a startd running? see 'htc status')."
    if not c.job_matches_slot:
        zero = [cl for cl in clauses if cl.conjunct and cl.matched == 0]
        if zero:
            names = ", ".join(f"[{cl.step}] {cl.logic or cl.text}" for cl in zero)
            return f"no slot satisfies {names}; change the job's requirements or add such slots."
        return "no slot satisfies all its requirements together; relax one of the clauses above."
    if not c.both_match:
        return (f"{c.reject_job} slot(s) accept the job but refuse it by their own requirements "
                "(START policy); see 'htc status -long' for their START expressions.")
    if c.willing or c.willing_if_drained:
        avail = c.willing or c.willing_if_drained
        extra = " once drained" if not c.willing else ""
        return (f"{avail} slot(s) are willing to run it{extra}; it should start after the next "
                "negotiation cycle.")
    if c.running_your_jobs and not c.serving_other_users:
        return "every matching slot is already running your other jobs; it runs when one frees up."
    return "every matching slot is busy with other users' jobs; it runs when one frees up or by fair share."

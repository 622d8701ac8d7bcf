"""Running the submit commands, in HTCondor's ``make_job_ad`` order, with tracing.

:data:`COMMANDS` is the table; :func:`run_commands` applies it to a context and, when asked,
records for each command which per-proc macros it expanded, whether it drew random
numbers, which attributes it read and which it wrote (a ``$F`` function that made a relative
path absolute against the job's iwd counts as a read of ``Iwd``, so a per-proc
``initialdir`` makes that command per-proc too).  That trace is what lets the cluster
planner (:mod:`htc.submit.cluster`) re-run only the per-proc commands for later procs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from htc.submit import commands as C
from htc.submit import requirements as R
from htc.submit import resources as S
from htc.submit import transfer as X
from htc.submit.context import JobContext

Command = Callable[[JobContext], None]

#: the commands in ``SubmitHash::make_job_ad`` order
COMMANDS: tuple[Command, ...] = (
    C.set_base,
    C.set_universe,
    C.set_iwd,
    C.set_executable,
    C.set_arguments,
    C.set_java_vm_args,
    C.set_parallel,
    C.set_environment,
    C.set_job_status,
    C.set_stdin,
    C.set_stdout,
    C.set_stderr,
    C.set_notification,
    C.set_rank,
    C.set_periodic,
    C.set_leave_in_queue,
    C.set_retries,
    C.set_kill_sig,
    S.set_request_resources,
    S.set_concurrency_limits,
    S.set_accounting_group,
    S.set_simple_commands,
    S.set_deferral,
    S.set_image_size,
    X.set_transfer_files,
    S.set_auto_attributes,
    S.report_common_mistakes,
    S.set_forced_attributes,
    R.set_resource_requirements,
    R.set_requirements,
)
_IWD_INDEX = COMMANDS.index(C.set_iwd)


@dataclass
class Trace:
    """What one command did in one run."""

    index: int
    touched: set[str] = field(default_factory=set)
    random: bool = False
    reads: set[str] = field(default_factory=set)
    writes: list[str] = field(default_factory=list)
    #: the warnings the command gave
    warnings: list[str] = field(default_factory=list)


def run_commands(ctx: JobContext, indices: Sequence[int] | None = None,
                 traces: list[Trace] | None = None) -> None:
    """Run the commands (all, or those at ``indices``) over ``ctx``.

    Args:
        ctx: the job being built; results land in ``ctx.out``.
        indices: which commands of :data:`COMMANDS` to run, in order (default all).
        traces: when given, one :class:`Trace` per command run is appended.
    Raises:
        SubmitError: a command's value is invalid; the error names its file and line.
    """
    ex = ctx.ex
    for i in range(len(COMMANDS)) if indices is None else indices:
        ctx.command_index = i
        if traces is not None:
            t = Trace(i)
            ex.touched = t.touched
            ex.used_random = False
            ex.used_cwd = False
            ctx.reads = t.reads
            ctx.writes = t.writes
            before = len(ctx.warnings)
        COMMANDS[i](ctx)
        if traces is not None:
            t.random = ex.used_random
            if ex.used_cwd and i > _IWD_INDEX:
                t.reads.add("iwd")  # a $F path made absolute against the iwd reads it
            t.warnings = ctx.warnings[before:]
            traces.append(t)
        if i == _IWD_INDEX:
            ex.cwd = ctx.iwd
    ctx.reads = ctx.writes = None


def dynamic_commands(traces: Sequence[Trace], per_proc_names: frozenset[str]) -> list[int]:
    """The commands whose output can differ between procs of one queue statement.

    A command is per-proc when it expanded a per-proc macro or drew a random number, when it
    reads an attribute an earlier per-proc command wrote, or when it writes an attribute a
    per-proc command also writes (so every attribute has per-proc writers or none).
    """
    dyn = {t.index for t in traces if t.random or (t.touched & per_proc_names)}
    order = [t.index for t in traces]
    by_index = {t.index: t for t in traces}
    changed = True
    while changed:
        changed = False
        written: set[str] = set()
        for i in order:
            t = by_index[i]
            if i not in dyn:
                reads_dyn = bool(t.reads & written) or (
                    "*" in t.reads and any(a.startswith("request") for a in written))
                if reads_dyn:
                    dyn.add(i)
                    changed = True
            if i in dyn:
                written.update(t.writes)
        dyn_writes = {a for i in dyn for a in by_index[i].writes}
        for i in order:
            if i not in dyn and dyn_writes.intersection(by_index[i].writes):
                dyn.add(i)
                changed = True
    return [i for i in order if i in dyn]

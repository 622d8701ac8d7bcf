"""condor_status's views, computed from ads: the columns of each view and its totals table.

Each view is a list of :class:`Column`, taken from condor_status's built-in print formats
(``src/condor_status.V6/prettyPrint.cpp``): the same headings, attributes, ``printf`` formats
and the text shown for a missing value (``[????]``, ``-``, ``_``, ``*``).  Columns are as wide as
their widest value.  The totals tables (``totals.cpp``) are printed with condor_status's fixed
``printf`` widths, one row per key (``Arch/OpSys``, the activity for ``-state``, the submitter's
name for ``-submitters``) and a ``Total`` row.

* :func:`view_for` -- which columns, whether there are totals and which, for a set of options;
* :func:`compact_rows` -- ``-compact``: one line per machine, its dynamic slots rolled into the
  partitionable slot (``Slots``, ``FreCpu``, ``FreeGb``, the ``ST`` consensus code);
* :func:`totals_lines` -- the totals table;
* :func:`printf_format` -- ``-format FMT EXPR`` (a printf conversion applied to one value).

Times shown (``ActvtyTime``, ``StateTime``, ``Uptime``) are measured from the ad's own
``MyCurrentTime`` or ``LastHeardFrom``, as condor_status does, so they do not drift with the
clock of the machine running the tool.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from htc.classad import ClassAd, ExprTree
from htc.classad.values import Value
from htc.cli.formatting import duration, short_date, value_text
from htc.errors import UsageError

Getter = Callable[[ClassAd], object]


@functools.lru_cache(maxsize=256)
def _tree(expr: str) -> ExprTree:
    return ExprTree(expr)


def get(ad: ClassAd, expr: str):
    """The value of an attribute or expression in ``ad``; None when undefined or an error."""
    try:
        value = _tree(expr).eval(ad)
    except Exception:  # noqa: BLE001 - a broken expression shows as missing
        return None
    return None if isinstance(value, Value) else value


def _num(ad: ClassAd, expr: str):
    value = get(ad, expr)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Column:
    """One column: heading, value, ``printf`` format, the text for a missing value, alignment."""

    head: str
    value: Getter
    printf: str = ""
    alt: str = ""
    right: bool = False

    def cell(self, ad: ClassAd) -> str:
        value = self.value(ad)
        if value is None or value == "":
            return "[????]" if self.alt == "??" else self.alt
        if self.printf:
            return c_format(self.printf, value)
        return value if isinstance(value, str) else value_text(value)


def attr(name: str, printf: str = "", alt: str = "??", head: str | None = None, right: bool | None = None) -> Column:
    """A column showing ``name`` (an attribute or expression)."""
    return Column(head or name, lambda ad: get(ad, name), printf, alt,
                  bool(printf) if right is None else right)


def c_format(spec: str, value) -> str:
    """C's printf of one value (``%6d`` of a real truncates it, as printf of a cast would)."""
    conv = spec[-1]
    if conv in "di" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return (spec[:-1] + "d") % int(value)
    if conv in "feEgG" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return spec % float(value)
    if conv in "di" + "feEgG":
        return value_text(value)
    return (spec[:-1] + "s") % (value if isinstance(value, str) else value_text(value))


# --- values condor_status computes --------------------------------------------------------------


def _since(ad: ClassAd, name: str, now_attrs: Sequence[str] = ("MyCurrentTime", "LastHeardFrom")):
    start = _num(ad, name)
    now = next((n for n in (_num(ad, a) for a in now_attrs) if n is not None), None)
    if start is None or now is None:
        return None
    return duration(max(0, now - start))


def activity_time(ad: ClassAd):
    """ACTIVITY_TIME: how long the slot has been in its activity."""
    return _since(ad, "EnteredCurrentActivity")


def elapsed(name: str) -> Getter:
    """ELAPSED_TIME: ``LastHeardFrom - name``."""
    return lambda ad: _since(ad, name, ("LastHeardFrom",))


_STATES = {"Owner": "O", "Unclaimed": "U", "Matched": "M", "Claimed": "C", "Preempting": "P",
           "Shutdown": "S", "Delete": "X", "Backfill": "F", "Drained": "D"}
_ACTIVITIES = {"Idle": "i", "Busy": "b", "Retiring": "r", "Vacating": "v", "Suspended": "s",
               "Benchmarking": "e", "Killing": "k"}


def activity_code(ad: ClassAd) -> str:
    """ACTIVITY_CODE: state and activity as two letters (``Ui`` Unclaimed/Idle, ``Cb`` Claimed/Busy)."""
    return _STATES.get(str(get(ad, "State")), " ") + _ACTIVITIES.get(str(get(ad, "Activity")), " ")


def platform(ad: ClassAd):
    """PLATFORM: ``x64/AlmaLinux9`` from Arch and OpSysAndVer (OpSysShortName on Windows)."""
    name = get(ad, "OpSysShortName" if get(ad, "OpSys") == "WINDOWS" else "OpSysAndVer")
    if not isinstance(name, str):
        return None
    arch = str(get(ad, "Arch") or "")
    return f"{ {'X86_64': 'x64', 'X86': 'x86'}.get(arch, arch)}/{name}"


def version(ad: ClassAd):
    """CONDOR_VERSION: the version number out of ``$CondorVersion: 24.0.1 2024-10-31 ... $``."""
    text = get(ad, "CondorVersion")
    if not isinstance(text, str):
        return None
    return next((w for w in text.split()[1:] if w[:1].isdigit()), text.split()[1] if len(text.split()) > 1 else text)


def readable_mb(name: str) -> Getter:
    """READABLE_MB: megabytes as ``15.4 GB``."""
    def render(ad: ClassAd):
        value = _num(ad, name)
        if value is None:
            return None
        size, power = float(value) * 1024 * 1024, 0
        while size > 1024.0 and power < 4:
            size, power = size / 1024.0, power + 1
        return f"{size:.1f} {('B ', 'KB', 'MB', 'GB', 'TB')[power]}"
    return render


def activity_or_ocu(ad: ClassAd):
    activity = get(ad, "Activity")
    if not isinstance(activity, str):
        return "??"
    return "OCU" if activity == "Idle" and get(ad, "OCU") is True else activity


# --- the views ----------------------------------------------------------------------------------

LOAD_AV = Column("LoadAv", lambda ad: get(ad, "CondorLoadAvg"), "%.3f", "??", True)


def slots_normal(wide: bool) -> list[Column]:
    """The default view (and ``-avail``)."""
    time_head = "ActivityTime" if wide else "  ActvtyTime"
    return [attr("Name", right=False), attr("OpSys", right=False), attr("Arch", right=False),
            attr("State", right=False), Column("Activity", activity_or_ocu, alt="??"), LOAD_AV,
            attr("Memory", "%d", head="Mem"), Column(time_head, activity_time, alt="-", right=True)]


def slots_run() -> list[Column]:
    """``-claimed`` / ``-run``."""
    return [attr("Name", right=False), attr("OpSys", right=False), attr("Arch", right=False), LOAD_AV,
            attr("RemoteUser", right=False), attr("ClientMachine", right=False)]


def slots_server() -> list[Column]:
    """``-server``."""
    return [attr("Name", right=False), attr("OpSys", right=False), attr("Arch", right=False), LOAD_AV,
            attr("Memory", "%8d"), attr("Disk", "%9d"), attr("Mips", "%7d"), attr("KFlops", "%9d")]


def slots_state() -> list[Column]:
    """``-state``."""
    return [attr("Name", right=False), attr("Cpus", head="Cpu", right=True), attr("Memory", head=" Mem", right=True),
            Column("LoadAv", lambda ad: get(ad, "CondorLoadAvg"), "%.3f", "??", True),
            Column("  KbdIdle", lambda ad: None if _num(ad, "KeyboardIdle") is None
                   else duration(_num(ad, "KeyboardIdle")), alt="??", right=True),
            attr("State", right=False), Column("  StateTime", elapsed("EnteredCurrentState"), alt="??", right=True),
            attr("Activity", head="Activ", right=False), Column("  ActvtyTime", elapsed("EnteredCurrentActivity"),
                                                                   alt="-", right=True)]


DAEMON_VIEWS: dict[str, list[Column]] = {
    "schedd": [attr("Name", alt=""), attr("Machine", alt=""), attr("TotalRunningJobs", "%11d", "", "RunningJobs"),
               attr("TotalIdleJobs", "%10d", "", "  IdleJobs"), attr("TotalHeldJobs", "%10d", "", "  HeldJobs")],
    "schedd-run": [attr("Name", alt=""), attr("TotalJobAds", "%9d", "", "TotalJobs"),
                   attr("ShadowsRunning", "%7d", "", "Shadows"),
                   attr("TotalSchedulerJobsRunning", "%10d", "", "ActiveDAGs"),
                   attr("TotalSchedulerJobsIdle", "%8d", "", "IdleDAGs"),
                   attr("RecentJobsCompleted", "%8d", "", "RcntDone"),
                   attr("RecentJobsStarted", "%9d", "", "RcntStart")],
    "submitters": [attr("Name", alt=""), attr("Machine", alt=""), attr("RunningJobs", "%11d", ""),
                   attr("IdleJobs", "%10d", "", "  IdleJobs"), attr("HeldJobs", "%10d", "", "  HeldJobs")],
    "collector": [attr("Name", alt=""), attr("Machine", alt=""), attr("RunningJobs", "%11d", ""),
                  attr("IdleJobs", "%10d", "", "  IdleJobs"), attr("HostsTotal", "%10d", "")],
    "master": [attr("Name", alt=""), Column("Version", version), attr("DetectedCpus", "%4d", "??", "Cpus"),
               Column("  Memory", readable_mb("DetectedMemory"), alt="??", right=True),
               Column("   Uptime", elapsed("DaemonStartTime"), right=True)],
    "negotiator": [attr("Name", alt=""),
                   Column("LastCycleEnd", lambda ad: short_date(_num(ad, "LastNegotiationCycleEnd0"))
                          if _num(ad, "LastNegotiationCycleEnd0") else None),
                   attr("LastNegotiationCycleDuration0", "%5d", "", "(Sec)"),
                   attr("LastNegotiationCycleCandidateSlots0", "%7d", "", "  Slots"),
                   attr("LastNegotiationCycleActiveSubmitterCount0", "%8d", "", "Submitrs"),
                   attr("LastNegotiationCycleNumSchedulers0", "%7d", "", "Schedds"),
                   attr("LastNegotiationCycleNumIdleJobs0", "%7d", "", "   Jobs"),
                   attr("LastNegotiationCycleMatches0", "%7d", "", "Matches"),
                   attr("LastNegotiationCycleRejections0", "%10d", "", "Rejections")],
    "any": [Column("MyType", lambda ad: get(ad, "MyType") or "None"),
            Column("TargetType", lambda ad: get(ad, "TargetType") or "None"), attr("Name", alt="?")],
}

#: constraints condor_status adds for a view (prettyPrint.h)
AVAIL = 'State == "Unclaimed" && Cpus > 0 && Memory > 0'
CLAIMED = 'State == "Claimed"'
SCHEDD_RUN = "(ShadowsRunning + TotalSchedulerJobsRunning) > 0"


def render(columns: Sequence[Column], ads: Iterable[ClassAd]) -> tuple[list[str], list[tuple[str, ...]], list[int]]:
    """(headings, rows of cell texts, indexes of right-aligned columns) for ``fmt.print_table``."""
    rows = [tuple(col.cell(ad) for col in columns) for ad in ads]
    return [c.head.strip() if c.right else c.head for c in columns], rows, [i for i, c in enumerate(columns) if c.right]


# --- -compact -----------------------------------------------------------------------------------


def _consensus(codes: Iterable[str], losing_letter: str, index: int) -> str | None:
    seen = None
    for code in codes:
        letter = code[index]
        if letter == losing_letter:
            return letter
        seen = letter if seen in (None, letter) else "*"
    return seen


def compact_rows(ads: Sequence[ClassAd], mode: str = "") -> tuple[list[str], list[tuple[str, ...]], list[int]]:
    """``-compact``: one row per machine (condor_status's startdCompact print format and its
    fold of the slots of one machine).  ``mode``: ``""``, ``"state"``, ``"server"`` or ``"run"``."""
    machines: dict[str, list[ClassAd]] = {}
    for ad in ads:
        machines.setdefault(str(get(ad, "Machine") or get(ad, "Name") or "?"), []).append(ad)
    rows = []
    for machine, slots in machines.items():
        dynamic = [s for s in slots if get(s, "DynamicSlot") is True]
        tops = [s for s in slots if get(s, "DynamicSlot") is not True] or dynamic
        first = tops[0]
        pslot = any(get(s, "PartitionableSlot") is True for s in tops)
        busy = [s for s in tops if get(s, "PartitionableSlot") is not True and get(s, "State") != "Unclaimed"]
        free = [s for s in tops if s not in busy]
        n_slots = (len(dynamic) or sum(int(_num(s, "NumDynamicSlots") or 0) for s in tops)) if pslot else len(tops)
        cpus = sum(int(_num(s, "TotalSlotCpus") or _num(s, "Cpus") or 0) for s in tops)
        gpus = sum(int(_num(s, "TotalSlotGpus") or 0) for s in tops)
        total_mem = sum(float(_num(s, "TotalSlotMemory") or _num(s, "Memory") or 0) for s in tops) / 1024.0
        free_cpus = sum(int(_num(s, "Cpus") or 0) for s in free)
        free_mem = sum(float(_num(s, "Memory") or 0) for s in free) / 1024.0
        child_mem = [float(_num(d, "Memory") or 0) for d in dynamic] if pslot else \
            [float(_num(s, "Memory") or 0) for s in tops]
        max_slot = f"{max(child_mem) / 1024.0:9.2f}" if child_mem else "*"
        load = _num(first, "TotalLoadAvg")
        total_cpus = _num(first, "TotalCpus")
        cpu_load = f"{load / total_cpus:7.2f}" if load is not None and total_cpus else ""
        starts = [_num(s, "RecentJobStarts") for s in tops]
        known = [s for s in starts if s is not None]
        jobs_min = f"{sum(known) / 20.0:8.2f}" if known else "_"
        st = _machine_code(tops, dynamic, pslot)
        users = sorted({str(get(d, "RemoteUser")) for d in (dynamic or tops) if get(d, "RemoteUser")})
        common = [machine, platform(first) or "", f"{n_slots:4d}" + ("" if pslot else "S")]
        if mode == "run":
            rows.append((*common, ", ".join(users)))
            continue
        sizes = [f"{cpus:4d}", f"{gpus:4d}", f"{total_mem:8.2f}"]
        if mode == "state":
            rows.append((*common, *sizes, cpu_load, st, jobs_min))
        elif mode == "server":
            mips, kflops = _num(first, "Mips"), _num(first, "KFlops")
            rows.append((*common, *sizes, "-" if mips is None else f"{int(mips):7d}",
                         "-" if kflops is None else f"{int(kflops):9d}", cpu_load, st, jobs_min))
        else:
            rows.append((*common, *sizes, f"{free_cpus:6d}", f"{free_mem:8.2f}", cpu_load, st, jobs_min, max_slot))
    heads = {"run": ["Machine", "Platform", "Slots", "Users"],
             "state": ["Machine", "Platform", "Slots", "Cpus", "Gpus", "TotalGb", "CpuLoad", "ST", "Jobs/Min"],
             "server": ["Machine", "Platform", "Slots", "Cpus", "Gpus", "TotalGb", "Mips", "KFlops", "CpuLoad", "ST",
                        "Jobs/Min"],
             "": ["Machine", "Platform", "Slots", "Cpus", "Gpus", "TotalGb", "FreCpu", "FreeGb", "CpuLoad", "ST",
                  "Jobs/Min", "MaxSlotGb"]}[mode]
    right = [i for i, h in enumerate(heads) if h not in ("Machine", "Platform", "ST", "Users")]
    return heads, rows, right


def _machine_code(tops: Sequence[ClassAd], dynamic: Sequence[ClassAd], pslot: bool) -> str:
    """The ``ST`` column of a machine: its slots' state/activity, ``*`` where they disagree;
    for a partitionable slot the consensus of its dynamic slots (Preempting and Vacating win)."""
    own = [activity_code(s) for s in tops]
    asc, aac = _consensus(own, "\0", 0) or " ", _consensus(own, "\0", 1) or " "
    if not pslot or not dynamic:
        return asc + aac
    kids = [activity_code(d) for d in dynamic]
    bsc, bac = _consensus(kids, "P", 0), _consensus(kids, "v", 1)
    exhausted = all((_num(s, "Cpus") or 0) <= 0 or (_num(s, "Memory") or 0) <= 0 for s in tops)
    if asc + aac == "Ui" and exhausted:
        asc, aac = bsc, bac
    elif asc == "D" and bsc == "C":
        asc = bsc
    if bsc == "P":
        asc = bsc
    if bac == "v":
        aac = bac
    return ("*" if asc != bsc else asc) + ("*" if aac != bac else aac)


# --- totals -------------------------------------------------------------------------------------

_STATE_ORDER = ("Owner", "Claimed", "Unclaimed", "Matched", "Preempting", "Drained", "Backfill")


def _state_counts(ads: Iterable[ClassAd]) -> dict[str, int]:
    counts = dict.fromkeys(("Total", "BkIdle", *_STATE_ORDER), 0)
    for ad in ads:
        state = get(ad, "State")
        backfill = get(ad, "SlotBackfill") is True
        if backfill and state == "Unclaimed":
            counts["BkIdle"] += 1
            continue
        if backfill and state == "Claimed":
            state = "Backfill"
        if state in counts:
            counts[state] += 1
            counts["Total"] += 1
    return counts


def _normal(ads):
    c = _state_counts(ads)
    return "%6d %5d %7d %9d %7d %10d %6d %8d %6d" % (c["Total"], c["Owner"], c["Claimed"], c["Unclaimed"],
                                                       c["Matched"], c["Preempting"], c["Drained"], c["Backfill"],
                                                       c["BkIdle"])


def _state(ads):
    c = _state_counts(ads)
    return "%6d %5d %9d %7d %10d %7d %6d %8d %6d" % (c["Total"], c["Owner"], c["Unclaimed"], c["Claimed"],
                                                       c["Preempting"], c["Matched"], c["Drained"], c["Backfill"],
                                                       c["BkIdle"])


def _sum(ads, name: str) -> int:
    return int(sum(_num(ad, name) or 0 for ad in ads))


def _server(ads):
    avail = sum(1 for ad in ads if get(ad, "State") in ("Claimed", "Unclaimed"))
    return "%9d %5d %11d %11d %11d %11d" % (len(ads), avail, _sum(ads, "Memory"), _sum(ads, "Disk"),
                                             _sum(ads, "Mips"), _sum(ads, "KFlops"))


def _run(ads):
    load = sum(float(_num(ad, "LoadAvg") or 0) for ad in ads)
    return "%9d  %11d  %11d   %-.3f" % (len(ads), _sum(ads, "Mips"), _sum(ads, "KFlops"), load / len(ads) if ads else 0)


def _schedd(ads, top: bool):
    return "%18d %18d %18d" % tuple(_sum(ads, a) for a in ("TotalRunningJobs", "TotalIdleJobs", "TotalHeldJobs")) \
        if top else ""


def _submitters(ads):
    return "%11d %10d %10d" % tuple(_sum(ads, a) for a in ("RunningJobs", "IdleJobs", "HeldJobs"))


def _arch_opsys(ad):
    arch, opsys = get(ad, "Arch"), get(ad, "OpSys")
    return f"{arch}/{opsys}" if isinstance(arch, str) and isinstance(opsys, str) else None


#: totals kind -> (header, key of an ad, row of a group of ads)
TOTALS: dict[str, tuple[str, Callable, Callable]] = {
    "normal": ("%6.6s %5.5s %7.7s %9.9s %7.7s %10.10s %6.6s %8.8s %6.6s" % (
        "Total", "Owner", "Claimed", "Unclaimed", "Matched", "Preempting", "Drain", "Backfill", "BkIdle"),
        _arch_opsys, lambda ads, top: _normal(ads)),
    "state": ("%6.6s %5.5s %9.9s %7.7s %10.10s %7.7s %6.6s %8.8s %6.6s" % (
        "Total", "Owner", "Unclaimed", "Claimed", "Preempting", "Matched", "Drain", "Backfill", "BkIdle"),
        lambda ad: get(ad, "Activity") if isinstance(get(ad, "Activity"), str) else None,
        lambda ads, top: _state(ads)),
    "server": ("%9.9s %5.5s %7.7s %11.11s %11.11s %11.11s" % ("Slots", "Avail", "Memory", "Disk", "MIPS", "KFLOPS"),
               _arch_opsys, lambda ads, top: _server(ads)),
    "run": ("%9.9s  %11.11s  %11.11s  %11.11s" % ("Machines", "MIPS", "KFLOPS", "AvgLoadAvg"),
            _arch_opsys, lambda ads, top: _run(ads)),
    "schedd": ("%18s %18s %18s" % ("TotalRunningJobs", "TotalIdleJobs", "TotalHeldJobs"), lambda ad: " ", _schedd),
    "submitters": ("%11s %10s %10s" % ("RunningJobs", "IdleJobs", "HeldJobs"),
                   lambda ad: get(ad, "Name") if isinstance(get(ad, "Name"), str) else None,
                   lambda ads, top: _submitters(ads)),
}


def totals_lines(kind: str, ads: Sequence[ClassAd], *, auto_key: bool = False,
                 key: Callable[[ClassAd], str | None] | None = None) -> list[str]:
    """condor_status's totals table (TrackTotals::displayTotals): a header, a row per key, a
    ``Total`` row, blank lines between, keys right-aligned in a column at least 14 wide (as wide
    as the longest key with ``auto_key``: ``-wide`` and ``-submitters``)."""
    header, key_of, row = TOTALS[kind]
    key_of = key or key_of
    groups: dict[str, list[ClassAd]] = {}
    for ad in ads:
        k = key_of(ad)
        if k is not None:
            groups.setdefault(k, []).append(ad)
    longest = max((len(k) for k in groups), default=0)
    width = max(5, longest) if auto_key else max(14, longest)
    lines = [(" " * width + header).rstrip(), ""]
    for k in sorted(groups):
        lines.append(f"{k:>{width}.{width}}{row(groups[k], False)}".rstrip())
    if groups and lines[-1]:  # a key row that prints nothing (-schedd's) ends on the blank line itself
        lines.append("")
    lines.append(f"{'Total':>{width}}{row(list(ads), True)}".rstrip())
    return lines


# --- -format ------------------------------------------------------------------------------------

_SPEC = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)([sdiouxXeEfgGcvVr%])")


def printf_format(fmt: str, expr: str, ad: ClassAd) -> str:
    """condor_status / condor_q ``-format FMT EXPR``: ``FMT`` with its one printf conversion
    applied to the value of ``EXPR`` in ``ad``.  ``%v`` prints a value as ``-af`` does, ``%V``
    as ``-long`` does (strings quoted), ``%r`` the unevaluated expression; ``\\n`` and ``\\t``
    in ``FMT`` are a newline and a tab.  A missing attribute prints as ``undefined``."""
    text = fmt.replace("\\n", "\n").replace("\\t", "\t")
    try:
        tree = ExprTree(expr)
    except Exception:  # noqa: BLE001
        raise UsageError(f"-format {fmt!r} {expr!r}: {expr!r} is not an attribute name or ClassAd expression") from None
    value = tree.eval(ad)
    out, done, pos = [], False, 0
    for match in _SPEC.finditer(text):
        out.append(text[pos:match.start()])
        pos = match.end()
        flags, conv = match.groups()
        if conv == "%":
            out.append("%")
            continue
        if done:
            out.append(match.group(0))
            continue
        done = True
        if conv == "r":
            raw = ad.lookup(expr) if expr in ad else tree
            out.append(("%" + flags + "s") % (raw.unparse() if hasattr(raw, "unparse") else str(raw)))
        elif conv == "V":
            out.append(("%" + flags + "s") % _quoted(value))
        elif conv == "v" or isinstance(value, Value):
            out.append(("%" + flags + "s") % value_text(value))
        else:
            out.append(c_format("%" + flags + conv, value))
    out.append(text[pos:])
    return "".join(out)


def _quoted(value) -> str:
    if isinstance(value, str):
        from htc.classad import printing

        return printing.quote_string(value)
    return value_text(value)

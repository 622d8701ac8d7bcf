"""``htc q``'s other sources and views, as condor_q defines them (src/condor_q.V6/queue.cpp):
``-jobads FILE``, ``-autocluster``, ``-group-by``, ``-hold-codes[:CODE[/SUB],...]``,
``-factory``, and the ``Q_DEFAULT_<VIEW>_PRINT_FORMAT_FILE`` knobs.

* ``-jobads FILE``: job ads from a file instead of the schedd -- what ``htc q -long`` (old
  syntax, ads separated by blank lines), ``-json`` or ``-long:new`` prints; lines starting with
  ``--`` (a title) are skipped; ``-`` reads standard input. The title is ``-- Jobads: FILE``.
* ``-autocluster``: one row per autocluster (jobs alike in every significant attribute,
  :mod:`htc.daemons.autocluster`): ``ID COUNT UNIVERSE CPUS MEMORY DISK REQUIREMENTS``; with
  ``-long`` the autocluster ads (the significant attributes, ``AutoClusterId``, ``JobCount``,
  ``JobIds``). The id is the schedd's ``AutoClusterId`` when the jobs carry one (the schedd
  assigns them to idle jobs as it answers the negotiator), else the next free number.
* ``-group-by``: jobs grouped by the values of the attributes ``-af`` or ``-attributes``
  names (condor_q's ``ProjectionIsGroupBy``); each group is an ad with those attributes, ``Id``,
  ``JobCount`` and ``JobIds`` (the first and last job ids, ``...`` between when more).
* ``-hold-codes``: held jobs, one row per hold code and subcode -- the first job's id, when it
  was held and why, and how many jobs share the code: ``OWNER CODE/SUB COUNT OLDEST_JOB_ID
  HELD_SINCE HOLD_REASON``; ``-hold-codes:13,21/2`` only those codes (and subcodes).
* ``-factory``: late-materialization clusters (``max_materialize``/``max_idle``), one row each:
  ``ID OWNER SUBMITTED LIMIT PRESNT RUN IDLE HOLD NEXTID MODE DIGEST``. htc's schedd does not
  return cluster ads, so the row is built from the cluster's jobs in the queue (a factory none
  of whose jobs is in the queue is not shown) and DIGEST is ``-`` (htc keeps the submit
  description in the queue file, not in a digest file).
* The knobs: for each view condor_q reads ``Q_DEFAULT_<TAG>_PRINT_FORMAT_FILE`` (tag ``PROGRESS``
  for the batch view, none for ``-nobatch``, ``RUN``, ``IDLE``, ``HOLD``, ``HOLDCODES``, ``IO``,
  ``DAG``, ``FACTORY``, ``TOTALS``, ``AUTOCLUSTER``); a file that exists replaces the view, one
  that does not is ignored, an invalid one is warned about; ``-print-format !`` ignores them all.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence

from htc.classad import ClassAd, ExprTree, ParserType, parseAds
from htc.classad.errors import ClassAdParseError
from htc.cli import formatting as fmt
from htc.cli import job_views as views
from htc.cli import print_format
from htc.errors import UsageError

__all__ = ["AUTOCLUSTER_FORMAT", "aggregate", "autocluster_ads", "default_layout", "factory_rows",
           "group_by_ads", "hold_code_constraint", "hold_code_rows", "jobads_from_file", "view_tag"]

#: condor_q's autoclusterNormal_PrintFormat
AUTOCLUSTER_FORMAT = """SELECT
   AutoClusterId AS '   ID'    WIDTH 5 PRINTF %5d
   JobCount      AS COUNT      WIDTH 5 PRINTF %5d
   JobUniverse   AS UNIVERSE   WIDTH -8 PRINTAS JOB_UNIVERSE OR ??
   RequestCPUs   AS CPUS       WIDTH 4 PRINTF %4d OR ??
   RequestMemory AS MEMORY     WIDTH 6 PRINTF %6d OR ??
   RequestDisk   AS '    DISK' WIDTH 8 PRINTF %8d OR ??
   Requirements  AS REQUIREMENTS PRINTF %r
SUMMARY NONE
"""

HOLD_CODE_HEADERS = ("OWNER", "CODE/SUB", "COUNT", "OLDEST_JOB_ID", "HELD_SINCE", "HOLD_REASON")
FACTORY_HEADERS = ("ID", "OWNER", "SUBMITTED", " LIMIT", "PRESNT", "  RUN ", "  IDLE", "  HOLD", "NEXTID",
                   "MODE", "DIGEST")


# --- -jobads -------------------------------------------------------------------------------------


def jobads_from_file(path: str) -> list[ClassAd]:
    """The job ads of a file (``-`` : standard input), in any syntax htc reads.

    Raises:
        UsageError: the file cannot be read (condor_q's ``Can't open file of ClassAds``) or
            does not hold ads.
    """
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(os.path.expanduser(path), encoding="utf-8") as f:
                text = f.read()
    except OSError:
        raise UsageError(f"Can't open file of ClassAds: {path}") from None
    text = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    try:
        ads = list(parseAds(text, ParserType.Auto))
    except ClassAdParseError as exc:
        raise UsageError(f"{path}: not a file of job ClassAds: {exc}") from None
    return [ad for ad in ads if len(ad)]


# --- -autocluster and -group-by ------------------------------------------------------------------


def _job_id(ad: ClassAd) -> tuple[int, int]:
    c, p = ad.get("ClusterId"), ad.get("ProcId")
    return (c if isinstance(c, int) else 0, p if isinstance(p, int) else 0)


def _job_ids(ads: Sequence[ClassAd]) -> str:
    """condor_q's JobIds with MaxReturnedJobIds = 2: the first, `` ...`` if more, and the last."""
    ids = sorted(_job_id(ad) for ad in ads)
    text = [f"{c}.{p}" for c, p in ids]
    if len(text) == 1:
        return text[0]
    return f"{text[0]} ... {text[-1]}" if len(text) > 2 else f"{text[0]} {text[1]}"


def aggregate(groups: Iterable[tuple[object, list[ClassAd]]], attrs: Sequence[str], id_attr: str,
              ids: Sequence[int]) -> list[ClassAd]:
    """One ad per group: ``attrs`` as the group's first job has them, ``id_attr``, ``JobCount``
    and ``JobIds``."""
    out = []
    for (_, jobs), gid in zip(groups, ids):
        first = min(jobs, key=_job_id)
        ad = ClassAd()
        for name in attrs:
            if name in first:
                ad[first.spellings.get(name.lower(), name) if hasattr(first, "spellings") else name] = \
                    first.lookup(name)
        ad[id_attr] = gid
        ad["JobCount"] = len(jobs)
        ad["JobIds"] = _job_ids(jobs)
        out.append(ad)
    return out


def autocluster_ads(ads: Sequence[ClassAd]) -> list[ClassAd]:
    """The autoclusters of ``ads`` (see the module docstring), by id."""
    from htc.daemons.autocluster import autocluster_key, job_significant_attributes

    groups: dict[tuple, list[ClassAd]] = {}
    names: dict[tuple, tuple[str, ...]] = {}
    for ad in ads:
        significant = job_significant_attributes(ad)
        key = (significant, autocluster_key(ad, significant))
        groups.setdefault(key, []).append(ad)
        names[key] = significant
    known = {}
    for key, jobs in groups.items():
        found = {j.get("AutoClusterId") for j in jobs}
        if len(found) == 1 and isinstance(next(iter(found)), int):
            known[key] = next(iter(found))
    free = max(list(known.values()) + [0]) + 1
    ids = []
    for key in groups:
        if key in known and known[key] not in ids:
            ids.append(known[key])
        else:
            ids.append(free)
            free += 1
    out = []
    for (key, jobs), gid in zip(groups.items(), ids):
        out += aggregate([(key, jobs)], names[key], "AutoClusterId", [gid])
    return sorted(out, key=lambda ad: ad["AutoClusterId"])


def group_by_ads(ads: Sequence[ClassAd], attrs: Sequence[str]) -> list[ClassAd]:
    """Jobs grouped by the values of ``attrs`` (``-group-by``), numbered from 1 in job id order."""
    if not attrs:
        raise UsageError("-group-by groups by the attributes of -af or -attributes; give one of them")
    trees = [ExprTree(a) for a in attrs]
    groups: dict[tuple, list[ClassAd]] = {}
    for ad in sorted(ads, key=_job_id):
        groups.setdefault(tuple(repr(t.eval(ad)) for t in trees), []).append(ad)
    plain = [a for a in attrs if a.replace("_", "").isalnum()]
    return aggregate(list(groups.items()), plain, "Id", list(range(1, len(groups) + 1)))


def group_rows(groups: Sequence[ClassAd], attrs: Sequence[str]) -> tuple[tuple[str, ...], list[tuple]]:
    """htc's table of ``-group-by`` without ``-af``: ``ID COUNT <attrs> JOB_IDS``."""
    headers = ("ID", "COUNT", *attrs, "JOB_IDS")
    return headers, [(str(g["Id"]), str(g["JobCount"]), *(fmt.value_text(g.get(a)) if a in g else "undefined"
                                                           for a in attrs), g["JobIds"]) for g in groups]


# --- -hold-codes ---------------------------------------------------------------------------------


def hold_code_constraint(opts: str) -> str:
    """``-hold-codes:13,21/2``: the constraint on HoldReasonCode (and HoldReasonSubCode); a word
    that is not a code is warned about and ignored, as condor_q does."""
    parts = []
    for word in (w.strip() for w in opts.split(",")):
        code, _, sub = word.partition("/")
        if not code.isdigit():
            if word:
                print(f'Warning "{word}" is not a hold code and/or subcode. ignoring', file=sys.stderr)
            continue
        if sub.isdigit():
            parts.append(f"(HoldReasonCode=={int(code)} && HoldReasonSubCode=={int(sub)})")
        else:
            parts.append(f"HoldReasonCode=={int(code)}")
    return " || ".join(parts)


def _int(ad: ClassAd, name: str) -> int | None:
    v = ad.get(name)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def hold_code_rows(ads: Sequence[ClassAd]) -> list[tuple]:
    """One row per (code, subcode), sorted by them; the first (oldest id) job of each and the count."""
    groups: dict[tuple, list[ClassAd]] = {}
    for ad in sorted(ads, key=_job_id):
        code, sub = _int(ad, "HoldReasonCode"), _int(ad, "HoldReasonSubCode")
        groups.setdefault((code if code is not None else -1, sub if sub is not None else -1), []).append(ad)
    rows = []
    for (code, sub), jobs in sorted(groups.items()):
        first = jobs[0]
        held = first.get("EnteredCurrentStatus")
        rows.append((views.owner_of(first), views.code_sub(first), str(len(jobs)), views.job_id(first),
                     fmt.short_date(held) if isinstance(held, (int, float)) else "??",
                     str(first.get("HoldReason", ""))))
    return rows


# --- -factory ------------------------------------------------------------------------------------


def factory_rows(ads: Sequence[ClassAd]) -> list[tuple]:
    """One row per late-materialization cluster, from its jobs in the queue."""
    clusters: dict[int, list[ClassAd]] = {}
    for ad in ads:
        if ad.get("JobMaterializeLimit") is not None or ad.get("JobMaterializeMaxIdle") is not None:
            clusters.setdefault(_job_id(ad)[0], []).append(ad)
    rows = []
    for cid, jobs in sorted(clusters.items()):
        first = min(jobs, key=_job_id)
        status = [j.get("JobStatus") for j in jobs]
        limit = _int(first, "JobMaterializeLimit")
        paused = first.get("JobMaterializePaused")
        rows.append((f"{cid:4d}.", views.owner_of(first), fmt.short_date(first.get("QDate") or 0),
                     f"{limit:6d}" if limit is not None else "      ", f"{len(jobs):6d}",
                     f"{sum(s in (2, 6, 7) for s in status):6d}", f"{status.count(1):6d}", f"{status.count(5):6d}",
                     f"{max(_job_id(j)[1] for j in jobs) + 1:6d}",
                     "_" if paused in (None, 0, False) else str(paused), "-"))
    return rows


# --- Q_DEFAULT_<TAG>_PRINT_FORMAT_FILE ---------------------------------------------------------


def view_tag(args: argparse.Namespace) -> str | None:
    """The tag of the view ``args`` asks for (condor_q's setup_mask), None for views without one."""
    if getattr(args, "autocluster", False):
        return "AUTOCLUSTER"
    if getattr(args, "hold_codes", None) is not None:
        return "HOLDCODES"
    if args.hold:
        return "HOLD"
    if args.totals:
        return "TOTALS"
    if args.io:
        return "IO"
    if getattr(args, "factory", False):
        return "FACTORY"
    if args.goodput:
        return None
    if args.run:
        return "RUN"
    if args.idle:
        return "IDLE"
    if args.nobatch or getattr(args, "stream_results", False):
        return "DAG" if args.dag else ""
    return "PROGRESS"


def default_layout(tag: str | None) -> print_format.Layout | None:
    """The layout ``Q_DEFAULT_<tag>_PRINT_FORMAT_FILE`` names, if set and the file exists."""
    if tag is None:
        return None
    from htc.config import load_config

    name = "Q_DEFAULT_" + (f"{tag}_" if tag else "") + "PRINT_FORMAT_FILE"
    path = load_config().param(name)
    if not path or not os.path.exists(str(path)):
        return None
    try:
        return print_format.load(str(path))
    except UsageError as exc:
        print(f"Warning: default {tag} print-format file '{path}' is invalid ({exc})", file=sys.stderr)
        return None

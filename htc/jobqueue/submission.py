"""Turning a submitted cluster (``htc.submit``'s ``SubmittedCluster``, or anything shaped like
it) into the rows the queue stores.

The queue accepts any object with ``cluster_ad`` (attribute -> expression text common to every
proc), ``num_procs`` and ``proc_ads(start, stop)`` (each proc's own attributes, ``ProcId``
included), plus optionally ``cluster_id``, ``submit_text`` and ``cwd``. The cluster ad is
stored once; each proc row keeps its hot attributes as columns and only the attributes whose
text differs from the cluster's as a small JSON object.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping

import msgspec

from htc.errors import UsageError
from htc.jobqueue.ads import HOT_ATTRS, as_mapping, int_literal, parse_literal, quote, string_literal
from htc.jobqueue.expr import check_expression
from htc.jobqueue.states import INITIAL_STATES
from htc.jobqueue.store import JOB_COLUMNS

_encode = msgspec.json.Encoder().encode
# Texts that are certainly well-formed: skip the parser for them (most per-proc values).
_SIMPLE = re.compile(r'^(-?\d+|"[^"\\]*"|true|false|undefined)$')

MATERIALIZE_LIMIT_ATTR = "JobMaterializeLimit"      # submit's max_materialize
MATERIALIZE_MAX_IDLE_ATTR = "JobMaterializeMaxIdle"  # submit's max_idle


def check_text(attr: str, text: str) -> None:
    """Refuse an attribute value that is not a ClassAd expression (fast for plain literals,
    and for the texts found well-formed lately: an executor's template brings the same sixty
    with each call)."""
    if text in _WELL_FORMED:
        return
    if not _SIMPLE.match(text):
        check_expression(attr, text)
    if len(_WELL_FORMED) >= _WELL_FORMED_MAX:
        _WELL_FORMED.clear()
    _WELL_FORMED.add(text)


#: attribute texts check_text found well-formed (emptied when it holds _WELL_FORMED_MAX)
_WELL_FORMED: set[str] = set()
_WELL_FORMED_MAX = 16384


@dataclass
class PreparedCluster:
    """A cluster split into what the ``clusters`` row stores and the defaults of its procs."""

    cluster_id: int
    owner: str | None
    qdate: int
    num_procs: int
    attrs: dict[str, str]
    status: int
    prio: int
    entered: int
    factory: dict | None
    source: object
    canon: dict[str, str] = field(default_factory=dict)
    proc_attrs: set[str] = field(default_factory=set)
    #: the schedd's name: each proc gets ``GlobalJobId = "<name>#<cluster>.<proc>#<qdate>"``
    #: (None: no GlobalJobId, a queue without a schedd)
    schedd_name: str | None = None


def cluster_id_of(cluster: object) -> int:
    """The ClusterId a submitted cluster was built for.

    Raises:
        UsageError: it has neither a ``cluster_id`` nor a ``ClusterId`` attribute.
    """
    cid = getattr(cluster, "cluster_id", None)
    if cid is None:
        text = as_mapping(getattr(cluster, "cluster_ad", None)).get("ClusterId")
        if text is None:
            raise UsageError("the submitted cluster has no ClusterId; build it with the id "
                             "JobQueue.next_cluster_id() returned")
        cid = int_literal("ClusterId", text)
    if isinstance(cid, bool) or not isinstance(cid, int) or cid < 1:
        raise UsageError(f"ClusterId must be a positive integer, not {cid!r}")
    return cid


def prepare(cluster: object, now: float, validate: bool = True) -> PreparedCluster:
    """Check a submitted cluster and split its cluster ad into columns and stored attributes.

    Raises:
        UsageError: the object lacks the submitted-cluster shape, an attribute is not an
            expression, or a hot attribute has the wrong type.
    """
    for name in ("cluster_ad", "num_procs", "proc_ads"):
        if not hasattr(cluster, name):
            raise UsageError(f"cannot submit {type(cluster).__name__}: it has no {name}; pass "
                             "htc.submit's SubmittedCluster or an object of the same shape")
    ad = dict(as_mapping(cluster.cluster_ad))
    num_procs = cluster.num_procs
    if isinstance(num_procs, bool) or not isinstance(num_procs, int) or num_procs < 1:
        raise UsageError(f"a cluster needs at least one proc, not num_procs={num_procs!r}")
    cid = cluster_id_of(cluster)
    hot: dict[str, str] = {}
    attrs: dict[str, str] = {}
    canon: dict[str, str] = {}
    for name, text in ad.items():
        low = name.lower()
        if low in HOT_ATTRS:
            hot[low] = text
        else:
            if validate and text not in _WELL_FORMED:  # (check_text's first test, without a call per attribute)
                check_text(name, text)
            attrs[name] = text
            canon[low] = name
    if "clusterid" in hot and int_literal("ClusterId", hot["clusterid"]) != cid:
        raise UsageError(f"the cluster ad says ClusterId {hot['clusterid']} but the cluster is {cid}")
    qdate = int_literal("QDate", hot["qdate"]) if "qdate" in hot else int(now)
    status = int_literal("JobStatus", hot.get("jobstatus", "1"))
    if status not in INITIAL_STATES:
        raise UsageError(f"a job is submitted Idle (1) or Held (5), not JobStatus {status}")
    factory = None
    limit = attrs.get(MATERIALIZE_LIMIT_ATTR)
    max_idle = attrs.get(MATERIALIZE_MAX_IDLE_ATTR)
    if limit is not None or max_idle is not None:
        env = getattr(cluster, "env", None)
        factory = {
            # What htc.submit needs to expand more procs after a restart.
            "submit_text": getattr(cluster, "submit_text", None),
            "cwd": str(getattr(cluster, "cwd", "") or "") or None,
            "filename": getattr(cluster, "filename", None),
            "env": dict(env) if env is not None else None,
            "max_materialize": int_literal(MATERIALIZE_LIMIT_ATTR, limit) if limit else None,
            "max_idle": int_literal(MATERIALIZE_MAX_IDLE_ATTR, max_idle) if max_idle else None,
        }
    prep = PreparedCluster(
        cluster_id=cid,
        owner=string_literal("Owner", hot["owner"]) if "owner" in hot else None,
        qdate=qdate,
        num_procs=num_procs,
        attrs=attrs,
        status=status,
        prio=int_literal("JobPrio", hot.get("jobprio", "0")),
        entered=int_literal("EnteredCurrentStatus", hot["enteredcurrentstatus"])
        if "enteredcurrentstatus" in hot else qdate,
        factory=factory,
        source=cluster,
    )
    prep.canon = canon
    return prep


def _plain(text: str) -> bool:
    """True for texts that are certainly well-formed literals (checked with C-level string ops)."""
    if text[:1] == '"':
        return text.count('"') == 2 and text[-1] == '"' and "\\" not in text
    return _SIMPLE.match(text) is not None


def proc_rows(prep: PreparedCluster, proc_ads: Iterable[Mapping[str, str]], start: int,
              validate: bool = True) -> Iterator[tuple]:
    """Rows for ``jobs`` from proc ads; adds overridden attribute names to ``prep.proc_attrs``.

    This is the inner loop of a big submit: each attribute name is classified once (hot
    column or stored attribute, canonical case) and plain literal values skip the parser.

    Raises:
        UsageError: a proc ad is malformed (bad ProcId, foreign ClusterId or Owner, ...).
    """
    cid, owner, qdate = prep.cluster_id, prep.owner, prep.qdate
    attrs, canon, proc_attrs = prep.attrs, prep.canon, prep.proc_attrs
    global_id = None
    if prep.schedd_name is not None:
        # HTCondor's schedd sets it as each proc is made (NewProc): name#cluster.proc#time
        global_id = canon.setdefault("globaljobid", "GlobalJobId")
        global_prefix, global_suffix = f"{prep.schedd_name}#{cid}.", f"#{qdate}"
        proc_attrs.add(global_id)
    attrs_get = attrs.get
    names: dict[str, list] = {}  # name -> [hot lower-case name or None, canonical, seen as own]
    expected = start
    for pad in proc_ads:
        own = None
        status, prio, entered, autocluster = prep.status, prep.prio, prep.entered, None
        pid = expected
        for name, text in pad.items():
            entry = names.get(name)
            if entry is None:
                low = name.lower()
                if low in HOT_ATTRS:
                    entry = [low, name, False]
                else:
                    canonical = canon.get(low)
                    if canonical is None:
                        canonical = canon[low] = name
                    entry = [None, canonical, False]
                names[name] = entry
            low = entry[0]
            if low is not None:
                if low == "procid":
                    pid = int(text) if text.isdigit() else int_literal("ProcId", text)
                elif low == "jobstatus":
                    status = int_literal("JobStatus", text)
                    if status not in INITIAL_STATES:
                        raise UsageError(f"job {cid}.{pid}: submitted with JobStatus {text}; "
                                         "use 1 (Idle) or 5 (Held)")
                elif low == "jobprio":
                    prio = int_literal("JobPrio", text)
                elif low == "enteredcurrentstatus":
                    entered = int_literal("EnteredCurrentStatus", text)
                elif low == "autoclusterid":
                    autocluster = int_literal("AutoClusterId", text)
                elif low == "clusterid":
                    if int_literal("ClusterId", text) != cid:
                        raise UsageError(f"a proc of cluster {cid} says ClusterId {text}")
                else:
                    try:
                        same = parse_literal(text) == (owner if low == "owner" else qdate)
                    except ValueError:
                        same = False
                    if not same:
                        raise UsageError(f"job {cid}.{pid}: {name} must be the same for all "
                                         "procs of a cluster; set it in the cluster ad")
                continue
            canonical = entry[1]
            if attrs_get(canonical) == text:
                continue
            if validate and not _plain(text):
                check_expression(canonical, text)
            if own is None:
                own = {}
            own[canonical] = text
            if not entry[2]:
                entry[2] = True
                proc_attrs.add(canonical)
        if global_id is not None:
            if own is None:
                own = {}
            own[global_id] = quote(f"{global_prefix}{pid}{global_suffix}")
        if pid < expected:
            raise UsageError(f"cluster {cid}: ProcId {pid} out of order (expected {expected} or more)")
        yield (cid, pid, status, prio, owner, qdate, entered, autocluster,
               _encode(own).decode() if own else None)
        expected = pid + 1


def insert_procs(conn: sqlite3.Connection, prep: PreparedCluster, start: int, stop: int,
                 validate: bool = True) -> None:
    """Insert the ``jobs`` rows of procs ``start`` to ``stop - 1`` of a prepared cluster.

    Raises:
        UsageError: the cluster's ``proc_ads(start, stop)`` gave a ProcId outside the range,
            repeated one, or gave too few procs.
    """
    if stop <= start:
        return
    counted = [0]

    def rows():
        for row in proc_rows(prep, prep.source.proc_ads(start, stop), start, validate):
            if row[1] >= stop:
                raise UsageError(f"cluster {prep.cluster_id}: proc_ads({start}, {stop}) gave "
                                 f"ProcId {row[1]}")
            counted[0] += 1
            yield row

    try:
        conn.executemany(f"INSERT INTO jobs ({JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows())
    except sqlite3.IntegrityError:
        raise UsageError(f"cluster {prep.cluster_id}: proc_ads({start}, {stop}) repeated a "
                         "ProcId; each proc needs its own") from None
    if counted[0] != stop - start:
        raise UsageError(f"cluster {prep.cluster_id}: proc_ads({start}, {stop}) gave "
                         f"{counted[0]} procs, expected {stop - start}")

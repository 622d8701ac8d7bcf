"""Job ads as the queue stores and hands them out: a cluster ad shared by all its procs, a
small per-proc dict of differences, and the hot attributes kept as typed columns.

A :class:`JobAd` is a read-only mapping ``attribute -> ClassAd expression text`` that looks
the name up (case-insensitively, as ClassAds do) in the job's hot columns, then in its own
attributes, then in its cluster's ad -- the same chain as HTCondor's proc ad -> cluster ad.
Building one costs a few attribute stores, so a query can return a hundred thousand of them.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable, Iterator, Mapping

import msgspec

from htc.errors import UsageError

_decode = msgspec.json.Decoder(dict[str, str]).decode

#: Hot attributes: stored as columns of ``jobs`` (lower-case name -> canonical name).
HOT_ATTRS = {
    "clusterid": "ClusterId",
    "procid": "ProcId",
    "jobstatus": "JobStatus",
    "jobprio": "JobPrio",
    "owner": "Owner",
    "qdate": "QDate",
    "enteredcurrentstatus": "EnteredCurrentStatus",
    "autoclusterid": "AutoClusterId",
}
_ABSENT = object()
# Position of each hot attribute in JobAd._hot.
_HOT_INDEX = {low: i for i, low in enumerate(HOT_ATTRS)}

_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "b": "\b", "f": "\f"}


def quote(text: str) -> str:
    """A ClassAd string literal for ``text`` (``"a\\"b"``)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def parse_literal(text: str) -> object:
    """The Python value of a literal expression text: int, float, str, bool or None (undefined).

    Raises:
        ValueError: ``text`` is not a single literal (it is an expression to evaluate).
    """
    ok, found = _literal(text)
    if not ok:
        raise ValueError(found)
    return found


# The daemons read the same texts again and again (a cluster's attributes, for each of its
# jobs): each is read once while it stays among the last few thousand.
@functools.lru_cache(maxsize=8192)
def _literal(text: str) -> tuple[bool, object]:
    """(True, the value) of a literal text, or (False, why not)."""
    try:
        return True, _parse_literal(text)
    except ValueError as exc:
        return False, str(exc)


def _parse_literal(text: str) -> object:
    t = text.strip()
    if _INT.match(t):
        return int(t)
    if len(t) >= 2 and t[0] == '"' and t[-1] == '"':
        body = t[1:-1]
        if "\\" not in body and '"' not in body:
            return body
        out, i = [], 0
        while i < len(body):
            ch = body[i]
            if ch == "\\" and i + 1 < len(body):
                out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
                i += 2
                continue
            if ch == '"':
                raise ValueError(f"{text!r} is more than one string literal")
            out.append(ch)
            i += 1
        return "".join(out)
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "undefined":
        return None
    if _FLOAT.match(t):
        return float(t)
    raise ValueError(f"{text!r} is not a literal")


def int_literal(attr: str, text: str) -> int:
    """The integer a hot attribute's expression text must be.

    Raises:
        UsageError: the text is not an integer literal.
    """
    try:
        value = parse_literal(text)
    except ValueError:
        value = None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{attr} must be an integer, not {text!r}")
    return value


def string_literal(attr: str, text: str) -> str | None:
    """The string of a literal string attribute (``Owner``); None when ``undefined``.

    Raises:
        UsageError: the text is neither a string literal nor ``undefined``.
    """
    try:
        value = parse_literal(text)
    except ValueError:
        value = 0
    if value is not None and not isinstance(value, str):
        raise UsageError(f"{attr} must be a string literal, not {text!r}")
    return value


class ClusterAd:
    """The attributes a cluster's procs share, with case-insensitive name lookup."""

    __slots__ = ("cluster_id", "owner", "qdate", "attrs", "canon", "proc_attrs", "cache", "attrs_cache")

    def __init__(self, cluster_id: int, attrs: dict[str, str], proc_attrs: list[str],
                 owner: str | None = None, qdate: int = 0, *, canon: dict[str, str] | None = None):
        self.cluster_id = cluster_id
        self.owner = owner
        self.qdate = qdate
        #: canonical name -> expression text (hot attributes are not in here)
        self.attrs = attrs
        #: attribute names that at least one proc of the cluster overrides
        self.proc_attrs = frozenset(n.lower() for n in proc_attrs)
        #: lower-case name -> canonical name, over attrs and proc_attrs (``canon``: the
        #: caller's of attrs, as this would make it)
        self.canon = {n.lower(): n for n in proc_attrs}
        self.canon.update(canon if canon is not None else ((n.lower(), n) for n in attrs))
        #: per-cluster memo for evaluators (parsed expressions, policy results)
        self.cache: dict = {}
        #: per-cluster memo of what depends on ``attrs`` alone (their parsed ClassAd, which
        #: names an expression reaches through them): kept when procs override more names
        self.attrs_cache: dict = {}

    def with_proc_attrs(self, names: Iterable[str]) -> ClusterAd:
        """This cluster once procs override ``names`` too (what reading it back after storing
        the longer list gives; a fresh ``cache``, the same ``attrs_cache``: ``attrs`` are
        unchanged), without lower-casing every attribute again."""
        new = ClusterAd.__new__(ClusterAd)
        new.cluster_id, new.owner, new.qdate, new.attrs = self.cluster_id, self.owner, self.qdate, self.attrs
        canon = dict(self.canon)
        for name in names:
            canon.setdefault(name.lower(), name)  # a cluster attribute's own case wins, as in __init__
        new.canon = canon
        new.proc_attrs = self.proc_attrs | {name.lower() for name in names}
        new.cache = {}
        new.attrs_cache = self.attrs_cache
        return new


class JobAd(Mapping[str, str]):
    """One job's ad: a read-only mapping from attribute name to ClassAd expression text.

    Lookup is case-insensitive; iteration yields each attribute once, in its canonical case.
    ``cluster_id``, ``proc_id``, ``status``, ``prio`` and ``owner`` are typed shortcuts.
    """

    __slots__ = ("cluster", "_own", "_hot")

    def __init__(self, cluster: ClusterAd, own: dict[str, str] | str | None, hot: tuple):
        self.cluster = cluster
        # The proc's own attributes: a dict, or its stored JSON text decoded on first use
        # (most queries never look at most procs' own attributes).
        self._own = own
        # (ClusterId, ProcId, JobStatus, JobPrio, Owner, QDate, EnteredCurrentStatus, AutoClusterId)
        self._hot = hot

    @property
    def own(self) -> dict[str, str]:
        """The attributes this proc sets itself (its differences from the cluster ad)."""
        own = self._own
        if own is None:
            own = self._own = {}
        elif own.__class__ is str:
            own = self._own = _decode(own)
        return own

    @property
    def cluster_id(self) -> int:
        return self._hot[0]

    @property
    def proc_id(self) -> int:
        return self._hot[1]

    @property
    def job_id(self) -> tuple[int, int]:
        return (self._hot[0], self._hot[1])

    @property
    def status(self) -> int:
        return self._hot[2]

    @property
    def prio(self) -> int:
        return self._hot[3]

    @property
    def owner(self) -> str | None:
        return self._hot[4]

    @property
    def qdate(self) -> int:
        return self._hot[5]

    def hot_value(self, name: str) -> object:
        """The typed value of a hot attribute (``None`` when unset).

        Raises:
            KeyError: ``name`` is not a hot attribute.
        """
        return self._hot[_HOT_INDEX[name.lower()]]

    def __getitem__(self, name: str) -> str:
        text = self.get(name, _ABSENT)
        if text is _ABSENT:
            raise KeyError(name)
        return text

    def get(self, name: str, default=None):  # type: ignore[override]
        """``self[name]``, or ``default`` when the job has no such attribute (one lookup, the
        same chain as ``[]``: the daemons call this for every attribute they read)."""
        low = name.lower()
        i = _HOT_INDEX.get(low)
        if i is not None:
            value = self._hot[i]
            if value is None:
                return default
            return quote(value) if i == 4 else str(value)
        cluster = self.cluster
        canon = cluster.canon.get(low, name)
        own = self._own
        if own:
            if own.__class__ is str:
                own = self.own
            text = own.get(canon)
            if text is not None:
                return text
        return cluster.attrs.get(canon, default)

    def __contains__(self, name: object) -> bool:
        try:
            self[name]  # type: ignore[index]
        except (KeyError, AttributeError):
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        for low, i in _HOT_INDEX.items():
            if self._hot[i] is not None:
                yield HOT_ATTRS[low]
        yield from self.cluster.attrs
        for name in self.own:
            if name not in self.cluster.attrs:
                yield name

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def to_dict(self) -> dict[str, str]:
        """A plain ``{attribute: expression text}`` copy of the whole ad (what iterating and
        indexing give, in the same order, built without a lookup per attribute)."""
        hot = self._hot
        out = {HOT_ATTRS[low]: (quote(v) if i == 4 else str(v))
               for low, i in _HOT_INDEX.items() if (v := hot[i]) is not None}
        attrs = self.cluster.attrs
        own = self.own
        if not own:
            out.update(attrs)
            return out
        # The cluster's, then the proc's over them where it sets its own: an assignment to a
        # name already there keeps its place (one pass over the proc's few names, not the
        # cluster's many).
        out.update(attrs)
        canon = self.cluster.canon
        for name, text in own.items():
            if name in attrs:
                out[name] = text
            else:
                low = name.lower()
                # (an own name is stored in its canonical case: its own text, as [] reads it)
                out[name] = text if low not in _HOT_INDEX and canon.get(low, name) == name else self[name]
        return out

    def text_without(self, hidden: str) -> str:
        """The ad as new-syntax ClassAd text, ``[ Name = text; ... ]`` in :meth:`to_dict`'s
        order, without the attribute ``hidden`` (its canonical name, e.g. ``ClaimId``: what a
        schedd keeps from other daemons).

        The cluster's attributes are printed once per cluster and kept in its ``attrs_cache``
        (they are what the cluster's jobs share, and a cluster ad's ``attrs`` never change: an
        edit makes a new one). That holds when this proc's own attributes are all new names in
        their canonical case and none is ``hidden``; otherwise the whole ad is printed."""
        cluster = self.cluster
        attrs, canon, own = cluster.attrs, cluster.canon, self.own
        for name in own:
            low = name.lower()
            if name in attrs or low in _HOT_INDEX or canon.get(low, name) != name or name == hidden:
                whole = self.to_dict()  # (an own name over another: to_dict's other cases)
                whole.pop(hidden, None)
                return "[ " + items_text(whole.items()) + " ]"
        hot = self._hot
        head = [(HOT_ATTRS[low], quote(v) if i == 4 else str(v))
                for low, i in _HOT_INDEX.items() if (v := hot[i]) is not None
                and HOT_ATTRS[low] != hidden]
        key = ("text without", hidden)
        shared = cluster.attrs_cache.get(key)
        if shared is None:
            shared = cluster.attrs_cache[key] = items_text(
                [item for item in attrs.items() if item[0] != hidden])
        parts = [text for text in (items_text(head), shared, items_text(own.items())) if text]
        return "[ " + "; ".join(parts) + " ]"

    def __repr__(self) -> str:
        return f"<JobAd {self._hot[0]}.{self._hot[1]} status={self._hot[2]}>"


def items_text(items) -> str:
    """``Name = text; ...`` of ``items``, (name, expression text) pairs in a collection that can
    be read twice (a list, a dict's items): the body of new-syntax ClassAd text. A value not yet
    text (a number) is printed as an f-string prints it."""
    try:
        return "; ".join(map(" = ".join, items))
    except TypeError:
        return "; ".join(f"{name} = {text}" for name, text in items)


_STR_ONLY = frozenset({str})


def as_mapping(ad: Mapping[str, str] | object) -> Mapping[str, str]:
    """Check that a cluster or proc ad is a mapping of attribute names to expression texts.

    Raises:
        UsageError: it is not a mapping, or a value is not a string.
    """
    if not isinstance(ad, Mapping):
        raise UsageError(f"a job ad must be a mapping of attribute -> expression text, not {type(ad).__name__}")
    if set(map(type, ad)) <= _STR_ONLY and set(map(type, ad.values())) <= _STR_ONLY:
        return ad  # (every name and text a str: told in two C-level passes, not item by item)
    for name, text in ad.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise UsageError(
                f"job ad attribute {name!r} has value {text!r}: attributes map names to "
                "ClassAd expression text (write 5 as '5', a string as '\"x\"')")
    return ad

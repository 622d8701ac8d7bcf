"""One slot ad's values as a cycle reads them, and the values carving writes back.

Theory of operation
-------------------
A cycle reads the same dozen attributes of every slot ad (``State``, ``Cpus``, ``SlotWeight``,
``RemoteUser``...), most of them scalar literals. The generic ``ClassAd.get`` converts each
value on the way out; :func:`fast_get` and :func:`fast_read` take a scalar literal straight
from the ad's table of syntax trees and fall back to ``get`` (or to a plain mapping's ``get``)
for everything else, so they answer exactly what ``get`` answers.

On top of them: :func:`number` (an attribute evaluated to a float), :func:`eval_rank` (a
negotiator rank, non-numbers ranking worst as in HTCondor), :func:`remote_user_of` (who a slot
is claimed by), :func:`slot_weight` (HTCondor's ``GetSlotWeight``) and
:func:`claimed_resources` (the Claimed slots' users and weights, for ``check_matches``).

Carving a partitionable slot writes numbers back into ad copies: :func:`quantize` rounds a
request up as the ClassAd function does, :func:`same_type` keeps an integral resource integral,
:func:`added` sums a run's carves, and :func:`literal` shares one syntax-tree node per value,
so that a carved value recurring across slots and runs is compiled once. The slots themselves, their classes and the carving
are :mod:`htc.daemons.negotiator.slots`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from htc.classad import ClassAd, ExprTree
from htc.classad.ast import Literal
from htc.daemons.negotiator.preemption import WORST_RANK, as_rank


def number(ad: ClassAd, name: str, default: float | None = None, target=None) -> float | None:
    """Evaluate ``ad[name]`` (TARGET = ``target``) to a float, or return ``default``."""
    value = fast_get(ad, name)
    if value is None:
        return default
    kind = value.__class__
    if kind is int or kind is float:
        return float(value)  # (what as_rank makes of it, without the call)
    if kind is ExprTree:
        value = ad.eval(name, target)
    value = as_rank(value)
    return default if value is None else value


def eval_rank(expr: ExprTree | None, my: ClassAd, target) -> float:
    """Evaluate a negotiator rank expression; non-numbers rank worst (HTCondor's -FLT_MAX)."""
    if expr is None:
        return 0.0
    value = as_rank(expr.eval(my, target))
    return WORST_RANK if value is None or math.isnan(value) else value


#: the types of a literal that fast_get hands back as it is (what ClassAd.get would give)
SCALARS = frozenset({str, int, float, bool})


def fast_get(ad, name: str, default=None):
    """``ad.get(name, default)``, reading a scalar literal straight from a ClassAd's table
    (a cycle reads a dozen attributes of every slot ad; the generic path converts each)."""
    exprs = getattr(ad, "_exprs", None)
    if exprs is None:
        return ad.get(name, default)  # a plain mapping
    node = exprs.get(name.lower())
    if node is None:
        return default
    if node.__class__ is Literal and node.value.__class__ in SCALARS:
        return node.value
    return ad.get(name, default)


def fast_read(exprs: dict, ad, low: str, name: str, default=None):
    """:func:`fast_get` with the ad's table and the lower-case name at hand: a cycle reads the
    same few names of every slot ad, so neither is looked up or lowered per read. ``exprs``
    None: ``ad`` is a plain mapping."""
    if exprs is None:
        return ad.get(name, default)
    node = exprs.get(low)
    if node is None:
        return default
    if node.__class__ is Literal and node.value.__class__ in SCALARS:
        return node.value
    return ad.get(name, default)


_USER_ATTRS = tuple((attr, attr.lower()) for attr in (
    "PreemptingAccountingGroup", "PreemptingUser", "AccountingGroup", "RemoteUser"))


def remote_user_of(ad: Mapping) -> str | None:
    """Return who a slot is claimed by (a pending preemptor first), or None when idle."""
    exprs = getattr(ad, "_exprs", None)
    if exprs is not None and "remoteuser" not in exprs and "accountinggroup" not in exprs and (
            "preemptinguser" not in exprs and "preemptingaccountinggroup" not in exprs):
        return None  # (an idle slot's ad, without looking at each name in turn)
    state = str(fast_read(exprs, ad, "state", "State", "")).lower()
    for attr, low in _USER_ATTRS:
        value = fast_read(exprs, ad, low, attr)
        if isinstance(value, str) and value:
            # Only claimed slots have a remote user; stale attributes of idle slots do not count.
            if state in ("claimed", "preempting", "matched") or attr.startswith("Preempting"):
                return value
    return None


def slot_weight(ad: ClassAd, use_slot_weights: bool) -> float:
    """HTCondor's ``GetSlotWeight``: ``SlotWeight`` (else ``Cpus``); 1 when weights are off."""
    if not use_slot_weights:
        return 1.0
    exprs = getattr(ad, "_exprs", None)
    if exprs is not None and "slotweight" not in exprs:
        # the usual ad: no SlotWeight, and Cpus a number (what the loop below makes of it)
        node = exprs.get("cpus")
        if node.__class__ is Literal and node.value.__class__ in (int, float):
            value = float(node.value)
            return value if value >= 0 else 1.0
    for name in ("SlotWeight", "Cpus"):
        value = number(ad, name)
        if value is not None and value >= 0:
            return value
    return 1.0


def quantize(value: float, quantum: float) -> float:
    """Round ``value`` up to a multiple of ``quantum`` (ClassAd ``quantize``)."""
    if quantum <= 0:
        return value
    return math.ceil(value / quantum) * quantum


def as_classad(ad) -> ClassAd:
    """Return ``ad`` as an ``htc.classad.ClassAd`` (plain mappings are converted)."""
    return ad if isinstance(ad, ClassAd) else ClassAd(dict(ad))


def claimed_resources(machine_ads, use_slot_weights: bool = True) -> dict[str, tuple[str, float]]:
    """Return ``{slot name: (submitter, weight)}`` of the Claimed slots, for ``check_matches``."""
    out = {}
    for ad in machine_ads:
        exprs = getattr(ad, "_exprs", None)
        node = None if exprs is None else exprs.get("state")
        if node.__class__ is Literal and node.value.__class__ is str:
            if node.value.lower() != "claimed":  # (fast_read's answer, without the call)
                continue  # (the usual ad: its Name need not be read)
        elif str(fast_read(exprs, ad, "state", "State", "")).lower() != "claimed":
            continue
        name = fast_read(exprs, ad, "name", "Name")
        if not isinstance(name, str):
            continue
        for attr, low in (("AccountingGroup", "accountinggroup"), ("RemoteUser", "remoteuser")):
            user = fast_read(exprs, ad, low, attr)
            if isinstance(user, str) and user:
                out[name] = (user, slot_weight(as_classad(ad), use_slot_weights))
                break
    return out


#: type -> value -> its Literal node: a carved resource's value recurs across slots and runs,
#: and a shared node is compiled once (nodes are never changed after they are made). One
#: table per type (1, 1.0 and True are equal keys), so no key tuple is made per call nor kept.
_LITERAL_NODES: dict[type, dict] = {}
#: the shared nodes of ints, :func:`literal`'s own dict (cleared in place, never replaced), for a
#: loop that looks a size up itself (``runs.commit_fill``): a hit is ``literal(v)``'s node; on
#: a miss call :func:`literal`, which makes and keeps it
INT_LITERALS: dict[int, Literal] = _LITERAL_NODES.setdefault(int, {})


def literal(value) -> Literal:
    """The (shared) syntax-tree node of a numeric literal ``value``."""
    if value == 0 and value.__class__ is float and math.copysign(1.0, value) < 0:
        return Literal(value)  # -0.0 == 0.0 as a key: sharing would print one as the other
    nodes = _LITERAL_NODES.get(value.__class__)
    if nodes is None:
        nodes = _LITERAL_NODES[value.__class__] = {}
    node = nodes.get(value)
    if node is None:
        if len(nodes) >= 100_000:
            nodes.clear()
        node = nodes[value] = Literal(value)
    return node


_EXACT = 2.0 ** 53  # below it integers are exact floats, and so are sums of them
_NUMBERS = (int, float)


def added(value, step, count: int):
    """``value`` with ``step`` added ``count`` times, one addition after another, as a loop
    would make them (k additions of a float are not one addition of k times it, except where
    every partial sum is an integer a float holds exactly: then it is one multiplication)."""
    if (count > 0 and value.__class__ in _NUMBERS and step.__class__ in _NUMBERS
            and (value.__class__ is int or value.is_integer())
            and (step.__class__ is int or step.is_integer())
            and abs(value) + count * abs(step) < _EXACT):
        return value + count * step
    for _ in range(count):
        value += step
    return value


def same_type(old, value: float):
    """Return ``value`` as an int when ``old`` was one (keeps shrunk resources integral)."""
    return int(value) if isinstance(old, int) and float(value).is_integer() else value

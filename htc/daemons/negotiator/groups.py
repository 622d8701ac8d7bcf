"""Accounting groups with quotas: HTCondor's hierarchical group quotas (HGQ).

Theory of operation
-------------------
``GROUP_NAMES = group_a, group_a.sub, group_b`` names a tree under the root group ``<none>``
(a dotted name's parent is its prefix; a prefix not configured makes the root the parent).
Each group has a *configured quota*: ``GROUP_QUOTA_<g>`` slot weight (static), or else
``GROUP_QUOTA_DYNAMIC_<g>`` -- a fraction of what its parent hands down (dynamic). Every cycle
(HTCondor's ``hgq_assign_quotas``, ``hgq_fairshare``, ``hgq_allocate_surplus``):

1. **Quotas** (:func:`assign_quotas`). The root's subtree gets the pool's slot weight. A node's
   children with static quotas share first: together at most what the node has, scaled down in
   proportion if they ask for more. Children with dynamic quotas share the remainder in proportion
   to their fractions (scaled so the fractions sum to at most 1). The node keeps what its children
   did not take as its own quota (a leaf keeps all).
2. **Allocation** (:func:`allocate`). Each group is allocated ``min(quota, requested)``, its
   requested slot weight being its submitters' jobs (idle and running). What a group does not
   use is *surplus*; it flows up to the parent, which shares it among itself and those children
   that accept surplus (``GROUP_ACCEPT_SURPLUS``, or ``GROUP_ACCEPT_SURPLUS_<g>``; the root
   always does) -- in proportion to their subtree quotas first, then equally to groups whose
   quota is 0 -- never more than a subtree still requests. Surplus nobody takes goes further up.
3. **Negotiation** (:mod:`htc.daemons.negotiator.cycle`). Groups negotiate in ``GROUP_SORT_EXPR``
   order (default: by usage / quota, ``<none>`` last). Each spins its own pie over its allocation:
   its submitters' shares are of the allocation, and the group stops at ``allocated - usage``.
   ``GROUP_QUOTA_MAX_ALLOCATION_ROUNDS`` rounds repeat 2-3 while slots remain, with the groups
   that could not use their allocation no longer requesting, so their share becomes surplus.

Not done (HTCondor has them): ``GROUP_AUTOREGROUP``, the round-robin recovery of fractional
remainders (``GROUP_QUOTA_ROUND_ROBIN_RATE``), quota over-subscription, floors and ceilings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from htc.classad import ClassAd, ExprTree
from htc.daemons.settings import knob
from htc.errors import UsageError

__all__ = ["GroupSettings", "GroupNode", "build_tree", "assign_quotas", "allocate",
           "group_order", "ROOT", "DEFAULT_GROUP_SORT_EXPR"]

#: the root group's name, as HTCondor prints it
ROOT = "<none>"
DEFAULT_GROUP_SORT_EXPR = ('ifThenElse(AccountingGroup=?="<none>",3.4e+38,ifThenElse(GroupQuota>0,'
                           'GroupResourcesInUse/GroupQuota,3.3e+38))')


@dataclass(frozen=True)
class GroupSettings:
    """The group-quota knobs. The per-group ones (``GROUP_QUOTA_<g>``, ...) are read by
    :meth:`htc.daemons.negotiator.settings.NegotiatorSettings.from_config` for each group of
    ``GROUP_NAMES`` and passed in as mappings keyed by group name."""

    static_quotas: Mapping[str, float] = field(default_factory=dict)
    dynamic_quotas: Mapping[str, float] = field(default_factory=dict)
    accept_surplus: bool = knob("GROUP_ACCEPT_SURPLUS", False)
    accept_surplus_by_group: Mapping[str, bool] = field(default_factory=dict)
    max_allocation_rounds: int = knob("GROUP_QUOTA_MAX_ALLOCATION_ROUNDS", 3)
    sort_expr: str = knob("GROUP_SORT_EXPR", DEFAULT_GROUP_SORT_EXPR,
                          convert=lambda text: text or DEFAULT_GROUP_SORT_EXPR)

    def __post_init__(self) -> None:
        for name, value in self.static_quotas.items():
            if not value >= 0:
                raise UsageError(f"GROUP_QUOTA_{name} must be zero or more, got {value!r}")
        for name, value in self.dynamic_quotas.items():
            if not 0 <= value <= 1:
                raise UsageError(f"GROUP_QUOTA_DYNAMIC_{name} must be a fraction in [0, 1], "
                                 f"got {value!r}")
        if not self.max_allocation_rounds >= 1:
            raise UsageError("GROUP_QUOTA_MAX_ALLOCATION_ROUNDS must be at least 1, got "
                             f"{self.max_allocation_rounds!r}")
        try:
            object.__setattr__(self, "_sort", ExprTree(self.sort_expr))
        except Exception as exc:  # the parser's message names the position
            raise UsageError(f"GROUP_SORT_EXPR = {self.sort_expr!r} is not a ClassAd "
                             f"expression: {exc}") from exc

    def surplus_for(self, group: str) -> bool:
        """Does ``group`` accept surplus (its own knob, else ``GROUP_ACCEPT_SURPLUS``)?"""
        for name, value in self.accept_surplus_by_group.items():
            if name.lower() == group.lower():
                return value
        return self.accept_surplus


def _lookup(mapping: Mapping[str, float], group: str) -> float | None:
    for name, value in mapping.items():
        if name.lower() == group.lower():
            return value
    return None


class GroupNode:
    """One group of the tree and its numbers for this cycle (HTCondor's ``GroupEntry``)."""

    __slots__ = ("name", "children", "static", "config_quota", "accept_surplus", "quota",
                 "subtree_quota", "requested", "subtree_requested", "allocated", "usage")

    def __init__(self, name: str, static: bool, config_quota: float, accept_surplus: bool):
        self.name = name
        self.children: list[GroupNode] = []
        self.static = static
        self.config_quota = config_quota
        self.accept_surplus = accept_surplus
        self.quota = self.subtree_quota = 0.0
        self.requested = self.subtree_requested = self.allocated = self.usage = 0.0

    def walk(self):
        """This node and every node below it, parents first."""
        yield self
        for child in self.children:
            yield from child.walk()


def build_tree(group_names, settings: GroupSettings) -> GroupNode:
    """Build the group tree of ``GROUP_NAMES`` under the root ``<none>``.

    Raises:
        UsageError: a group name appears twice.
    """
    root = GroupNode(ROOT, static=False, config_quota=1.0, accept_surplus=True)
    nodes: dict[str, GroupNode] = {}
    for name in sorted(group_names, key=lambda n: (n.count("."), n.lower())):
        if name.lower() in nodes:
            raise UsageError(f"GROUP_NAMES lists {name} twice")
        static = _lookup(settings.static_quotas, name)
        dynamic = _lookup(settings.dynamic_quotas, name)
        node = GroupNode(name, static=static is not None,
                         config_quota=static if static is not None else (dynamic or 0.0),
                         accept_surplus=settings.surplus_for(name))
        parent = root  # the longest configured prefix (shallower names were added first)
        parts = name.lower().split(".")
        for cut in range(len(parts) - 1, 0, -1):
            found = nodes.get(".".join(parts[:cut]))
            if found is not None:
                parent = found
                break
        parent.children.append(node)
        nodes[name.lower()] = node
    return root


def assign_quotas(node: GroupNode, quota: float) -> None:
    """Hand ``quota`` (slot weight) down the subtree of ``node`` (step 1 of the module doc)."""
    node.subtree_quota = node.quota = max(0.0, quota)
    if node.quota <= 0:
        for child in node.walk():
            child.quota = child.subtree_quota = 0.0
        return
    static_sum = sum(c.config_quota for c in node.children if c.static)
    dynamic_sum = sum(c.config_quota for c in node.children if not c.static)
    static_given = min(static_sum, node.quota)
    dynamic_given = max(0.0, node.quota - static_given)
    static_norm = static_sum if static_sum > 0 else 1.0
    dynamic_norm = max(dynamic_sum, 1.0)
    handed = 0.0
    for child in node.children:
        share = (child.config_quota * static_given / static_norm if child.static
                 else child.config_quota * dynamic_given / dynamic_norm)
        assign_quotas(child, share)
        handed += max(0.0, share)
    node.quota = max(0.0, node.quota - handed)


def _fairshare(node: GroupNode) -> float:
    node.allocated = min(node.requested, node.quota)
    node.requested -= node.allocated
    node.subtree_requested = node.requested
    surplus = node.quota - node.allocated
    for child in node.children:
        surplus += _fairshare(child)
        if child.accept_surplus:
            node.subtree_requested += child.subtree_requested
    return _share_surplus(node, surplus) if node.children else surplus


def _share_loop(by_quota: bool, groups, allocated, wanting, surplus: float) -> float:
    while surplus > 1e-12:
        total = sum((g.subtree_quota if by_quota else 1.0)
                    for g, w in zip(groups, wanting) if w > 0)
        if total <= 0:
            break
        capped = False
        given = 0.0
        for j, g in enumerate(groups):
            if wanting[j] > 0:
                a = surplus * ((g.subtree_quota if by_quota else 1.0) / total)
                if a > wanting[j]:
                    a, capped = wanting[j], True
                allocated[j] += a
                wanting[j] -= a
                given += a
        surplus -= given
        if not capped or surplus < 0:
            surplus = 0.0  # everything was given (float jitter aside)
    return surplus


def _share_surplus(node: GroupNode, surplus: float) -> float:
    """Share ``surplus`` between ``node`` and its children on equal footing (step 2)."""
    if surplus <= 0 or node.subtree_requested <= 0:
        return max(0.0, surplus)
    groups = [*node.children, node]
    # the node itself competes like a child that accepts surplus, with its own numbers
    quota_of = {id(node): node.quota}
    wants = [c.subtree_requested if c.accept_surplus else 0.0 for c in node.children]
    wants.append(node.requested)
    requested = node.subtree_requested
    allocated = [0.0] * len(groups)
    if surplus >= requested:
        allocated = [max(0.0, w) for w in wants]
        surplus -= requested
    else:
        saved = node.subtree_quota
        node.subtree_quota = quota_of[id(node)]
        wanting = list(wants)
        surplus = _share_loop(True, groups, allocated, wanting, surplus)
        surplus = _share_loop(False, groups, allocated, wanting, surplus)
        node.subtree_quota = saved
    for child, amount in zip(node.children, allocated):
        if amount > 0:
            _share_surplus_down(child, amount)
    node.allocated += allocated[-1]
    node.requested -= allocated[-1]
    node.subtree_requested = max(0.0, requested - sum(allocated))
    return surplus


def _share_surplus_down(node: GroupNode, amount: float) -> None:
    if not node.children:
        node.allocated += amount
        node.requested -= amount
        node.subtree_requested = node.requested
        return
    _share_surplus(node, amount)


def allocate(root: GroupNode, pool_weight: float, requested: Mapping[str, float]) -> dict[str, float]:
    """Assign quotas and allocate them with surplus sharing (steps 1 and 2).

    Args:
        root: the tree from :func:`build_tree` (its numbers are overwritten).
        pool_weight: the pool's total slot weight.
        requested: slot weight each group's submitters ask for, by group name (``<none>`` for
            submitters outside every group).

    Returns:
        ``{group name: allocated slot weight}``.
    """
    for node in root.walk():
        node.requested = max(0.0, float(requested.get(node.name, 0.0)))
        node.allocated = node.subtree_requested = 0.0
    assign_quotas(root, pool_weight)
    _fairshare(root)
    return {node.name: node.allocated for node in root.walk()}


def group_order(root: GroupNode, settings: GroupSettings) -> list[GroupNode]:
    """The groups in ``GROUP_SORT_EXPR`` order (ascending; ties by name, the root last)."""
    expr: ExprTree = settings._sort  # type: ignore[attr-defined]

    def key(node: GroupNode):
        ad = ClassAd({"AccountingGroup": node.name, "GroupQuota": node.quota,
                      "GroupResourcesInUse": node.usage, "GroupResourcesAllocated": node.allocated})
        value = expr.eval(ad, None)
        number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
            else 3.4e38
        return (number, node.name == ROOT, node.name.lower())

    return sorted(root.walk(), key=key)

"""Which jobs a job tool acts on: condor_rm's reading of job arguments.

:func:`parse_selection` reads ``12`` as a cluster, ``12.3`` as a job, any other word as an
owner, plus ``-constraint EXPR`` and ``-all``; the :class:`JobSelection` it returns turns them
into the constraints the schedd is sent (named jobs one at a time, the rest as one group, as
condor_rm does).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from htc.classad import ExprTree, quote
from htc.classad.errors import ClassAdParseError
from htc.errors import UsageError

__all__ = ["JobSelection", "parse_selection", "check_expression"]

_JOB_ID = re.compile(r"^(\d+)(?:\.(\d+))?$")


def check_expression(text: str, what: str) -> None:
    """Refuse ``text`` unless it is empty or a ClassAd expression.

    Raises:
        UsageError: it does not parse; the message names ``what`` it was meant to be.
    """
    if not text:
        return
    try:
        ExprTree(text)
    except ClassAdParseError as exc:
        raise UsageError(f"the {what} {text!r} is not a ClassAd expression: {exc}") from None


@dataclass(frozen=True)
class JobSelection:
    """Which jobs a tool acts on, as condor_rm reads its arguments."""

    jobs: tuple[str, ...] = ()
    clusters: tuple[int, ...] = ()
    users: tuple[str, ...] = ()
    constraint: str = ""
    all: bool = False

    def group_constraint(self) -> str:
        """The one constraint for clusters, users, ``-constraint`` and ``-all`` (condor_rm's
        ``handleConstraints``), or ``""`` when only named jobs are selected."""
        parts = [f"ClusterId == {c}" for c in self.clusters] + [f"Owner == {quote(u)}" for u in self.users]
        usercluster = " || ".join(parts)
        if self.constraint and usercluster:
            return f"({self.constraint}) && ({usercluster})"
        if self.constraint:
            return self.constraint
        if usercluster:
            return usercluster
        return "true" if self.all else ""

    def group_label(self) -> str:
        """How condor_rm names the group in its message (`` in cluster 12``, `` of user "a"``)."""
        if self.constraint or len(self.clusters) + len(self.users) > 1:
            return f" matching constraint ({self.group_constraint()})"
        if self.clusters:
            return f" in cluster {self.clusters[0]}"
        if self.users:
            return f" of user {quote(self.users[0])}"
        return ""

    def constraint_for_all(self) -> str:
        """One constraint selecting everything selected (named jobs included)."""
        parts = []
        for job in self.jobs:
            cluster, proc = job.split(".")
            parts.append(f"(ClusterId == {cluster} && ProcId == {proc})")
        group = self.group_constraint()
        if group:
            parts.append(f"({group})")
        return " || ".join(parts)

    @property
    def empty(self) -> bool:
        """Nothing was selected."""
        return not (self.jobs or self.group_constraint())


def parse_selection(args: Sequence[str] = (), constraint: str | None = None, all: bool = False) -> JobSelection:
    """Read condor_rm-style job arguments.

    Args:
        args: ``CLUSTER``, ``CLUSTER.PROC`` or owner names.
        constraint: a ``-constraint`` expression.
        all: ``-all``.

    Returns:
        The :class:`JobSelection`.

    Raises:
        UsageError: nothing is selected, a cluster number is not positive, or the constraint
            does not parse.
    """
    jobs: list[str] = []
    clusters: list[int] = []
    users: list[str] = []
    for arg in args:
        match = _JOB_ID.match(arg)
        if match:
            cluster = int(match.group(1))
            if cluster <= 0:
                raise UsageError(f"Invalid cluster # from {arg}; clusters are numbered from 1")
            if match.group(2) is None:
                clusters.append(cluster)
            else:
                jobs.append(f"{cluster}.{int(match.group(2))}")
        elif re.match(r"^-?\d", arg):
            raise UsageError(f"{arg!r} is not a job id; write CLUSTER or CLUSTER.PROC")
        else:
            users.append(arg)
    if constraint:
        check_expression(constraint, "constraint")
    selection = JobSelection(tuple(jobs), tuple(clusters), tuple(users), constraint or "", all)
    if selection.empty:
        raise UsageError("no jobs selected; name jobs (CLUSTER or CLUSTER.PROC), an owner, "
                         "-constraint EXPR, or -all")
    return selection

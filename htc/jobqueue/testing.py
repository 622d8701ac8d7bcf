"""A submitted cluster given directly as ads, for tests and tools that have no submit file.

``JobQueue.submit`` takes anything shaped like ``htc.submit``'s ``SubmittedCluster``;
:class:`SimpleCluster` is the smallest such thing: a cluster ad, a proc count, and optionally
a function giving each proc its own attributes. Daemon tests use it to fill a queue without
going through the submit language.
"""

from __future__ import annotations

from typing import Callable, Iterator, Mapping

from htc.errors import UsageError


class SimpleCluster:
    """A cluster of ``num_procs`` procs sharing ``cluster_ad``; ``per_proc(i)`` adds proc i's own attributes."""

    def __init__(self, cluster_id: int, cluster_ad: Mapping[str, str], num_procs: int = 1, *,
                 per_proc: Callable[[int], Mapping[str, str]] | None = None,
                 submit_text: str | None = None, cwd: str | None = None):
        """Describe the cluster.

        Args:
            cluster_id: the id reserved with ``JobQueue.next_cluster_id()``.
            cluster_ad: attribute -> ClassAd expression text, common to all procs.
            num_procs: how many procs the cluster has.
            per_proc: function of the ProcId giving that proc's own attributes.
            submit_text, cwd: stored for late materialization (see ``JobQueue.materialize``).

        Raises:
            UsageError: ``num_procs`` is not a positive integer.
        """
        if not isinstance(num_procs, int) or num_procs < 1:
            raise UsageError(f"a cluster has at least one proc, not {num_procs!r}")
        self.cluster_id = cluster_id
        self.cluster_ad = {"ClusterId": str(cluster_id), **cluster_ad}
        self.num_procs = num_procs
        self.submit_text = submit_text
        self.cwd = cwd
        self._per_proc = per_proc

    def proc_ads(self, start: int = 0, stop: int | None = None) -> Iterator[dict[str, str]]:
        """Each proc's own attributes (ProcId included), for procs ``start`` to ``stop - 1``."""
        stop = self.num_procs if stop is None else min(stop, self.num_procs)
        per_proc = self._per_proc
        for i in range(start, stop):
            ad = {"ProcId": str(i)}
            if per_proc is not None:
                ad.update(per_proc(i))
            yield ad

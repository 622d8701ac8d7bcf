"""PERIODIC_CHECKPOINT: the startd's expression that says when a running standard-universe job
is checkpointed (HTCondor's startd knob of the same name; sans-IO).

Theory of operation
-------------------
After every sensor sample (each POLLING_INTERVAL, 5 s by default) the adapter calls
:meth:`PeriodicCheckpoints.evaluate`. For each slot whose claim's starter is running a
standard-universe job (``JobUniverse`` 1) it evaluates PERIODIC_CHECKPOINT with the slot ad as
MY and the job ad as TARGET, through the startd's policy (:mod:`htc.daemons.startd.policy`, so
``time()`` is the core's clock). Only a job its starter has started (StarterStarted, the
job's process spawned) is considered: a claim still fetching its image or building the runtime
has nothing to checkpoint. The slot ad carries ``LastPeriodicCheckpoint``: when the startd last
asked for a periodic checkpoint of the claim's job, or when the job started before the first. When the expression is true the startd emits :class:`~htc.daemons.startd.events.CheckpointJob`
(as for ``htc checkpoint``, which also counts as a periodic checkpoint here, like HTCondor's
condor_checkpoint) and sets ``LastPeriodicCheckpoint`` to now; the starter checkpoints the job,
which runs on, and sends the image to the shadow.

HTCondor's default, ``((time() - LastPeriodicCheckpoint)/60.0) > (180.0 + $RANDOM_INTEGER(-30,30,1))``,
checkpoints every two and a half to three and a half hours. htc's CHECKPOINT_INTERVAL (the
starter's own timer) applies as well; set it to 0 to leave periodic checkpoints to this
expression alone.
"""

from __future__ import annotations

from typing import Any

from htc.daemons.startd import events as ev

__all__ = ["KNOB", "STANDARD_UNIVERSE", "PeriodicCheckpoints"]

KNOB = "PERIODIC_CHECKPOINT"
STANDARD_UNIVERSE = 1


class PeriodicCheckpoints:
    """``LastPeriodicCheckpoint`` of each running standard-universe claim, and the evaluation."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}  # claim id -> LastPeriodicCheckpoint

    def started(self, claim_id: str, now: float) -> None:
        """The claim's job has started: the first period begins."""
        self.last[claim_id] = now

    def checkpointed(self, claim_id: str, now: float) -> None:
        """A checkpoint was asked for by other means (``htc checkpoint``): the period restarts."""
        if claim_id in self.last:
            self.last[claim_id] = now

    def evaluate(self, startd: Any, running: set[str], now: float, out: list) -> None:
        """Emit CheckpointJob for each running standard-universe job whose PERIODIC_CHECKPOINT is true.

        Args:
            startd: the core (its ``slots``, ``slot_ad(slot, now)`` and ``policy``).
            running: the claims whose starter is alive.
        """
        seen = set()
        for slot in list(startd.slots.values()):
            claim = slot.claim
            if claim is None or claim.id not in running or claim.id not in self.last:
                continue
            seen.add(claim.id)
            if (claim.job_ad or {}).get("JobUniverse") != STANDARD_UNIVERSE:
                continue
            last = self.last[claim.id]
            slot_ad = dict(startd.slot_ad(slot, now))
            slot_ad["LastPeriodicCheckpoint"] = int(last)
            if startd.policy.evaluate(KNOB, slot_ad, claim.job_ad, now=now):
                self.last[claim.id] = now
                out.append(ev.CheckpointJob(slot.name, claim.id, why=KNOB))
        for gone in set(self.last) - seen:
            del self.last[gone]

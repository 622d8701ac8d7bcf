"""The simulated machines: their slot ads, their owners, and the startd's policy decisions.

Each :class:`Machine` is one single-slot workstation. Its owner comes and goes
(:mod:`htc.sim.owner`); what the slot does about it is decided by the startd's own policy code,
:class:`htc.daemons.startd.policy.ClassAdPolicy` (the same object the startd core evaluates),
with ``time()`` pinned to the simulated clock:

* ``START`` decides whether the slot is ``Owner`` or ``Unclaimed`` and is the slot ad's
  ``Requirements``, so the negotiator itself evaluates it when matching;
* on the owner's return a running job is suspended when ``WANT_SUSPEND`` and ``SUSPEND`` hold
  (vacated at once otherwise);
* while suspended, the startd polls every ``poll`` seconds (the paper's local scheduler checks
  every half minute): ``CONTINUE`` resumes the job, ``PREEMPT`` vacates it (checkpointed: no
  work is lost, the job goes back to its queue).

:data:`CONDOR88_POLICY` is the paper's rule in HTCondor's knobs: start while the owner is
away, suspend the moment the owner returns, vacate after 5 minutes still suspended.
"""

from __future__ import annotations

from htc.classad import ClassAd
from htc.daemons.startd.policy import ClassAdPolicy
from htc.sim.owner import Station

__all__ = ["CONDOR88_POLICY", "Machine"]

#: the 1988 local scheduler as startd policy knobs (OwnerActive is the sim's owner sensor)
CONDOR88_POLICY: dict[str, str] = {
    "START": "OwnerActive =!= True",
    "SUSPEND": "OwnerActive =?= True",
    "WANT_SUSPEND": "True",
    "CONTINUE": "OwnerActive =!= True",
    "PREEMPT": '(Activity == "Suspended") && ((time() - EnteredCurrentActivity) > 5 * 60)',
}


class Machine:
    """One simulated workstation with one slot, and the slot ad the collector would hold."""

    __slots__ = ("name", "station", "policy", "owner_busy", "owner_since", "available_seconds",
                 "job", "state", "activity", "entered_activity", "seq", "ad", "suspended_at")

    def __init__(self, name: str, station: Station, policy: ClassAdPolicy, cpus: int = 1,
                 memory: int = 1024):
        self.name = name
        self.station = station
        self.policy = policy
        self.owner_busy = False
        self.owner_since = 0.0
        self.available_seconds = 0.0  # owner-free time inside the horizon
        self.job = None
        self.state = "Unclaimed"
        self.activity = "Idle"
        self.entered_activity = 0.0
        self.suspended_at: float | None = None
        self.seq = 0
        ad = ClassAd({
            "MyType": "Machine", "Name": name, "Machine": name, "MyAddress": f"<sim:{name}>",
            "Cpus": cpus, "Memory": memory, "Disk": 1_000_000, "SlotWeight": cpus,
            "DaemonStartTime": 0, "CurrentRank": 0.0, "OwnerActive": False,
        })
        advertised = policy.advertised(partitionable=False)
        for key in ("Start", "Rank", "Requirements"):  # what matching reads; not every knob
            ad[key] = advertised[key]
        self.ad = ad
        self.publish(0.0)

    # ------------------------------------------------------------------ the startd's answers

    def ask(self, knob: str, now: float) -> bool:
        """Evaluate a startd policy knob (START, SUSPEND, ...) on this slot at ``now``."""
        return self.policy.evaluate(knob, self.ad, self.job.ad if self.job else None, now=now)

    def publish(self, now: float) -> None:
        """Bring the slot ad up to date (a new report: UpdateSequenceNumber goes up)."""
        ad = self.ad
        self.seq += 1
        ad["UpdateSequenceNumber"] = self.seq
        ad["OwnerActive"] = self.owner_busy
        ad["State"] = self.state
        ad["Activity"] = self.activity
        ad["EnteredCurrentActivity"] = int(self.entered_activity)
        job = self.job
        if job is None:
            for attr in ("RemoteUser", "JobStart", "TotalJobRunTime", "GlobalJobId"):
                if attr in ad:
                    del ad[attr]
        else:
            ad["RemoteUser"] = job.submitter
            ad["JobStart"] = int(job.run_start if job.run_start is not None else now)
            ad["TotalJobRunTime"] = 0
            ad["GlobalJobId"] = job.job_id

    def refresh_runtime(self, now: float) -> None:
        """Update ``TotalJobRunTime`` of a busy slot (the startd's periodic update)."""
        if self.job is not None and self.job.placed_at is not None:
            self.ad["TotalJobRunTime"] = int(now - self.job.placed_at)

    def set_activity(self, state: str, activity: str, now: float) -> None:
        """Move the slot to ``state``/``activity`` and republish."""
        if activity != self.activity:
            self.entered_activity = now
        self.state, self.activity = state, activity
        self.publish(now)

    def settle_idle(self, now: float) -> None:
        """An empty slot: Owner when START is false, else Unclaimed (HTCondor's IS_OWNER)."""
        self.job = None
        self.suspended_at = None
        self.publish(now)  # OwnerActive first, so START sees the owner
        self.set_activity("Unclaimed" if self.ask("START", now) else "Owner", "Idle", now)


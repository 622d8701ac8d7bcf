"""The startd's records: slots, claims, and the slot ad built from them.

Plain data for :mod:`htc.daemons.startd.core`; the decisions live there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from htc.daemons.startd.policy import Policy
from htc.daemons.startd.settings import StartdSettings
from htc.daemons.startd.states import Activity, State, Transition, Trigger
from htc.errors import PeerError

S, A = State, Activity


class UnknownClaim(PeerError):
    """A message named a claim id this startd does not hold (stale, forged or already ended)."""


@dataclass(eq=False)
class Claim:
    """One schedd's claim on one slot."""

    id: str
    schedd: str
    job_ad: dict[str, Any]
    lease: float
    last_alive: float
    created: float
    rank: float = 0.0
    priority_preemption: bool = False
    job_start: float | None = None
    suspended_since: float | None = None
    suspended_total: float = 0.0
    starter_running: bool = False
    retire_reason: str | None = None  # "PREEMPT", "rank", "drain"
    retirement_cap: float | None = None  # a quick drain caps retirement at 0
    preempting: Claim | None = None  # the better claim waiting for this one to go
    released: bool = False  # the claimant itself gave it up: no ClaimEnded to send
    end_reason: str = ""
    killed_starter: bool = False
    execute_limit: float | None = None  # the running job's AllowedExecuteDuration (s); None: no limit
    held: bool = False  # the running job broke its limit: HoldJob was emitted for it


@dataclass(eq=False)
class Slot:
    """A slot and its place in the state table."""

    name: str
    slot_id: int
    kind: str  # "Static", "Partitionable", "Dynamic"
    cpus: int
    memory: int
    disk: int
    entered_state: float
    claim_id: str
    state: State = S.OWNER
    activity: Activity = A.IDLE
    entered_activity: float = 0.0
    parent: Slot | None = None
    sub_id: int = 0
    claim: Claim | None = None
    matched_id: str | None = None
    children: list[Slot] = field(default_factory=list)
    next_child: int = 1

    def __post_init__(self):
        self.entered_activity = self.entered_state

    def left(self) -> tuple[int, int, int]:
        """(cpus, MiB, KiB) of a p-slot not handed to its dynamic slots."""
        used = [(c.cpus, c.memory, c.disk) for c in self.children]
        return (self.cpus - sum(u[0] for u in used), self.memory - sum(u[1] for u in used),
                self.disk - sum(u[2] for u in used))


@dataclass(frozen=True, slots=True)
class Moved:
    """A record of one step a slot took (kept in :attr:`Startd.transition_log`)."""

    time: float
    slot: str
    state: State
    activity: Activity
    trigger: Trigger
    to: Transition


@dataclass
class DrainRequest:
    """A drain in progress."""

    how: str
    resume_on_completion: bool
    reason: str


def claim_holder(slots: Iterable[Slot], claim_id: str) -> Slot | None:
    """The slot among ``slots`` whose claim is ``claim_id`` (None: no slot holds it)."""
    for slot in slots:
        if slot.claim is not None and slot.claim.id == claim_id:
            return slot
    return None


def live_claim_ids(slots: Iterable[Slot]) -> set[str]:
    """The ids of every claim ``slots`` hold, and of the better claims waiting for them."""
    live = set()
    for slot in slots:
        claim = slot.claim
        if claim is not None:
            live.add(claim.id)
            if claim.preempting is not None:
                live.add(claim.preempting.id)
    return live


def quantize(value: float, quantum: int) -> int:
    """Round a request up to the quantum (MODIFY_REQUEST_EXPR_REQUEST*: ``quantize(x, {q})``)."""
    return int(math.ceil(max(value, 1) / quantum) * quantum) if quantum > 0 else int(math.ceil(value))


def number_attr(ad: Mapping[str, Any], name: str, default: float) -> float:
    """A numeric request attribute; expressions are evaluated with the ad as scope."""
    value = ad.get(name)
    if isinstance(value, bool) or value is None:
        return default
    if isinstance(value, int | float):
        return float(value)
    evaluate = getattr(value, "eval", None)
    if evaluate is not None:
        result = evaluate()
        if isinstance(result, int | float) and not isinstance(result, bool):
            return float(result)
    return default


def build_slot_ad(slot: Slot, settings: StartdSettings, policy: Policy, sensors: Mapping[str, Any],
                  cpu_busy_since: float, draining: bool, now: float) -> dict[str, Any]:
    """The machine ad of ``slot`` at ``now``: sensors, resources, state, policy, claim."""
    st = settings
    ad: dict[str, Any] = dict(sensors)
    ad.update(st.static_attrs)
    ad.update(
        MyType="Machine", Name=slot.name, Machine=st.machine, SlotID=slot.slot_id, SlotType=slot.kind,
        State=str(slot.state), Activity=str(slot.activity), EnteredCurrentState=int(slot.entered_state),
        EnteredCurrentActivity=int(slot.entered_activity), Cpus=slot.cpus, Memory=slot.memory, Disk=slot.disk,
        TotalCpus=st.cpus, TotalMemory=st.memory, TotalDisk=st.disk, TotalSlotCpus=slot.cpus,
        TotalSlotMemory=slot.memory, TotalSlotDisk=slot.disk, SlotWeight=slot.cpus,
        PartitionableSlot=slot.kind == "Partitionable", DynamicSlot=slot.kind == "Dynamic",
        CpuIsBusy=cpu_busy_since > 0, CpuBusyValue=1 if cpu_busy_since > 0 else 0,
        CpuBusyTime=int(cpu_busy_since), StartdName=st.name,
    )
    if slot.kind == "Partitionable":
        ad["Cpus"], ad["Memory"], ad["Disk"] = slot.left()
        ad["ChildCpus"] = [c.cpus for c in slot.children]
        ad["ChildMemory"] = [c.memory for c in slot.children]
        ad["ChildDisk"] = [c.disk for c in slot.children]
        ad["NumDynamicSlots"] = len(slot.children)
    if slot.kind == "Dynamic":
        ad["DSlotId"] = slot.sub_id
        ad["ParentSlotName"] = slot.parent.name if slot.parent else None
    ad.update(policy.advertised(slot.kind == "Partitionable"))
    if slot.state in (S.MATCHED, S.PREEMPTING) or draining:
        # HTCondor lies while Matched/Preempting (and draining) so that nobody matches again.
        ad["Requirements"] = False
    claim = slot.claim
    if claim is not None:
        job = claim.job_ad
        ad.update(ClientMachine=claim.schedd, CurrentRank=claim.rank, RemoteOwner=job.get("Owner"),
                  RemoteUser=job.get("User", job.get("Owner")), AccountingGroup=job.get("AccountingGroup"))
        if "ClusterId" in job:
            ad["JobId"] = f"{job['ClusterId']}.{job.get('ProcId', 0)}"
        if claim.job_start is not None:
            ad["JobStart"] = int(claim.job_start)
            ad["TotalJobRunTime"] = int(now - claim.job_start)
        ad = {k: v for k, v in ad.items() if v is not None}
    ad["IsOwner"] = slot.state is S.OWNER
    return ad


def share(total: int, n: int, i: int) -> int:
    """Slot i's part of ``total`` split n ways; remainders go to the first slots, so all is handed out."""
    return total // n + (1 if i <= total % n else 0)

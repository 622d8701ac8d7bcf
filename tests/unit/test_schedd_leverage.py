"""Leverage: the schedd core's handler CPU is charged to the run of the job an event names, and
a run's end sets SubmitSideCpu and Leverage = cumulative remote CPU / SubmitSideCpu."""

from __future__ import annotations

from types import SimpleNamespace

from htc.daemons import core as c
from htc.daemons.calls import CallDone
from htc.daemons.schedd.leverage import CoreMeter, charge, leverage_attributes
from htc.wire import messages as m


class _Core:
    def __init__(self):
        self.shadows = {(7, 0): SimpleNamespace(submit_cpu=0.0, submit_cpu_parts={})}

    def handle(self, event, now):
        total = 0
        for k in range(200000):  # some CPU in the handler
            total += k
        return [total]


def _received(msg) -> c.Received:
    return c.Received(msg=msg, conn_id=1)


def test_events_naming_a_running_job_are_charged_to_its_shadow():
    core = _Core()
    CoreMeter(core)
    assert core.handle(_received(m.StarterUpdate(claim_id="c", job_id="7.0", update_ad="[]")), 0.0)
    first = core.shadows[(7, 0)].submit_cpu
    assert first > 0
    core.handle(CallDone(to="startd", msg=m.CheckpointClaim(claim_id="c"), reply=m.Ack(),
                         cookie=("checkpoint", (7, 0), "c")), 0.0)
    assert core.shadows[(7, 0)].submit_cpu > first
    before = core.shadows[(7, 0)].submit_cpu
    core.handle(_received(m.StarterUpdate(claim_id="c", job_id="8.0", update_ad="[]")), 0.0)  # no shadow
    core.handle(_received(m.Reschedule()), 0.0)  # names no job
    assert core.shadows[(7, 0)].submit_cpu == before
    assert core.shadows[(7, 0)].submit_cpu_parts == {"handlers": before}


def test_a_runs_end_adds_its_cpu_and_its_parts_and_sets_leverage():
    number = lambda job, name: float(job.get(name, 0))  # noqa: E731
    run = SimpleNamespace(submit_cpu=0.0, submit_cpu_parts={})
    charge(run, "checkpoints", 0.375)
    charge(run, "handlers", 0.125)
    before = {"SubmitSideCpu": "0.5", "SubmitSideCpuHandlers": "0.1", "SubmitSideCpuCheckpoints": "0.4"}
    attrs = leverage_attributes(before, run, 3000.0, number)
    assert float(attrs["SubmitSideCpu"]) == 1.0 and float(attrs["Leverage"]) == 3000.0
    assert float(attrs["SubmitSideCpuHandlers"]) == 0.225 and float(attrs["SubmitSideCpuCheckpoints"]) == 0.775
    idle = SimpleNamespace(submit_cpu=0.0, submit_cpu_parts={})
    assert "Leverage" not in leverage_attributes({}, idle, 10.0, number)

"""A wide DAG's ready nodes reach the schedd as SubmitClusters batches (one transaction each),
and what users read is unchanged: the nodes log and the nodes' user log, read with htcondor2,
hold one submit event per node with its ``DAG Node:`` note; the throttles hold with batching."""

from __future__ import annotations

import re

import htcondor2
import pytest

from dag_pool import DagDir, dag_pool
from htc.eventlog import events as ev

pytestmark = pytest.mark.slow


@pytest.fixture
def d(monkeypatch):
    with dag_pool() as pool:
        yield DagDir(pool, monkeypatch)


def _read(path) -> list:
    """Every event of the log at ``path``, read with htcondor2."""
    with htcondor2.JobEventLog(str(path)) as log:
        return list(log.events(stop_after=0))


def _batches(d: DagDir, dag: str) -> list[int]:
    """The sizes of the node batches the manager sent, from its dagman.out."""
    return [int(n) for n in re.findall(r"Submitting (\d+) nodes together", d.dagman_out(dag))]


def test_a_wide_dag_is_submitted_in_batches_and_its_logs_read_as_before(d):
    d.write("wide.sub", f"executable = {d.work}/node.sh\narguments = $(JOB)\nlog = {d.work}/wide.user.log\nqueue\n")
    names = [f"n{i}" for i in range(50)]
    d.write("batch.config", "DAGMAN_SUBMIT_BATCH_SIZE = 20\n")
    d.write("wide.dag", "CONFIG batch.config\n" + "".join(f"JOB {n} wide.sub\n" for n in names))
    d.wait("wide.dag", d.submit("wide.dag"))
    assert d.exit_status("wide.dag") == 0, d.dagman_out("wide.dag")
    assert d.runs() == dict.fromkeys(names, 1)
    assert _batches(d, "wide.dag") == [50]  # all 50 ready at once: sent together,
    schedd_log = (d.pool.home / "log" / "SchedLog").read_text()
    batches = re.findall(r"submitted (\d+) clusters \(\d+ jobs\) in one batch", schedd_log)
    assert sorted(batches) == ["10", "20", "20"], schedd_log[-3000:]  # ... DAGMAN_SUBMIT_BATCH_SIZE at a time
    nodes = _read(d.work / "wide.dag.nodes.log")
    submits = [e for e in nodes if e.type == htcondor2.JobEventType.SUBMIT]
    notes = sorted(e["LogNotes"] for e in submits)
    assert notes == sorted(f"DAG Node: {n}" for n in names)
    assert len({e.cluster for e in submits}) == 50   # a cluster per node, as in DAGMan
    ends = [e for e in nodes if e.type == htcondor2.JobEventType.JOB_TERMINATED]
    assert sorted(e.cluster for e in ends) == sorted(e.cluster for e in submits)
    user = _read(d.work / "wide.user.log")
    assert sorted(e.cluster for e in user if e.type == htcondor2.JobEventType.SUBMIT) == \
        sorted(e.cluster for e in submits)
    assert sum(e.type == htcondor2.JobEventType.JOB_TERMINATED for e in user) == 50


def test_throttles_hold_with_batching(d):
    d.script("nap.sh", f'#!/bin/sh\ntouch "{d.work}/runs/$1.$(date +%s%N).$$"\nsleep 1\n')
    d.write("nap.sub", f"executable = {d.work}/nap.sh\narguments = $(JOB)\nqueue\n")
    slow = [f"S{i}" for i in range(4)]
    free = [f"F{i}" for i in range(8)]
    d.write("t.dag", "".join(f"JOB {n} nap.sub\nCATEGORY {n} slow\n" for n in slow) + "MAXJOBS slow 1\n" +
            "".join(f"JOB {n} nap.sub\n" for n in free))
    d.wait("t.dag", d.submit("t.dag", "-maxjobs", "3"))
    assert d.exit_status("t.dag") == 0 and d.runs() == dict.fromkeys(slow + free, 1)
    batches = _batches(d, "t.dag")
    assert batches and max(batches) <= 3  # a batch never holds more than the throttle lets go
    live = peak = slow_live = slow_peak = 0
    for node, event in d.node_events("t.dag"):
        step = 1 if isinstance(event, ev.SubmitEvent) else -1 if isinstance(event, ev.JobTerminatedEvent) else 0
        live += step
        peak = max(peak, live)
        if node in slow:
            slow_live += step
            slow_peak = max(slow_peak, slow_live)
    assert peak == 3 and slow_peak == 1

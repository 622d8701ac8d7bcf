"""Honest accounting in a real pool: a job keeps the time it ran when it is removed or held.

HTCondor's schedd adds each run's wall time to ``RemoteWallClockTime`` (and, times the slot's
weight, to ``CumulativeSlotTime``) when the run's shadow goes, whatever ended the run. Each job
here writes the time it really started; the test asks for the remove or hold once it has run two
seconds by that stamp, so the recorded run time must cover at least that much.
"""

from __future__ import annotations

import time

import pytest

from htc.client import history
from htc.wire import messages as m
from poolutil import Pool, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def pool():
    p = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD")
    try:
        yield p.start()
    finally:
        p.stop()


def _run_for_two_seconds(pool: Pool, name: str) -> tuple[int, float]:
    """Submit a job that stamps its start into ``name`` and sleeps; returns its cluster and the
    time (by the job's own stamp) when it has run two seconds."""
    stamp = pool.work / name
    job = (f"executable = /bin/sh\narguments = \"-c 'date +%s.%N > {stamp}.tmp && mv {stamp}.tmp {stamp}"
           f" && exec sleep 600'\"\nlog = {pool.work}/{name}.log\nqueue\n")
    cluster = pool.submit(job).cluster_id
    started = wait_for(lambda: stamp.exists() and stamp.read_text().strip() and float(stamp.read_text()),
                       60, what="the job started")
    wait_for(lambda: time.time() >= started + 2.0, 10, what="two seconds of running")
    return cluster, time.time() - started


def test_a_removed_job_keeps_the_time_it_ran(pool):
    cluster, ran = _run_for_two_seconds(pool, "removed")
    pool.send(m.ActOnJobs(action=m.JobAction.Remove, ids=(str(cluster),)))
    path = pool.home / "spool" / "job_queue.db"
    [row] = wait_for(lambda: history(f"ClusterId == {cluster}", path=path), 30, what="the job in the history")
    assert row["JobStatus"] == 3
    assert row["RemoteWallClockTime"] >= ran >= 2.0, row
    assert row["CumulativeSlotTime"] >= ran, row  # a one-cpu slot: weight 1
    assert row["LastRemoteWallClockTime"] >= ran


def test_a_held_job_keeps_the_time_it_ran_and_adds_the_next_run(pool):
    cluster, ran = _run_for_two_seconds(pool, "held")
    pool.send(m.ActOnJobs(action=m.JobAction.Hold, ids=(str(cluster),)))

    def recorded():
        [ad] = pool.jobs(f"ClusterId == {cluster}")
        return ad if ad["JobStatus"] == 5 and ad.eval("RemoteWallClockTime") > 0 else None
    ad = wait_for(recorded, 30, what="the held job's run time")
    assert ad.eval("RemoteWallClockTime") >= ran >= 2.0
    assert ad.eval("CumulativeSlotTime") >= ran
    first = ad.eval("RemoteWallClockTime")
    # Released, it runs again: the second run adds to the first instead of starting from 0.
    (pool.work / "held").unlink()
    pool.send(m.ActOnJobs(action=m.JobAction.Release, ids=(str(cluster),)))
    _, again = cluster, wait_for(lambda: (pool.work / "held").exists() and (pool.work / "held").read_text().strip()
                                  and float((pool.work / "held").read_text()), 60, what="the second run")
    pool.send(m.ActOnJobs(action=m.JobAction.Hold, ids=(str(cluster),)))
    ad = wait_for(lambda: (lambda a: a if a["JobStatus"] == 5 and a.eval("RemoteWallClockTime") > first else None)(
        pool.jobs(f"ClusterId == {cluster}")[0]), 30, what="the second run recorded")
    assert ad.eval("RemoteWallClockTime") >= first + ad.eval("LastRemoteWallClockTime") - 0.01


def test_one_name_for_this_host_everywhere(pool):
    """The schedd, the slots, the collector, the negotiator, the master and the user log all
    name this host as HTCondor's get_local_fqdn finds it; the log's address is a sinful string."""
    from htc.client.request import query_collector
    from htc.config.hostname import full_hostname, local_ip

    host = full_hostname()
    kinds = (m.AdType.Startd, m.AdType.Schedd, m.AdType.Collector, m.AdType.Master, m.AdType.Negotiator)
    ads = {kind: wait_for(lambda kind=kind: query_collector(kind, "", transport=pool.transport, timeout=5), 60,
                          what=f"the {kind.value} ad") for kind in kinds}
    for kind, found in ads.items():
        for ad in found:
            assert ad["Machine"] == host, (kind, str(ad))
    assert {str(ad["Name"]).split("@", 1)[1] for ad in ads[m.AdType.Startd]} == {host}
    assert [str(ad["Name"]) for ad in ads[m.AdType.Schedd]] == [host]  # HTCondor's: the host's full name
    log = pool.work / "named.log"
    pool.submit(f"executable = /bin/true\nlog = {log}\nqueue\n")
    wait_for(lambda: log.exists() and "submitted from host" in log.read_text(), 30, what="the SUBMIT event")
    first = log.read_text().splitlines()[0]
    ip = local_ip()
    assert first.endswith(f"submitted from host: <{ip}:0?addrs={ip}-0&alias={host}&noUDP&sock=schedd>"), first
    wait_for(lambda: "executing on host" in log.read_text(), 60, what="the EXECUTE event")
    [executing] = [line for line in log.read_text().splitlines() if "executing on host" in line]
    assert f"executing on host: <{ip}:0?addrs={ip}-0&alias={host}&noUDP&sock=" in executing, executing

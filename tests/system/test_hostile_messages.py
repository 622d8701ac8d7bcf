"""The issue's hostile messages and job against a real pool (issue #14, part 4).

Each of these killed a daemon with one request on 7af1fba: a constraint of about 400 chained
``||`` / ``+`` / ``.`` terms to the schedd's QueryJobs (with rows in the queue) and to the
collector's QueryAds, a 5,000-digit job id in ActOnJobs or StarterUpdate, and a job whose
``requirements`` is a 700-term OR (the negotiator died at every start until the master gave
up). Here each is answered or refused, the daemon that got it neither dies nor restarts
(``restarts == 0`` in the master's view, the same pid answering Ping), and the pool still does
its work afterwards.
"""

from __future__ import annotations

import socket
import struct

import htcondor2
import msgspec
import pytest

from htc.client import ping, query_collector
from htc.wire import messages as m
from poolutil import Pool, echo_job, wait_for

pytestmark = pytest.mark.slow

DAEMONS = ("COLLECTOR", "NEGOTIATOR", "STARTD", "SCHEDD")


@pytest.fixture(scope="module")
def pool():
    p = Pool(", ".join(DAEMONS))
    try:
        yield p.start()
    finally:
        p.stop()


def pids(pool: Pool) -> dict[str, int]:
    return {d: ping(d.lower(), transport=pool.transport, timeout=10).pid for d in DAEMONS}


def assert_nothing_restarted(pool: Pool, before: dict[str, int]) -> None:
    assert pids(pool) == before
    for daemon in DAEMONS:
        assert pool.status(daemon).restarts == 0, daemon


def chains(first: str, n: int = 400) -> dict[str, str]:
    """Constraints of ``n`` chained terms, one per operator, each true for what ``first`` picks."""
    return {
        "||": " || ".join([f'Name == "nobody{i}"' for i in range(n - 1)] + [first]),
        "+": "(" + " + ".join(["0"] * (n - 1) + ["1"]) + f") == 1 && {first}",
        ".": "MY" + "".join(f".a{i}" for i in range(n)) + f" =?= undefined && {first}",
    }


def test_a_400_term_constraint_to_query_jobs_with_rows_in_the_queue(pool):
    before = pids(pool)
    cluster = pool.submit(echo_job(pool, extra="hold = true", queue="queue 3")).cluster_id
    for op, constraint in chains(f'Args == "{cluster}.1"').items():
        constraint = constraint.replace('Name == "nobody', 'Args == "nobody')
        ads = pool.jobs(constraint, "ClusterId", "ProcId")
        assert [(a["ClusterId"], a["ProcId"]) for a in ads] == [(cluster, 1)], op
    # and as long as HTCondor takes them: thousands of terms
    ads = pool.jobs(" || ".join([f"ProcId == {i + 10}" for i in range(3000)] + [f"ClusterId == {cluster}"]),
                    "ProcId")
    assert sorted(a["ProcId"] for a in ads) == [0, 1, 2]
    assert_nothing_restarted(pool, before)


def test_a_400_term_constraint_to_the_collectors_query_ads(pool):
    before = pids(pool)
    wait_for(lambda: pool.slots(), 30, "a slot ad")
    for op, constraint in chains("Cpus >= 1").items():
        ads = query_collector(m.AdType.Startd, constraint, transport=pool.transport, timeout=20)
        assert ads and all(a["Cpus"] >= 1 for a in ads), op
        ads = query_collector(m.AdType.Any, constraint.replace("Cpus >= 1", "false"),
                              transport=pool.transport, timeout=20)
        assert ads == [], op
    assert_nothing_restarted(pool, before)


def raw_request(path, body: bytes) -> m.Message:
    """Send one frame as it is; return the decoded reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(str(path))
        sock.sendall(struct.pack(">I", len(body)) + body)
        header = sock.recv(4, socket.MSG_WAITALL)
        assert len(header) == 4, "closed without an answer"
        (size,) = struct.unpack(">I", header)
        return m.decode(sock.recv(size, socket.MSG_WAITALL))


def test_a_5000_digit_job_id_is_refused_and_the_daemons_serve_on(pool):
    before = pids(pool)
    cluster = pool.submit(echo_job(pool, extra="hold = true")).cluster_id
    huge = "9" * 5000
    sockets = pool.home / "sockets"
    attacks = [
        ("schedd", {"type": "ActOnJobs", "action": "Remove", "ids": [huge]}),
        ("schedd", {"type": "ActOnJobs", "action": "Hold", "ids": [f"{cluster}.{huge}"]}),
        ("schedd", {"type": "EditJobs", "attributes": {"JobPrio": "1"}, "ids": [huge]}),
        ("schedd", {"type": "StarterUpdate", "claim_id": "c1", "job_id": huge, "update_ad": "[ A = 1 ]"}),
        ("startd", {"type": "StarterUpdate", "claim_id": "c1", "job_id": f"1.{huge}", "update_ad": "[ A = 1 ]"}),
        ("schedd", {"type": "JobExited", "claim_id": "c1", "job_id": huge, "exit_code": 0}),
        ("schedd", {"type": "ActOnJobs", "action": "Hold", "ids": ["1.0"], "reason_code": 2**64 - 1}),
    ]
    for daemon, raw in attacks:
        reply = raw_request(sockets / f"{daemon}.sock", msgspec.msgpack.encode(raw))
        assert isinstance(reply, m.ErrorReply) and reply.code == "malformed", (raw["type"], reply)
        assert "job_id" in reply.message or "ids" in reply.message or "reason_code" in reply.message
    # the queue is as it was, and the schedd still acts on real ids
    [ad] = pool.jobs(f"ClusterId == {cluster}", "JobStatus")
    assert ad["JobStatus"] == 5
    assert pool.send(m.ActOnJobs(action=m.JobAction.Remove, ids=(f"{cluster}.0",))).success == 1
    assert_nothing_restarted(pool, before)


def test_a_job_with_a_700_term_or_requirements_runs_and_other_jobs_still_match(pool):
    before = pids(pool)
    terms = [f'TARGET.Name == "slot{i}@nowhere"' for i in range(699)] + ["TARGET.Cpus >= 1"]
    hostile = pool.submit(echo_job(pool, extra="requirements = " + " || ".join(terms)),
                          filename="hostile.sub").cluster_id
    plain = pool.submit(echo_job(pool)).cluster_id
    for cluster in (hostile, plain):
        events = pool.log_events(pool.work / f"job.{cluster}.log",
                                 until=lambda evs: any(e.type == htcondor2.JobEventType.JOB_TERMINATED
                                                       for e in evs), timeout=90)
        assert events[-1].type == htcondor2.JobEventType.JOB_TERMINATED, cluster
        assert (pool.work / f"out.{cluster}.0").read_text() == f"{cluster}.0\n"
    assert_nothing_restarted(pool, before)
    negotiator_log = (pool.home / "log" / "NegotiatorLog").read_text()
    assert "Traceback" not in negotiator_log

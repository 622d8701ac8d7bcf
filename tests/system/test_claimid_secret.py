"""Claim ids stay secret: never in ``htc status -long``, ``htc q -long``, ``htc history -long`` or a
daemon log, and no constraint can probe them (HTCondor keeps ``ClaimId`` private).

A real pool runs a job that waits for a file; while it runs, the claim's secret is read the only
way there is, the negotiator's private query (which needs NEGOTIATOR), and then looked for
everywhere a user could see it. The tests run as root, the pool's own identity: even root's
tools do not see it, as in HTCondor, where only QUERY_STARTD_PVT_ADS returns it.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from htc.classad import ClassAd
from htc.wire import messages as m
from tests.poolutil import Pool, wait_for

pytestmark = pytest.mark.slow

DAEMONS = "COLLECTOR, SCHEDD, NEGOTIATOR, STARTD"


def htc(pool: Pool, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "htc.cli.main", *args], env=pool.env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout + done.stderr


def test_a_claim_id_never_shows_and_cannot_be_probed():
    pool = Pool(DAEMONS).start()
    try:
        go = pool.work / "go"
        reply = pool.submit(f'executable = /bin/sh\narguments = "-c \'while [ ! -e {go} ]; do sleep 0.1; done\'"\n'
                            f"log = {pool.work}/log\nqueue\n")
        job = f"{reply.cluster_id}.0"
        wait_for(lambda: pool.jobs("JobStatus == 2"), 60, "the job to run")
        private = pool.send(m.QueryAds(ad_type=m.AdType.Startd, constraint='State == "Claimed"', private=True),
                            address="collector")
        claims = [ClassAd(t).eval("ClaimId") for t in private.ads]
        secrets_ = {c.rsplit("#", 1)[1] for c in claims if isinstance(c, str) and c.count("#") >= 2}
        assert secrets_, f"the private query gave no claim id: {claims}"

        def shows(text: str) -> list[str]:
            return [s for s in secrets_ if s in text] + re.findall(r"(?i)\bclaimid\b", text)

        # 1. htc status -long (and a constraint that would reveal it)
        assert shows(htc(pool, "status", "-long")) == []
        assert htc(pool, "status", "-constraint", "ClaimId =!= undefined", "-af", "Name").strip() == ""
        # 2. htc q -long (and constraints that would reveal it bit by bit)
        assert shows(htc(pool, "q", "-long", job)) == []
        for probe in ('regexp("#", ClaimId)', "ClaimId =!= undefined", 'regexp("#", eval(strcat("Claim", "Id")))',
                      'size(ClaimId) > 0'):
            assert htc(pool, "q", "-constraint", probe, "-af", "ClusterId").strip() == "", probe
        # the job still matches an ordinary constraint of the same shape
        assert htc(pool, "q", "-constraint", "Owner =!= undefined", "-af", "ClusterId").split() == [
            str(reply.cluster_id)]
        go.write_text("")
        wait_for(lambda: not pool.jobs(), 60, "the job to leave the queue")
        # 3. htc history -long
        history = htc(pool, "history", "-long")
        assert f"ClusterId = {reply.cluster_id}" in history and shows(history) == []
        # 4. every daemon log
        for log in sorted((pool.home / "log").iterdir()):
            if log.is_file():
                assert [s for s in secrets_ if s in log.read_text(errors="replace")] == [], log
    finally:
        pool.stop()


def test_a_private_query_needs_negotiator(tmp_path):
    pool = Pool("COLLECTOR", config="ALLOW_NEGOTIATOR = nobody@nowhere\n").start()
    try:
        reply = pool.send(m.QueryAds(ad_type=m.AdType.Startd, private=True), address="collector")
    except Exception as exc:  # the ErrorReply comes back as RemoteError
        assert "denied" in str(exc) and "NEGOTIATOR" in str(exc)
    else:
        raise AssertionError(f"a private query without NEGOTIATOR was answered: {reply}")
    finally:
        pool.stop()

"""htc q -hold-codes, -autocluster, -group-by, -factory and -stream-results against a real schedd
(no startd: the jobs stay idle or held)."""

from __future__ import annotations

import pytest

from htc.cli.main import main
from poolutil import open_pool, wait_for

pytestmark = pytest.mark.slow


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip() and not line.startswith("--")]


def test_q_views_of_a_real_queue(monkeypatch, capsys):
    with open_pool("COLLECTOR, SCHEDD") as pool:
        monkeypatch.setenv("HTC_HOME", str(pool.home))
        monkeypatch.chdir(pool.work)
        (pool.work / "a.sub").write_text("executable = /bin/true\nrequest_memory = 100\nqueue 3\n")
        (pool.work / "b.sub").write_text("executable = /bin/true\nrequest_memory = 200\nmax_materialize = 2\n"
                                         "queue 5\n")
        assert run(capsys, "submit", "a.sub")[0] == 0 and run(capsys, "submit", "b.sub")[0] == 0
        wait_for(lambda: len(pool.jobs()) == 5 or None, what="3 + 2 materialized jobs")
        assert run(capsys, "hold", "-reason", "wait", "-subcode", "7", "1.1", "1.2")[0] == 0
        assert run(capsys, "hold", "2.0")[0] == 0

        table = rows(run(capsys, "q", "-hold-codes")[1])
        assert table[0] == ["OWNER", "CODE/SUB", "COUNT", "OLDEST_JOB_ID", "HELD_SINCE", "HOLD_REASON"]
        assert [r[1:4] for r in table[1:]] == [["1/0", "1", "2.0"], ["1/7", "2", "1.1"]]
        assert run(capsys, "q", "-hold-codes:1/7", "-af", "ProcId")[1] == "1\n2\n"

        acs = rows(run(capsys, "q", "-autocluster")[1])
        assert acs[0][:5] == ["ID", "COUNT", "UNIVERSE", "CPUS", "MEMORY"]
        assert sorted((r[1], r[4]) for r in acs[1:]) == [("2", "200"), ("3", "100")]

        assert run(capsys, "q", "-group-by", "-af", "ClusterId", "JobCount", "JobIds")[1] == \
            "1 3 1.0 ... 1.2\n2 2 2.0 2.1\n"

        factory = rows(run(capsys, "q", "-factory")[1])
        assert factory[1][0] == "2." and factory[1][4:10] == ["2", "2", "0", "1", "1", "2"]

        out = run(capsys, "q", "-stream-results")[1]
        assert "RUN_TIME" in out and "2.1" in out

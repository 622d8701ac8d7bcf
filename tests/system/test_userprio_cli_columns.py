"""htc userprio's condor_userprio columns (-all, -usage, -priority), named users, and -setaccum
through a real negotiator."""

from __future__ import annotations

import json

import pytest

from htc.cli.main import main
from tests.system.test_cli_userprio import _standing, collector, negotiator  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow


def _report(capsys, *args) -> list[str]:
    assert main(["userprio", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_all_shows_every_column_and_usage_sorts_by_usage(collector, capsys):  # noqa: F811
    out = _report(capsys, "-all")
    assert out[1].split() == ["Effective", "Real", "Priority", "Wghted", "Total", "Usage", "Usage",
                              "Last", "Time", "Since"]
    assert out[2].split() == ["User", "Name", "Priority", "Priority", "Factor", "In", "Use",
                              "(wghted-hrs)", "Start", "Time", "Usage", "Time", "Last", "Usage"]
    alice = next(line for line in out if line.startswith("alice@x")).split()
    # effective, real, factor, in use, hours, start date+time, last date+time, since
    assert alice[3:6] == ["1000.00", "2", "4.00"] and alice[-1] == "<now>"
    assert float(alice[1]) == pytest.approx(float(alice[2]) * 1000, rel=1e-2)  # real: 2 decimals
    assert len(alice) == 11  # both usage times are dates with a time
    usage = _report(capsys, "-usage")
    assert usage[2].split()[:2] == ["User", "Name"] and "Effective" not in usage[1]
    names = [line.split()[0] for line in usage[4:6]]
    assert names == ["bob@x", "alice@x"]  # least accumulated usage first, as condor_userprio
    prio = _report(capsys, "-priority")
    assert prio[1].split() == ["Effective", "Real", "Priority"]


def test_named_users_are_shown_even_if_inactive(collector, capsys):  # noqa: F811
    out = _report(capsys, "carol@x")
    assert [line.split()[0] for line in out[4:-2]] == ["carol@x"]
    assert not any(line.startswith("carol@x") for line in _report(capsys))  # inactive: hidden


def test_setaccum_sets_the_accumulated_usage(negotiator, capsys):  # noqa: F811
    assert main(["userprio", "-setfactor", "dave@x", "10"]) == 0  # makes dave known
    capsys.readouterr()
    assert main(["userprio", "-setaccum", "dave@x", "7200", "-json"]) == 0
    assert "accumulated usage 7200 s" in json.loads(capsys.readouterr().out)["changed"]
    _standing("dave@x", lambda u: u.weighted_accumulated_usage == 7200.0)
    assert main(["userprio", "-setaccum", "dave@x", "-5"]) == 2
    assert "zero or more" in capsys.readouterr().err

"""htc userprio over the Accounting ads the negotiator's accountant advertises.

A real accountant is charged two hours of usage and its Accounting ads go to a real collector
through UpdateAd, as the negotiator publishes them; the tools then query that collector.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from htc.classad import ClassAd
from htc.cli.main import main
from htc.daemons.negotiator.accountant import Accountant
from htc.client import user_priorities
from htc.wire import messages as m
from poolutil import open_pool

pytestmark = pytest.mark.slow


def accounting_ads() -> list[ClassAd]:
    """Two hours of a real accountant: alice holds 2 slots throughout, bob 1 slot for the
    first hour; carol is known (her factor was set) but never ran anything."""
    start = time.time() - 7200
    acct = Accountant(now=start)
    acct.add_match("alice@x", "slot1@h", 1.0, now=start)
    acct.add_match("alice@x", "slot2@h", 1.0, now=start)
    acct.add_match("bob@x", "slot3@h", 1.0, now=start)
    acct.remove_match("slot3@h", now=start + 3600)
    acct.update_priorities(start + 7200)
    acct.set_priority_factor("carol@x", 1000)
    return [ClassAd(ad) for ad in acct.accounting_ads()]


def seconds(text: str) -> int:
    days, clock = text.split("+")
    h, m, s = (int(x) for x in clock.split(":"))
    return int(days) * 86400 + h * 3600 + m * 60 + s


@pytest.fixture
def collector(monkeypatch):
    with open_pool("COLLECTOR") as pool:
        monkeypatch.setenv("HTC_HOME", str(pool.home))
        for ad in accounting_ads():
            pool.advertise(ad, m.AdType.Accounting)
        yield pool


def test_user_priorities_best_first_from_the_collector(collector):
    users = user_priorities()
    everyone = user_priorities(all_users=True)
    assert [u.name for u in users] == ["bob@x", "alice@x"]
    alice, bob = users[1], users[0]
    assert alice.resources_used == 2 and bob.resources_used == 0
    assert alice.effective_priority > bob.effective_priority
    assert alice.priority_factor == 1000.0
    assert alice.weighted_accumulated_usage == 2 * 7200.0
    assert abs(alice.real_priority * alice.priority_factor - alice.effective_priority) < 1e-6
    assert "carol@x" in [u.name for u in everyone]


def test_userprio_table_and_json(collector, capsys):
    assert main(["userprio"]) == 0
    out = capsys.readouterr().out.splitlines()
    # condor_userprio's layout: the update time, two heading lines, a rule, users, a rule, totals
    assert out[0].startswith("Last Priority Update: ")
    assert out[1].split() == ["Effective", "Priority", "Wghted", "Total", "Usage", "Time", "Since"]
    assert out[2].split() == ["User", "Name", "Priority", "Factor", "In", "Use", "(wghted-hrs)",
                              "Last", "Usage"]
    assert set(out[3]) == {"-", " "} and out[3] == out[6]
    # bob last used a slot in the interval the last update charged, moments ago
    assert out[4].split()[0] == "bob@x" and seconds(out[4].split()[-1]) < 60
    assert out[5].split()[0] == "alice@x" and out[5].split()[-2:] == ["4.00", "<now>"]
    assert out[7].split()[:3] == ["Number", "of", "users:"]
    assert out[7].split()[3:6] == ["2", "2", "5.00"] and seconds(out[7].split()[6]) == 86400
    assert main(["userprio", "-allusers", "-json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {d["name"] for d in data} == {"alice@x", "bob@x", "carol@x"}
    assert main(["userprio", "-allusers"]) == 0
    carol = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("carol@x"))
    assert carol.split()[-1] == "<never>"


# --- changing priorities: a real negotiator ---------------------------------------------------------


@pytest.fixture
def negotiator(monkeypatch):
    with open_pool("COLLECTOR, NEGOTIATOR") as pool:
        monkeypatch.setenv("HTC_HOME", str(pool.home))
        yield pool


def _standing(name: str, check, timeout: float = 20.0):
    """The submitter's record once the negotiator has advertised one that passes ``check``."""
    deadline = time.monotonic() + timeout
    found = []
    while time.monotonic() < deadline:
        found = [u for u in user_priorities(all_users=True) if u.name == name]
        if found and check(found[0]):
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"{name}'s Accounting ad never showed the change; last seen: {found}")


def test_setfactor_setprio_and_resetusage_change_the_accountant(negotiator, capsys):
    assert main(["userprio", "-setfactor", "alice@x", "10"]) == 0
    assert "alice@x" in capsys.readouterr().out
    _standing("alice@x", lambda u: u.priority_factor == 10.0)
    # by the unique user name; both changes in one call
    assert main(["userprio", "-setprio", "alice", "4", "-setfactor", "alice", "20"]) == 0
    capsys.readouterr()
    _standing("alice@x", lambda u: u.priority_factor == 20.0 and abs(u.effective_priority - 80.0) < 1e-6)
    assert main(["userprio", "-resetusage", "alice@x", "-json"]) == 0
    assert json.loads(capsys.readouterr().out)["changed"].startswith("alice@x: usage reset")
    _standing("alice@x", lambda u: abs(u.real_priority - 0.5) < 1e-6 and u.weighted_accumulated_usage == 0)
    # Saved at once in ACCOUNTANT_DATABASE_FILE, so a negotiator restart keeps it.
    [saved] = negotiator.home.rglob("Accountantnew.log")
    assert '"alice@x"' in saved.read_text() and '20.0' in saved.read_text()


def test_bad_changes_are_refused_with_the_reason(negotiator, capsys):
    assert main(["userprio", "-setfactor", "alice@x", "0.5"]) != 0
    assert "priority factor" in capsys.readouterr().err
    assert main(["userprio", "-setprio", "alice@x", "ten"]) == 2
    assert "needs a number" in capsys.readouterr().err
    assert main(["userprio", "-setprio", "nobody-known", "1"]) != 0
    assert "unknown" in capsys.readouterr().err
    assert main(["userprio", "-setprio", "a@x", "1", "-resetusage", "b@x"]) == 2
    assert "same user" in capsys.readouterr().err


def test_only_the_administrator_may_change_priorities():
    from htc.daemons import core as c
    from htc.daemons.negotiator.settings import NegotiatorServiceSettings, NegotiatorSettings
    from htc.daemons.negotiator.adapter import NegotiatorDaemon
    from htc.wire.transport import PeerInfo

    settings = NegotiatorServiceSettings(core=NegotiatorSettings(), accountant_file=Path("/nonexistent/acct"))
    daemon = NegotiatorDaemon(settings, None, now=0.0)
    msg = m.SetUserPriority(submitter="alice@x", factor=5.0)
    [reply] = daemon.handle(c.Received(msg, 1, PeerInfo(uid=54321)), 0.0)
    assert isinstance(reply.msg, m.ErrorReply) and reply.msg.code == "denied"
    assert daemon.negotiator.accountant.priority_factor("alice@x") != 5.0
    out = daemon.handle(c.Received(msg, 2, PeerInfo(uid=0)), 0.0)
    assert isinstance(out[0].msg, m.Ack) and daemon.negotiator.accountant.priority_factor("alice@x") == 5.0

"""htc status -sort, -direct, -xml and -print-format against a real collector holding slot,
schedd and submitter ads it received through UpdateAd (as from startds and schedds)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from htc.classad import ClassAd
from htc.cli.main import main
from htc.cli.status_options import _key_text, sort_ads
from htc.wire import messages as m
from poolutil import open_pool

pytestmark = pytest.mark.slow


def ads() -> list[tuple[ClassAd, m.AdType]]:
    out = []
    # slot10@a and slot2@a: a startd whose address is the collector's (it answers Ping, as a live
    # startd would); slot1@b: a startd that is gone
    for name, machine, memory, address in [("slot10@a", "a", 512, "collector"), ("slot2@a", "a", 2048, "collector"),
                                           ("slot1@b", "b", 1024, "startd-b-gone")]:
        out.append((ClassAd({"MyType": "Machine", "Name": name, "Machine": machine, "OpSys": "LINUX",
                             "Arch": "X86_64", "State": "Unclaimed", "Activity": "Idle", "Memory": memory,
                             "Cpus": 1, "MyAddress": address, "LoadAvg": 0.0, "CondorLoadAvg": 0.0,
                             "EnteredCurrentActivity": 0}), m.AdType.Startd))
    out[2][0]["Gpus"] = 1  # only slot1@b has Gpus: -sort Gpus shows it alone
    out.append((ClassAd({"MyType": "Scheduler", "Name": "schedd@a", "Machine": "a", "MyAddress": "collector",
                         "TotalRunningJobs": 0, "TotalIdleJobs": 1, "TotalHeldJobs": 0}), m.AdType.Schedd))
    for user, schedd in (("alice@x", "schedd@a"), ("bob@x", "schedd@z")):
        out.append((ClassAd({"MyType": "Submitter", "Name": user, "ScheddName": schedd, "Machine": "a",
                             "RunningJobs": 0, "IdleJobs": 1, "HeldJobs": 0}), m.AdType.Submitter))
    return out


@pytest.fixture(scope="module")
def collector():
    with open_pool("COLLECTOR") as pool:
        for ad, ad_type in ads():
            pool.advertise(ad, ad_type)
        yield pool


@pytest.fixture
def home(collector, monkeypatch):
    monkeypatch.setenv("HTC_HOME", str(collector.home))
    return collector.home


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_sort_orders_by_the_keys_and_leaves_out_undefined_ones(home, capsys):
    assert run(capsys, "status", "-af", "Name")[1] == "slot2@a\nslot10@a\nslot1@b\n"  # Machine, then Name
    assert run(capsys, "status", "-sort", "Memory", "-af", "Name")[1] == "slot10@a\nslot1@b\nslot2@a\n"
    assert run(capsys, "status", "-sort", "Machine", "-sort", "Memory", "-af", "Name")[1] == \
        "slot10@a\nslot2@a\nslot1@b\n"
    assert run(capsys, "status", "-sort", "Name", "-af", "Name")[1] == "slot1@b\nslot2@a\nslot10@a\n"  # natural
    assert run(capsys, "status", "-sort", "Gpus", "-af", "Name")[1] == "slot1@b\n"  # Gpus =!= UNDEFINED
    status, _, err = run(capsys, "status", "-sort", "Memory +")
    assert status == 2 and "Parse error of: Memory +" in err


def test_sort_keys_render_as_condor_status_renders_them():
    assert [_key_text(v) for v in (True, 12, "x")] == ["1", "12", "x"]
    a, b = ClassAd({"Load": 0.5}), ClassAd({"Load": 0.25})
    assert sort_ads([a, b], ["Load"]) == [b, a]  # the bits of positive doubles order as the doubles do
    assert sort_ads([a, b], ["no"]) == [a, b]


def test_direct_shows_one_daemons_ads_once_it_answers(home, capsys):
    assert run(capsys, "status", "-direct", "a", "-af", "Name")[1] == "slot2@a\nslot10@a\n"
    assert run(capsys, "status", "-direct", "slot10@a", "-af", "Name")[1] == "slot2@a\nslot10@a\n"
    assert run(capsys, "status", "-schedd", "-direct", "schedd@a", "-af", "Name")[1] == "schedd@a\n"
    assert run(capsys, "status", "-submitters", "-direct", "schedd@a", "-af", "Name")[1] == "alice@x\n"
    status, _, err = run(capsys, "status", "-direct", "b")
    assert status == 1 and "Failed to locate startd b" in err
    status, _, err = run(capsys, "status", "-direct", "nowhere")
    assert status == 1 and "Failed to locate startd nowhere" in err
    assert run(capsys, "status", "-collector", "-direct", "nowhere", "-af", "MyType")[1] == "Collector\n"  # no direct form


def test_xml_is_classad_xml(home, capsys):
    root = ET.fromstring(run(capsys, "status", "-xml")[1])
    assert root.tag == "classads"
    names = [c.find("a[@n='Name']/s").text for c in root]
    assert names == ["slot2@a", "slot10@a", "slot1@b"]
    status, _, err = run(capsys, "status", "-xml", "-json")
    assert status == 2 and "Cannot print as both XML and JSON" in err


def test_print_format_file_with_select_from(home, capsys, tmp_path):
    pf = tmp_path / "slots.pf"
    pf.write_text("SELECT\n  Name AS SLOT WIDTH -10\n  Memory AS MEM PRINTF %6d\nWHERE Memory > 600\n"
                  "GROUP BY\n  Memory DESCENDING\n")
    assert run(capsys, "status", "-print-format", str(pf))[1] == \
        "SLOT       MEM   \nslot2@a      2048\nslot1@b      1024\n"
    pf.write_text("SELECT FROM SCHEDD NOHEADER\n  Name\n  TotalIdleJobs PRINTF %d\n")
    assert run(capsys, "status", "-print-format", str(pf))[1].rstrip() == "schedd@a 1"
    status, _, err = run(capsys, "status", "-master", "-print-format", str(pf))
    assert status == 2 and "contradicts" in err
    pf.write_text("SELECT FROM NOWHERE\n  Name\n")
    status, _, err = run(capsys, "status", "-print-format", str(pf))
    assert status == 2 and "SELECT FROM takes one of" in err

"""condor_status's views and totals tables (htc.cli.status_views), from ads given here: the
columns of each view, the totals as condor_status's printf formats lay them out, -compact's
roll-up of a machine's slots, and -format's printf conversions."""

from __future__ import annotations

from htc.classad import ClassAd
from htc.cli import status_views as sv

BASE = {"MyType": "Machine", "Machine": "h.example", "OpSys": "LINUX", "Arch": "X86_64", "OpSysAndVer": "Ubuntu22",
        "CondorLoadAvg": 0.25, "LoadAvg": 0.5, "TotalLoadAvg": 1.0, "TotalCpus": 4, "MyCurrentTime": 1000,
        "LastHeardFrom": 1000, "Mips": 1000, "KFlops": 2000, "Disk": 100, "KeyboardIdle": 65,
        "EnteredCurrentState": 900}


def pslot(**extra) -> ClassAd:
    return ClassAd({**BASE, "Name": "slot1@h.example", "SlotType": "Partitionable", "PartitionableSlot": True,
                    "State": "Unclaimed", "Activity": "Idle", "Cpus": 2, "Memory": 1024, "TotalSlotCpus": 4,
                    "TotalSlotMemory": 4096, "NumDynamicSlots": 2, "EnteredCurrentActivity": 400, **extra})


def dslot(i: int, memory: int, user: str, state="Claimed", activity="Busy") -> ClassAd:
    return ClassAd({**BASE, "Name": f"slot1_{i}@h.example", "SlotType": "Dynamic", "DynamicSlot": True,
                    "State": state, "Activity": activity, "Cpus": 1, "Memory": memory, "TotalSlotCpus": 1,
                    "TotalSlotMemory": memory, "RemoteUser": user, "ClientMachine": "submit.h",
                    "EnteredCurrentActivity": 990})


def machine() -> list[ClassAd]:
    return [pslot(), dslot(1, 1024, "alice@h"), dslot(2, 2048, "bob@h")]


def test_default_view_columns_and_missing_values():
    heads, rows, right = sv.render(sv.slots_normal(False), [pslot(), ClassAd({"Name": "bare@h"})])
    assert heads == ["Name", "OpSys", "Arch", "State", "Activity", "LoadAv", "Mem", "ActvtyTime"]
    assert rows[0] == ("slot1@h.example", "LINUX", "X86_64", "Unclaimed", "Idle", "0.250", "1024", "0+00:10:00"), \
        "LoadAv is CondorLoadAvg; ActvtyTime is MyCurrentTime - EnteredCurrentActivity"
    assert rows[1] == ("bare@h", "[????]", "[????]", "[????]", "??", "[????]", "[????]", "-")
    assert sv.render(sv.slots_normal(True), [])[0][-1] == "ActivityTime", "-wide spells the heading out"
    assert right == [5, 6, 7]


def test_run_server_and_state_views():
    ads = machine()
    heads, rows, _ = sv.render(sv.slots_run(), ads[1:])
    assert heads == ["Name", "OpSys", "Arch", "LoadAv", "RemoteUser", "ClientMachine"]
    assert rows[1] == ("slot1_2@h.example", "LINUX", "X86_64", "0.250", "bob@h", "submit.h")
    heads, rows, _ = sv.render(sv.slots_server(), ads[:1])
    assert heads == ["Name", "OpSys", "Arch", "LoadAv", "Memory", "Disk", "Mips", "KFlops"]
    assert rows[0] == ("slot1@h.example", "LINUX", "X86_64", "0.250", "    1024", "      100", "   1000", "     2000")
    heads, rows, _ = sv.render(sv.slots_state(), ads[:1])
    assert [h.strip() for h in heads] == ["Name", "Cpu", "Mem", "LoadAv", "KbdIdle", "State", "StateTime", "Activ",
                                          "ActvtyTime"]
    assert rows[0] == ("slot1@h.example", "2", "1024", "0.250", "0+00:01:05", "Unclaimed", "0+00:01:40", "Idle",
                       "0+00:10:00"), "StateTime and ActvtyTime are measured from LastHeardFrom"


def test_normal_totals_laid_out_as_condor_status_prints_them():
    lines = sv.totals_lines("normal", machine())
    assert lines == [
        "               Total Owner Claimed Unclaimed Matched Preempting  Drain Backfill BkIdle",
        "",
        "  X86_64/LINUX     3     0       2         1       0          0      0        0      0",
        "",
        "         Total     3     0       2         1       0          0      0        0      0",
    ]
    wide = sv.totals_lines("normal", machine(), auto_key=True)
    assert wide[2].startswith("X86_64/LINUX     3"), "-wide: the key column is as wide as the longest key"


def test_other_totals_tables():
    ads = machine()
    assert sv.totals_lines("run", ads[1:])[::2] == [
        "               Machines         MIPS       KFLOPS   AvgLoadAvg",
        "  X86_64/LINUX        2         2000         4000   0.500",
        "         Total        2         2000         4000   0.500"]
    assert sv.totals_lines("server", ads)[2] == \
        "  X86_64/LINUX        3     3        4096         300        3000        6000"
    state = sv.totals_lines("state", ads)
    assert state[0].split() == ["Total", "Owner", "Unclaimed", "Claimed", "Preempting", "Matched", "Drain",
                                "Backfill", "BkIdle"]
    assert state[2].split() == ["Busy", "2", "0", "0", "2", "0", "0", "0", "0", "0"], "-state totals by activity"
    schedds = [ClassAd({"Name": n, "TotalRunningJobs": 1, "TotalIdleJobs": 2, "TotalHeldJobs": 3}) for n in "ab"]
    assert sv.totals_lines("schedd", schedds) == [
        "                TotalRunningJobs      TotalIdleJobs      TotalHeldJobs", "", "",
        "         Total                 2                  4                  6"]
    subs = [ClassAd({"Name": "alice@h", "RunningJobs": 1, "IdleJobs": 2, "HeldJobs": 0})]
    assert sv.totals_lines("submitters", subs, auto_key=True) == [
        "       RunningJobs   IdleJobs   HeldJobs", "", "alice@h          1          2          0", "",
        "  Total          1          2          0"]


def test_backfill_slots_count_as_condor_status_counts_them():
    ads = [ClassAd({**BASE, "Name": "b1", "State": "Unclaimed", "SlotBackfill": True}),
           ClassAd({**BASE, "Name": "b2", "State": "Claimed", "SlotBackfill": True})]
    assert sv.totals_lines("normal", ads)[-1].split() == ["Total", "1", "0", "0", "0", "0", "0", "0", "1", "1"]


def test_compact_rolls_dynamic_slots_into_their_machine():
    heads, rows, _ = sv.compact_rows(machine())
    assert heads == ["Machine", "Platform", "Slots", "Cpus", "Gpus", "TotalGb", "FreCpu", "FreeGb", "CpuLoad", "ST",
                     "Jobs/Min", "MaxSlotGb"]
    assert [c.strip() for c in rows[0]] == ["h.example", "x64/Ubuntu22", "2", "4", "0", "4.00", "2", "1.00", "0.25",
                                            "**", "_", "2.00"]
    exhausted = [pslot(Cpus=0, Memory=0), dslot(1, 1024, "alice@h"), dslot(2, 3072, "bob@h")]
    assert sv.compact_rows(exhausted)[1][0][9] == "Cb", "an exhausted p-slot shows its dynamic slots' consensus"
    mixed = [pslot(Cpus=0), dslot(1, 1024, "alice@h"), dslot(2, 1024, "bob@h", "Preempting", "Vacating")]
    assert sv.compact_rows(mixed)[1][0][9] == "Pv", "Preempting and Vacating win"
    assert sv.compact_rows(machine(), "run")[1][0][3] == "alice@h, bob@h"
    statics = [ClassAd({**BASE, "Name": f"slot{i}@h.example", "SlotType": "Static", "State": s, "Activity": a,
                        "Cpus": 1, "Memory": 1024, "TotalSlotCpus": 1, "TotalSlotMemory": 1024})
               for i, (s, a) in enumerate([("Unclaimed", "Idle"), ("Claimed", "Busy")], 1)]
    row = [c.strip() for c in sv.compact_rows(statics)[1][0]]
    assert row[2:8] == ["2S", "2", "0", "2.00", "1", "1.00"] and row[9] == "**", \
        "static slots: counted with an S, free resources only from the idle one"


def test_daemon_views():
    master = ClassAd({"Name": "h", "CondorVersion": "$CondorVersion: 24.0.1 2024-10-31 BuildID: 1 $",
                      "DetectedCpus": 8, "DetectedMemory": 16000, "DaemonStartTime": 0, "LastHeardFrom": 90061})
    heads, rows, _ = sv.render(sv.DAEMON_VIEWS["master"], [master])
    assert [h.strip() for h in heads] == ["Name", "Version", "Cpus", "Memory", "Uptime"]
    assert rows[0] == ("h", "24.0.1", "   8", "15.6 GB", "1+01:01:01")
    heads, rows, _ = sv.render(sv.DAEMON_VIEWS["collector"],
                               [ClassAd({"Name": "c", "Machine": "h", "RunningJobs": 3, "IdleJobs": 4,
                                         "HostsTotal": 5})])
    assert [h.strip() for h in heads] == ["Name", "Machine", "RunningJobs", "IdleJobs", "HostsTotal"]
    assert [c.strip() for c in rows[0]] == ["c", "h", "3", "4", "5"]
    assert sv.render(sv.DAEMON_VIEWS["any"], [ClassAd({"MyType": "Scheduler", "Name": "s"})])[1] == \
        [("Scheduler", "None", "s")]


def test_printf_format():
    ad = ClassAd({"Name": "slot1@h", "Memory": 1024, "LoadAvg": 0.5, "Expr": ClassAd("[ x = 1 + 2 ]").lookup("x")})
    assert sv.printf_format("%s ", "Name", ad) == "slot1@h "
    assert sv.printf_format("%d\\n", "Memory", ad) == "1024\n"
    assert sv.printf_format("[%6.2f]", "LoadAvg", ad) == "[  0.50]"
    assert sv.printf_format("%d", "LoadAvg * 10", ad) == "5"
    assert sv.printf_format("%V", "Name", ad) == '"slot1@h"'
    assert sv.printf_format("%v", "Name", ad) == "slot1@h"
    assert sv.printf_format("%r", "Expr", ad) == "1 + 2"
    assert sv.printf_format("%s", "Missing", ad) == "undefined"
    assert sv.printf_format("100%% %s", "Name", ad) == "100% slot1@h"


def test_dash_help_prints_the_subcommand_usage(capsys):
    import pytest

    from htc.cli.main import main

    for command, option in (("status", "-compact"), ("history", "-completedsince")):
        with pytest.raises(SystemExit) as exc:
            main([command, "-help"])
        out = capsys.readouterr().out
        assert exc.value.code == 0 and out.startswith(f"usage: htc {command}") and option in out

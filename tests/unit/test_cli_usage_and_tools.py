"""The htc command's usage rule (an unknown flag prints the subcommand's usage; ``-help`` on every
subcommand) and the parts of the job tools of issue #16 that need no pool: ``htc version``'s
format, condor_ping's tokens, condor_evicted_files' spool layout."""

from __future__ import annotations

import re

import pytest

from htc.cli.evicted_files import spool_dir
from htc.cli.main import build_parser, main
from htc.client.access import ALL_LEVELS, level_of_token
from htc.errors import UsageError
from htc.wire.authz import Level


def _subcommands() -> list[str]:
    parser = build_parser()
    [action] = [a for a in parser._actions if a.dest == "command"]
    return sorted(action.choices)


SUBCOMMANDS = _subcommands()


def test_the_new_tools_are_registered():
    assert {"tail", "ssh_to_job", "evicted_files", "who", "version", "ping"} <= set(SUBCOMMANDS)


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_an_unknown_flag_prints_the_subcommands_usage(name, capsys):
    with pytest.raises(SystemExit) as stop:
        main([name, "-no-such-flag-anywhere"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: htc {name} "), err
    assert f"htc {name}: error:" in err
    assert "usage: htc [-h]" not in err


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_help_works_on_every_subcommand(name, capsys):
    for spelling in ("-help", "--help"):
        with pytest.raises(SystemExit) as stop:
            main([name, spelling])
        assert stop.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: htc {name} ")


def test_an_unknown_flag_after_good_arguments_names_the_subcommand(capsys):
    with pytest.raises(SystemExit):
        main(["q", "-allusers", "-wat"])
    err = capsys.readouterr().err
    assert "htc q: error: unrecognized arguments: -wat" in err
    assert "Try 'htc q --help'" in err


def test_an_unknown_top_level_flag_still_prints_the_top_level_usage(capsys):
    with pytest.raises(SystemExit):
        main(["-wat"])
    assert capsys.readouterr().err.startswith("usage: htc [-h]")


def test_version_prints_condor_versions_two_lines(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HTC_HOME", str(tmp_path))
    assert main(["version"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert re.fullmatch(r"\$CondorVersion: \d+\.\d+\.\d+ \d{4}-\d\d-\d\d BuildID: htc-\S+ \$", lines[0]), lines
    assert re.fullmatch(r"\$CondorPlatform: \S+-\S+ \$", lines[1]), lines
    assert main(["version", "-arch"]) == 0
    assert capsys.readouterr().out.strip() in lines[1]


def test_ping_tokens_are_levels_request_names_or_dc_nop():
    assert level_of_token("schedd", "write") == (Level.WRITE, "")
    assert level_of_token("schedd", "Submit") == (Level.WRITE, "Submit")
    assert level_of_token("schedd", "queryjobs") == (Level.READ, "QueryJobs")
    assert level_of_token("master", "DaemonsOff") == (Level.ADMINISTRATOR, "DaemonsOff")
    assert level_of_token("collector", "DC_NOP") == (Level.ALLOW, "DC_NOP")
    with pytest.raises(UsageError, match='Could not understand TOKEN "OWNER"'):
        level_of_token("schedd", "OWNER")
    with pytest.raises(UsageError, match="DaemonsOff"):  # a request the schedd does not answer
        level_of_token("schedd", "DaemonsOff")
    assert ALL_LEVELS[0] == "ALLOW" and "ADVERTISE_MASTER" in ALL_LEVELS


def test_evicted_files_spool_directory_is_htcondors_layout(tmp_path):
    assert spool_dir(tmp_path, 12345, 7) == tmp_path / "2345" / "7" / "cluster12345.proc7.subproc0"


def test_version_is_the_string_job_ads_and_daemon_ads_carry(capsys, tmp_path, monkeypatch):
    """One place builds ``$CondorVersion: ... $``: htc version, a job ad, a slot ad, the master's and
    the collector's ads agree to the byte (the date is the release date, not today's)."""
    from htc.daemons.startd.sensors import condor_version as slot_version
    from htc.daemons.clock import FakeClock
    from htc.submit import Submit

    monkeypatch.setenv("HTC_HOME", str(tmp_path))
    assert main(["version"]) == 0
    printed = capsys.readouterr().out.splitlines()[0]
    (job,) = Submit("executable = /bin/true\nqueue\n").jobs(clusterid=1)
    assert job["CondorVersion"] == printed == job["SubmitVersion"]
    assert slot_version(FakeClock(0.0)) == printed  # 1970: still the release date

"""Contracts of the project itself: packaging, README/CI agreement, CLI help and docs."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from htc.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[2]


def _packages_on_disk() -> set[str]:
    mapping = {"htc": ROOT / "htc", "htc.dag": ROOT / "dag", "htc.executors": ROOT / "executors"}
    found = set()
    for prefix, top in mapping.items():
        for init in top.rglob("__init__.py"):
            rel = init.parent.relative_to(top)
            parts = [p for p in rel.parts if p]
            name = ".".join([prefix, *parts])
            if prefix == "htc" and parts and parts[0] in ("dag", "executors"):
                continue
            found.add(name)
    return found


def test_every_package_is_listed_in_pyproject():
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    missing = _packages_on_disk() - declared
    assert not missing, f"add these packages to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text)


def test_readme_opens_with_exactly_two_commands_and_ci_runs_the_test_one():
    commands = _readme_commands()
    assert len(commands) == 2, commands
    demo, tests = commands
    assert "pytest" in tests and "pytest" not in demo
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci.splitlines(), ".ci/run must run the README's test command verbatim"


def _subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_command_has_help_with_examples_and_a_docs_mention(name, capsys):
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "example" in out.lower(), f"'htc {name} --help' should show examples"
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    assert f"htc {name}" in docs, f"no page in docs/ mentions 'htc {name}'"


def test_single_dash_long_options_parse():
    args = build_parser().parse_args(["q", "-constraint", "JobStatus == 1", "-af", "ClusterId", "ProcId"])
    assert args.constraint == "JobStatus == 1"
    assert args.af == ["ClusterId", "ProcId"]
    args = build_parser().parse_args(["q", "--constraint", "x", "-better-analyze", "-long"])
    assert args.constraint == "x" and args.better_analyze and args.long


def test_console_script_runs():
    out = subprocess.run([sys.executable, "-m", "htc.cli.main", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("htc ")


def test_import_htcexecutor_is_the_users_import():
    from htc import HTCExecutor

    assert HTCExecutor.__module__.startswith("htc.executors")


def test_first_use_of_any_command_creates_a_personal_pool_config(_isolated_htc_home, monkeypatch, capsys):
    home = _isolated_htc_home / "fresh"
    monkeypatch.setenv("HTC_HOME", str(home))
    assert main(["config_val", "DAEMON_LIST"]) == 0
    assert (home / "htc_config").exists()
    assert "SCHEDD" in capsys.readouterr().out

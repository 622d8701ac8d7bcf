"""``htc config_val``: values, -v, -raw, -default, -dump, -summary, -config, use, exit codes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from htc.cli.main import main

CONFIG = """\
# a test pool
use ROLE : Personal
LOCAL_DIR = {home}
MAX_JOBS_RUNNING = 100
SCHEDD.MAX_JOBS_RUNNING = 20
schedd2.MAX_JOBS_RUNNING = 2
WEB = http://$(WEB_HOST)/index.html
LIST = a, b
LIST = $(LIST), c
START = KeyboardIdle > $(MINUTE)
"""


@pytest.fixture
def pool(tmp_path, monkeypatch):
    home = tmp_path / "home"
    path = tmp_path / "htc_config"
    path.write_text(CONFIG.format(home=home))
    monkeypatch.setenv("HTC_CONFIG", str(path))
    monkeypatch.setenv("HTC_HOME", str(home))
    for key in list(os.environ):
        if key.upper().startswith("_HTC_"):
            monkeypatch.delenv(key)
    return path


def run(capsys, *argv):
    status = main(["config_val", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_values_one_per_line(pool, capsys, tmp_path):
    status, out, err = run(capsys, "SPOOL", "max_jobs_running", "LIST", "DAEMON_LIST")
    assert status == 0 and err == ""
    assert out.splitlines() == [f"{tmp_path}/home/spool", "100", "a, b, c",
                                "MASTER COLLECTOR NEGOTIATOR STARTD SCHEDD"]


def test_undefined_name_stops_with_status_1(pool, capsys):
    status, out, err = run(capsys, "LIST", "NO_SUCH_KNOB", "SPOOL")
    assert status == 1
    assert out == "a, b, c\n"
    assert err == "Not defined: NO_SUCH_KNOB\n"


def test_subsystem_and_local_name(pool, capsys):
    assert run(capsys, "-subsystem", "SCHEDD", "MAX_JOBS_RUNNING")[1] == "20\n"
    assert run(capsys, "--subsystem", "startd", "MAX_JOBS_RUNNING")[1] == "100\n"
    assert run(capsys, "-subsystem", "SCHEDD", "-local-name", "SCHEDD2", "MAX_JOBS_RUNNING")[1] == "2\n"


def test_verbose_shows_origin_raw_default_and_undefined_references(pool, capsys):
    status, out, _ = run(capsys, "-v", "WEB", "SPOOL", "UPDATE_INTERVAL", "DAEMON_LIST")
    assert status == 0
    assert out.splitlines() == [
        "WEB = http:///index.html",
        f" # at: {pool}:7",
        " # raw: WEB = http://$(WEB_HOST)/index.html",
        " # note: $(WEB_HOST) is not defined anywhere, so it expanded to nothing",
        f"SPOOL = {pool.parent}/home/spool",
        " # at: default",
        " # raw: SPOOL = $(LOCAL_DIR)/spool",
        "UPDATE_INTERVAL = 300",
        " # at: default",
        " # raw: UPDATE_INTERVAL = 300",
        "DAEMON_LIST = MASTER COLLECTOR NEGOTIATOR STARTD SCHEDD",
        f" # at: {pool}:2, use ROLE:Personal",
        " # raw: DAEMON_LIST = MASTER COLLECTOR NEGOTIATOR STARTD SCHEDD",
        " # default: MASTER",
    ]


def test_verbose_environment_origin(pool, capsys, monkeypatch):
    monkeypatch.setenv("_HTC_MAX_JOBS_RUNNING", "5")
    out = run(capsys, "-v", "MAX_JOBS_RUNNING")[1]
    assert out.splitlines()[:2] == ["MAX_JOBS_RUNNING = 5", " # at: environment (_HTC_MAX_JOBS_RUNNING)"]


def test_raw_and_default(pool, capsys):
    assert run(capsys, "-raw", "START")[1] == "KeyboardIdle > $(MINUTE)\n"
    assert run(capsys, "START")[1] == "KeyboardIdle > 60\n"
    assert run(capsys, "-default", "START", "SPOOL")[1] == "True\n$(LOCAL_DIR)/spool\n"
    status, _, err = run(capsys, "-default", "WEB")
    assert status == 1 and "Not defined: WEB" in err


def test_dump_with_pattern(pool, capsys):
    status, out, _ = run(capsys, "-dump", "^MAX_JOBS")
    lines = out.splitlines()
    assert status == 0 and lines[0].startswith("# Configuration for subsystem TOOL (raw values)")
    assert "MAX_JOBS_RUNNING = 100" in lines
    assert "SCHEDD.MAX_JOBS_RUNNING = 20" not in lines  # pattern anchored at the start
    assert "MAX_JOBS_PER_OWNER = 100000" in lines
    assert all(line.upper().startswith("MAX_JOBS") for line in lines[1:])
    expanded = run(capsys, "-dump", "-expand", "^LOCK$")[1].splitlines()
    assert expanded[1] == f"LOCK = {pool.parent}/home/log"


def test_summary_groups_by_source(pool, capsys, monkeypatch):
    monkeypatch.setenv("_HTC_FROM_ENV", "e")
    out = run(capsys, "-summary")[1].splitlines()
    assert out[:4] == ["# Configuration set by the sources (subsystem TOOL)", "#", f"# from {pool}", "#"]
    assert "CONDOR_HOST = 127.0.0.1" in out
    assert "LIST = a, b, c" in out
    assert out[-4:] == ["#", "# from environment", "#", "FROM_ENV = e"]


def test_config_lists_sources(pool, capsys, tmp_path):
    local = tmp_path / "local.cfg"
    local.write_text("X = 1\n")
    pool.write_text(pool.read_text() + f"LOCAL_CONFIG_FILE = {local}\n")
    out = run(capsys, "-config")[1]
    assert out == f"Configuration source:\n\t{pool}\nLocal configuration sources:\n\t{local}\n"


def test_use_lists_and_prints_templates(pool, capsys):
    out = run(capsys, "use")[1]
    assert "use ROLE : Personal, Submit, Execute, CentralManager" in out
    out = run(capsys, "use", "ROLE")[1]
    assert out.splitlines()[0].startswith("use ROLE:Personal\t")
    out = run(capsys, "use", "ROLE:Personal")[1].splitlines()
    assert out == ["use ROLE:Personal is", "    CONDOR_HOST=127.0.0.1", "    COLLECTOR_HOST=$(CONDOR_HOST):0",
                   "    DAEMON_LIST=MASTER COLLECTOR NEGOTIATOR STARTD SCHEDD", "    RunBenchmarks=0"]
    out = run(capsys, "use", "POLICY:Limit_Job_Runtimes(3600)", "-expand")[1]
    assert "MAX_JOB_RUNTIME=3600" in out
    status, _, err = run(capsys, "use", "ROLE:Nope")
    assert status == 1 and "Not defined: use ROLE:Nope" in err
    status, _, err = run(capsys, "use", "NOPE")
    assert status == 2 and "use NOPE: unknown category" in err


def test_no_name_is_a_usage_error(pool, capsys):
    status, _, err = run(capsys)
    assert status == 2 and "name a knob to show" in err


def test_warnings_go_to_stderr(pool, capsys):
    pool.write_text(pool.read_text() + "OLD : style\n")
    status, out, err = run(capsys, "OLD")
    assert (status, out) == (0, "style\n")
    assert "warning: obsolete use of ':'" in err


def test_first_use_creates_home(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("HTC_CONFIG", raising=False)
    monkeypatch.setenv("HTC_HOME", str(tmp_path / "fresh"))
    status, out, _ = run(capsys, "-v", "DAEMON_LIST")
    assert status == 0
    assert (tmp_path / "fresh" / "htc_config").is_file()
    assert f"# at: {tmp_path}/fresh/htc_config:6, use ROLE:Personal" in out


def test_console_script(pool, tmp_path):
    # pip puts the script beside the interpreter (a venv's bin/), which need not be on PATH
    beside = Path(sys.executable).parent / "htc"
    exe = str(beside) if beside.is_file() else shutil.which("htc")
    assert exe, "the htc console script is not installed; run pip install -e ."
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("_HTC_")}
    env.update(HTC_CONFIG=str(pool), HTC_HOME=str(tmp_path / "home"))
    done = subprocess.run([exe, "config_val", "-subsystem", "SCHEDD", "MAX_JOBS_RUNNING", "NOPE"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (1, "20\n", "Not defined: NOPE\n")
    pool.write_text("A = 1\nif $(A) == 1\nendif\n")
    done = subprocess.run([exe, "config_val", "A"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith(f"htc config_val: {pool}:2: $(A) == 1 is not a valid if condition")
    assert "Traceback" not in done.stderr

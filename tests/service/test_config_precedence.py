"""Which definition wins: files, includes, metaknobs, subsystems, local names and the environment."""

from __future__ import annotations

import os
import sys

import pytest

from htc.config import ConfigError, load_config


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def load(tmp_path, text, *, env=None, subsystem=None, local_name=None):
    main = write(tmp_path / "main.cfg", text)
    return load_config(subsystem, env={"HTC_CONFIG": main, "HTC_HOME": str(tmp_path / "home"), **(env or {})},
                       local_name=local_name)


def test_main_then_dir_in_name_order_then_local_file_then_environment(tmp_path):
    d = tmp_path / "config.d"
    write(d / "00a", "ORDER = dir00\nFROM_DIR = a\nSEEN = $(SEEN) 00a\n")
    write(d / "10b", "ORDER = dir10\nSEEN = $(SEEN) 10b\n")
    write(d / "99c.rpmsave", "ORDER = rpmsave\n")
    write(d / "99d~", "ORDER = tilde\n")
    write(d / ".hidden", "ORDER = hidden\n")
    (d / "subdir").mkdir()
    lcf = write(tmp_path / "local.cfg", "ORDER = local_file\nSEEN = $(SEEN) lcf\nENVD = file\n")
    cfg = load(tmp_path, f"ORDER = main\nSEEN = main\nLOCAL_CONFIG_DIR = {d}\nLOCAL_CONFIG_FILE = {lcf}\n",
               env={"_HTC_ENVD": "env", "_htc_lower": "lw"})
    assert cfg.get("ORDER") == "local_file"
    assert cfg.get("SEEN") == "main 00a 10b lcf"
    assert cfg.get("FROM_DIR") == "a"
    assert cfg.get("ENVD") == "env"
    assert cfg.get("LOWER") == "lw"
    assert cfg.where("ENVD") == "environment"
    assert cfg.where("ORDER") == (lcf, 1)
    assert cfg.files == [str(tmp_path / "main.cfg"), str(d / "00a"), str(d / "10b"), lcf]


def test_environment_override_appends_to_the_file_value(tmp_path):
    cfg = load(tmp_path, "LIST = one\n", env={"_HTC_LIST": "$(LIST) four", "_HTC_NEWX": "  lead"})
    assert cfg.get("LIST") == "one four"
    assert cfg.get("NEWX") == "lead"
    assert cfg.origin("LIST").describe() == "environment (_HTC_LIST)"


def test_exclude_regexp_is_configurable(tmp_path):
    d = tmp_path / "d"
    write(d / "a.conf", "A = conf\n")
    write(d / "b.skip", "B = skip\n")
    cfg = load(tmp_path, f"LOCAL_CONFIG_DIR = {d}\nLOCAL_CONFIG_DIR_EXCLUDE_REGEXP = .*\\.skip$\n")
    assert (cfg.get("A"), cfg.get("B")) == ("conf", None)


def test_several_dirs_and_files_in_list_order(tmp_path):
    write(tmp_path / "d1" / "x", "V = d1\n")
    write(tmp_path / "d2" / "x", "V = d2\nW = $(V)\n")
    f1 = write(tmp_path / "f1", "F = f1\n")
    f2 = write(tmp_path / "f2", "F = $(F) f2\n")
    cfg = load(tmp_path, f"LOCAL_CONFIG_DIR = {tmp_path / 'd1'}, {tmp_path / 'd2'}\n"
                         f"LOCAL_CONFIG_FILE = {f1} {f2}\n")
    assert (cfg.get("V"), cfg.get("F")) == ("d2", "f1 f2")


def test_local_file_that_changes_the_list_is_followed(tmp_path):
    second = write(tmp_path / "second", "WHO = second\n")
    first = write(tmp_path / "first", f"WHO = first\nLOCAL_CONFIG_FILE = {second}\n")
    cfg = load(tmp_path, f"LOCAL_CONFIG_FILE = {first}\n")
    assert cfg.get("WHO") == "second"
    assert cfg.files[1:] == [first, second]


def test_local_file_that_sets_a_new_dir_gets_it_read(tmp_path):
    write(tmp_path / "late.d" / "z", "LATE = yes\n")
    lcf = write(tmp_path / "lcf", f"LOCAL_CONFIG_DIR = {tmp_path / 'late.d'}\n")
    cfg = load(tmp_path, f"LOCAL_CONFIG_FILE = {lcf}\n")
    assert cfg.get("LATE") == "yes"


def test_missing_local_file_is_an_error_unless_not_required(tmp_path):
    with pytest.raises(ConfigError, match="cannot read LOCAL_CONFIG_FILE .* /nonexistent/x"):
        load(tmp_path, "LOCAL_CONFIG_FILE = /nonexistent/x\n")
    cfg = load(tmp_path, "REQUIRE_LOCAL_CONFIG_FILE = false\nLOCAL_CONFIG_FILE = /nonexistent/x\nA = ok\n")
    assert cfg.get("A") == "ok"


def test_only_env_reads_no_file_but_takes_environment(tmp_path):
    cfg = load_config(env={"HTC_CONFIG": "ONLY_ENV", "HTC_HOME": str(tmp_path), "_HTC_FOO": "bar"})
    assert cfg.files == []
    assert cfg.get("FOO") == "bar"
    assert cfg.param("UPDATE_INTERVAL") == 300
    assert not (tmp_path / "htc_config").exists()


def test_missing_htc_config_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="HTC_CONFIG names .*nope, which does not exist"):
        load_config(env={"HTC_CONFIG": str(tmp_path / "nope")})


@pytest.mark.parametrize("subsystem,local_name,expected", [
    (None, None, "global"), ("SCHEDD", None, "schedd_foo"), ("schedd", None, "schedd_foo"),
    ("STARTD", None, "global"), ("SCHEDD", "SCHEDD2", "local_foo"), ("STARTD", "SCHEDD2", "local_foo"),
])
def test_subsystem_and_local_name_prefixes(tmp_path, subsystem, local_name, expected):
    cfg = load(tmp_path, "FOO = global\nSCHEDD.FOO = schedd_foo\nschedd2.foo = local_foo\n"
                         "BAZ = $(FOO)-baz\nONLY.PREFIXED = x\n",
               subsystem=subsystem, local_name=local_name)
    assert cfg.get("FOO") == expected
    assert cfg.get("BAZ") == f"{expected}-baz"
    assert cfg.get("SCHEDD.FOO") == "schedd_foo"


def test_prefixed_name_without_plain_definition(tmp_path):
    cfg = load(tmp_path, "SCHEDD.ONLY = s\n", subsystem="SCHEDD")
    assert cfg.get("ONLY") == "s"
    assert load(tmp_path, "SCHEDD.ONLY = s\n").get("ONLY") is None


def test_subsystem_macro_and_self_reference_under_a_prefix(tmp_path):
    text = "L = a\nSCHEDD.L = $(L) b\nSUB = $(SUBSYSTEM) $(LOCALNAME)\n"
    cfg = load(tmp_path, text, subsystem="SCHEDD")
    assert cfg.get("L") == "a b"
    assert cfg.get("SUB") == "SCHEDD SCHEDD"
    assert cfg.subsystem == "SCHEDD"
    tool = load(tmp_path, text)
    assert tool.get("L") == "a"
    assert tool.get("SUB") == "TOOL TOOL"


def test_include_reads_at_that_point(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "inc" / "one.cfg", "X = from_inc\nREL = $(X)\n")
    cfg = load(tmp_path, "X = before\ninclude : inc/one.cfg\ninclude ifexist : inc/nope.cfg\n"
                         "AFTER = $(X)\n@include : $(CONFIG_ROOT)/inc/one.cfg\n")
    assert cfg.get("REL") == "from_inc"
    assert cfg.where("X") == (str(tmp_path / "inc" / "one.cfg"), 1)
    assert str(tmp_path / "inc" / "one.cfg") in cfg.files


def test_include_command_output(tmp_path):
    cmd = f"{sys.executable} -c \"print('FROM_CMD = yes')\""
    cfg = load(tmp_path, f"include command : {cmd}\n")
    assert cfg.get("FROM_CMD") == "yes"
    cache = tmp_path / "cache.cfg"
    cfg = load(tmp_path, f"include command into {cache} : {cmd}\nX = 1\n")
    assert cfg.get("FROM_CMD") == "yes" and cache.read_text().strip() == "FROM_CMD = yes"


def test_metaknob_roles_and_policies(tmp_path):
    cfg = load(tmp_path, "use ROLE : Personal\nuse POLICY : Desktop\n")
    assert cfg.get("DAEMON_LIST") == "MASTER COLLECTOR NEGOTIATOR STARTD SCHEDD"
    assert cfg.get("COLLECTOR_HOST") == "127.0.0.1:0"
    assert cfg.get("START") == ('((KeyboardIdle > 15 * 60) && ( ((LoadAvg - CondorLoadAvg) <= 0.3) || '
                                '(State != "Unclaimed" && State != "Owner")) )')
    assert cfg.get("IS_OWNER") == "(START =?= False)"
    assert cfg.param("MaxJobRetirementTime") == "0"
    origin = cfg.origin("START")
    assert (origin.file, origin.line, origin.use) == (str(tmp_path / "main.cfg"), 2, "POLICY:Desktop")
    assert cfg.origin("KeyboardBusy").use == "POLICY:Desktop > FEATURE:POLICY_EXPR_FRAGMENTS"


def test_metaknob_lists_arguments_and_case(tmp_path):
    cfg = load(tmp_path, "use role: submit, Execute\nuse policy : always_run_jobs\n"
                         "use POLICY : Limit_Job_Runtimes(100)\nuse FEATURE : StaticSlots(2, 4)\n")
    assert cfg.get("DAEMON_LIST") == "MASTER SCHEDD STARTD"
    assert cfg.get("MaxJobRetirementTime") == "100+120"
    assert cfg.get("NEGOTIATOR_CONSIDER_PREEMPTION") == "False"
    assert cfg.get("NUM_SLOTS_TYPE_2") == "4"
    assert cfg.get("SLOT_TYPE_2") is None


def test_metaknob_later_definitions_win(tmp_path):
    cfg = load(tmp_path, "START = mine\nuse POLICY : Always_Run_Jobs\nSUSPEND = mine_too\n")
    assert (cfg.get("START"), cfg.get("SUSPEND")) == ("True", "mine_too")


def test_home_config_is_used_and_created_without_htc_config(tmp_path):
    home = tmp_path / "h"
    cfg = load_config(env={"HTC_HOME": str(home)})
    assert cfg.files == [str(home / "htc_config")]
    assert cfg.get("SPOOL") == str(home / "spool")
    assert cfg.param("DAEMON_LIST") == ["MASTER", "COLLECTOR", "NEGOTIATOR", "STARTD", "SCHEDD"]
    assert cfg.get("LOCAL_CONFIG_DIR") == str(home / "config.d")
    (home / "config.d" / "50-mine").write_text("MAX_JOBS_RUNNING = 7\n")
    assert load_config(env={"HTC_HOME": str(home)}).param("MAX_JOBS_RUNNING") == 7


def test_detected_macros(tmp_path):
    cfg = load(tmp_path, "", env={"OMP_THREAD_LIMIT": "1"})
    assert cfg.where("FULL_HOSTNAME") == "detected"
    assert cfg.param("DETECTED_CPUS") >= 1
    assert cfg.param("NUM_CPUS") == 1
    assert cfg.get("CONFIG_ROOT") == str(tmp_path)
    assert cfg.get("PID") == str(os.getpid())

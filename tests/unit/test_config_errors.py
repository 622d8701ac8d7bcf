"""Every configuration error says file:line, what is wrong and what to do -- never a traceback."""

from __future__ import annotations

import pytest

from htc.cli.main import main
from htc.config import ConfigError, load_config


def write(tmp_path, text, name="htc_config"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# (what, config text, line, message fragment, hint fragment)
LOAD_ERRORS = [
    ("no operator", "A = 1\njust some words\n", 2, "'just some words' has no '=' or ':' after 'just'",
     "write just = value"),
    ("bare word", "lonely\n", 1, "'lonely' is not a statement", "expected NAME = value"),
    ("illegal name", "bad-name = 1\n", 1, "illegal name <bad-name>", "letters, digits"),
    ("illegal expanded name", "X = a b\n$(X) = 1\n", 2, "illegal name <a b>", "letters, digits"),
    ("misplaced plus", "A + = 1\n", 1, "only '+=' may stand between A and the value", "A += value"),
    ("plus before colon", "A +: 1\n", 1, "only '+=' may stand between A", "A += value"),
    ("unknown category", "use NOPE : x\n", 1, "use NOPE: unknown category", "known categories: ROLE"),
    ("unknown template", "\nuse ROLE : Nope\n", 2, "use ROLE: does not recognise Nope",
     "htc config_val use ROLE"),
    ("use without category", "use : Personal\n", 1, "use needs a category before ':'", "use ROLE : Personal"),
    ("use without template", "use ROLE :\n", 1, "use ROLE: no template named", "lists them"),
    ("template error statement", "use POLICY : Preempt_If\n", 1,
     "use POLICY:Preempt_If (template line 2): error: use POLICY : PREEMPT_IF requires an argument", ""),
    ("template needing 3 args", "X = 1\nuse POLICY : Want_Hold_If(X)\n", 2,
     "WANT_HOLD_IF requires 3 arguments", ""),
    ("missing include", "include : /nonexistent/file\n", 1,
     "include : /nonexistent/file: cannot open it (No such file or directory)", "$(CONFIG_ROOT)/file"),
    ("include keyword", "include sometimes : x\n", 1, "unexpected keyword(s) 'sometimes' after include",
     "include [ifexist]"),
    ("include nothing", "include :\n", 1, "include names no file", "include : /path/to/file"),
    ("error statement", "X = 5\nerror : stop here $(X)\n", 2, "error: stop here 5", ""),
    ("unterminated multi-line value", "A = 1\nX @=end\nline\n", 2,
     "end of file while looking for '@end', which should end the multi-line value of X", "add a line '@end'"),
    ("missing endif", "if true\nA=1\n", 2, "endif(s) not found before end-of-file", "close every 'if'"),
    ("else without if", "else\n", 1, "else without matching if", "needs an open if"),
    ("bad condition", "if a == b\nendif\n", 1, "a == b is not a valid if condition because complex",
     "conditions are numbers"),
    ("knob named IF", "X = 1\nIF = 1\n", 2, "= 1 is not a valid if condition", "cannot be named IF"),
    ("bad exclude regexp", "LOCAL_CONFIG_DIR = /tmp\nLOCAL_CONFIG_DIR_EXCLUDE_REGEXP = ([\n", None,
     "LOCAL_CONFIG_DIR_EXCLUDE_REGEXP = '([' is not a valid regular expression", "fix or remove it"),
]


@pytest.mark.parametrize("what,text,line,message,hint", LOAD_ERRORS, ids=[e[0] for e in LOAD_ERRORS])
def test_load_errors(tmp_path, what, text, line, message, hint):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(env={"HTC_CONFIG": path, "HTC_HOME": str(tmp_path)})
    text_of_error = str(info.value)
    if line is not None:
        assert text_of_error.startswith(f"{path}:{line}: "), text_of_error
        assert (info.value.file, info.value.line) == (path, line)
    assert message in text_of_error
    assert hint in text_of_error


def test_include_cycle_and_depth(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "include : b.cfg\n", "a.cfg")
    write(tmp_path, "X = 1\ninclude : a.cfg\n", "b.cfg")
    with pytest.raises(ConfigError, match=r"b\.cfg:2: include cycle: .*a\.cfg -> .*b\.cfg -> .*a\.cfg"):
        load_config(env={"HTC_CONFIG": str(tmp_path / "a.cfg"), "HTC_HOME": str(tmp_path)})


def test_failing_include_command(tmp_path):
    path = write(tmp_path, "include command : false\n")
    with pytest.raises(ConfigError, match=r"htc_config:1: include command .false. exited with status 1"):
        load_config(env={"HTC_CONFIG": path, "HTC_HOME": str(tmp_path)})


# (knob, value, message fragment): typed reads by code
TYPED_ERRORS = [
    ("UPDATE_INTERVAL", "abc", "UPDATE_INTERVAL: 'abc' is not a valid int (the default is 300)"),
    ("UPDATE_INTERVAL", '"12"', "is not a valid int"),
    ("PRIORITY_HALFLIFE", "soon", "PRIORITY_HALFLIFE: 'soon' is not a valid float"),
    ("ENABLE_RUNTIME_CONFIG", "yes", "ENABLE_RUNTIME_CONFIG: 'yes' is not a valid bool (the default is false)"),
    ("ENABLE_RUNTIME_CONFIG", "truex", "'truex' is not a valid bool"),
]


@pytest.mark.parametrize("knob,value,message", TYPED_ERRORS)
def test_typed_value_errors_point_at_the_definition(tmp_path, knob, value, message):
    path = write(tmp_path, f"# knobs\n{knob} = {value}\n")
    cfg = load_config(env={"HTC_CONFIG": path, "HTC_HOME": str(tmp_path)})
    with pytest.raises(ConfigError) as info:
        cfg.param(knob)
    assert str(info.value).startswith(f"{path}:2: ")
    assert message in str(info.value)


def test_typed_value_error_from_the_environment(tmp_path):
    cfg = load_config(env={"HTC_CONFIG": "ONLY_ENV", "_HTC_UPDATE_INTERVAL": "never"})
    with pytest.raises(ConfigError, match=r"set by the environment variable _HTC_UPDATE_INTERVAL.*"
                                          r"fix or unset _HTC_UPDATE_INTERVAL"):
        cfg.param("UPDATE_INTERVAL")


def test_template_errors_inside_use_report_the_use_line(tmp_path):
    path = write(tmp_path, "A = 1\n\nuse POLICY : Want_Hold_If(A, 3)\n")
    with pytest.raises(ConfigError) as info:
        load_config(env={"HTC_CONFIG": path, "HTC_HOME": str(tmp_path)})
    assert (info.value.file, info.value.line) == (path, 3)
    assert "use POLICY:Want_Hold_If > POLICY:Preempt_If" not in str(info.value)
    assert "use POLICY:Want_Hold_If (template line 3)" in str(info.value)


@pytest.mark.parametrize("text,args,fragment", [
    ("A = 1\nif foo bar\nendif\n", ["A"], ":2: foo bar is not a valid if condition"),
    ("A = $INT(B)\nB = x\n", ["A"], ":1: A: $INT() error: x does not evaluate to an integer"),
    ("UPDATE_INTERVAL = abc\n", ["UPDATE_INTERVAL"], None),
])
def test_cli_reports_errors_without_traceback(tmp_path, monkeypatch, capsys, text, args, fragment):
    path = write(tmp_path, text)
    monkeypatch.setenv("HTC_CONFIG", path)
    status = main(["config_val", *args])
    out, err = capsys.readouterr()
    if fragment is None:  # config_val shows text; only typed reads by code check types
        assert status == 0 and out == "abc\n"
        return
    assert status == 2
    assert err.startswith(f"htc config_val: {path}{fragment}")
    assert "Traceback" not in err

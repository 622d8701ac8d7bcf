"""The configuration language, construct by construct (expected values checked against the wheel)."""

from __future__ import annotations

import pytest

from htc.config import load_config
from htc.config.parser import Line, logical_lines, parse_statement, split_use


def load(tmp_path, text, *, name="htc_config", env=None, subsystem=None, local_name=None):
    path = tmp_path / name
    path.write_text(text)
    full_env = {"HTC_CONFIG": str(path), "HTC_HOME": str(tmp_path / "home")}
    full_env.update(env or {})
    return load_config(subsystem, env=full_env, local_name=local_name)


# (construct, config text, {name: expected expanded value or None for undefined})
CASES = [
    ("assignment", "A = hello\n", {"A": "hello"}),
    ("names are case-insensitive", "b_lower = x\n", {"B_LOWER": "x", "b_LoWeR": "x"}),
    ("value is trimmed", "  P   =   spaced   \n", {"P": "spaced"}),
    ("last definition wins", "A = 1\nA = 2\n", {"A": "2"}),
    ("a # inside a value is literal", "O = val # not a comment\n", {"O": "val # not a comment"}),
    ("comment lines", "# A = 1\n   # B = 2\nC = 3\n", {"A": None, "B": None, "C": "3"}),
    ("empty value is undefined", "H =\n", {"H": None}),
    ("colon assignment (obsolete)", "G : colon value\n", {"G": "colon value"}),
    ("ini section headers are ignored", "[section]\nQ = 1\n", {"Q": "1"}),
    ("a word before = is ignored", "A B = c\n", {"A": "c", "B": None}),
    ("continuation keeps the space before the backslash", "A = first \\\n   second\n", {"A": "first second"}),
    ("continuation without space", "B = first\\\n   second\n", {"B": "firstsecond"}),
    ("continuation into a blank line keeps the trailing space", "D = x \\\n\nE = after\n",
     {"D": "x ", "E": "after"}),
    ("a comment line never continues", "# c \\\nF = notcont\n", {"F": "notcont"}),
    ("a commented line inside a continuation keeps its last char", "C = one \\\n# comment here\nX = 1\n",
     {"C": "one e", "X": "1"}),
    ("a commented continuation line that ends in backslash continues", "C = one \\\n# here \\\n  two\n",
     {"C": "one two"}),
    ("multi-line value", "ML @=end\n   line one\n  line two\n@end\n", {"ML": "line one\nline two"}),
    ("multi-line value drops comments and blank lines", "HD @=END\n  a\n# c\n\n  b\n@END\n",
     {"HD": "a\nb"}),
    ("self reference appends", "LIST = one, two\nLIST = $(LIST), three\n", {"LIST": "one, two, three"}),
    ("self reference to an undefined name is empty", "HD = x $(HD)\n", {"HD": "x "}),
    ("self reference uses the param default", "DAEMON_LIST = $(DAEMON_LIST) SCHEDD\n",
     {"DAEMON_LIST": "MASTER SCHEDD"}),
    ("+= appends with a space", "A = a\nA += b\n", {"A": "a b"}),
    ("+= without space after", "A = a\nA +=b\n", {"A": "a b"}),
    ("+= to an undefined name", "APP += b\n", {"APP": "b"}),
    ("+= to an empty name", "A =\nA += b\n", {"A": "b"}),
    ("+= to a param default", "DAEMON_LIST += SCHEDD\n", {"DAEMON_LIST": "MASTER SCHEDD"}),
    ("+= with a self reference", "A = a\nA += $(A)\n", {"A": "a a"}),
    ("lazy expansion: later definitions count", "X = $(Y)\nY = late\n", {"X": "late"}),
    ("undefined reference expands to nothing", "U = [$(UNDEF_X)]\nD = $(UNDEF)\n", {"U": "[]", "D": None}),
    ("default after colon", "D = $(UNDEFINED_KNOB:fallback value)\n", {"D": "fallback value"}),
    ("default for an empty value", "H =\nI = $(H:dflt)\n", {"I": "dflt"}),
    ("default may hold commas and spaces", "J = $(NOT_DEF:a,b c)\n", {"J": "a,b c"}),
    ("default may hold macros", "J = x\nK = $(NOT_DEF:a$(J)b)\n", {"K": "axb"}),
    ("nested defaults", "A = $(A:x) $(B:$(C:y))\n", {"A": "x y"}),
    ("param-table defaults answer references", "L = $(UPDATE_INTERVAL)\n", {"L": "300"}),
    ("a malformed reference is left alone", "M = $(A B)\nN = $(ANY\n", {"M": "$(A B)", "N": "$(ANY"}),
    ("$$ is kept for submit time", "S = $$(X) $$([1+2])\n", {"S": "$$(X) $$([1+2])"}),
    ("$(DOLLAR) is a dollar, expanded last", "R = pre$(DOLLAR)(X)post\n", {"R": "pre$(X)post"}),
    ("macros in names", "PFX = name\n$(PFX)_SUFFIX = expanded name\n", {"NAME_SUFFIX": "expanded name"}),
    ("$ENV with default", "EN = $ENV(NOPE_NOT_SET:dflt)\n", {"EN": "dflt"}),
    ("$ENV of an unset variable is UNDEFINED", "EN2 = [$ENV(NOPE_NOT_SET)]\n", {"EN2": "[UNDEFINED]"}),
    ("$(SUBSYSTEM) of a tool", "SUB = $(SUBSYSTEM)\n", {"SUB": "TOOL"}),
]


@pytest.mark.parametrize("construct,text,expected", CASES, ids=[c[0] for c in CASES])
def test_construct(tmp_path, construct, text, expected):
    cfg = load(tmp_path, text)
    for name, value in expected.items():
        assert cfg.get(name) == value, f"{construct}: {name}"


def test_env_function_reads_the_given_environment(tmp_path):
    cfg = load(tmp_path, "E = $ENV(MY_VAR)\nF = $ENV(MY_EMPTY:d)\n", env={"MY_VAR": "v", "MY_EMPTY": ""})
    assert cfg.get("E") == "v"
    assert cfg.get("F") == "d"


def test_warnings_for_colon_and_ignored_word(tmp_path):
    cfg = load(tmp_path, "G : v\nA B = c\nRunBenchmarks : 0\n")
    assert any(":1: warning: obsolete use of ':'" in w for w in cfg.warnings)
    assert any(":2: warning: the word 'B'" in w for w in cfg.warnings)
    assert not any("RunBenchmarks" in w for w in cfg.warnings)


def test_raw_keeps_references(tmp_path):
    cfg = load(tmp_path, "A = $(B)/x\nB = b\n")
    assert cfg.raw("A") == "$(B)/x"
    assert cfg.get("A") == "b/x"


def test_value_matching_a_default_case_insensitively_takes_the_default_spelling(tmp_path):
    cfg = load(tmp_path, "WANT_SUSPEND = false\n")
    assert cfg.get("WANT_SUSPEND") == "False"
    assert cfg.where("WANT_SUSPEND")[1] == 1


def test_logical_lines_numbering():
    lines = list(logical_lines("A = 1 \\\n  2\n\n# c\nB = 3"))
    assert lines[0] == Line("A = 1 2", 1, 2)
    assert lines[-1] == Line("B = 3", 5, 5)


@pytest.mark.parametrize("text,kind,name,value", [
    ("A = b", "assign", "A", "b"),
    ("A=b", "assign", "A", "b"),
    ("A += b", "append", "A", "b"),
    ("X @=end", "heredoc", "X", "end"),
    ("use ROLE : Personal", "use", "ROLE", "Personal"),
    ("use ROLE: Personal", "use", "ROLE", "Personal"),
    ("include : f", "include", "", "f"),
    ("include ifexist : f", "include", "ifexist", "f"),
    ("@include : f", "include", "", "f"),
    ("error : boom", "error", "", "boom"),
    ("warning : hm", "warning", "", "hm"),
    ("[section]", "section", "[section]", ""),
])
def test_parse_statement(text, kind, name, value):
    st = parse_statement(text)
    assert (st.kind, st.name, st.value) == (kind, name, value)


def test_split_use_with_arguments():
    assert split_use("Submit, Execute") == [("Submit", None), ("Execute", None)]
    assert split_use("Personal Execute") == [("Personal", None), ("Execute", None)]
    assert split_use("WANT_HOLD_IF( X, 3, a (b) [c] )") == [("WANT_HOLD_IF", " X, 3, a (b) [c] ")]

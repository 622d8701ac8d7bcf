"""if / elif / else / endif: every kind of condition, nesting, and the wheel's verdicts."""

from __future__ import annotations

import pytest

from htc.config import ConfigError, load_config
from htc.config.conditions import ConditionError, IfStack, characterize


def load(tmp_path, text):
    path = tmp_path / "htc_config"
    path.write_text(text)
    return load_config(env={"HTC_CONFIG": str(path), "HTC_HOME": str(tmp_path)})


# (condition text, value of A afterwards: "yes" if the condition held, else "no")
CONDITIONS = [
    ("true", "yes"), ("TRUE", "yes"), ("false", "no"), ("1", "yes"), ("0", "no"), ("1.5", "yes"),
    ("-1", "yes"), ("0.0", "no"), ("yes", "yes"), ("t", "yes"), ("no", "no"), ("f", "no"),
    ("! 0", "yes"), ("!true", "no"),
    ("defined X", "yes"), ("defined NOPE", "no"), ("!defined NOPE", "yes"), ("defined EMPTY", "no"),
    ("defined UPDATE_INTERVAL", "yes"), ("defined 0", "yes"), ("defined true", "yes"), ("defined", "no"),
    ("defined use ROLE:Personal", "yes"), ("defined use ROLE", "yes"), ("defined use ROLE:Nope", "no"),
    ("defined use NOPE", "no"),
    ("version >= 9.0.0", "yes"), ("version > 99.0", "no"), ("version >= 25.14", "yes"),
    ("version == 25.14.1", "yes"), ("version < 8.0.0", "no"), ("version != 8.0.0", "yes"),
    ("$(X)", "yes"), ("$(TRUTHY)", "yes"), ("$(UNDEF_Z)", "no"), ("! $(UNDEF_Z)", "yes"),
]


@pytest.mark.parametrize("condition,expected", CONDITIONS, ids=[c[0] for c in CONDITIONS])
def test_condition(tmp_path, condition, expected):
    cfg = load(tmp_path, f"X = 1\nEMPTY =\nTRUTHY = true\nif {condition}\n  A = yes\nelse\n  A = no\nendif\n")
    assert cfg.get("A") == expected


@pytest.mark.parametrize("text,expected", [
    ("if false\nA=1\nelif 2\nA=2\nelse\nA=3\nendif\n", "2"),
    ("if true\nA=1\nelif true\nA=2\nelse\nA=3\nendif\n", "1"),
    ("if 0\nA=1\nelif 0\nA=2\nelse\nA=3\nendif\n", "3"),
    ("if true\n  if false\n  A=inner\n  else\n  A=innerelse\n  endif\nendif\n", "innerelse"),
    ("if false\n  if true\n  A=x\n  endif\nelse\nA=outerelse\nendif\n", "outerelse"),
    ("if false\n  if $(BROKEN) == 1\n  endif\nA=skipped-bad-condition\nendif\nA=after\n", "after"),
    ("IF TRUE\nA=upper\nENDIF\n", "upper"),
    ("if true\n:A = colon-prefixed\nendif\n", "colon-prefixed"),
    (":if true\nA = old-style\nendif\n", "old-style"),
])
def test_nesting_and_branches(tmp_path, text, expected):
    assert load(tmp_path, text).get("A") == expected


def test_conditions_see_only_earlier_definitions(tmp_path):
    cfg = load(tmp_path, "if defined LATER\nA = saw\nelse\nA = not-yet\nendif\nLATER = 1\n")
    assert cfg.get("A") == "not-yet"


@pytest.mark.parametrize("text,line,message", [
    ("X=1\nif $(X) == 1\nendif\n", 2, "$(X) == 1 is not a valid if condition because complex conditionals are not supported"),
    ("if 2 > 1\nendif\n", 1, "2 > 1 is not a valid if condition because complex conditionals"),
    ("X=abc\nif $(X)\nendif\n", 2, "$(X) is not a valid if condition because expression is not a conditional"),
    ("if version >= 26\nendif\n", 1, "because the version literal is invalid"),
    ("if version > abc\nendif\n", 1, "complex conditionals are not supported"),
    ("if defined a b\nendif\n", 1, "because defined argument must be param name, boolean, or number"),
    ("if defined use ROLE : x\nendif\n", 1, "internal spaces will never match"),
    ("if false\nelif foo bar\nendif\n", 2, "foo bar is not a valid elif condition"),
    ("else\n", 1, "else without matching if"),
    ("elif true\n", 1, "elif without matching if"),
    ("endif\n", 1, "endif without matching if"),
    ("if true\nelse\nelse\nendif\n", 3, "else is not allowed after else"),
    ("if true\nelse\nelif true\nendif\n", 3, "elif is not allowed after else"),
    ("if true\nA=1\n", 2, "endif(s) not found before end-of-file"),
])
def test_condition_errors(tmp_path, text, line, message):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    assert str(info.value).startswith(f"{tmp_path / 'htc_config'}:{line}: ")
    assert message in str(info.value)


@pytest.mark.parametrize("text,kind", [
    ("", "empty"), ("12", "number"), ("-1.5e3", "number"), ("true", "bool"), ("False", "bool"),
    ("foo", "identifier"), ("a.b/c_1", "identifier"), ("version", "version"),
    ("version >= 8.1.2", "version"), ("defined", "ifdef"), ("defined FOO", "ifdef"),
    ("defined FOO.bar", "ifdef"), ("$(X)", "complex"), ("a == b", "complex"),
    ("foo bar", "complex"),
])
def test_characterize(text, kind):
    assert characterize(text, True) == kind


def test_if_stack_depth_limit():
    stack = IfStack()
    for _ in range(IfStack.MAX_DEPTH):
        stack.handle("if true", lambda e: True)
    with pytest.raises(ConditionError, match="nesting too deep"):
        stack.handle("if true", lambda e: True)

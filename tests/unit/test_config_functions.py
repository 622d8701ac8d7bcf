"""Macro functions ($INT, $EVAL, $F...) and the small expression evaluator behind them."""

from __future__ import annotations

import random

import pytest

from htc.config import ConfigError, load_config
from htc.config import evaluate as ev
from htc.config.macros import Context, Expander, MacroSet, Origin, filename_parts, find_macro


def load(tmp_path, text, env=None):
    path = tmp_path / "htc_config"
    path.write_text(text)
    return load_config(env={"HTC_CONFIG": str(path), "HTC_HOME": str(tmp_path), **(env or {})})


# (function, config text, {name: expected}); every expectation was read from htcondor2.param
CASES = [
    ("$INT of an expression", "N = 3+4\nI = $INT(N)\n", {"I": "7"}),
    ("$INT truncates", "A = $INT(3.7)\n", {"A": "3"}),
    ("$INT of a bool", "B = $INT(true)\n", {"B": "1"}),
    ("$INT with a printf format", "E = $INT(5,%03d)\n", {"E": "005"}),
    ("$INT format without a conversion is literal", "X = 5\nI3 = $INT(X,0,3)\n", {"I3": "0,3"}),
    ("$INT of an expression product", "X = $INT(2.5*2)\n", {"X": "5"}),
    ("$REAL uses %.16G", "N = 3.5*2\nR = $REAL(N)\n", {"R": "7"}),
    ("$REAL of a large number", "Q = $REAL(1e300)\n", {"Q": "1E+300"}),
    ("$REAL of 0.1", "R = $REAL(0.1)\n", {"R": "0.1"}),
    ("$REAL with a format", "D = $REAL(2,%.2f)\n", {"D": "2.00"}),
    ("$REAL format without a dot gets .0", "D = $REAL(2,%.0f)\n", {"D": "2.0"}),
    ("$STRING of a quoted string", 'O = $STRING("quoted")\n', {"O": "quoted"}),
    ("$STRING of plain text", "P = $STRING(plain text)\n", {"P": "plain text"}),
    ("$STRING of a macro", "LIST = abcdef\nSTR = $STRING(LIST)\n", {"STR": "abcdef"}),
    ("$EVAL arithmetic", "EV = $EVAL(1+2)\n", {"EV": "3"}),
    ("$EVAL of a macro name", "X = 5\nEV2 = $EVAL(X)\n", {"EV2": "5"}),
    ("$EVAL integer division", "EV5 = $EVAL(10/4)\n", {"EV5": "2"}),
    ("$EVAL real unparse", "EV6 = $EVAL(10.0/4)\n", {"EV6": "2.500000000000000E+00"}),
    ("$EVAL comparison", "EV7 = $EVAL(1 < 2)\n", {"EV7": "true"}),
    ("$EVAL undefined", "EVU = $EVAL(undefined)\n", {"EVU": "undefined"}),
    ("$EVAL string + string is error", 'EV3 = $EVAL("a" + "b")\n', {"EV3": "error"}),
    ("$EVAL body stops at the first )", 'EV4 = $EVAL(strcat("a","b"))\n', {"EV4": ")"}),
    ("$EVAL list", "F = $EVAL({1,2})\n", {"F": "{ 1,2 }"}),
    ("$EVAL division by zero", "G = $EVAL(1/0)\n", {"G": "error"}),
    ("$EVAL bools are numbers", "L = $EVAL(true + 1)\n", {"L": "2"}),
    ("$EVAL truncating division", "N = $EVAL(-7 / 2)\n", {"N": "-3"}),
    ("$EVAL strings compare case-insensitively", 'K = $EVAL("abc" == "ABC")\n', {"K": "true"}),
    ("$EVAL 64-bit integers", "Y = $EVAL(2147483648 * 4)\n", {"Y": "8589934592"}),
    ("$CHOICE from items", "C = $CHOICE(1, zero, one, two)\n", {"C": "one"}),
    ("$CHOICE index from a macro", "X = 5\nC = $CHOICE(X, a,b,c,d,e,f,g)\n", {"C": "f"}),
    ("$CHOICE from a named list", "L = a, b, c\nC = $CHOICE(2, L)\n", {"C": "c"}),
    ("$SUBSTR start and length", "LIST = one, two\nS = $SUBSTR(LIST, 0, 3)\n", {"S": "one"}),
    ("$SUBSTR negative start", "LIST = abcdef\nS2 = $SUBSTR(LIST, -3)\n", {"S2": "def"}),
    ("$SUBSTR negative length", "LIST = abcdef\nS3 = $SUBSTR(LIST, 1, -1)\n", {"S3": "bcde"}),
    ("$RANDOM_INTEGER of one value", "RI = $RANDOM_INTEGER(4,4)\n", {"RI": "4"}),
    ("$RANDOM_CHOICE of one value", "RC = $RANDOM_CHOICE(only)\n", {"RC": "only"}),
    ("$Fn", "FN = $Fn(/a/b/c.txt)\n", {"FN": "c"}),
    ("$Fnx", "F = $Fnx(/a/b/c.txt)\n", {"F": "c.txt"}),
    ("$Fp", "F = $Fp(/a/b/c.txt)\n", {"F": "/a/b/"}),
    ("$Fq", "F = $Fq(/a/b/c.txt)\n", {"F": '"/a/b/c.txt"'}),
    ("$Fd", "F = $Fd(/a/b/c.txt)\n", {"F": "b/"}),
    ("$Fdd", "F = $Fdd(/a/b/c.txt)\n", {"F": "a/b/"}),
    ("$Fx", "F = $Fx(/a/b/c.txt)\n", {"F": ".txt"}),
    ("$Fpn", "F = $Fpn(/a/b/c.txt)\n", {"F": "/a/b/c"}),
    ("$Fw", "F = $Fw(/a/b/c.txt)\n", {"F": "\\a\\b\\c.txt"}),
    ("$F of a macro", "LIST = abcdef\nF = $F(LIST)\n", {"F": "abcdef"}),
    ("$Fn of a macro", "P = /x/y/z.tar.gz\nN = $Fn(P)\nX = $Fx(P)\n", {"N": "z.tar", "X": ".gz"}),
    ("$BASENAME and $DIRNAME", "B = $BASENAME(/a/b/c.txt)\nD = $DIRNAME(/a/b/c.txt)\n",
     {"B": "c.txt", "D": "/a/b/"}),
]


@pytest.mark.parametrize("function,text,expected", CASES, ids=[c[0] for c in CASES])
def test_function(tmp_path, function, text, expected):
    cfg = load(tmp_path, text)
    for name, value in expected.items():
        assert cfg.get(name) == value, function


def test_random_integer_stays_in_range_and_steps(tmp_path):
    cfg = load(tmp_path, "R = $RANDOM_INTEGER(10, 20, 5)\nC = $RANDOM_CHOICE(a, b, c)\n")
    seen = {cfg.get("R") for _ in range(60)}
    assert seen <= {"10", "15", "20"} and len(seen) > 1
    assert {cfg.get("C") for _ in range(60)} <= {"a", "b", "c"}


@pytest.mark.parametrize("text,message", [
    ("A = $INT(B)\nB = notint\n", "$INT() error: notint does not evaluate to an integer"),
    ("A = $REAL(x y)\n", "$REAL() error: x y does not evaluate to a real"),
    ("A = $CHOICE(7,a,b)\n", "$CHOICE() error: index 7 is out of range"),
    ("A = $CHOICE(1, NOLIST)\n", "$CHOICE() error: no list named NOLIST"),
    ("A = $SUBSTR(X)\n", "$SUBSTR() error"),
    ("A = $RANDOM_INTEGER(5,1)\n", "$RANDOM_INTEGER() error: min > max"),
    ("A = $RANDOM_INTEGER(a,1)\n", "$RANDOM_INTEGER() error: invalid min"),
    ("A = $INT(1,%s)\n", "is not a valid format specifier"),
    ("A = $(B)\nB = $(A)\n", "A, B refer to each other in a cycle"),
])
def test_function_errors_name_the_definition(tmp_path, text, message):
    cfg = load(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        cfg.get("A")
    assert str(info.value).startswith(f"{tmp_path / 'htc_config'}:1: A: ")
    assert message in str(info.value)


def test_find_macro_positions():
    m = find_macro("x $(A:b) y")
    assert (m.func, m.name("x $(A:b) y"), m.default("x $(A:b) y")) == ("", "A", "b")
    assert find_macro("$$(A) $(DOLLAR)", accept=lambda f, b: b != "DOLLAR") is None
    assert find_macro("$ENV(HOME)").func == "ENV"
    assert find_macro("$Fpn(x)").func == "Fpn"
    assert find_macro("$FOO(x)") is None


def test_expander_lookup_order_localname_subsys_plain_default():
    macros = MacroSet()
    here = Origin("file", "f", 1)
    macros.set("X", "plain", here)
    macros.set("SCHEDD.X", "subsys", here)
    macros.set("SCHEDD2.X", "local", here)
    ctx = Context(subsys="SCHEDD", localname="SCHEDD2", defaults=lambda n: "dflt" if n == "D" else None,
                  rng=random.Random(1))
    x = Expander(macros, ctx)
    assert x.lookup("X") == "local"
    x.ctx.localname = None
    assert x.lookup("X") == "subsys"
    x.ctx.subsys = None
    assert x.lookup("X") == "plain"
    assert x.lookup("D") == "dflt"
    assert x.lookup("NOPE") is None


@pytest.mark.parametrize("text,flags,expected", [
    ("/a/b/c.txt", "b", "/a/b/c.txt"),
    ("/a/b/c.txt", "pb", "/a/b"),
    ("/a/b/c.txt", "xb", "txt"),
    ("c.txt", "p", ""),
    ("c.txt", "pn", "c"),
    ('"/a/b/c.txt"', "n", "c"),
    ("/a/b/c.txt", "nqa", "'c'"),
])
def test_filename_parts(text, flags, expected):
    assert filename_parts(text, flags) == expected


@pytest.mark.parametrize("text,value", [
    ("60 * 2", 120), ("7/2", 3), ("-7/2", -3), ("7 % 3", 1), ("2 + 3.5", 5.5), ("true + 1", 2),
    ("1 == 1", True), ("3 > 4", False), ('"abc" == "ABC"', True), ('"abc" =?= "ABC"', False),
    ("3 =?= 3.0", False), ("undefined || true", True), ("undefined && true", ev.UNDEFINED),
    ("false && undefined", False), ("ifThenElse(1 > 0, 4, 5)", 4), ("isUndefined(Foo)", True),
    ("MY.Rank", ev.UNDEFINED), ("1 ? 2 : 3", 2), ("undefined ?: 7", 7), ("{1, 2}", [1, 2]),
    ('strcat("a", 1)', "a1"), ("int(3.9)", 3), ("real(2)", 2.0), ("min(3, 1, 2)", 1),
])
def test_evaluate(text, value):
    result = ev.evaluate(text)
    assert result == value and type(result) is type(value) if not isinstance(value, ev._Special) \
        else result is value


@pytest.mark.parametrize("text,as_int,as_bool", [
    ("60*2", 120, (True, True)), ("3.7", 3, (True, True)), ("true", 1, (True, True)),
    ("abc", None, (None, False)), ("1e3", 1000, (True, True)), ('"12"', None, (None, False)),
    ("0x10", None, (None, False)), ("truex", None, (True, False)), ("False", 0, (False, True)),
    ("  -5 ", -5, (True, True)),
])
def test_typed_conversions(text, as_int, as_bool):
    assert ev.to_int(text) == as_int
    assert ev.to_bool(text) == as_bool


def test_unparse_and_syntax_errors():
    assert ev.unparse(2.5) == "2.500000000000000E+00"
    assert ev.unparse([1, "a", True]) == '{ 1,"a",true }'
    assert ev.eval_to_text('"a\\"b"') == 'a"b'
    with pytest.raises(ev.EvalSyntaxError):
        ev.evaluate("1 +")
    with pytest.raises(ev.EvalSyntaxError):
        ev.evaluate("nosuchfunction(1)")

"""The submit language piece by piece: lines, macros, functions, queue arguments, syntaxes."""

from __future__ import annotations

import random

import pytest

from htc.submit import Submit, SubmitError
from htc.submit.argsenv import Env, environment_command, join_v2_raw, parse_arguments, split_v2_raw
from htc.submit.functions import path_parts
from htc.submit.macros import Expander, MacroTable, default_macros, expand_self, find_macro
from htc.submit.parser import logical_lines, parse_description
from htc.submit.queue import parse_queue_args, selected_rows, split_item
from htc.submit.resources import parse_bytes


def expander(**macros) -> Expander:
    t = MacroTable()
    for k, v in macros.items():
        t.set(k, v)
    defaults = default_macros(arch="X86_64", opsys="LINUX", submit_time=0)
    return Expander(t, defaults, {}, {"HOME": "/home/alice"}, "/work", random.Random(1))


# -- lines -------------------------------------------------------------------------------

def test_logical_lines_join_continuations_and_trim():
    lines = list(logical_lines(["  a = x \\", "   b  ", "# c \\", "d = 1", "e = 2 \\",
                                "# comment x\\", "  f", "g = 3 \\", "# comment y", " h = 1"]))
    assert lines == [(1, "a = x b"), (3, "# c \\"), (4, "d = 1"), (5, "e = 2 f"),
                     (8, "g = 3 y"), (10, "h = 1")]


# -- macros ------------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("$(a)", "zyx"),
    ("[$(undefined)]", "[]"),
    ("$(x:def) $(y:) $(z:a b)", "def set a b"),
    ("$(x y) $(x-y) $(z:a-b)", "$(x y) $(x-y) $(z:a-b)"),
    ("$(nested:$(deep:inner))", "inner"),
    ("cost $(DOLLAR)5 $(dollar)(a)", "cost $5 $(a)"),
    ("$$(Memory) $$(Name:none) $$([Cpus * 2])", "$$(Memory) $$(Name:none) $$([Cpus * 2])"),
    ("$(ARCH)/$(OPSYS) $(IsLinux)", "X86_64/LINUX 1"),
    ("$(Cluster).$(Process) $(JobId)", "1.0 1.0"),
    ("$ENV(HOME) $ENV(NOPE) $ENV(NOPE:dflt)", "/home/alice UNDEFINED dflt"),
    ("$INT(n) $INT(n,%03d) $REAL(n) $REAL(n,%.2f) $REAL(7,%.0f)", "12 012 12 12.00 7.0"),
    ("$CHOICE(1, a, b, c) $CHOICE(2, lst)", "b z"),
    ("$SUBSTR(s,2) $SUBSTR(s,1,3) $SUBSTR(s,-2) $SUBSTR(s,1,-2) $SUBSTR(nope,1)", "cdef bcd ef bcd "),
    ("$STRING(q) $EVAL(3*4) $EVAL(undefinedattr)", "hi 12 undefined"),
    ("$BASENAME(p) $DIRNAME(p)", "c.tar.gz /a/b/"),
])
def test_expand(text, expected):
    ex = expander(a="$(b)x", b="$(c)y", c="z", y="set", n="3*4", lst="x, y, z", s="abcdef",
                  q='"hi"', p="/a/b/c.tar.gz")
    assert ex.expand(text) == expected


def test_expand_records_per_proc_names_and_randomness():
    ex = expander(a="$(Process)", b="plain")
    ex.expand("$(b)")
    assert not ex.touched and not ex.used_random
    ex.expand("$(a) $(JobId)")
    assert ex.touched == {"process", "jobid", "procid"}
    ex.expand("$RANDOM_CHOICE(x, y)")
    assert ex.used_random


def test_random_functions_are_seeded_and_in_range():
    ex1, ex2 = expander(), expander()
    picks = [ex1.expand("$RANDOM_INTEGER(0, 100, 10)") for _ in range(20)]
    assert picks == [ex2.expand("$RANDOM_INTEGER(0, 100, 10)") for _ in range(20)]
    assert {int(p) for p in picks} <= set(range(0, 101, 10)) and len(set(picks)) > 1
    assert ex1.expand("$RANDOM_CHOICE(only)") == "only"


@pytest.mark.parametrize("text,message", [
    ("$(a)", "does not terminate"),
    ("$CHOICE(5, a, b)", "out of range"),
    ("$INT(word)", "does not evaluate to an integer"),
    ("$INT(3,%s)", "not a valid format"),
    ("$RANDOM_INTEGER(5, 1)", "min > max"),
])
def test_expand_errors(text, message):
    with pytest.raises(SubmitError, match=message):
        expander(a="$(b)", b="$(a)", word="abc").expand(text)


def test_find_macro_positions():
    s = "x $(a) $$(b) $F(c) $FOO(d) $(DOLLAR)"
    first = find_macro(s)
    assert first[0] == 2 and s[first[1]:first[2]] == "a" and first[4] == "normal"
    second = find_macro(s, first[2])
    assert second[4] == "filename" and s[second[1]:second[2]] == "c"
    assert find_macro(s, second[2]) is None
    assert find_macro(s, 0, dollar_only=True)[4] == "normal"


def test_self_reference_is_expanded_at_definition():
    t = MacroTable()
    t.set("args", "a")
    assert expand_self("$(args) b $(other)", "ARGS", t) == "a b $(other)"
    assert expand_self("$(x:v) -q", "x", MacroTable()) == "v -q"
    # '-' may not follow the ':' of a default, so this is no macro (as in HTCondor)
    assert expand_self("$(x:-v) -q", "x", MacroTable()) == "$(x:-v) -q"


@pytest.mark.parametrize("flags,value,expected", [
    ("n", "/a/b/c.tar.gz", "c.tar"), ("nx", "/a/b/c.tar.gz", "c.tar.gz"),
    ("x", "/a/b/c.tar.gz", ".gz"), ("p", "/a/b/c.tar.gz", "/a/b/"), ("d", "/a/b/c.tar.gz", "b/"),
    ("dd", "/a/b/c.tar.gz", "a/b/"), ("q", "/a/b/c.tar.gz", '"/a/b/c.tar.gz"'),
    ("pn", "/a/b/c.tar.gz", "/a/b/c.tar"), ("pb", "/a/b/c", "/a/b"), ("xb", "c.tar.gz", "gz"),
    ("db", "/a/b/c", "b"), ("f", "x/y.z", "/work/x/y.z"), ("p", "plain", ""),
    ("dn", "plain", "plain"), ("qa", "it", "'it'"), ("", '"quoted"', "quoted"),
])
def test_path_functions(flags, value, expected):
    assert path_parts(value, flags, "/work") == expected


# -- the parser ------------------------------------------------------------------------------

def parse(text, tmp_path=None, env=None):
    return parse_description(text, filename="job.sub", cwd=str(tmp_path or "/tmp"),
                             defaults=default_macros(arch="X86_64", opsys="LINUX"),
                             env=env or {})


def test_statements_plus_attrs_and_heredoc():
    d = parse("A = 1\n+Foo = \"x\"\n-Bar =\nMy.Baz = 3\nlong @=end\n one\n two\n@end\n"
              "n = long\n$(n)er = 2\nqueue\n")
    raw = {m.name: m.raw for m in d.macros}
    assert raw == {"A": "1", "MY.Foo": '"x"', "MY.Bar": "", "My.Baz": "3", "long": "one\ntwo",
                   "n": "long", "longer": "2"}
    assert len(d.queues) == 1 and d.queues[0].line == 11


def test_conditionals():
    d = parse("x = 1\nif $(x)\n a = yes\nelse\n a = no\nendif\n"
              "if defined nothing\n b = 1\nelif version >= 8.0.0\n b = 2\nelse\n b = 3\nendif\n"
              "if false\n if true\n  c = 1\n endif\nelse\n c = 2\nendif\n"
              "if ! defined x\n d = 1\nelse\n d = 2\nendif\nqueue\n")
    assert {m.name: m.raw for m in d.macros if m.name != "x"} == {"a": "yes", "b": "2", "c": "2",
                                                                  "d": "2"}


@pytest.mark.parametrize("text,line,message", [
    ("a = 1\nif $(a) > 3\nendif\n", 2, "complex conditionals"),
    ("else\n", 1, "else without matching if"),
    ("if true\nelse\nelse\nendif\n", 3, "else is not allowed after else"),
    ("if true\na = 1\n", 2, "endif"),
    ("this is not a statement\n", 1, "neither"),
    ("arguments : x\n", 1, "':' is not an assignment"),
    ("bad!name = 1\n", 1, "Illegal Identifier"),
    ("x @=end\nabc\n", 1, "@end"),
    ("error : custom stop\n", 1, "custom stop"),
    ("queue x in (\na\n", 1, "closing brace"),
    ("queue banana\n", 1, "Queue count"),
    ("include : nonexistent.sub\n", 1, "can't open"),
])
def test_parse_errors_name_file_and_line(text, line, message):
    with pytest.raises(SubmitError, match=message) as exc:
        parse(text)
    assert exc.value.file == "job.sub" and exc.value.line == line and exc.value.command
    assert f"on Line {line} of submit file job.sub" in str(exc.value)


def test_include_file_command_and_ifexists(tmp_path):
    (tmp_path / "inc.sub").write_text("a = from_file\n")
    d = parse("include : inc.sub\ninclude ifexists : missing.sub\n"
              "include command : echo b = from_command\nqueue\n", tmp_path)
    assert {m.name: m.raw for m in d.macros} == {"a": "from_file", "b": "from_command"}
    (tmp_path / "q.sub").write_text("queue\n")
    with pytest.raises(SubmitError, match="not allowed in include"):
        parse("include : q.sub\n", tmp_path)


def test_each_queue_statement_snapshots_the_macros():
    d = parse("a = 1\nqueue\na = 2\nqueue x in (\n p, q\n r\n)\nb = 3\n")
    assert [q.macros.raw("a") for q in d.queues] == ["1", "2"]
    assert d.queues[1].args.items == ["p", "q", "r"] and d.macros.raw("b") == "3"


# -- queue arguments -------------------------------------------------------------------------

@pytest.mark.parametrize("text,count,vars_,mode,match,slice_,items,source", [
    ("", 1, [], "", "", None, [], ""),
    ("7", 7, [], "", "", None, [], ""),
    ("1+1", 2, [], "", "", None, [], ""),
    ("x in (a, b c)", 1, ["x"], "in", "", None, ["a", "b", "c"], ""),
    ("3 x,y in [1:3] (a, b)", 3, ["x", "y"], "in", "", (1, 3, None), ["a", "b"], ""),
    ("in [::2] (a)", 1, [], "in", "", (None, None, 2), ["a"], ""),
    ("a b from items.txt", 1, ["a", "b"], "from", "", None, [], "items.txt"),
    ("x from (k 1)", 1, ["x"], "from", "", None, ["k 1"], ""),
    ("2 f matching files *.dat *.txt", 2, ["f"], "matching", "files", None, ["*.dat", "*.txt"], ""),
    ("matching dirs run*", 1, [], "matching", "dirs", None, ["run*"], ""),
    ("x1 from seq 1 3 |", 1, ["x1"], "from", "", None, [], "seq 1 3 |"),
    ("x in (", 1, ["x"], "in", "", None, [], "<"),
    ("x from ( first", 1, ["x"], "from", "", None, ["first"], "<"),
])
def test_parse_queue_args(text, count, vars_, mode, match, slice_, items, source):
    qa = parse_queue_args(text)
    assert (qa.count, qa.vars, qa.mode, qa.match, qa.slice, qa.items, qa.source) == (
        count, vars_, mode, match, slice_, items, source)


@pytest.mark.parametrize("text", ["banana", "-1", "x in files (a)", "x in [a:b] (c)"])
def test_parse_queue_args_errors(text):
    with pytest.raises(SubmitError, match="invalid Queue statement"):
        parse_queue_args(text)


@pytest.mark.parametrize("item,n,expected", [
    ("x, y, z w", 3, ["x", "y", "z w"]), ("p q", 3, ["p", "q", ""]), ("1,2,3", 2, ["1", "2,3"]),
    ("4 ,5", 2, ["4", ",5"]), ("  a  b  ", 1, ["a  b  "]), ("x y\x1fz w", 2, ["x y", "z w"]),
    ("", 2, None),
])
def test_split_item(item, n, expected):
    assert split_item(item, n) == expected


def test_slices_select_rows():
    qa = parse_queue_args("x in [-2:] (a, b, c)")
    assert selected_rows(qa, 3) == [1, 2]
    assert selected_rows(parse_queue_args("x in [::2] (a)"), 5) == [0, 2, 4]


# -- arguments, environment, sizes -------------------------------------------------------

@pytest.mark.parametrize("value,attr,raw", [
    ("a b  c", "Args", "a b c"),
    ("a 'b c' \\\"d\\\"", "Args", "a 'b c' \"d\""),
    ('"one \'two three\' four"', "Arguments", "one two' 'three four"),
    ('"a ""b"" \'it\'\'s\'"', "Arguments", "a \"b\" it''''s"),
    ('""', "Arguments", ""),
    ('"x \'\' y"', "Arguments", "x '' y"),
])
def test_arguments(value, attr, raw):
    assert parse_arguments(value, None) == (attr, raw)


@pytest.mark.parametrize("value,message", [
    ('"a \'b"', "Unbalanced quote"), ('a"b', "illegal unescaped double-quote"),
    ('"a" b', "Unexpected characters"), ('"a', "terminating double-quote"),
])
def test_argument_errors(value, message):
    with pytest.raises(SubmitError, match=message):
        parse_arguments(value, None)


def test_v2_words_round_trip():
    words = ["plain", "two words", "it's", "", "tab\there", "a  b"]
    assert split_v2_raw(join_v2_raw(words)) == words


def test_environment_syntaxes_and_getenv():
    env = Env()
    env.merge_v1_raw_or_v2_quoted("B=2;A=x y")
    env.merge_v1_raw_or_v2_quoted('"C=\'two words\' D="')
    env.import_environ({"HOME": "/h", "HTC_X": "1", "HTC_Y": "a;b", "PATH": "/bin"},
                       "HTC_*, !htc_y, home", v1_safe_only=False)
    assert env.v2_raw() == "A=x' 'y B=2 C=two' 'words D= HOME=/h HTC_X=1"
    with pytest.raises(SubmitError, match="Missing '='"):
        Env().merge_v2_raw("novalue")


@pytest.mark.parametrize("env", [
    {"A": "1"}, {"A": "x y", "B": ""}, {"Q": "it's", "D": 'say "hi"', "T": "a\tb"}, {"P": "/a;/b"},
])
def test_environment_command_reads_back_as_written(env):
    """What a program writes with environment_command, condor_submit's reader gives back."""
    read = Env()
    read.merge_v1_raw_or_v2_quoted(environment_command(env))
    assert read.vars == env


@pytest.mark.parametrize("text,base,expected", [
    ("512", 1024 * 1024, 512), ("2GB", 1024 * 1024, 2048), ("1.5g", 1024 * 1024, 1536),
    ("2048 KB", 1024 * 1024, 2), ("1T", 1024 * 1024, 1048576), ("100MB", 1024, 102400),
    ("3 Mb", 1024, 3072), (".5G", 1024 * 1024, 512), ("lots", 1024, None), ("2 G B", 1024, None),
    ("2MiB", 1024, None), ("1000", 1024, 1000),
])
def test_parse_bytes(text, base, expected):
    assert parse_bytes(text, base) == expected


def test_submit_error_names_file_line_and_command(tmp_path):
    with pytest.raises(SubmitError) as exc:
        Submit("executable = /bin/true\n\nrequest_cpus = 2G\nqueue\n", filename="my.sub",
               cwd=tmp_path).cluster(1)
    e = exc.value
    assert (e.file, e.line, e.command) == ("my.sub", 3, "request_cpus")
    assert str(e).startswith("ERROR: on Line 3 of submit file my.sub: request_cpus: Parse error")

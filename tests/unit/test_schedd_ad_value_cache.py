"""The schedd reads a submitted ad's values one by one, parsing only values it has not seen
(htc.daemons.schedd.adtexts), with the same result as parsing the whole ad."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htc.classad import ClassAd
from htc.daemons.schedd import adtexts
from htc.daemons.schedd.adtexts import split_ad_text
from htc.daemons.schedd.requests import texts_of


def _whole(text: str) -> dict[str, str]:
    ad = ClassAd(text)
    return {name: ad.lookup(name).unparse() for name in ad}


ADS = [
    '[ MyType = "Job"; QDate = 1795838870; Cmd = "/bin/true"; RequestMemory = 16 ]',
    '[ a = "semi;colon"; b = "esc\\"aped;"; c = { 1, "2;", 3 }; ]',  # ';' inside a string and a list? (list: ',')
    '[ Req = (TARGET.Memory >= RequestMemory) && (Arch == "X86_64"); Rank = 0.0 ]',
    '[ nested = [ x = 1; y = "a;b" ]; after = nested.x + 1 ]',
    "[ q = 'odd name;' + 1; r = strcat(\"a\", \"b;\") ]",
    '[ Env = "A=1 B=2"; Args = "x y"; f = 1.5e3; g = -7; h = undefined; i = error; j = true ]',
    '[ divided = 10 / 3; mod = 10 % 3 ]',
    '[]',
    '[ trailing = 1; ]',
    '[ Cap = 1; cap2 = isUndefined(Foo) ? 1 : 2; s = "tab\\tnewline\\n" ]',
]


@pytest.mark.parametrize("text", ADS)
def test_split_reads_an_ad_as_the_parser_does(text):
    assert split_ad_text(text) == _whole(text)
    assert list(split_ad_text(text)) == list(_whole(text))  # in the ad's order, names as written


@pytest.mark.parametrize("text", [
    '[ a = 1 /* comment; */; b = 2 ]',       # comments: the whole parser
    '[ a = 1; a = 2 ]',                      # a repeated name
    '[ A = 1; a = 2 ]',
    "[ 'quoted name' = 1 ]",
    '[ true = 1 ]',
    '[ a = (1; b = 2 ]',                     # unbalanced
    '[ a = "unclosed ]',
    '[ a = ; b = 2 ]',
    '[ a = 1 2 ]',                           # a value the parser refuses
    '[ c = { 1, 2; 3 } ]',
    'a = 1',
])
def test_what_the_scanner_is_unsure_of_goes_to_the_whole_parser(text):
    assert split_ad_text(text) is None


def test_malformed_ads_are_still_refused_with_the_parsers_message():
    from htc.errors import UsageError

    with pytest.raises(UsageError, match="cluster_ad is not ClassAd text"):
        texts_of('[ a = 1 2 ]', "cluster_ad")
    with pytest.raises(UsageError, match="cluster_ad is not ClassAd text"):
        texts_of('[ a = "x"; b = (1 ]', "cluster_ad")


def test_a_second_ad_differing_in_one_value_parses_only_that_value(monkeypatch):
    # (node names no other test in this process can have made the schedd parse already)
    first, second = (f"n{uuid.uuid4().hex}" for _ in range(2))
    base = '[ MyType = "Job"; Cmd = "/bin/true"; Requirements = (TARGET.Memory >= 16) && (OpSys == "LINUX"); ' \
           'DAGNodeName = "%s"; Iwd = "/tmp/dag"; JobPrio = 0 ]'
    texts_of(base % first, "cluster_ad")
    parsed: list[str] = []
    real = adtexts.parse_expr

    def counting(text):
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(adtexts, "parse_expr", counting)
    assert texts_of(base % second, "cluster_ad")["DAGNodeName"] == f'"{second}"'
    assert parsed == [f'"{second}"']


_values = st.recursive(
    st.one_of(st.integers(-10**12, 10**12), st.text(max_size=12), st.booleans(), st.none(),
              st.floats(allow_nan=False, allow_infinity=False)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True), inner,
                                            max_size=3)),
    max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), _values, max_size=6))
def test_any_ad_the_client_writes_reads_the_same_split(attrs):
    from htc.classad.lexer import KEYWORDS

    ad = ClassAd()
    for name, value in attrs.items():
        if name.lower() in KEYWORDS or name.lower() in {n.lower() for n in ad}:
            continue
        ad[name] = value
    text = ad.unparse()
    split = split_ad_text(text)
    assert split is None or split == _whole(text)


def test_long_values_are_read_right_but_not_kept():
    long_value = '"' + "x" * 5000 + '"'
    text = f"[ big = {long_value}; small = 1 ]"
    assert split_ad_text(text) == _whole(text)
    assert long_value not in adtexts._VALUES and "1" in adtexts._VALUES


_PIECES = ['a', 'B', '_x1', ' ', '\n', '=', '==', ';', '"s;t"', '"q\\"q"', '(', ')', '[', ']', '{', '}', ',', '1',
           '2.5', '/', '//', "'", 'true', '+', 'x.y', '"\\\\"']
_NESTED = ['1', '"s"', '(1 + 2)', '[ z = 1; w = "a;b" ]', '{ 1, { 2, (3) } }', 'f(g(h(i(j(1)))))', 'x[1]',
           '"a\\"b"', 'a ? b : c', '((((((1))))))', '{ [ a = (1; 2) ] }']


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=14), st.booleans(),
       st.lists(st.sampled_from(_NESTED), min_size=1, max_size=6), st.booleans())
def test_the_one_pattern_path_splits_as_the_scanner_does(pieces, assigned, values, semicolon):
    # Any body, well-formed or not, and ads of nested values (some deeper than the pattern's four
    # levels): the same answer (texts, order, or None) whichever path reads it.
    for body in (("a = " if assigned else "") + "".join(pieces),
                 "; ".join(f"n{k} = {v}" for k, v in enumerate(values)) + (";" if semicolon else "")):
        assert split_ad_text(f"[ {body} ]") == adtexts._scanned_texts(f" {body} ")
        if split_ad_text(f"[ {body} ]") is not None:
            assert list(split_ad_text(f"[ {body} ]")) == list(adtexts._scanned_texts(f" {body} "))


def test_a_submit_files_ad_is_cut_by_the_one_pattern(monkeypatch):
    text = ('[ Cmd = "/bin/true"; RequestDisk = MAX({ 1024,(TransferInputSizeMB + 1) * 1.25 }) * 1024; '
            'Requirements = (TARGET.Arch == "X86_64") && (versionGE(split(TARGET.CondorVersion)[1],"25.12.0") || '
            '(TARGET.Disk >= RequestDisk)); DAGNodeName = "n1"; Notes = "a;b [c" ]')
    expected = _whole(text)
    monkeypatch.setattr(adtexts, "_value_end", None)  # the character-class scanner is not called
    assert split_ad_text(text) == expected

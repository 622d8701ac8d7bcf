"""How the schedd reads the ClassAds of a Submit: ``texts_of``, whose quick path for ads of
plain strings (what an executor sends per call) must give exactly what the parser gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htc.classad import ClassAd
from htc.daemons.schedd import requests as schedd_requests
from htc.daemons.schedd.requests import texts_of
from htc.errors import UsageError


def parsed(text: str) -> dict[str, str]:
    """What the full parser makes of ``text``."""
    ad = ClassAd(text)
    return {name: ad.lookup(name).unparse() for name in ad}


names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
plain = st.text(st.characters(min_codepoint=32, max_codepoint=126, blacklist_characters='"\\'), max_size=30)
awkward = st.text(st.characters(min_codepoint=1, max_codepoint=0x2FF), max_size=10)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(names, st.one_of(plain, plain, awkward)), min_size=1, max_size=8))
def test_the_quick_path_reads_what_the_parser_reads(attrs):
    text = "[ " + "; ".join(f"{name} = {_quoted(value)}" for name, value in attrs) + " ]"
    try:
        expected = parsed(text)
    except Exception:  # noqa: BLE001 - a keyword as a name: the schedd must refuse it too
        with pytest.raises(UsageError):
            texts_of(text, "proc ad 0")
        return
    assert texts_of(text, "proc ad 0") == expected


def test_what_an_executor_sends_takes_the_quick_path(monkeypatch):
    text = ('[ HTCCallId = "9d9b09-90"; HTCFunction = "executor_bench.noop"; Out = "9d9b09-90.out"; '
            'TransferOutputRemaps = "htc_result.pkl=9d9b09-90.result"; TransferInput = "9d9b09-90.call" ]')
    monkeypatch.setattr(schedd_requests, "ClassAd", None)  # the parser is not called
    assert texts_of(text, "proc ad 0") == {
        "HTCCallId": '"9d9b09-90"', "HTCFunction": '"executor_bench.noop"', "Out": '"9d9b09-90.out"',
        "TransferOutputRemaps": '"htc_result.pkl=9d9b09-90.result"', "TransferInput": '"9d9b09-90.call"'}


@pytest.mark.parametrize("text", [
    '[ A = "x"; a = "y" ]',            # the same name twice: the parser decides which wins
    '[ A = "x"; B = "a\\"b" ]',         # an escape
    '[ A = "x"; B = 3 ]',              # not a string
    '[ A = "x"; B = "y" + "z" ]',      # an expression
    '[ A = "caf\u00e9" ]',             # not ASCII
])
def test_anything_else_goes_to_the_parser(text):
    assert texts_of(text, "proc ad 0") == parsed(text)


@pytest.mark.parametrize("text", ['[ true = "x" ]', '[ A = "x"; isnt = "y" ]', '[ A = "x" ', '[ A = ]'])
def test_bad_ads_are_refused_with_where(text):
    with pytest.raises(UsageError, match="proc ad 3 is not ClassAd text"):
        texts_of(text, "proc ad 3")


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

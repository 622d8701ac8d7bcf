"""The startd's job-ad reader (startd/jobads.py): the same job ad as parse_job, for any text,
with each definition's text parsed once."""

from __future__ import annotations

import pytest

from htc.classad import ExprTree
from htc.daemons.startd import jobads
from htc.daemons.startd.ads import parse_job
from htc.daemons.startd.jobads import JobAdReader

JOB = ('[ ClusterId = 12; ProcId = 0; Cmd = "/bin/true"; Owner = "alice"; RequestCpus = 1; RequestMemory = 16; '
       'RequestDisk = MAX({ 1024,(TransferInputSizeMB + 1) * 1.25 }) * 1024; TransferInputSizeMB = 1; '
       'DAGNodeName = "n0"; SubmitEventNotes = "DAG Node: n0"; '
       'Requirements = (TARGET.Arch == "X86_64") && (TARGET.Memory >= RequestMemory) ]')

TEXTS = [
    JOB,
    JOB.replace('"n0"', '"n1"').replace("ClusterId = 12", "ClusterId = 13"),
    '[ A = "x; y"; B = "[not] {a} (bracket"; C = 1 ]',
    r'[ A = "an \"escaped\"; quote"; B = "back\\"; C = 2 ]',
    "[ 'odd name;' = 1; B = 2 ]",
    "[ A = [ x = 1; y = 2 ]; B = { 1, 2; 3 }; C = 3 ]",
    "[ A = 1; ]",
    "[ a = 1; A = 2 ]",                      # defined twice: the first spelling, the last value
    "[ A = 1; /* a comment; */ B = 2 ]",
    "[ A = 1; // a comment\n B = 2 ]",
    "[ ]",
    '[ A = "x" "y"; B = 1 ]',                # adjacent literals are one string
    "[ RequestMemory = MY.Base * 2; Base = 64; RequestCpus = true ]",
    "[ A = 1;; B = 2 ]",
    "[ A = 1; B = ]",
    '[ A = "unterminated; B = 2 ]',
    "[ A = (1; B = 2 ]",
    "[ A = 1 ] [ B = 2 ]",
    "[ A = 1 B = 2 ]",
    "A = 1",
    "[ A = 99999999999999999999; B = 0x10 ]",
]


def outcome(read, text):
    """What reading ``text`` gives: the names, each value's type and text, or the error."""
    try:
        job = read(text)
    except Exception as exc:  # noqa: BLE001 -- the error is the outcome compared
        return type(exc).__name__, str(exc)
    return [(name, type(value).__name__, str(value)) for name, value in job.items()]


@pytest.mark.parametrize("text", TEXTS)
def test_the_reader_reads_every_text_as_parse_job_does(text):
    reader = JobAdReader()
    expected = outcome(parse_job, text)
    assert outcome(reader.read, text) == expected
    # and again from what it remembers, after other ads
    for other in TEXTS:
        outcome(reader.read, other)
    assert outcome(reader.read, text) == expected


def test_request_expressions_are_evaluated_in_the_jobs_scope():
    job = JobAdReader().read(JOB)
    assert job["RequestDisk"] == 1024 * 1024 and job["RequestMemory"] == 16  # MAX({1024, 2.5}) * 1024
    assert isinstance(job["Requirements"], ExprTree)


def test_only_the_definitions_not_seen_before_are_parsed(monkeypatch):
    reader = JobAdReader()
    reader.read(JOB)
    parsed = []
    real = jobads.ClassAd

    def counted(source=None):
        if isinstance(source, str):
            parsed.append(source)
        return real(source)

    monkeypatch.setattr(jobads, "ClassAd", counted)
    job = reader.read(JOB.replace("n0", "n7"))
    assert parsed == ['[ DAGNodeName = "n7" ]', '[ SubmitEventNotes = "DAG Node: n7" ]']
    assert job["DAGNodeName"] == "n7" and job["SubmitEventNotes"] == "DAG Node: n7"


def test_job_ads_share_no_mutable_value():
    reader = JobAdReader()
    text = "[ A = { 1, 2 }; B = [ x = 1 ]; C = 3 ]"
    first, second = reader.read(text), reader.read(text.replace("C = 3", "C = 4"))
    assert first["A"] == second["A"] == [1, 2] and first["A"] is not second["A"]
    assert first["B"] is not second["B"]
    first["A"].append(3)
    assert reader.read(text.replace("C = 3", "C = 5"))["A"] == [1, 2]


def test_each_read_is_a_dict_of_its_own():
    reader = JobAdReader()
    first = reader.read(JOB)
    first["ProcId"] = 99
    assert reader.read(JOB)["ProcId"] == 0


def test_a_long_definition_is_read_but_not_remembered(monkeypatch):
    reader = JobAdReader()
    long_value = "x" * (jobads.MAX_KEPT + 10)
    text = f'[ A = "{long_value}"; B = 1 ]'
    assert reader.read(text)["A"] == long_value
    parsed = []
    real = jobads.ClassAd
    monkeypatch.setattr(jobads, "ClassAd", lambda source=None: parsed.append(source) or real(source))
    assert reader.read(text.replace("B = 1", "B = 2")) == {"A": long_value, "B": 2}
    assert parsed == [f'[ A = "{long_value}" ]', "[ B = 2 ]"]

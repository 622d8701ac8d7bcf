"""htc.submit against HTCondor's own submit code, case by case.

Every case of /work/shared/conformance/submit/cases.json and tests/submit_oracle/captured.json
(job ads the htcondor 25.14.1 wheel built; see tests/submit_oracle/capture.py) is submitted
to htc.submit in a directory holding the same files.  The job ads must have the same
attributes with the same values (compared in canonical ClassAd form; Requirements by
meaning, against a set of machine ads), except CondorVersion, CondorPlatform and
SubmitVersion, which name the build.  Descriptions HTCondor rejects must raise SubmitError.

The few cases where htc follows condor_submit rather than the Python bindings that made
the capture are listed in DEVIATIONS with the reason, and checked for htc's behaviour.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "submit_oracle"))

import compare  # noqa: E402  (test support, next to the oracle data)

from htc.submit import Submit, SubmitError, SubmitSettings  # noqa: E402

SETTINGS = SubmitSettings(arch="X86_64", opsys="LINUX", filesystem_domain="example.net",
                          uid_domain="example.net")

#: case id -> why htc's result differs from the Python bindings' capture
DEVIATIONS = {
    "c_multiline": "the bindings reject 'name @=tag' values; condor_submit accepts them",
    "q_plain_two": "the bindings queue only the first queue statement; condor_submit queues all",
    "q_multi_stmt": "the bindings queue only the first queue statement; condor_submit queues all",
    "q_multi_diff_attr": "the bindings queue only the first queue statement; condor_submit all",
    "q_zero": "the bindings queue 1 job for 'queue 0'; condor_submit queues none",
    "q_matching_none": "the bindings reject a glob matching nothing; condor_submit queues none",
    "u_standard": "HTCondor 25 dropped the standard universe; htc runs it under its runtime",
    "p_max_idle": "the capture's fake schedd cannot take a late-materialization digest",
    "p_max_materialize": "the capture's fake schedd cannot take a late-materialization digest",
    "b_output_empty_item": "the bindings reject an empty line in an inline 'from' list; "
                           "condor_submit makes it an item",
    "b_if_unclosed": "the bindings stop reading at the queue statement; condor_submit reads "
                     "to the end and rejects the unclosed if",
}
#: cases whose values are random draws; checked for range instead of equality
RANDOM_CASES = {"m_random_choice", "m_random_integer", "b_random_int_steps"}

CASES = compare.load_cases()


def run_case(case, tmp_path):
    workdir = os.path.realpath(tmp_path)
    compare.make_files(workdir, case["files"])
    env = dict(case.get("env", {}))  # only what the capture set: getenv must see no more
    procs = case["procs"]
    qdate = int(next(iter(procs.values()))["QDate"]) if procs else 1_000_000
    sub = Submit(case["submit"], cwd=workdir, env=env, settings=SETTINGS)
    return workdir, list(sub.cluster(123, qdate=qdate).job_ads())


def ordered_procs(case):
    procs = case["procs"]
    return [procs[k] for k in sorted(procs, key=lambda k: int(k.split(".")[1]))]


@pytest.mark.parametrize("case", [c for c in CASES if c["id"] not in DEVIATIONS],
                         ids=lambda c: f"{c['source']}:{c['id']}")
def test_case_matches_htcondor(case, tmp_path):
    if not case["result"]["ok"]:
        with pytest.raises(SubmitError) as exc:
            run_case(case, tmp_path)
        assert exc.value.line is not None and exc.value.command, str(exc.value)
        return
    workdir, got = run_case(case, tmp_path)
    expected = ordered_procs(case)
    assert len(got) == len(expected)
    for i, (exp, ours) in enumerate(zip(expected, got)):
        if case["id"] in RANDOM_CASES:
            exp = {k: v for k, v in exp.items() if k not in ("Args", "Arguments")}
            ours = {k: v for k, v in ours.items() if k not in ("Args", "Arguments")}
        diffs = compare.compare_ads(exp, ours, workdir)
        assert not diffs, f"proc {i}:\n" + "\n".join(diffs)


def test_random_values_are_in_range(tmp_path):
    by_id = {c["id"]: c for c in CASES}
    _, got = run_case(by_id["b_random_int_steps"], tmp_path)
    assert int(got[0]["Args"].strip('"')) in range(0, 101, 10)
    _, got = run_case(by_id["m_random_choice"], tmp_path)
    assert [ad["Args"] for ad in got] == ['"a"', '"a"']


def test_the_corpus_is_large_and_mostly_conformant():
    ok = [c for c in CASES if c["id"] not in DEVIATIONS]
    assert len(CASES) >= 200 and len(ok) >= len(CASES) - len(DEVIATIONS)
    assert all(c["id"] in {x["id"] for x in CASES} for c in CASES if c["id"] in DEVIATIONS)


# -- the deviations, checked for what htc does instead ----------------------------------

def _case(cid):
    return next(c for c in CASES if c["id"] == cid)


def test_all_queue_statements_queue_into_one_cluster(tmp_path):
    case = _case("q_multi_stmt")
    workdir, got = run_case(case, tmp_path)
    assert [ad["ProcId"] for ad in got] == ["0", "1", "2", "3"]
    assert [ad["Args"] for ad in got] == ['"A0"', '"A1"', '"B2"', '"B3"']
    first = ordered_procs(case)
    for exp, ours in zip(first, got[:2]):
        assert not compare.compare_ads(exp, ours, workdir)


def test_later_queue_statement_changes_cluster_values_per_proc(tmp_path):
    workdir, got = run_case(_case("q_multi_diff_attr"), tmp_path)
    assert [ad["RequestMemory"] for ad in got] == ["100", "200"]
    assert "Extra" not in got[0] and got[1]["Extra"] == "1"


def test_queue_zero_and_empty_glob_queue_nothing(tmp_path):
    assert run_case(_case("q_zero"), tmp_path)[1] == []
    assert run_case(_case("q_matching_none"), tmp_path / "x")[1] == []


def test_multiline_value_is_accepted(tmp_path):
    _, got = run_case(_case("c_multiline"), tmp_path)
    assert got[0]["Args"] == '"one two"'


def test_standard_universe_is_checkpointed_universe_one(tmp_path):
    _, got = run_case(_case("u_standard"), tmp_path)
    assert got[0]["JobUniverse"] == "1" and got[0]["KillSig"] == '"SIGTSTP"'


def test_late_materialization_limits_are_in_the_cluster_ad(tmp_path):
    _, got = run_case(_case("p_max_idle"), tmp_path)
    assert len(got) == 3 and got[0]["JobMaterializeMaxIdle"] == "10"
    _, got = run_case(_case("p_max_materialize"), tmp_path)
    assert got[2]["JobMaterializeLimit"] == "10"


def test_empty_inline_item_keeps_previous_values(tmp_path):
    _, got = run_case(_case("b_output_empty_item"), tmp_path)
    assert [ad["Out"] for ad in got] == ['"a.out"', '"a.out"', '"c.out"']


def test_unclosed_if_is_an_error(tmp_path):
    with pytest.raises(SubmitError, match="endif"):
        run_case(_case("b_if_unclosed"), tmp_path)

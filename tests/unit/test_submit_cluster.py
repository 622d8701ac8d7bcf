"""The job queue's fast path: cluster ad + per-proc ads, exact, deterministic and fast."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "submit_oracle"))

import compare  # noqa: E402

from htc.submit import Submit, SubmitError, SubmitSettings  # noqa: E402

SETTINGS = SubmitSettings(arch="X86_64", opsys="LINUX", filesystem_domain="example.net")

MULTI_PROC = {
    "process": "executable = /bin/echo\narguments = 60 $(Process)\noutput = o.$(Cluster).$(Process)\n"
               "error = e.$(Process)\nlog = job.log\nrequest_memory = 1GB\nqueue 50\n",
    "items": "executable = /bin/echo\narguments = $(x) $(y) $(Step)\noutput = $(x).out\n"
             "+Tag = \"$(x)\"\n+N = $(y) + 1\nqueue 2 x,y from (\n a.dat 1\n b.dat 22\n c 333\n)\n",
    "units": "executable = /bin/true\nrequest_memory = $(Process)G\nrequest_cpus = $(Process)\n"
             "queue 6\n",
    "random": "executable = /bin/echo\narguments = $RANDOM_CHOICE(a,b,c,d) $RANDOM_INTEGER(1,9)\n"
              "queue 12\n",
    "odd_items": "executable = /bin/echo\narguments = \"'$(x)'\"\nenvironment = \"V=$(x)\"\n"
                 "queue x in (true, my.x, 007, a;b, x-y)\n",
    "empty_items": "executable = /bin/echo\noutput = $(o)\nqueue o,x from (\n a.out 1\n\n c.out 3\n)\n",
    "multi": "executable = /bin/echo\narguments = A$(Process)\nrequest_memory = 100\nqueue 3\n"
             "arguments = B$(Process)\nrequest_memory = 200\n+Extra = 1\nqueue 3 x in (p)\n",
    "per_proc_files": "executable = /bin/echo\ntransfer_input_files = $(Process).in\n"
                      "initialdir = d$(Process)\nqueue 3\n",
    "hold": "executable = /bin/true\nhold = $(h)\nqueue h in (true, false, true)\n",
    "universe_parallel": "universe = parallel\nexecutable = /bin/echo\nmachine_count = 2\n"
                         "arguments = $(Node) $(Process)\nqueue 4\n",
}


def make_dirs(tmp_path):
    for i in range(3):
        (tmp_path / f"d{i}").mkdir()
        (tmp_path / f"d{i}" / f"{i}.in").write_text("x" * (1000 * (i + 1)))


@pytest.mark.parametrize("name", sorted(MULTI_PROC))
def test_fast_path_equals_exact_path(name, tmp_path):
    make_dirs(tmp_path)
    sub = Submit(MULTI_PROC[name], cwd=tmp_path, settings=SETTINGS, env={})
    fast = sub.cluster(9, qdate=1000)
    exact = sub.cluster(9, qdate=1000, fast=False)
    assert fast.cluster_ad == exact.cluster_ad
    assert list(fast.proc_ads()) == list(exact.proc_ads())
    for pad in fast.proc_ads():
        assert not (pad.keys() - {"ProcId"}) & fast.cluster_ad.keys() or name == "multi"


def test_fast_path_equals_exact_path_on_the_oracle_corpus(tmp_path):
    checked = 0
    for case in compare.load_cases():
        if not case["result"]["ok"] or len(case["procs"]) < 2:
            continue
        wd = tmp_path / case["id"]
        wd.mkdir()
        compare.make_files(str(wd), case["files"])
        sub = Submit(case["submit"], cwd=wd, settings=SETTINGS, env=dict(case.get("env", {})))
        assert list(sub.cluster(3, qdate=5).job_ads()) == \
            list(sub.cluster(3, qdate=5, fast=False).job_ads()), case["id"]
        checked += 1
    assert checked >= 25


def test_per_proc_attributes_only_in_proc_ads(tmp_path):
    sub = Submit(MULTI_PROC["process"], cwd=tmp_path, settings=SETTINGS, env={})
    c = sub.cluster(4, qdate=1)
    assert c.num_procs == 50
    assert {"Args", "Out", "Err", "ProcId"}.isdisjoint(c.cluster_ad)
    assert c.cluster_ad["UserLog"] == f'"{tmp_path}/job.log"' and c.cluster_ad["ClusterId"] == "4"
    ads = list(c.proc_ads())
    assert ads[7] == {"ProcId": "7", "Args": '"60 7"', "Out": '"o.4.7"', "Err": '"e.7"',
                      "StreamOut": "false", "StreamErr": "false"}
    assert c._m.plans[0].templates is not None  # the realistic description is templated


def test_templates_fall_back_when_values_are_not_plain(tmp_path):
    for name in ("units", "random", "odd_items", "hold"):
        c = Submit(MULTI_PROC[name], cwd=tmp_path, settings=SETTINGS, env={}).cluster(1, qdate=1)
        assert c._m.plans[0].templates is None, name
    ads = list(Submit(MULTI_PROC["units"], cwd=tmp_path, settings=SETTINGS, env={})
               .cluster(1, qdate=1).job_ads())
    assert [a["RequestMemory"] for a in ads] == ["0", "1024", "2048", "3072", "4096", "5120"]
    assert "(TARGET.Cpus >= RequestCpus)" in ads[2]["Requirements"]
    assert "Cpus" not in ads[1]["Requirements"]


def test_rematerialization_is_deterministic(tmp_path):
    for text in (MULTI_PROC["random"], MULTI_PROC["items"], MULTI_PROC["multi"]):
        sub = Submit(text, cwd=tmp_path, settings=SETTINGS, env={})
        c = sub.cluster(77, qdate=123)
        full = list(c.proc_ads())
        again = Submit(c.submit_text, cwd=c.cwd, env=c.env, settings=SETTINGS).cluster(
            77, qdate=c.qdate, owner=c.owner)
        assert again.cluster_ad == c.cluster_ad
        assert list(again.proc_ads(2, 5)) == full[2:5]
        assert list(again.proc_ads(4)) == full[4:]
    args = [a["Args"] for a in Submit(MULTI_PROC["random"], cwd=tmp_path, env={}).cluster(1).proc_ads()]
    assert len(set(args)) > 3


def test_several_queue_statements_share_one_cluster(tmp_path):
    c = Submit(MULTI_PROC["multi"], cwd=tmp_path, settings=SETTINGS, env={}).cluster(5, qdate=1)
    assert c.num_procs == 6
    ads = list(c.job_ads())
    assert [a["ProcId"] for a in ads] == [str(i) for i in range(6)]
    assert [a["Args"] for a in ads] == ['"A0"', '"A1"', '"A2"', '"B3"', '"B4"', '"B5"']
    assert [a["RequestMemory"] for a in ads] == ["100"] * 3 + ["200"] * 3
    assert [a.get("Extra") for a in ads] == [None] * 3 + ["1"] * 3
    assert c.cluster_ad["RequestMemory"] == "100"  # the first statement's value
    later = list(c.proc_ads(3))
    assert all(p["RequestMemory"] == "200" and p["Extra"] == "1" for p in later)


def test_items_and_first_proc(tmp_path):
    c = Submit(MULTI_PROC["items"], cwd=tmp_path, env={}).cluster(2, qdate=1, first_proc=10)
    assert c.items == [{"x": "a.dat", "y": "1"}] * 2 + [{"x": "b.dat", "y": "22"}] * 2 + \
        [{"x": "c", "y": "333"}] * 2
    ads = list(c.job_ads())
    assert [a["ProcId"] for a in ads] == [str(i) for i in range(10, 16)]
    assert ads[3]["Args"] == '"b.dat 22 1"' and ads[3]["N"] == "22 + 1" and ads[3]["Tag"] == '"b.dat"'


def test_per_proc_error_names_the_command(tmp_path):
    sub = Submit("executable = /bin/true\npriority = $(p)\nqueue p in (1, high)\n", cwd=tmp_path,
                 env={})
    with pytest.raises(SubmitError) as exc:
        list(sub.cluster(1).proc_ads())
    assert exc.value.line == 2 and exc.value.command == "priority"


def test_queue_100000_materialises_every_proc(tmp_path):
    # Its speed is measured, not asserted: benchmarks/queue_bench.py (1) prints jobs/s.
    text = ("universe = vanilla\nexecutable = /bin/sleep\narguments = 60 $(Process)\n"
            "output = out/job.$(Cluster).$(Process).out\nerror = out/job.$(Cluster).$(Process).err\n"
            "log = job.log\nrequest_cpus = 1\nrequest_memory = 1GB\nrequest_disk = 100MB\n"
            "queue 100000\n")
    c = Submit(text, cwd=tmp_path, env={}).cluster(1, qdate=1)
    ads = list(c.proc_ads())
    assert len(ads) == 100000
    last = ads[-1]
    assert last["Args" if "Args" in last else "Arguments"] == '"60 99999"'  # ad text of the value
    assert last["Out"].endswith('out/job.1.99999.out"')

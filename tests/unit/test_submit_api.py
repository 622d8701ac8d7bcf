"""``htc.submit.Submit`` as a library: the bindings' dictionary API, jobs(), settings, errors."""

from __future__ import annotations

import dataclasses

import pytest

from htc.classad import ClassAd
from htc.submit import Submit, SubmitError, SubmitSettings

TEXT = "Executable = /bin/echo\narguments = $(Process) x\n+Foo = 1\nMy.Bar = 2\nqueue 3 x in (a,b)\n"


def test_dictionary_api_like_the_bindings(tmp_path):
    sub = Submit(TEXT, cwd=tmp_path)
    assert list(sub) == ["Executable", "arguments", "MY.Foo", "My.Bar"]
    assert sub["executable"] == "/bin/echo" and sub["+Foo"] == "1" and sub["my.bar"] == "2"
    assert sub.get("nothing") is None and "ARGUMENTS" in sub and len(sub) == 4
    with pytest.raises(KeyError):
        sub["nothing"]
    assert sub.expand("arguments") == "0 x" and sub.expand("undefined") == ""
    assert sub.getQArgs() == "3 x in (a,b)"
    assert list(sub.itemdata()) == [{"x": "a"}, {"x": "b"}]
    assert str(sub) == ("Executable = /bin/echo\narguments = $(Process) x\nMY.Foo = 1\nMy.Bar = 2\n"
                        "queue 3 x in (a,b)\n")


def test_str_round_trips(tmp_path):
    sub = Submit("executable = /bin/true\nlong @=x\n a\n b\n@x\narguments = $(long)\nqueue\n",
                 cwd=tmp_path)
    again = Submit(str(sub), cwd=tmp_path)
    assert list(again.procs(qdate=5)) == list(sub.procs(qdate=5))


def test_dict_input_queue_keyword_and_setqargs(tmp_path):
    sub = Submit({"executable": "/bin/true", "request_cpus": 2, "hold": True}, cwd=tmp_path,
                 queue="queue 2")
    ads = list(sub.procs(qdate=1))
    assert len(ads) == 2 and ads[0]["RequestCpus"] == "2" and ads[1]["JobStatus"] == "5"
    sub.setQArgs("x in (p, q, r)")
    assert sub.getQArgs() == "x in (p, q, r)" and len(list(sub.procs())) == 3
    with pytest.raises(SubmitError, match="dictionary"):
        Submit({"queue": "3"})
    with pytest.raises(TypeError):
        Submit({"executable": ["/bin/true"]})


def test_setitem_applies_to_every_queue_statement_and_survives_rematerialisation(tmp_path):
    sub = Submit("executable = /bin/echo\narguments = a\nqueue\narguments = b\nqueue\n", cwd=tmp_path)
    sub["request_memory"] = "2G"
    sub["+Owner2"] = '"me"'
    ads = list(sub.procs(qdate=1))
    assert [a["RequestMemory"] for a in ads] == ["2048", "2048"]
    assert [a["Args"] for a in ads] == ['"a"', '"b"'] and ads[1]["Owner2"] == '"me"'
    again = Submit(sub.submit_text, cwd=tmp_path)
    assert list(again.procs(qdate=1)) == ads


def test_no_queue_statement_means_one_job(tmp_path):
    sub = Submit("executable = /bin/true\n", cwd=tmp_path)
    assert not sub.has_queue_statement
    assert len(list(sub.procs())) == 1
    assert Submit("executable = /bin/true\nqueue 0\n", cwd=tmp_path).has_queue_statement


def test_jobs_yield_classads_with_typed_values(tmp_path):
    sub = Submit("executable = /bin/echo\narguments = \"a 'b c'\"\nrequest_memory = 1G\n"
                 "+Flag = true\n+Word = \"w\"\nqueue 2\n", cwd=tmp_path)
    ads = list(sub.jobs(clusterid=12, procid=5, qdate=1234, owner="alice"))
    assert all(isinstance(ad, ClassAd) for ad in ads)
    a = ads[1]
    assert (a["ClusterId"], a["ProcId"], a["QDate"]) == (12, 6, 1234)
    assert a["Owner"] == "alice" and a["Flag"] is True and a["Word"] == "w"
    assert a["Arguments"] == "a b' 'c" and a["RequestMemory"] == 1024
    assert a.eval("RequestDisk") == 1024 * 1024  # MAX({1024, (1 + 1) * 1.25}) * 1024


def test_requirements_match_like_htcondor(tmp_path):
    ad = next(Submit("executable = /bin/true\nrequest_cpus = 2\nrequest_memory = 3G\nqueue\n",
                     cwd=tmp_path, settings=SubmitSettings(filesystem_domain="site")).jobs())
    machine = ClassAd({"Arch": "X86_64", "OpSys": "LINUX", "Cpus": 4, "Memory": 4096,
                       "Disk": 10**7, "FileSystemDomain": "site",
                       "CondorVersion": "$CondorVersion: 25.14.1 2026-09-24 BuildID: x $"})
    assert ad.eval("Requirements", machine) is True
    machine["Cpus"] = 1
    assert ad.eval("Requirements", machine) is False


def test_settings_replace_config(tmp_path):
    s = SubmitSettings(arch="AARCH64", opsys="LINUX", filesystem_domain="fs.example",
                       default_request_memory="256", submit_method=0, default_universe="local")
    ad = next(Submit("executable = /bin/true\nqueue\n", cwd=tmp_path, settings=s).procs())
    assert ad["JobUniverse"] == "12" and ad["RequestMemory"] == "256" and ad["JobSubmitMethod"] == "0"
    assert '(TARGET.Arch == "AARCH64")' in ad["Requirements"]
    ad = next(Submit("executable = /bin/true\nqueue\n", cwd=tmp_path,
                     settings=dataclasses.replace(s, default_universe="vanilla")).procs())
    assert ad["FileSystemDomain"] == '"fs.example"'


def test_owner_defaults_the_accounting_group_user(tmp_path):
    sub = Submit("executable = /bin/true\naccounting_group = group_physics\nqueue\n", cwd=tmp_path)
    ad = next(sub.procs(owner="einstein"))
    assert ad["AccountingGroup"] == '"group_physics.einstein"' and ad["Owner"] == '"einstein"'
    assert next(sub.procs())["Owner"] == "undefined"


@pytest.mark.parametrize("universe,number,extra", [
    ("vanilla", "5", {}), ("standard", "1", {"KillSig": '"SIGTSTP"'}),
    ("local", "12", {"KillSig": '"SIGTERM"'}), ("scheduler", "7", {"KillSig": '"SIGTERM"'}),
    ("python", "5", {"WantPython": "true"}),
])
def test_universes(universe, number, extra, tmp_path):
    ad = next(Submit(f"universe = {universe}\nexecutable = /bin/true\nqueue\n", cwd=tmp_path).procs())
    assert ad["JobUniverse"] == number
    assert {k: ad.get(k) for k in extra} == extra


@pytest.mark.parametrize("universe,message", [
    ("grid", "not supported by htc"), ("vm", "not supported by htc"),
    ("pvm", "is not a supported universe"), ("bogus", "I don't know about"),
])
def test_unsupported_universes_are_errors(universe, message, tmp_path):
    with pytest.raises(SubmitError, match=message) as exc:
        list(Submit(f"universe = {universe}\nexecutable = /bin/true\nqueue\n", cwd=tmp_path).procs())
    assert exc.value.line == 1 and exc.value.command == "universe"


def test_nothing_is_produced_for_an_invalid_description(tmp_path):
    sub = Submit("executable = /bin/true\nrequest_memory = (1 +\nqueue 5\n", cwd=tmp_path)
    with pytest.raises(SubmitError) as exc:
        sub.cluster(1)
    assert (exc.value.line, exc.value.command) == (2, "request_memory")
    assert "No jobs were queued" in str(exc.value)


def test_late_binding_and_env(tmp_path):
    sub = Submit("executable = /bin/echo\narguments = $$(Memory) $ENV(WHO)\ngetenv = WHO\nqueue\n",
                 cwd=tmp_path, env={"WHO": "me", "OTHER": "x"})
    ad = next(sub.procs())
    assert ad["Args"] == '"$$(Memory) me"' and ad["Environment"] == '"WHO=me"'


def test_late_binding_expands_from_the_matched_machine(tmp_path):
    from htc.submit import LateBindingError, expand_late_binding

    sub = Submit("executable = /bin/echo\narguments = $$(Memory) $$(Name) $$(Gpus:0) $$([Cpus * 2])\n"
                 "+Note = \"min $$(MinMem:100)\"\nqueue\n", cwd=tmp_path)
    job = next(sub.procs())
    machine = ClassAd({"Memory": 4096, "Name": "slot1@node", "Cpus": 4})
    up = expand_late_binding(job, machine)
    assert up["Args"] == '"4096 slot1@node 0 8"'
    assert up["MATCH_Memory"] == "4096" and up["MATCH_Name"] == '"slot1@node"'
    assert up["MATCH_EXP_Args"] == "8"
    assert up["Note"] == '"min 100"' and "Requirements" not in up
    again = expand_late_binding(dict(job, MATCH_Name='"slot1@node"'), ClassAd({"Memory": 1,
                                                                            "Cpus": 1}))
    assert again["Args"] == '"1 slot1@node 0 2"'
    with pytest.raises(LateBindingError, match=r"Cannot expand \$\$\(Name\)"):
        expand_late_binding(job, ClassAd({"Memory": 1, "Cpus": 1}))

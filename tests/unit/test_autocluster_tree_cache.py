"""A ClassAd job's autocluster key and significant attributes are worked out from its syntax
trees, each tree walked and printed once however many clusters share it (a DAG's nodes share
their submit file's), with exactly the results of the plain-mapping path."""

from __future__ import annotations

from htc.classad import ClassAd
from htc.daemons import autocluster as ac

ADS = [
    '[ Requirements = TARGET.Memory >= RequestMemory && MY.Foo =?= "x"; RequestMemory = MemoryUsage * 2; '
    'MemoryUsage = 8; Foo = "x"; Rank = 0.0; JobUniverse = 5; RequestCpus = 1; DAGNodeName = "n1" ]',
    '[ Requirements = true; Rank = TARGET.Mips; requestmemory = 16; Nested = [ a = 1; b = "c" ]; L = { 1, 2.0 } ]',
    '[ Requirements = (TARGET.Arch == "X86_64") && versionGE(split(TARGET.CondorVersion)[1], "25.12.0"); '
    'ConcurrencyLimits = undefined; RequestDisk = MAX({ 1024, (TransferInputSizeMB + 1) * 1.25 }) * 1024 ]',
]


def test_a_classad_gives_the_key_and_attributes_the_mapping_path_gives():
    for text in ADS:
        ad = ClassAd(text)
        mapping = dict(ad.items())  # not a ClassAd: the general path, every item looked at
        for negotiator in ((), ("Nested", "L", "Foo", "Missing")):
            significant = ac.job_significant_attributes(ad, negotiator)
            assert significant == ac.job_significant_attributes(mapping, negotiator)
            assert ac.autocluster_key(ad, significant) == ac.autocluster_key(mapping, significant)


def test_clusters_sharing_trees_walk_and_print_each_once(monkeypatch):
    first = ClassAd(ADS[0])
    walked, printed = [], []
    real_refs, real_canonical = ac._expr_refs, ac._canonical
    monkeypatch.setattr(ac, "_BY_TREE", {})  # as in a fresh schedd
    monkeypatch.setattr(ac, "_expr_refs", lambda value: walked.append(repr(value)) or real_refs(value))
    monkeypatch.setattr(ac, "_canonical", lambda value: printed.append(value) or real_canonical(value))
    keys, after_first = set(), None
    for i in range(20):  # twenty nodes of one submit file: the same trees, one value of their own
        node = first.copy()
        node["DAGNodeName"] = f"n{i}"
        significant = ac.job_significant_attributes(node, ("RequestMemory",))
        keys.add(ac.autocluster_key(node, significant))
        if after_first is None:
            after_first = (len(walked), len(printed))
            assert 0 < after_first[0] <= 5 and 0 < after_first[1] <= len(significant)
    assert len(keys) == 1
    assert (len(walked), len(printed)) == after_first  # nothing walked or printed again for the other 19
    # A changed value is a new tree: it is keyed anew, and differently.
    other = first.copy()
    other["RequestMemory"] = 32
    assert ac.autocluster_key(other, ac.job_significant_attributes(other, ("RequestMemory",))) not in keys

"""Compare htc.submit's job ads with ads HTCondor's submit code built (test support only).

Values are compared after both sides are put in canonical old-ClassAd form by ``classad2``
(the oracle), so spelling differences (``False`` vs ``false``, spacing) do not count;
``Requirements`` is compared by meaning: both are evaluated against a set of machine ads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import classad2

HERE = Path(__file__).resolve().parent
SHARED_CASES = Path("/work/shared/conformance/submit/cases.json")
CAPTURED_CASES = HERE / "captured.json"

#: attributes whose values are inherently different: the build that made the ad
INHERENTLY_DIFFERENT = frozenset({"CondorVersion", "CondorPlatform", "SubmitVersion"})

classad2.parseOne("[a=1]")  # force compat mode before any evaluation (see oracles.md)


def load_cases() -> list[dict]:
    """All captured cases: the shared corpus first, then htc's own."""
    cases = []
    if SHARED_CASES.exists():
        for c in json.loads(SHARED_CASES.read_text()):
            c = dict(c, source="shared")
            c.setdefault("env", {})
            cases.append(c)
    from corpus import unpack

    for c in unpack(json.loads(CAPTURED_CASES.read_text())):
        cases.append(dict(c, source="captured"))
    return cases


def canonical(text: str) -> str:
    """The oracle's canonical old-syntax text of an expression."""
    try:
        ad = classad2.parseOne("X = " + text, classad2.ParserType.Old)
        return ad.printOld()[4:].rstrip("\n")
    except Exception:
        return "<unparsable> " + text


def _machines() -> list[classad2.ClassAd]:
    base = {
        "Arch": "X86_64", "OpSys": "LINUX", "Disk": 10_000_000, "Memory": 8192, "Cpus": 8,
        "GPUs": 2, "FileSystemDomain": "example.net", "HasFileTransfer": True,
        "CondorVersion": "$CondorVersion: 25.14.1 2026-09-24 BuildID: x $",
        "HasSelfCheckpointTransfers": True, "HasJobDeferral": True, "HasJava": True,
        "HasDocker": True, "HasContainer": True, "HasDockerURL": True,
        "HasFileTransferPluginMethods": "http,https,file", "foo": 5, "KFlops": 10,
    }
    variants = [
        {}, {"Arch": "INTEL"}, {"OpSys": "WINDOWS"}, {"Disk": 10},
        {"Disk": 10, "CondorVersion": "$CondorVersion: 25.10.0 2026-01-01 BuildID: x $"},
        {"Memory": 100}, {"Memory": 1}, {"Cpus": 1}, {"Cpus": 3}, {"GPUs": 0},
        {"FileSystemDomain": "other.org"}, {"HasFileTransfer": False},
        {"HasFileTransfer": False, "FileSystemDomain": "other.org"},
        {"CondorVersion": "$CondorVersion: 8.8.0 2019-01-01 BuildID: x $"},
        {"HasSelfCheckpointTransfers": False}, {"HasJobDeferral": False}, {"HasJava": False},
        {"HasDocker": False}, {"HasContainer": False}, {"foo": 1},
        {"HasFileTransferPluginMethods": "file"}, {"Memory": 5000, "Disk": 100},
    ]
    out = []
    for v in variants:
        m = dict(base, **v)
        out.append(classad2.ClassAd(m))
    return out


MACHINES = _machines()


def requirements_meaning(job: dict[str, str]) -> list:
    """Evaluate a job's Requirements against every machine ad."""
    ad = classad2.parseOne("\n".join(f"{k} = {v}" for k, v in job.items()), classad2.ParserType.Old)
    expr = classad2.ExprTree("MY.Requirements")
    out = []
    for m in MACHINES:
        try:
            v = expr.eval(ad, m)
        except Exception as e:
            v = f"error {e!r}"
        out.append(repr(v))
    return out


def compare_ads(expected: dict[str, str], got: dict[str, str], workdir: str) -> list[str]:
    """Differences between an oracle ad and ours, as readable lines (empty when equal)."""
    exp = {k: v.replace("@WORKDIR@", workdir) for k, v in expected.items()}
    diffs = []
    exp_keys = {k for k in exp if k not in INHERENTLY_DIFFERENT}
    got_keys = {k for k in got if k not in INHERENTLY_DIFFERENT}
    for k in sorted(exp_keys - got_keys):
        diffs.append(f"missing {k} = {exp[k]}")
    for k in sorted(got_keys - exp_keys):
        diffs.append(f"extra {k} = {got[k]}")
    for k in sorted(exp_keys & got_keys):
        if k == "Requirements":
            if requirements_meaning(exp) != requirements_meaning(got):
                diffs.append(f"Requirements differ in meaning:\n  oracle {exp[k]}\n  htc    {got[k]}")
        elif canonical(exp[k]) != canonical(got[k]):
            diffs.append(f"{k}: oracle {exp[k]} htc {got[k]}")
    return diffs


def make_files(workdir: str, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = os.path.join(workdir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(content)

"""Record the job ads HTCondor's own submit code builds, as a test oracle for htc.submit.

The ``htcondor`` wheel (25.x) has no ``Submit.jobs()``, so each case is submitted with
``htcondor2.Schedd.submit`` to ``fakeschedd.py``, which records what it is sent: the cluster ad
(proc -1) and, per proc, the attributes that differ from it.  One listener serves the whole
batch.  The wheel is a TEST-ONLY oracle: this script runs in its own process (the bindings read
their configuration once, at import) and nothing under ``htc/`` imports it.

    python tests/submit_oracle/capture.py     # rewrites tests/submit_oracle/captured.json

Each record: ``id``, ``submit``, ``files``, ``env`` (variables set for the submission),
``result`` (``{"ok": true, "procs": n}`` or ``{"ok": false, "error": "..."}``) and ``procs``
(``"123.N"`` -> merged attribute -> expression text).  The submit directory is written as
``@WORKDIR@``.  The file stores each proc ad as its difference from one base ad
(:func:`pack`; :func:`unpack` restores them).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = 123
# The configuration the captured ads assume; tests pass the same values to htc.submit.
CONFIG_ENV = {
    "CONDOR_CONFIG": "ONLY_ENV",
    "_CONDOR_SEC_CLIENT_NEGOTIATION": "NEVER",
    "_CONDOR_SEC_DEFAULT_NEGOTIATION": "NEVER",
    "_CONDOR_SEC_CLIENT_AUTHENTICATION_METHODS": "CLAIMTOBE",
    "_CONDOR_SEC_DEFAULT_AUTHENTICATION_METHODS": "CLAIMTOBE",
    "_CONDOR_UID_DOMAIN": "example.net",
    "_CONDOR_FILESYSTEM_DOMAIN": "example.net",
}


def _wait_for(path, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return True
        time.sleep(0.01)
    return False


def capture_all(cases):
    """Submit every case to one fake schedd and return the records (see module docstring)."""
    os.environ.update(CONFIG_ENV)  # before the bindings read their configuration
    import classad2
    import htcondor2

    out = []
    with tempfile.TemporaryDirectory() as t:
        port_file, outdir = os.path.join(t, "port"), os.path.join(t, "ads")
        os.mkdir(outdir)
        server = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "fakeschedd.py"), port_file, outdir, str(CLUSTER)])
        try:
            _wait_for(port_file, 10)
            with open(port_file) as f:
                port = f.read()
            loc = classad2.ClassAd({
                "MyAddress": f"<127.0.0.1:{port}>", "Name": "fake",
                "CondorVersion": "$CondorVersion: 25.14.1 2026-09-24 BuildID: UW_Python_Wheel_Build $"})
            schedd = htcondor2.Schedd(loc)
            seen = 0
            for case in cases:
                cid, text, files = case[0], case[1], case[2]
                env = case[3] if len(case) > 3 else {}
                out.append(_capture_one(schedd, htcondor2, outdir, seen, cid, text, files, env))
                seen += bool(out[-1].pop("_recorded"))
        finally:
            server.kill()
            server.wait()
    return out


def _capture_one(schedd, htcondor2, outdir, seen, cid, text, files, env):
    old_env = {k: os.environ.get(k) for k in env}
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as wd:
        wd = os.path.realpath(wd)
        for name, content in files.items():
            path = os.path.join(wd, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(content)
        os.environ.update(env)
        os.chdir(wd)
        try:
            r = schedd.submit(htcondor2.Submit(text))
            res = {"ok": True, "procs": r.num_procs()}
        except Exception as e:  # the oracle's error is data here
            res = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        finally:
            os.chdir(cwd)
            for k, v in old_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        path = os.path.join(outdir, f"{seen}.json")
        recorded = _wait_for(path, 3 if res["ok"] else 0.3)
        ads = {}
        if recorded:
            with open(path) as f:
                ads = json.load(f)
    base = ads.get(f"{CLUSTER}.-1", {})
    procs = {}
    for key, attrs in ads.items():
        if not key.endswith(".-1"):
            merged = dict(base)
            merged.update(attrs)
            procs[key] = {a: v.replace(wd, "@WORKDIR@") for a, v in merged.items()}
    return {"id": cid, "submit": text, "files": files, "env": env, "result": res,
            "procs": procs, "_recorded": recorded}


if __name__ == "__main__":
    # capture.py                -> rewrite captured.json from cases.py
    # capture.py ID ...         -> print the records of those cases of cases.py
    # capture.py --file X.py    -> print the records of the CASES in X.py (exploration)
    sys.path.insert(0, HERE)
    import corpus

    args = sys.argv[1:]
    if args[:1] == ["--file"]:
        import importlib.util
        spec = importlib.util.spec_from_file_location("explore_cases", args[1])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        json.dump(capture_all(mod.CASES), sys.stdout, indent=1, sort_keys=True)
    else:
        from cases import CASES

        only = set(args)
        records = capture_all([c for c in CASES if not only or c[0] in only])
        if only:
            json.dump(records, sys.stdout, indent=1, sort_keys=True)
        else:
            for r in records:
                print(r["id"], r["result"], len(r["procs"]))
            with open(os.path.join(HERE, "captured.json"), "w") as f:
                json.dump(corpus.pack(records), f, indent=0, sort_keys=True)

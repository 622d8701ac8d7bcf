"""``htc runtime build|check``."""

from __future__ import annotations

import json

from htc.cli.main import main


def test_runtime_check_reports_every_probe_and_passes_here(capsys):
    assert main(["runtime", "check", "-json"]) == 0
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    assert {"C compiler", "static C library", "remote I/O (preload)", "ptrace",
            "seccomp user notification", "cgroups"} <= set(checks)
    assert checks["remote I/O (preload)"]["ok"], checks["remote I/O (preload)"]["detail"]


def test_runtime_check_fails_without_a_compiler(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("CC", str(tmp_path / "missing-cc"))
    monkeypatch.setenv("HTC_RUNTIME_CACHE", str(tmp_path / "cache"))
    assert main(["runtime", "check"]) == 1
    out = capsys.readouterr().out
    assert "C compiler" in out and "MISSING" in out
    assert "the job runtime cannot work on this host: C compiler" in out


def test_runtime_build_into_a_given_cache(capsys, tmp_path):
    assert main(["runtime", "build", "-cache", str(tmp_path), "-json"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["libjobrt.so"].startswith(str(tmp_path))

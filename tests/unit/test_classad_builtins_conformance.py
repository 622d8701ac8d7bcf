"""The ``fn_*`` cases of the shared ClassAd conformance corpus, through the whole engine.

Each case is parsed and evaluated by ``htc.classad.ExprTree`` and compared by the corpus'
own checker (``/work/shared/conformance/classad/check.py``), so these tests exercise the
builtins the way users reach them: parser, evaluator and builtin together.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import htc.classad

CORPUS_DIR = Path("/work/shared/conformance/classad")


def _load_checker():
    spec = importlib.util.spec_from_file_location("classad_conformance_check",
                                                  CORPUS_DIR / "check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECK = _load_checker()
CASES = [case for case in map(json.loads, (CORPUS_DIR / "cases.jsonl").read_text().splitlines())
         if case["id"].startswith("fn_")]


def test_corpus_has_function_cases():
    assert len(CASES) > 200


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_function_case(case):
    ok, got = CHECK.run_case(htc.classad, case, timeout=10)
    assert ok, f"{case['expr']!r}: expected {case['expect']}, got {got}"

"""Every case of the shared ClassAd conformance corpus (expected values from HTCondor 25.14.1).

The comparison logic is the corpus' own checker (``check.py``), loaded from the corpus
directory so that this suite and the checker can never disagree about what passing means.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import htc.classad as candidate

CORPUS_DIR = Path("/work/shared/conformance/classad")
if not CORPUS_DIR.exists():  # a checkout that carries the corpus inside the repository
    CORPUS_DIR = Path(__file__).resolve().parents[2] / "conformance" / "classad"


def _load_checker():
    spec = importlib.util.spec_from_file_location("classad_check", CORPUS_DIR / "check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CHECK = _load_checker()
CASES = [json.loads(line) for line in (CORPUS_DIR / "cases.jsonl").read_text().splitlines()
         if line.strip()]


def test_corpus_is_complete():
    assert len(CASES) >= 400


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case):
    ok, got = CHECK.run_case(candidate, case, timeout=5.0)
    assert ok, f"{case['id']}: expected {case['expect']!r}, got {got!r}"

"""The examples in docs/classad.md run and print what the page says."""

from __future__ import annotations

import doctest
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "classad.md"


def test_classad_doc_examples():
    text = DOC.read_text()
    # the page's examples are the ```python blocks; doctest finds the >>> lines in them
    parser = doctest.DocTestParser()
    test = parser.get_doctest(text, {}, "docs/classad.md", str(DOC), 0)
    assert len(test.examples) > 30
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0

"""The runtime tests' skip (tests/ckpt_images.py runtime_tools) says what the host lacks and what
to do: run ``htc runtime check``, and what CI installs."""

from __future__ import annotations

import pytest

import ckpt_images
from htc.runtime import RuntimeUnavailable


def test_the_skip_says_how_to_find_and_fix_what_is_missing(monkeypatch):
    def no_compiler(**options):
        raise RuntimeUnavailable("no C compiler found (looked for cc, gcc on PATH)")

    monkeypatch.setattr(ckpt_images.checkpoint, "build_tools", no_compiler)
    with pytest.raises(pytest.skip.Exception) as skipped:
        ckpt_images.runtime_tools()
    reason = str(skipped.value)
    assert "the runtime cannot be built on this host: no C compiler found" in reason
    assert "run `htc runtime check`" in reason and "apt-get install gcc libc6-dev" in reason

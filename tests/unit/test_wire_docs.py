"""docs/daemons.md embeds tables generated from the code; they must not drift."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from htc.daemons.master.states import machine_table
from htc.wire.messages import message_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "daemons.md"


def block(name: str) -> str:
    text = DOC.read_text()
    found = re.search(rf"<!-- BEGIN {name} -->\n(.*?)<!-- END {name} -->", text, re.S)
    assert found, f"docs/daemons.md lacks the {name} block"
    return found.group(1).strip()


@pytest.mark.parametrize("name, make", [("messages", message_table), ("master-machine", machine_table)])
def test_generated_tables_are_current(name, make):
    assert block(name) == make().strip(), (
        f"docs/daemons.md's {name} table is stale; regenerate it with "
        f"python -c 'from {make.__module__} import {make.__name__}; print({make.__name__}())'")

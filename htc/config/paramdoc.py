"""Regenerate the param table in ``docs/configuration.md``: ``python -m htc.config.paramdoc``.

The table sits between ``<!-- param-table:begin -->`` and ``<!-- param-table:end -->``;
``tests/unit/test_config_params.py`` fails when it is stale.
"""

from __future__ import annotations

import pathlib
import re
import sys

from htc.config.params import PARAMS, markdown_table

BEGIN = "<!-- param-table:begin -->"
END = "<!-- param-table:end -->"


def update(doc: pathlib.Path) -> None:
    """Rewrite the table section of ``doc`` from :func:`markdown_table`.

    Raises:
        SystemExit: the markers are missing (add them where the table belongs).
    """
    text = doc.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        sys.exit(f"{doc} lacks the {BEGIN} ... {END} markers; add them where the table belongs")
    new = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END),
                 lambda m: f"{BEGIN}\n{markdown_table()}{END}", text, flags=re.S)
    doc.write_text(new, encoding="utf-8")


if __name__ == "__main__":
    target = pathlib.Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    update(target)
    print(f"updated {target} ({len(PARAMS)} knobs)")

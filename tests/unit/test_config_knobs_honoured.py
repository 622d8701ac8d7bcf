"""Every declared knob does what its doc says, or its doc says it is not used.

The param table (htc/config/params.py) declares knobs for HTCondor's defaults, ``$(NAME)``
references and ``htc config_val``. A knob a daemon or tool never reads must say so in its doc
("Accepted for HTCondor configurations and not used: <why>"), so that docs/configuration.md
never promises what htc does not do. This test finds the knobs the code reads:

* a string literal ``"NAME"`` in htc/, dag/ or executors/ (outside the table itself);
* a name a family of knobs is built from (ALLOW_/DENY_ chains, the DAGMan settings, the
  ``Q_DEFAULT_<VIEW>_PRINT_FORMAT_FILE`` views) -- each family checked against the code that
  builds it;
* ``$(NAME)`` in the default of a knob that is itself read, or in a metaknob line that sets
  another knob (a macro read through what uses it).

A new knob that no code reads, and whose doc does not say so, fails here.
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

from htc.config import metaknobs, params

ROOT = Path(__file__).resolve().parents[2]
# names that are also words the code uses for something else (a column header, a tag)
HOMONYMS = {"RUN"}
NOT_USED = "Accepted for HTCondor configurations and not used"
MACRO = "A macro for policy expressions"


@functools.lru_cache(maxsize=1)
def _source() -> str:
    files = subprocess.run(["git", "ls-files", "htc", "dag", "executors"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    skip = ("htc/config/params.py", "htc/config/paramdoc.py")
    return "\n".join((ROOT / f).read_text() for f in files if f.endswith(".py") and f not in skip)


def _families(name: str, source: str) -> bool:
    level = re.fullmatch(r"(?:ALLOW|DENY)_([A-Z_]+)", name)
    if level:
        from htc.wire.authz import Level

        return level[1] in Level.__members__ and ('f"{kind}_' in source or "kind}_{" in source)
    if name.startswith("DAGMAN_"):
        from dag.manager.settings import Settings

        return name in Settings.knob_names()
    if re.fullmatch(r"Q_DEFAULT_\w*PRINT_FORMAT_FILE", name):
        return "Q_DEFAULT_" in source and "_PRINT_FORMAT_FILE" in source
    return False


def _metaknob_references() -> set[str]:
    """Names used as ``$(NAME)`` on a metaknob line that sets a *different* knob."""
    refs: set[str] = set()
    text = Path(metaknobs.__file__).read_text()
    for line in text.splitlines():
        target, eq, value = line.partition("=")
        if not eq:
            continue
        for ref in re.findall(r"\$\((\w+)", value):
            if ref != target.strip():
                refs.add(ref)
    return refs


DECLARED = list(params.PARAMS.values()) if isinstance(params.PARAMS, dict) else list(params.PARAMS)


@functools.lru_cache(maxsize=1)
def literal_reads() -> frozenset[str]:
    """The declared knobs whose name is a string literal in the code."""
    words = set(re.findall(r"[\"']([A-Za-z_][A-Za-z0-9_]*)[\"']", _source()))
    return frozenset(p.name for p in DECLARED if p.name in words and p.name not in HOMONYMS)


@functools.lru_cache(maxsize=2)
def read_knobs(metaknob_lines: bool = True) -> frozenset[str]:
    """The declared knobs the code reads, directly or through a knob it reads (and, with
    ``metaknob_lines``, the macros a metaknob line puts into another knob)."""
    source = _source()
    declared = DECLARED
    read = set(literal_reads()) | {p.name for p in declared if _families(p.name, source)}
    if metaknob_lines:
        read |= _metaknob_references() & {p.name for p in declared}
    while True:  # a macro is read when a read knob's default refers to it
        more = {ref for p in declared if p.name in read for ref in re.findall(r"\$\((\w+)", p.default)}
        more &= {p.name for p in declared}
        if more <= read:
            return frozenset(read)
        read |= more


def test_every_knob_is_read_or_says_it_is_not_used():
    read = read_knobs()
    silent = [p.name for p in DECLARED
              if p.name not in read and NOT_USED not in p.doc and not p.doc.startswith(MACRO)]
    assert not silent, (f"{len(silent)} declared knob(s) are read by no code and their doc does not say so: "
                        f"{silent}; honour each or start its doc with '{NOT_USED}: <why>'")


def test_a_knob_marked_not_used_is_really_not_read():
    # a metaknob may name a knob htc does not honour (FLOCK_FROM in a security template): that
    # puts its value in another list, not its promise into effect
    wrong = [p.name for p in DECLARED if NOT_USED in p.doc and p.name in read_knobs(metaknob_lines=False)]
    assert not wrong, f"these knobs are read by the code but their doc says they are not used: {wrong}"

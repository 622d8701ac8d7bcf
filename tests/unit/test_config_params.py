"""THE param table: well formed, complete for the code that reads it, typed reads, and documented."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

from htc.config import PARAMS, ConfigError, UndeclaredKnob, load_config
from htc.config.params import ORIGINS, TYPES, markdown_table

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("htc", "dag", "executors")


_CONFIG_RECEIVER = re.compile(r"(^|_)(cfg|conf|config|configuration)$", re.I)
_KNOB_LIKE = re.compile(r"[A-Z][A-Z0-9_]*")


def _receiver_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _receiver_name(node.func)
    return ""


def is_config_read(node: ast.AST) -> bool:
    """A ``.param("NAME")`` call that reads configuration.

    The submit language has its own ``param(name, alt)`` (``c.param("universe", ...)``), so a call
    counts when its receiver is named like a configuration (``cfg``, ``config``,
    ``self.config``, ``daemon_cfg``) or when it has one argument that looks like a knob
    (``X.param("MAX_JOBS_RUNNING")``).
    """
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "param" and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return False
    receiver = _receiver_name(node.func.value)
    knob_like = len(node.args) == 1 and _KNOB_LIKE.fullmatch(node.args[0].value) is not None
    return bool(_CONFIG_RECEIVER.search(receiver)) or knob_like


def literal_param_reads() -> dict[str, list[str]]:
    """Configuration ``.param("NAME")`` calls with a literal name: name -> ["file:line", ...]."""
    found: dict[str, list[str]] = {}
    for top in SOURCE_DIRS:
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if is_config_read(node):
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    found.setdefault(node.args[0].value, []).append(where)
    return found


def test_every_knob_the_code_reads_is_declared():
    reads = literal_param_reads()
    missing = {name: where for name, where in reads.items() if name.upper() not in PARAMS}
    assert not missing, ("knobs read with .param() but not declared in htc/config/params.py: "
                         + ", ".join(f"{n} ({', '.join(w)})" for n, w in sorted(missing.items())))


def test_the_scan_sees_config_reads_and_skips_submit_lookups():
    # the scanner must recognise the call shapes code uses, or the completeness test proves nothing
    tree = ast.parse('cfg.param("SPOOL")\nself.config.param("MaxJobRetirementTime")\n'
                     'load_config("SCHEDD").param("NEGOTIATOR_INTERVAL")\nx.param("MAX_JOBS_RUNNING")\n'
                     'c.param("universe", "JobUniverse")\nc.param("executable")\n')
    reads = [n.args[0].value for n in ast.walk(tree) if is_config_read(n)]
    assert sorted(reads) == sorted(["SPOOL", "MaxJobRetirementTime", "NEGOTIATOR_INTERVAL", "MAX_JOBS_RUNNING"])


def test_table_is_well_formed():
    for p in PARAMS.values():
        assert p.type in TYPES and p.origin in ORIGINS, p
        assert p.doc and p.doc[0].isupper() and p.doc.endswith((".", ")")), f"{p.name}: doc {p.doc!r}"
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p.name), p.name
        if p.origin == "detected":
            assert p.default == "", p.name


def test_knobs_the_system_needs_are_declared():
    needed = """DAEMON_LIST CONDOR_HOST COLLECTOR_HOST NEGOTIATOR_INTERVAL UPDATE_INTERVAL SCHEDD_INTERVAL
        MAX_JOBS_RUNNING START SUSPEND CONTINUE PREEMPT KILL WANT_SUSPEND WANT_VACATE RANK
        MaxJobRetirementTime MachineMaxVacateTime PREEMPTION_REQUIREMENTS PRIORITY_HALFLIFE
        DEFAULT_PRIO_FACTOR NUM_CPUS MEMORY SPOOL EXECUTE LOG LOCK LOCAL_DIR RELEASE_DIR JOB_QUEUE_DB
        HISTORY MASTER_BACKOFF_CONSTANT MASTER_BACKOFF_FACTOR MASTER_BACKOFF_CEILING MASTER_RECOVER_FACTOR
        ALLOW_READ ALLOW_WRITE ALLOW_ADMINISTRATOR ALLOW_DAEMON DENY_READ DENY_WRITE JOB_DEFAULT_LEASE_DURATION
        CLAIM_WORKLIFE MATCH_TIMEOUT KILLING_TIMEOUT POLLING_INTERVAL JOB_DEFAULT_NOTIFICATION""".split()
    assert [n for n in needed if n.upper() not in PARAMS] == []


def test_undeclared_knob_is_a_programming_error():
    cfg = load_config(env={"HTC_CONFIG": "ONLY_ENV", "_HTC_MY_MACRO": "x"})
    with pytest.raises(UndeclaredKnob, match="MY_MACRO is not declared in the param table"):
        cfg.param("MY_MACRO")
    assert cfg.get("MY_MACRO") == "x"
    assert not isinstance(UndeclaredKnob("X"), ConfigError)


def load(tmp_path, text):
    path = tmp_path / "htc_config"
    path.write_text(text)
    return load_config(env={"HTC_CONFIG": str(path), "HTC_HOME": str(tmp_path)})


@pytest.mark.parametrize("knob,value,expected", [
    ("UPDATE_INTERVAL", "60*2", 120), ("UPDATE_INTERVAL", "3.7", 3), ("UPDATE_INTERVAL", "true", 1),
    ("UPDATE_INTERVAL", "1e3", 1000), ("UPDATE_INTERVAL", "ifThenElse(1>0, 4, 5)", 4),
    ("UPDATE_INTERVAL", "", 300), ("UPDATE_INTERVAL", "$(NOT_SET)", 300), ("UPDATE_INTERVAL", "-5", -5),
    ("PRIORITY_HALFLIFE", "0.5 * 2", 1.0), ("PRIORITY_HALFLIFE", "true", 1.0),
    ("ENABLE_RUNTIME_CONFIG", "TRUE", True), ("ENABLE_RUNTIME_CONFIG", "1 == 1", True),
    ("ENABLE_RUNTIME_CONFIG", "0.0", False), ("ENABLE_RUNTIME_CONFIG", "2", True),
    ("DAEMON_LIST", "MASTER, SCHEDD  STARTD", ["MASTER", "SCHEDD", "STARTD"]),
    ("ALLOW_READ", "", []),
    ("START", "KeyboardIdle > $(MINUTE)", "KeyboardIdle > 60"),
    ("RANK", "", ""),
    ("SCHEDD_INTERVAL", "", 300),
    ("MEMORY", "", "detected"),
    ("DISK", "", None),
])
def test_typed_reads(tmp_path, knob, value, expected):
    cfg = load(tmp_path, f"{knob} = {value}\n")
    got = cfg.param(knob)
    if expected == "detected":
        assert got == cfg.param("DETECTED_MEMORY") and got > 0
    else:
        assert got == expected and type(got) is type(expected)


def test_code_defaults_do_not_answer_references(tmp_path):
    # HTCondor has no table default for SCHEDD_INTERVAL, so $(SCHEDD_INTERVAL) is empty there too
    cfg = load(tmp_path, "X = [$(SCHEDD_INTERVAL)]\nY = [$(NEGOTIATOR_INTERVAL)]\n")
    assert (cfg.get("X"), cfg.get("Y")) == ("[]", "[60]")
    assert cfg.param("SCHEDD_INTERVAL") == 300


def test_where_and_default(tmp_path):
    cfg = load(tmp_path, "\nSPOOL = /s\n")
    assert cfg.where("SPOOL") == (str(tmp_path / "htc_config"), 2)
    assert cfg.where("LOG") == "default"
    assert cfg.where("SCHEDD_INTERVAL") == "default"
    assert cfg.where("NOT_A_KNOB") is None
    assert cfg.default("SPOOL") == "$(LOCAL_DIR)/spool"
    assert cfg.default("NOT_A_KNOB") is None


def test_docs_list_every_knob():
    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [p.name for p in PARAMS.values() if f"| `{p.name}` |" not in doc]
    assert not missing, f"docs/configuration.md lacks {missing}; run python -m htc.config.paramdoc"
    begin, end = "<!-- param-table:begin -->\n", "<!-- param-table:end -->"
    assert doc[doc.index(begin) + len(begin):doc.index(end)] == markdown_table(), \
        "the param table in docs/configuration.md is stale; run python -m htc.config.paramdoc"

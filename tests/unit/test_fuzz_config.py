"""Fuzzing the configuration language: every text loads and reads, or raises ConfigError.

Texts are drawn from real statements -- assignments with macros and every macro function,
self references (``B = $(A) $INT(B)``) and mutual ones, ``+=``-style appends, heredocs,
``if``/``elif``/``else``/``endif``, ``include`` of files the test writes (including one
another), ``use`` of metaknobs, ``error``/``warning`` -- and from random lines and bytes,
NUL included. Loading the configuration and then reading every name it defines (and every
typed knob it sets) must succeed or raise :class:`~htc.config.ConfigError`, which names the
file and line: never RecursionError, never another exception, never a hang.

No example runs a command (``include command`` and ``LOCAL_CONFIG_FILE = cmd |`` are
answered by a stub). Bounded for CI; HTC_FUZZ_EXAMPLES raises the count.
"""

from __future__ import annotations

import os
import tempfile
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htc.config import ConfigError, load_config
from htc.config import params

EXAMPLES = int(os.environ.get("HTC_FUZZ_EXAMPLES", "200"))

NAMES = st.sampled_from(["A", "B", "C", "LIST", "N", "SCHEDD.A", "MAX_JOBS_RUNNING", "SPOOL", "LOG",
                         "LOCAL_DIR", "NUM_CPUS", "START", "MAX_JOBS_PER_SUBMISSION", "DAEMON_LIST"])
PIECES = st.sampled_from(["$(A)", "$(B)", "$(C)", "$(N)", "$(LIST)", "$(A:def)", "$(UNDEF:$(A))", "$$(X)",
                          "$(DOLLAR)", "$ENV(HOME)", "$INT(A)", "$INT(B)", "$INT(N,%d)", "$REAL(N)",
                          "$STRING(A)", "$EVAL(N*2)", "$EVAL(B)", "$CHOICE(0,LIST)", "$CHOICE(N,a,b)",
                          "$SUBSTR(A,1)", "$SUBSTR(B,-2,1)", "$RANDOM_CHOICE(a,b)", "$RANDOM_INTEGER(1,9)",
                          "$Fpn(A)", "$BASENAME(B)", "$DIRNAME(A)", "$INT($(B))", "$EVAL($(A)+1)",
                          "1", "0", "-2", "3.5", "true", "false", "a, b, c", "/tmp/x", "(", ")", "$(",
                          "$INT(", "1+1+1+1+1", "((((1))))", "!!!!true", "x\0y", "\\", "#", "é", " "])


@st.composite
def statements(draw) -> str:
    kind = draw(st.integers(0, 12))
    if kind <= 5:
        value = "".join(draw(st.lists(PIECES, max_size=5)))
        return f"{draw(NAMES)} {draw(st.sampled_from(['=', ':', '=', '+=']))} {value}"
    if kind == 6:
        return draw(st.sampled_from(["if defined A", "if $(N)", "if true", "elif false", "else", "endif",
                                     "if version >= 8.0.0", "if $(B) == 1", "if", "elif", "endif"]))
    if kind == 7:
        return draw(st.sampled_from(["include : {inc}", "include ifexist : {inc}", "include : {self}",
                                     "include : /nonexistent/x", "include command : echo A = 1",
                                     "include : echo A = 1 |", "LOCAL_CONFIG_FILE = echo X = 1 |",
                                     "use ROLE : Personal", "use POLICY : Always_Run_Jobs", "use NOPE : x",
                                     "use feature : GPUs", "error : $(A)", "warning : $(B)"]))
    if kind == 8:
        return f"{draw(NAMES)} @=end\n" + "".join(draw(st.lists(PIECES, max_size=3))) + "\n@end"
    if kind == 9:
        return draw(st.binary(max_size=30)).decode("latin-1")
    if kind == 10:  # a reference back to the name being defined, through a function
        name = draw(st.sampled_from(["A", "B", "C"]))
        func = draw(st.sampled_from(["$INT({})", "$REAL({})", "$STRING({})", "$EVAL({})", "$SUBSTR({},1)",
                                     "$CHOICE(0,{})", "$RANDOM_CHOICE({})", "$Fpn({})", "$({})"]))
        other = draw(st.sampled_from(["A", "B", "C", name]))
        return f"{name} = {draw(PIECES)} {func.format(other)}"
    return draw(st.text(max_size=30))


TEXTS = st.lists(statements(), max_size=12).map("\n".join)


def _no_command(self, command, depth, where, what):
    raise ConfigError(f"{what} command '{command}' not run by the fuzz test", file=where[0], line=where[1])


def load_and_read(main_text: str, included_text: str) -> None:
    """Write the two files, load them as a tool and as the schedd, read every name and knob."""
    with tempfile.TemporaryDirectory() as d:
        main, inc = os.path.join(d, "main.conf"), os.path.join(d, "inc.conf")
        with open(inc, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(included_text.replace("{inc}", inc).replace("{self}", inc))
        with open(main, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(main_text.replace("{inc}", inc).replace("{self}", main))
        env = {"HTC_CONFIG": main, "HOME": d}
        with mock.patch("htc.config.loader.Loader._read_command", _no_command):
            for subsystem in (None, "SCHEDD"):
                cfg = load_config(subsystem, env=env)
                for entry in cfg.entries():
                    cfg.get(entry.name)
                    if params.lookup(entry.name) is not None:
                        cfg.param(entry.name)


STATS = {"inputs": 0, "loaded": 0, "config_errors": 0}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(main=TEXTS, included=TEXTS)
def test_every_configuration_loads_or_raises_config_error(main, included):
    STATS["inputs"] += 1
    try:
        load_and_read(main, included)
        STATS["loaded"] += 1
    except ConfigError as exc:
        assert str(exc), "a ConfigError says what is wrong"
        STATS["config_errors"] += 1


@pytest.mark.parametrize("text", [
    "A = 1\nB = $(A) $INT(B)\n", "A = $INT(B)\nB = $(A)\n", "A = $(B)\nB = $(A)\n",
    "A = $SUBSTR(B,1)\nB = $CHOICE(0,A)\n", "A = $EVAL(B)\nB = $STRING(A)\n", "A = $INT($(A)1)\n",
    "A0 = x\n" + "".join(f"A{i} = $SUBSTR(A{i - 1},0)$SUBSTR(A{i - 1},0)\n" for i in range(1, 40)),
    "MAX_JOBS_RUNNING = " + "(" * 3000 + "1" + ")" * 3000 + "\n",
    "MAX_JOBS_RUNNING = " + "1+" * 5000 + "1\n",
    "MAX_JOBS_RUNNING = " + "-" * 5000 + "1\n",
    "LOG = /tmp/lo\0g\n",
])
def test_the_loops_and_bombs_of_the_audit_end_in_a_value_or_a_config_error(text):
    try:
        load_and_read(text, "")
    except ConfigError as exc:
        assert ":" in str(exc)  # file:line (or the knob) named

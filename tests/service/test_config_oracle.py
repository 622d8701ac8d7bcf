"""Our reader against HTCondor's own: the htcondor2 wheel's ``param`` is the oracle.

Each scenario writes a configuration, reads a batch of names with ``htcondor2.param`` in one
fresh ``python -c`` process (CONDOR_CONFIG pointing at the file, ``_CONDOR_`` overrides) and
with :func:`htc.config.load_config` (HTC_CONFIG, ``_HTC_`` overrides), and asserts they agree.
Typed knobs are compared typed; everything else as the expanded text (the wheel's KeyError
for an undefined or empty value equals our None).

Known binding quirk avoided here: ``htcondor2.param`` ignores ``SCHEDD.X`` when no plain
``X`` is defined (daemons do not); scenarios always define the plain name too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from htc.config import ConfigError, load_config, params

htcondor2 = pytest.importorskip("htcondor2", reason="the htcondor wheel is the test oracle (pip install htcondor)")

ORACLE = r"""
import json, sys
request = json.loads(sys.argv[1])
import htcondor2
if request["subsystem"]:
    htcondor2.set_subsystem(request["subsystem"])
    htcondor2.reload_config()
out = {}
for name in request["names"]:
    try:
        out[name] = htcondor2.param[name]
    except KeyError:
        out[name] = None
print(json.dumps(out))
"""

#: detected values both sides can measure identically on any Linux machine
DETECTED = ["HOSTNAME", "FULL_HOSTNAME", "ARCH", "OPSYS", "OPSYSANDVER", "OPSYSMAJORVER", "OPSYSNAME",
            "DETECTED_CPUS", "DETECTED_CORES", "DETECTED_MEMORY", "USERNAME", "CONDOR_VERSION", "SUBSYSTEM"]


def ask_oracle(config: str, names: list[str], *, cwd, subsystem=None, overrides=None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith(("_CONDOR_", "_HTC_")) and k not in ("CONDOR_CONFIG", "HTC_CONFIG")}
    env["CONDOR_CONFIG"] = config
    for key, value in (overrides or {}).items():
        env[key.replace("_HTC_", "_CONDOR_", 1).replace("_htc_", "_condor_", 1)] = value
    done = subprocess.run([sys.executable, "-c", ORACLE, json.dumps({"names": names, "subsystem": subsystem})],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"the oracle failed: {done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def ours(cfg, name):
    p = params.lookup(name)
    try:
        if p is not None and p.type in ("int", "float", "bool"):
            return cfg.param(name)
        return cfg.get(name)
    except ConfigError as exc:
        return f"ERROR: {exc}"


def _unrandom(name: str, value):
    """A default made with ``$RANDOM_INTEGER`` differs at each expansion, on both sides: its
    whole numbers are compared as ``N`` (``(180.0 + -27)`` and ``(180.0 + 8)`` agree)."""
    knob = params.lookup(name)
    if isinstance(value, str) and knob is not None and "$RANDOM_" in (knob.default or ""):
        return re.sub(r"(?<![\d.])-?\d+(?![\d.])", "N", value)
    return value


def agree_knob(name: str, mine, theirs) -> bool:
    """:func:`agree` for knob ``name``, with random defaults' numbers set aside."""
    return agree(_unrandom(name, mine), _unrandom(name, theirs))


def agree(mine, theirs) -> bool:
    if theirs is None:
        return mine in (None, "")
    if isinstance(theirs, bool) or isinstance(mine, bool):
        return str(mine).lower() == str(theirs).lower()
    if isinstance(theirs, (int, float)) and isinstance(mine, (int, float)):
        return mine == theirs
    return str(mine) == str(theirs)


def compare(tmp_path, monkeypatch, text, names, *, subsystem=None, overrides=None, files=None):
    for rel, body in (files or {}).items():
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body.replace("{tmp}", str(tmp_path)))
    config = tmp_path / "condor_config"
    config.write_text(text.replace("{tmp}", str(tmp_path)))
    theirs = ask_oracle(str(config), names, cwd=tmp_path, subsystem=subsystem, overrides=overrides)
    monkeypatch.chdir(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("_CONDOR_", "_HTC_"))}
    env.update(HTC_CONFIG=str(config), HTC_HOME=str(tmp_path / "home"), **(overrides or {}))
    cfg = load_config(subsystem, env=env)
    mismatches = {n: (ours(cfg, n), theirs[n]) for n in names if not agree_knob(n, ours(cfg, n), theirs[n])}
    assert not mismatches, "ours vs HTCondor's:\n" + "\n".join(
        f"  {n}: {m!r} vs {t!r}" for n, (m, t) in sorted(mismatches.items()))
    return cfg, theirs


def table_names(origin="table"):
    return [p.name for p in params.PARAMS.values() if p.origin == origin]


def test_param_table_defaults(tmp_path, monkeypatch):
    """Every table default, and the detected values, equal HTCondor's with no configuration."""
    theirs = ask_oracle("ONLY_ENV", table_names() + DETECTED + table_names("code") + table_names("htc")
                        + table_names("changed"), cwd=tmp_path)
    cfg = load_config(env={"HTC_CONFIG": "ONLY_ENV"})
    bad = {n: (ours(cfg, n), theirs[n]) for n in table_names() + DETECTED if not agree_knob(n, ours(cfg, n), theirs[n])}
    assert not bad, bad
    # knobs declared as HTCondor built-ins or htc's own must really be absent from HTCondor's table
    assert {n: theirs[n] for n in table_names("code") + table_names("htc") if theirs[n] is not None} == {}
    # knobs whose default htc changed on purpose are in HTCondor's table, with another default
    # that their doc names
    changed = {n: (ours(cfg, n), theirs[n]) for n in table_names("changed")}
    assert changed and all(t is not None and not agree(o, t) for o, t in changed.values()), changed
    assert all(_names_default(params.lookup(n).doc, theirs[n], cfg) for n in changed), changed


def _names_default(doc: str, theirs, cfg) -> bool:
    """The doc says HTCondor's default: the value itself, or the macro it is made of
    (``$(UID_DOMAIN)``, whose value here is HTCondor's)."""
    if f"HTCondor's default: {theirs}" in doc:
        return True
    macro = re.search(r"HTCondor's default: \$\((\w+)\)", doc)
    return macro is not None and agree(ours(cfg, macro[1]), theirs)


def test_defaults_follow_the_layout(tmp_path, monkeypatch):
    layout = ("LOCAL_DIR = /x/local\nRELEASE_DIR = /opt/r\nLOG = /y/log\nLOCK = /z/lock\n"
              "CONDOR_HOST = cm.example.org\nUPDATE_INTERVAL = 17\nMaxVacateTime = 7\nMINUTE = 61\n"
              "UID_DOMAIN = u.example\nDETECTED_CPUS_LIMIT = 1\nCOLLECTOR_PORT = 9999\n")
    compare(tmp_path, monkeypatch, layout, table_names())


SYNTAX = r"""
A = hello
b_lower = x
LIST = one, two
LIST = $(LIST), three
CONT = first \
   second
CONT2 = first\
   second
TRAIL = x \

AFTER = after
# comment \
NOTCONT = notcont
CCOM = one \
# comment here
CCOM2 = one \
# here \
  two
ML @=end
   line one
  line two
# dropped
@end
HD = x $(HD)
U = [$(UNDEF_X)]
UE = $(UNDEF_X)
D = $(UNDEFINED_KNOB:fallback value)
H =
I = $(H:dflt)
J = $(NOT_DEF:a,b c)
K = $(NOT_DEF:a$(J)b)
NEST = $(A:x) $(B_UNSET:$(C_UNSET:y))
L = $(UPDATE_INTERVAL)
M = $(A B)
N = $(ANY
O = val # not a comment
  P   =   spaced   
[section]
Q = $(q_low)
q_low = lower
R = pre$(DOLLAR)(X)post
S = $$(X) $$([1+2])
PFX = name
$(PFX)_SUFFIX = expanded name
APP = a
APP += b
APP += $(APP)
NEWAPP += b
DAEMON_LIST += SCHEDD
WORD B = ignored word
G : colon value
LATE = $(LATER)
LATER = later
EN = $ENV(NOPE_NOT_SET:dflt)
EN2 = [$ENV(NOPE_NOT_SET)]
EN3 = $ENV(HTC_ORACLE_VAR)
WANT_SUSPEND = false
START = true
SUB = $(SUBSYSTEM)
"""

SYNTAX_NAMES = ["A", "B_LOWER", "LIST", "CONT", "CONT2", "TRAIL", "AFTER", "NOTCONT", "CCOM", "CCOM2", "ML",
                "HD", "U", "UE", "D", "H", "I", "J", "K", "NEST", "L", "M", "N", "O", "P", "Q", "R", "S",
                "NAME_SUFFIX", "APP", "NEWAPP", "DAEMON_LIST", "WORD", "G", "LATE", "EN", "EN2", "EN3",
                "WANT_SUSPEND", "START", "SUB"]


def test_syntax(tmp_path, monkeypatch):
    monkeypatch.setenv("HTC_ORACLE_VAR", "from-env")
    compare(tmp_path, monkeypatch, SYNTAX, SYNTAX_NAMES)


FUNCTIONS = r"""
N = 3+4
I = $INT(N)
R = $REAL(N)
N2 = 3.5*2
R2 = $REAL(N2)
I3 = $INT(3.7)
IB = $INT(true)
IFMT = $INT(5,%03d)
ILIT = $INT(N,0,3)
RF = $REAL(2,%.2f)
RF0 = $REAL(2,%.0f)
RBIG = $REAL(1e300)
RSMALL = $REAL(0.1)
STRQ = $STRING("quoted")
STRP = $STRING(plain text)
C = $CHOICE(1, zero, one, two)
X = 5
CX = $CHOICE(X, a,b,c,d,e,f,g)
CL = $CHOICE(2, CLIST)
CLIST = a, b, c
LIST = abcdef
S = $SUBSTR(LIST, 0, 3)
S2 = $SUBSTR(LIST, -3)
S3 = $SUBSTR(LIST, 1, -1)
RI = $RANDOM_INTEGER(4,4)
RC = $RANDOM_CHOICE(only)
FN = $Fn(/a/b/c.txt)
FNX = $Fnx(/a/b/c.txt)
FP = $Fp(/a/b/c.txt)
FQ = $Fq(/a/b/c.txt)
FD = $Fd(/a/b/c.txt)
FDD = $Fdd(/a/b/c.txt)
FX = $Fx(/a/b/c.txt)
FPN = $Fpn(/a/b/c.txt)
FB = $Fb(/a/b/c.txt)
FPB = $Fpb(/a/b/c.txt)
FXB = $Fxb(/a/b/c.txt)
FW = $Fw(/a/b/c.txt)
FM = $F(LIST)
MYP = /x/y/z.tar.gz
FNM = $Fn(MYP)
FXM = $Fx(MYP)
BN = $BASENAME(/a/b/c.txt)
DN = $DIRNAME(/a/b/c.txt)
EV = $EVAL(1+2)
EV2 = $EVAL(X)
EV3 = $EVAL("a" + "b")
EV4 = $EVAL(strcat("a","b"))
EV5 = $EVAL(10/4)
EV6 = $EVAL(10.0/4)
EV7 = $EVAL(1 < 2)
EVU = $EVAL(undefined)
EVL = $EVAL({1,2})
EVZ = $EVAL(1/0)
EVB = $EVAL(true + 1)
EVN = $EVAL(-7 / 2)
EVS = $EVAL("abc" == "ABC")
EVI = $EVAL(2147483648 * 4)
EVIF = $EVAL(ifThenElse(1 > 0, "y", "n"))
EVM = $EVAL(7 % 3)
"""


def test_functions(tmp_path, monkeypatch):
    names = [line.split("=")[0].strip() for line in FUNCTIONS.strip().splitlines()]
    compare(tmp_path, monkeypatch, FUNCTIONS, names)


CONDITIONALS = "\n".join(
    f"if {cond}\n  C{i} = yes\nelse\n  C{i} = no\nendif" for i, cond in enumerate([
        "true", "false", "1", "0", "1.5", "-1", "0.0", "yes", "t", "no", "f", "! 0", "!true", "defined X",
        "defined NOPE", "!defined NOPE", "defined EMPTY", "defined UPDATE_INTERVAL", "defined 0",
        "defined use ROLE:Personal", "defined use ROLE", "defined use ROLE:Nope", "version >= 9.0.0",
        "version > 99.0", "version >= 25.14", "version == 25.14.1", "version < 8.0.0", "version != 8.0.0",
        "$(X)", "$(TRUTHY)", "$(UNDEF_Z)", "! $(UNDEF_Z)", "defined LATER",
    ]))
NESTED = """
if false
  E1 = 1
elif 2
  E1 = 2
else
  E1 = 3
endif
if true
  if false
    E2 = inner
  else
    E2 = innerelse
  endif
endif
if false
  if true
    E3 = x
  endif
else
  E3 = outerelse
endif
IF TRUE
E4 = upper
ENDIF
if true
:E5 = colon
endif
"""


def test_conditionals(tmp_path, monkeypatch):
    text = "X = 1\nEMPTY =\nTRUTHY = true\n" + CONDITIONALS + NESTED + "LATER = 1\n"
    compare(tmp_path, monkeypatch, text, [f"C{i}" for i in range(33)] + ["E1", "E2", "E3", "E4", "E5"])


def test_includes_local_files_and_environment(tmp_path, monkeypatch):
    files = {
        "inc/one.cfg": "INC_A = from_inc\nORDER = include\n",
        "ld/00a": "ORDER = dir00\nDIRX = a\nSEEN = $(SEEN) 00a\n",
        "ld/10b": "ORDER = dir10\nSEEN = $(SEEN) 10b\n",
        "ld/99c.rpmsave": "ORDER = rpmsave\n",
        "ld/99d~": "ORDER = tilde\n",
        "ld/.hidden": "ORDER = hidden\n",
        "lcf": "ORDER = lcf\nLCF2 = $(ORDER)\nSEEN = $(SEEN) lcf\nENVD = file\n",
        "lcf_first": "FIRST = 1\nLOCAL_CONFIG_FILE = {tmp}/lcf\n",
    }
    text = ("SEEN = main\nLIST = one\nORDER = main\ninclude : inc/one.cfg\ninclude ifexist : inc/nope.cfg\n"
            "AFTER_INC = $(ORDER)\nLOCAL_CONFIG_DIR = {tmp}/ld\nLOCAL_CONFIG_FILE = {tmp}/lcf_first\n")
    overrides = {"_HTC_LIST": "$(LIST) four", "_HTC_ENVD": "env", "_htc_lower": "lw", "_HTC_NEWX": "  lead"}
    compare(tmp_path, monkeypatch, text,
            ["INC_A", "AFTER_INC", "ORDER", "DIRX", "SEEN", "LCF2", "FIRST", "LIST", "ENVD", "LOWER", "NEWX"],
            overrides=overrides, files=files)


POLICY_NAMES = ["START", "SUSPEND", "CONTINUE", "PREEMPT", "KILL", "WANT_SUSPEND", "WANT_VACATE", "IS_OWNER",
                "MaxJobRetirementTime", "CLAIM_WORKLIFE", "PREEMPTION_REQUIREMENTS", "PREEMPTION_RANK",
                "NEGOTIATOR_CONSIDER_PREEMPTION", "NEGOTIATOR_PRE_JOB_RANK", "NEGOTIATOR_POST_JOB_RANK",
                "SLOTS_CONNECTED_TO_KEYBOARD", "SLOTS_CONNECTED_TO_CONSOLE", "STARTD_LATCH_EXPRS",
                "CpuBusyTimer", "KeyboardBusy", "ConsoleBusy", "KeyboardNotBusy", "JustCPU", "MachineBusy",
                "NonCondorLoadAvg", "CpuIdle", "CpuBusy", "ActivationTimer", "LastCkpt", "PolicyExprFragments",
                "DAEMON_LIST", "CONDOR_HOST", "COLLECTOR_HOST", "RunBenchmarks", "WANT_HOLD",
                "WANT_HOLD_REASON", "WANT_HOLD_SUBCODE", "MAXJOBRETIREMENTTIME", "STARTD_ATTRS", "CpusUsage"]


@pytest.mark.parametrize("uses", [
    "use ROLE : Personal\nuse POLICY : Desktop",
    "use ROLE : Submit, Execute\nuse POLICY : Always_Run_Jobs",
    "use ROLE : CentralManager Submit\nuse POLICY : UWCS_Desktop",
    "use role : personal\nuse POLICY : Limit_Job_Runtimes(100)",
    "use POLICY : Hold_If_Memory_Exceeded\nuse POLICY : Preempt_If_Cpus_Exceeded\n"
    "use POLICY : Hold_If_Runtime_Exceeds(3600)",
    "use POLICY : Preempt_If_Disk_Exceeded\nTOO_LONG = (time() - JobStart) > 10\n"
    "use POLICY : Want_Hold_If(TOO_LONG, 7, ran too long)",
], ids=["personal-desktop", "submit-execute-always", "cm-uwcs", "limit-runtimes", "hold-preempt", "want-hold-if"])
def test_role_and_policy_templates(tmp_path, monkeypatch, uses):
    extra = ["MAX_JOB_RUNTIME", "HOLD_REASON_RUNTIME_EXCEEDS", "HOLD_RUNTIME_EXCEEDS", "MEMORY_EXCEEDED",
             "CPU_EXCEEDED", "DISK_EXCEEDED", "HOLD_REASON_MEMORY_EXCEEDED", "UWCS_START", "UWCS_SUSPEND"]
    compare(tmp_path, monkeypatch, uses + "\n", POLICY_NAMES + extra)


def test_feature_and_security_templates(tmp_path, monkeypatch):
    text = ("use FEATURE : PartitionableSlot(2, cpus=2, mem=30%)\nuse FEATURE : StaticSlots(3)\n"
            "use FEATURE : StaticSlots(4, 2, cpus=1)\nuse FEATURE : StartdCronPeriodic(probe, 60, /bin/true, -x)\n"
            "use FEATURE : REMOTE_CONFIG(A B)\nuse SECURITY : recommended\nuse SECURITY : USER_BASED\n"
            "use SECURITY : WITH_AUTHENTICATION\n")
    names = ["NUM_SLOTS_TYPE_2", "SLOT_TYPE_2", "SLOT_TYPE_2_PARTITIONABLE", "NUM_SLOTS_TYPE_3", "SLOT_TYPE_3",
             "SLOT_TYPE_3_PARTITIONABLE", "NUM_SLOTS_TYPE_4", "SLOT_TYPE_4", "STARTD_CRON_JOBLIST",
             "STARTD_CRON_probe_MODE", "STARTD_CRON_probe_PERIOD", "STARTD_CRON_probe_EXECUTABLE",
             "STARTD_CRON_probe_ARGS", "ENABLE_RUNTIME_CONFIG", "ENABLE_PERSISTENT_CONFIG", "PERSISTENT_CONFIG_DIR",
             "SETTABLE_ATTRS_CONFIG", "ALLOW_CONFIG", "SECURITY_MODEL", "SEC_DEFAULT_ENCRYPTION",
             "SEC_DEFAULT_INTEGRITY", "SEC_DEFAULT_AUTHENTICATION", "SEC_READ_AUTHENTICATION",
             "SEC_CLIENT_AUTHENTICATION", "ALLOW_ADMINISTRATOR", "ALLOW_DAEMON", "ALLOW_NEGOTIATOR",
             "ALLOW_WRITE", "ALLOW_READ", "authuser"]
    compare(tmp_path, monkeypatch, text, names)


def test_subsystem_prefixes(tmp_path, monkeypatch):
    text = ("FOO = global\nSCHEDD.FOO = schedd_foo\nBAZ = $(FOO)-baz\nSUB = $(SUBSYSTEM)\nL = a\n"
            "SCHEDD.L = $(L) b\nMAX_JOBS_RUNNING = 100\nschedd.MAX_JOBS_RUNNING = 20\nSTARTD.FOO = startd\n"
            "if defined FOO\n  SEEN_FOO = yes\nendif\n")
    names = ["FOO", "BAZ", "SUB", "L", "MAX_JOBS_RUNNING", "SCHEDD.FOO", "SEEN_FOO", "LOCALNAME"]
    compare(tmp_path, monkeypatch, text, names, subsystem="SCHEDD")
    compare(tmp_path, monkeypatch, text, names)

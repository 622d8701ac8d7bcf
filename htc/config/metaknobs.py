"""Metaknob templates: ``use ROLE : Personal``, ``use POLICY : Desktop``, ``use FEATURE : ...``.

Theory of operation
-------------------
A metaknob is a named block of configuration statements. ``use CATEGORY : Name(args)``
parses the block as if it were written at that line. Before parsing, the block's
*meta arguments* are substituted from ``args`` (a comma-separated list, empty items
dropped as HTCondor's tokenizer drops them):

=============  ==================================================================
``$(0)``       all the arguments          ``$(0#)`` how many   ``$(0?)`` 1 if any
``$(N)``       argument N (from 1)        ``$(N?)`` 1 if argument N is non-empty
``$(N+)``      arguments N and after      ``$(N:default)`` / ``$(N+:default)``
=============  ==================================================================

The template texts are HTCondor 25.14's own (they come from its param table), so that
``use POLICY : Desktop`` yields exactly the expressions the wheel's reader produces. Only
categories and templates that make sense for htc are included; ``htc config_val use ROLE``
lists them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from htc.config.macros import _classify_meta, find_macro

__all__ = ["Template", "TEMPLATES", "find_template", "has_template", "expand_meta_args",
           "categories"]


@dataclass(frozen=True)
class Template:
    """One metaknob: its category, name (as HTCondor spells it), a description and its body."""

    category: str
    name: str
    description: str
    body: str


_POLICY_EXPR_FRAGMENTS = """\
PolicyExprFragments=1
KeyboardBusy=(KeyboardIdle < $(MINUTE))
ConsoleBusy=(ConsoleIdle  < $(MINUTE))
KeyboardNotBusy=($(KeyboardBusy) == False)
JustCPU=($(CPUBusy) && ($(KeyboardBusy) == False))
MachineBusy=($(CPUBusy) || $(KeyboardBusy))
NonCondorLoadAvg=(LoadAvg - CondorLoadAvg)
CpuIdle=($(NonCondorLoadAvg) <= $(BackgroundLoad))
CpuBusy=($(NonCondorLoadAvg) >= $(HighLoad))
ActivationTimer=ifThenElse(JobStart =!= UNDEFINED, (time() - JobStart), 0)
LastCkpt=(time() - LastPeriodicCheckpoint)"""

_DESKTOP = """\
if ! defined PolicyExprFragments
  use FEATURE : POLICY_EXPR_FRAGMENTS
endif
STARTD_LATCH_EXPRS = $(STARTD_LATCH_EXPRS) CpuBusy
CpuBusyTimer=IfThenElse(CpuBusyValue is 1, time() - CpuBusyTime, 0)
WANT_SUSPEND=($(SmallJob) || $(KeyboardNotBusy) || $(IsVanilla) ) && ( $(SUSPEND))
WANT_VACATE=$(ActivationTimer) > 600 || $(IsVanilla)
SUSPEND=($(KeyboardBusy) || ( ($(CpuBusyTimer) > 120) && $(ActivationTimer) > 90))
CONTINUE=($(CPUIdle) && ($(ActivityTimer) > 10) && (KeyboardIdle > $(ContinueIdleTime)))
PREEMPT=(((Activity == "Suspended") && ($(ActivityTimer) > $(MaxSuspendTime))) || (SUSPEND && (WANT_SUSPEND == False)))
START=((KeyboardIdle > $(StartIdleTime)) && ( $(CPUIdle) || (State != "Unclaimed" && State != "Owner")) )
KILL=False
MaxJobRetirementTime=0
CLAIM_WORKLIFE=
SLOTS_CONNECTED_TO_KEYBOARD=1000000
SLOTS_CONNECTED_TO_CONSOLE=1000000
IS_OWNER=(START =?= False)"""

_ALWAYS_RUN_JOBS = """\
WANT_SUSPEND=False
WANT_VACATE=True
SUSPEND=False
CONTINUE=True
PREEMPT=False
START=True
KILL=False
PREEMPTION_REQUIREMENTS=False
NEGOTIATOR_CONSIDER_PREEMPTION=False
MaxJobRetirementTime=2147483647
CLAIM_WORKLIFE=1200"""

_UWCS_VALUES = """\
if ! defined PolicyExprFragments
  use FEATURE : POLICY_EXPR_FRAGMENTS
endif
STARTD_LATCH_EXPRS = $(STARTD_LATCH_EXPRS) CpuBusy
CpuBusyTimer=IfThenElse(CpuBusyValue is 1, time() - CpuBusyTime, 0)
UWCS_WANT_SUSPEND=( $(SmallJob) || $(KeyboardNotBusy) || $(IsVanilla) ) && ( $(SUSPEND) )
UWCS_WANT_VACATE=( $(ActivationTimer) > 10 * $(MINUTE) || $(IsVanilla) )
UWCS_START=( (KeyboardIdle > $(StartIdleTime)) && ( $(CPUIdle) || (State != "Unclaimed" && State != "Owner")) )
UWCS_SUSPEND=( $(KeyboardBusy) || ( ($(CpuBusyTimer) > 2 * $(MINUTE)) && $(ActivationTimer) > 90 ) )
UWCS_CONTINUE=( $(CPUIdle) && ($(ActivityTimer) > 10) && (KeyboardIdle > $(ContinueIdleTime)) )
UWCS_PREEMPT=( ((Activity == "Suspended") && ($(ActivityTimer) > $(MaxSuspendTime))) || (SUSPEND && (WANT_SUSPEND == False)) )
UWCS_MaxJobRetirementTime=0
UWCS_KILL=false
UWCS_PERIODIC_CHECKPOINT=$(LastCkpt) > (3 * $(HOUR) + $RANDOM_INTEGER(-30,30,1) * $(MINUTE) )
UWCS_NEGOTIATOR_PRE_JOB_RANK=(10000000 * My.Rank) + (1000000 * (RemoteOwner =?= UNDEFINED)) - (100000 * Cpus) - Memory
UWCS_NEGOTIATOR_POST_JOB_RANK=(RemoteOwner =?= UNDEFINED) * (ifthenElse(isUndefined(KFlops), 1000, Kflops) - SlotID - 1.0e10*(Offline=?=True))
UWCS_PREEMPTION_REQUIREMENTS=((SubmitterGroup =?= RemoteGroup) && ($(StateTimer) > (1 * $(HOUR))) && (RemoteUserPrio > TARGET.SubmitterUserPrio * 1.2)) || (MY.NiceUser == True)
UWCS_PREEMPTION_RANK=(RemoteUserPrio * 1000000) - ifThenElse(isUndefined(TotalJobRuntime), 0, TotalJobRuntime)"""

_UWCS_DESKTOP = """\
use FEATURE : UWCS_DESKTOP_POLICY_VALUES
WANT_SUSPEND=$(UWCS_WANT_SUSPEND)
WANT_VACATE=$(UWCS_WANT_VACATE)
SUSPEND=$(UWCS_SUSPEND)
CONTINUE=$(UWCS_CONTINUE)
PREEMPT=$(UWCS_PREEMPT)
START=$(UWCS_START)
KILL=$(UWCS_KILL)
PERIODIC_CHECKPOINT=$(UWCS_PERIODIC_CHECKPOINT)
PREEMPTION_REQUIREMENTS=$(UWCS_PREEMPTION_REQUIREMENTS)
PREEMPTION_RANK=$(UWCS_PREEMPTION_RANK)
NEGOTIATOR_PRE_JOB_RANK=$(UWCS_NEGOTIATOR_PRE_JOB_RANK)
NEGOTIATOR_POST_JOB_RANK=$(UWCS_NEGOTIATOR_POST_JOB_RANK)
MaxJobRetirementTime=$(UWCS_MaxJobRetirementTime)
CLAIM_WORKLIFE=$(UWCS_CLAIM_WORKLIFE)
SLOTS_CONNECTED_TO_KEYBOARD=1024*1024
IS_OWNER=(START =?= False)"""

_TESTINGMODE_VALUES = """\
TESTINGMODE_WANT_SUSPEND=False
TESTINGMODE_WANT_VACATE=True
TESTINGMODE_START=True
TESTINGMODE_SUSPEND=False
TESTINGMODE_CONTINUE=True
TESTINGMODE_PREEMPT=False
TESTINGMODE_KILL=False
TESTINGMODE_PERIODIC_CHECKPOINT=False
TESTINGMODE_PREEMPTION_REQUIREMENTS=False
TESTINGMODE_PREEMPTION_RANK=0
TESTINGMODE_CLAIM_WORKLIFE=1200"""

_PREEMPT_IF = """\
if !$(1?)
  error : use POLICY : PREEMPT_IF requires an argument. It should be the name of a config variable that has the trigger expression.
endif
if defined PREEMPT
  PREEMPT = $($(1)) || $(PREEMPT)
else
  PREEMPT = $($(1))
endif
MAXJOBRETIREMENTTIME = ifthenelse($($(1)),-1,$(MAXJOBRETIREMENTTIME:0))
if defined WANT_SUSPEND
  WANT_SUSPEND = $($(1)) =!= true && $(WANT_SUSPEND)
else
  WANT_SUSPEND = $($(1)) =!= true
endif"""

_WANT_HOLD_IF = """\
use POLICY : PREEMPT_IF($(1))
if ! $(3?)
  error : use POLICY : WANT_HOLD_IF requires 3 arguments: policy_variable, subcode, reason_text
endif
if defined WANT_HOLD
  WANT_HOLD = (JobUniverse != 1 && $($(1))) || $(WANT_HOLD)
else
  WANT_HOLD = (JobUniverse != 1 && $($(1)))
endif
WANT_HOLD_SUBCODE = ifThenElse($($(1)), $(2) , $(WANT_HOLD_SUBCODE:UNDEFINED))
WANT_HOLD_REASON = ifThenElse($($(1)), "$(3+)", $(WANT_HOLD_REASON:UNDEFINED))"""

_PUBLISH_CPUS_USAGE = """\
CpusUsage = ifthenelse(TotalLoadAvg > 0.0 && Activity!="Idle", CondorLoadAvg/TotalLoadAvg*MIN({TotalLoadAvg, $(DETECTED_CORES)}), 0)
STARTD_ATTRS = $(STARTD_ATTRS) CpusUsage"""

_EXCEEDED = {
    "CPUS": ("CPU_EXCEEDED = (CpusUsage > Cpus + 0.8)", "CPU usage exceeded request_cpus", 101),
    "DISK": ("DISK_EXCEEDED = (JobUniverse != 13 && DiskUsage =!= UNDEFINED && DiskUsage > Disk)",
             "disk usage exceeded allocated disk", 104),
    "MEMORY": ("MEMORY_EXCEEDED = (JobUniverse != 13 && MemoryUsage =!= UNDEFINED && MemoryUsage > Memory)",
               "memory usage exceeded request_memory", 102),
}


def _preempt_if_exceeded(kind: str) -> str:
    definition = _EXCEEDED[kind][0]
    var = definition.split(" ", 1)[0]
    head = "use POLICY : STARTD_PUBLISH_CpusUsage\n" if kind == "CPUS" else ""
    return f"{head}{definition}\nuse POLICY : PREEMPT_IF({var})"


def _hold_if_exceeded(kind: str) -> str:
    definition, reason, subcode = _EXCEEDED[kind]
    var = definition.split(" ", 1)[0]
    head = "use POLICY : STARTD_PUBLISH_CpusUsage\n" if kind == "CPUS" else ""
    return (f"{head}{definition}\nHOLD_REASON_{var} = {reason}\n"
            f"use POLICY : WANT_HOLD_IF( {var}, $(HOLD_SUBCODE_{var}:{subcode}), $(HOLD_REASON_{var}) )")


def _cron_hook(mode: str, nargs: int) -> str:
    usage = {"OneShot": "OneShotCronHook requires at least 3 arguments: STARTD_CRON | SCHEDD_CRON, tag, hook_exe [,hook_args]",
             "Periodic": "PeriodicCronHook requires at least 4 arguments: STARTD_CRON | SCHEDD_CRON, tag, period, hook_exe [,hook_args]",
             "WaitForExit": "ContinuousCronHook requires at least 3 arguments: STARTD_CRON | SCHEDD_CRON, tag, hook_exe [,hook_args]"}[mode]
    lines = [f"if ! $({nargs}?)", f"  error : use FEATURE : {usage}", "endif",
             "$(1)_JOBLIST=$($(1)_JOBLIST) $(2)", f"$(1)_$(2)_MODE={mode}"]
    if mode == "OneShot":
        lines += ["$(1)_$(2)_KILL=true", "$(1)_$(2)_RECONFIG_RERUN=true", "$(1)_$(2)_EXECUTABLE=$(3)"]
    elif mode == "Periodic":
        lines += ["$(1)_$(2)_PERIOD=$(3)", "$(1)_$(2)_EXECUTABLE=$(4)"]
    else:
        lines += ["$(1)_$(2)_PERIOD=0", "$(1)_$(2)_EXECUTABLE=$(3)"]
    lines += [f"if $({nargs + 1}?)", f"  $(1)_$(2)_ARGS=$({nargs + 1})", "endif"]
    return "\n".join(lines)


_RECOMMENDED_V24 = """\
SECURITY_MODEL = 24.0
use security:strong
SEC_READ_AUTHENTICATION = OPTIONAL
SEC_CLIENT_AUTHENTICATION = OPTIONAL
ALLOW_ADMINISTRATOR = $(1:condor)@* condor@password $(2:root@*) $(3+)
ALLOW_DAEMON = $(1:condor)@*  condor@password
ALLOW_NEGOTIATOR = $(1:condor)@* condor@password
ALLOW_WRITE = *
ALLOW_READ = *"""

_RECOMMENDED_V9 = """\
SECURITY_MODEL = 9.0
use security:strong
SEC_READ_AUTHENTICATION = OPTIONAL
SEC_READ_ENCRYPTION = OPTIONAL
SEC_READ_INTEGRITY = OPTIONAL
ALLOW_ADMINISTRATOR = $(1:condor)@* condor_pool@* $(2:root@*) $(3+)
ALLOW_DAEMON = $(1:condor)@*  condor_pool@*
ALLOW_NEGOTIATOR = $(1:condor)@* condor_pool@*
ALLOW_WRITE = *
ALLOW_READ = *"""

_HOST_BASED = """\
ALLOW_ADMINISTRATOR=$(CONDOR_HOST)
ALLOW_READ=*
ALLOW_WRITE=$(FULL_HOSTNAME) $(IPV4_ADDRESS) $(IPV6_ADDRESS)
ALLOW_DAEMON=$(FULL_HOSTNAME) $(IPV4_ADDRESS) $(IPV6_ADDRESS)
ALLOW_NEGOTIATOR=$(CONDOR_HOST)
ALLOW_NEGOTIATOR_SCHEDD=$(ALLOW_NEGOTIATOR) $(FLOCK_NEGOTIATOR_HOSTS)
ALLOW_WRITE_COLLECTOR=$(ALLOW_WRITE) $(FLOCK_FROM)
ALLOW_WRITE_STARTD=$(ALLOW_WRITE) $(FLOCK_FROM)
ALLOW_READ_COLLECTOR=$(ALLOW_READ) $(FLOCK_FROM)
ALLOW_READ_STARTD=$(ALLOW_READ) $(FLOCK_FROM)
LEGACY_ALLOW_SEMANTICS = TRUE"""

_USER_BASED = """\
if $(CondorIsAdmin)
  authuser=condor
else
  authuser=$(USERNAME)
endif
use security:recommended($(authuser))
if ! $(CondorIsAdmin)
  ALLOW_WRITE = $(authuser)@$(UID_DOMAIN)
endif"""

_LIST = [
    ("ROLE", "Personal", "Settings for Personal HTCondor (i.e. the whole pool is on a single machine)",
     "CONDOR_HOST=127.0.0.1\nCOLLECTOR_HOST=$(CONDOR_HOST):0\n"
     "DAEMON_LIST=MASTER COLLECTOR NEGOTIATOR STARTD SCHEDD\nRunBenchmarks=0"),
    ("ROLE", "Submit", "Settings for an access point (runs a schedd)", "DAEMON_LIST=$(DAEMON_LIST) SCHEDD"),
    ("ROLE", "Execute", "Settings for an execution point (runs a startd)", "DAEMON_LIST=$(DAEMON_LIST) STARTD"),
    ("ROLE", "CentralManager", "Settings for the central manager (collector and negotiator)",
     "DAEMON_LIST=$(DAEMON_LIST) COLLECTOR NEGOTIATOR"),
    ("POLICY", "Desktop", "Run jobs only when the owner is away; suspend, then evict, when the owner returns",
     _DESKTOP),
    ("POLICY", "Always_Run_Jobs", "Never suspend or preempt jobs (the default dedicated-machine policy, made explicit)",
     _ALWAYS_RUN_JOBS),
    ("POLICY", "UWCS_Desktop", "The UW-Madison CS desktop policy of HTCondor 7.x", _UWCS_DESKTOP),
    ("POLICY", "Limit_Job_Runtimes", "Evict jobs after a run time, args: ([limit_in_seconds]) default 24 hours",
     "MAX_JOB_RUNTIME=$(1:24*3600)\nMaxJobRetirementTime=$(MAX_JOB_RUNTIME)+120\n"
     'PREEMPT=(Activity == "Busy") && ((time() - EnteredCurrentActivity) > $(MAX_JOB_RUNTIME))'),
    ("POLICY", "Preempt_If_Runtime_Exceeds", "Preempt jobs running longer than args: ([limit_in_seconds])",
     "MAX_JOB_RUNTIME = $(1:24*3600)\n"
     'PREEMPT_RUNTIME_EXCEEDS = (JobState == "Running") && ((time() - JobCurrentStartDate) > $(MAX_JOB_RUNTIME))\n'
     "use policy : PREEMPT_IF( PREEMPT_RUNTIME_EXCEEDS )"),
    ("POLICY", "Hold_If_Runtime_Exceeds", "Hold jobs running longer than args: ([limit_in_seconds])",
     "MAX_JOB_RUNTIME = $(1:24*3600)\n"
     "HOLD_REASON_RUNTIME_EXCEEDS = runtime exceeded maximum ($(MAX_JOB_RUNTIME) seconds)\n"
     'HOLD_RUNTIME_EXCEEDS = (JobState == "Running") && ((time() - JobCurrentStartDate) > $(MAX_JOB_RUNTIME))\n'
     "use policy : WANT_HOLD_IF( HOLD_RUNTIME_EXCEEDS, $(HOLD_SUBCODE_RUNTIME_EXCEEDS:103), $(HOLD_REASON_RUNTIME_EXCEEDS) )"),
    ("POLICY", "Startd_Publish_CpusUsage", "Publish CpusUsage in slot ads", _PUBLISH_CPUS_USAGE),
    ("POLICY", "Preempt_If_Cpus_Exceeded", "Preempt jobs that use more cores than their slot", _preempt_if_exceeded("CPUS")),
    ("POLICY", "Hold_If_Cpus_Exceeded", "Hold jobs that use more cores than their slot", _hold_if_exceeded("CPUS")),
    ("POLICY", "Preempt_If_Disk_Exceeded", "Preempt jobs that use more disk than their slot", _preempt_if_exceeded("DISK")),
    ("POLICY", "Hold_If_Disk_Exceeded", "Hold jobs that use more disk than their slot", _hold_if_exceeded("DISK")),
    ("POLICY", "Preempt_If_Memory_Exceeded", "Preempt jobs that use more memory than their slot", _preempt_if_exceeded("MEMORY")),
    ("POLICY", "Hold_If_Memory_Exceeded", "Hold jobs that use more memory than their slot", _hold_if_exceeded("MEMORY")),
    ("POLICY", "Preempt_If", "Preempt when a trigger expression is true, args: (policy_variable)", _PREEMPT_IF),
    ("POLICY", "Want_Hold_If", "Hold when a trigger expression is true, args: (policy_variable, subcode, reason_text)",
     _WANT_HOLD_IF),
    ("FEATURE", "POLICY_EXPR_FRAGMENTS", "Expression fragments used by the desktop policies", _POLICY_EXPR_FRAGMENTS),
    ("FEATURE", "UWCS_DESKTOP_POLICY_VALUES", "Values used by the UWCS_Desktop policy", _UWCS_VALUES),
    ("FEATURE", "TESTINGMODE_POLICY_VALUES", "Values of the HTCondor 7.x TESTINGMODE policy", _TESTINGMODE_VALUES),
    ("FEATURE", "PartitionableSlot", "A partitionable slot, args: ([type# [, allocation]]) default 1, 100%",
     "NUM_SLOTS_TYPE_$(1:1)=1\nSLOT_TYPE_$(1:1)_PARTITIONABLE=true\nSLOT_TYPE_$(1:1)=$(2+:100%)"),
    ("FEATURE", "StaticSlots", "Static slots, args: ([type# [, num [, allocation]]])",
     "NUM_SLOTS_TYPE_$(1:1)=$(2:$(NUM_CPUS))\nSLOT_TYPE_$(1:1)_PARTITIONABLE=false\n"
     "SLOT_TYPE_$(1:1)=$(3+:1/$(NUM_SLOTS_TYPE_$(1:1)))\nSLOT_TYPE_$(1:1)=$(3+)"),
    ("FEATURE", "REMOTE_RUNTIME_CONFIG", "Allow runtime configuration changes, args: ([variable_names])",
     "ENABLE_RUNTIME_CONFIG=True\nALLOW_CONFIG=$(ALLOW_ADMINISTRATOR)\nif $(0#)\n"
     "  SETTABLE_ATTRS_CONFIG=$(SETTABLE_ATTRS_CONFIG) $(0)\nendif"),
    ("FEATURE", "REMOTE_CONFIG", "Allow runtime and persistent configuration changes, args: ([variable_names])",
     "ENABLE_PERSISTENT_CONFIG=True\nPERSISTENT_CONFIG_DIR=$(SPOOL)\nuse FEATURE : REMOTE_RUNTIME_CONFIG($(0))"),
    ("FEATURE", "OneShotCronHook", "A one-shot cron hook, args: (STARTD_CRON | SCHEDD_CRON, tag, hook_exe [,hook_args])",
     _cron_hook("OneShot", 3)),
    ("FEATURE", "PeriodicCronHook", "A periodic cron hook, args: (STARTD_CRON | SCHEDD_CRON, tag, period, hook_exe [,hook_args])",
     _cron_hook("Periodic", 4)),
    ("FEATURE", "ContinuousCronHook", "A continuous cron hook, args: (STARTD_CRON | SCHEDD_CRON, tag, hook_exe [,hook_args])",
     _cron_hook("WaitForExit", 3)),
    ("FEATURE", "StartdCronPeriodic", "A periodic STARTD cron hook, args: (tag, period, exe [, hook_args])",
     "use FEATURE : PeriodicCronHook(STARTD_CRON, $(0))"),
    ("FEATURE", "StartdCronOneShot", "A one-shot STARTD cron hook, args: (tag, exe [, hook_args])",
     "use FEATURE : OneShotCronHook(STARTD_CRON, $(0))"),
    ("FEATURE", "StartdCronContinuous", "A continuous STARTD cron hook, args: (tag, exe [, hook_args])",
     "use FEATURE : ContinuousCronHook(STARTD_CRON, $(0))"),
    ("FEATURE", "ScheddCronPeriodic", "A periodic SCHEDD cron hook, args: (tag, period, exe [, hook_args])",
     "use FEATURE : PeriodicCronHook(SCHEDD_CRON, $(0))"),
    ("FEATURE", "ScheddCronOneShot", "A one-shot SCHEDD cron hook, args: (tag, exe [, hook_args])",
     "use FEATURE : OneShotCronHook(SCHEDD_CRON, $(0))"),
    ("FEATURE", "ScheddCronContinuous", "A continuous SCHEDD cron hook, args: (tag, exe [, hook_args])",
     "use FEATURE : ContinuousCronHook(SCHEDD_CRON, $(0))"),
    ("SECURITY", "HOST_BASED", "Authorization by host names and IP addresses", _HOST_BASED),
    ("SECURITY", "WITH_AUTHENTICATION", "Require authentication and integrity",
     "SEC_DEFAULT_AUTHENTICATION=required\nSEC_DEFAULT_INTEGRITY=required"),
    ("SECURITY", "STRONG", "Require authentication, encryption and integrity",
     "SEC_DEFAULT_ENCRYPTION=required\nSEC_DEFAULT_INTEGRITY=required\nSEC_DEFAULT_AUTHENTICATION=required"),
    ("SECURITY", "USER_BASED", "Authorization by user accounts", _USER_BASED),
    ("SECURITY", "recommended", "The recommended security configuration (latest revision)",
     "use security:recommended_v24_0($(1+))"),
    ("SECURITY", "recommended_v24_0", "Recommended security as of 24.0, args: ([service [, admins]])",
     _RECOMMENDED_V24),
    ("SECURITY", "recommended_v9_0", "Recommended security as of 9.0, args: ([service [, admins]])",
     _RECOMMENDED_V9),
    ("SECURITY", "FIPS", "FIPS-compatible cryptography",
     "FIPS = True\nuse security:strong\nSEC_DEFAULT_CRYPTO_METHODS = AES,3DES"),
]

#: category -> upper-case template name -> Template
TEMPLATES: dict[str, dict[str, Template]] = {}
for _cat, _name, _desc, _body in _LIST:
    TEMPLATES.setdefault(_cat, {})[_name.upper()] = Template(_cat, _name, _desc, _body)


def categories() -> list[str]:
    """The metaknob categories, e.g. ``["ROLE", "POLICY", "FEATURE", "SECURITY"]``."""
    return list(TEMPLATES)


def find_template(category: str, name: str) -> Template | None:
    """The template ``CATEGORY:name`` (both case-insensitive), or None."""
    return TEMPLATES.get(category.upper(), {}).get(name.upper())


def has_template(spec: str) -> bool:
    """``if defined use CATEGORY[:NAME]``: does the category (and template) exist?"""
    category, sep, name = spec.partition(":")
    templates = TEMPLATES.get(category.strip().upper())
    if templates is None:
        return False
    return not sep or not name.strip() or name.strip().upper() in templates


def _arg_tokens(args: str) -> list[tuple[str, int]]:
    """Non-empty comma-separated tokens of ``args`` with the offset just after each."""
    out = []
    for m in re.finditer(r"[^,]+", args):
        if m.group().strip():
            out.append((m.group().strip(), m.end()))
    return out


def expand_meta_args(body: str, args: str | None) -> str:
    """Substitute ``$(0)``, ``$(N)``, ``$(N?)``, ``$(N#)``, ``$(N+)`` and ``$(N:default)``.

    Args:
        body: the template text.
        args: the text between the parentheses of ``use CAT : Name(args)``, or None.

    Returns:
        The template with every meta argument replaced.
    """
    argstr = args or ""
    tokens = _arg_tokens(argstr)
    value = body
    while True:
        m = find_macro(value, 0, accept=lambda func, text: text[:1].isdigit(), classify=_classify_meta)
        if m is None:
            return value
        spec = re.match(r"(\d+)([?#+]?)(?::(.*))?\Z", value[m.body:m.right - 1], re.S)
        if spec is None:
            index, suffix, default = 0, "", None
        else:
            index, suffix, default = int(spec.group(1)), spec.group(2), spec.group(3)
        counting = suffix in ("#", "+")
        if index <= 0:
            text = str(len(tokens)) if counting else argstr
        elif counting:
            skip = index - 1
            if skip > len(tokens):
                text = ""
            else:
                rest = argstr[tokens[skip - 1][1]:] if skip else argstr
                text = rest[1:] if rest.startswith(",") else rest
            if default is not None and not text.strip():
                text = default
        elif index - 1 < len(tokens):
            text = tokens[index - 1][0]
        else:
            text = default or ""
        text = text.strip()
        if suffix == "?":
            text = "1" if text else "0"
        value = value[:m.dollar] + text + value[m.right:]

"""The job's ``Requirements``: the user's expression plus the clauses HTCondor generates.

Port of ``SetRequirements`` and ``SetResourceRequirements`` (HTCondor 25.x).  The user's
``requirements`` comes first, in parentheses, then, unless the user expression already
refers to that machine attribute:

* ``(TARGET.Arch == "<arch>")``, ``(TARGET.OpSys == "<opsys>")`` (containers: HasContainer...)
* disk: ``(versionGE(split(TARGET.CondorVersion)[1],"25.12.0") || (TARGET.Disk >= RequestDisk))``
  for vanilla jobs (execute points since 25.12 check disk themselves), else the plain clause;
  ``(TARGET.Memory >= RequestMemory)``, ``(TARGET.Cpus >= RequestCpus)`` when more than one;
  ``(TARGET.<Res> >= Request<Res>)`` for every other ``request_<Res>``
* file transfer: ``(TARGET.FileSystemDomain == MY.FileSystemDomain)`` when files are not
  transferred, ``TARGET.HasFileTransfer`` when they are, either when IF_NEEDED; plus plugin
  methods for URLs, job deferral and self-checkpoint clauses.
"""

from __future__ import annotations

from htc.submit import exprtext
from htc.submit.commands import JAVA, LOCAL, MIGHT_TRANSFER, VANILLA
from htc.submit.context import JobContext
from htc.submit.resources import needs_deferral

_OPSYS_REFS = ("opsys", "opsysandver", "opsyslongname", "opsysshortname", "opsysname",
               "opsyslegacy")
_DISK_VERSION = '(versionGE(split(TARGET.CondorVersion)[1],"25.12.0") || (TARGET.Disk >= RequestDisk))'
_DEFERRAL = ("(((time() + ScheddInterval) >= (DeferralTime - DeferralPrepTime)) && "
             "(time() < (DeferralTime + DeferralWindow)))")


def _number_or_none(c: JobContext, attr: str) -> tuple[bool, float | None]:
    """(present, literal number or None) for a job attribute."""
    a = c.get(attr)
    if a is None:
        return False, None
    return True, exprtext.literal_number(a.text)


def set_resource_requirements(c: JobContext) -> None:
    """Complete ``RequireGPUs`` from the gpus_minimum_* / maximum limits."""
    if not c.has("RequestGPUs"):
        return
    require = c.get("RequireGPUs")
    props: set[str] = set()
    if require is not None:
        _job, machine = exprtext.references(require.text)
        props = machine
    clauses = []
    if c.has("GPUsMinCapability") and "capability" not in props:
        clauses.append("Capability >= GPUsMinCapability")
    if c.has("GPUsMaxCapability") and "capability" not in props:
        clauses.append("Capability <= GPUsMaxCapability")
    if c.has("GPUsMinMemory") and "globalmemorymb" not in props:
        clauses.append("GlobalMemoryMb >= GPUsMinMemory")
    if c.has("GPUsMinRuntime") and "maxsupportedversion" not in props:
        clauses.append("MaxSupportedVersion >= GPUsMinRuntime")
    if clauses:
        text = " && ".join(clauses)
        if require is not None:
            text = exprtext.wrap_for_op(require.text, "&&") + " && " + text
        c.assign_expr("RequireGPUs", text, "require_gpus")


def set_requirements(c: JobContext) -> None:
    """``requirements`` plus the generated clauses -> ``Requirements``."""
    orig = c.param("requirements")
    answer = f"({orig})" if orig else ""
    if c.defined("MY.Requirements"):
        if orig:
            c.warnings.append("Use of MY.Requirements or +Requirements overrides requirements.")
        return
    if c.s.append_requirements:
        answer += (" && (" if answer else "(") + c.s.append_requirements + ")"
    u = c.universe
    _job, refs = exprtext.references(answer, frozenset({"requestmemory", "vm_ckptmac"}))
    container = u.topping in ("docker", "container")
    checks_arch = "arch" in refs
    checks_opsys = container or any(r in refs for r in _OPSYS_REFS)
    transfers = u.number in MIGHT_TRANSFER
    if u.number == JAVA:
        answer += (" && " if answer else "") + "TARGET.HasJava"
    else:
        if not checks_arch:
            answer += (" && " if answer else "") + f'(TARGET.Arch == "{c.s.arch}")'
        if u.topping == "docker":
            answer += (" && " if answer else "") + "TARGET.HasDocker"
            net = c.get_value("DockerNetworkType", str, "")
            if net and net not in ("host", "none", "nat"):
                answer += " && StringListMember(My.DockerNetworkType, TARGET.DockerNetworks)"
        elif u.topping == "container":
            answer += (" && " if answer else "") + "TARGET.HasContainer"
            image = c.get_value("ContainerImage", str)
            if c.has("DockerImage") or (image or "").strip().startswith("docker:"):
                answer += " && TARGET.HasDockerURL"
            elif image is not None:
                answer += " && TARGET.HasSIF" if image.strip().endswith(".sif") else \
                    " && TARGET.HasSandboxImage"
        elif not checks_opsys:
            answer += f' && (TARGET.OpSys == "{c.s.opsys}")'
    disk, disk_n = _number_or_none(c, "RequestDisk")
    if "disk" not in refs:
        if disk:
            if disk_n is None or disk_n > 0:
                answer += " && " + (_DISK_VERSION if u.number == VANILLA
                                    else "(TARGET.Disk >= RequestDisk)")
        else:
            answer += " && (TARGET.Disk >= DiskUsage)"
    elif disk:
        answer += " && (TARGET.Disk >= RequestDisk)"
    mem, mem_n = _number_or_none(c, "RequestMemory")
    if mem and (mem_n is None or mem_n > 1.0):
        answer += " && (TARGET.Memory >= RequestMemory)"
    cpus, cpus_n = _number_or_none(c, "RequestCpus")
    if "cpus" not in refs and cpus and (cpus_n is None or cpus_n > 1.0):
        answer += " && (TARGET.Cpus >= RequestCpus)"
    answer += _custom_resources(c, refs)
    if c.get_value("EncryptExecuteDirectory", bool, False) and \
            "encryptexecutedirectory" not in refs:
        answer += " && TARGET.HasEncryptExecuteDirectory"
    if transfers:
        answer += _transfer_clause(c, refs)
    if needs_deferral(c):
        if u.number != LOCAL:
            answer += " && TARGET.HasJobDeferral"
        if not c.has("ScheddInterval"):
            c.assign_int("ScheddInterval", c.s.schedd_interval)
        answer += " && " + _DEFERRAL
    if c.get_value("WantFTOnCheckpoint", bool, False) and "hasselfcheckpointtransfers" not in refs:
        answer += " && TARGET.HasSelfCheckpointTransfers"
    c.assign_expr("Requirements", answer, "requirements")


def _custom_resources(c: JobContext, refs: set[str]) -> str:
    """Clauses for ``Request<Res>`` attributes other than Cpus, Disk and Memory."""
    out = ""
    tags = sorted((n for n in c.attr_names()
                   if n.lower().startswith("request") and len(n) >= 9 and n[7] != "_"
                   and n.lower() not in ("requestcpus", "requestdisk", "requestmemory")),
                  key=str.lower)
    for name in tags:
        tag = name[7:]
        if tag.lower() in refs:
            continue
        a = c.get(name)
        value = a.value if a.value is not None else _evaluate(c, a.text)
        if isinstance(value, str):
            if value:
                out += f" && regexp({name}, TARGET.{tag})"
            continue
        if isinstance(value, bool) or not (value is None or isinstance(value, (int, float))):
            continue
        if value is not None and value <= 0:
            continue
        if c.has("Require" + tag):
            out += f" && (countMatches(MY.Require{tag},TARGET.Available{tag}) >= {name})"
        else:
            out += f" && (TARGET.{tag} >= {name})"
    return out


def _evaluate(c: JobContext, text: str):
    """Evaluate a job expression in the job ad; None when undefined or not a value."""
    from htc import classad

    ad = classad.ClassAd()
    for key in c.attr_names():
        a = c.get(key)
        try:
            ad[a.name] = classad.ExprTree(a.text)
        except Exception:  # one unparsable attribute must not hide the others
            continue
    try:
        v = classad.ExprTree(text).eval(ad)
    except Exception:
        return None
    if v is classad.Undefined or type(v).__name__ == "Undefined":
        return None
    return v if isinstance(v, (int, float, str, bool)) else False


def _transfer_clause(c: JobContext, refs: set[str]) -> str:
    checks_fsd = "filesystemdomain" in refs
    checks_ft = "hasfiletransfer" in refs or "hasjobtransferplugins" in refs
    domain = "(TARGET.FileSystemDomain == MY.FileSystemDomain)"
    xfer = "TARGET.HasFileTransfer"
    crypt = ""
    if "hasperfileencryption" not in refs and any(
            c.has(a) for a in ("EncryptInputFiles", "EncryptOutputFiles", "DontEncryptInputFiles",
                               "DontEncryptOutputFiles")):
        crypt = " && TARGET.HasPerFileEncryption"
    should = (c.get_value("ShouldTransferFiles", str) or "IF_NEEDED").upper()
    if should == "NO":
        return "" if checks_fsd else " && " + domain
    if checks_ft:
        return ""
    out = ""
    join, close = " && (", ")"
    if should == "IF_NEEDED" and not checks_fsd:
        out += join + domain
        join, close = " || (", "))"
    plugins = c.get_value("TransferPlugins", str, "")
    if plugins:
        xfer = "TARGET.HasJobTransferPlugins"
    out += join + xfer + crypt
    version_check = (c.has("TransferCheckpoint") or c.get_value("PreserveRelativePaths", bool, False)
                     or (c.get_value("WhenToTransferOutput", str, "") or "").upper() == "ON_SUCCESS")
    if version_check:
        out += ' && versioncmp(split(TARGET.CondorVersion)[1],"8.9.7") >= 0'
    job_methods = set()
    for plug in plugins.split(";"):
        if "=" in plug:
            job_methods.update(m.strip().lower() for m in plug.split("=")[0].split(","))
    methods: set[str] = set()
    for f in (c.get_value("TransferInput", str, "") or "").split(","):
        _add_url_method(f.strip(), job_methods, methods)
    _add_url_method(c.get_value("OutputDestination", str, "") or "", job_methods, methods)
    for remap in (c.get_value("TransferOutputRemaps", str, "") or "").split(";"):
        if "=" in remap:
            _add_url_method(remap.split("=", 1)[1].strip(), job_methods, methods)
    if methods:
        if "hasfiletransferpluginmethods" not in refs:
            for m in sorted(methods):
                out += f' && stringListIMember("{m}",TARGET.HasFileTransferPluginMethods)'
        c.assign_str("WantTransferPluginMethods", ",".join(sorted(methods)))
    return out + close


def _add_url_method(f: str, job_methods: set[str], methods: set[str]) -> None:
    if "://" in f:
        scheme = f.split("://", 1)[0].lower()
        if scheme and scheme not in job_methods:
            methods.add(scheme)

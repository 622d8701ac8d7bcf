"""Submit commands, part 1: universe, files, arguments, environment, status and policy.

Each function ports one ``SubmitHash::SetXxx`` of HTCondor (condor_utils/submit_utils.cpp)
and keeps its rules, defaults and error messages; comments note where htc differs.
"""

from __future__ import annotations

import os
import signal

from htc.job_codes import HoldReasonCode, JobStatus
from htc.submit import argsenv, exprtext
from htc.submit.context import JobContext, Universe, compress_path
from htc.submit.errors import SubmitError

#: universe names and numbers (``CondorUniverseNumber``)
UNIVERSES = {"standard": 1, "pipe": 2, "linda": 3, "pvm": 4, "vanilla": 5, "pvmd": 6,
             "scheduler": 7, "mpi": 8, "grid": 9, "globus": 9, "java": 10, "parallel": 11,
             "local": 12, "vm": 13}
UNIVERSE_NAMES = {1: "Standard", 2: "Pipe", 3: "Linda", 4: "PVM", 5: "Vanilla", 6: "PVMD",
                  7: "Scheduler", 8: "MPI", 9: "Grid", 10: "Java", 11: "Parallel", 12: "Local",
                  13: "VM"}
#: "toppings": universes that are vanilla jobs with extra wants
TOPPINGS = {"docker": "WantDocker", "container": "WantContainer", "python": "WantPython"}
VANILLA, STANDARD, SCHEDULER, JAVA, PARALLEL, LOCAL = 5, 1, 7, 10, 11, 12
#: universes a shadow/starter pair can reconnect to, so they get a JobLeaseDuration
RECONNECTABLE = frozenset({STANDARD, VANILLA, JAVA, PARALLEL})
#: universes that may use file transfer (``mightTransfer``)
MIGHT_TRANSFER = frozenset({VANILLA, JAVA, PARALLEL})

_ZERO_INTS = ("ExitStatus", "NumCkpts", "NumJobStarts", "NumJobCompletions", "NumRestarts",
              "NumSystemHolds", "CommittedTime", "CommittedSlotTime", "CumulativeSlotTime",
              "TotalSuspensions", "LastSuspensionTime", "CumulativeSuspensionTime",
              "CommittedSuspensionTime")
_ZERO_REALS = ("RemoteWallClockTime", "RemoteUserCpu", "RemoteSysCpu", "CumulativeRemoteUserCpu",
               "CumulativeRemoteSysCpu")


def set_base(c: JobContext) -> None:
    """The attributes every job starts with (``init_base_ad``)."""
    c.assign_str("MyType", "Job")
    c.assign_str("TargetType", "Machine")
    c.assign_int("ClusterId", c.cluster_id)
    c.assign_int("QDate", c.qdate)
    c.assign_int("JobSubmitMethod", c.s.submit_method)
    if c.owner:
        c.assign_str("Owner", c.owner)
    else:
        c.assign_expr("Owner", "undefined")
    for a in _ZERO_REALS:
        c.assign_real(a, 0.0)
    for a in _ZERO_INTS:
        c.assign_int(a, 0)
    c.assign_bool("ExitBySignal", False)
    c.assign_str("CondorVersion", c.s.condor_version)
    c.assign_str("CondorPlatform", c.s.condor_platform)
    c.assign_str("SubmitVersion", c.s.condor_version)
    for attr, text in c.s.submit_attrs:  # SUBMIT_ATTRS: before the description's own +Attr lines
        c.assign_expr(attr, text, f"SUBMIT_ATTRS {attr}")


def find_universe(c: JobContext) -> Universe:
    """Decide the universe from the description (``SetUniverse``, first proc only).

    htc runs ``standard`` (JobUniverse 1) under its checkpointing runtime, and adds the
    ``python`` topping (vanilla + ``WantPython``) for function jobs.

    Raises:
        SubmitError: unknown universe, or one htc cannot run (grid, vm, and the obsolete ones).
    """
    univ = c.param("universe", "JobUniverse") or c.s.default_universe
    key = univ.strip().lower()
    topping = ""
    number = int(key) if key.isdigit() else UNIVERSES.get(key, 0)
    if not number and key in TOPPINGS:
        number, topping = VANILLA, key
    if not number:
        raise c.fail(f"I don't know about the '{univ}' universe.", "universe")
    if number in (2, 3, 4, 6, 8):
        raise c.fail(f"'{UNIVERSE_NAMES[number]}' is not a supported universe.", "universe")
    if number in (9, 13):
        raise c.fail(f"the {UNIVERSE_NAMES[number].lower()} universe is not supported by htc; "
                     "use vanilla, standard, local, scheduler, parallel, java, docker, container "
                     "or python", "universe")
    if number not in UNIVERSE_NAMES:
        raise c.fail(f"I don't know about the '{univ}' universe.", "universe")
    if number in (VANILLA, LOCAL) and topping in ("", "container"):
        docker_img = c.param("docker_image", "DockerImage")
        container_img = c.param("container_image", "ContainerImage")
        if docker_img and container_img:
            raise c.fail("cannot declare both docker_image and container_image", "docker_image")
        if docker_img or container_img:
            topping = "container"
    elif topping == "docker" and c.param("container_image", "ContainerImage"):
        raise c.fail("docker universe does not allow use of container_image.", "container_image")
    return Universe(number, topping)


def set_universe(c: JobContext) -> None:
    """``JobUniverse`` and the topping wants (the universe itself is decided once)."""
    u = c.universe
    c.assign_int("JobUniverse", u.number)
    if u.topping in TOPPINGS:
        c.assign_bool(TOPPINGS[u.topping], True)
    if u.topping == "container" and c.param("docker_image", "DockerImage"):
        c.assign_bool("WantDockerImage", True)
    want_parallel, _ = c.param_bool("WantParallelScheduling", None, False)
    if want_parallel:
        c.assign_bool("WantParallelScheduling", True)


def set_iwd(c: JobContext) -> None:
    """``initialdir`` -> ``Iwd`` (absolute; must exist)."""
    key = "initialdir" if c.defined("initialdir") or not c.defined("Iwd") else "Iwd"
    short = c.param("initialdir", "Iwd") or c.param("initial_dir", "job_iwd")
    if short:
        iwd = short if short.startswith("/") else os.path.join(c.cwd, short)
    else:
        iwd = c.cwd
    iwd = compress_path(iwd)
    if c.host_access:
        c.observe(iwd)
    if c.host_access and not os.access(iwd, os.F_OK | os.X_OK):  # the schedd (root) does not look
        raise c.fail(f"No such directory: {iwd}", key if short else None)
    c.assign_str("Iwd", iwd)
    if c.submit_file:
        c.assign_str("SubmitFile", c.submit_file)


def set_executable(c: JobContext) -> None:
    """``executable`` -> ``Cmd``; docker/container images; ``transfer_executable``."""
    u = c.universe
    ignore = False
    transfer = True
    if u.topping == "docker":
        img = c.param("docker_image", "DockerImage")
        if img:
            img = strip_quotes(img)
            if not img:
                raise c.fail(f"'{img}' is not a valid docker_image", "docker_image")
            c.assign_str("DockerImage", img)
        elif not c.has("DockerImage"):
            raise c.fail("docker jobs require a docker_image", "docker_image")
    if u.topping == "container":
        img = c.param("docker_image", "DockerImage")
        if img:
            c.assign_str("DockerImage", strip_quotes(img))
        cimg = c.param("container_image", "ContainerImage")
        if cimg:
            cimg = strip_quotes(cimg)
            if not cimg or cimg.startswith(("instance://", "library://", "shub://")):
                raise c.fail(f"'{cimg}' is not a valid container image", "container_image")
            c.assign_str("ContainerImage", cimg)
            kind = _image_kind(cimg)
            c.assign_bool({"docker": "WantDockerImage", "sif": "WantSIF"}.get(kind, "WantSandboxImage"),
                          True)
        elif not c.has("ContainerImage") and not c.has("DockerImage"):
            raise c.fail("container jobs require a container_image or docker_image",
                         "container_image")
    ename = c.param("executable", "Cmd")
    if ename is None:
        if c.has("Cmd"):
            return
        if u.topping in ("docker", "container"):
            ignore = True
        else:
            raise c.fail("No 'executable' parameter was provided", "executable")
    xfer = c.param("transfer_executable", "TransferExecutable")
    if xfer:
        if xfer[0] in "Ff":
            c.assign_bool("TransferExecutable", False)
            transfer = False
    if ignore and transfer:
        c.assign_bool("TransferExecutable", False)
        transfer = False
    if transfer:
        full = c.full_path(ename, use_iwd=False)
    else:
        full = ename or ""
    if c.check_file is not None and ename:
        # condor_submit's check_sub_file: what will be transferred must be there now
        # (``$$(...)`` names are resolved at match time, so they are not looked at)
        c.check_file("executable" if not ignore else "pseudo-executable", ename, transfer)
    c.assign_str("Cmd", full)


def strip_quotes(s: str) -> str:
    """Trim, then drop one pair of surrounding double quotes."""
    s = s.strip()
    if len(s) >= 2 and s[0] == '"' and s[-1] == '"':
        s = s[1:-1]
    return s


def _image_kind(image: str) -> str:
    image = image.strip()
    if image.startswith("docker:"):
        return "docker"
    if image.endswith(".sif"):
        return "sif"
    return "sandbox"


def set_arguments(c: JobContext) -> None:
    """``arguments`` -> ``Args`` (V1) or ``Arguments`` (V2)."""
    args1 = c.param("arguments", "Args")
    args2 = c.param("arguments2")
    allow_v1, _ = c.param_bool("allow_arguments_v1", None, False)
    if args1 is None and args2 is None and (c.has("Args") or c.has("Arguments")):
        return
    try:
        attr, raw = argsenv.parse_arguments(args1, args2, allow_v1)
    except SubmitError as e:
        raise c.fail(e.reason, "arguments2" if args2 is not None else "arguments") from None
    c.assign_str(attr, raw)
    if c.universe.number == JAVA and not raw:
        raise c.fail("In Java universe, you must specify the class name to run.\nExample:\n\n"
                     "arguments = MyClass\n", "arguments")


def set_java_vm_args(c: JobContext) -> None:
    """``java_vm_args`` (V1 or V2) and ``java_vm_arguments2`` -> JavaVMArgs / JavaVMArguments."""
    args1 = c.param("java_vm_args")
    args1_ext = c.param("java_vm_arguments", "JavaVMArgs")
    args2 = c.param("java_vm_arguments2")
    allow_v1, _ = c.param_bool("allow_arguments_v1", None, False)
    if args1 is not None and args1_ext is not None:
        raise c.fail("you specified a value for both java_vm_args and java_vm_arguments.",
                     "java_vm_arguments")
    args1 = args1 if args1 is not None else args1_ext
    if args1 is None and args2 is None:
        return
    try:
        attr, raw = argsenv.parse_arguments(args1, args2, allow_v1)
    except SubmitError as e:
        raise c.fail(f"failed to parse java VM arguments: {e.reason}", "java_vm_args") from None
    if raw:
        c.assign_str("JavaVMArgs" if attr == "Args" else "JavaVMArguments", raw)


def set_parallel(c: JobContext) -> None:
    """``machine_count`` -> ``MinHosts``/``MaxHosts`` for parallel jobs."""
    want_parallel = c.get_value("WantParallelScheduling", bool, False)
    if c.universe.number == PARALLEL or want_parallel:
        count = c.param("machine_count", "MachineCount") or c.param("node_count", "NodeCount")
        if count:
            n = exprtext.eval_int(count)
            n = int(n) if n is not None else _atoi(count)
            c.assign_int("MinHosts", n)
            c.assign_int("MaxHosts", n)
        elif not c.has("MaxHosts"):
            raise c.fail("No machine_count specified!", "machine_count")
        if c.proc_id <= 0 or not c.has("RequestCpus"):
            c.assign_int("RequestCpus", 1)
    if c.universe.number == PARALLEL:
        c.assign_bool("WantIOProxy", True)
        c.assign_bool("JobRequiresSandbox", True)


def _atoi(s: str) -> int:
    s = s.strip()
    n = 0
    sign = 1
    i = 0
    if s[:1] in "+-":
        sign = -1 if s[0] == "-" else 1
        i = 1
    while i < len(s) and s[i].isdigit():
        n = n * 10 + int(s[i])
        i += 1
    return sign * n


def set_environment(c: JobContext) -> None:
    """``environment``/``env``/``environment2`` and ``getenv`` -> ``Environment`` (or ``Env``)."""
    env1 = c.param("environment", "env")
    env2 = c.param("environment2")
    allow_v1, _ = c.param_bool("allow_environment_v1", None, False)
    prefer_v1 = False
    if env1 is not None and env2 is None:
        env_kw = c.param("env")
        prefer_v1 = env_kw is not None and not argsenv.is_v2_quoted(env_kw)
    if env1 is not None and env2 is not None and not allow_v1:
        raise c.fail("If you wish to specify both 'environment' and\n'environment2' for maximal "
                     "compatibility with different\nversions of Condor, then you must also "
                     "specify\nallow_environment_v1=true.", "environment2")
    env = argsenv.Env()
    try:
        if env2 is not None:
            env.merge_v2_raw(argsenv.v2_quoted_to_raw(env2))
        elif env1 is not None:
            env.merge_v1_raw_or_v2_quoted(env1)
    except SubmitError as e:
        given = env2 if env2 is not None else env1
        key = "environment2" if env2 is not None else ("environment" if c.defined("environment")
                                                       else "env")
        raise c.fail(f"{e.reason}\nThe environment you specified was: '{given}'", key) from None
    getenv = c.param("getenv", "get_env")
    if getenv is not None:
        as_bool = exprtext.eval_bool(getenv)
        if as_bool is not None:
            if as_bool:
                if not c.s.allow_getenv:
                    raise c.fail("getenv = true command not allowed because administrator has "
                                 "set SUBMIT_ALLOW_GETENV = false", "getenv")
                env.import_environ(c.ex.env, None, env1 is not None and env2 is None)
        else:
            env.import_environ(c.ex.env, getenv, env1 is not None and env2 is None)
    has_v1, has_v2 = c.has("Env"), c.has("Environment")
    insert_v1 = prefer_v1
    insert_v2 = not insert_v1
    if env1 is None and env2 is None and not env.vars and (has_v1 or has_v2):
        insert_v1 = insert_v2 = False
    if insert_v1 and has_v2:
        insert_v2 = True
    if insert_v2 and has_v1:
        insert_v1 = True
    if insert_v1:
        try:
            c.assign_str("Env", env.v1_raw())
        except SubmitError as e:
            raise c.fail(e.reason, "env") from None
        c.assign_str("EnvDelim", ";")
    if insert_v2:
        c.assign_str("Environment", env.v2_raw())


def set_job_status(c: JobContext) -> None:
    """``hold`` -> ``JobStatus`` (1 or 5) and ``EnteredCurrentStatus``."""
    hold, _ = c.param_bool("hold", None, False)
    if hold:
        c.assign_int("JobStatus", int(JobStatus.HELD))
        c.assign_int("HoldReasonCode", int(HoldReasonCode.SubmittedOnHold))
        c.assign_str("HoldReason", "submitted on hold at user's request")
    else:
        c.assign_int("JobStatus", int(JobStatus.IDLE))
    c.assign_int("EnteredCurrentStatus", c.qdate)


def _set_std(c: JobContext, key: str, alt: str, attr: str, transfer_attr: str,
             stream_attr: str, transfer_key: str, stream_key: str) -> None:
    """``SetStdin``/``SetStdout``/``SetStderr``: the file, and whether to transfer/stream it."""
    transfer_it = c.get_value(transfer_attr, bool, True)
    tmp, _ = c.param_bool(transfer_key, transfer_attr, transfer_it)
    must_set = tmp != transfer_it
    transfer_it = tmp
    stream_it = c.get_value(stream_attr, bool, False)
    stream_it, _ = c.param_bool(stream_key, stream_attr, stream_it)
    value = c.param(key, alt)
    if value is not None or not c.has(attr):
        if not value or value == "/dev/null":
            transfer_it = stream_it = False
            value = "/dev/null"
        c.assign_str(attr, value)
    if transfer_it:
        c.assign_bool(stream_attr, stream_it)
        if must_set:
            c.assign_bool(transfer_attr, transfer_it)
    else:
        c.assign_bool(transfer_attr, False)


def set_stdin(c: JobContext) -> None:
    """``input`` -> ``In``."""
    _set_std(c, "input", "stdin", "In", "TransferIn", "StreamIn", "transfer_input", "stream_input")


def set_stdout(c: JobContext) -> None:
    """``output`` -> ``Out``."""
    _set_std(c, "output", "stdout", "Out", "TransferOut", "StreamOut", "transfer_output",
             "stream_output")


def set_stderr(c: JobContext) -> None:
    """``error`` -> ``Err``."""
    _set_std(c, "error", "stderr", "Err", "TransferErr", "StreamErr", "transfer_error",
             "stream_error")


#: ``notification`` values (HTCondor's NOTIFY_* numbers)
NOTIFICATIONS = {"never": 0, "always": 1, "complete": 2, "error": 3, "start": 4}


def set_notification(c: JobContext) -> None:
    """``notification`` -> ``JobNotification``."""
    how = c.param("notification", "JobNotification")
    if how is None:
        how = c.s.default_notification
    n = NOTIFICATIONS.get(how.strip().lower())
    if n is None:
        raise c.fail("Notification must be 'Never', 'Always', 'Complete', 'Start', or 'Error'",
                     "notification")
    c.assign_int("JobNotification", n)


def set_rank(c: JobContext) -> None:
    """``rank`` -> ``Rank`` (default 0.0)."""
    rank = c.param("rank", "preferences") or c.s.default_rank
    if c.s.append_rank:
        rank = f"({rank}) + ({c.s.append_rank})" if rank else c.s.append_rank
    if rank:
        c.assign_expr("Rank", rank, "rank")
    else:
        c.assign_real("Rank", 0.0)


_PERIODIC = (("periodic_hold", "PeriodicHold"), ("periodic_hold_reason", "PeriodicHoldReason"),
             ("periodic_hold_subcode", "PeriodicHoldSubCode"),
             ("periodic_release", "PeriodicRelease"), ("periodic_remove", "PeriodicRemove"),
             ("periodic_vacate", "PeriodicVacate"), ("on_exit_hold_reason", "OnExitHoldReason"),
             ("on_exit_hold_subcode", "OnExitHoldSubCode"))


def set_periodic(c: JobContext) -> None:
    """The periodic and on-exit-hold policy expressions, verbatim."""
    for key, attr in _PERIODIC:
        v = c.param(key, attr)
        if v is not None:
            c.assign_expr(attr, v, key)


def set_leave_in_queue(c: JobContext) -> None:
    """``leave_in_queue`` -> ``LeaveJobInQueue`` (default false)."""
    v = c.param("leave_in_queue", "LeaveJobInQueue")
    if v is not None:
        c.assign_expr("LeaveJobInQueue", v, "leave_in_queue")
    elif not c.has("LeaveJobInQueue"):
        c.assign_bool("LeaveJobInQueue", False)


def set_retries(c: JobContext) -> None:
    """``max_retries``, ``retry_until``, ``success_exit_code`` build ``OnExitRemove``."""
    erc = c.param("on_exit_remove", "OnExitRemove")
    ehc = c.param("on_exit_hold", "OnExitHold")
    num_retries = c.param_int("max_retries", "JobMaxRetries")
    success = c.param_int("success_exit_code", "JobSuccessExitCode", int_range=True)
    retry_until = c.param("retry_until")
    if num_retries is None and success is None and retry_until is None:
        if erc is not None:
            c.assign_expr("OnExitRemove", erc, "on_exit_remove")
        if ehc is not None:
            c.assign_expr("OnExitHold", ehc, "on_exit_hold")
        return
    if retry_until is not None:
        if exprtext.canonical(retry_until) is None:
            raise c.fail(f"retry_until={retry_until} is invalid, it must be an integer or "
                         "boolean expression.", "retry_until")
        job_refs, machine_refs = exprtext.references(retry_until)
        code = exprtext.eval_int(retry_until) if not (job_refs or machine_refs) else None
        if code is not None:
            if not -2**31 <= code <= 2**31 - 1:
                raise c.fail(f"retry_until={retry_until} is invalid, it must be an integer or "
                             "boolean expression.", "retry_until")
            retry_until = f"ExitCode =?= {code}"
        else:
            retry_until = exprtext.wrap_for_op(retry_until, "||")
    if num_retries is None and not c.has("JobMaxRetries"):
        num_retries = c.s.default_max_retries
    if num_retries is not None:
        c.assign_int("JobMaxRetries", num_retries)
    if ehc is None:
        if not c.has("OnExitHold"):
            c.assign_bool("OnExitHold", False)
    else:
        c.assign_expr("OnExitHold", ehc, "on_exit_hold")
    if c.has("OnExitRemove") and success is None and retry_until is None:
        return
    check = "0"
    if success is not None:
        c.assign_int("JobSuccessExitCode", success)
        check = "JobSuccessExitCode"
    if retry_until is not None:
        check += " || " + retry_until
    expr = "NumJobCompletions > JobMaxRetries || ExitCode =?= " + check
    if erc is not None:
        if exprtext.canonical(erc) is None:
            raise c.fail(f"on_exit_remove={erc} is invalid, it must be a boolean expression.",
                         "on_exit_remove")
        expr += " || " + exprtext.wrap_for_op(erc, "||")
    c.assign_expr("OnExitRemove", expr, "on_exit_remove")


def _signal_name(sig: str, c: JobContext, key: str) -> str:
    s = sig.strip()
    if _atoi(s) and s.lstrip("+-").isdigit():
        try:
            return signal.Signals(_atoi(s)).name
        except ValueError:
            raise c.fail(f"invalid signal {sig}", key) from None
    if s.upper() not in signal.Signals.__members__:
        raise c.fail(f"invalid signal {sig}", key)
    return s.upper()


def set_kill_sig(c: JobContext) -> None:
    """``kill_sig`` and friends; non-vanilla universes default to SIGTERM.

    htc's standard universe defaults to SIGTSTP, the classic "checkpoint and exit" signal.
    """
    sig = c.param("kill_sig", "KillSig")
    if sig is not None:
        c.assign_str("KillSig", _signal_name(sig, c, "kill_sig"))
    elif c.universe.number == STANDARD:
        c.assign_str("KillSig", "SIGTSTP")
    elif c.universe.number != VANILLA:
        c.assign_str("KillSig", "SIGTERM")
    for key, attr in (("remove_kill_sig", "RemoveKillSig"), ("hold_kill_sig", "HoldKillSig")):
        sig = c.param(key, attr)
        if sig is not None:
            c.assign_str(attr, _signal_name(sig, c, key))
    timeout = c.param("kill_sig_timeout", "KillSigTimeout")
    if timeout is not None:
        c.assign_int("KillSigTimeout", _atoi(timeout))

"""Submit commands, part 2: resources, accounting, simple commands, files, forced attributes.

Ports of ``SetRequestResources``, ``SetConcurrencyLimits``, ``SetAccountingGroup``,
``SetSimpleJobExprs``, ``SetJobDeferral``, ``SetImageSize``, ``SetTransferFiles``,
``SetAutoAttributes``, ``ReportCommonMistakes`` and ``SetForcedAttributes``.
"""

from __future__ import annotations

import re

from htc.submit import exprtext
from htc.submit.commands import RECONNECTABLE, SCHEDULER, strip_quotes
from htc.submit.context import JobContext
from htc.submit.functions import split_list

_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_bytes(text: str, base: int) -> int | None:
    """HTCondor's ``parse_int64_bytes``: ``2GB``, ``512``, ``1.5g`` in units of ``base`` bytes.

    A bare number is already in ``base`` units; the result rounds up.  None when ``text``
    is not a number with an optional K/M/G/T (+B) suffix (it is then an expression).
    """
    i = 0
    n = len(text)
    while i < n and text[i].isspace():
        i += 1
    m = re.compile(r"[+-]?\d+").match(text, i)
    val = int(m.group()) if m else 0
    p = m.end() if m else i
    fract = 0.0
    if p < n and text[p] == ".":
        p += 1
        scale = 0.1
        for _ in range(3):
            if p < n and text[p].isdigit():
                fract += int(text[p]) * scale
                scale /= 10
                p += 1
        while p < n and text[p].isdigit():
            p += 1
    if p == i:
        return None
    while p < n and text[p].isspace():
        p += 1
    if p >= n:
        mult = base
    else:
        mult = _UNITS.get(text[p].lower())
        if mult is None:
            return None
    result = int((val + fract) * mult + base - 1) // base
    if p >= n or p + 1 >= n:
        return result
    q = p + 1
    if text[q] in "bB":
        q += 1
    while q < n and text[q].isspace():
        q += 1
    return result if q >= n else None


def _set_request_cpus(c: JobContext) -> None:
    v = c.param("request_cpus", "RequestCpus")
    if v is None:
        if c.has("RequestCpus"):
            return
        v = c.s.default_request_cpus
    if v.strip().lower() != "undefined":
        c.assign_expr("RequestCpus", v, "request_cpus")


def _set_request_gpus(c: JobContext) -> None:
    v = c.param("request_gpus", "RequestGPUs")
    if v is None and not c.has("RequestGPUs"):
        v = c.s.default_request_gpus
    if v is not None and v.strip().lower() != "undefined":
        c.assign_expr("RequestGPUs", v, "request_gpus")
    if not c.has("RequestGPUs"):
        return
    req = c.param("require_gpus", "RequireGPUs")
    if req is not None:
        c.assign_expr("RequireGPUs", req, "require_gpus")
    for key, attr in (("gpus_minimum_capability", "GPUsMinCapability"),
                      ("gpus_maximum_capability", "GPUsMaxCapability")):
        v = c.param(key, attr)
        if v is not None:
            c.assign_expr(attr, v, key)
    v = c.param("gpus_minimum_memory", "GPUsMinMemory")
    if v is not None:
        mb = parse_bytes(v, 1024 * 1024)
        if mb is not None:
            c.assign_int("GPUsMinMemory", mb)
        else:
            c.assign_expr("GPUsMinMemory", v, "gpus_minimum_memory")
    v = c.param("gpus_minimum_runtime", "GPUsMinRuntime")
    if v is not None:
        m = re.fullmatch(r"\s*(\d+)(?:\.(\d+))?\s*", v)
        if m and (m.group(2) is None or int(m.group(2)) < 100):
            major, minor = int(m.group(1)), m.group(2)
            ver = major if minor is None and major > 1000 else major * 1000 + (int(minor or 0) * 10)
            c.assign_int("GPUsMinRuntime", ver)
        else:
            c.assign_expr("GPUsMinRuntime", v, "gpus_minimum_runtime")


def _set_request_bytes(c: JobContext, key: str, attr: str, base: int, default: str) -> None:
    v = c.param(key, attr)
    if v is None:
        if c.has(attr):
            return
        v = default
    n = parse_bytes(v, base)
    if n is not None:
        c.assign_int(attr, n)
    elif v.strip().lower() != "undefined":
        c.assign_expr(attr, v, key)


_SPECIAL_REQUESTS = {"request_cpus", "request_cpu", "request_gpus", "request_gpu", "request_disk",
                     "request_memory"}
_DISALLOWED_REQUESTS = {"request_gpu_memory", "request_gpus_memory"}


def set_request_resources(c: JobContext) -> None:
    """``request_<name>``: the standard four with units and defaults, others verbatim."""
    for m in list(c.ex.table):
        low = m.name.lower()
        if not low.startswith("request_") or low in _SPECIAL_REQUESTS:
            continue
        tag = m.name[len("request_"):]
        if len(tag) < 2 or tag.startswith("_") or low in _DISALLOWED_REQUESTS:
            continue
        v = c.param(m.name)
        if v is not None:
            c.assign_expr("Request" + tag, v, m.name)
    _set_request_cpus(c)
    _set_request_gpus(c)
    _set_request_bytes(c, "request_disk", "RequestDisk", 1024, c.s.default_request_disk)
    _set_request_bytes(c, "request_memory", "RequestMemory", 1024 * 1024,
                       c.s.default_request_memory)


def set_concurrency_limits(c: JobContext) -> None:
    """``concurrency_limits`` -> ``ConcurrencyLimits`` (lower case, sorted)."""
    limits = c.param("concurrency_limits")
    expr = c.param("concurrency_limits_expr")
    if limits:
        if expr:
            raise c.fail("concurrency_limits and concurrency_limits_expr can't be used together",
                         "concurrency_limits_expr")
        items = split_list(limits.lower())
        c.assign_str("ConcurrencyLimits", ",".join(sorted(items)))
    elif expr:
        c.assign_expr("ConcurrencyLimits", expr, "concurrency_limits_expr")


_BAD_SUBMITTER = re.compile(r"[\s,;:=\"'\\/]")


def set_accounting_group(c: JobContext) -> None:
    """``accounting_group``/``accounting_group_user``; ``nice_user`` is the nice-user group.

    The group user defaults to the job's owner (empty when the owner is not yet known, as
    the Python bindings leave it).
    """
    group = c.param("accounting_group", "AccountingGroup")
    nice, _ = c.param_bool("nice_user", "NiceUser", False)
    if nice:
        if not group:
            group = c.s.nice_user_group
        elif group != c.s.nice_user_group:
            c.warnings.append("nice_user conflicts with accounting_group. nice_user will be ignored")
        c.assign_int("MaxJobRetirementTime", 0)
    gu = c.param("accounting_group_user", "AcctGroupUser")
    if not group and not gu:
        return
    user = gu if gu else (c.owner or "")
    if group and _BAD_SUBMITTER.search(group):
        raise c.fail(f"Invalid accounting_group: {group}", "accounting_group")
    if _BAD_SUBMITTER.search(user):
        raise c.fail(f"Invalid accounting_group_user: {user}", "accounting_group_user")
    c.assign_str("AcctGroupUser", user)
    if group:
        c.assign_str("AcctGroup", group)
        c.assign_str("AccountingGroup", f"{group}.{user}")
    else:
        c.assign_str("AccountingGroup", user)


#: commands copied into the ad with light checking: (command, attribute, kind, alternate-of-previous)
SIMPLE_COMMANDS = (
    ("next_job_start_delay", "NextJobStartDelay", "expr", False),
    ("keep_claim_idle", "KeepClaimIdle", "expr", False),
    ("job_ad_information_attrs", "JobAdInformationAttrs", "str", False),
    ("ulog_execute_attrs", "ULogExecuteEventAttrs", "str", False),
    ("max_idle", "JobMaterializeMaxIdle", "expr", False),
    ("materialize_max_idle", "JobMaterializeMaxIdle", "expr", True),
    ("max_materialize", "JobMaterializeLimit", "int", False),
    ("docker_network_type", "DockerNetworkType", "str", False),
    ("docker_pull_policy", "DockerPullPolicy", "str", False),
    ("docker_override_entrypoint", "DockerOverrideEntrypoint", "bool", False),
    ("container_target_dir", "ContainerTargetDir", "strip", False),
    ("transfer_container", "TransferContainer", "bool", False),
    ("transfer_plugins", "TransferPlugins", "str", False),
    ("want_io_proxy", "WantIOProxy", "bool", False),
    ("starter_debug", "JobStarterDebug", "strip", False),
    ("starter_log", "JobStarterLog", "logstrip", False),
    ("job_machine_attrs", "JobMachineAttrs", "str", False),
    ("job_machine_attrs_history_length", "JobMachineAttrsHistoryLength", "int", False),
    ("notify_user", "NotifyUser", "str", False),
    ("email_attributes", "EmailAttributes", "list", False),
    ("remote_initialdir", "RemoteIwd", "str", False),
    ("output_destination", "OutputDestination", "str", False),
    ("want_graceful_removal", "WantGracefulRemoval", "expr", False),
    ("job_max_vacate_time", "JobMaxVacateTime", "expr", False),
    ("encrypt_execute_directory", "EncryptExecuteDirectory", "bool", False),
    ("encrypt_input_files", "EncryptInputFiles", "str", False),
    ("encrypt_output_files", "EncryptOutputFiles", "str", False),
    ("dont_encrypt_input_files", "DontEncryptInputFiles", "str", False),
    ("dont_encrypt_output_files", "DontEncryptOutputFiles", "str", False),
    ("load_profile", "LoadProfile", "bool", False),
    ("file_remaps", "FileRemaps", "expr", False),
    ("buffer_files", "BufferFiles", "expr", False),
    ("buffer_size", "BufferSize", "expr", False),
    ("buffer_block_size", "BufferBlockSize", "expr", False),
    ("fetch_files", "FetchFiles", "str", False),
    ("compress_files", "CompressFiles", "str", False),
    ("append_files", "AppendFiles", "str", False),
    ("local_files", "LocalFiles", "str", False),
    ("log", "UserLog", "log", False),
    ("dagman_log", "DAGManNodesLog", "log", False),
    ("log_xml", "UserLogUseXML", "bool", False),
    ("noop_job", "NoopJob", "expr", False),
    ("noop_job_exit_signal", "NoopJobExitSignal", "expr", False),
    ("noop_job_exit_code", "NoopJobExitCode", "expr", False),
    ("dag_node_name", "DAGNodeName", "str", False),
    ("match_list_length", "LastMatchListLength", "int", False),
    ("dagman_job_id", "DAGManJobId", "uint", False),
    ("submit_event_notes", "SubmitEventNotes", "str", False),
    ("submit_event_user_notes", "SubmitEventUserNotes", "str", False),
    ("stack_size", "StackSize", "expr", False),
    ("jar_files", "JarFiles", "str", False),
    ("cron_minute", "CronMinute", "str", False),
    ("cron_hour", "CronHour", "str", False),
    ("cron_day_of_month", "CronDayOfMonth", "str", False),
    ("cron_month", "CronMonth", "str", False),
    ("cron_day_of_week", "CronDayOfWeek", "str", False),
    ("description", "JobDescription", "str", False),
    ("batch_name", "JobBatchName", "strip", False),
    ("batch_id", "JobBatchId", "strip", False),
    ("max_job_retirement_time", "MaxJobRetirementTime", "expr", False),
    ("job_lease_duration", "JobLeaseDuration", "expr", False),
    ("coresize", "CoreSize", "int", False),
    ("priority", "JobPrio", "int", False),
    ("prio", "JobPrio", "int", True),
    ("run_as_owner", "RunAsOwner", "bool", False),
    ("max_transfer_input_mb", "MaxTransferInputMB", "expr", False),
    ("max_transfer_output_mb", "MaxTransferOutputMB", "expr", False),
    ("checkpoint_exit_code", "SuccessCheckpointExitCode", "int", False),
    ("checkpoint_destination", "CheckpointDestination", "str", False),
    ("erase_output_and_error_on_restart", "EraseOutputAndErrorOnRestart", "bool", False),
    ("transfer_checkpoint_files", "TransferCheckpoint", "str", False),
    ("preserve_relative_paths", "PreserveRelativePaths", "bool", False),
    ("skip_if_dataflow", "SkipIfDataflow", "bool", False),
    ("allowed_job_duration", "AllowedJobDuration", "expr", False),
    ("allowed_execute_duration", "AllowedExecuteDuration", "expr", False),
    ("jobset", "JobSetName", "strip", False),
)


#: :data:`SIMPLE_COMMANDS` with the command's and the attribute's names in lower case
_SIMPLE_LOWER = tuple((key, attr, kind, is_alt, key.lower(), attr.lower())
                      for key, attr, kind, is_alt in SIMPLE_COMMANDS)


def set_simple_commands(c: JobContext) -> None:
    """The commands of :data:`SIMPLE_COMMANDS`, checked by kind."""
    last_existed = False
    findable = c.ex.findable()  # most of the commands are not in a description: skip their lookups
    for key, attr, kind, is_alt, low_key, low_attr in _SIMPLE_LOWER:
        if is_alt and last_existed:
            last_existed = False
            continue
        if low_key not in findable and low_attr not in findable:
            last_existed = False
            continue
        v = c.param(key, attr)
        last_existed = v is not None
        if v is None:
            continue
        if kind in ("str", "strip", "list", "log", "logstrip"):
            s = strip_quotes(v) if kind in ("strip", "logstrip") else v
            if kind == "list":
                s = ",".join(split_list(s))
            if kind in ("log", "logstrip") and s:
                s = c.full_path(s)
            c.assign_str(attr, s)
        elif kind == "bool":
            b = exprtext.eval_bool(v)
            if b is None:
                raise c.fail(f"{key}={v} is invalid, must eval to a boolean.", key)
            c.assign_bool(attr, b)
        elif kind in ("int", "uint"):
            i = exprtext.eval_int(v)
            if i is None:
                raise c.fail(f"{key}={v} is invalid, must eval to an integer.", key)
            if kind == "uint" and i < 0:
                raise c.fail(f"{key}={v} is invalid, must eval to a non-negative integer.", key)
            c.assign_int(attr, i)
        else:
            c.assign_expr(attr, v, key)


_CRON = ("CronMinute", "CronHour", "CronDayOfMonth", "CronMonth", "CronDayOfWeek", "DeferralTime")


def needs_deferral(c: JobContext) -> bool:
    """Whether the job has a deferral time or cron schedule."""
    return any(c.has(a) for a in _CRON)


def _nonneg_expr(c: JobContext, attr: str, key: str, v: str) -> None:
    """Assign an expression that, when a literal, must be a non-negative integer."""
    c.assign_expr(attr, v, key)
    a = c.get(attr)
    literal = a.value is not None or a.text == "undefined"
    if literal and not (isinstance(a.value, int) and not isinstance(a.value, bool) and a.value >= 0):
        raise c.fail(f"{key} = {v} is invalid, must eval to a non-negative integer.", key)


def set_deferral(c: JobContext) -> None:
    """``deferral_time`` and the window and prep time a deferred job needs."""
    v = c.param("deferral_time", "DeferralTime")
    if v is not None:
        _nonneg_expr(c, "DeferralTime", "deferral_time", v)
    if not needs_deferral(c):
        return
    for keys, attr, default in (((("cron_window", "CronWindow"), ("deferral_window", "DeferralWindow")),
                                 "DeferralWindow", 0),
                                ((("cron_prep_time", "CronPrepTime"),
                                  ("deferral_prep_time", "DeferralPrepTime")),
                                 "DeferralPrepTime", 300)):
        key = None
        for k, alt in keys:
            v = c.param(k, alt)
            if v is not None:
                key = k
                break
        if key is not None:
            _nonneg_expr(c, attr, key, v)
        else:
            c.assign_int(attr, default)


def set_image_size(c: JobContext) -> None:
    """``ExecutableSize`` (first proc) and ``ImageSize`` (``image_size`` or the same)."""
    if c.proc_id < 1:
        cmd = c.get_value("Cmd", str, "")
        c.assign_int("ExecutableSize", c.measure(cmd) if cmd else 0)
    v = c.param("image_size", "ImageSize")
    if v is not None:
        kb = parse_bytes(v, 1024)
        if kb is None:
            raise c.fail(f"'{v}' is not valid for Image Size", "image_size")
        if kb < 1:
            raise c.fail("Image Size must be positive", "image_size")
        c.assign_int("ImageSize", kb)
    elif not c.has("ImageSize"):
        c.assign_int("ImageSize", c.get_value("ExecutableSize", int, 0))


def set_auto_attributes(c: JobContext) -> None:
    """Defaults every job gets: hosts, lease, priority, checkpoint transfer."""
    if not c.has("MaxHosts"):
        c.assign_int("MinHosts", 1)
        c.assign_int("MaxHosts", 1)
    if not c.has("CurrentHosts"):
        c.assign_int("CurrentHosts", 0)
    if c.has("SuccessCheckpointExitCode"):
        c.assign_bool("WantFTOnCheckpoint", True)
    if c.universe.number in RECONNECTABLE and not c.has("JobLeaseDuration"):
        c.assign_expr("JobLeaseDuration", c.s.default_lease_duration)
    if not c.has("JobPrio"):
        c.assign_int("JobPrio", 0)
    if c.has("JobStarterLog") and not c.has("JobStarterDebug"):
        c.assign_bool("JobStarterDebug", True)


def report_common_mistakes(c: JobContext) -> None:
    """Warnings, the lease minimum, and deferral in the scheduler universe."""
    who = c.get_value("NotifyUser", str, "")
    if who.lower() in ("false", "never"):
        c.warnings.append(f"You used  notify_user={who}  in your submit file.  If you do not want "
                          'notification email, put "notification = never" into your submit file.')
    lease = c.get("JobLeaseDuration")
    if lease is not None and isinstance(lease.value, int) and 0 < lease.value < 20:
        c.warnings.append("JobLeaseDuration less than 20 seconds is not allowed, using 20 instead")
        c.assign_int("JobLeaseDuration", 20)
    if c.universe.number == SCHEDULER and c.has("DeferralTime"):
        raise c.fail("DeferralTime does not work for scheduler universe jobs.\nConsider submitting "
                     "this job using the local universe, instead", "deferral_time")


def set_forced_attributes(c: JobContext) -> None:
    """``+Attr = value`` and ``My.Attr = value``: inserted last, so they win."""
    for m in list(c.ex.table):
        low = m.name.lower()
        if not low.startswith("my."):
            continue
        if low in c.ex.per_proc_names:  # its value is read here, not through a lookup
            c.ex.touched.add(low)
        value = ""
        if m.raw:
            try:
                value = c.ex.expand(m.raw)
            except Exception as e:  # a macro error is reported at the +Attr line
                raise c.fail(getattr(e, "reason", str(e)), m.name) from None
        c.assign_expr(m.name[3:], value or "undefined", m.name)


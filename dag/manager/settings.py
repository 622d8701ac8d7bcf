"""The DAG manager's settings: every ``DAGMAN_*`` knob, with DAGMan's precedence.

A knob's value comes from, weakest first (reference 3.8): the pool's configuration, then the
``_HTC_DAGMAN_*`` environment (both read by :func:`htc.config.load_config`), then the DAG's
``CONFIG`` file or ``-config`` file (one of them: two different ones are an error, as in
condor_submit_dag), then the command-line flags (``-maxjobs`` ...). :func:`load_settings` does
the layering and returns a :class:`Settings`; :meth:`Settings.engine_options` is what the engine
takes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

from htc.config import load_config
from htc.errors import UsageError

__all__ = ["FLAG_KNOBS", "Settings", "load_settings", "node_log_path"]

#: command-line flag (condor_submit_dag / condor_dagman spelling, lower case) -> knob
FLAG_KNOBS = {
    "maxjobs": "DAGMAN_MAX_JOBS_SUBMITTED",
    "maxidle": "DAGMAN_MAX_JOBS_IDLE",
    "maxpre": "DAGMAN_MAX_PRE_SCRIPTS",
    "maxpost": "DAGMAN_MAX_POST_SCRIPTS",
    "maxhold": "DAGMAN_MAX_HOLD_SCRIPTS",
    "alwaysrunpost": "DAGMAN_ALWAYS_RUN_POST",
    "suppress_notification": "DAGMAN_SUPPRESS_NOTIFICATION",
    "autorescue": "DAGMAN_AUTO_RESCUE",
}


@dataclass
class Settings:
    """The ``DAGMAN_*`` knobs as the manager uses them (field name = knob minus ``DAGMAN_``)."""

    max_jobs_idle: int = 1000
    max_jobs_submitted: int = 0
    max_pre_scripts: int = 20
    max_post_scripts: int = 20
    max_hold_scripts: int = 20
    max_submits_per_interval: int = 100
    user_log_scan_interval: int = 5
    submit_delay: int = 0
    #: (htc only) most ready nodes in one SubmitClusters; 1: each node its own Submit
    submit_batch_size: int = 50
    max_submit_attempts: int = 6
    auto_rescue: bool = True
    max_rescue_num: int = 100
    reset_retries_upon_rescue: bool = True
    write_partial_rescue: bool = True
    retry_submit_first: bool = True
    retry_node_first: bool = False
    always_run_post: bool = False
    default_node_log: str = "@(DAG_DIR)/@(DAG_FILE).nodes.log"
    max_job_holds: int = 100
    hold_claim_time: int = 20
    suppress_notification: bool = False
    pending_report_interval: int = 600
    queue_update_interval: int = 300
    remove_node_jobs: bool = True
    default_priority: int = 0
    put_failed_jobs_on_hold: bool = False
    use_strict: int = 1
    verbosity: int = 3
    abort_duplicates: bool = True
    on_exit_remove: str = "(ExitSignal =?= 11 || (ExitCode =!= UNDEFINED && ExitCode >=0 && ExitCode <= 2))"
    config_file: str = ""
    debug: str = ""
    default_append_vars: bool = False
    node_job_failure_tolerance: int = 0
    remove_job_list_on_failure: bool = True
    submit_depth_first: bool = False
    allow_any_node_name_characters: bool = False
    munge_node_names: bool = True
    #: where each knob's value came from (knob -> "config" | "environment" | file | "flag")
    origins: dict[str, str] = field(default_factory=dict)
    #: what reading the settings changed or warns of, for dagman.out (see _fit_submits_to_max_idle)
    notes: list[str] = field(default_factory=list)

    @staticmethod
    def knob_names() -> list[str]:
        """Every knob a :class:`Settings` holds (``DAGMAN_MAX_JOBS_IDLE`` ...)."""
        return ["DAGMAN_" + f.name.upper() for f in fields(Settings) if f.name not in ("origins", "notes")]

    def engine_options(self, *, dag_id: int, node_log: str, **more):
        """The engine's :class:`htc.dag.engine.Options` for these settings (``more``: other
        fields of it; those the engine does not have are left out)."""
        import dataclasses

        from htc.dag.engine import Options

        wanted = dict(max_jobs=self.max_jobs_submitted, max_idle=self.max_jobs_idle,
                      max_pre=self.max_pre_scripts, max_post=self.max_post_scripts,
                      max_hold=self.max_hold_scripts, max_submits_per_interval=self.max_submits_per_interval,
                      always_run_post=self.always_run_post, retry_submit_first=self.retry_submit_first,
                      retry_node_first=self.retry_node_first, submit_depth_first=self.submit_depth_first,
                      max_job_holds=self.max_job_holds, reset_retries_upon_rescue=self.reset_retries_upon_rescue,
                      default_append_vars=self.default_append_vars,
                      node_job_failure_tolerance=self.node_job_failure_tolerance,
                      remove_job_list_on_failure=self.remove_job_list_on_failure,
                      max_submit_attempts=self.max_submit_attempts,
                      submit_interval=float(self.user_log_scan_interval), max_rescue_num=self.max_rescue_num,
                      write_partial_rescue=self.write_partial_rescue,
                      dag_id=dag_id, node_log=node_log, **more)
        names = {f.name for f in dataclasses.fields(Options)}
        return Options(**{k: v for k, v in wanted.items() if k in names})


def _convert(knob: str, kind: type, text: str, where: str) -> Any:
    text = text.strip()
    if kind is bool:
        low = text.lower()
        if low in ("true", "t", "yes", "1"):
            return True
        if low in ("false", "f", "no", "0"):
            return False
    elif kind is int:
        try:
            return int(text)
        except ValueError:
            pass  # not a whole number: the UsageError below says so
    else:
        return text
    raise UsageError(f"{where}: {knob} = {text!r} is not a valid {kind.__name__}; "
                     f"give {'True or False' if kind is bool else 'a whole number'}")


def _read_config_file(path: str, env: dict[str, str] | None) -> dict[str, tuple[str, str]]:
    """The ``DAGMAN_*`` definitions of a DAGMan configuration file: knob -> (value, file:line).

    The file is read with htc's configuration language against the pool's configuration, so
    macros and conditionals work; only the knobs it defines itself count.
    """
    from htc.config.loader import Loader

    base = load_config("DAGMAN", env=env)
    loader = Loader(base._macros, base._x)   # noqa: SLF001 -- layering one more file on the pool's
    loader.strict = False                    # a user's file, as condor_dagman reads it
    before = {name: base.raw(name) for name in Settings.knob_names()}
    try:
        loader.read_file(path, purpose="DAGMan configuration file",
                         hint="CONFIG in the DAG file and -config name a readable configuration file")
    except OSError as exc:
        raise UsageError(f"cannot read the DAGMan configuration file {path}: {exc.strerror}") from None
    found = {}
    for name in Settings.knob_names():
        raw = base.raw(name)
        if raw != before[name]:
            where = base.where(name)
            label = f"{where[0]}:{where[1]}" if isinstance(where, tuple) else path
            found[name] = (base.get(name) or "", label)
    return found


def load_settings(*, dag_config: str | None = None, config_file: str | None = None,
                  flags: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> Settings:
    """The settings for one DAG: pool config < environment < CONFIG/-config < flags.

    Args:
        dag_config: the DAG file's ``CONFIG`` (absolute path), if any.
        config_file: the ``-config`` file given on the command line, if any.
        flags: knob -> value from command-line flags (None values are ignored).
        env: the environment (default ``os.environ``).

    Raises:
        UsageError: the DAG's CONFIG and -config name different files, a file cannot be read,
            or a value is not of its knob's type.
    """
    cfg = load_config("DAGMAN", env=env)
    settings = Settings()
    for f in fields(Settings):
        if f.name in ("origins", "notes"):
            continue
        knob = "DAGMAN_" + f.name.upper()
        value = cfg.param(knob)
        if value is None or (isinstance(value, str) and not value and f.type in ("str",)):
            value = getattr(settings, f.name)
        setattr(settings, f.name, value)
        origin = cfg.origin(knob)
        settings.origins[knob] = "environment" if origin is not None and origin.kind == "environment" else "config"
    files = {os.path.realpath(p) for p in (dag_config, config_file) if p}
    if len(files) > 1:
        raise UsageError(f"the DAG's CONFIG file {dag_config} and -config {config_file} differ; a DAG manager "
                         "reads one DAGMan configuration file: drop one of them")
    extra = config_file or dag_config or (settings.config_file or None)
    if extra:
        for knob, (text, where) in _read_config_file(extra, env).items():
            name = knob[len("DAGMAN_"):].lower()
            setattr(settings, name, _convert(knob, type(getattr(settings, name)), text, where))
            settings.origins[knob] = where
    for knob, value in (flags or {}).items():
        if value is None:
            continue
        name = knob[len("DAGMAN_"):].lower()
        setattr(settings, name, value)
        settings.origins[knob] = "flag"
    settings.notes.extend(_clamp_submits(settings))
    settings.notes.extend(_fit_submits_to_max_idle(settings))
    return settings


#: DAGMAN_MAX_SUBMITS_PER_INTERVAL's legal range in HTCondor's manual (a value outside is moved in)
SUBMITS_RANGE = (1, 1000)


def _clamp_submits(settings: Settings) -> list[str]:
    """As HTCondor's manual says of DAGMAN_MAX_SUBMITS_PER_INTERVAL: "The legal range of values
    is 1 to 1000. If defined with a value less than 1, the value 1 will be used. If defined with
    a value greater than 1000, the value 1000 will be used." Returns the note for dagman.out."""
    low, high = SUBMITS_RANGE
    value = settings.max_submits_per_interval
    if low <= value <= high:
        return []
    settings.max_submits_per_interval = min(high, max(low, value))
    return [f"Note:  DAGMAN_MAX_SUBMITS_PER_INTERVAL = {value} is outside its legal range {low} to {high}; "
            f"{settings.max_submits_per_interval} is used"]


#: HTCondor's defaults that :func:`_fit_submits_to_max_idle` compares with
_MAX_IDLE_DEFAULT, _SUBMITS_DEFAULT, _SCAN_DEFAULT = 1000, 100, 5


def _fit_submits_to_max_idle(settings: Settings) -> list[str]:
    """As HTCondor's DAGMan (dagman_main.cpp) once its settings are read: a DAGMAN_MAX_JOBS_IDLE
    (or ``-maxidle``) other than its default 1000 lowers DAGMAN_MAX_SUBMITS_PER_INTERVAL, when
    that is still its default 100, to max(1, maxidle / 10), and then DAGMAN_USER_LOG_SCAN_INTERVAL,
    when that is still its default 5, to the submits per interval if it is larger -- so that
    one burst of submissions does not overshoot the idle limit. A value set away from its
    default is kept (with a warning). Returns the notes DAGMan writes to dagman.out."""
    idle = settings.max_jobs_idle
    if idle == _MAX_IDLE_DEFAULT:
        return []
    notes = ["Note:  DAGMAN_MAX_JOBS_IDLE has been changed from the default setting; if your submit files "
             "create multiple procs, you should probably set DAGMAN_MAX_SUBMITS_PER_INTERVAL to 1"]
    limit = max(1, idle // 10)
    if settings.max_submits_per_interval > limit:
        if settings.max_submits_per_interval == _SUBMITS_DEFAULT:
            settings.max_submits_per_interval = limit
            notes.append(f"Note:  DAGMAN_MAX_SUBMITS_PER_INTERVAL has been changed to {limit} because of your "
                         f"DAGMAN_MAX_JOBS_IDLE setting of {idle}")
        else:
            notes.append(f"Warning: your DAGMAN_MAX_SUBMITS_PER_INTERVAL setting of "
                         f"{settings.max_submits_per_interval} may interfere with your DAGMAN_MAX_JOBS_IDLE "
                         f"setting of {idle}")
    submits = settings.max_submits_per_interval
    if settings.user_log_scan_interval > submits:
        if settings.user_log_scan_interval == _SCAN_DEFAULT:
            settings.user_log_scan_interval = submits
            notes.append(f"Note:  DAGMAN_USER_LOG_SCAN_INTERVAL has been changed to {submits} because of the "
                         f"DAGMAN_MAX_SUBMITS_PER_INTERVAL setting of {submits}")
        else:
            notes.append(f"Warning: your DAGMAN_USER_LOG_SCAN_INTERVAL setting of {settings.user_log_scan_interval} "
                         f"may interfere with the DAGMAN_MAX_SUBMITS_PER_INTERVAL setting of {submits}")
    return notes


def node_log_path(settings: Settings, dag_file: str) -> str:
    """``DAGMAN_DEFAULT_NODE_LOG`` for ``dag_file``: ``@(DAG_DIR)`` and ``@(DAG_FILE)`` replaced
    (the default is ``<dag dir>/<dag file>.nodes.log``); a relative result is under the DAG's
    directory."""
    dag_file = os.path.abspath(dag_file)
    path = settings.default_node_log or "@(DAG_DIR)/@(DAG_FILE).nodes.log"
    for name, value in (("DAG_DIR", os.path.dirname(dag_file)), ("DAG_FILE", os.path.basename(dag_file))):
        path = path.replace(f"@({name})", value)
    return os.path.join(os.path.dirname(dag_file), path)

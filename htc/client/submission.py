"""condor_submit as a function: a submit description in, jobs in the schedd's queue out.

:func:`submit` expands the description here first (mistakes are reported before anything is
sent) and sends one ``Submit`` message; the schedd stores the whole cluster in one transaction.
:func:`build_cluster` does the expansion alone, for ``htc submit -dry-run``.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from htc.client import request
from htc.client.request import SCHEDD
from htc.errors import UsageError
from htc.wire import messages as m
from htc.wire.transport import DEFAULT_TIMEOUT, Transport

__all__ = ["SubmitResult", "build_cluster", "cluster_submission", "submit", "submit_message"]

_APPEND = re.compile(r"^\s*([+-]?[A-Za-z_][A-Za-z0-9_.]*)\s*=\s?(.*)$", re.S)


@dataclass(frozen=True)
class SubmitResult:
    """Jobs ``cluster_id.first_proc`` .. ``cluster_id.last_proc`` are in the queue."""

    cluster_id: int
    first_proc: int
    num_procs: int
    warnings: tuple[str, ...] = ()

    @property
    def last_proc(self) -> int:
        """ProcId of the last job submitted."""
        return self.first_proc + self.num_procs - 1

    def summary(self) -> str:
        """condor_submit's last line: ``3 job(s) submitted to cluster 12.``"""
        return f"{self.num_procs} job(s) submitted to cluster {self.cluster_id}."

    def terse(self) -> str:
        """condor_submit ``-terse``: ``12.0 - 12.2``."""
        return f"{self.cluster_id}.{self.first_proc} - {self.cluster_id}.{self.last_proc}"


def _prepare(description: str, *, cwd: str | os.PathLike | None, filename: str | None,
             append: Sequence[str], queue: str | None):
    """The parsed description with ``-append`` commands and a ``-queue`` override applied."""
    from htc.submit import Submit

    sub = Submit(description, filename=filename, cwd=cwd, settings=_submit_settings())
    sub.check_file = functools.partial(check_submit_file, sub.cwd)
    _apply_appends(sub, append)
    if queue is not None:
        sub.setQArgs(queue)
    if not sub.has_queue_statement:
        where = filename or "(stdin)"
        raise UsageError(f'"{where}" doesn\'t contain any "queue" commands -- no jobs queued; '
                         "end the description with 'queue' or give -queue ARGS")
    return sub


def _apply_appends(sub, append: Sequence[str]) -> None:
    """Set ``-append`` commands on ``sub`` (each as if written before every queue statement)."""
    for command in append:
        match = _APPEND.match(command)
        if not match:
            raise UsageError(f"-append {command!r} is not a submit command; write it as 'name = value'")
        name, value = match.group(1), match.group(2).strip()
        if name.lower() == "queue":
            raise UsageError("-append cannot add a queue statement; use -queue ARGS instead")
        sub[name] = value


def check_submit_file(cwd: str, role: str, path: str, transfer: bool) -> None:
    """condor_submit's check of a job's executable (its ``check_sub_file``), with the
    submitter's rights: one that will be transferred must exist, be readable and not be empty;
    a script with DOS line endings is refused as condor_submit refuses it. Not looked at: an
    executable that is not transferred (``transfer_executable = false``: it is a path on the
    execute machine) or that has ``$$(...)`` in its name (resolved at match time). As in
    condor_submit, a docker or container job's executable is checked when it is transferred.

    Raises:
        SubmitError: with condor_submit's message (``ERROR: Can't access executable file ...``).
    """
    from htc.submit.errors import FileCheckError

    if role not in ("executable", "pseudo-executable") or not transfer or "$$" in path:
        return
    full = os.path.join(cwd, path)
    try:
        st = os.stat(full)
        sig = (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if _PASSED.get(full) == sig:
            return  # this very file passed already: see _PASSED
        if not stat.S_ISDIR(st.st_mode):
            os.close(os.open(full, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
    except OSError as exc:
        raise FileCheckError(f"ERROR: Can't access executable file {path}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise FileCheckError(f"ERROR: Can't access executable file {path}: {os.strerror(errno.EISDIR)}")
    if st.st_size == 0:
        raise FileCheckError(f"ERROR: Executable file {path} has zero length")
    with open(full, "rb") as fh:
        first = fh.readline(128)
    if first.startswith(b"#!") and first.endswith(b"\r\n"):
        raise FileCheckError(f"ERROR: Executable file {path} is a script with CRLF (DOS/Windows) line endings.\n"
                              f"This generally doesn't work, and you should probably run 'dos2unix {path}' -- "
                              "or a similar tool -- before you resubmit.")
    if len(_PASSED) >= _PASSED_MAX:
        _PASSED.clear()
    _PASSED[full] = sig


#: executables that passed :func:`check_submit_file`: full path -> their stat signature then. A
#: DAG manager checks one executable for thousands of nodes; the same signature (inode, mode,
#: size, mtime and ctime -- a chmod, chown, ACL change or rewrite moves the ctime) is the same
#: file with the same contents and rights for this process (its uid does not change), and the
#: ``os.stat`` that gives it still needs every folder on the path to be searchable.
_PASSED: dict[str, tuple] = {}
_PASSED_MAX = 256


def build_cluster(description: str, *, cwd: str | os.PathLike | None = None, filename: str | None = None,
                  append: Sequence[str] = (), queue: str | None = None, cluster_id: int = 1):
    """Turn a submit description into a cluster ready for the queue, without submitting.

    Args:
        description: submit-description text.
        cwd: the submit directory (relative paths resolve against it; default: current).
        filename: where the text came from, for messages and ``$(SUBMIT_FILE)``.
        append: ``-append`` commands (``"request_memory = 2G"``), each applying as if written
            just before every queue statement.
        queue: ``-queue`` arguments replacing the description's queue statements.
        cluster_id: the ClusterId to build with.

    Returns:
        ``htc.submit.SubmittedCluster``.

    Raises:
        UsageError: the description does not parse, has no queue statement, or an ``-append``
            command is not ``name = value``.
    """
    sub = _prepare(description, cwd=cwd, filename=filename, append=append, queue=queue)
    return sub.cluster(cluster_id)


#: a cluster id no schedd hands out soon: if it shows up in the ads, they depend on $(Cluster)
_SENTINEL_CLUSTER = 987654321


def submit(description: str, *, cwd: str | os.PathLike | None = None, filename: str | None = None,
           append: Sequence[str] = (), queue: str | None = None, transport: Transport | None = None,
           timeout: float = DEFAULT_TIMEOUT, submission_id: str | None = None,
           resend_for: float = 0.0, send=None) -> SubmitResult:
    """condor_submit: put the jobs of a submit description in the schedd's queue.

    The description is expanded here first, so that mistakes are reported before anything is
    sent and ``$ENV()`` sees this environment. When the job ads depend on the cluster id
    (``output = out.$(Cluster).$(Process)``), which only the schedd knows, the description
    itself is sent and the schedd expands it with the real id.  Either way nothing is queued
    unless everything is: the schedd stores the whole cluster in one transaction and answers
    only once it is durable.

    Args:
        description: submit-description text (a file's contents, or standard input).
        cwd, filename, append, queue: as for :func:`build_cluster`.
        transport: how to reach the schedd (default: this machine's pool).
        timeout: seconds for the schedd to answer.
        submission_id: the client's name for this submission (``Submit.submission_id``): sent
            again with the same id, the same description is answered with the first cluster.
        resend_for: with ``submission_id``, seconds to keep sending the same Submit again when
            its answer is lost (the connection broke or timed out after it went out, the schedd
            is restarting): a schedd that queued it answers with that cluster, so a lost answer
            never queues the jobs twice. An unreachable schedd at the first try fails at once.
        send: with ``submission_id``, a caller's faster way to the schedd (the DAG manager's
            kept connection): ``send(msg, timeout)`` returns the reply; when it raises a
            connection error the message goes the usual way, on a new connection, with the
            same id (so it is never queued twice).

    Returns:
        A :class:`SubmitResult` (cluster id and the range of procs).

    Raises:
        UsageError: the description is wrong (the message names the line and command).
        DaemonUnreachable: no schedd is running (start the pool with 'htc pool start').
        RemoteError: the schedd refused the cluster; its reason is in the message.
    """
    msg, warnings = submit_message(description, cwd=cwd, filename=filename, append=append, queue=queue,
                                   submission_id=submission_id)
    reply = None
    if send is not None and submission_id is not None:
        from htc.wire.errors import ConnectionClosed, DaemonUnreachable, RequestTimeout

        try:
            reply = send(msg, timeout)
        except (ConnectionClosed, RequestTimeout, DaemonUnreachable):
            reply = None  # lost or never sent: the usual way below sends it again, same id
    if reply is None:
        reply = _send_submission(msg, transport, timeout, resend_for if submission_id is not None else 0.0)
    return SubmitResult(cluster_id=reply.cluster_id, first_proc=reply.first_proc, num_procs=reply.num_procs,
                        warnings=warnings)


def submit_message(description: str, *, cwd: str | os.PathLike | None = None, filename: str | None = None,
                   append: Sequence[str] = (), queue: str | None = None,
                   submission_id: str | None = None) -> tuple[m.Submit, tuple[str, ...]]:
    """The ``Submit`` message :func:`submit` sends for a description, and the expansion's warnings.

    Raises:
        UsageError: as for :func:`submit` (nothing is sent).
    """
    ads, warnings = _expanded(description, cwd=cwd, filename=filename, append=append, queue=queue)
    if isinstance(ads, m.Submit):
        if submission_id is None:
            return ads, warnings
        ads = (ads.cluster_ad, ads.proc_ads)
    # built once, with its id: each construction validates the ad texts again
    return m.Submit(cluster_ad=ads[0], proc_ads=ads[1], submission_id=submission_id), warnings


def cluster_submission(description: str, *, cwd: str | os.PathLike | None = None, filename: str | None = None,
                       append: Sequence[str] = (),
                       submission_id: str | None = None) -> tuple[m.ClusterSubmission, tuple[str, ...]]:
    """The cluster of a ``SubmitClusters`` for a description: the fields :func:`submit_message`
    gives its ``Submit``, built (and checked) once, and the expansion's warnings.

    Raises:
        UsageError: as for :func:`submit` (nothing is sent).
    """
    ads, warnings = _expanded(description, cwd=cwd, filename=filename, append=append, queue=None)
    if isinstance(ads, m.Submit):
        ads = (ads.cluster_ad, ads.proc_ads)
    return m.ClusterSubmission(cluster_ad=ads[0], proc_ads=ads[1], submission_id=submission_id), warnings


def _expanded(description: str, *, cwd, filename: str | None, append: Sequence[str],
              queue: str | None) -> tuple[tuple[str, tuple[str, ...]] | m.Submit, tuple[str, ...]]:
    """The description expanded here: ``(cluster ad text, proc ad texts)`` -- or, when the ads
    depend on the cluster id, the ``Submit`` of the description itself, which the schedd
    expands -- and the warnings.

    Raises:
        UsageError: as for :func:`submit`.
    """
    mark = str(_SENTINEL_CLUSTER)
    if queue is None and append:
        sub, cluster = reused_cluster(description, cwd=cwd, filename=filename, append=append)
    else:
        sub = _prepare(description, cwd=cwd, filename=filename, append=append, queue=queue)
        sub.check_file = _sentinel_check(sub)
        cluster = sub.cluster(_SENTINEL_CLUSTER, check=_per_submission_limit)
    # the schedd assigns the cluster id (Submit's contract); send none
    cluster_ad = {k: v for k, v in cluster.cluster_ad.items() if k.lower() != "clusterid"}
    procs = list(cluster.proc_ads())
    if any(mark in text for text in cluster_ad.values()) or any(mark in t for p in procs for t in p.values()):
        # imported only here: it brings the job queue's modules (sqlite), a quarter second
        from htc.daemons.schedd.requests import description_message

        return description_message(sub.submit_text, sub.cwd, filename), tuple(cluster.warnings)
    return (_ad_text(cluster_ad), tuple(_ad_text(p) for p in procs)), tuple(cluster.warnings)


def _sentinel_check(sub):
    """The executable check of a submission expanded with the sentinel cluster id: an executable
    named after the cluster id is only known once the schedd assigns the id."""
    mark = str(_SENTINEL_CLUSTER)
    return lambda role, path, transfer: None if mark in path else check_submit_file(sub.cwd, role, path, transfer)


#: analysed expansions by (description, cwd, file name, appended names, settings, submit second):
#: a DAG manager's nodes share descriptions and differ in their appended values (htc.submit.reuse)
_REUSE: dict = {}
_REUSE_MAX = 64


def reused_cluster(description: str, *, cwd, filename: str | None, append: Sequence[str]):
    """``(sub, cluster)`` for a description with ``-append`` commands, as :func:`submit_message`
    expands it with the sentinel cluster id, reusing an earlier submission's expansion of the
    same description with the same appended names where that gives the same result
    (:class:`htc.submit.reuse.Reusable`).

    Raises:
        UsageError: as :func:`submit_message`.
    """
    import time

    from htc.submit.macros import environ_snapshot
    from htc.submit.reuse import Reusable, varying_name

    environ = environ_snapshot(None)
    config = _submit_config(environ)
    settings = _submit_settings(config)
    check = functools.partial(_per_submission_limit, config=config)
    now = int(time.time())
    names = tuple(_APPEND.match(c).group(1) if _APPEND.match(c) else c for c in append)
    key = (description, os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd()), filename, names, now)
    entry = _REUSE.get(key)
    if entry is not None and entry[0].settings is settings and entry[0].env == environ:
        sub = entry[0].fork()
        _apply_appends(sub, append)
        sub.check_file = _sentinel_check(sub)
        cluster = entry[1].cluster(sub, check=check)
        if cluster is None:  # not provably the same: expand afresh
            cluster = sub.cluster(_SENTINEL_CLUSTER, qdate=now, check=check)
        return sub, cluster
    sub = _prepare(description, cwd=cwd, filename=filename, append=append, queue=None)
    sub.check_file = _sentinel_check(sub)
    varying = frozenset(varying_name(n) for n in names)
    cluster, reusable = Reusable.analyse(sub, _SENTINEL_CLUSTER, now, varying, check=check)
    if reusable is not None:
        for old in list(_REUSE):  # (list(): other threads may add entries meanwhile)
            if old[-1] != now or len(_REUSE) >= _REUSE_MAX:
                _REUSE.pop(old, None)  # an earlier second's analysis is never used again
        _REUSE[key] = (sub, reusable)
    return sub, cluster


def _per_submission_limit(num_procs: int, config=None) -> None:
    """Refuse, before expanding a proc, what the schedd would refuse (MAX_JOBS_PER_SUBMISSION).

    The schedd checks every limit again; this spares expanding ``queue 100000000`` here first.
    """
    config = config or _submit_config()
    if _LIMIT_CACHE and _LIMIT_CACHE[0] is config:
        limit = _LIMIT_CACHE[1]
    else:
        limit = config.param("MAX_JOBS_PER_SUBMISSION")
        _LIMIT_CACHE[:] = [config, limit]
    if limit is not None and num_procs > limit:
        raise UsageError(f"Number of submitted jobs would exceed MAX_JOBS_PER_SUBMISSION: this submission "
                         f"makes {num_procs} jobs and the limit is {limit}; submit fewer jobs at a time. "
                         "No jobs were queued.")


#: the SUBMIT configuration last read, with what tells whether it changed (see :func:`_submit_config`)
_CONFIG_CACHE: list = []
_SETTINGS_CACHE: list = []  # [config, the SubmitSettings built from it]
_LIMIT_CACHE: list = []  # [config, its MAX_JOBS_PER_SUBMISSION]


def _htc_environment(environ: Mapping[str, str] | None = None) -> tuple:
    """The environment variables that can change the configuration (``HTC_*``, ``_HTC_*``), of
    ``environ`` (a snapshot of ``os.environ``; default: ``os.environ``)."""
    environ = os.environ if environ is None else environ
    return tuple(sorted((k, v) for k, v in environ.items() if k.upper().startswith(("HTC", "_HTC"))))


def _watched_paths(config) -> tuple[str, ...]:
    """Every file the configuration was read from, the folder of each, and the LOCAL_CONFIG_DIR
    folders (a file dropped into one changes the folder's mtime)."""
    files = list(config.files)
    folders = {os.path.dirname(f) for f in files}
    try:
        folders.update(str(d) for d in config.param("LOCAL_CONFIG_DIR") or ())
    except Exception:  # noqa: BLE001 -- a malformed value: the files and their folders still count
        folders.add("")
    return (*files, *sorted(folders))


def _stats(paths: tuple[str, ...]) -> tuple:
    out = []
    for path in paths:
        try:
            st = os.stat(path)
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


def _submit_config(environ: Mapping[str, str] | None = None):
    """The configuration as ``SUBMIT`` sees it, read once per process and again only when a
    file it came from (or the folder of one, or an HTC environment variable) changed: a DAG
    manager submits thousands of nodes, and reading the configuration for each costs more than
    expanding the node's description."""
    from htc.config import load_config

    env = _htc_environment(environ)
    if _CONFIG_CACHE:
        cached_env, paths, stats, config = _CONFIG_CACHE
        if cached_env == env and _stats(paths) == stats:
            return config
    # Read as a tool (SUBMIT), not as the schedd: a client is not held to a daemon's config
    # safety rules (it may use a pool another user runs); the schedd's own check decides anyway.
    config = load_config("SUBMIT")
    paths = _watched_paths(config)
    _CONFIG_CACHE[:] = [env, paths, _stats(paths), config]
    return config


def _submit_settings(config=None):
    """The :class:`~htc.submit.SubmitSettings` of the current configuration (built once per
    configuration read: JOB_DEFAULT_*, UID_DOMAIN, FILESYSTEM_DOMAIN, SUBMIT_ATTRS, ...)."""
    from htc.submit.settings import settings_from_config

    config = config or _submit_config()
    if _SETTINGS_CACHE and _SETTINGS_CACHE[0] is config:
        return _SETTINGS_CACHE[1]
    settings = settings_from_config(config)
    _SETTINGS_CACHE[:] = [config, settings]
    return settings


def _send_submission(msg: m.Submit, transport: Transport | None, timeout: float, resend_for: float) -> m.Message:
    """Send ``msg``; while its answer is lost, send it again for ``resend_for`` seconds (see
    :func:`submit`)."""
    import sys
    import time

    from htc.wire.errors import ConnectionClosed, DaemonUnreachable, RequestTimeout

    deadline = None
    delay = 0.2
    while True:
        try:
            return request.send_command(SCHEDD, msg, transport=transport, timeout=timeout)
        except (ConnectionClosed, RequestTimeout, DaemonUnreachable) as exc:
            if resend_for <= 0:
                raise
            if deadline is None:
                if isinstance(exc, DaemonUnreachable):
                    raise  # nothing went out
                deadline = time.monotonic() + resend_for
                print(f"htc: the schedd's answer to the submission was lost ({exc}); sending it again",
                      file=sys.stderr)
            if time.monotonic() > deadline:
                raise UsageError(f"the schedd did not answer for {resend_for:g} s after it may have queued the jobs "
                                 f"({exc}); 'htc q' shows whether they are queued (submission id "
                                 f"{msg.submission_id})") from None
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def _ad_text(attrs: Mapping[str, str]) -> str:
    """``{name: expression text}`` as new-syntax ClassAd text for the wire."""
    return "[ " + "; ".join(f"{name} = {text}" for name, text in attrs.items()) + " ]"

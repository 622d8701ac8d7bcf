"""Submitting a node's job: its submit description plus what DAGMan adds, sent once.

The description is the node's submit file (or its inline text), with the ``VARS ... PREPEND``
definitions before it and, as condor_submit's ``-append`` (each just before the queue
statement, so they beat the file's own definitions), the ``VARS``, DAGMan's macros (``JOB``,
``RETRY``, ``DAGManJobId``, ``DAG_STATUS``, ``FAILED_COUNT``, ``DAG_PARENT_NAMES``), the job-ad
attributes (``+DAGManJobId``, ``+DAGNodeName`` ...), ``submit_event_notes = DAG Node: X`` (the
note on the submit event that binds the cluster to its node on recovery), ``dagman_log`` (the
schedd writes the job's events to the nodes log too), and the node's ``priority`` unless the
file sets one.

Each submission carries a ``submission_id`` naming the DAG manager job, the node and the
retry: sent again after a lost answer (or by a restarted manager), the schedd answers with the
cluster it already queued, so a node's job is never queued twice.

The submissions go over connections to the schedd that the manager keeps (:class:`ScheddLink`,
one per submission in flight, each a plain blocking socket) instead of a new event loop and a
new connection per node, as HTCondor's DAGMan keeps its schedd connection between submits. A
kept connection the schedd has closed (it restarted, or it timed out an idle client) fails the
request, and the node is sent again on a new connection with the same submission id.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from dataclasses import dataclass

from htc.client import submit
from htc.errors import HTCError, UsageError

__all__ = ["NodeSubmission", "ScheddLink", "Submitted", "describe", "submit_many", "submit_node"]

_ID_SAFE = re.compile(r"[A-Za-z0-9._:-]+")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]")
_SETS_PRIORITY = re.compile(r"^\s*(priority|\+JobPrio|MY\.JobPrio)\s*=", re.I | re.M)


@dataclass(frozen=True)
class NodeSubmission:
    """Everything one node submission needs (from the engine's ``SubmitNode`` and the settings)."""

    node: str
    submit_file: str | None
    submit_text: str | None
    cwd: str
    macros: dict[str, str]
    prepend: dict[str, str]
    attrs: dict[str, str]
    notes: str
    priority: int
    retry: int
    node_log: str
    dag_id: int
    suppress_notification: bool = False
    put_failed_jobs_on_hold: bool = False
    hold_claim_time: int = 0
    #: makes the submission ids of a manager run by hand (``dag_id`` 0) its own
    run_token: str = ""


@dataclass(frozen=True)
class Submitted:
    """The node's cluster and how many procs it has."""

    cluster: int
    procs: int


def _line(name: str, value: str) -> str:
    return f"{name} = {' '.join(str(value).splitlines())}"


#: submit files read: path -> (stat signature, text); a wide DAG's nodes share one file
_FILES: dict[str, tuple[tuple, str]] = {}
_FILES_MAX = 256


def _read_submit_file(path: str) -> str:
    """The text of a node's submit file, read again only when its stat changed (a stat costs
    less than an open and a read; thousands of nodes share one file).

    Raises:
        OSError: it cannot be read.
    """
    st = os.stat(path)
    sig = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    known = _FILES.get(path)
    if known is not None and known[0] == sig:
        return known[1]
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    if len(_FILES) >= _FILES_MAX:
        _FILES.clear()
    _FILES[path] = (sig, text)
    return text


def describe(sub: NodeSubmission) -> tuple[str, list[str], str | None]:
    """The description text, the ``-append`` commands and the file name for messages."""
    if sub.submit_text is not None:
        text, filename = sub.submit_text, None
    elif sub.submit_file:
        try:
            text = _read_submit_file(sub.submit_file)
        except OSError as exc:
            raise UsageError(f"cannot read the submit file {sub.submit_file} of node {sub.node}: "
                             f"{exc.strerror}") from None
        filename = sub.submit_file
    else:
        raise UsageError(f"node {sub.node} has neither a submit file nor an inline description")
    if sub.prepend:
        text = "\n".join(_line(k, v) for k, v in sub.prepend.items()) + "\n" + text
    append = [_line(k, v) for k, v in sub.macros.items()]
    append += [_line(f"+{k}" if not k.startswith("+") else k, v) for k, v in sub.attrs.items()]
    append.append(_line("submit_event_notes", sub.notes))
    append.append(_line("dagman_log", sub.node_log))
    if sub.priority and not _SETS_PRIORITY.search(text):
        append.append(_line("priority", str(sub.priority)))
    if sub.suppress_notification:
        append.append("notification = never")
    if sub.put_failed_jobs_on_hold:
        append.append("on_exit_hold = (ExitBySignal =?= true) || (ExitCode =!= UNDEFINED && ExitCode != 0)")
        append.append('on_exit_hold_reason = "Node job failed and DAGMAN_PUT_FAILED_JOBS_ON_HOLD is set"')
    if sub.hold_claim_time > 0:
        append.append(_line("+KeepClaimIdle", str(sub.hold_claim_time)))
    return text, append, filename


def submission_id(sub: NodeSubmission) -> str:
    """The id with which a resent submission of this node is answered with its first cluster.

    It names the manager job (a restarted manager of the same job sends the same ids, so a
    submission whose answer was lost in a crash is not queued again), the node and the retry.
    """
    node = sub.node
    if not _ID_SAFE.fullmatch(node):   # splice names have '+'; other names may have anything
        node = _ID_UNSAFE.sub("_", node) + ".h" + hashlib.sha1(node.encode()).hexdigest()[:12]
    return f"dagman-{sub.dag_id}{sub.run_token}-{node}-retry{sub.retry}"


class ScheddLink:
    """Kept blocking connections to the schedd, one per submission in flight (thread-safe).

    :meth:`send` takes an idle connection (or opens one), sends the request and puts the
    connection back after a whole answer; a connection that failed is closed, never reused.
    For a transport without a blocking form (SSH) it answers None: the caller goes the usual way.
    """

    def __init__(self, transport=None):
        """Connections through ``transport`` (default: this machine's pool, opened on first use)."""
        self.transport = transport
        self._idle: list = []
        self._lock = threading.Lock()
        #: connections opened so far (for dagman.out and the tests)
        self.opened = 0

    def send(self, msg, timeout: float):
        """``msg``'s reply from the schedd over a kept connection, or None (no blocking form).

        Raises:
            ConnectionClosed, RequestTimeout, DaemonUnreachable: the request may be lost; the
                connection is closed.
            RemoteError: the schedd refused; the connection stays in step and is kept.
        """
        from htc.client.request import SCHEDD, default_transport
        from htc.wire import blocking
        from htc.wire.errors import RemoteError

        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            if self.transport is None:
                self.transport = default_transport()
            conn = blocking.connect(self.transport, SCHEDD, timeout=timeout)
            if conn is None:
                return None
            with self._lock:
                self.opened += 1
        try:
            reply = conn.request(msg, timeout=timeout)
        except RemoteError:
            self._put_back(conn)
            raise
        except BaseException:
            conn.close()
            raise
        self._put_back(conn)
        return reply

    def _put_back(self, conn) -> None:
        if conn.closed:
            return
        with self._lock:
            self._idle.append(conn)

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def submit_node(sub: NodeSubmission, *, attempts: int = 6, delay: float = 0.0, transport=None,
                link: ScheddLink | None = None) -> Submitted:
    """Queue the node's job; retry a schedd that is away up to ``attempts`` times in all.

    Raises:
        UsageError: the description is wrong (not retried: it would fail the same way).
        HTCError: the schedd could not be reached, or refused, every time.
    """
    text, append, filename = describe(sub)
    if delay > 0:
        time.sleep(delay)  # DAGMAN_SUBMIT_DELAY: spacing submissions is the knob's point
    wait = 1.0
    for attempt in range(1, max(1, attempts) + 1):
        try:
            result = submit(text, cwd=sub.cwd or os.getcwd(), filename=filename, append=append,
                            transport=transport, submission_id=submission_id(sub), resend_for=60.0,
                            send=link.send if link is not None else None)
            return Submitted(cluster=result.cluster_id, procs=result.num_procs)
        except UsageError:
            raise
        except HTCError:
            if attempt >= attempts:
                raise
        time.sleep(wait)  # the schedd is away (restarting): DAGMan backs off and tries again
        wait = min(wait * 2, 30.0)
    raise AssertionError("unreachable")


#: node submissions in flight at once: the schedd answers one while the next is being expanded
PARALLEL_SUBMITS = 4


def submit_many(subs: list[NodeSubmission], *, attempts: int = 1, delay: float = 0.0, transport=None,
                workers: int = PARALLEL_SUBMITS, link: ScheddLink | None = None) -> list[Submitted | HTCError]:
    """Submit several nodes, a few at a time (one after the other with a ``delay``), over
    ``link``'s kept connections when given; returns, in order, each one's :class:`Submitted` or
    the error that stopped it."""
    def one(sub: NodeSubmission) -> Submitted | HTCError:
        try:
            return submit_node(sub, attempts=attempts, delay=delay, transport=transport, link=link)
        except HTCError as exc:
            return exc

    if len(subs) == 1 or delay > 0 or workers <= 1:
        return [one(sub) for sub in subs]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(workers, len(subs)), thread_name_prefix="submit") as pool:
        return list(pool.map(one, subs))

"""The client library: what the ``htc`` tools and the executor use to talk to a pool.

Every HTCondor tool is one function here, and the ``htc`` command is a thin shell over them
(it parses, calls one function, prints).  The executor and the tests call the same functions.

=======================================  =================================================================
HTCondor tool                            ``htc.client``
=======================================  =================================================================
condor_submit                            :func:`submit` (:func:`build_cluster`: ``-dry-run``)
condor_q                                 :func:`query`
condor_q -better-analyze                 :func:`analyze` (:func:`analyze_job`: ads in, report out)
condor_rm, _hold, _release, _vacate_job  :func:`act` on a :func:`parse_selection`
condor_qedit, condor_prio                :func:`edit`, :func:`set_priority`
condor_history                           :func:`history`
condor_wait                              :func:`wait_for_jobs`
condor_status                            :func:`query_collector`
condor_reschedule                        :func:`reschedule`
htc pool start / stop / status           :func:`start_pool`, :func:`stop_pool`, :func:`pool_status`
condor_off, _on, _restart, _reconfig     :func:`daemons_off`, :func:`daemons_on`, :func:`daemons_restart`,
                                         :func:`reconfig`
condor_vacate, condor_drain              :func:`vacate_slots`, :func:`drain_machines`
condor_userprio                          :func:`user_priorities`, :func:`set_user_priority`
condor_ping, any request                 :func:`ping`, :func:`query_master`, :func:`send_command`
condor_ping's authorization levels       :func:`check_access`
condor_tail, _ssh_to_job, _who           :func:`find_running_job` (a running job's sandbox here),
                                         :func:`running_on_this_machine`, :func:`startd_slots`
=======================================  =================================================================

Without a ``transport`` every call reaches the daemons of this machine's pool, under
``$HTC_HOME/sockets``.  Errors are :class:`htc.HTCError` subclasses whose message says what to
do next: ``UsageError`` (the caller's mistake), ``DaemonUnreachable`` (start the pool with
``htc pool start``), ``RemoteError`` (the daemon refused; its reason is in the message).

Modules:

- ``request``: one request to one daemon (``send_command``, ``query_collector``, ``ping``, ...);
  every other module goes through it.
- ``submission``: condor_submit.
- ``selection``: which jobs a tool acts on (condor_rm's job arguments).
- ``jobs``: condor_q, condor_rm and friends, condor_qedit, condor_prio, condor_history, analyze.
- ``analysis``: ``-better-analyze`` as a pure function of a job ad and slot ads.
- ``wait``: condor_wait, following a job event log.
- ``pool``: the personal pool (start, stop, status).
- ``access``: condor_ping's question, whether the caller has a level on a daemon.
- ``sandbox``: a running job's sandbox on this machine (condor_tail, condor_ssh_to_job, condor_who).
- ``admin``: the administrator tools on a running pool (off/on/restart/reconfig, vacate, drain,
  reschedule, userprio).
"""

from __future__ import annotations

from htc.client.admin import (
    UserPriority, daemons_off, daemons_on, daemons_restart, drain_machines, reconfig, reschedule, set_user_priority,
    user_priorities, vacate_slots,
)
from htc.client.analysis import JobAnalysis, analyze_job, job_status_text
from htc.client.jobs import ActResult, act, analyze, current_user, edit, history, history_path, query, set_priority
from htc.client.pool import DaemonInfo, PoolStartError, PoolStatus, pool_status, start_pool, stop_pool
from htc.client.request import (
    SCHEDD, AdType, default_transport, ping, query_collector, query_collector_async, query_master, send_command,
    send_command_async,
)
from htc.client.selection import JobSelection, parse_selection
from htc.client.submission import SubmitResult, build_cluster, submit
from htc.client.wait import WaitResult, parse_job_spec, wait_for_jobs
from htc.client.access import AccessReport, check_access
from htc.client.sandbox import RunningJob, find_running_job, running_on_this_machine, startd_slots

__all__ = [
    # one request to a daemon
    "SCHEDD", "AdType", "default_transport", "ping", "query_collector", "query_collector_async", "query_master",
    "send_command", "send_command_async",
    # jobs
    "SubmitResult", "build_cluster", "submit",
    "JobSelection", "parse_selection",
    "ActResult", "act", "analyze", "current_user", "edit", "history", "history_path", "query", "set_priority",
    "JobAnalysis", "analyze_job", "job_status_text",
    "WaitResult", "parse_job_spec", "wait_for_jobs",
    # the pool
    "DaemonInfo", "PoolStartError", "PoolStatus", "UserPriority", "daemons_off", "daemons_on", "daemons_restart",
    "drain_machines", "pool_status", "reconfig", "reschedule", "set_user_priority", "start_pool", "stop_pool",
    "user_priorities", "vacate_slots",
    # a running job, and access
    "AccessReport", "check_access", "RunningJob", "find_running_job", "running_on_this_machine", "startd_slots",
]

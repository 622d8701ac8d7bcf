"""THE param table: every knob htc reads, with its type, HTCondor's default and a one-line doc.

Code reads knobs only through :meth:`htc.config.Config.param`, which refuses names not
declared here (:class:`~htc.config.errors.UndeclaredKnob`); ``tests/unit/test_config_params.py``
scans the source tree so that a missing declaration fails a test, not a user. The scan sees
``<x>.param("NAME")`` when the receiver is named like a configuration (``cfg``, ``config``,
``self.config``) or the name looks like a knob (``MAX_JOBS_RUNNING``), so keep the Config
object in a variable with such a name.

Each entry is ``P(name, type, default, doc[, origin])``:

* ``type`` -- how :meth:`Config.param` returns the value: ``int``, ``float``, ``bool``,
  ``str``, ``path``, ``list`` (split on commas and white space) or ``expr`` (ClassAd
  expression source text, for the daemon to compile).
* ``default`` -- the *raw* default, macros allowed (``$(LOCAL_DIR)/spool``); ``""`` = unset.
* ``origin`` -- ``table`` (HTCondor's param table has this default; it also answers ``$(NAME)``
  references, as in HTCondor), ``code`` (HTCondor's compiled-in default, not in its table, so
  ``$(NAME)`` of an unset knob stays empty as in HTCondor), ``htc`` (a knob of htc's own),
  ``changed`` (HTCondor's table has the knob with another default; htc's differs on purpose,
  the doc says HTCondor's and why; it answers ``$(NAME)`` like a table knob) or ``detected``
  (measured at start-up, see :mod:`htc.config.detected`).

To add a knob: append one ``P(...)`` line in its area, with HTCondor's name and default
(``python -c 'import htcondor2; print(htcondor2.param["NAME"])'`` with
``CONDOR_CONFIG=ONLY_ENV`` shows HTCondor's), then run ``python -m htc.config.paramdoc`` to
refresh the table in ``docs/configuration.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Param", "PARAMS", "PATTERN_PARAMS", "TYPES", "lookup", "table_default", "markdown_table"]

TYPES = ("int", "float", "bool", "str", "path", "list", "expr")
ORIGINS = ("table", "code", "htc", "changed", "detected")


@dataclass(frozen=True)
class Param:
    """One knob: name (HTCondor's spelling), type, raw default, one-line doc, default origin."""

    name: str
    type: str
    default: str
    doc: str
    origin: str = "table"

    @property
    def in_table(self) -> bool:
        """True when HTCondor's param table has this knob (its default answers ``$(NAME)``)."""
        return self.origin in ("table", "changed")

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"param {self.name}: type {self.type!r} is not one of {TYPES}")
        if self.origin not in ORIGINS:
            raise ValueError(f"param {self.name}: origin {self.origin!r} is not one of {ORIGINS}")


P = Param
_DISK_QUANTUM = ('quantize(RequestDisk -     ifthenelse(\n        MappingMethod ?: "" != "Copy",\n'
                 '            ifthenelse(\n        RequestedCatalogs is undefined || catalogs is undefined,\n'
                 '        0,\n        sum(\n            evalInEachContext(\n'
                 '                member(CatalogID, RequestedCatalogIDs)\n                ? CatalogSize : 0,\n'
                 '                catalogs\n            )\n        )\n    ),\n        0\n'
                 '),{Target.DiskQuantum?:1024})')

_ENTRIES = [
    # --- layout: where things live (htc's first-use config points LOCAL_DIR at $HTC_HOME) ---
    P("RELEASE_DIR", "path", "/usr", "Accepted for HTCondor configurations and not used: htc's programs are Python entry points, found on PATH and by the package (HTCondor: where HTCondor's programs are installed (bin, sbin, libexec))."),
    P("LOCAL_DIR", "path", "$(TILDE)", "Root of this machine's state: log, spool and execute directories."),
    P("BIN", "path", "$(RELEASE_DIR)/bin", "Accepted for HTCondor configurations and not used: htc's programs are Python entry points, found on PATH and by the package (HTCondor: directory of the user tools)."),
    P("SBIN", "path", "$(RELEASE_DIR)/sbin", "Accepted for HTCondor configurations and not used: htc's programs are Python entry points, found on PATH and by the package (HTCondor: directory of the daemon programs)."),
    P("LIBEXEC", "path", "$(RELEASE_DIR)/libexec", "Accepted for HTCondor configurations and not used: htc's programs are Python entry points, found on PATH and by the package (HTCondor: directory of helper programs)."),
    P("LOG", "path", "$(LOCAL_DIR)/log", "Accepted for HTCondor configurations and not used: daemon logs are always $HTC_HOME/log (HTCondor: directory of daemon logs and address files)."),
    P("SPOOL", "path", "$(LOCAL_DIR)/spool", "Directory of the job queue, history and job sandboxes."),
    P("EXECUTE", "path", "$(LOCAL_DIR)/execute",
      "Directory under which jobs run (one scratch dir per job; left at this default, a root startd whose "
      "jobs' users cannot reach it uses /var/lib/htc/execute/<hash of HTC_HOME>)."),
    P("LOCK", "path", "$(LOG)", "Accepted for HTCondor configurations and not used: htc takes its locks beside the files they protect (HTCondor: directory of lock files)."),
    P("RUN", "path", "$(LOCK)", "Accepted for HTCondor configurations and not used: the daemons' sockets are always $HTC_HOME/sockets (HTCondor: directory of sockets and other run-time files)."),
    P("HISTORY", "path", "$(SPOOL)/history", "Accepted for HTCondor configurations and not used: the job queue and the history are one sqlite database under SPOOL (WAL, compacted by sqlite), not HTCondor's log files (HTCondor: file of completed and removed job ads)."),
    P("JOB_QUEUE_LOG", "path", "$(SPOOL)/job_queue.log", "Accepted for HTCondor configurations and not used: the job queue and the history are one sqlite database under SPOOL (WAL, compacted by sqlite), not HTCondor's log files (HTCondor: hTCondor's job queue transaction log)."),
    P("JOB_QUEUE_DB", "path", "$(SPOOL)/job_queue.db", "The schedd's sqlite job queue.", "htc"),
    P("STARTD_HISTORY", "path", "$(LOG)/startd_history", "Accepted for HTCondor configurations and not used: the startd keeps no history file; a job's record is the schedd's history (HTCondor: file of ads of jobs this machine ran)."),
    P("ACCOUNTANT_DATABASE_FILE", "path", "$(SPOOL)/Accountantnew.log", "The accountant's usage database."),
    P("LOCAL_UNIV_EXECUTE", "path", "$(SPOOL)/local_univ_execute", "Accepted for HTCondor configurations and not used: a local- or scheduler-universe job runs in its Iwd, as the schedd starts it (HTCondor: scratch directory of local-universe jobs)."),
    P("DAEMON_SOCKET_DIR", "str", "auto", "Accepted for HTCondor configurations and not used: the daemons' sockets are always $HTC_HOME/sockets (HTCondor: directory of daemons' Unix sockets (auto: under LOCK))."),
    # --- configuration files ---
    P("LOCAL_CONFIG_FILE", "list", "", "Files read after the main file (later wins)."),
    P("LOCAL_CONFIG_DIR", "list", "", "Directories whose files are read after the main file, in name order."),
    P("LOCAL_CONFIG_DIR_EXCLUDE_REGEXP", "str",
      r"^((\..*)|(.*\.pl)|(.*\.py)|(.*\.sh)|(.*~)|(#.*)|(.*\.rpmsave)|(.*\.rpmnew)|(.*\.dpkg-old)"
      r"|(.*\.dpkg-dist)|(.*\.cfsaved))$", "File names in LOCAL_CONFIG_DIR that are skipped."),
    P("REQUIRE_LOCAL_CONFIG_FILE", "bool", "true", "Fail when a LOCAL_CONFIG_FILE cannot be read."),
    P("ENABLE_RUNTIME_CONFIG", "bool", "false", "Accepted for HTCondor configurations and not used: htc config_val has no -set or -rset; edit the files and run htc reconfig (HTCondor: allow condor_config_val -rset on running daemons)."),
    P("ENABLE_PERSISTENT_CONFIG", "bool", "false", "Accepted for HTCondor configurations and not used: htc config_val has no -set or -rset; edit the files and run htc reconfig (HTCondor: allow condor_config_val -set on running daemons)."),
    # --- daemon logs ---
    P("ALL_DEBUG", "str", "", "Accepted for HTCondor configurations and not used: daemon logs have one level; there are no debug categories (HTCondor: debug categories added to every daemon log)."),
    P("MAX_DEFAULT_LOG", "str", "10 Mb", "Accepted for HTCondor configurations and not used: daemon logs are not rotated by the daemons (HTCondor: size at which a daemon log is rotated)."),
    P("MASTER_LOG", "path", "$(LOG)/MasterLog", "Accepted for HTCondor configurations and not used: each daemon logs to $(LOG)/<Daemon>Log under HTC_HOME (shadows log in SchedLog, starters in StartLog) (HTCondor: the master's log)."),
    P("MASTER_DEBUG", "str", "", "Accepted for HTCondor configurations and not used: daemon logs have one level; there are no debug categories (HTCondor: debug categories of the master's log)."),
    P("COLLECTOR_LOG", "path", "$(LOG)/CollectorLog", "Accepted for HTCondor configurations and not used: each daemon logs to $(LOG)/<Daemon>Log under HTC_HOME (shadows log in SchedLog, starters in StartLog) (HTCondor: the collector's log)."),
    P("COLLECTOR_DEBUG", "str", "", "Accepted for HTCondor configurations and not used: daemon logs have one level; there are no debug categories (HTCondor: debug categories of the collector's log)."),
    P("NEGOTIATOR_LOG", "path", "$(LOG)/NegotiatorLog", "Accepted for HTCondor configurations and not used: each daemon logs to $(LOG)/<Daemon>Log under HTC_HOME (shadows log in SchedLog, starters in StartLog) (HTCondor: the negotiator's log)."),
    P("NEGOTIATOR_MATCH_LOG", "path", "$(LOG)/MatchLog", "Accepted for HTCondor configurations and not used: matches are logged in NegotiatorLog (HTCondor: log of every match the negotiator makes)."),
    P("NEGOTIATOR_DEBUG", "str", "D_MATCH", "Accepted for HTCondor configurations and not used: daemon logs have one level; there are no debug categories (HTCondor: debug categories of the negotiator's log)."),
    P("SCHEDD_LOG", "path", "$(LOG)/SchedLog", "Accepted for HTCondor configurations and not used: each daemon logs to $(LOG)/<Daemon>Log under HTC_HOME (shadows log in SchedLog, starters in StartLog) (HTCondor: the schedd's log)."),
    P("SCHEDD_DEBUG", "str", "D_PID", "Accepted for HTCondor configurations and not used: daemon logs have one level; there are no debug categories (HTCondor: debug categories of the schedd's log)."),
    P("STARTD_LOG", "path", "$(LOG)/StartLog", "Accepted for HTCondor configurations and not used: each daemon logs to $(LOG)/<Daemon>Log under HTC_HOME (shadows log in SchedLog, starters in StartLog) (HTCondor: the startd's log)."),
    P("STARTD_DEBUG", "str", "", "Accepted for HTCondor configurations and not used: daemon logs have one level; there are no debug categories (HTCondor: debug categories of the startd's log)."),
    P("SHADOW_LOG", "path", "$(LOG)/ShadowLog", "Accepted for HTCondor configurations and not used: each daemon logs to $(LOG)/<Daemon>Log under HTC_HOME (shadows log in SchedLog, starters in StartLog) (HTCondor: the shadows' log)."),
    P("SHADOW_DEBUG", "str", "", "Accepted for HTCondor configurations and not used: daemon logs have one level; there are no debug categories (HTCondor: debug categories of the shadows' log)."),
    P("STARTER_LOG", "path", "$(LOG)/StarterLog", "Accepted for HTCondor configurations and not used: each daemon logs to $(LOG)/<Daemon>Log under HTC_HOME (shadows log in SchedLog, starters in StartLog) (HTCondor: the starters' log)."),
    P("STARTER_DEBUG", "str", "D_PID ", "Accepted for HTCondor configurations and not used: daemon logs have one level; there are no debug categories (HTCondor: debug categories of the starters' log)."),
    P("EVENT_LOG", "path", "", "Accepted for HTCondor configurations and not used: there is no machine-wide event log; each job's events go to its own log (the log command) (HTCondor: a machine-wide job event log of every job (empty: none))."),
    P("EVENT_LOG_MAX_SIZE", "int", "1000000", "Accepted for HTCondor configurations and not used: there is no machine-wide event log; each job's events go to its own log (the log command) (HTCondor: size at which EVENT_LOG is rotated)."),
    P("EVENT_LOG_MAX_ROTATIONS", "int", "1", "Accepted for HTCondor configurations and not used: there is no machine-wide event log; each job's events go to its own log (the log command) (HTCondor: how many rotated EVENT_LOG files are kept)."),
    P("EVENT_LOG_USE_XML", "bool", "false", "Accepted for HTCondor configurations and not used: there is no machine-wide event log; each job's events go to its own log (the log command) (HTCondor: write EVENT_LOG in XML)."),
    P("EVENT_LOG_FORMAT_OPTIONS", "str", "", "Accepted for HTCondor configurations and not used: there is no machine-wide event log; each job's events go to its own log (the log command) (HTCondor: date format options of EVENT_LOG (UTC, ISO_DATE, ...))."),
    P("DEFAULT_USERLOG_FORMAT_OPTIONS", "str", "", "Accepted for HTCondor configurations and not used: job event logs always use HTCondor's default date format (HTCondor: date format options of job event logs)."),
    P("EVENT_LOG_JOB_AD_INFORMATION_ATTRS", "list", "", "Accepted for HTCondor configurations and not used: there is no machine-wide event log; each job's events go to its own log (the log command) (HTCondor: job attributes logged in event 028)."),
    P("ENABLE_USERLOG_LOCKING", "bool", "false", "Accepted for HTCondor configurations and not used: event-log writes are single appends, atomic without a lock (HTCondor: lock job event logs while writing)."),
    P("ENABLE_USERLOG_FSYNC", "bool", "false", "Accepted for HTCondor configurations and not used: the schedd decides when its event-log writes are made durable (HTCondor: call fsync on job event logs after each event)."),
    # --- address files ---
    P("MASTER_ADDRESS_FILE", "path", "$(LOG)/.master_address", "Accepted for HTCondor configurations and not used: daemons are found by their socket under $HTC_HOME/sockets, not by address files (HTCondor: where the master writes its address)."),
    P("COLLECTOR_ADDRESS_FILE", "path", "$(LOG)/.collector_address", "Accepted for HTCondor configurations and not used: daemons are found by their socket under $HTC_HOME/sockets, not by address files (HTCondor: where the collector writes its address)."),
    P("NEGOTIATOR_ADDRESS_FILE", "path", "", "Accepted for HTCondor configurations and not used: daemons are found by their socket under $HTC_HOME/sockets, not by address files (HTCondor: where the negotiator writes its address)."),
    P("SCHEDD_ADDRESS_FILE", "path", "$(SPOOL)/.schedd_address", "Accepted for HTCondor configurations and not used: daemons are found by their socket under $HTC_HOME/sockets, not by address files (HTCondor: where the schedd writes its address)."),
    P("STARTD_ADDRESS_FILE", "path", "$(LOG)/.startd_address", "Accepted for HTCondor configurations and not used: daemons are found by their socket under $HTC_HOME/sockets, not by address files (HTCondor: where the startd writes its address)."),
    # --- the pool ---
    P("CONDOR_HOST", "str", "", "The central manager's host; COLLECTOR_HOST follows it (docs/multi-machine.md)."),
    P("COLLECTOR_HOST", "str", "$(CONDOR_HOST)", "The central manager's collector, HOST[:PORT]: a real port puts this host in network mode (docs/multi-machine.md); port 0 is a personal pool's own."),
    P("COLLECTOR_PORT", "int", "9618", "The collector's default port (the default of SHARED_PORT_PORT)."),
    P("NEGOTIATOR_HOST", "str", "", "The host the negotiator runs on, HOST[:PORT] of its shared port: schedds and startds send it their Reschedule (a new cycle at once rather than at the next NEGOTIATOR_INTERVAL). Empty: the central manager (COLLECTOR_HOST), where use ROLE : CentralManager runs it. A negotiator elsewhere needs ALLOW_NEGOTIATOR to admit it where security is host-based (the token-based defaults admit condor_pool@* from any host). htc only: HTCondor no longer uses this knob, its daemons find the negotiator through its ad in the collector.", "htc"),
    P("COLLECTOR_NAME", "str", "My Pool - $(CONDOR_HOST)", "The pool's name, advertised by the collector."),
    P("UID_DOMAIN", "str", "$(FULL_HOSTNAME)", "Machines with the same UID_DOMAIN share user accounts."),
    P("FILESYSTEM_DOMAIN", "str", "$(FULL_HOSTNAME)", "Machines with the same FILESYSTEM_DOMAIN share files."),
    P("ACCOUNTING_DOMAIN", "str", "$(UID_DOMAIN)", "Accepted for HTCondor configurations and not used: submitters are named user@UID_DOMAIN (HTCondor: domain of submitter names in accounting)."),
    P("CONDOR_ADMIN", "str", "root@$(FULL_HOSTNAME)", "Who is mailed when a daemon fails."),
    P("MAIL", "path", "/usr/bin/mail", "Mail program for notifications."),
    P("MAIL_FROM", "str", "", "Accepted for HTCondor configurations and not used: htc sends no notification mail (HTCondor: from address of notification mail)."),
    P("SMTP_SERVER", "str", "", "Accepted for HTCondor configurations and not used: htc sends no notification mail (HTCondor: sMTP server for notification mail)."),
    P("EMAIL_DOMAIN", "str", "", "Accepted for HTCondor configurations and not used: htc sends no notification mail (HTCondor: domain appended to user names for notification mail).", "code"),
    P("NETWORK_INTERFACE", "str", "*", "The address the shared port listens on and this host's daemons advertise (* or empty: every interface)."),
    P("NETWORK_HOSTNAME", "str", "", "This host's name for every daemon, instead of the one found by resolving its host name."),
    P("DEFAULT_DOMAIN_NAME", "str", "", "Domain appended to this host's name when that has no domain."),
    P("BIND_ALL_INTERFACES", "bool", "true", "Accepted for HTCondor configurations and not used: the shared port listens on NETWORK_INTERFACE (every interface when it is *) (HTCondor: listen on every interface)."),
    P("USE_SHARED_PORT", "bool", "true", "In network mode the master runs the shared port: one SSH port per host, channels routed to daemons by name."),
    P("SHARED_PORT_PORT", "int", "$(COLLECTOR_PORT)", "The port the shared port listens on (SSH)."),
    P("SSH_KEEPALIVE_INTERVAL", "float", "15",
      "Seconds between SSH keepalives on network connections (both ends; 0: none).", "htc"),
    P("SSH_KEEPALIVE_COUNT_MAX", "int", "3",
      "Unanswered SSH keepalives before a connection counts as lost (a cut is noticed after "
      "SSH_KEEPALIVE_INTERVAL x (this + 1) seconds of silence).", "htc"),
    P("SSH_CONNECT_TIMEOUT", "float", "20",
      "Seconds an SSH connection may take to connect and log in (retries of a refused connect included).", "htc"),
    P("SSH_CIPHERS", "list", "aes128-gcm@openssh.com, aes256-gcm@openssh.com, chacha20-poly1305@openssh.com",
      "SSH ciphers in order of preference (AES-GCM first: twice as fast as chacha20 with AES-NI).", "htc"),
    P("FLOCK_TO", "list", "", "Other pools this schedd may run jobs in, best first, each the HOST[:PORT] of its central manager: a submitter whose idle jobs the pool at its current flock level left waiting a whole negotiation cycle is advertised to the next pool too (docs/multi-machine.md, Flocking). Needs network mode; the pools share the pool key."),
    P("FLOCK_COLLECTOR_HOSTS", "list", "$(FLOCK_TO)", "The collectors of the FLOCK_TO pools, one per pool in the same order (HOST[:PORT]): where the flocking submitters' ads go."),
    P("FLOCK_NEGOTIATOR_HOSTS", "list", "$(FLOCK_TO)", "The negotiators of the FLOCK_TO pools, one per pool in the same order: they get the schedd's Reschedule and NEGOTIATOR access to it."),
    P("FLOCK_INCREMENT", "int", "1", "How many more FLOCK_TO pools a submitter's ads go to each time the pools in use leave its jobs waiting."),
    P("FLOCK_FROM", "list", "", "Hosts whose schedds may flock to this pool (names, wildcards such as *.example.org, or addresses): their daemon tokens (another trust domain, the same pool key) are let in at the shared port, the collector lets them advertise Submitter ads, the startd lets them claim slots, the negotiator takes their Reschedule. Set it on every host of the pool."),
    P("SHARED_PORT_AUTHORIZED_KEYS", "path", "",
      "File of SSH public keys the shared port accepts instead of a token, one per line: IDENTITY "
      "KEYTYPE BASE64 (e.g. alice@pool ssh-ed25519 AAAA...); empty: tokens only.", "htc"),
    P("MASTER_NAME", "str", "", "Name of the master (its Master ad's Name). Unset: the host's full name for a master run by root or condor, else USER@host (a personal pool), as HTCondor's; a name without an @ becomes NAME@host, one with an @ is kept as it is."),
    P("SCHEDD_NAME", "str", "", "Name of the schedd (default: the host)."),
    P("STARTD_NAME", "str", "", "Name of the startd (default: the host)."),
    # --- master ---
    P("DAEMON_LIST", "list", "MASTER", "Daemons the master starts and keeps running."),
    P("MASTER_BACKOFF_CONSTANT", "int", "9", "Restart delay base: constant + factor^restarts seconds."),
    P("MASTER_BACKOFF_FACTOR", "float", "2.0", "Exponential factor of the restart delay."),
    P("MASTER_BACKOFF_CEILING", "int", "3600", "Longest delay before restarting a failed daemon."),
    P("MASTER_RECOVER_FACTOR", "int", "300", "Seconds a daemon must stay up to reset its restart count."),
    P("MASTER_UPDATE_INTERVAL", "int", "300", "Seconds between the master's ad updates."),
    P("MASTER_CHECK_NEW_EXEC_INTERVAL", "int", "300", "Accepted for HTCondor configurations and not used: the master does not watch its programs for new versions (HTCondor: seconds between checks for new daemon binaries)."),
    P("MASTER_NEW_BINARY_DELAY", "int", "120", "Accepted for HTCondor configurations and not used: the master does not watch its programs for new versions (HTCondor: seconds to wait after a binary changes before restarting)."),
    P("SHUTDOWN_FAST_TIMEOUT", "int", "300", "Seconds a fast shutdown may take before daemons are killed."),
    P("SHUTDOWN_GRACEFUL_TIMEOUT", "int", "1800", "Seconds a graceful shutdown may take.", "code"),
    P("PREEN_INTERVAL", "int", "86400", "Accepted for HTCondor configurations and not used: there is no condor_preen; daemons clean their own files (HTCondor: seconds between clean-ups of stale files)."),
    P("NOT_RESPONDING_TIMEOUT", "int", "3600", "Accepted for HTCondor configurations and not used: the master watches its children by their exit, not by heartbeats (HTCondor: seconds without a heartbeat before a daemon is killed)."),
    # --- collector ---
    P("UPDATE_INTERVAL", "int", "300", "Seconds between a daemon's ad updates to the collector."),
    P("UPDATE_OFFSET", "int", "0", "Accepted for HTCondor configurations and not used: daemons send their first ads at start (HTCondor: seconds to delay the first ad update).", "code"),
    P("UPDATE_COLLECTOR_WITH_TCP", "bool", "true", "Accepted for HTCondor configurations and not used: every update goes over a stream socket (HTCondor: send ad updates over TCP)."),
    P("CLASSAD_LIFETIME", "int", "900", "Seconds an ad lives in the collector without an update.", "code"),
    P("COLLECTOR_UPDATE_INTERVAL", "int", "900", "Seconds between the collector's own ad updates."),
    P("COLLECTOR_QUERY_WORKERS", "int", "4", "Accepted for HTCondor configurations and not used: queries are answered on the daemon's event loop, without forked workers (HTCondor: concurrent query workers of the collector)."),
    # --- negotiator ---
    P("NEGOTIATOR_INTERVAL", "int", "60", "Seconds between negotiation cycles."),
    P("NEGOTIATOR_MIN_INTERVAL", "int", "0",
      "Minimum seconds between the start of two cycles (HTCondor's default: 5; htc's negotiator keeps "
      "slots it just matched out of the next cycles instead, so a submit is matched at once).", "changed"),
    P("NEGOTIATOR_CYCLE_DELAY", "int", "20",
      "Seconds after a cycle before the next periodic one (cycles a Reschedule asks for do not wait).", "code"),
    P("NEGOTIATOR_UPDATE_INTERVAL", "int", "300", "Accepted for HTCondor configurations and not used: the negotiator's ad is sent after each cycle (HTCondor: seconds between the negotiator's ad updates)."),
    P("NEGOTIATOR_TIMEOUT", "int", "30", "Seconds to wait for a schedd during negotiation."),
    P("NEGOTIATOR_MAX_TIME_PER_CYCLE", "int", "1200", "Accepted for HTCondor configurations and not used: a cycle is not cut short by time (HTCondor: longest a negotiation cycle may take)."),
    P("NEGOTIATOR_MAX_TIME_PER_SUBMITTER", "int", "60", "Accepted for HTCondor configurations and not used: a cycle is not cut short by time (HTCondor: longest one submitter may take in a cycle)."),
    P("NEGOTIATOR_MAX_TIME_PER_SCHEDD", "int", "120", "Accepted for HTCondor configurations and not used: a cycle is not cut short by time (HTCondor: longest one schedd may take in a cycle)."),
    P("NEGOTIATOR_MAX_TIME_PER_PIESPIN", "int", "120", "Accepted for HTCondor configurations and not used: a cycle is not cut short by time (HTCondor: longest one pie spin may take)."),
    P("NEGOTIATOR_CONSIDER_PREEMPTION", "bool", "true", "Consider claimed slots for preemption."),
    P("NEGOTIATOR_CONSIDER_EARLY_PREEMPTION", "bool", "false", "Consider slots still in their retirement time."),
    P("NEGOTIATOR_USE_SLOT_WEIGHTS", "bool", "true", "Count slots by SLOT_WEIGHT, not one each."),
    P("NEGOTIATOR_USE_WEIGHTED_DEMAND", "bool", "true", "Accepted for HTCondor configurations and not used: the negotiator's matchmaking has no such option (docs/negotiator.md says how it matches) (HTCondor: weigh submitters' demand by their jobs' slot weight)."),
    P("NEGOTIATOR_DEPTH_FIRST", "bool", "false", "Accepted for HTCondor configurations and not used: the negotiator's matchmaking has no such option (docs/negotiator.md says how it matches) (HTCondor: fill one machine before the next)."),
    P("NEGOTIATOR_MATCHLIST_CACHING", "bool", "true", "Accepted for HTCondor configurations and not used: the negotiator's matchmaking has no such option (docs/negotiator.md says how it matches) (HTCondor: reuse the sorted slot list within an autocluster)."),
    P("NEGOTIATOR_INFORM_STARTD", "bool", "false", "Tell the startd about a match as well as the schedd."),
    P("NEGOTIATOR_IGNORE_USER_PRIORITIES", "bool", "false", "Negotiate as if all users had equal priority."),
    P("NEGOTIATOR_DISCOUNT_SUSPENDED_RESOURCES", "bool", "false", "Accepted for HTCondor configurations and not used: the negotiator's matchmaking has no such option (docs/negotiator.md says how it matches) (HTCondor: do not charge users for suspended slots)."),
    P("NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE", "int", "200", "Accepted for HTCondor configurations and not used: the negotiator's matchmaking has no such option (docs/negotiator.md says how it matches) (HTCondor: resource requests fetched from a schedd at once)."),
    P("NEGOTIATOR_NUM_THREADS", "int", "1", "Accepted for HTCondor configurations and not used: the negotiator's matchmaking has no such option (docs/negotiator.md says how it matches) (HTCondor: threads used for matchmaking)."),
    P("NEGOTIATOR_JOB_CONSTRAINT", "expr", "", "Accepted for HTCondor configurations and not used: the negotiator's matchmaking has no such option (docs/negotiator.md says how it matches) (HTCondor: only jobs matching this are negotiated)."),
    P("NEGOTIATOR_SLOT_CONSTRAINT", "expr", "", "Accepted for HTCondor configurations and not used: the negotiator's matchmaking has no such option (docs/negotiator.md says how it matches) (HTCondor: only slots matching this are matched)."),
    P("NEGOTIATOR_PRE_JOB_RANK", "expr",
      "(10000000 * My.Rank) + (1000000 * (RemoteOwner =?= UNDEFINED)) - (100000 * Cpus) - Memory",
      "Slot ranking applied before the job's own Rank."),
    P("NEGOTIATOR_POST_JOB_RANK", "expr",
      "(RemoteOwner =?= UNDEFINED) * (ifthenElse(isUndefined(KFlops), 1000, Kflops) - SlotID - 1.0e10*(Offline=?=True))",
      "Slot ranking applied after the job's own Rank."),
    P("PREEMPTION_REQUIREMENTS", "expr", "False", "When a claimed slot may be taken for a better-priority user."),
    P("PREEMPTION_RANK", "expr",
      "(RemoteUserPrio * 1000000) - ifThenElse(isUndefined(TotalJobRuntime), 0, TotalJobRuntime)",
      "Which claimed slot to preempt first."),
    P("NEGOTIATOR_MATCH_EXPRS", "list", "", "Accepted for HTCondor configurations and not used: the negotiator's matchmaking has no such option (docs/negotiator.md says how it matches) (HTCondor: negotiator expressions copied into matched job ads)."),
    P("NEGOTIATOR_POLICY", "str", "HTCONDOR",
      "HTCONDOR: the accountant's fair-share pie; UPDOWN: the 1988 Up-Down schedule index orders "
      "submitters and preempts on a strict index inversion (docs/negotiator.md).", "htc"),
    P("UPDOWN_CAP", "float", "600",
      "Up-Down: index (job-minutes) an entity that wants nothing is clamped to before it decays to 0.", "htc"),
    P("UPDOWN_UNIT", "float", "60", "Up-Down: seconds per index unit (one job-minute).", "htc"),
    P("UPDOWN_ENTITY", "str", "SUBMITTER",
      "Up-Down: what has an index: SUBMITTER (a user) or SCHEDD (the 1988 submitting station).", "htc"),
    P("UPDOWN_RULE", "str", "UD1988",
      "Up-Down: UD1988 (up per running job-minute, down per minute waiting) or UPDATE_PRIO "
      "(the Condor 4 central manager's Prio + Users - Running per cycle, sign turned).", "htc"),
    P("UPDOWN_PLACEMENTS_PER_CYCLE", "int", "0",
      "Up-Down: matches per entity per cycle (0: no throttle; the 1988 coordinator placed 1).", "htc"),
    # --- accountant (fair share) ---
    P("PRIORITY_HALFLIFE", "float", "86400", "Seconds for a user's accumulated usage to decay by half."),
    P("DEFAULT_PRIO_FACTOR", "float", "1000", "Priority factor of users not given one."),
    P("NICE_USER_PRIO_FACTOR", "float", "1e10", "Priority factor of nice_user jobs."),
    P("REMOTE_PRIO_FACTOR", "float", "1e7", "Priority factor of users from other UID domains."),
    P("NICE_USER_ACCOUNTING_GROUP_NAME", "str", "nice-user", "Accounting group of nice_user jobs."),
    P("ACCOUNTANT_LOCAL_DOMAIN", "str", "", "Domain whose users are local to the accountant."),
    P("MAX_ACCOUNTANT_DATABASE_SIZE", "int", "1000000", "Accepted for HTCondor configurations and not used: the accountant's usage is a sqlite database (HTCondor: size at which the accountant compacts its log)."),
    P("GROUP_NAMES", "list", "", "Accounting groups with quotas (hierarchical with dots)."),
    P("GROUP_ACCEPT_SURPLUS", "bool", "false", "Groups may use slots beyond their quota when free."),
    P("GROUP_QUOTA_MAX_ALLOCATION_ROUNDS", "int", "3", "Rounds of surplus redistribution between groups."),
    P("GROUP_SORT_EXPR", "expr",
      'ifThenElse(AccountingGroup=?="<none>",3.4e+38,ifThenElse(GroupQuota>0,GroupResourcesInUse/GroupQuota,3.3e+38))',
      "Order in which groups negotiate."),
    # --- schedd ---
    P("SCHEDD_INTERVAL", "int", "300", "Seconds between the schedd's ad updates and housekeeping.", "code"),
    P("SCHEDD_MIN_INTERVAL", "int", "5", "Minimum seconds between two schedd ad updates."),
    P("MAX_JOBS_RUNNING", "int", "10000", "Most jobs (shadows) the schedd runs at once."),
    P("MAX_JOBS_SUBMITTED", "int", "2147483647", "Most jobs the queue may hold: a submit that would pass it is refused whole (\"Number of submitted jobs would exceed MAX_JOBS_SUBMITTED\")."),
    P("MAX_JOBS_PER_OWNER", "int", "100000", "Most jobs one owner may have in the queue (any state): a submit that would pass it is refused whole."),
    P("MAX_JOBS_PER_SUBMISSION", "int", "20000", "Most jobs one submit may add, counted from its queue statements before any is built (`queue 100000000` is refused at once); htc submit checks it too. A late-materialization cluster counts the procs it queues at first."),
    P("JOB_START_COUNT", "int", "1", "Accepted for HTCondor configurations and not used: the schedd starts matched jobs as soon as their claims are granted (HTCondor: jobs started per JOB_START_DELAY)."),
    P("JOB_START_DELAY", "int", "0", "Accepted for HTCondor configurations and not used: the schedd starts matched jobs as soon as their claims are granted (HTCondor: seconds between starting batches of jobs)."),
    P("MAX_SHADOW_EXCEPTIONS", "int", "2", "Accepted for HTCondor configurations and not used: shadows are records inside the schedd, not processes (HTCondor: shadow failures before the schedd stops using a claim)."),
    P("ALIVE_INTERVAL", "int", "300", "Seconds between keep-alives the schedd sends to claimed startds."),
    P("MAX_CLAIM_ALIVES_MISSED", "int", "6", "Keep-alives a startd may miss before the claim ends."),
    P("REQUEST_CLAIM_TIMEOUT", "int", "1800", "Accepted for HTCondor configurations and not used: the schedd gives a startd 30 seconds to answer a claim request (HTCondor: seconds the schedd waits for a startd to accept a claim).", "code"),
    P("JOB_DEFAULT_LEASE_DURATION", "int", "2400", "Job lease (seconds) a job gets unless it asks for one."),
    P("JOB_IS_FINISHED_INTERVAL", "int", "0", "Accepted for HTCondor configurations and not used: job ends are recorded as they arrive, in group commits (HTCondor: seconds between batches of job-finished processing).", "code"),
    P("QUEUE_CLEAN_INTERVAL", "int", "28800", "Accepted for HTCondor configurations and not used: the job queue and the history are one sqlite database under SPOOL (WAL, compacted by sqlite), not HTCondor's log files (HTCondor: seconds between compactions of the job queue)."),
    P("QUEUE_SUPER_USERS", "list", "root, condor", "Accepted for HTCondor configurations and not used: ALLOW_ADMINISTRATOR decides who may change any job (HTCondor: users who may change any job)."),
    P("QUEUE_ALL_USERS_TRUSTED", "bool", "false", "Accepted for HTCondor configurations and not used: the Owner of a job is always the authenticated submitter (HTCondor: trust the Owner attribute clients send)."),
    P("SYSTEM_PERIODIC_HOLD", "expr", "", "Pool-wide periodic_hold applied to every job."),
    P("SYSTEM_PERIODIC_RELEASE", "expr", "", "Pool-wide periodic_release applied to every job."),
    P("SYSTEM_PERIODIC_REMOVE", "expr", "", "Pool-wide periodic_remove applied to every job."),
    P("PERIODIC_EXPR_INTERVAL", "int", "60", "Seconds between evaluations of periodic job policy."),
    P("MAX_PERIODIC_EXPR_INTERVAL", "int", "1200", "Accepted for HTCondor configurations and not used: periodic policy runs every PERIODIC_EXPR_INTERVAL (HTCondor: upper bound of the adaptive periodic interval)."),
    P("PERIODIC_EXPR_TIMESLICE", "float", "0.01", "Accepted for HTCondor configurations and not used: periodic policy runs every PERIODIC_EXPR_INTERVAL (HTCondor: fraction of time spent on periodic policy)."),
    P("JOB_DEFAULT_REQUESTCPUS", "expr", "1", "The request_cpus of jobs that do not say."),
    P("JOB_DEFAULT_REQUESTMEMORY", "expr", "128", "The request_memory (MiB) of jobs that do not say."),
    P("JOB_DEFAULT_REQUESTDISK", "expr", "MAX({1024, (TransferInputSizeMB+1) * 1.25}) * 1024",
      "The request_disk (KiB) of jobs that do not say."),
    P("JOB_DEFAULT_NOTIFICATION", "str", "NEVER", "The notification of jobs that do not say (NEVER, COMPLETE, ERROR, ALWAYS).", "code"),
    P("JOB_DEFAULT_REQUESTGPUS", "expr", "", "The request_gpus of jobs that do not say (empty: none).", "code"),
    P("DEFAULT_UNIVERSE", "str", "", "The universe of jobs whose description names none (empty: vanilla).", "code"),
    P("DEFAULT_JOB_MAX_RETRIES", "int", "2", "The max_retries of jobs that set success_exit_code or retry_until without it."),
    P("DEFAULT_RANK", "expr", "", "The Rank of jobs whose description sets none.", "code"),
    P("APPEND_RANK", "expr", "", "An expression added to every job's Rank.", "code"),
    P("APPEND_REQUIREMENTS", "expr", "", "An expression and-ed onto every job's Requirements.", "code"),
    P("SUBMIT_DEFAULT_SHOULD_TRANSFER_FILES", "str", "", "The should_transfer_files of jobs that do not say (YES, NO, IF_NEEDED; empty: IF_NEEDED).", "code"),
    P("SUBMIT_ALLOW_GETENV", "bool", "true", "Whether getenv may be used in submit descriptions."),
    P("MAX_HISTORY_LOG", "int", "20971520", "Accepted for HTCondor configurations and not used: the job queue and the history are one sqlite database under SPOOL (WAL, compacted by sqlite), not HTCondor's log files (HTCondor: size at which the history file is rotated).", "code"),
    P("MAX_HISTORY_ROTATIONS", "int", "2", "Accepted for HTCondor configurations and not used: the job queue and the history are one sqlite database under SPOOL (WAL, compacted by sqlite), not HTCondor's log files (HTCondor: rotated history files kept).", "code"),
    P("ENABLE_HISTORY_ROTATION", "bool", "true", "Accepted for HTCondor configurations and not used: the job queue and the history are one sqlite database under SPOOL (WAL, compacted by sqlite), not HTCondor's log files (HTCondor: rotate the history file)."),
    P("START_LOCAL_UNIVERSE", "expr", "TotalLocalJobsRunning < 200", "When a local-universe job may start."),
    P("START_SCHEDULER_UNIVERSE", "expr", "TotalSchedulerJobsRunning < 500", "When a scheduler-universe job (DAGMan) may start."),
    P("MAX_RUNNING_SCHEDULER_JOBS_PER_OWNER", "int", "200", "Scheduler-universe jobs (DAGs) one owner may run at once (0: none; not applied when it is not below MAX_JOBS_PER_OWNER)."),
    P("SCHEDULER_UNIVERSE_COOL_DOWN_DURATION", "int", "300", "Seconds a scheduler-universe job (DAGMan) that exited with a non-zero code waits before it runs again (JobCoolDownExpiration; a job with DisableCoolDown = true does not wait)."),
    P("SCHEDD_LOCAL_JOB_KILL_TIMEOUT", "float", "30", "Seconds a scheduler- or local-universe job has to exit after the schedd sends its kill signal (rm, hold, vacate) before it gets SIGKILL; a job's KillSigTimeout (kill_sig_timeout) overrides it.", "htc"),
    P("SCHEDD_QUERY_WORKERS", "int", "8", "Accepted for HTCondor configurations and not used: queries are answered on the daemon's event loop, without forked workers (HTCondor: concurrent query workers of the schedd)."),
    P("SCHEDD_SEND_RESCHEDULE", "bool", "true", "Ask the negotiator for a cycle after a submit."),
    P("SUBMIT_ATTRS", "list", "", "Config macros inserted into every job ad as expressions (a description's +Attr overrides one)."),
    P("SCHEDD_CLAIM_LINGER", "int", "10", "Seconds the schedd keeps a claim whose job ended when no idle job is "
      "queued, so the next submit of the same user starts on it without negotiation (0: release at once).", "htc"),
    P("SCHEDD_CALL_LANES", "bool", "true", "Run HTCExecutor function calls on call lanes: a worker that stays up on a "
      "claim and gets each call over the wire, one job per call still (false: every call starts a starter of its "
      "own).", "htc"),
    # --- shadow ---
    P("SHADOW_QUEUE_UPDATE_INTERVAL", "int", "900", "Accepted for HTCondor configurations and not used: shadows are records inside the schedd, not processes (HTCondor: seconds between a shadow's job-ad updates to the queue).", "code"),
    P("SHADOW_WORKLIFE", "int", "3600", "Accepted for HTCondor configurations and not used: shadows are records inside the schedd, not processes (HTCondor: seconds after which a shadow is not reused for another job)."),
    P("SHADOW_MAX_JOB_CLEANUP_RETRIES", "int", "5", "Accepted for HTCondor configurations and not used: shadows are records inside the schedd, not processes (HTCondor: attempts to clean up a job's sandbox)."),
    P("SHADOW_JOB_CLEANUP_RETRY_DELAY", "int", "30", "Accepted for HTCondor configurations and not used: shadows are records inside the schedd, not processes (HTCondor: seconds between clean-up attempts)."),
    P("SHADOW_LAZY_QUEUE_UPDATE", "bool", "true", "Accepted for HTCondor configurations and not used: shadows are records inside the schedd, not processes (HTCondor: batch job-ad updates to the schedd)."),
    P("RECONNECT_BACKOFF_CEILING", "int", "300", "Accepted for HTCondor configurations and not used: the schedd retries a running job's startd every 2 seconds within the job's lease (HTCondor: longest wait between reconnect attempts to a starter)."),
    # --- startd: resources ---
    P("NUM_CPUS", "int", "$(DETECTED_CPUS_LIMIT)", "CPUs the startd offers."),
    P("DETECTED_CPUS_LIMIT", "int", "$(DETECTED_CPUS)", "Detected CPUs, limited by OMP_THREAD_LIMIT / SLURM_CPUS_ON_NODE."),
    P("MEMORY", "int", "$(DETECTED_MEMORY)", "Memory (MiB) the startd offers.", "code"),
    P("RESERVED_MEMORY", "int", "0", "Memory (MiB) kept back for the machine's owner."),
    P("DISK", "int", "", "Disk (KiB) the startd offers (empty: free space in EXECUTE).", "code"),
    P("MAX_SLOT_TYPES", "int", "10", "Accepted for HTCondor configurations and not used: any SLOT_TYPE_<N> is read (HTCondor: highest slot type number)."),
    P("MODIFY_REQUEST_EXPR_REQUESTCPUS", "expr", "quantize(RequestCpus,{1})", "Accepted for HTCondor configurations and not used: a partitionable slot rounds requests up to fixed quanta: 1 CPU, 128 MiB of memory, 1024 KiB of disk (HTCondor's defaults) (HTCondor: rounding of dynamic-slot CPUs)."),
    P("MODIFY_REQUEST_EXPR_REQUESTMEMORY", "expr", "quantize(RequestMemory,{128})", "Accepted for HTCondor configurations and not used: a partitionable slot rounds requests up to fixed quanta: 1 CPU, 128 MiB of memory, 1024 KiB of disk (HTCondor's defaults) (HTCondor: rounding of dynamic-slot memory)."),
    P("MODIFY_REQUEST_EXPR_REQUESTDISK", "expr", _DISK_QUANTUM, "Accepted for HTCondor configurations and not used: a partitionable slot rounds requests up to fixed quanta: 1 CPU, 128 MiB of memory, 1024 KiB of disk (HTCondor's defaults) (HTCondor: rounding of dynamic-slot disk)."),
    P("SLOT_WEIGHT", "expr", "Cpus", "How much a slot counts in fair share."),
    P("STARTD_ATTRS", "list", "", "Config macros published in every slot ad as expressions (the startd's own attributes win over one of the same name)."),
    P("STARTD_JOB_ATTRS", "list", "", "Job attributes copied into the slot ad while claimed."),
    P("STARTD_LATCH_EXPRS", "list", "", "Accepted for HTCondor configurations and not used: the startd keeps no latch timestamps for expressions (HTCondor: expressions whose value changes the startd timestamps)."),
    P("SLOTS_CONNECTED_TO_CONSOLE", "int", "0", "Accepted for HTCondor configurations and not used: every slot's KeyboardIdle and ConsoleIdle follow this machine's keyboard and console (HTCondor: slots whose ConsoleIdle follows the console)."),
    P("SLOTS_CONNECTED_TO_KEYBOARD", "int", "0", "Accepted for HTCondor configurations and not used: every slot's KeyboardIdle and ConsoleIdle follow this machine's keyboard and console (HTCondor: slots whose KeyboardIdle follows the keyboard)."),
    P("CONSOLE_DEVICES", "list", "mouse, console", "Accepted for HTCondor configurations and not used: the console devices are /dev/input/*, /dev/mouse and /dev/console (HTCondor: devices (under /dev) that count as console activity)."),
    P("STARTD_NOCLAIM_SHUTDOWN", "int", "0", "Accepted for HTCondor configurations and not used: the startd runs until the master stops it (HTCondor: seconds unclaimed after which the startd exits (0: never))."),
    P("STARTD_CONTACT_TIMEOUT", "int", "45", "Accepted for HTCondor configurations and not used: requests to a startd use the transport's timeout (HTCondor: seconds to wait when contacting a startd)."),
    P("ENABLE_BACKFILL", "bool", "false", "Accepted for HTCondor configurations and not used: htc has no backfill jobs (HTCondor: run backfill jobs on idle slots)."),
    P("RunBenchmarks", "expr", "LastBenchmark == 0", "Accepted for HTCondor configurations and not used: the startd runs no benchmarks (HTCondor: when the startd runs its benchmarks)."),
    # --- startd: policy (the defaults protect nobody: a dedicated machine) ---
    P("START", "expr", "True", "When a slot is willing to start a job."),
    P("SUSPEND", "expr", "False", "When a running job is suspended."),
    P("CONTINUE", "expr", "True", "When a suspended job continues."),
    P("PREEMPT", "expr", "False", "When a running job is evicted (after its retirement time)."),
    P("KILL", "expr", "False", "When a vacating job is killed hard."),
    P("WANT_SUSPEND", "expr", "False", "Whether SUSPEND is evaluated rather than PREEMPT."),
    P("WANT_VACATE", "expr", "True", "Whether an evicted job gets a soft kill first."),
    P("PERIODIC_CHECKPOINT", "expr", "((time() - LastPeriodicCheckpoint)/60.0) > (180.0 + $RANDOM_INTEGER(-30,30,1))",
      "When the startd has a running standard-universe job checkpointed (it runs on); evaluated every "
      "POLLING_INTERVAL with the slot ad, whose LastPeriodicCheckpoint is the time of the last one (or of "
      "the job's start), as MY and the job ad as TARGET. CHECKPOINT_INTERVAL applies as well."),
    P("WANT_HOLD", "expr", "", "Accepted for HTCondor configurations and not used: an evicted job goes back to idle; the startd does not hold it (so 'use POLICY : WANT_HOLD_IF' has no effect either) (HTCondor: when an evicted job goes on hold instead of back to idle)."),
    P("WANT_HOLD_REASON", "expr", "", "Accepted for HTCondor configurations and not used: an evicted job that WANT_HOLD holds gets HTCondor's standard reason (HTCondor: holdReason when WANT_HOLD is true)."),
    P("WANT_HOLD_SUBCODE", "expr", "", "Accepted for HTCondor configurations and not used: an evicted job that WANT_HOLD holds gets HTCondor's standard reason (HTCondor: holdReasonSubCode when WANT_HOLD is true)."),
    P("RANK", "expr", "", "The machine's preference among jobs (higher wins; empty: 0)."),
    P("IS_OWNER", "expr", "False", "When a slot is in the Owner state."),
    P("MaxJobRetirementTime", "expr", "", "Seconds a job may run on after PREEMPT before eviction (empty: 0)."),
    P("MachineMaxVacateTime", "int", "$(MaxVacateTime)", "Seconds a vacating job has before a hard kill."),
    P("CLAIM_WORKLIFE", "int", "1200", "Seconds after which a claim takes no new jobs."),
    P("MATCH_TIMEOUT", "int", "120", "Seconds a matched slot waits to be claimed."),
    P("KILLING_TIMEOUT", "int", "30", "Seconds after a hard kill before the starter is killed."),
    P("POLLING_INTERVAL", "int", "5", "Seconds between policy evaluations while claimed."),
    # --- policy helper macros (used by the POLICY templates) ---
    P("MINUTE", "int", "60", "Seconds in a minute, for expressions."),
    P("HOUR", "int", "3600", "Seconds in an hour, for expressions."),
    P("StartIdleTime", "expr", "15 * $(MINUTE)", "Keyboard idle time before the desktop policy starts jobs."),
    P("ContinueIdleTime", "expr", "5 * $(MINUTE)", "Keyboard idle time before a suspended job continues."),
    P("MaxSuspendTime", "expr", "10 * $(MINUTE)", "Longest suspension before eviction."),
    P("MaxVacateTime", "expr", "10 * $(MINUTE)", "Longest soft-kill period."),
    P("BackgroundLoad", "float", "0.3", "Non-HTCondor load under which the CPU counts as idle."),
    P("HighLoad", "float", "0.5", "Non-HTCondor load over which the CPU counts as busy."),
    P("SmallJob", "expr", "(TARGET.ImageSize <  (15 * 1024))", "A job under 15 MiB."),
    P("MediumJob", "expr", "(TARGET.ImageSize >= (15 * 1024) && TARGET.ImageSize < (50 * 1024))", "A macro for policy expressions ($(MediumJob)): A job of 15-50 MiB."),
    P("BigJob", "expr", "(TARGET.ImageSize >= (50 * 1024))", "A macro for policy expressions ($(BigJob)): A job of 50 MiB or more."),
    P("IsVanilla", "expr", "(TARGET.JobUniverse == 5)", "A vanilla-universe job."),
    P("IsStandard", "expr", "(TARGET.JobUniverse == 1)", "A macro for policy expressions ($(IsStandard)): A standard-universe job."),
    P("IsVM", "expr", "(TARGET.JobUniverse == 13)", "A macro for policy expressions ($(IsVM)): A VM-universe job."),
    P("ActivityTimer", "expr", "(time() - EnteredCurrentActivity)", "Seconds in the current activity."),
    P("StateTimer", "expr", "(time() - EnteredCurrentState)", "Seconds in the current state."),
    P("BenchmarkTimer", "expr", "(time() - LastBenchmark)", "Accepted for HTCondor configurations and not used: the startd runs no benchmarks (HTCondor: seconds since the last benchmark)."),
    # --- starter ---
    P("STARTER_UPDATE_INTERVAL", "int", "300", "Seconds between a starter's usage reports.", "code"),
    P("STARTER_INITIAL_UPDATE_INTERVAL", "int", "8", "Seconds before a starter's first usage report."),
    P("CHECKPOINT_INTERVAL", "int", "900", "Seconds between the periodic checkpoints a starter takes of a "
      "standard-universe job (each image goes to the schedd's spool); 0: only on vacate and `htc checkpoint`.", "code"),
    P("STARTER_UPLOAD_TIMEOUT", "int", "300", "Accepted for HTCondor configurations and not used: output transfer is bounded by the claim's lease (HTCondor: seconds the starter waits to send output)."),
    P("STARTER_PYTHON_ZYGOTE", "bool", "true", "Fork Python jobs of STARTER_ZYGOTE_MODULES from a pre-imported "
      "interpreter (the starter zygote) instead of starting a fresh one per job.", "htc"),
    P("STARTER_EXEC_ZYGOTE", "bool", "true", "Fork and exec jobs from a small separate root process of the "
      "startd's interpreter (the exec zygote) instead of forking the startd itself for each job.", "htc"),
    P("STARTER_ZYGOTE_MODULES", "list", "htc.executors.worker, htc.executors.lane", "Modules whose 'python -m "
      "MODULE' jobs the starter zygote runs (each must be safe to import without running).", "htc"),
    P("STARTER_JOB_ENVIRONMENT", "str", "", "Accepted for HTCondor configurations and not used: a job's environment is what its submit description gives, plus HTCondor's _CONDOR_* variables (HTCondor: environment given to every job)."),
    P("STARTER_ALLOW_RUNAS_OWNER", "bool", "true", "A root startd runs each job as its Owner when the "
      "job's UID_DOMAIN is this startd's, the Owner has an account here that is not root nor a dedicated "
      "execute account, and the job does not say RunAsOwner = false; else as the slot's account "
      "(SLOT<N>_USER, else htc-slot<N>, made with useradd). False: always the slot's account.", "code"),
    P("DEDICATED_EXECUTE_ACCOUNT_REGEXP", "str", "htc-slot[0-9]+", "Accounts that only run jobs: a job owned "
      "by one never runs as it, and every process left under one when its job ends is killed (HTCondor: "
      "unset; htc's default names the htc-slot<N> accounts its startd makes; SLOT<N>_USER accounts are "
      "always dedicated).", "code"),
    P("STARTER_NUM_THREADS_ENV_VARS", "list",
      "CUBACORES GOMAXPROCS JULIA_NUM_THREADS MKL_NUM_THREADS NUMEXPR_NUM_THREADS OMP_NUM_THREADS "
      "OMP_THREAD_LIMIT OPENBLAS_NUM_THREADS PYTHON_CPU_COUNT ROOT_MAX_THREADS TF_LOOP_PARALLEL_ITERATIONS "
      "TF_NUM_THREADS", "Accepted for HTCondor configurations and not used: the starter sets its fixed list (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, ...) to the slot's CPUs (HTCondor: environment variables set to the slot's CPU count)."),
    P("JOB_RENICE_INCREMENT", "expr", "0", "Accepted for HTCondor configurations and not used: jobs run at the starter's own priority, confined by cgroups (HTCondor: nice increment of job processes)."),
    P("JOB_INHERITS_STARTER_ENVIRONMENT", "bool", "false", "Accepted for HTCondor configurations and not used: a job's environment is what its submit description gives, plus HTCondor's _CONDOR_* variables (HTCondor: jobs see the starter's environment)."),
    P("USER_JOB_WRAPPER", "path", "", "Accepted for HTCondor configurations and not used: jobs are started directly (HTCondor: program that wraps every job)."),
    # --- security ---
    P("ALLOW_READ", "list", "", "Who may query daemons."),
    P("ALLOW_WRITE", "list", "", "Who may submit jobs and advertise ads."),
    P("ALLOW_ADMINISTRATOR", "list", "", "Who may reconfigure and shut down daemons."),
    P("ALLOW_DAEMON", "list", "", "Which daemons may talk to daemons."),
    P("ALLOW_NEGOTIATOR", "list", "", "Which negotiators may negotiate with schedds and startds."),
    P("ALLOW_OWNER", "list", "", "Accepted for HTCondor configurations and not used: no htc command needs OWNER (HTCondor dropped it in 9.9)."),
    P("ALLOW_CONFIG", "list", "", "Who has the CONFIG level; no htc command needs it yet (there is no remote config_val -set)."),
    P("ALLOW_CLIENT", "list", "*", "Accepted for HTCondor configurations and not used: a client trusts the daemons behind its own home's sockets."),
    P("DENY_READ", "list", "", "Who may not query daemons."),
    P("DENY_WRITE", "list", "", "Who may not submit or advertise."),
    P("DENY_ADMINISTRATOR", "list", "", "Who may not administer daemons."),
    P("DENY_DAEMON", "list", "", "Which daemons are refused."),
    P("DENY_NEGOTIATOR", "list", "", "Which negotiators are refused."),
    P("DENY_OWNER", "list", "", "Accepted for HTCondor configurations and not used (see ALLOW_OWNER)."),
    P("DENY_CONFIG", "list", "", "Who is refused the CONFIG level (see ALLOW_CONFIG)."),
    P("TRUST_DOMAIN", "str", "$(COLLECTOR_HOST)", "The pool's name for its tokens: their issuer (htc token create), and the domain of the pool's daemon identity condor_pool@TRUST_DOMAIN on other hosts (docs/security.md). (HTCondor's default: $(UID_DOMAIN); htc's is COLLECTOR_HOST, which every host of a pool names alike, where UID_DOMAIN defaults to each host's own name and tokens would not cross hosts).", "changed"),
    P("SEC_TOKEN_POOL_SIGNING_KEY_FILE", "path", "$(LOCAL_DIR)/passwords.d/POOL", "The pool's shared secret (random bytes, mode 0600, the same file on every host): tokens are signed with a key derived from it and its holders are the pool's daemons."),
    P("SEC_TOKEN_DIRECTORY", "path", "", "Where a client keeps its tokens, one per file, mode 0600 (empty: ~/.htc/tokens.d of the user running the tool); it presents the first whose issuer is the pool's TRUST_DOMAIN."),
    P("SEC_DEFAULT_AUTHENTICATION", "str", "", "Accepted for HTCondor configurations and not used: on one host every peer is authenticated by the kernel (SO_PEERCRED) whatever it says (docs/security.md)."),
    P("SEC_DEFAULT_ENCRYPTION", "str", "", "Accepted for HTCondor configurations and not used: on one host messages go between processes through the kernel."),
    P("SEC_DEFAULT_INTEGRITY", "str", "", "Accepted for HTCondor configurations and not used: on one host messages go between processes through the kernel."),
    P("SEC_DEFAULT_AUTHENTICATION_METHODS", "list", "FS,IDTOKENS,KERBEROS,SCITOKENS,SSL", "Accepted for HTCondor configurations and not used: on one host the only method is the kernel's peer credentials (docs/security.md)."),
    # --- DAGMan ---
    P("DAGMAN_MAX_JOBS_IDLE", "int", "1000", "Most idle node jobs before DAGMan stops submitting. As in HTCondor's DAGMan, a value other than 1000 also lowers DAGMAN_MAX_SUBMITS_PER_INTERVAL, when that is its default, to max(1, value / 10), and then DAGMAN_USER_LOG_SCAN_INTERVAL, when that is its default, to at most the submits per interval (dagman.out notes it)."),
    P("DAGMAN_MAX_JOBS_SUBMITTED", "int", "0", "Most node jobs in the queue (0: no limit)."),
    P("DAGMAN_MAX_PRE_SCRIPTS", "int", "20", "Most PRE scripts running at once."),
    P("DAGMAN_MAX_POST_SCRIPTS", "int", "20", "Most POST scripts running at once."),
    P("DAGMAN_MAX_HOLD_SCRIPTS", "int", "20", "Most HOLD scripts running at once."),
    P("DAGMAN_MAX_SUBMITS_PER_INTERVAL", "int", "100", "Node submissions per scan interval (DAGMAN_USER_LOG_SCAN_INTERVAL): HTCondor's maximum rate is this divided by that interval. Legal range 1 to 1000, as in HTCondor: a value below 1 is taken as 1, one above 1000 as 1000 (dagman.out notes it)."),
    P("DAGMAN_USER_LOG_SCAN_INTERVAL", "int", "5", "Most seconds between reads of the nodes log while nothing happens (htc looks again within milliseconds after any event); also the interval of DAGMAN_MAX_SUBMITS_PER_INTERVAL."),
    P("DAGMAN_SUBMIT_DELAY", "int", "0", "Seconds between node submissions."),
    P("DAGMAN_SUBMIT_BATCH_SIZE", "int", "50", "Most nodes the DAG manager sends to the schedd in one request when the throttles let several go at once (htc only: a SubmitClusters, one round trip and one transaction for all of them; each node stays a cluster of its own). 1 sends each node alone, as HTCondor's DAGMan does; DAGMAN_SUBMIT_DELAY above 0 does too. At most 1000 (a larger value counts as 1000).", "htc"),
    P("DAGMAN_MAX_SUBMIT_ATTEMPTS", "int", "6", "Attempts to submit a node before failing it."),
    P("DAGMAN_AUTO_RESCUE", "bool", "true", "Run the newest rescue DAG automatically."),
    P("DAGMAN_MAX_RESCUE_NUM", "int", "100", "Highest rescue DAG number."),
    P("DAGMAN_RESET_RETRIES_UPON_RESCUE", "bool", "true", "Rescue DAGs start node retries from zero."),
    P("DAGMAN_WRITE_PARTIAL_RESCUE", "bool", "true", "Rescue DAGs list only what changed."),
    P("DAGMAN_RETRY_SUBMIT_FIRST", "bool", "true", "Resubmit a retried node before others."),
    P("DAGMAN_RETRY_NODE_FIRST", "bool", "false", "Retry failed nodes before submitting new ones."),
    P("DAGMAN_ALWAYS_RUN_POST", "bool", "false", "Run POST scripts even when the PRE script failed."),
    P("DAGMAN_DEFAULT_NODE_LOG", "str", "@(DAG_DIR)/@(DAG_FILE).nodes.log", "The event log of all node jobs."),
    P("DAGMAN_MAX_JOB_HOLDS", "int", "100", "Holds of one node job before it fails."),
    P("DAGMAN_HOLD_CLAIM_TIME", "int", "20", "Seconds a node job with children keeps its claim idle for them (set as the job's KeepClaimIdle)."),
    P("DAGMAN_SUPPRESS_NOTIFICATION", "bool", "false", "Node jobs send no mail."),
    P("DAGMAN_PENDING_REPORT_INTERVAL", "int", "600", "Seconds between reports of nodes pending for long."),
    P("DAGMAN_QUEUE_UPDATE_INTERVAL", "int", "300", "Seconds between DAG status updates to the queue."),
    P("DAGMAN_REMOVE_NODE_JOBS", "bool", "true", "Removing DAGMan removes its node jobs."),
    P("DAGMAN_DEFAULT_PRIORITY", "int", "0", "Priority of node jobs."),
    P("DAGMAN_PUT_FAILED_JOBS_ON_HOLD", "bool", "false", "Hold failed node jobs instead of failing the node."),
    P("DAGMAN_USE_STRICT", "int", "1", "How strictly DAGMan treats the DAG file's warnings: 0 and 1 report them in dagman.out, 2 and 3 make them errors (the DAG does not run)."),
    P("DAGMAN_VERBOSITY", "int", "3", "Detail of DAGMan's debug log (0-7)."),
    P("DAGMAN_ABORT_DUPLICATES", "bool", "true", "Exit if another DAGMan runs the same DAG."),
    P("DAGMAN_ON_EXIT_REMOVE", "expr",
      "(ExitSignal =?= 11 || (ExitCode =!= UNDEFINED && ExitCode >=0 && ExitCode <= 2))",
      "The on_exit_remove of the DAGMan job."),
    P("DAGMAN_CONFIG_FILE", "path", "", "Extra configuration read by DAGMan."),
    P("DAGMAN_DEBUG", "str", "", "Debug categories of dagman.out: D_FULLDEBUG or D_ALL also logs every nodes-log event read."),
    P("DAGMAN_DEFAULT_APPEND_VARS", "bool", "false", "VARS without PREPEND or APPEND go after the node's submit description (true) or before it (false), so that the description can use them."),
    P("DAGMAN_NODE_JOB_FAILURE_TOLERANCE", "int", "0", "Failed jobs a node's job list tolerates before the node fails (TOLERANCE overrides it).", "code"),
    P("DAGMAN_REMOVE_JOB_LIST_ON_FAILURE", "bool", "true", "Remove the rest of a node's job list once it failed.", "code"),
    P("DAGMAN_SUBMIT_DEPTH_FIRST", "bool", "false", "Newly ready nodes go to the head of the ready queue (depth first) instead of its tail."),
    P("DAGMAN_ALLOW_ANY_NODE_NAME_CHARACTERS", "bool", "false", "Node names may contain '+' (reserved for splice scoping), as DAG files written flat from splices need."),
    P("DAGMAN_MUNGE_NODE_NAMES", "bool", "true", "With several DAG files in one run, prefix each file's node names with its number (0.A, 1.A)."),
    # --- detected: measured at start-up (htc.config.detected) ---
    P("HOSTNAME", "str", "", "This machine's short host name.", "detected"),
    P("FULL_HOSTNAME", "str", "", "This machine's fully qualified host name.", "detected"),
    P("IP_ADDRESS", "str", "", "This machine's IP address.", "detected"),
    P("ARCH", "str", "", "CPU architecture (X86_64, aarch64).", "detected"),
    P("OPSYS", "str", "", "Operating system (LINUX, macOS).", "detected"),
    P("OPSYSANDVER", "str", "", "Operating system and major version (Debian12).", "detected"),
    P("OPSYSMAJORVER", "int", "", "Operating system major version.", "detected"),
    P("OPSYSNAME", "str", "", "Operating system distribution name.", "detected"),
    P("DETECTED_CPUS", "int", "", "CPUs (hyperthreads counted).", "detected"),
    P("DETECTED_PHYSICAL_CPUS", "int", "", "Physical CPU cores.", "detected"),
    P("DETECTED_CORES", "int", "", "CPUs including hyperthreads.", "detected"),
    P("DETECTED_MEMORY", "int", "", "Physical memory in MiB.", "detected"),
    P("USERNAME", "str", "", "The user running this process.", "detected"),
    P("TILDE", "path", "", "Home directory of the 'condor' user, if there is one.", "detected"),
    P("SUBSYSTEM", "str", "", "This process's subsystem (SCHEDD, STARTD, TOOL, ...).", "detected"),
    P("LOCALNAME", "str", "", "This daemon's -local-name, else its subsystem.", "detected"),
    P("CONDOR_VERSION", "str", "", "The HTCondor version whose behaviour htc reproduces.", "detected"),
    P("CONFIG_ROOT", "path", "", "Directory of the main configuration file.", "detected"),
    P("HTC_HOME", "path", "", "The htc home directory ($HTC_HOME, default ~/.htc).", "detected"),
    # --- master and wire (added by the wire/master work) ---
    P("MASTER_MAX_RESTARTS", "int", "10",
      "Restarts in a row after which the master gives up on a daemon and mails CONDOR_ADMIN (0: never).",
      "htc"),
    # --- startd service (added by the startd/negotiator service work) ---
    P("NUM_SLOTS", "int", "",
      "Static slots to cut the machine into (empty or 0: one partitionable slot, HTCondor 23's layout).", "htc"),
    P("CpuBusy", "expr", "False",
      "When the load that is not htc's counts as busy (latched into CpuBusyTime for SUSPEND).", "code"),
    P("SENSOR_OVERRIDE_FILE", "path", "",
      "File whose Name = value lines replace measured sensors (empty: $HTC_HOME/sensor_override).", "htc"),
    # --- condor_q's per-view print-format files (read by htc q; -print-format ! ignores them) ---
    P("Q_DEFAULT_PRINT_FORMAT_FILE", "path", "", "A print-format file that replaces htc q's default view (-nobatch) when it exists.", "code"),
    P("Q_DEFAULT_PROGRESS_PRINT_FORMAT_FILE", "path", "", "A print-format file that replaces htc q's batch view (the default) when it exists.", "code"),
    P("Q_DEFAULT_RUN_PRINT_FORMAT_FILE", "path", "", "A print-format file that replaces htc q -run when it exists.", "code"),
    P("Q_DEFAULT_IDLE_PRINT_FORMAT_FILE", "path", "", "A print-format file that replaces htc q -idle when it exists.", "code"),
    P("Q_DEFAULT_HOLD_PRINT_FORMAT_FILE", "path", "", "A print-format file that replaces htc q -hold when it exists.", "code"),
    P("Q_DEFAULT_HOLDCODES_PRINT_FORMAT_FILE", "path", "", "A print-format file that replaces htc q -hold-codes when it exists.", "code"),
    P("Q_DEFAULT_IO_PRINT_FORMAT_FILE", "path", "", "A print-format file that replaces htc q -io when it exists.", "code"),
    P("Q_DEFAULT_DAG_PRINT_FORMAT_FILE", "path", "", "A print-format file that replaces htc q -dag when it exists.", "code"),
    P("Q_DEFAULT_FACTORY_PRINT_FORMAT_FILE", "path", "", "A print-format file that replaces htc q -factory when it exists.", "code"),
    P("Q_DEFAULT_TOTALS_PRINT_FORMAT_FILE", "path", "", "A print-format file that replaces htc q -totals when it exists.", "code"),
    P("Q_DEFAULT_AUTOCLUSTER_PRINT_FORMAT_FILE", "path", "", "A print-format file that replaces htc q -autocluster when it exists.", "code"),
]

#: Knobs with a number in their name, which the table's fixed names cannot hold; code reads
#: them with :meth:`Config.get` after :meth:`Config.names` shows which are set.
PATTERN_PARAMS = (
    Param("GROUP_PRIO_FACTOR_<G>", "float", "", "Priority factor of new submitters of accounting group G "
          "(one of GROUP_NAMES).", "table"),
    Param("GROUP_QUOTA_<G>", "float", "", "Static quota of accounting group G, in slot weight (cores).",
          "table"),
    Param("GROUP_QUOTA_DYNAMIC_<G>", "float", "", "Dynamic quota of accounting group G: a fraction of its "
          "parent's quota (used when GROUP_QUOTA_<G> is unset).", "table"),
    Param("GROUP_ACCEPT_SURPLUS_<G>", "bool", "", "Whether group G may use surplus beyond its quota "
          "(overrides GROUP_ACCEPT_SURPLUS).", "table"),
    Param("SLOT<N>_USER", "str", "", "The account a root startd runs slot N's jobs as when they do not run "
          "as their owner (a dynamic slot takes the lowest N no running job holds); unset: htc-slot<N>, "
          "made with useradd --system. Never root.", "table"),
)

#: upper-case name -> Param
PARAMS: dict[str, Param] = {}
for _entry in _ENTRIES:
    if _entry.name.upper() in PARAMS:
        raise ValueError(f"param {_entry.name} is declared twice in htc/config/params.py")
    PARAMS[_entry.name.upper()] = _entry


def lookup(name: str) -> Param | None:
    """The declared :class:`Param` of ``name`` (case-insensitive), or None."""
    return PARAMS.get(name.upper())


def table_default(name: str) -> str | None:
    """Raw default used to answer ``$(NAME)`` -- only for HTCondor param-table knobs, as in HTCondor."""
    p = PARAMS.get(name.upper())
    return p.default if p is not None and p.in_table else None


def markdown_table() -> str:
    """The param table as Markdown, for docs/configuration.md."""
    lines = ["| Knob | Type | Default | Meaning |", "|---|---|---|---|"]
    for p in _ENTRIES:
        default = p.default.replace("\n", " ").replace("|", "\\|")
        if len(default) > 60:
            default = default[:57] + "..."
        shown = f"`{default}`" if default else ("*(detected)*" if p.origin == "detected" else "*(unset)*")
        note = {"code": " (HTCondor built-in)", "htc": " (htc)", "changed": " (htc's default)"}.get(p.origin, "")
        lines.append(f"| `{p.name}` | {p.type} | {shown} | {p.doc}{note} |")
    return "\n".join(lines) + "\n"


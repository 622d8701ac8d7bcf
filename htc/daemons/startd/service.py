"""The startd's service: the ``Startd`` core on real sockets, sensors and starters.

Theory of operation
-------------------
Three layers. :class:`htc.daemons.startd.core.Startd` decides everything about slots, claims and
the owner's policy; :class:`~htc.daemons.startd.adapter.StartdDaemon` translates between it and
the wire (see :mod:`htc.daemons.startd.adapter` for the messages served and
:mod:`htc.daemons.startd.reports` for the reports sent); :class:`StartdService` here does the
process work the adapter asks for (the actions and events of :mod:`htc.daemons.startd.events`):

* :class:`SampleSensors` (every POLLING_INTERVAL): measure the machine with
  :class:`~htc.daemons.startd.sensors.Sensors` (which re-reads the sensor override file), with the
  CPU time of the running jobs for ``CondorLoadAvg``, and feed :class:`Sampled`;
* :class:`RunStarter`: run one in-process :class:`~htc.daemons.starter.service.Starter` as a task of
  the service's TaskGroup: feed :class:`StarterStarted` (or :class:`StarterFailed` with the
  HoldReasonCode), :class:`StarterUsage` after STARTER_INITIAL_UPDATE_INTERVAL and every
  STARTER_UPDATE_INTERVAL, and :class:`StarterExited` with the exit record; a job with
  ``stream_output``/``stream_error`` has its stdout/stderr sent to the shadow as JobOutput
  while it runs (every 0.5 s) and once more after it exits, before StarterExited
  (:mod:`htc.daemons.starter.stream`); a job whose FileSystemDomain is not the machine's has its
  starter fetch its input from, and send its output to, the shadow over connections of its own
  (:mod:`htc.daemons.starter.wire_files`);
* :class:`QueueCalls` (RunCalls): hand the calls to the claim's call lane, whose
  :class:`~htc.daemons.startd.lanes.LaneRelay` writes them to the lane's socket and sends its
  results to the shadow as CallsDone, all of them before StarterExited;
* the core's ``SuspendJob``/``ContinueJob``/``VacateJob``/``KillJob``/``KillStarter``:
  ``suspend()``, ``resume()``, ``vacate(grace)``, ``kill()`` on the claim's starter (kept until
  the job has spawned if they come earlier).

A starter task cancelled because the service is exiting kills its job first: a job is never
left running behind a startd that is gone.

Time comes from the service's clock (:mod:`htc.daemons.clock`): the adapter's ``now``, the
sensors' samples, the starters' usage reports and the lanes' retries all read it or wait on
it, so a test that passes a :class:`~htc.daemons.clock.FakeClock` decides when they happen.

Who runs each job (a root startd): its owner, or a slot account the service hands out
(:class:`~htc.daemons.run_as.SlotAccounts`: static slot N takes account N, a dynamic slot the
lowest number no running job holds). Before a job runs as a slot account last used by another
owner, the account's zygotes end (and any orphan left under it); when a job that ran as a slot
account is over, every process left under that uid that init adopted is killed. The StartLog
names each job's account and why. See :mod:`htc.daemons.run_as`.

The service owns the :class:`~htc.daemons.starter.zygote.ZygotePool` its starters share (the
pre-imported Pythons that fork function jobs); it stops every zygote when it exits, after the
starters have killed their jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from htc.classad import ClassAdParseError, ExprTree
from htc.config.hostname import daemon_name, full_hostname
from htc.daemons.network import pool_addresses, service_transport
from htc.daemons.calls import Call, CallDone, install_calls, perform_call
from htc.daemons.clock import REAL, Clock
from htc.daemons.execute_dir import DEFAULT_EXECUTE, resolve_execute_dir, shared_execute_path
from htc.daemons.run_as import DEFAULT_DEDICATED, JobUser, RunAsPolicy, SlotAccounts, kill_processes_of
from htc.daemons.service import DaemonPaths, DaemonService, load_daemon_config
from htc.daemons.settings import from_config
from htc.daemons.startd import events as ev
from htc.daemons.startd.adapter import StartdDaemon
from htc.daemons.startd.ads import evaluated, job_id_of
from htc.daemons.startd.lanes import LaneRelay, refused_call
from htc.daemons.startd.peek import install_peek
from htc.daemons.startd.policy import KNOBS, ClassAdPolicy
from htc.daemons.startd.reports import short_claim_id
from htc.daemons.startd.sensors import SensorSettings, Sensors
from htc.daemons.startd.settings import StartdServiceSettings, StartdSettings
from htc.daemons.starter.service import Starter, StarterError, StarterSettings
from htc.daemons.starter.limits import sweep_stale_cgroups
from htc.daemons.job_files import TransferError, over_wire, streamed_files
from htc.daemons.starter.sandbox import sweep_stale_sandboxes
from htc.daemons.starter.standard import StandardJob, allows_unsupported, is_standard
from htc.daemons.starter.stream import OutputStreamer
from htc.daemons.starter.self_checkpoint import wants_checkpoints
from htc.daemons.starter.wire_files import WireTransfer
from htc.daemons.starter.zygote import ZygotePool
from htc.errors import HTCError, UsageError
from htc.jobqueue.states import HoldReasonCode
from htc.wire import messages as m
from htc.wire.messages.schema import built_here

__all__ = ["StartdService", "StartdServiceSettings", "StartdDaemon", "make_service", "run_as_policy",
           "settings_from_config"]


# --- the service --------------------------------------------------------------------------------


@dataclass
class _Running:
    starter: Starter
    started: bool = False
    pending: list[Any] = field(default_factory=list)  # actions that came before the job spawned
    lane: LaneRelay | None = None  # a call lane's relay (htc.daemons.startd.lanes)
    account: int = 0  # the number of the slot account it holds (htc.daemons.run_as.SlotAccounts)


class StartdService(DaemonService):
    """The startd's asyncio shell: sensors and starters on top of :class:`DaemonService`.

    Args:
        settings: everything the startd needs.
        transport: how to listen and reach the collector and schedds.
        log_file: the StartLog.
        reload_settings: fresh settings after SIGHUP / Reconfig.
        clock: where the time comes from (a test passes a :class:`~htc.daemons.clock.FakeClock`).
    """

    def __init__(self, settings: StartdServiceSettings, transport, *, log_file: Path | None = None,
                 reload_settings=None, clock: Clock = REAL):
        self.daemon_core = StartdDaemon(settings, clock.time())
        super().__init__("startd", self.daemon_core, transport, address=settings.address, log_file=log_file,
                         reload_settings=reload_settings, clock=clock)
        self.sensors = Sensors(settings.sensors, clock)
        self.starters: dict[str, _Running] = {}
        self.zygotes = ZygotePool(clock)
        self.accounts = SlotAccounts()
        install_calls(self)
        install_peek(self)
        self.register_action(ev.SampleSensors, self._do_sample)
        self.register_action(ev.RunStarter, self._do_run_starter)
        self.register_action(ev.QueueCalls, self._do_queue_calls)
        self._held_watches: dict[int, int] = {}  # id(connection) -> conn id of a held claim watch
        self.register_action(ev.HoldWatch, self._do_hold_watch)
        for kind in ev.STARTER_ACTIONS:
            self.register_action(kind, self._do_starter_action)

    @property
    def settings(self) -> StartdServiceSettings:
        """The settings in force (replaced on reconfig)."""
        return self.daemon_core.settings

    def _do_hold_watch(self, action: ev.HoldWatch) -> None:
        """Remember the connection of a held claim watch, to feed WatchClosed when it closes."""
        conn = self._conns.get(action.conn_id)
        if conn is None:
            self.feed(ev.WatchClosed(action.conn_id))  # gone already
        else:
            self._held_watches[id(conn)] = action.conn_id

    async def _serve(self, conn) -> None:
        """Serve a connection; if it held a claim watch, tell the adapter it closed (its schedd is gone)."""
        try:
            await super()._serve(conn)
        finally:
            conn_id = self._held_watches.pop(id(conn), None)
            if conn_id is not None and self._exit_status is None:
                self.feed(ev.WatchClosed(conn_id))

    def _do_sample(self, action: ev.SampleSensors) -> None:
        job_cpu = {}
        for claim_id, run in self.starters.items():
            if run.started:
                usage = run.starter.usage()
                job_cpu[claim_id] = usage.remote_user_cpu + usage.remote_sys_cpu
        try:
            attrs = self.sensors.sample(self.clock.time(), job_cpu)
        except UsageError as exc:
            self.log.error("sensors: %s; keeping the previous sample", exc)
            return
        self.feed(ev.Sampled(attrs))

    def _do_run_starter(self, action: ev.RunStarter) -> None:
        slot_ad = action.slot_ad
        cpus, memory = slot_ad.get("Cpus"), slot_ad.get("Memory")
        slot_name = action.slot.split("@", 1)[0]
        policy = self.settings.run_as
        number = self.accounts.acquire(action.claim_id, slot_name)
        settings = StarterSettings(
            slot_name=slot_name, cpus=cpus if isinstance(cpus, int) and cpus > 0 else 1,
            memory_mb=memory if isinstance(memory, int) and memory > 0 else None,
            slot_user=policy.account_name(number), create_slot_user=number not in policy.slot_users,
            run_as=policy, use_cgroups=self.settings.use_cgroups,
            machine_ad=evaluated(slot_ad), use_zygote=self.settings.use_zygote,
            zygote_modules=self.settings.zygote_modules, use_exec_zygote=self.settings.use_exec_zygote)
        job_ad = evaluated(action.job_ad)
        standard = None
        if is_standard(job_ad) and not action.lane:  # under the runtime (htc.daemons.starter.standard)
            channel = self._to_shadow(action.claim_id, job_ad)
            domain = settings.machine_ad.get("FileSystemDomain")
            standard = StandardJob(channel, self.settings.checkpoint_interval, self.clock,
                                   cache=self.settings.execute_dir.parent / "jobrt-cache",
                                   relay_io=over_wire(job_ad, domain if isinstance(domain, str) else None),
                                   allow_unsupported=allows_unsupported(job_ad))
        run = _Running(Starter(job_ad, self.settings.execute_dir, settings, self.zygotes,
                               lane=action.lane, clock=self.clock,
                               transfer=self._wire_transfer(action.claim_id, job_ad, settings.machine_ad, action.lane),
                               checkpoints=self._checkpoint_transfer(action.claim_id, job_ad, action.lane),
                               standard=standard),
                       account=number)
        if action.lane:
            run.lane = self._lane_relay(action.claim_id)
        self.starters[action.claim_id] = run
        self.start_task(self._run_starter(action.claim_id, run), f"starter for {action.slot}")

    def _wire_transfer(self, claim_id: str, job_ad: dict, machine_ad: dict, lane: bool) -> WireTransfer | None:
        """How the job's files reach its shadow when the job's FileSystemDomain is not this
        machine's (:func:`htc.daemons.job_files.over_wire`); None: the direct path."""
        domain = machine_ad.get("FileSystemDomain")
        if lane or not over_wire(job_ad, domain if isinstance(domain, str) else None):
            return None
        return self._to_shadow(claim_id, job_ad)

    def _checkpoint_transfer(self, claim_id: str, job_ad: dict, lane: bool) -> WireTransfer | None:
        """How a self-checkpointing job's checkpoints reach its shadow, whichever way its other
        files travel (:mod:`htc.daemons.starter.self_checkpoint`); None for other jobs."""
        if lane or is_standard(job_ad) or not wants_checkpoints(job_ad):  # (a standard job's: its images)
            return None
        return self._to_shadow(claim_id, job_ad)

    def _to_shadow(self, claim_id: str, job_ad: dict) -> WireTransfer:
        """A channel to the shadow of the job on ``claim_id`` (each conversation: a fresh connection)."""

        def shadow() -> str:
            target = self.daemon_core.output_target(claim_id)
            if target is None:
                raise TransferError(f"claim {short_claim_id(claim_id)} has no shadow to move the job's files")
            return target[0]

        # (file streams go apart from the relayed calls across hosts: htc.wire.ssh_client)
        return WireTransfer(lambda: self.transport.open_connection(shadow()), claim_id, job_id_of(job_ad),
                            lambda: self.transport.open_bulk_connection(shadow()))

    async def _run_starter(self, claim_id: str, run: _Running) -> None:
        starter = run.starter
        streamer: OutputStreamer | None = None
        streaming: asyncio.Task | None = None
        try:
            try:
                self.settings.execute_dir.mkdir(parents=True, exist_ok=True)
                self._take_account(claim_id, run, await asyncio.to_thread(starter.resolve_user))
                await starter.start()
            except (HTCError, OSError) as exc:
                self.starters.pop(claim_id, None)
                code = (HoldReasonCode.TransferInputError if isinstance(exc, TransferError)
                        else HoldReasonCode.FailedToCreateProcess)
                subcode = exc.errno if isinstance(exc, StarterError) else 0  # a failed exec's errno
                self.feed(ev.StarterFailed(claim_id, str(exc), int(code), int(subcode)))
                return
            run.started = True
            if run.lane is not None:
                assert starter.lane_socket is not None
                await run.lane.attach(starter.lane_socket)
            self.feed(ev.StarterStarted(claim_id))
            for action in run.pending:
                self._apply(claim_id, run, action)
            run.pending.clear()
            streamer, streaming = self._stream_output(claim_id, starter)
            record = await self._wait_reporting_usage(claim_id, starter)
            if run.lane is not None:
                await run.lane.finish()  # every CallsDone reaches the shadow before JobExited
            if streamer is not None:
                await streamer.finish(streaming)  # the last bytes reach the shadow before JobExited
            self.starters.pop(claim_id, None)
            self.feed(ev.StarterExited(claim_id, record))
        except asyncio.CancelledError:
            # The service is going away: never leave a job running behind it.
            if run.started:
                await starter.kill()
            raise
        finally:
            if run.lane is not None:
                run.lane.close()
            if streaming is not None:
                streaming.cancel()
            if streamer is not None:
                streamer.close()
            await self._give_back_account(claim_id, starter.user, run.account)

    async def _wait_reporting_usage(self, claim_id: str, starter: Starter):
        """Wait for the job to end, feeding its usage after STARTER_INITIAL_UPDATE_INTERVAL and
        every STARTER_UPDATE_INTERVAL meanwhile (on the service's clock); return its exit record."""
        ended = asyncio.Event()
        waiting = asyncio.ensure_future(starter.wait())
        waiting.add_done_callback(lambda _: ended.set())
        try:
            delay = self.settings.starter_initial_update_interval
            while not await self.clock.wait_for(ended, delay):
                self.feed(ev.StarterUsage(claim_id, starter.usage().to_ad()))
                delay = self.settings.starter_update_interval
            return waiting.result()
        finally:
            waiting.cancel()

    def _take_account(self, claim_id: str, run: _Running, user: JobUser | None) -> None:
        """The job runs as ``user``: log it; a slot account that last ran another owner's job is
        cleared first (its zygotes and any orphan under it end)."""
        if user is None:
            return
        self.log.info("claim %s: job %s of %s runs as %s", short_claim_id(claim_id),
                      job_id_of(run.starter.job_ad), run.starter.job_ad.get("Owner") or "?", user.describe())
        if user.owner:
            return
        owner = str(run.starter.job_ad.get("Owner") or "")
        if self.accounts.serve(run.account, owner):
            self.zygotes.stop_user(user.uid)
            killed = kill_processes_of(user.uid)
            self.log.info("slot account %s passes to %s's jobs: its zygotes ended, %d process(es) killed",
                          user.name, owner or "?", len(killed))

    async def _give_back_account(self, claim_id: str, user: JobUser | None, number: int | None = None) -> None:
        """The job is over: kill the orphans it left running under its slot account, then free the
        account.

        The sweep reads every process's status under /proc (milliseconds on a busy host), so it
        runs in a thread: the job's exit report, fed just before, goes out meanwhile. The account
        is freed only after it, so no next job runs under the account while it is swept.
        """
        try:
            if user is None or user.owner:
                return
            keep = self.zygotes.pids_of(user.uid)
            killed = await asyncio.to_thread(kill_processes_of, user.uid, keep)
            if killed:
                self.log.info("claim %s: killed %d process(es) the job left under the slot account %s",
                              short_claim_id(claim_id), len(killed), user.name)
        finally:
            self.accounts.release(claim_id, number)  # (not the number of the claim's next job)

    def _stream_output(self, claim_id: str, starter: Starter) -> tuple[OutputStreamer | None, asyncio.Task | None]:
        """Start tailing the job's streamed stdout/stderr (:mod:`htc.daemons.starter.stream`), if any."""
        names = streamed_files(starter.job_ad)
        if not names or starter.sandbox is None or starter.lane:  # (a lane's calls bring their output back)
            return None, None
        short = short_claim_id(claim_id)

        async def send(stream: str, offset: int, data: bytes) -> bool | None:
            target = self.daemon_core.output_target(claim_id)
            if target is None:
                return None
            shadow, job_id = target
            msg = m.JobOutput(claim_id=claim_id, job_id=job_id, stream=stream, offset=offset, data=data)
            outcome = await perform_call(self.peers, Call(shadow, msg, timeout=10.0))
            if isinstance(outcome, CallDone):
                return True
            if outcome.refused:
                self.log.warning("claim %s: the shadow refused job %s's %s (%s); streaming stops", short, job_id,
                                 stream, outcome.error)
                return None
            self.log.info("claim %s: cannot stream job %s's %s yet: %s", short, job_id, stream, outcome.error)
            return False

        streamer = OutputStreamer({s: starter.sandbox.path / name for s, name in names.items()}, send, self.log,
                                  clock=self.clock)
        return streamer, asyncio.create_task(streamer.run(), name=f"stream output of claim {short}")

    async def run(self) -> int:
        """Clear what a killed predecessor left, serve until the core exits, then drop a per-pool
        execute directory left empty."""
        self._sweep_leftovers()
        try:
            return await super().run()
        finally:
            self.zygotes.close()  # after the starters' tasks ended (and killed their jobs)
            if self.settings.execute_chosen:  # the startd's own directory (htc.daemons.execute_dir)
                with contextlib.suppress(OSError):
                    self.settings.execute_dir.rmdir()  # only when empty: the next start makes it again

    def _sweep_leftovers(self) -> None:
        """Sandboxes and job cgroups of a startd killed with SIGKILL (its jobs died with it, by
        PR_SET_PDEATHSIG, but nothing removed their directories): HTCondor's startd likewise
        cleans its execute directory when it starts."""
        boxes = sweep_stale_sandboxes(self.settings.execute_dir)
        groups = sweep_stale_cgroups(clock=self.clock) if self.settings.use_cgroups and os.geteuid() == 0 else []
        if boxes or groups:
            self.log.info("removed %d sandbox(es) and %d job cgroup(s) left by a startd that is gone",
                          len(boxes), len(groups))

    def _lane_relay(self, claim_id: str) -> LaneRelay:
        """The relay of the lane on ``claim_id``: its results go to the activation's shadow."""
        short = short_claim_id(claim_id)

        async def send(results: tuple[m.LaneResult, ...]) -> bool | None:
            target = self.daemon_core.output_target(claim_id)
            if target is None:
                return None
            with built_here():  # the claim's id and LaneResults checked as they were read: the shadow validates it
                msg = m.CallsDone(claim_id=claim_id, results=results)
            outcome = await perform_call(self.peers, Call(target[0], msg, timeout=10.0))
            if isinstance(outcome, CallDone):
                more = outcome.reply.calls if isinstance(outcome.reply, m.MoreCalls) else ()
                why = refused_call(more)
                if why:
                    self.log.warning("claim %s: the next calls in the answer to CallsDone are not run: %s", short, why)
                elif more:
                    relay.queue(more)
                return True
            if outcome.refused:
                self.log.warning("claim %s: the shadow refused CallsDone: %s", short, outcome.error)
                return None
            self.log.info("claim %s: cannot deliver CallsDone yet: %s", short, outcome.error)
            return False

        relay = LaneRelay(short, send, self.log, clock=self.clock)
        return relay

    def _do_queue_calls(self, action: ev.QueueCalls) -> None:
        run = self.starters.get(action.claim_id)
        if run is None or run.lane is None:
            self.log.info("claim %s: its lane is gone; %d call(s) dropped (its JobExited ends them)",
                          short_claim_id(action.claim_id), len(action.calls))
            return
        run.lane.queue(action.calls)

    def _do_starter_action(self, action: Any) -> None:
        run = self.starters.get(action.claim_id)
        if run is None:
            self.log.info("%s: no starter runs for claim %s", type(action).__name__, short_claim_id(action.claim_id))
        elif not run.started and isinstance(action, ev.CheckpointJob):
            self.log.info("claim %s: %s asked for a checkpoint before the job started; none taken",
                          short_claim_id(action.claim_id), action.why)
        elif not run.started:
            run.pending.append(action)
        else:
            self._apply(action.claim_id, run, action)

    def _apply(self, claim_id: str, run: _Running, action: Any) -> None:
        self.log.info("%s: %s", type(action).__name__, action.slot)
        _ON_STARTER[type(action)](self, claim_id, run.starter, action)

    def _suspend(self, claim_id: str, starter: Starter, action: ev.SuspendJob) -> None:
        starter.suspend()

    def _resume(self, claim_id: str, starter: Starter, action: ev.ContinueJob) -> None:
        starter.resume()

    def _vacate(self, claim_id: str, starter: Starter, action: ev.VacateJob) -> None:
        self.start_task(starter.vacate(action.grace), f"vacate claim {short_claim_id(claim_id)}")

    def _kill(self, claim_id: str, starter: Starter, action: ev.KillJob | ev.KillStarter) -> None:
        self.start_task(starter.kill(), f"kill claim {short_claim_id(claim_id)}")


    def _checkpoint(self, claim_id: str, starter: Starter, action: ev.CheckpointJob) -> None:
        what = f"claim {short_claim_id(claim_id)}: checkpoint ({action.why}) of {starter.job_label()}"
        if starter.standard is None:
            self.log.warning("%s: not a standard-universe job; none taken", what)
        else:
            self.start_task(self._checkpoint_now(what, starter.standard), what)

    async def _checkpoint_now(self, what: str, standard: StandardJob) -> None:
        try:
            self.log.info("%s kept, %d bytes", what, await standard.checkpoint())
        except (HTCError, OSError) as exc:  # (CheckpointRefused/Failed, TransferError; the job runs on)
            self.log.warning("%s not kept: %s", what, exc)


#: how the service carries out each of the core's actions on a claim's starter
_ON_STARTER: dict[type, Callable[[StartdService, str, Starter, Any], None]] = {
    ev.SuspendJob: StartdService._suspend,
    ev.ContinueJob: StartdService._resume,
    ev.VacateJob: StartdService._vacate,
    ev.KillJob: StartdService._kill,
    ev.KillStarter: StartdService._kill,
    ev.CheckpointJob: StartdService._checkpoint,
}


# --- configuration --------------------------------------------------------------------------------


def _domain(config, knob: str) -> str | None:
    """A domain knob when the administrator set it; else None: the host name, which htc.submit uses."""
    origin = config.origin(knob)
    if origin is None or origin.kind == "default":
        return None
    return config.param(knob) or None


def settings_from_config(config, home: Path, address: str = "startd") -> StartdServiceSettings:
    """Build the startd's settings from the configuration (STARTD subsystem), through the param
    table (:func:`htc.daemons.settings.from_config`; the knobs are declared in
    :mod:`htc.daemons.startd.settings`).

    Raises:
        UsageError: a knob has a value the startd cannot use (the message names it).
    """
    host = full_hostname(config)
    raw = config.raw("EXECUTE")
    origin = config.origin("EXECUTE")
    configured = Path(config.param("EXECUTE") or home / "execute")
    is_default = (raw is None or raw.strip() in ("", DEFAULT_EXECUTE)
                  or (origin is not None and origin.kind == "detected"))  # htc.config.execute chose it
    execute, execute_note = resolve_execute_dir(configured, home=home, is_default=is_default)
    expressions = {}
    for knob in KNOBS:
        text = str(config.param(knob)).strip()
        if text:
            expressions[knob] = text
    policy = ClassAdPolicy(expressions)
    memory = (config.param("MEMORY") or 0) - (config.param("RESERVED_MEMORY") or 0)
    disk = config.param("DISK")
    if disk is None:
        probe = execute
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        disk = shutil.disk_usage(probe).free // 1024
    name = daemon_name(config.param("STARTD_NAME"), host)  # the host, or STARTD_NAME@host: slot1@<name>
    startd = from_config(StartdSettings, config, name=name, machine=host, slots_at=name,
                         policy=policy, memory=int(memory), disk=int(disk), static_attrs=published_attrs(config))
    if startd.update_interval <= 0 or startd.polling_interval <= 0:
        raise UsageError(f"UPDATE_INTERVAL = {startd.update_interval:g} and POLLING_INTERVAL = "
                         f"{startd.polling_interval:g}; both must be a positive number of seconds")
    override = config.param("SENSOR_OVERRIDE_FILE")
    net = pool_addresses(config, address)  # network mode: <ip:9618?sock=startd> and <cm:9618>
    sensors = SensorSettings(execute_dir=execute, daemon_name=net.own, machine=host,
                             override_file=Path(override) if override else home / "sensor_override",
                             filesystem_domain=_domain(config, "FILESYSTEM_DOMAIN"),
                             uid_domain=_domain(config, "UID_DOMAIN"))
    return from_config(
        StartdServiceSettings, config, startd=startd, sensors=sensors, execute_dir=execute,
        execute_note=execute_note, run_as=run_as_policy(config, host),
        execute_chosen=execute != configured or (is_default and execute == shared_execute_path(home)),
        address=net.own, collector=net.collector, negotiator=net.negotiator, ad_lifetime=int(max(config.param("CLASSAD_LIFETIME"), 2 * startd.update_interval)))


def published_attrs(config) -> dict[str, ExprTree]:
    """STARTD_ATTRS: each named config macro, as an expression for every slot ad (HTCondor's
    ``STARTD_ATTRS = Project`` with ``Project = "genomics"`` puts ``Project = "genomics"`` in each
    slot ad). A listed macro that is not defined is left out, as HTCondor leaves it out.

    Raises:
        UsageError: an entry is not an attribute name, or its value is not a ClassAd expression.
    """
    attrs: dict[str, ExprTree] = {}
    for name in config.param("STARTD_ATTRS") or ():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UsageError(f"STARTD_ATTRS names {name!r}, which is not a ClassAd attribute name")
        text = config.get(name)
        if text is None:
            continue
        try:
            attrs[name] = ExprTree(text)
        except ClassAdParseError as exc:
            raise UsageError(f"STARTD_ATTRS publishes {name}, but {name} = {text} is not a ClassAd "
                             f"expression ({exc}); quote a string value: {name} = \"{text}\"") from None
    return attrs


_SLOT_USER = re.compile(r"(?:.*\.)?SLOT([0-9]+)_USER", re.IGNORECASE)


def run_as_policy(config, host: str) -> RunAsPolicy:
    """Who runs jobs (a root startd): STARTER_ALLOW_RUNAS_OWNER, UID_DOMAIN (as the schedd reads it),
    DEDICATED_EXECUTE_ACCOUNT_REGEXP and every SLOT<N>_USER set (:mod:`htc.daemons.run_as`).

    Raises:
        UsageError: the regular expression does not compile, or a SLOT<N>_USER is not an account name.
    """
    dedicated = str(config.param("DEDICATED_EXECUTE_ACCOUNT_REGEXP")).strip()
    try:
        re.compile(dedicated)
    except re.error as exc:
        raise UsageError(f"DEDICATED_EXECUTE_ACCOUNT_REGEXP = {dedicated!r} is not a regular expression: {exc}; "
                         f"fix it (the default is {DEFAULT_DEDICATED})") from None
    slot_users: dict[int, str] = {}
    for name in config.names():
        match = _SLOT_USER.fullmatch(name)
        if match is None:
            continue
        number = int(match.group(1))
        value = (config.get(f"SLOT{number}_USER") or "").strip()
        if not value:
            continue
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\$?", value) or len(value) > 32:
            raise UsageError(f"SLOT{number}_USER = {value!r} is not an account name; name an existing "
                             "unprivileged account, or leave it unset for the startd's own htc-slot<N>")
        slot_users[number] = value
    return RunAsPolicy(allow_runas_owner=bool(config.param("STARTER_ALLOW_RUNAS_OWNER")),
                       uid_domain=str(config.param("UID_DOMAIN") or host), dedicated=dedicated,
                       slot_users=slot_users)


def make_service(paths: DaemonPaths, clock: Clock = REAL) -> StartdService:
    """The startd's service for the pool at ``paths`` (used by ``python -m htc.daemons``).

    Args:
        paths: the pool's home.
        clock: where the time comes from (a test or the simulator passes a FakeClock).

    Raises:
        UsageError: the configuration is broken.
    """
    def settings() -> StartdServiceSettings:
        return settings_from_config(load_daemon_config("STARTD"), paths.home)

    transport = service_transport(paths.sockets, load_daemon_config("STARTD"))
    return StartdService(settings(), transport, log_file=paths.log_file("startd"), reload_settings=settings,
                         clock=clock)

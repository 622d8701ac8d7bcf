"""The startd: the daemon of an execute machine. It divides the machine into slots, advertises
them to the collector, takes claims from schedds, runs their jobs through in-process starters
and applies the machine owner's policy (START, SUSPEND, PREEMPT ...), as HTCondor's condor_startd.

Modules (docs/startd.md tells the whole story):

* ``core`` -- :class:`~htc.daemons.startd.core.Startd`, the sans-IO decision maker: slots,
  claims and their moves through the state table, ``handle(event, now)``/``next_deadline()``;
* ``states`` -- the slot state machine in HTCondor's names (the table, its labels, its diagram);
* ``evaluation`` -- which trigger fires for a slot (the policy expressions and timers);
* ``timers`` -- a claim's time limits: vacate time, retirement, the job's AllowedExecuteDuration;
* ``slots`` -- the records (slots, claims) and the slot ad built from them;
* ``policy`` -- the owner's policy expressions (START, SUSPEND, ...), evaluated over the ads;
* ``settings`` -- the core's and the service's settings, declared with their knobs;
* ``events`` -- the events and actions of the core, and those of the adapter and its service;
* ``adapter`` -- :class:`~htc.daemons.startd.adapter.StartdDaemon`, the sans-IO wire adapter the
  service drives: wire messages to core events, core actions to messages and process work;
* ``ads`` -- ClassAd text in and out, and the slot ads on their way to the collector;
* ``jobads`` -- the job ads of ActivateClaim read definition by definition, each new
  definition's text parsed once per startd (the same ad as parsing the whole text);
* ``reports`` -- what the shadow is told about its job (usage, exit, hold);
* ``claim_requests`` -- the claim requests the adapter has not answered yet;
* ``watches`` -- claim watches: the schedd's held keep-alive, whose closing means it is gone;
* ``lanes`` -- the relay between a call lane and its shadow (calls in, results out);
* ``periodic_checkpoint`` -- PERIODIC_CHECKPOINT: when a running standard-universe job is
  checkpointed (``htc checkpoint`` arrives as CheckpointClaim, in the adapter);
* ``peek`` -- ``htc tail`` from another host: a running job's files for its owner (PeekJob);
* ``sensors`` -- what the machine is and what its owner is doing (load, idle times, override file);
* ``service`` -- :class:`~htc.daemons.startd.service.StartdService`, the only I/O (sensors,
  starters, sockets), ``make_service(paths, clock=REAL)`` and ``settings_from_config``.
"""

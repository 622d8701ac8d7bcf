"""The schedd: the job queue's daemon. It takes jobs from tools, offers them to the negotiator,
claims the slots it is matched with, runs each job through a shadow (or a call lane), runs
scheduler- and local-universe jobs itself, and writes the users' job event logs -- HTCondor's
condor_schedd and its condor_shadows.

Modules:

* :mod:`~htc.daemons.schedd.core` -- the sans-IO decision maker (``Schedd.handle(event, now)``),
  composing the parts below;
* :mod:`~htc.daemons.schedd.states` -- the shadow and claim state tables;
* :mod:`~htc.daemons.schedd.events` -- the actions it asks for (user-log writes, call files,
  streamed output, outbox payments) and the kinds of answers it waits for;
* :mod:`~htc.daemons.schedd.service` -- the only I/O: ``make_service``, ``settings_from_config``;
* :mod:`~htc.daemons.schedd.settings` -- ``ScheddSettings``, fields declared with their knobs;
* :mod:`~htc.daemons.schedd.requests` -- submit and query;
* :mod:`~htc.daemons.schedd.batch_submit` -- SubmitClusters: several clusters (a DAG's ready
  nodes) in one request and one transaction;
* :mod:`~htc.daemons.schedd.adtexts` -- a submitted ad read value by value, values parsed once;
* :mod:`~htc.daemons.schedd.actions` -- rm, hold, release, vacate, suspend, continue, edit;
* :mod:`~htc.daemons.schedd.access` -- who the peer is, and what it may do;
* :mod:`~htc.daemons.schedd.matches` -- the negotiator's questions, matches, the reuse order;
* :mod:`~htc.daemons.schedd.claims` -- the claims: reuse, lingering, keep-alive watches, leases;
* :mod:`~htc.daemons.schedd.shadows` -- the shadows of running jobs: activation, reports, stops, ends;
* :mod:`~htc.daemons.schedd.shadow` -- the record of one running job; helpers on job ads and ids;
* :mod:`~htc.daemons.schedd.ends` -- how a run ends in the queue (a shadow's or a lane call's);
* :mod:`~htc.daemons.schedd.lanes` -- call lanes: feeding them calls, their results, their end;
* :mod:`~htc.daemons.schedd.lane_calls` -- which jobs are lane calls, and a call's files;
* :mod:`~htc.daemons.schedd.lane_restart` -- a restarted schedd and its predecessor's lanes;
* :mod:`~htc.daemons.schedd.local_jobs` -- scheduler- and local-universe jobs, which it runs itself;
* :mod:`~htc.daemons.schedd.local_runner` -- their processes (the service's side: start, signal, reap);
* :mod:`~htc.daemons.schedd.ads` -- the Submitter and Scheduler ads, and when they go out;
* :mod:`~htc.daemons.schedd.flock` -- flocking: submitters' ads to the FLOCK_TO pools, RemotePool;
* :mod:`~htc.daemons.schedd.userlog` -- the job event log: events, and writing them as the owner;
* :mod:`~htc.daemons.schedd.owed` -- the writes kept in the queue's outbox until done;
* :mod:`~htc.daemons.schedd.callfiles` -- reading a call's inputs, writing its results;
* :mod:`~htc.daemons.schedd.output` -- streamed stdout/stderr;
* :mod:`~htc.daemons.schedd.transfers` -- a job's files over the connection (input to its
  starter, output back) when the execute side has another file system;
* :mod:`~htc.daemons.schedd.spool` -- spooled jobs: input sent by ``htc submit -spool``, output
  fetched by ``htc transfer_data``;
* :mod:`~htc.daemons.schedd.sessions` -- executor sessions of clients on other machines: the
  calls' files and the session's events over one connection;
* :mod:`~htc.daemons.schedd.checkpoints` -- a job's stored checkpoint, as the core records it
  (``CheckpointNumber``, ``CommittedTime``; a self-checkpointing job's transfer events, a
  standard-universe job's ``NumCkpts`` and CheckpointedEvent);
* :mod:`~htc.daemons.schedd.checkpoint_files` -- the store of those checkpoints in the spool
  (a standard-universe job's: its image, verified): received from starters, sent back to the
  next run, swept once their job has left;
* :mod:`~htc.daemons.schedd.checkpoint_now` -- ``htc checkpoint``: a running standard-universe
  job checkpointed now, through its startd (CheckpointJobs, CheckpointClaim);
* :mod:`~htc.daemons.schedd.leverage` -- the CPU the schedd spends on each job
  (``SubmitSideCpu``) and its ``Leverage``;
* :mod:`~htc.daemons.schedd.job_io` -- a standard-universe job's forwarded file calls, relayed by
  a starter in another FileSystemDomain, served as the owner in the job's Iwd.
"""

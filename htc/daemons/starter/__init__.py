"""The starter: runs one job in a sandbox, under limits, as the right user, for the startd.

HTCondor's startd spawns a ``condor_starter`` per claim; htc's startd runs a :class:`Starter`
per job inside its own event loop (:mod:`htc.daemons.startd.service`), and the same program runs
alone as ``python -m htc.daemons.starter JOB_AD EXECUTE_DIR``.

Why there is no ``core.py``, ``states.py`` or ``events.py`` here: the starter decides nothing
about the job's life. When to start, suspend, resume, vacate or kill a job is the startd's
decision, made by its sans-IO core through its state table (``Claimed/Busy``,
``Claimed/Suspended``, ``Preempting/Vacating``, ``Preempting/Killing``:
:mod:`htc.daemons.startd.states`); the starter carries each one out on real processes, files
and cgroups and reports what happened (an :class:`~htc.daemons.starter.records.ExitRecord`). A
starter table would repeat the startd's, and would have to accept every call the startd makes
today (a suspend that races the job's exit, a second resume) to keep behaviour, so it would
decide nothing. The starter is therefore a service over helpers: ``service`` is its
asyncio program, and the helpers below do one thing each. Its few real decisions are pure
functions beside the I/O they steer (:func:`~htc.daemons.starter.output.sends_output`,
:func:`~htc.daemons.starter.zygote_keys.eligible_module`, :func:`~htc.daemons.starter.records.kill_signal`).
Every reading of the time and every sleep goes through :mod:`htc.daemons.clock` (the
:class:`Starter`, the zygote pool, the streamer and each helper take a ``clock``, real by
default).

Modules:

* ``service`` -- :class:`Starter`: set the job up, spawn it, suspend/resume/vacate/kill it,
  measure it, finish it (output back, leftovers killed, sandbox and cgroup removed).
* ``standalone`` -- the starter as a process of its own (``__main__`` runs it): signals in,
  exit record out.
* ``records`` -- what a starter is told and reports: settings, usage, exit record, kill
  signal, who runs the job.
* ``env`` -- the job's argument vector and environment, as HTCondor builds them.
* ``sandbox`` -- the job's scratch directory: creation, transfer in and out, removal.
* ``output`` -- what goes back when the job ends (``WhenToTransferOutput``, remaps).
* ``ad_files`` -- the sandbox's ``.job.ad`` and ``.machine.ad``, printed line by line with
  each line's text made once per process.
* ``wire_files`` -- input fetched from, and output sent to, the shadow over the connection
  when the job's FileSystemDomain is not the machine's.
* ``stream`` -- streamed stdout/stderr, sent while the job runs.
* ``self_checkpoint`` -- ``checkpoint_exit_code`` jobs: the checkpoint sent to the shadow and
  the job restarted in its sandbox; the checkpoint brought back on the next run.
* ``spawn`` -- fork and exec in the one spawn thread; the job's stdio; die with the startd.
* ``standard`` -- ``universe = standard``: the job under the checkpointing runtime, its images
  to and from the shadow.
* ``limits`` -- cgroups (v1 and v2) and rlimits: memory, cpu, kill, sweep.
* ``procs`` -- every process of a job: find, signal, measure, kill, reap the main one.
* ``zygote`` -- the startd's pool of pre-imported Pythons that fork jobs (and the exec zygote).
* ``zygote_keys`` -- which jobs a zygote may fork, and which zygote serves them.
* ``zygote_program`` -- what runs inside a zygote (stdlib only, shipped as source).
* ``reaping`` -- the SIGCHLD wake-up and ``wait4`` loop both zygotes use (the local
  executor's too).

Helpers shared with other daemons live one level up: :mod:`htc.daemons.run_as` (who runs the
job), :mod:`htc.daemons.owner_files` (files opened with the owner's rights),
:mod:`htc.daemons.execute_dir` (the execute directory's safety).
"""

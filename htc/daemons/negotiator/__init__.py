"""The negotiator: HTCondor's matchmaker, with its accountant and fair share.

Every cycle it reads the pool from the collector, asks each schedd for its idle work (one
resource request per autocluster), divides the pool among the submitters by fair share, gives
each submitter's jobs the best slots they and the slots agree on, and tells the schedds (and,
if asked, the startds) of the matches. docs/negotiator.md tells the whole story.

Modules:

* ``core`` -- the sans-IO decision maker (:class:`~htc.daemons.negotiator.core.Negotiator`):
  when a cycle is due, what to ask for, whom to tell.
* ``states`` -- the cycle's phases (IDLE, FETCHING, REQUESTING) and their table.
* ``events`` -- the events the core takes and the actions it returns.
* ``service`` -- the only I/O: collector queries, schedd requests, the accountant's file;
  ``make_service(paths, clock)`` and ``settings_from_config``.
* ``adapter`` -- the service's sans-IO adapter: the core's publishing actions become wire sends,
  ``SetUserPriority`` becomes the core's administration events.
* ``settings`` -- the knobs of the core and of the service, from the param table.
* ``cycle`` -- the matchmaking of one cycle: its set-up, the pie spins, its records.
* ``negotiate`` -- HTCondor's per-submitter negotiation: a submitter's requests matched one
  turn after another until done or limited, and the best candidate of a turn.
* ``cycle_ad`` -- the Negotiator ad's ``LastNegotiationCycle<Name><X>`` statistics, as HTCondor's.
* ``search`` -- the best idle slot for a request, class by class with shared caches.
* ``vsearch`` -- the same search over slot columns with numpy (the cycle's search; ``search``
  where it cannot compile a request), with ``vplan`` (a request's clauses and ranks compiled
  against the slot table), ``vstatic`` (what the compilers do not take and no carve changes,
  evaluated once per group of slots that agree), ``columns`` (the free slots as arrays),
  ``vexpr`` and ``vtyped`` (ClassAd expressions compiled to numpy, tagged and typed) and
  ``vorder`` (best-first orders shared by requests that rank alike), ``vmask`` (a request's
  verdict on every slot, kept across its turns) and ``vsteps`` (the next steps of a request's
  probable runs, evaluated in one call) and ``vfill`` (a request's whole fill, slot after slot,
  decided in one vectorised pass).
* ``fitting`` -- what a partitionable slot can give a job: the request, fitting by arithmetic
  where the numbers are literals, the cost of a carve.
* ``gc_pause`` -- Python's cyclic garbage collector held off for the length of a cycle.
* ``bases`` -- what no carve can change, decided once per slot base for every lane; resource
  comparisons (``TARGET.Memory >= RequestMemory``) by arithmetic.
* ``clauses`` -- a job's Requirements split into clauses, and what a carve can change of them.
* ``runs`` -- one decision per (request x held partitionable slot) hands over k jobs at once.
* ``matched_ad`` -- the ad a match offers for a carved slot: a view built on first read.
* ``match_runs`` -- a cycle's matches as runs: one record per request and slot, expanded into
  a ``Match`` per job only when read.
* ``claimed`` -- the claimed slots a request may preempt, and the best of them.
* ``slots`` -- slot ads as a cycle sees them: classes, partitionable carving.
* ``slotreads`` -- one slot ad's values as a cycle reads them (numbers, ranks, weights, who
  claims it) and the values carving writes back.
* ``preemption`` -- the one place a claimed slot's preemption is decided.
* ``pending`` -- slots given away by recent cycles whose startds have not reported yet.
* ``accountant`` -- usage, user priorities and match records of the pool (persisted).
* ``accountant_file`` -- the accountant's saved form, and the checked reading of it back.
* ``match_records`` -- the accountant's match records: a run of carves kept as one entry,
  named one by one only where something reads them by name.
* ``fair_share`` -- each submitter's share of the pool, and the order submitters go in.
* ``groups`` -- accounting groups with quotas (``GROUP_NAMES``, ``GROUP_QUOTA_<g>``, surplus):
  what each group is allocated and the order groups negotiate in.
* ``updown`` -- the 1988 Up-Down schedule index (``NEGOTIATOR_POLICY = UPDOWN``): the order
  and the preemption rule that replace the pie under that policy.
* ``submitters`` -- submitter names, accounting groups, and the Submitter ads.

The autoclusters (:mod:`htc.daemons.autocluster`) are not here: the schedd builds them and the
negotiator asks for their significant attributes, so they sit between the two.
"""

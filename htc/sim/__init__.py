"""The simulator: the real negotiator and accountant on a simulated pool, on a simulated clock.

``htc sim condor88 -policy UPDOWN`` reproduces the 1988 paper's fair-share result;
``htc sim FILE.toml`` runs a scenario of your own. docs/fair-share.md tells the whole story:
the models, what is the daemons' real code and what is modelled, and the figures.

Modules:

* ``owner`` -- owner activity (busy days, idle nights) per workstation.
* ``workload`` -- users, batches, lognormal demands.
* ``scenario`` -- a run's inputs: the condor88 scenario, scenario files, policies as knobs.
* ``pool`` -- the machines, their slot ads, and the startd's policy decisions on them.
* ``schedd`` -- the job queue and the schedd's answers to the negotiator.
* ``engine`` -- the discrete-event loop on a FakeClock, driving the negotiator core.
* ``report`` -- the figures of a run; ``plot`` -- its PNG figures (matplotlib, extra ``sim-plot``).
"""

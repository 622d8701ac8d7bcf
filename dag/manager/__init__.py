"""The DAG manager process (condor_dagman): all the I/O around the sans-IO engine.

``python -m htc.dag.manager DAGFILE`` runs one DAG (:mod:`~htc.dag.manager.__main__`,
:mod:`~htc.dag.manager.launch`). Modules:

- ``runner``: the loop (engine actions -> I/O, I/O -> engine events, signals);
- ``submitter``: one node's job into the queue (VARS, DAGMan's macros and attributes, notes);
- ``logwatch``: following the nodes log with adaptive polling;
- ``scripts``: PRE/POST/HOLD scripts as processes, reaped without waiting;
- ``lockfile``: ``<dag>.lock`` (recovery mode, duplicate managers);
- ``outputs``: ``<dag>.dagman.out`` and the files the engine writes;
- ``rescue_files``: which rescue DAG to apply and which to write;
- ``settings``: the ``DAGMAN_*`` knobs with DAGMan's precedence;
- ``condor_sub``: ``<dag>.condor.sub``, the manager job's submit description.
"""

"""The master: starts the daemons of DAEMON_LIST, restarts them when they die, stops them.

- ``core``: the sans-IO decision maker (:class:`~htc.daemons.master.core.Master`).
- ``states``: the table of one daemon's states as the master sees them (Off, Running, Backoff ...).
- ``events``: the events and actions between core and service (``Spawn``, ``ChildExited`` ...),
  and ``DAEMON_NO_RESTART``.
- ``settings``: ``MasterSettings``, each field with the knob it comes from.
- ``service``: the only I/O: ``make_service(paths, clock)``, spawning, signalling, mailing.
"""

"""The shared port: one SSH port per host, through which other hosts reach this host's daemons.

- ``core``: the sans-IO decision maker (:class:`~htc.daemons.shared_port.core.SharedPort`): when
  to listen, when to stop; refusals are logged by the service as they happen.
- ``settings``: ``SharedPortSettings``, each field with the knob it comes from.
- ``events``: ``Listen`` (an action) and ``ListenFailed`` (an event).
- ``service``: the only I/O: ``make_service(paths, clock)`` reads the pool key and the host key
  (refusing either if others can read it), certifies the host key with the pool's SSH CA and
  runs :class:`htc.wire.ssh_server.SharedPortServer`.

The shared port has no state machine (it listens or it does not), so there is no ``states``
module. HTCondor's condor_shared_port plays the same part; the master runs it in network mode.
"""

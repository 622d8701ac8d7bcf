"""The collector: the pool's directory of ads (machines, schedds, submitters, daemons).

- ``core``: the sans-IO decision maker (:class:`~htc.daemons.collector.core.Collector`): stores,
  expires, queries and invalidates ads.
- ``settings``: ``CollectorSettings``, each field with the knob it comes from.
- ``service``: the only I/O: ``make_service(paths, clock)``.

The collector has no state machine (an ad is stored or it is not), so there is no ``states``
module, and it speaks only the shared events and actions of :mod:`htc.daemons.core`, so there is
no ``events`` module either.
"""

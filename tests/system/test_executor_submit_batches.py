"""A burst of calls reaches the backend in batches of at most ``_SUBMIT_BATCH_MOST``, in their
order, each call once, so that the first batch can start running while the rest are sent (a
batch of hundreds is stored whole by the schedd before a lane starts on any of it)."""

from __future__ import annotations

import threading

from executor_contract import double
from htc.executors import HTCExecutor
from htc.executors import executor as executor_module
from htc.executors.local import LocalProcessBackend


class _RecordingBackend(LocalProcessBackend):
    """The real local backend, recording what each ``submit_calls`` brought; the first one waits
    until the test has queued the whole burst, so the rest pile up in the outbox meanwhile."""

    def __init__(self, burst_queued: threading.Event, **kwargs):
        super().__init__(**kwargs)
        self.batches: list[list[str]] = []
        self._burst_queued = burst_queued

    def submit_calls(self, calls):
        if not self.batches:
            assert self._burst_queued.wait(60), "the test never queued its burst"
        self.batches.append([spec.call_id for spec in calls])
        return super().submit_calls(calls)


def test_a_burst_goes_to_the_backend_in_bounded_batches_in_order():
    most = executor_module._SUBMIT_BATCH_MOST
    burst = 2 * most + 7
    queued = threading.Event()
    backend = _RecordingBackend(queued, slots=2, memory="4GB")
    with HTCExecutor(backend=backend, progress=False) as ex:
        futures = [ex.submit(double, i) for i in range(burst)]
        queued.set()
        assert [f.result(timeout=300) for f in futures] == [2 * i for i in range(burst)]
    sizes = [len(b) for b in backend.batches]
    assert max(sizes) == most, sizes  # the pile was cut, and cut at the bound
    sent = [call for batch in backend.batches for call in batch]
    assert sent == [f.call_id for f in futures]  # every call once, in the order submitted

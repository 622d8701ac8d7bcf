"""Messages built inside ``built_here`` skip the build-time conversion, never the receiver's checks."""

from __future__ import annotations

import pytest

from htc.wire import messages as m
from htc.wire.errors import MessageInvalid, WireError
from htc.wire.messages.schema import MODE, built_here


def test_a_malformed_message_built_here_is_still_refused_on_receipt():
    with pytest.raises(MessageInvalid, match="job_id"):
        m.LaneCall(job_id="not-a-job", files={})  # built as usual: converted and checked
    with built_here():
        call = m.LaneCall(job_id="not-a-job", files={"in": b"x"})
        sent = m.RunCalls(claim_id="c1", calls=(call,))
    frame = m.encode(sent)
    with pytest.raises(WireError, match="job_id"):
        m.decode(frame)


def test_built_here_skips_the_copy_but_keeps_the_cross_field_rules():
    files = {"in": b"x" * 1000}
    with built_here():
        call = m.LaneCall(job_id="3.0", files=files)
        with pytest.raises(MessageInvalid, match="clusters is empty"):
            m.SubmitClusters(clusters=())
    assert call.files is files  # not converted into a copy
    assert m.LaneCall(job_id="3.0", files=files).files is not files  # outside: converted
    assert MODE.get() is None
    assert m.decode(m.encode(m.RunCalls(claim_id="c1", calls=(call,)))).calls == (m.LaneCall(job_id="3.0", files=files),)

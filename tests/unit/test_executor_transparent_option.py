"""``checkpoint="transparent"``: the option's values, the job it makes, and where it is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from htc.executors.errors import OptionError
from htc.executors.local import LocalProcessBackend
from htc.executors.options import CallOptions, transparent
from htc.executors.pool_ads import job_template
from htc.executors.spool import Spool


@pytest.fixture
def spool(tmp_path: Path) -> Spool:
    made = Spool("t", tmp_path)
    made.calls.mkdir(parents=True)
    return made


def test_checkpoint_takes_false_true_or_transparent():
    assert transparent(CallOptions().merge(checkpoint="transparent"))
    assert not transparent(CallOptions().merge(checkpoint=True))
    with pytest.raises(OptionError, match="'transparent'"):
        CallOptions().merge(checkpoint="yes")


def test_a_transparent_call_is_a_standard_universe_job_that_no_lane_runs(spool, tmp_path):
    ad = job_template(CallOptions().merge(checkpoint="transparent"), spool, tmp_path / "jobs.log", "/usr/bin/python3")
    assert ad["JobUniverse"] == "1" and ad["KillSig"] == '"SIGTSTP"'
    assert ad["Cmd"] == '"/usr/bin/python3"' and ad["Args"] == '"-m htc.executors.worker"'
    assert "HTCLane" not in ad and "WantPython" not in ad
    assert ad["WhenToTransferOutput"] == '"ON_EXIT"'  # (its image is its checkpoint)


@pytest.mark.parametrize("files", [{"transfer_input_files": ["/etc/hostname"]}, {"transfer_output_files": ["x"]}])
def test_a_transparent_call_refuses_file_transfer(spool, tmp_path, files):
    with pytest.raises(OptionError, match="in place"):
        job_template(CallOptions().merge(checkpoint="transparent", **files), spool, tmp_path / "jobs.log", "/usr/bin/python3")


def test_checkpoint_true_stays_a_python_job_that_transfers_its_state_on_eviction(spool, tmp_path):
    ad = job_template(CallOptions().merge(checkpoint=True), spool, tmp_path / "jobs.log", "/usr/bin/python3")
    assert ad["JobUniverse"] == "5" and ad["WantPython"] == "true"
    assert ad["WhenToTransferOutput"] == '"ON_EXIT_OR_EVICT"' and "HTCLane" not in ad


def test_the_local_backend_refuses_transparent_calls():
    backend = LocalProcessBackend(slots=1)
    backend.check_request(CallOptions().merge(checkpoint=True))
    with pytest.raises(OptionError, match="local backend"):
        backend.check_request(CallOptions().merge(checkpoint="transparent"))

"""A spooled job's rewrite and the naming of its fetched output (htc.daemons.schedd.spool):
pure functions over a job's values and a directory, no daemons."""

from __future__ import annotations

import os

from htc.daemons.schedd.spool import _rewrite, spool_directory, spooled_output
from htc.jobqueue.ads import quote


def test_the_spool_directory_is_htcondors_layout(tmp_path):
    assert spool_directory(tmp_path, 12345, 7) == tmp_path / "2345" / "7" / "cluster12345.proc7.subproc0"


def test_the_rewrite_runs_the_job_from_the_spool_and_keeps_what_the_submitter_wrote(tmp_path):
    ad = {"Iwd": "/home/a/run", "Cmd": "/home/a/run/job.sh", "TransferInput": "data.txt,indir", "In": "in.txt",
          "Out": "/home/a/run/out.txt", "Err": "err.txt", "UserLog": "/home/a/run/job.log",
          "TransferOutputRemaps": "made.txt = results/made.txt"}
    attrs = _rewrite(ad, tmp_path, ["condor_exec.exe", "data.txt", "in.txt", "indir"])
    assert attrs["Iwd"] == quote(str(tmp_path)) and attrs["SUBMIT_Iwd"] == quote("/home/a/run")
    assert attrs["Cmd"] == quote("condor_exec.exe") and attrs["SUBMIT_Cmd"] == quote("/home/a/run/job.sh")
    assert attrs["TransferInput"] == quote("data.txt,indir") and attrs["In"] == quote("in.txt")
    assert attrs["Out"] == quote("out.txt") and attrs["SUBMIT_Out"] == quote("/home/a/run/out.txt")
    assert attrs["UserLog"] == quote(str(tmp_path / "job.log"))
    assert attrs["TransferOutputRemaps"] == quote("")  # applied when the output is fetched
    assert attrs["SUBMIT_TransferOutputRemaps"] == quote("made.txt = results/made.txt")
    assert attrs["HTCSpooledInput"] == quote("condor_exec.exe,data.txt,in.txt,indir")


def test_fetched_output_is_named_as_the_submitter_asked_and_leaves_the_input_behind(tmp_path):
    for name in ("condor_exec.exe", "data.txt", "out.txt", "made.txt", "job.log", "extra.txt"):
        (tmp_path / name).write_text(name)
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "r.txt").write_text("r")
    ad = {"HTCSpooledInput": "condor_exec.exe,data.txt", "Out": "out.txt", "SUBMIT_Out": "/home/a/o.txt",
          "UserLog": str(tmp_path / "job.log"), "SUBMIT_UserLog": "/home/a/job.log",
          "SUBMIT_TransferOutputRemaps": "made.txt = results/made.txt"}
    items = list(spooled_output(ad, tmp_path, None, "1.0"))
    names = [item.entry.name for item in items]
    for item in items:
        if item.fd is not None:
            os.close(item.fd)
    assert names == ["extra.txt", "/home/a/job.log", "results/made.txt", "/home/a/o.txt", "res", "res/r.txt"]


def test_spooled_input_stays_beneath_the_spool_directory(tmp_path):
    import pytest

    from htc.daemons.job_files import TransferError
    from htc.daemons.schedd.spool import SpoolSink
    from htc.wire import messages as m

    with pytest.raises(TransferError, match="relative path"):
        SpoolSink(tmp_path, None, "1.0").begin(m.FileEntry(name="../outside.txt", kind="file", size=1))
    assert not (tmp_path.parent / "outside.txt").exists()

"""``htc transfer_data`` brings the submitter's user log up to date instead of replacing it
(htc.client.spool_log): the events already there stay, the fetched ones are appended, none twice."""

from __future__ import annotations

import asyncio

from htc.client.spool_log import SpoolFetchSink, merge_user_log, split_events
from htc.daemons.file_stream import Outgoing, receive_stream, send_stream
from htc.wire import messages as m
from htc.wire.transport import Connection

SUBMIT_OTHER = "000 (007.000.000) 2026-11-28 10:00:00 Job submitted from host: <10.0.0.1:9618>\n...\n"
SUBMIT = "000 (012.000.000) 2026-11-28 10:01:00 Job submitted from host: <10.0.0.1:9618>\n...\n"
EXECUTE = "001 (012.000.000) 2026-11-28 10:01:05 Job executing on host: <10.0.0.3:9618>\n...\n"
TERMINATED = ("005 (012.000.000) 2026-11-28 10:01:09 Job terminated.\n"
              "\t(1) Normal termination (return value 0)\n...\n")


def test_events_split_at_their_end_lines_and_a_torn_one_is_kept():
    assert split_events(SUBMIT + EXECUTE + "005 (012.000.000) torn") == [SUBMIT, EXECUTE, "005 (012.000.000) torn"]
    assert split_events("") == []


def test_merge_appends_only_the_events_the_log_lacks(tmp_path):
    log, fetched = tmp_path / "job.log", tmp_path / "fetched"
    log.write_text(SUBMIT_OTHER + SUBMIT)
    fetched.write_text(EXECUTE + TERMINATED)
    assert merge_user_log(fetched, log) == 2
    assert log.read_text() == SUBMIT_OTHER + SUBMIT + EXECUTE + TERMINATED
    # again (a fetch retried after it failed half way): nothing twice
    fetched.write_text(SUBMIT + EXECUTE + TERMINATED)
    assert merge_user_log(fetched, log) == 0
    assert log.read_text() == SUBMIT_OTHER + SUBMIT + EXECUTE + TERMINATED
    # a log the submitter no longer has is made afresh
    log.unlink()
    assert merge_user_log(fetched, log) == 3 and log.read_text() == SUBMIT + EXECUTE + TERMINATED


def test_a_fetched_stream_merges_the_log_and_writes_other_files_whole(tmp_path):
    """Through the real file stream: the user log (SUBMIT_UserLog, here in a subdirectory) gains
    the job's events; an output file of the same stream replaces the submitter's copy."""
    iwd = tmp_path / "submit"
    (iwd / "logs").mkdir(parents=True)
    (iwd / "logs" / "job.log").write_text(SUBMIT_OTHER + SUBMIT)
    (iwd / "out.txt").write_text("old output\n")
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "job.log").write_text(EXECUTE + TERMINATED)
    (spool / "out.txt").write_text("new output\n")

    def source():
        import os

        for name, target in (("job.log", "logs/job.log"), ("out.txt", "out.txt")):
            fd = os.open(spool / name, os.O_RDONLY)
            yield Outgoing(m.FileEntry(name=target, kind="file", mode=0o644, size=os.fstat(fd).st_size), fd)

    async def scenario():
        sink = SpoolFetchSink(iwd, "12.0", "logs/job.log")
        done = asyncio.Event()

        async def serve(reader, writer):
            await send_stream(Connection(reader, writer, label="schedd"), source())
            await done.wait()
            writer.close()

        server = await asyncio.start_unix_server(serve, path=str(tmp_path / "s.sock"))
        reader, writer = await asyncio.open_unix_connection(str(tmp_path / "s.sock"))
        conn = Connection(reader, writer, label="client")
        try:
            await receive_stream(conn, sink, peer="the schedd")
        finally:
            done.set()
            sink.close()
            await conn.aclose()
            server.close()

    asyncio.run(scenario())
    assert (iwd / "logs" / "job.log").read_text() == SUBMIT_OTHER + SUBMIT + EXECUTE + TERMINATED
    assert (iwd / "out.txt").read_text() == "new output\n"
    assert sorted(p.name for p in (iwd / "logs").iterdir()) == ["job.log"]  # no hidden file left

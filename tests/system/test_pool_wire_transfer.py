"""File transfer over the connection on a real pool: a startd in another FileSystemDomain.

The startd is told it is in FILESYSTEM_DOMAIN ``elsewhere.example`` (``STARTD.FILESYSTEM_DOMAIN``);
the schedd keeps the host's. Its starters must then never touch a job's Iwd: they fetch the
input from the shadow (FetchInput) and send the output back (SendOutput), in chunks with a
checksum per file. fanotify watches the Iwd and names the process behind every open of a file
or directory in it: only the schedd (and this test) may appear, never the startd, which runs
the starters in its own process.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import select
import struct
import threading

import htcondor2
import pytest

from poolutil import Pool, open_pool, wait_for

pytestmark = pytest.mark.slow

T = htcondor2.JobEventType
_FAN_CLOEXEC, _FAN_NONBLOCK = 0x1, 0x2
_FAN_OPEN, _FAN_ONDIR, _FAN_EVENT_ON_CHILD = 0x20, 0x40000000, 0x08000000
_FAN_MARK_ADD = 0x1
_AT_FDCWD = -100

SCRIPT = """#!/bin/sh
sha256sum big.bin > big.sha
cat > stdin_copy.txt
ls indir/sub > listing.txt
readlink indir/link >> listing.txt
head -c 3145728 /dev/urandom > bigout.bin
sha256sum bigout.bin
echo made > made.txt
mkdir outdir && echo deep > outdir/deep.txt
echo to stderr >&2
"""


class OpenWatch:
    """The pids that open anything directly inside the watched directories (fanotify)."""

    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                                            ctypes.c_char_p]
        self.fd = self.libc.fanotify_init(_FAN_CLOEXEC | _FAN_NONBLOCK, os.O_RDONLY | os.O_LARGEFILE)
        if self.fd < 0:
            pytest.skip(f"fanotify is not available ({os.strerror(ctypes.get_errno())}); run the tests as root, "
                        "as CI does")
        self.opens: list[tuple[int, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def watch(self, path) -> None:
        mask = _FAN_OPEN | _FAN_ONDIR | _FAN_EVENT_ON_CHILD
        if self.libc.fanotify_mark(self.fd, _FAN_MARK_ADD, mask, _AT_FDCWD, str(path).encode()) != 0:
            raise OSError(ctypes.get_errno(), f"fanotify_mark {path}")

    def start(self) -> None:
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            if not select.select([self.fd], [], [], 0.1)[0]:
                continue
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                continue
            offset = 0
            while offset < len(buf):
                length, _vers, _res, _meta, _mask, fd, pid = struct.unpack_from("IBBHQii", buf, offset)
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        self.opens.append((pid, os.readlink(f"/proc/self/fd/{fd}")))
                    os.close(fd)
                offset += length

    def stop(self) -> list[tuple[int, str]]:
        self._stop.set()
        self._thread.join(5)
        os.close(self.fd)
        return self.opens


@pytest.fixture(scope="module")
def pool():
    if os.geteuid() != 0:
        pytest.skip("the execute side is kept out of the Iwd by fanotify, which needs root; run the tests as "
                    "root, as CI does")
    with open_pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD",
                   config="STARTD.FILESYSTEM_DOMAIN = elsewhere.example\n") as started:
        yield started


def _iwd(pool: Pool, name: str):
    iwd = pool.work / name
    iwd.mkdir()
    iwd.chmod(0o700)  # the job runs as nobody: it could not read its Iwd even if it tried
    return iwd


def _held(pool: Pool, cluster: int) -> tuple[int, str]:
    def held():
        rows = pool.jobs(f"ClusterId == {cluster} && JobStatus == 5", "HoldReasonCode", "HoldReason")
        return (rows[0]["HoldReasonCode"], rows[0]["HoldReason"]) if rows else None
    return wait_for(held, timeout=60, what=f"job {cluster} held")


def test_input_and_output_cross_the_connection_and_the_starter_never_opens_the_iwd(pool):
    iwd = _iwd(pool, "wire")
    big = os.urandom(5 * 1024 * 1024 + 12345)  # five and a bit chunks
    (iwd / "big.bin").write_bytes(big)
    (iwd / "in.txt").write_text("standard input\n")
    (iwd / "indir" / "sub").mkdir(parents=True)
    (iwd / "indir" / "sub" / "a.txt").write_text("a\n")
    os.symlink("sub/a.txt", iwd / "indir" / "link")
    (iwd / "job.sh").write_text(SCRIPT)
    (iwd / "job.sh").chmod(0o755)
    watch = OpenWatch()
    for path in (iwd, iwd / "indir", iwd / "indir" / "sub"):
        watch.watch(path)
    watch.start()
    schedd, startd = pool.running_pid("SCHEDD"), pool.running_pid("STARTD")
    try:
        reply = pool.submit(f"executable = {iwd}/job.sh\ninitialdir = {iwd}\nshould_transfer_files = YES\n"
                            "transfer_input_files = big.bin, indir\ninput = in.txt\noutput = out.txt\n"
                            "error = err.txt\nlog = job.log\n"
                            'transfer_output_remaps = "made.txt = renamed.txt"\nqueue\n')
        events = pool.log_events(iwd / "job.log", until=lambda evs: any(e.type == T.JOB_TERMINATED for e in evs),
                                 timeout=90)
    finally:
        opens = watch.stop()
    assert events[-1].type == T.JOB_TERMINATED and events[-1]["ReturnValue"] == 0, \
        pool.jobs(f"ClusterId == {reply.cluster_id}")
    openers = {pid for pid, _ in opens}
    assert startd not in openers, [path for pid, path in opens if pid == startd]
    assert schedd in openers  # the watch works: the shadow read the input and wrote the output
    assert openers <= {schedd, os.getpid()}, opens
    assert (iwd / "big.sha").read_text().split()[0] == hashlib.sha256(big).hexdigest()
    assert (iwd / "stdin_copy.txt").read_text() == "standard input\n"
    assert (iwd / "listing.txt").read_text() == "a.txt\nsub/a.txt\n"
    out_sha = (iwd / "out.txt").read_text().split()[0]
    assert hashlib.sha256((iwd / "bigout.bin").read_bytes()).hexdigest() == out_sha
    assert (iwd / "bigout.bin").stat().st_size == 3145728
    assert (iwd / "renamed.txt").read_text() == "made\n" and not (iwd / "made.txt").exists()
    assert (iwd / "outdir" / "deep.txt").read_text() == "deep\n"
    assert (iwd / "err.txt").read_text() == "to stderr\n"
    assert not (iwd / "condor_exec.exe").exists()


def test_a_missing_input_holds_the_job_with_code_13(pool):
    iwd = _iwd(pool, "noinput")
    cluster = pool.submit(f"executable = /bin/true\ninitialdir = {iwd}\nshould_transfer_files = YES\n"
                          "transfer_executable = false\ntransfer_input_files = missing.txt\nqueue\n").cluster_id
    code, reason = _held(pool, cluster)
    assert code == 13
    assert "missing.txt" in reason and "shadow" in reason


def test_a_missing_output_holds_the_job_with_code_12(pool):
    iwd = _iwd(pool, "nooutput")
    cluster = pool.submit(f"executable = /bin/true\ninitialdir = {iwd}\nshould_transfer_files = YES\n"
                          "transfer_executable = false\ntransfer_output_files = never.txt\nqueue\n").cluster_id
    code, reason = _held(pool, cluster)
    assert code == 12
    assert "never.txt" in reason


def test_transfers_for_runs_the_schedd_does_not_follow_are_refused_and_it_keeps_serving(pool):
    import asyncio

    from htc.client.request import ping
    from htc.wire import messages as m
    from htc.wire.errors import ConnectionClosed

    async def ask(first: m.Message, *more: m.Message) -> m.Message:
        conn = await pool.transport.open_connection("schedd")
        try:
            # all at once, before the schedd can refuse the first and close: a write after its
            # close would break the connection under the answer it already sent
            for msg in (first, *more):
                conn.send_nowait(msg)
            try:
                await conn.drain()
            except ConnectionClosed:
                pass  # refused and closed while the last bytes went out: the answer is read below
            return await conn.recv(timeout=20)
        finally:
            await conn.aclose()

    reply = asyncio.run(ask(m.FetchInput(claim_id="not-a-claim", job_id="1.0")))
    assert isinstance(reply, m.ErrorReply) and reply.code == "not_found"
    reply = asyncio.run(ask(m.SendOutput(claim_id="not-a-claim", job_id="1.0"),
                            m.FileEntry(name="../../etc/x", kind="file", size=1), m.FileData(data=b"x")))
    assert isinstance(reply, m.ErrorReply) and reply.code == "not_found"
    held = pool.submit("executable = /bin/true\nhold = true\nqueue\n").cluster_id  # held, but not for input
    reply = asyncio.run(ask(m.SpoolInput(job_id=f"{held}.0")))
    assert isinstance(reply, m.ErrorReply) and "spooled input" in reply.message
    assert ping("schedd", transport=pool.transport).daemon == "schedd"

"""The call lane program alone (``python -m htc.executors.lane``), as a real process on a real
socket pair: calls go in as frames, results come back as frames, one process for many calls."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from htc.wire import callfile as cf
from htc.executors.errors import VersionMismatch
from htc.executors.lane import CALL_DIR
from htc.wire.lane_frames import CHANNEL_ENV, HEADER, CallFrame, ResultFrame, frame
from htc.executors.serialize import dumps_call, dumps_value, loads, python_version
from htc.executors.worker import EXIT_ERROR, EXIT_EXCEPTION, EXIT_VALUE

HTC_SOURCE = Path(__file__).resolve().parents[2]


class Parent:
    """Stands for a parent call's future in the pickled arguments (as executor futures do)."""

    def __init__(self, call_id: str):
        self.call_id = call_id


def call_bytes(fn, *args, call_id: str = "c1", python: str | None = None, **kwargs) -> bytes:
    """An ``htc_call.pkl`` made the way the executor makes one."""
    pickled = dumps_call(fn, args, kwargs, persistent=lambda o: o.call_id if isinstance(o, Parent) else None)
    header = cf.CallHeader(call_id=call_id, function=getattr(fn, "__qualname__", "?"),
                           python=python or python_version(), packages=pickled.packages,
                           parents=pickled.parents)
    return cf.pack_call(header, pickled.payload)


def parent_result(call_id: str, value) -> bytes:
    payload, packages = dumps_value(value)
    return cf.pack_result(cf.ResultHeader(call_id=call_id, outcome="value", packages=packages), payload)


class LaneProcess:
    """A lane process on one end of a socket pair; this test holds the other."""

    def __init__(self, home: Path):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HTC_")}
        env.update({CHANNEL_ENV: "0", "PYTHONPATH": str(HTC_SOURCE)})
        self.home = home
        self.proc = subprocess.Popen([sys.executable, "-m", "htc.executors.lane"], stdin=theirs, cwd=home, env=env,
                                     stdout=open(home / "lane.out", "wb"), stderr=open(home / "lane.err", "wb"))
        theirs.close()
        self.sock = ours
        self.decode = msgspec.msgpack.Decoder(ResultFrame).decode

    def send(self, files: dict[str, bytes], job_id: str = "1.0") -> None:
        self.sock.sendall(frame(msgspec.msgpack.encode(CallFrame(job_id, files))))

    def recv(self) -> ResultFrame:
        head = self._exactly(HEADER.size)
        return self.decode(self._exactly(HEADER.unpack(head)[0]))

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, f"the lane closed its channel; its stderr: {(self.home / 'lane.err').read_text()}"
            data += chunk
        return data

    def call(self, files: dict[str, bytes]) -> ResultFrame:
        self.send(files)
        return self.recv()

    def close(self) -> int:
        self.sock.close()
        return self.proc.wait(10)


@pytest.fixture
def lane(tmp_path):
    proc = LaneProcess(tmp_path)
    yield proc
    if proc.proc.poll() is None:
        proc.proc.kill()
        proc.proc.wait()


def outcome(result: ResultFrame):
    header, payload = cf.unpack_result(result.files[cf.RESULT_FILE])
    return header, loads(payload, header.serializer)


def shout(text):
    print("py says", text)
    print("py warns", text, file=sys.stderr)
    os.write(1, b"C-level write\n")
    return text.upper()


def fail(n):
    raise ValueError(f"bad value {n}")


def add(a, b):
    return a + b


def make_file(name):
    Path(name).write_text("made by the call")
    return sorted(os.listdir("."))


def test_a_value_its_prints_and_times_come_back(lane):
    before = time.time()
    result = lane.call({cf.CALL_FILE: call_bytes(shout, "hello")})
    header, value = outcome(result)
    assert result.exit_code == EXIT_VALUE and header.outcome == "value" and value == "HELLO"
    assert result.stdout == b"py says hello\nC-level write\n"
    assert result.stderr == b"py warns hello\n"
    assert before <= result.started <= result.finished <= time.time()
    assert result.user_cpu >= 0 and result.sys_cpu >= 0
    assert set(result.files) == {cf.RESULT_FILE}  # not the unchanged call file
    assert lane.close() == 0


def test_an_exception_comes_back_with_its_traceback(lane):
    result = lane.call({cf.CALL_FILE: call_bytes(fail, 7)})
    header, exc = outcome(result)
    assert result.exit_code == EXIT_EXCEPTION and header.outcome == "exception"
    assert isinstance(exc, ValueError) and str(exc) == "bad value 7"
    assert "in fail" in header.traceback and "bad value 7" in header.traceback


def test_a_dependency_is_read_from_its_parent_file_and_inputs_are_there(lane):
    files = {cf.CALL_FILE: call_bytes(add, Parent("p9"), 5), cf.parent_file("p9"): parent_result("p9", 37)}
    result = lane.call(files)
    assert result.exit_code == EXIT_VALUE and outcome(result)[1] == 42
    result = lane.call({cf.CALL_FILE: call_bytes(make_file, "new.txt"), "input.csv": b"a,b\n"})
    # The call ran in its own directory holding exactly its inputs: nothing left from the call before.
    assert outcome(result)[1] == ["input.csv", "new.txt"]
    assert result.files["new.txt"] == b"made by the call" and "input.csv" not in result.files
    # A call file named after its call (the pool backend's shared calls/) is the call, not an input.
    result = lane.call({"4d-2.call": call_bytes(make_file, "x.txt"), "p9.result": b"unused"})
    assert result.exit_code == EXIT_VALUE and outcome(result)[1] == ["p9.result", "x.txt"]


def test_a_version_mismatch_is_an_error_without_running_the_call(lane):
    result = lane.call({cf.CALL_FILE: call_bytes(fail, 1, python="2.7.18")})
    header, exc = outcome(result)
    assert result.exit_code == EXIT_ERROR and header.outcome == "error"
    assert isinstance(exc, VersionMismatch) and "2.7.18" in str(exc)


def test_many_calls_reuse_one_process_which_exits_when_the_channel_closes(lane, tmp_path):
    for n in range(5):
        lane.send({cf.CALL_FILE: call_bytes(os.getpid)}, job_id=f"1.{n}")  # all queued before any ran
    pids = {outcome(lane.recv())[1] for _ in range(5)}
    assert pids == {lane.proc.pid}
    assert (tmp_path / CALL_DIR).is_dir()
    assert lane.close() == 0


def test_a_bad_frame_is_refused_and_the_lane_goes_on(lane):
    result = lane.call({"../escape": b"x", cf.CALL_FILE: call_bytes(add, 1, 2)})
    assert result.exit_code == EXIT_ERROR and b"plain names" in result.stderr and not result.files
    assert not (lane.home / "escape").exists()
    assert outcome(lane.call({cf.CALL_FILE: call_bytes(add, 1, 2)}))[1] == 3


def test_a_call_that_kills_the_process_ends_the_lane(lane):
    lane.send({cf.CALL_FILE: call_bytes(os._exit, 9)})
    assert lane.proc.wait(10) == 9
    assert lane.sock.recv(10) == b""


def test_without_its_channel_the_program_says_how_it_is_started(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != CHANNEL_ENV}
    env["PYTHONPATH"] = str(HTC_SOURCE)
    done = subprocess.run([sys.executable, "-m", "htc.executors.lane"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "HTC_LANE_FD" in done.stderr


def test_per_call_overhead_is_small(lane):
    data = {cf.CALL_FILE: call_bytes(int)}
    lane.call(data)  # warm
    n = 300
    started = time.perf_counter()
    for _ in range(n):
        assert lane.call(data).exit_code == EXIT_VALUE
    per_call = (time.perf_counter() - started) / n
    assert per_call < 0.005, f"{per_call * 1e6:.0f} us per no-op call"


def quiet(n):
    return n


def whisper(text):
    print(text)
    return text


def test_each_call_gets_only_its_own_output(lane):
    """A call that prints nothing after one that printed gets empty streams, and a shorter print
    after a longer one no tail of it (the lane truncates a capture file only when it holds bytes)."""
    assert lane.call({cf.CALL_FILE: call_bytes(shout, "a long line of text")}).stdout.startswith(b"py says a long")
    result = lane.call({cf.CALL_FILE: call_bytes(quiet, 1)})
    assert (result.stdout, result.stderr) == (b"", b"")
    assert lane.call({cf.CALL_FILE: call_bytes(whisper, "hi")}).stdout == b"hi\n"
    assert lane.call({cf.CALL_FILE: call_bytes(quiet, 2)}).stdout == b""


def test_a_version_mismatch_is_found_after_calls_whose_versions_agreed(lane):
    """The lane remembers versions that agreed, never a mismatch: the next call of another
    Python is still refused."""
    assert outcome(lane.call({cf.CALL_FILE: call_bytes(add, 1, 2)}))[1] == 3
    result = lane.call({cf.CALL_FILE: call_bytes(add, 1, 2, python="2.7.18")})
    assert result.exit_code == EXIT_ERROR and isinstance(outcome(result)[1], VersionMismatch)
    assert outcome(lane.call({cf.CALL_FILE: call_bytes(add, 2, 2)}))[1] == 4


def test_the_soft_kill_between_calls_ends_the_lane_by_the_signal(lane):
    """A call sets its own SIGTERM handler (saving a checkpoint on eviction) and puts the lane's
    back when it ends: between calls SIGTERM ends the lane at once, by the signal."""
    assert outcome(lane.call({cf.CALL_FILE: call_bytes(add, 1, 2)}))[1] == 3
    lane.proc.send_signal(15)
    assert lane.proc.wait(10) == -15

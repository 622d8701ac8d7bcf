"""``universe = standard`` across hosts: a job vacated by its owner on one execute host resumes
from its checkpoint on another (issue #20, "Tests" 3, the multi-host half).

Three simulated hosts (tests/netns_hosts.py): ``cm`` (central manager and submit host) and two
execute hosts, ``exec1`` (A) and ``exec2`` (B), each its own FileSystemDomain (its name), so
neither sees the job's Iwd and nothing of either's file system is the other's. The job is
examples/standard/count.py, an unmodified CPython loop, whose file calls are forwarded by the
runtime and relayed over the starter's connection to the schedd on ``cm`` (the file server runs
there as the job's owner in its Iwd, :mod:`htc.daemons.schedd.job_io`).

A plays the machine with a keyboard: its policy starts jobs only while the owner is away and
preempts them when the owner comes back; the owner is played by A's sensor override file (as in
test_pool_standard_universe.py, on A only). The job's requirements keep its first run on A. The
job checkpoints every 5 s (CHECKPOINT_INTERVAL), then the owner returns: A's starter vacates it
(SIGTSTP: the runtime writes an image and the job exits), the image streams to ``cm``'s spool,
the job is matched to B, whose starter fetches the image from ``cm`` and restarts it.

Asserted: progress.out in the Iwd on ``cm`` is byte-identical to an uninterrupted run's; the
job's own count of computed steps shows almost no work redone; the user log (htc's reader and
htcondor2's) has execute on A, checkpointed, evicted, execute on B, terminated; RemoteHost names
A while it runs there and the history's LastRemoteHost names B; the image B resumed from is the
one A sent to ``cm`` (same sequence number, fetched from the schedd: B's starter has no other way
to it, and A's log never names B).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import htcondor2
import pytest

from ckpt_images import tools  # noqa: F401 (a fixture)
from htc.daemons.startd.sensors import write_sensor_override
from htc.eventlog import EventType, read_events
from netns_hosts import HTC_HOME, copy_pool_key, network, networks, pool_config  # noqa: F401 (fixtures)
from test_multi_host_pool import FAST, start, stop_pool, wait_until

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).parents[2] / "examples" / "standard"
STEPS = 400
#: seconds each step sleeps: at least 20 s of job however fast the host, so the periodic
#: checkpoints (every 5 s) come before the end (a quiet CI host ran 400 steps in 5 s)
PAUSE = 0.05
AWAY = {"KeyboardIdle": 100000, "ConsoleIdle": 100000, "LoadAvg": 0.0}
AT_THE_KEYBOARD = {**AWAY, "KeyboardIdle": 0, "ConsoleIdle": 0}
#: A: jobs only while its owner is away; the owner's return vacates them (with a checkpoint)
DESKTOP = {"START": "KeyboardIdle > 60", "SUSPEND": "False", "WANT_SUSPEND": "False",
           "PREEMPT": "KeyboardIdle < 60", "WANT_VACATE": "True", "KILL": "False", "MachineMaxVacateTime": "120"}
#: B: a machine room node that runs anything
NODE = {"START": "True", "SUSPEND": "False", "PREEMPT": "False", "KILL": "False"}
CHECKPOINTS = {"CHECKPOINT_INTERVAL": "5"}
WORK = "/tmp/work"


def reference(tmp: Path) -> bytes:
    """progress.out of an uninterrupted run, without the runtime."""
    tmp.mkdir()
    shutil.copy(EXAMPLE / "count.py", tmp)
    subprocess.run(["python3", "count.py", str(STEPS)], cwd=tmp, check=True, timeout=300)
    return (tmp / "progress.out").read_bytes()


def start_hosts(network):
    """``cm`` (central manager and submit host), ``exec1`` (A, a desktop) and ``exec2`` (B, a
    node), every daemon in the collector; returns the three hosts."""
    cm, exec1, exec2 = network.add_hosts("cm", "exec1", "exec2")
    knobs = {**FAST, **CHECKPOINTS}
    cm.write(f"{HTC_HOME}/htc_config", pool_config("CentralManager", "Submit", **knobs))
    exec1.write(f"{HTC_HOME}/htc_config", pool_config("Execute", **{**knobs, **DESKTOP}))
    exec2.write(f"{HTC_HOME}/htc_config", pool_config("Execute", **{**knobs, **NODE}))
    for host in (exec1, exec2):
        write_sensor_override(AWAY, host.path(f"{HTC_HOME}/sensor_override"))
    start(cm)
    copy_pool_key(cm, exec1, exec2)
    for host in (exec1, exec2):
        start(host)

    def slots():
        out = cm.run(["htc", "status", "-af", "Name", "State"]).stdout
        return {tuple(line.split()) for line in out.splitlines() if line.strip()}

    wanted = {(f"slot1@{h.fqdn}", "Unclaimed") for h in (exec1, exec2)}
    wait_until(lambda: wanted <= slots(), 120, f"both execute hosts' slots Unclaimed: {wanted}")
    cm.path(WORK).mkdir(mode=0o755)
    return cm, exec1, exec2


def _logs(host, pattern: str) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(host.path(f"{HTC_HOME}/log").glob(pattern)))


def _hosts(slots: list[str]) -> list[str]:
    """The machines of slot names (``slot1_1@exec1.test``: ``exec1.test``)."""
    return [slot.partition("@")[2] for slot in slots]


def _daemon_cpu(host) -> str:
    """CPU seconds each htc daemon of ``host`` has used so far (``schedd 12``, ...)."""
    out = host.run(["ps", "-eo", "cputimes,args"]).stdout.splitlines()[1:]
    found = [re.match(r"\s*(\d+) .* -m htc\.daemons (\w+)", line) for line in out]
    return " ".join(f"{m[2]} {m[1]}" for m in found if m)


def _queue(cm, attrs: str) -> list[str]:
    return cm.run(["htc", "q", "-af", *attrs.split()]).stdout.split()


def test_a_standard_job_vacated_on_one_host_finishes_on_another_from_its_image(tools, network, tmp_path):
    expected = reference(tmp_path / "reference")
    t0 = time.monotonic()
    cm, exec1, exec2 = start_hosts(network)
    pool_up = time.monotonic() - t0
    hosts = {exec1.ip: exec1, exec2.ip: exec2}
    log = cm.path(f"{WORK}/count.log")
    try:
        shutil.copy(EXAMPLE / "count.py", cm.path(WORK))
        cm.write(f"{WORK}/count.sub",
                 f"universe = standard\nexecutable = /usr/bin/python3\ntransfer_executable = false\n"
                 f"arguments = count.py {STEPS} {PAUSE}\nlog = {WORK}/count.log\nerror = count.err\n"
                 f"requirements = (Machine == \"{exec1.fqdn}\") || (NumJobStarts > 0)\nqueue\n")
        submitted = cm.run(["htc", "submit", "count.sub"], cwd=WORK)
        assert "1 job(s) submitted to cluster 1." in submitted.stdout, submitted.stdout + submitted.stderr

        def events():
            return read_events(log) if log.exists() else []

        def executes():
            return [e for e in events() if e.type is EventType.EXECUTE]

        [first] = wait_until(executes, 120, "the job to start")
        assert first.execute_host.startswith(f"<{exec1.ip}:"), first.execute_host
        assert _hosts(_queue(cm, "RemoteHost")) == [exec1.fqdn]  # (a dynamic slot: slot1_1@exec1.test)

        def computed() -> int:
            try:
                return len(cm.path(f"{WORK}/work.log").read_text().splitlines())
            except FileNotFoundError:
                return 0

        began = time.monotonic()
        print(f"\npool up in {pool_up:.0f} s, the job running on A {began - t0 - pool_up:.0f} s later")
        wait_until(lambda: computed() >= STEPS // 4, 180, "a quarter of the steps done")
        print(f"{STEPS // 4} steps on A in {time.monotonic() - began:.1f} s (load {os.getloadavg()[0]:.1f})")
        wait_until(lambda: any(e.type is EventType.CHECKPOINTED for e in events()), 60, "a periodic checkpoint")
        write_sensor_override(AT_THE_KEYBOARD, exec1.path(f"{HTC_HOME}/sensor_override"))  # A's owner is back
        back = time.time()
        wait_until(lambda: any(e.type is EventType.JOB_EVICTED for e in events()), 120, "the vacate")
        wait_until(lambda: _hosts(_queue(cm, "LastRemoteHost")) == [exec1.fqdn], 60,
                   "LastRemoteHost naming A after the vacate")

        wait_until(lambda: any(e.type is EventType.JOB_TERMINATED for e in events()), 300,
                   "the job to finish on B")
        final = events()
        kinds = [e.type for e in final if e.type is not EventType.IMAGE_SIZE]
        # periodic checkpoints come in between; one is the vacate's
        runs = [k for i, k in enumerate(kinds) if k is not EventType.CHECKPOINTED or kinds[i - 1] is not k]
        E = EventType
        assert runs in ([E.SUBMIT, E.EXECUTE, E.CHECKPOINTED, E.JOB_EVICTED, E.EXECUTE, E.JOB_TERMINATED],
                        [E.SUBMIT, E.EXECUTE, E.CHECKPOINTED, E.JOB_EVICTED, E.EXECUTE, E.CHECKPOINTED,
                         E.JOB_TERMINATED]), [k.name for k in kinds]
        with htcondor2.JobEventLog(str(log)) as jel:
            theirs = [int(e.type) for e in jel.events(stop_after=0)]
        assert [n for n in theirs if n != E.IMAGE_SIZE.value] == [k.value for k in kinds]
        ran_on = [hosts[re.match(r"<([\d.]+):", e.execute_host).group(1)] for e in final if e.type is E.EXECUTE]
        assert ran_on == [exec1, exec2], ran_on
        done = final[-1]
        assert done.type is E.JOB_TERMINATED and done.return_value == 0, done

        # identical output, written through the relay into the Iwd on cm; work redone: at most
        # the steps between the vacate's signal and its image
        assert cm.path(f"{WORK}/progress.out").read_bytes() == expected
        redone = computed() - STEPS
        assert 0 <= redone <= 3, redone
        evicted = next(e for e in final if e.type is E.JOB_EVICTED)
        second = [e for e in final if e.type is E.EXECUTE][1]
        image_bytes = [e.sent_bytes for e in final if e.type is E.CHECKPOINTED][-1]
        print(f"owner back -> evicted {evicted.timestamp - back:.0f} s, -> running on B "
              f"{second.timestamp - evicted.timestamp:.0f} s, -> done {done.timestamp - second.timestamp:.0f} s; "
              f"image {image_bytes / 2**20:.1f} MiB; {redone} step(s) redone (load {os.getloadavg()[0]:.1f})")
        history = wait_until(lambda: cm.run(["htc", "history", "-af", "JobStatus", "LastRemoteHost",
                                             "NumJobStarts"]).stdout.split(), 60, "the job in the history")
        assert len(history) == 3 and history[0] == "4" and history[2] == "2", history
        assert _hosts(history[1:2]) == [exec2.fqdn], history

        # B resumed from the image A sent to cm: the schedd kept A's vacate image and sent it to B
        schedd = _logs(cm, "Sched*Log*")
        stored = rf"job 1\.0: checkpoint (\d+) stored \(1 entries, \d+ bytes\) from host {re.escape(exec1.ip)}\n"
        kept = [int(n) for n in re.findall(stored, schedd)]
        assert kept, f"no checkpoint from A stored on cm: {schedd[-3000:]}"
        sent = re.findall(r"job 1\.0: sent its checkpoint \((\d+) entries, \d+ bytes\) to host ([\d.]+)\n", schedd)
        assert sent == [("0", exec1.ip), ("1", exec2.ip)], sent  # A started afresh, B from the image
        assert schedd.count("job 1.0: serving its forwarded file calls") == 2  # A's run and B's
        resumed = re.findall(r"job 1\.0: resuming from its checkpoint (\d+)", _logs(exec2, "Start*Log*"))
        assert [int(n) for n in resumed] == [max(kept)], (resumed, kept)  # the latest A sent
        assert exec2.ip not in _logs(exec1, "Start*Log*") and exec2.fqdn not in _logs(exec1, "Start*Log*")
        lev = cm.run(["htc", "history", "-af", "Leverage", "SubmitSideCpu", "RemoteUserCpu"]).stdout.split()
        print(f"daemon CPU s: cm: {_daemon_cpu(cm)}; A: {_daemon_cpu(exec1)}; B: {_daemon_cpu(exec2)}; "
              f"Leverage, SubmitSideCpu, RemoteUserCpu: {lev}")
        stop_pool(exec1, exec2, cm)
    except BaseException:
        for host in (cm, exec1, exec2):
            for path in sorted(host.path(f"{HTC_HOME}/log").glob("*Log")):
                print(f"--- {host.name}: {path.name}\n" + path.read_text(errors="replace")[-5000:])
        for path in (log, cm.path(f"{WORK}/count.err")):
            if path.exists():
                print(f"--- {path}\n" + path.read_text(errors="replace")[-3000:])
        raise

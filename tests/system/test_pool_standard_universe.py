"""``universe = standard`` in a personal pool: a job vacated by its slot's owner resumes from its
checkpoint on the other slot (issue #20, "In the pool", test 3).

One startd with two static slots. Slot 1 is the one "connected to the keyboard": its policy
starts jobs only while the owner is away and preempts them when the owner comes back; slot 2
runs jobs that have started once before (the job's requirements keep its first run on slot 1).
The owner is played by the startd's sensor override file (htc.daemons.startd.sensors), as in
tests/system/test_pool_acceptance.py.

The job is examples/standard/count.py, an unmodified CPython loop whose files are forwarded to
its submit directory, paced (its PAUSE) so that a fast host cannot end it before the vacate. It
is checkpointed every 2 s (CHECKPOINT_INTERVAL) and vacated part-way: the starter sends SIGTSTP,
the runtime writes an image and the job exits; the image streams to the schedd's spool; the job
is matched to slot 2, whose starter fetches the image and restarts it. Its output is byte-identical to an
uninterrupted run's, its own count of computed steps shows almost no work redone, and the user
log (read with htcondor2) has execute, checkpointed, evicted (``(1) Job was checkpointed.``),
execute, terminated.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import htcondor2
import pytest

from ckpt_images import tools  # noqa: F401 (a fixture)
from htc.daemons.schedd.checkpoint_files import checkpoint_directory
from htc.daemons.startd.sensors import write_sensor_override
from htc.runtime import image
from poolutil import Pool, wait_for

pytestmark = pytest.mark.slow

T = htcondor2.JobEventType
EXAMPLE = Path(__file__).parents[2] / "examples" / "standard"
STEPS = 1500
#: seconds each step sleeps: at least 30 s of job however fast the host, so a periodic checkpoint
#: (every 2 s) and the vacate come before the end (as in test_multi_host_standard.py)
PAUSE = 0.02
AWAY = {"KeyboardIdle": 100000, "ConsoleIdle": 100000, "LoadAvg": 0.0}
AT_THE_KEYBOARD = {**AWAY, "KeyboardIdle": 0, "ConsoleIdle": 0}
POLICY = """
START = (SlotID == 2) || (KeyboardIdle > 60)
SUSPEND = False
WANT_SUSPEND = False
PREEMPT = (SlotID == 1) && (KeyboardIdle < 60)
WANT_VACATE = True
KILL = False
MachineMaxVacateTime = 120
CHECKPOINT_INTERVAL = 2
"""


def _verified(path: Path):
    """The header of the image at ``path`` when it is there and verifies (None otherwise)."""
    try:
        return image.verify(path)
    except (FileNotFoundError, image.ImageError):
        return None


def _history(pool: Pool, cluster: int) -> list[str] | None:
    """NumCkpts, CkptSize, LastCkptTime and CheckpointNumber of the finished job."""
    out = subprocess.run([sys.executable, "-m", "htc.cli.main", "history", f"{cluster}.0", "-af", "NumCkpts",
                          "CkptSize", "LastCkptTime", "CheckpointNumber"], env=pool.env, capture_output=True,
                         text=True, timeout=60).stdout.split()
    return out or None


def reference(tmp: Path) -> bytes:
    """progress.out of an uninterrupted run, without the runtime."""
    tmp.mkdir()
    shutil.copy(EXAMPLE / "count.py", tmp)
    subprocess.run(["python3", "count.py", str(STEPS)], cwd=tmp, check=True, timeout=300)
    return (tmp / "progress.out").read_bytes()


#: the startd in the submit host's FileSystemDomain (the job's calls served next to it), or in
#: another (relayed to the schedd: htc.daemons.schedd.job_io)
DOMAINS = {"shared": "", "relayed": "STARTD.FILESYSTEM_DOMAIN = elsewhere.example\n"}


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_a_vacated_standard_job_resumes_from_its_checkpoint_on_the_other_slot(tools, tmp_path, domain):
    expected = reference(tmp_path / "reference")
    pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD", config=POLICY + DOMAINS[domain], NUM_CPUS="2",
                NUM_SLOTS="2")
    override, work = pool.home / "sensor_override", pool.work
    write_sensor_override(AWAY, override)
    try:
        pool.start()
        wait_for(lambda: len(pool.slots('State == "Unclaimed"')) == 2, timeout=60, what="two Unclaimed slots")
        shutil.copy(EXAMPLE / "count.py", work)
        (work / "count.py").chmod(0o644)
        log = work / "count.log"
        cluster = pool.submit(
            f"universe = standard\nexecutable = /usr/bin/python3\ntransfer_executable = false\n"
            f"arguments = count.py {STEPS} {PAUSE}\ninitialdir = {work}\nlog = {log}\nerror = count.err\n"
            f"requirements = (SlotID == 1) || (NumJobStarts > 0)\nqueue\n").cluster_id
        first = pool.log_events(log, 2, timeout=60)[1]
        assert first.type == T.EXECUTE and first["SlotName"].startswith("slot1@")

        def computed() -> int:
            try:
                return len((work / "work.log").read_text().splitlines())
            except FileNotFoundError:
                return 0

        wait_for(lambda: computed() >= STEPS // 4, timeout=120, what="a quarter of the steps done")
        pool.log_events(log, until=lambda evs: any(e.type == T.CHECKPOINTED for e in evs), timeout=60)  # periodic
        write_sensor_override(AT_THE_KEYBOARD, override)  # the owner is back at slot 1's console
        pool.log_events(log, until=lambda evs: any(e.type == T.JOB_EVICTED for e in evs), timeout=120)
        # the vacate's image is the job's checkpoint in the schedd's store, verified (read while
        # the job is in the queue: the store is swept once it has left)
        kept = checkpoint_directory(pool.home / "spool", cluster, 0) / "current" / "image"
        header = wait_for(lambda: _verified(kept), timeout=60, what="a verified image in the store")

        events = pool.log_events(log, until=lambda evs: evs and evs[-1].type == T.JOB_TERMINATED, timeout=240)
        kinds = [e.type for e in events if e.type != T.IMAGE_SIZE]
        # periodic checkpoints (CHECKPOINT_INTERVAL) come in between; one is the vacate's
        runs = [k for i, k in enumerate(kinds) if k != T.CHECKPOINTED or kinds[i - 1] != T.CHECKPOINTED]
        assert runs == [T.SUBMIT, T.EXECUTE, T.CHECKPOINTED, T.JOB_EVICTED, T.EXECUTE, T.CHECKPOINTED,
                        T.JOB_TERMINATED] or runs == [T.SUBMIT, T.EXECUTE, T.CHECKPOINTED, T.JOB_EVICTED,
                                                      T.EXECUTE, T.JOB_TERMINATED], [str(k) for k in kinds]
        assert kinds.index(T.JOB_EVICTED) >= 4, "a periodic checkpoint before the vacate's"
        after_restart = runs[-2] == T.CHECKPOINTED
        # the vacate's image was kept: HTCondor's "(1) Job was checkpointed." in the evicted event
        assert next(e for e in events if e.type == T.JOB_EVICTED)["Checkpointed"] is True
        second = [e for e in events if e.type == T.EXECUTE][1]
        done = events[-1]
        assert second["SlotName"].startswith("slot2@")
        assert done["TerminatedNormally"] is True and done["ReturnValue"] == 0

        # identical output; work redone: at most the steps between the vacate and its image
        assert (work / "progress.out").read_bytes() == expected
        redone = computed() - STEPS
        assert 0 <= redone <= 3, redone
        # the schedd's record: HTCondor's standard-universe attributes, and the images' numbers
        ad = wait_for(lambda: _history(pool, cluster), timeout=30, what=f"job {cluster}.0 in the history")
        num, size, last, number = ad
        assert int(num) == kinds.count(T.CHECKPOINTED) and int(size) > 0 and int(last) > 0
        assert int(number) >= header.seq >= 2  # (the sequence runs on across the restart)
        assert header.generation == 0 or after_restart  # the vacate's image, unless a later one came first
        # both runs' file calls were served where the domains say
        logs = "".join(path.read_text() for path in (pool.home / "log").glob("Sched*Log*"))
        relays = logs.count(f"job {cluster}.0: serving its forwarded file calls")
        assert relays == (2 if domain == "relayed" else 0), relays
    except BaseException:
        for path in [work / "count.err", *sorted((pool.home / "log").glob("*Log"))]:
            if path.exists():
                print(f"--- {path}\n" + path.read_text()[-6000:])
        raise
    finally:
        write_sensor_override(AWAY, override)
        pool.stop()

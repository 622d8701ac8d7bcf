"""A standard-universe job: counts in steps, writes each step's result to progress.out.

It knows nothing about checkpoints. Under ``universe = standard`` its files are its submit
directory's (forwarded by the runtime), and a vacate or a crash costs at most the steps since
the last checkpoint. ``work.log`` is opened afresh for each step, so it is never rolled back:
it counts every step computed, the redone ones included.

Usage: python3 count.py STEPS [PAUSE]  (PAUSE: seconds to sleep after each step, default 0;
a test uses it to keep the job running long enough to be checkpointed, however fast the host)
"""
import hashlib
import sys
import time

steps = int(sys.argv[1])
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
out = open("progress.out", "w")
digest = hashlib.sha256()
for step in range(steps):
    for k in range(20000):  # a few milliseconds of work
        digest.update(k.to_bytes(4, "little"))
    out.write(f"step {step} {digest.hexdigest()[:16]}\n")
    out.flush()
    with open("work.log", "a") as work:
        work.write(f"{step}\n")
    if pause:
        time.sleep(pause)
out.write("done\n")
out.close()

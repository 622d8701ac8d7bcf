"""A CPython loop for checkpoint tests: python pyloop.py OUTPUT N (deterministic output)."""
import hashlib
import sys
import time

out = open(sys.argv[1], "w")
n = int(sys.argv[2])
h = hashlib.sha256()
table = {}
for i in range(n):
    h.update(str(i).encode())
    table[i % 97] = h.hexdigest()
    out.write(f"{i} {h.hexdigest()[:16]} {len(table)} {sum(map(len, table.values()))}\n")
    if i % 100 == 0:
        out.flush()
        print("progress", i, flush=True)
    time.sleep(0.0003)
out.close()
print("done", h.hexdigest(), flush=True)

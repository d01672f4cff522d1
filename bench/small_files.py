"""Writes N files of 4 KiB of random bytes into DIR, 100 to a subdirectory (copy benchmarks)."""
import os
import sys

d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    sub = os.path.join(d, f"{i % 100:02d}")
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, f"f{i}"), "wb") as f:
        f.write(os.urandom(4096))

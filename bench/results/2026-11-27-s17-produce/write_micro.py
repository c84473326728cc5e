"""The ceiling of "one write(2) per segment per loop turn" (lever 2 of issue 23's session 17 brief), in isolation:
process CPU (user + system) per append of appending N batches to a file in /tmp (the same file system as the
bench's log dirs) one os.write(2) each, as the log does now, against holding K of them and writing them with one
os.writev(2) (no copy) or one os.write(2) of their join (one copy). Batches of 170 B (one 100 B record: the
one-record Produce) and 1,131 B (10 x 100 B: the connections point). Best of 5 blocks of 20,000 appends; each block
truncates the file first, as a segment grows from empty.

    .venv/bin/python bench/results/2026-11-27-s17-produce/write_micro.py
"""

import os
import tempfile
import time

N = 20_000


def block(fd: int, batch: bytes, k: int, how: str) -> float:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    held: list[bytes] = []
    t = time.process_time()
    for _ in range(N):
        if k == 1:
            os.write(fd, batch)
            continue
        held.append(batch)
        if len(held) == k:
            if how == "writev":
                os.writev(fd, held)
            else:
                os.write(fd, b"".join(held))
            held = []
    return (time.process_time() - t) / N * 1e6


def main() -> None:
    fd, path = tempfile.mkstemp(prefix="h1p-write-")
    try:
        for size in (170, 1131):
            batch = os.urandom(size)
            base = min(block(fd, batch, 1, "write") for _ in range(5))
            print(f"{size} B: one write(2) per append {base:.2f} us")
            for k in (2, 8, 64, 1024):
                for how in ("writev", "join"):
                    us = min(block(fd, batch, k, how) for _ in range(5))
                    print(f"{size} B: one {how} per {k} appends {us:.2f} us per append (saves {base - us:.2f})")
    finally:
        os.close(fd)
        os.unlink(path)


main()

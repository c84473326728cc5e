"""What forwarding one request to another process costs (docs/cores.md, option 2): the lower bound, with nothing
decoded. A "shard" process answers length-prefixed frames over a Unix socket (as an owner shard would answer a
forwarded partition's Produce); the "front" process sends K frames one after another, each waiting for its answer
(one request at a time, as a connection with one record in flight). Both run on kbus's event loop (uvloop when
installed). Reported: CPU microseconds per forwarded round trip, front + shard (utime+stime from /proc), i.e. what
every forwarded request would add to the ~100 us a small Produce costs kbus today (bench/scenarios/cores.sh).

    .venv/bin/python bench/scenarios/forward_cost.py [--requests 20000] [--size 200] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import struct
import time
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: benchlib
from benchlib import cpu_seconds as cpu_s  # noqa: E402


async def shard(sock: socket.socket) -> None:
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    while True:
        try:
            head = await reader.readexactly(4)
        except asyncio.IncompleteReadError:
            return
        body = await reader.readexactly(struct.unpack(">i", head)[0])
        writer.write(struct.pack(">i", len(body[:40])) + body[:40])  # a small answer, as a ProduceResponse is


async def front(sock: socket.socket, requests: int, size: int, concurrency: int) -> float:
    """`concurrency` forwarded requests in flight, like that many connections each waiting for one answer."""
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    frame = struct.pack(">i", size) + os.urandom(size)
    done = 0
    t0 = time.perf_counter()
    while done < requests:
        n = min(concurrency, requests - done)
        for _ in range(n):
            writer.write(frame)
        for _ in range(n):
            head = await reader.readexactly(4)
            await reader.readexactly(struct.unpack(">i", head)[0])
        done += n
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--size", type=int, default=200, help="bytes of a forwarded request (a 1-record Produce)")
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        a.close()
        run(shard(b))
        os._exit(0)
    b.close()
    c0 = cpu_s(pid)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    wall = run(front(a, args.requests, args.size, args.concurrency))
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    c1 = cpu_s(pid)
    a.close()
    os.waitpid(pid, 0)
    front_s = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    shard_s = c1 - c0
    print(json.dumps({
        "requests": args.requests, "size": args.size, "concurrency": args.concurrency,
        "front_cpu_us_per_request": round(front_s / args.requests * 1e6, 1),
        "shard_cpu_us_per_request": round(shard_s / args.requests * 1e6, 1),
        "total_cpu_us_per_request": round((front_s + shard_s) / args.requests * 1e6, 1),
        "wall_s": round(wall, 2), "loadavg_1m": os.getloadavg()[0],
    }))


if __name__ == "__main__":
    main()

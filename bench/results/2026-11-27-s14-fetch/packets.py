"""What a zero-copy Fetch response's writes cost the sender, by how its few header bytes go (session 14, issue 23).

A server process answers a client process over loopback TCP the way kbus's SendfileWriter does: TCP_NODELAY,
socket.send.buffer.bytes = 102,400 (Kafka's default, as kbus sets it), the response's encoded bytes written before
each file region and the region sent with os.sendfile, waiting for the socket with poll when it is full. The
client sends a small request, reads the whole response, sends the next. Variants of the header writes:

  writev  os.writev of the bytes before each region (kbus at 5630180)
  more    socket.sendmsg(..., MSG_MORE) of the bytes before each region (the kernel holds them for the region's
          first packet); the bytes after the last region with writev
  cork    TCP_CORK on for the whole response (every write held to full segments), off at its end

Rounds alternate the variants; each figure is the server's own CPU (user + system, getrusage) per response, with the
client's, and the loopback packets the server sent per response (/proc/net/snmp's Tcp OutSegs, machine-wide: the
machine is shared, so only a rough count).

    python3 bench/results/2026-11-27-s14-fetch/packets.py --regions 1 --region-bytes 900000 --requests 2000
    python3 bench/results/2026-11-27-s14-fetch/packets.py --regions 100 --region-bytes 40000 --requests 300
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import socket
import statistics
import sys
import tempfile
import time

VARIANTS = ("writev", "more", "cork")


def out_segs() -> int:
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    return int(rows[1][rows[0].index("OutSegs")])


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def serve(conn: socket.socket, fd: int, args: argparse.Namespace, variant: str) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 102400)
    conn.setblocking(False)
    out = conn.fileno()
    poller = select.poll()
    poller.register(out, select.POLLOUT)
    head = b"h" * 60  # the response's size prefix, header and first partition's header
    mid = b"m" * 40  # a partition's tagged fields and the next one's header
    tail = b"t" * 3  # flexible versions: the last partition's, the topic's and the response's tagged fields

    def wait() -> None:
        poller.poll()

    def write(data: bytes, flags: int) -> None:
        view = memoryview(data)
        while view:
            try:
                n = conn.sendmsg([view], (), flags) if flags else os.writev(out, [view])
            except BlockingIOError:
                wait()
                continue
            view = view[n:]

    def region(pos: int, size: int) -> None:
        while size:
            try:
                n = os.sendfile(out, fd, pos, size)
            except BlockingIOError:
                wait()
                continue
            pos, size = pos + n, size - n
            if size:
                wait()

    more = socket.MSG_MORE if variant == "more" else 0
    while True:
        req = b""
        while len(req) < 8:
            try:
                chunk = conn.recv(8 - len(req))
            except BlockingIOError:
                select.select([conn], [], [])
                continue
            if not chunk:
                return
            req += chunk
        if variant == "cork":
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        for i in range(args.regions):
            write(head if i == 0 else mid, more)
            region(i * args.region_bytes, args.region_bytes)
        write(tail, 0)
        if variant == "cork":
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)


def one(args: argparse.Namespace, path: str, variant: str) -> dict[str, float]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the server
        os.close(r)
        conn, _ = listener.accept()
        fd = os.open(path, os.O_RDONLY)
        c0 = cpu()
        serve(conn, fd, args, variant)
        os.write(w, json.dumps({"cpu": cpu() - c0}).encode())
        os._exit(0)
    os.close(w)
    listener.close()
    size = 60 + (args.regions - 1) * 40 + 3 + args.regions * args.region_bytes
    client = socket.create_connection(("127.0.0.1", port))
    buf = bytearray(1 << 20)
    c0, s0, t0 = cpu(), out_segs(), time.monotonic()
    for _ in range(args.requests):
        client.sendall(b"fetch...")
        got = 0
        while got < size:
            n = client.recv_into(buf)
            if not n:
                raise RuntimeError("server closed")
            got += n
    wall, client_cpu, segs = time.monotonic() - t0, cpu() - c0, out_segs() - s0
    client.close()
    server = json.loads(os.read(r, 4096))
    os.close(r)
    os.waitpid(pid, 0)
    n = args.requests
    return {"server_us": server["cpu"] / n * 1e6, "client_us": client_cpu / n * 1e6, "segs": segs / n,
            "wall_us": wall / n * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--regions", type=int, default=1)
    ap.add_argument("--region-bytes", type=int, default=900_000)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--out")
    args = ap.parse_args()
    variants = args.variants.split(",")
    with tempfile.NamedTemporaryFile(dir=os.environ.get("TMPDIR", "/tmp")) as f:
        f.write(os.urandom(args.regions * args.region_bytes))
        f.flush()
        results: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
        for rnd in range(args.rounds):
            order = variants if rnd % 2 == 0 else variants[::-1]
            for v in order:
                results[v].append(one(args, f.name, v))
    base = statistics.median(x["server_us"] for x in results[variants[0]])
    for v in variants:
        med = {k: statistics.median(x[k] for x in results[v]) for k in results[v][0]}
        line = {"variant": v, "regions": args.regions, "region_bytes": args.region_bytes, "requests": args.requests,
                "rounds": args.rounds, **{f"median_{k}": round(val, 2) for k, val in med.items()},
                f"server_vs_{variants[0]}": round(med["server_us"] / base, 3),
                "server_us_each_round": [round(x["server_us"], 1) for x in results[v]]}
        print(json.dumps(line))
        if args.out:
            with open(args.out, "a") as out:
                out.write(json.dumps(line) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

"""Per-request figures from a loopback capture of one client against one broker: how many Fetch (or Produce)
requests a workload took, the bytes of each response (Fetch) or request (Produce), the broker's time from the
request to the end of its response, and the client's gap from a response to its next request. Used in
bench/notes/RESULTS.md ("Where the time goes") to compare kbus and Kafka on the same workload.

    tcpdump -i lo -s 0 -w fetch.pcap "tcp port PORT" &   # then run the workload (e.g. kbench.py consume)
    .venv/bin/python bench/scenarios/wire_stats.py fetch.pcap PORT [--api fetch|produce]

Needs tshark (its Kafka dissector reassembles the frames).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess

API_KEYS = {"fetch": "1", "produce": "0"}


def rows(pcap: str, port: int) -> list[list[str]]:
    out = subprocess.run(
        ["tshark", "-r", pcap, "-d", f"tcp.port=={port},kafka", "-Y", "kafka", "-T", "fields",
         "-e", "frame.time_relative", "-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "kafka.len",
         "-e", "kafka.request_key", "-e", "kafka.correlation_id", "-E", "separator=;"],
        capture_output=True, text=True, check=False,  # exit 2 for a capture cut off mid-packet: keep what it read
    ).stdout
    return [line.split(";") for line in out.splitlines() if line]


def pairs(data: list[list[str]], port: int, key: str) -> list[tuple[float, float, int, int]]:
    """(request time, end of response time, request bytes, response bytes) per request of API `key`."""
    pending: dict[tuple[int, str], tuple[float, int]] = {}
    done = []
    for t, src, dst, lens, keys, corrs in data:
        if int(dst) == port:  # requests (several may share a segment: comma lists)
            for length, k, c in zip(lens.split(","), keys.split(","), corrs.split(","), strict=False):
                if k == key:
                    pending[(int(src), c)] = (float(t), int(length))
        elif int(src) == port:
            for length, c in zip(lens.split(","), corrs.split(","), strict=False):
                req = pending.pop((int(dst), c), None)
                if req is not None:
                    done.append((req[0], float(t), req[1], int(length)))
    return sorted(done)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pcap")
    ap.add_argument("port", type=int)
    ap.add_argument("--api", choices=sorted(API_KEYS), default="fetch")
    args = ap.parse_args()
    reqs = pairs(rows(args.pcap, args.port), args.port, API_KEYS[args.api])
    if not reqs:
        print("no such requests in the capture")
        return
    broker_ms = sorted((end - start) * 1000 for start, end, _, _ in reqs)
    gaps = [(b[0] - a[1]) * 1000 for a, b in itertools.pairwise(reqs)]
    sized = [r[3] if args.api == "fetch" else r[2] for r in reqs]
    print(f"{args.api} requests: {len(reqs)}")
    print(f"{'response' if args.api == 'fetch' else 'request'} bytes: total {sum(sized):,}, "
          f"median {statistics.median(sized):,.0f}, max {max(sized):,}")
    print(f"broker ms (request -> end of response): median {statistics.median(broker_ms):.2f}, "
          f"p90 {broker_ms[int(len(broker_ms) * 0.9)]:.2f}, sum {sum(broker_ms):.0f}")
    if gaps:
        print(f"client gap ms (response -> next request): median {statistics.median(gaps):.2f}, sum {sum(gaps):.0f}")
    print(f"first request at {reqs[0][0]:.3f} s, last response at {reqs[-1][1]:.3f} s")


if __name__ == "__main__":
    main()

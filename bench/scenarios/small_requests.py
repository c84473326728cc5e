"""Broker CPU per small request: many connections each pipelining one-record Produce requests (acks=all, the
librdkafka default, to a one-replica topic), or Metadata / ApiVersions requests, as fast as the broker answers.
The frames are encoded once, so the client costs a socket write and a response read per request; the figure is
the broker's utime+stime (/proc/PID/stat, all its threads) over the run divided by the requests answered.

    .venv/bin/python bench/scenarios/small_requests.py -b 127.0.0.1:9092 --broker-pid PID --label kbus [--api produce]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import time

from confluent_kafka.admin import AdminClient, NewTopic

from kbus.protocol.codec import build, encode_request, nested, request_type
from kbus.protocol.record_batch import build_batch
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: benchlib
from benchlib import cpu_seconds  # noqa: E402


def frame(api: str, topic: str, partition: int) -> bytes:
    if api == "produce":
        def entity(name: str, /, **fields: object) -> object:
            return build(nested(request_type(0, 9), name), **fields)

        body = build(request_type(0, 9), acks=-1, timeout=5000, topic_data=(
            entity("TopicProduceData", name=topic, partition_data=(
                entity("PartitionProduceData", index=partition,
                       records=build_batch([(None, b"x" * 100)])),)),))  # fmt: skip
    elif api == "metadata":
        body = build(request_type(3, 12), topics=(build(nested(request_type(3, 12), "MetadataRequestTopic"),
                                                        name=topic),))  # fmt: skip
    else:
        body = build(request_type(18, 3), client_software_name="bench", client_software_version="1")
    return encode_request(body, 1, "small-requests")


async def connection(host: str, port: int, frames: list[bytes], count: int, window: int) -> int:
    reader, writer = await asyncio.open_connection(host, port)
    sent = done = 0
    while done < count:
        batch = min(window - (sent - done), count - sent)
        if batch > 0:
            writer.writelines(frames[(sent + i) % len(frames)] for i in range(batch))
            sent += batch
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        await reader.readexactly(size)
        done += 1
    writer.close()
    return done


async def run(args: argparse.Namespace) -> dict[str, object]:
    host, port = args.bootstrap.rsplit(":", 1)
    frames = [frame(args.api, args.topic, p) for p in range(args.partitions)]
    per_conn = args.requests // args.connections
    warm = [connection(host, int(port), frames, min(per_conn, 200), args.window) for _ in range(args.connections)]
    await asyncio.gather(*warm)
    cpu0, t0 = cpu_seconds(args.broker_pid), time.monotonic()
    counts = await asyncio.gather(*(connection(host, int(port), frames, per_conn, args.window)
                                    for _ in range(args.connections)))  # fmt: skip
    elapsed, cpu = time.monotonic() - t0, cpu_seconds(args.broker_pid) - cpu0
    n = sum(counts)
    return {"tool": "small-requests", "label": args.label, "api": args.api, "requests": n,
            "connections": args.connections, "window": args.window, "seconds": round(elapsed, 3),
            "requests_per_s": round(n / elapsed), "broker_cpu_s": round(cpu, 3),
            "broker_cpu_us_per_request": round(cpu / n * 1e6, 2), "loadavg": os.getloadavg()[0],
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-b", "--bootstrap", required=True)
    ap.add_argument("--broker-pid", type=int, required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--api", choices=("produce", "metadata", "apiversions"), default="produce")
    ap.add_argument("--topic", default="small")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--window", type=int, default=4, help="requests in flight per connection")
    ap.add_argument("--requests", type=int, default=40_000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    if args.topic not in admin.list_topics(timeout=30).topics:
        admin.create_topics([NewTopic(args.topic, args.partitions, 1)])[args.topic].result(60)
        time.sleep(2)
    row = asyncio.run(run(args))
    line = json.dumps(row)
    print(line, flush=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()

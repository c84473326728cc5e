"""Broker CPU per Fetch request with 1,000 partitions, without and with an incremental fetch session (KIP-227),
measured the same way against Apache Kafka and kbus with raw Fetch v12 requests.

A topic of --partitions partitions gets one message in each; a consumer-like client (replica_id -1) then sends
--requests Fetch requests at the high watermark of every partition with max_wait 0 (nothing new: the case a
caught-up consumer of many partitions is in all the time):
  full         session_id 0, epoch -1: every request lists every partition and every response answers every one
  incremental  one full fetch opens a session, then epochs 1, 2, ... list nothing and get back nothing new
The broker's utime+stime over the requests, divided by their number, is its CPU per Fetch request.

    .venv/bin/python bench/scenarios/fetch_sessions.py -b HOST:PORT --broker-pid PID --label kafka [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema, load_response_schema

from kbus.protocol.client import KafkaConnection
from kbus.protocol.codec import build, nested
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: benchlib
from benchlib import cpu_seconds as broker_cpu  # noqa: E402

FetchReq, FetchResp = load_request_schema(1, 12), load_response_schema(1, 12)


def fetch_request(topic: str, offsets: dict[int, int], session_id: int, epoch: int) -> object:
    parts = [build(nested(FetchReq, "FetchPartition"), partition=p, current_leader_epoch=-1, fetch_offset=o,
                   last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1048576)
             for p, o in offsets.items()]
    return build(FetchReq, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=52428800, isolation_level=0,
                 session_id=session_id, session_epoch=epoch,
                 topics=[build(nested(FetchReq, "FetchTopic"), topic=topic, partitions=parts)] if parts else [],
                 forgotten_topics_data=[], rack_id="")


async def measure(args: argparse.Namespace, topic: str, offsets: dict[int, int]) -> dict[str, float]:
    host, port = args.bootstrap.rsplit(":", 1)
    conn = KafkaConnection(host, int(port), "fetch-sessions-bench")
    await conn.connect()
    out: dict[str, float] = {}
    try:
        # sessionless full fetches (librdkafka's way; every partition every time)
        cpu0 = broker_cpu(args.broker_pid)
        for _ in range(args.requests):
            resp = await conn.request(fetch_request(topic, offsets, 0, -1), FetchResp)
        out["full_us_per_fetch"] = (broker_cpu(args.broker_pid) - cpu0) / args.requests * 1e6
        out["full_partitions_in_response"] = sum(len(t.partitions) for t in resp.responses)
        # one full fetch opens a session; then empty incremental fetches
        resp = await conn.request(fetch_request(topic, offsets, 0, 0), FetchResp)
        session = resp.session_id
        out["session_id_given"] = float(session != 0)
        cpu0 = broker_cpu(args.broker_pid)
        for epoch in range(1, args.requests + 1):
            resp = await conn.request(fetch_request(topic, {}, session, epoch), FetchResp)
            if resp.error_code:
                raise RuntimeError(f"incremental fetch failed: error {resp.error_code}")
        out["incremental_us_per_fetch"] = (broker_cpu(args.broker_pid) - cpu0) / args.requests * 1e6
        out["incremental_partitions_in_response"] = sum(len(t.partitions) for t in resp.responses)
    finally:
        await conn.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-b", "--bootstrap", required=True)
    ap.add_argument("--broker-pid", type=int, required=True)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--label", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    topic = f"sessions-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(topic, args.partitions, 1)], operation_timeout=120)[topic].result(180)
    p = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 50})
    for i in range(args.partitions):
        p.produce(topic, b"x" * 100, partition=i)
    assert p.flush(120) == 0
    offsets = dict.fromkeys(range(args.partitions), 1)  # the high watermark of each: nothing new to read
    result = {"tool": "fetch-sessions", "label": args.label, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "partitions": args.partitions, "requests": args.requests, "loadavg_start": os.getloadavg(),
              **asyncio.run(measure(args, topic, offsets))}
    admin.delete_topics([topic])
    line = json.dumps(result)
    print(line)
    if args.out:
        with open(args.out, "a") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

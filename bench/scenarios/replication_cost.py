"""Broker CPU per replicated message, RF=3, acks=all: sum of the three brokers' CPU (leader appends and serves
both followers' fetches; the followers fetch and append) over N messages produced to a fresh 1-partition topic.
Run by bench/scenarios/replication_cost.sh against two 3-broker clusters side by side (e.g. before/after a change).

    .venv/bin/python bench/scenarios/replication_cost.py -b HOST:PORT,... --pids P1,P2,P3 --label L --topic T [-n N]
"""

from __future__ import annotations

import argparse
import json
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: benchlib
from benchlib import cpu_seconds, results_file  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-b", "--bootstrap", required=True)
    ap.add_argument("--pids", required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("-n", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    # small batches: many Produce requests, so many follower fetches (the path a per-request cost would show on)
    ap.add_argument("--batch-messages", type=int, default=50)
    ap.add_argument("--out", default=results_file("replication_cost.jsonl"))
    args = ap.parse_args()
    pids = [int(p) for p in args.pids.split(",")]
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    new = NewTopic(args.topic, 1, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[args.topic].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every replica in sync before measuring
        md = admin.list_topics(args.topic, timeout=5).topics[args.topic]
        if md.error is None and 0 in md.partitions and len(md.partitions[0].isrs) == 3:
            break
        time.sleep(0.2)
    p = Producer({"bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 0, "log_level": 0,
                  "batch.num.messages": args.batch_messages})
    value = b"x" * args.size
    before = [cpu_seconds(pid) for pid in pids]
    start = time.monotonic()
    for _ in range(args.n):
        while True:
            try:
                p.produce(args.topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(120):
        raise SystemExit("messages left unacknowledged")
    elapsed = time.monotonic() - start
    after = [cpu_seconds(pid) for pid in pids]
    cpu = sum(a - b for a, b in zip(after, before, strict=True))
    row = {"label": args.label, "n": args.n, "size": args.size, "batch": args.batch_messages,
           "elapsed_s": round(elapsed, 2),
           "broker_cpu_s": round(cpu, 2), "us_per_msg": round(cpu / args.n * 1e6, 3),
           "per_broker_cpu_s": [round(a - b, 2) for a, b in zip(after, before, strict=True)]}
    print(json.dumps(row))
    with open(args.out, "a") as f:
        f.write(json.dumps(row) + "\n")
    admin.delete_topics([args.topic])


if __name__ == "__main__":
    main()

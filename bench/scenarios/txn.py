"""Transactional produce vs idempotent produce, and read_committed vs read_uncommitted consume, on one broker.

usage: bench/scenarios/txn.py BOOTSTRAP LABEL OUT.jsonl [-n 1000000] [-s 100] [--commit-ms 100]
One JSON line per figure: produce msg/s with acks=all + idempotence, the same with a transaction committed every
--commit-ms, and a full read of the transactional topic with each isolation level."""

from __future__ import annotations

import argparse
import json
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create(bs: str) -> str:
    name = f"txbench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})  # kept alive until the result is in
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(60)
    return name


def produce(bs: str, topic: str, n: int, size: int, commit_ms: int | None) -> tuple[float, int]:
    conf = {"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000}
    if commit_ms is not None:
        conf["transactional.id"] = f"bench-{topic}"
    p = Producer(conf)
    payload = b"x" * size
    commits = 0
    start = time.perf_counter()
    if commit_ms is not None:
        p.init_transactions(30)
        p.begin_transaction()
        last = start
    for _ in range(n):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.01)
        if commit_ms is not None and (now := time.perf_counter()) - last >= commit_ms / 1000:
            p.commit_transaction(60)
            commits += 1
            p.begin_transaction()
            last = now
    if commit_ms is not None:
        p.commit_transaction(60)
        commits += 1
    else:
        p.flush(120)
    return n / (time.perf_counter() - start), commits


def consume(bs: str, topic: str, n: int, isolation: str) -> float:
    c = Consumer({"bootstrap.servers": bs, "group.id": f"g-{uuid.uuid4().hex[:6]}", "isolation.level": isolation,
                  "enable.auto.commit": False, "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = time.perf_counter()
    while got < n:
        for m in c.consume(10000, 1.0):
            if not m.error() or m.error().code() != KafkaError._PARTITION_EOF:
                got += 1
    rate = n / (time.perf_counter() - start)
    c.close()
    return rate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("label")
    ap.add_argument("out")
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("-s", type=int, default=100)
    ap.add_argument("--commit-ms", type=int, default=100)
    a = ap.parse_args()
    plain, txn = create(a.bootstrap), create(a.bootstrap)
    rows = []
    rate, _ = produce(a.bootstrap, plain, a.n, a.s, None)
    rows.append({"figure": "produce idempotent", "msg_s": rate})
    rate, commits = produce(a.bootstrap, txn, a.n, a.s, a.commit_ms)
    rows.append({"figure": f"produce transactional (commit every {a.commit_ms} ms)", "msg_s": rate,
                 "commits": commits})
    for isolation in ("read_uncommitted", "read_committed"):
        rows.append({"figure": f"consume {isolation}", "msg_s": consume(a.bootstrap, txn, a.n, isolation)})
    with open(a.out, "a") as f:
        for r in rows:
            f.write(json.dumps({"label": a.label, "n": a.n, "size": a.s, **r}) + "\n")
            print(a.label, r)


if __name__ == "__main__":
    main()

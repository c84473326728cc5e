"""Followers fetch in KIP-227 sessions: 3 kbus brokers on a real ZooKeeper, a RF=3 topic with 8 partitions, acks=all
writes to two of them. The leaders answer the followers' fetches incrementally (counted on their /metrics), idle
partitions stay in sync, and a leader restarted under writes (its sessions gone with it) loses nothing."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kbus_processes import Cluster, wait_for

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration, pytest.mark.slow]
TOPIC = "sessions"


def incremental_fetches(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    found = re.search(r"^kbus_incremental_fetches_total (\d+)", text, re.M)
    return int(found.group(1)) if found else 0


def produce(bootstrap: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2})
    failed: list[str] = []
    for i in values:
        p.produce(TOPIC, value=b"%d" % i, partition=i % 2, on_delivery=lambda e, m: e and failed.append(str(e)))
        p.poll(0)
    assert p.flush(60) == 0 and failed == []


def read_all(bootstrap: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False,
                  "log_level": 0})  # fmt: skip
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    out: list[int] = []
    idle_until = time.monotonic() + 10
    while time.monotonic() < idle_until:
        msgs = [m for m in c.consume(1000, 1.0) if m.error() is None]
        out += [int(m.value()) for m in msgs]
        if msgs:
            idle_until = time.monotonic() + 3
    c.close()
    return sorted(out)


def test_followers_fetch_incrementally_and_lose_nothing_across_a_leader_restart(tmp_path, zk_connect) -> None:
    cluster = Cluster(tmp_path, zk_connect)
    ports = cluster.expose_metrics()
    try:
        cluster.start_all()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 8, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        wait_for(lambda: len(cluster.partitions(TOPIC)) == 8
                 and all(len(isr) == 3 for _, isr in cluster.partitions(TOPIC).values()),
                 timeout=30, what="8 partitions with full ISRs")  # fmt: skip
        produce(cluster.bootstrap, range(0, 2000))
        before = {i: incremental_fetches(ports[i]) for i in cluster.brokers}
        # idle partitions are left out of the requests but stay in sync for longer than replica.lag.time.max.ms
        time.sleep(12)
        assert all(len(isr) == 3 for _, isr in cluster.partitions(TOPIC).values())
        after = {i: incremental_fetches(ports[i]) for i in cluster.brokers}
        # meanwhile each follower's fetch waited replica.fetch.wait.max.ms (500 ms) on its leader, then asked
        # again: 2 followers x 24 fetches per leader, every one of them incremental
        leaders = {leader for leader, _ in cluster.partitions(TOPIC).values()}
        assert all(after[i] - before[i] >= 30 for i in leaders), (before, after)

        # a restarted leader knows none of the sessions: its followers start new ones and catch up
        victim = cluster.partitions(TOPIC)[0][0]
        cluster.brokers[victim].stop()
        produce(cluster.bootstrap, range(2000, 3000))
        cluster.start_broker(victim)
        wait_for(lambda: all(len(isr) == 3 for _, isr in cluster.partitions(TOPIC).values()),
                 timeout=60, what=f"broker {victim} back in every ISR")  # fmt: skip
        produce(cluster.bootstrap, range(3000, 4000))
        assert read_all(cluster.bootstrap, 8) == list(range(4000))
    finally:
        cluster.stop()

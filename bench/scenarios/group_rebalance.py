"""Rebalance time of a consumer group, classic protocol (JoinGroup/SyncGroup, librdkafka's range,roundrobin) vs
the consumer protocol (KIP-848, the broker's uniform assignor), on one kbus broker and beside it one Apache Kafka
4.x broker in KRaft mode (tests/e2e/ecosystem/kafka_kraft.py), measured interleaved in the same run.

  bench/run group-rebalance [--members 10] [--partitions 100] [--rounds 3] [--systems kbus,kafka4]

Each round, per protocol: N member processes (tests/group_member.py, librdkafka) start together; "join" is the
time (process start-up included) until every partition has exactly one owner and the counts are balanced; then one
member stops (leaves) and "leave" is the time until the others own every partition again. Both protocols heartbeat
every 500 ms (the classic member's heartbeat.interval.ms, the broker's group.consumer.heartbeat.interval.ms; Kafka
needs group.consumer.min.heartbeat.interval.ms lowered for that) and neither broker delays the first rebalance
(group.initial.rebalance.delay.ms=0). Printed: the medians per system and protocol and kbus's ratio to Kafka."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.ecosystem.kafka_kraft import kafka4_kraft
from tests.group_member import MemberProcess, wait_until
from tests.kbus_processes import BrokerProcess

# the same group settings on both brokers
GROUP_CONFIGS = {"group.consumer.heartbeat.interval.ms": "500", "group.initial.rebalance.delay.ms": "0"}


def settled(members: list[MemberProcess], partitions: int) -> bool:
    """Every partition owned once and the counts within one of each other (the end of an incremental
    rebalance, not its first moment without an orphan)."""
    owned = [m.owned or [] for m in members]
    counts = [len(o) for o in owned]
    return sorted(p for o in owned for p in o) == list(range(partitions)) and max(counts) - min(counts) <= 1


def one_round(bootstrap: str, topic: str, protocol: str, n: int, partitions: int) -> tuple[float, float]:
    group = f"bench-{protocol}-{uuid.uuid4().hex[:6]}"
    members: list[MemberProcess] = []
    try:
        start = time.monotonic()
        for i in range(n):
            members.append(MemberProcess(bootstrap, group, topic, name=f"m{i}", protocol=protocol))
        wait_until(lambda: settled(members, partitions), 120, f"{protocol}: {n} members to settle")
        join = time.monotonic() - start
        leaving = members.pop()
        start = time.monotonic()
        leaving.stop()
        wait_until(lambda: settled(members, partitions), 120, f"{protocol}: the others to take over")
        return join, time.monotonic() - start
    finally:
        for m in members:
            m.kill()


@contextmanager
def kbus_broker() -> Iterator[str]:
    broker = BrokerProcess(Path(tempfile.mkdtemp(prefix="bench-rebalance-")), dict(GROUP_CONFIGS)).start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@contextmanager
def kafka4_broker() -> Iterator[str]:
    configs = {**GROUP_CONFIGS, "group.consumer.min.heartbeat.interval.ms": "500"}
    with kafka4_kraft(Path(tempfile.mkdtemp(prefix="bench-rebalance-kafka4-")), configs, heap="1g") as bootstrap:
        yield bootstrap


BROKERS = {"kbus": kbus_broker, "kafka4": kafka4_broker}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--systems", default="kbus,kafka4", help="comma-separated: kbus, kafka4")
    args = ap.parse_args()
    systems = args.systems.split(",")
    with kbus_broker() if "kbus" in systems else _none() as kbus_bs, \
            kafka4_broker() if "kafka4" in systems else _none() as kafka_bs:
        bootstraps = {name: bs for name, bs in (("kbus", kbus_bs), ("kafka4", kafka_bs)) if bs}
        topics = {}
        for name, bootstrap in bootstraps.items():
            topic = f"bench-{uuid.uuid4().hex[:6]}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(60)
            topics[name] = topic
        results: dict[tuple[str, str], list[tuple[float, float]]] = {
            (name, protocol): [] for name in bootstraps for protocol in ("classic", "consumer")
        }
        for _ in range(args.rounds):
            for name, protocol in results:  # interleaved, side by side
                results[name, protocol].append(
                    one_round(bootstraps[name], topics[name], protocol, args.members, args.partitions))
    medians: dict[tuple[str, str], tuple[float, float]] = {}
    for (name, protocol), runs in results.items():
        joins, leaves = [j for j, _ in runs], [lv for _, lv in runs]
        medians[name, protocol] = statistics.median(joins), statistics.median(leaves)
        all_joins, all_leaves = ", ".join(f"{j:.2f}" for j in joins), ", ".join(f"{lv:.2f}" for lv in leaves)
        print(f"{name:7} {protocol:9} join median {medians[name, protocol][0]:.2f} s ({all_joins})"
              f"  leave median {medians[name, protocol][1]:.2f} s ({all_leaves})")
    for protocol in ("classic", "consumer"):
        if ("kbus", protocol) in medians and ("kafka4", protocol) in medians:
            (kj, kl), (aj, al) = medians["kbus", protocol], medians["kafka4", protocol]
            print(f"kbus/kafka4 {protocol:9} join x{kj / aj:.2f}  leave x{kl / al:.2f}")


@contextmanager
def _none() -> Iterator[str]:
    yield ""


if __name__ == "__main__":
    main()

"""Rebalance time of a consumer group, classic protocol (JoinGroup/SyncGroup, librdkafka's range,roundrobin) vs
the consumer protocol (KIP-848, the broker's uniform assignor), on one kbus broker in the same run.

  bench/run group-rebalance [--members 10] [--partitions 100] [--rounds 3]

Each round, per protocol: N member processes (tests/group_member.py, librdkafka) start together; "join" is the
time (process start-up included) until every partition has exactly one owner and the counts are balanced; then one
member stops (leaves) and "leave" is the time until the others own every partition again. Both protocols heartbeat
every 500 ms (the classic member's heartbeat.interval.ms, the broker's group.consumer.heartbeat.interval.ms)."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from tests.group_member import MemberProcess, wait_until
from tests.kbus_processes import BrokerProcess


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    broker = BrokerProcess(Path(tempfile.mkdtemp(prefix="bench-rebalance-")),
                           {"group.consumer.heartbeat.interval.ms": "500"}).start()
    try:
        topic = f"bench-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
        results: dict[str, list[tuple[float, float]]] = {"classic": [], "consumer": []}
        for _ in range(args.rounds):
            for protocol in results:  # alternated, side by side
                results[protocol].append(one_round(broker.bootstrap, topic, protocol, args.members, args.partitions))
        for protocol, runs in results.items():
            joins, leaves = [j for j, _ in runs], [lv for _, lv in runs]
            all_joins, all_leaves = ", ".join(f"{j:.2f}" for j in joins), ", ".join(f"{lv:.2f}" for lv in leaves)
            print(f"{protocol:9} join median {statistics.median(joins):.2f} s ({all_joins})"
                  f"  leave median {statistics.median(leaves):.2f} s ({all_leaves})")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()

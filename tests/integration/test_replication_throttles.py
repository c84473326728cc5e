"""Replication throttles on a real 3-broker cluster: `kbus reassign-partitions --execute --throttle` writes Kafka's
throttle configs, the leader (leader.replication.*) and the new replica (follower.replication.*) then hold the
move to the rate, and `--verify` removes the configs once it is done. A move without a throttle is the baseline."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.test_leader_election import assert_nothing_lost
from tests.integration.test_reassign_partitions import plan, replicas
from tests.kbus_processes import Cluster, free_port, kbus, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.slow]
MESSAGES, VALUE_BYTES = 4000, 1000  # 4 MB in one partition
RATE = 500_000  # B/s: the move takes about 8 s of throttled replication


@pytest.fixture
def metered_cluster(tmp_path: Path, zk_connect: str) -> Iterator[Cluster]:
    """The 3-broker cluster of tests/conftest.py, each broker with its metrics endpoint (port in `metrics_port`)."""
    c = Cluster(tmp_path, zk_connect)
    for b in c.brokers.values():
        b.overrides["metrics.port"] = str(free_port())
    for i in c.brokers:
        c.start_broker(i)
    c.wait_until_all_see_each_other()
    yield c
    c.stop()


def held_back(cluster: Cluster, broker: int, quota_type: str) -> float:
    """kbus_replication_throttled_partitions_total of one broker: partition fetches its throttle held back."""
    port = cluster.brokers[broker].overrides["metrics.port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    m = re.search(rf'^kbus_replication_throttled_partitions_total{{type="{quota_type}"}} (\S+)$', text, re.M)
    assert m is not None, text
    return float(m.group(1))


def fill(bootstrap: str, topic: str) -> dict[int, set[int]]:
    """MESSAGES acks=all records; returns what was acknowledged."""
    acked: set[int] = set()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "log_level": 0})

    def done(err, msg):  # type: ignore[no-untyped-def]
        if err is None:
            acked.add(int(msg.value()[:8]))

    for i in range(MESSAGES):
        while True:
            try:
                value = f"{i:08d}".encode().ljust(VALUE_BYTES)  # space-padded: int(value) == i
                p.produce(topic, value, partition=0, on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    assert len(acked) == MESSAGES
    return {0: acked}


def move(cluster, tmp_path: Path, topic: str, target: int, *throttle: str) -> float:
    """Reassign `topic`-0 to `target` alone; seconds from --execute until the new replica set is in place."""
    moved = plan(tmp_path / f"{topic}.json", topic, {0: [target]})
    start = time.monotonic()
    ex = kbus("reassign-partitions", "--bootstrap-server", cluster.bootstrap, "--execute",
              "--reassignment-json-file", moved, *throttle)  # fmt: skip
    assert ex.returncode == 0, ex.stderr
    wait_for(lambda: replicas(cluster, topic) == {0: [target]}, timeout=120, what=f"{topic} moved to {target}")
    return time.monotonic() - start


def test_a_throttled_move_keeps_to_the_rate_and_verify_removes_the_throttle(
    metered_cluster: Cluster, raw_zk, tmp_path: Path
) -> None:
    cluster = metered_cluster
    b = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    topics = ("fast", "slow", "leader-only")
    # leader-only's leader is broker 2, whose leader rate has measured nothing yet: a SimpleRate that saw the
    # previous move would spread the next burst over up to replication.quota.window.num windows (as Kafka's)
    placement = {"fast": [[1]], "slow": [[1]], "leader-only": [[2]]}
    for f in admin.create_topics([NewTopic(t, 1, replica_assignment=placement[t]) for t in topics]).values():
        f.result(30)
    acked = {t: fill(b, t) for t in topics}

    unthrottled = move(cluster, tmp_path, "fast", 2)
    # without a throttle nothing is held back (the figures go to the log: on a loaded machine they are noise)
    assert held_back(cluster, 1, "LeaderReplication") == held_back(cluster, 2, "FollowerReplication") == 0
    throttled = move(cluster, tmp_path, "slow", 3, "--throttle", str(RATE))
    print(f"4 MB moved in {unthrottled:.2f} s without a throttle, {throttled:.2f} s at {RATE} B/s")
    # the throttle holds the move to the rate (the first fetch is free: Kafka measures after the fact, so the
    # lower bound leaves room for it), both on the leader and on the new replica
    assert throttled >= 0.5 * MESSAGES * VALUE_BYTES / RATE
    assert held_back(cluster, 3, "FollowerReplication") > 0
    # (the leader records the same bytes; with both sides throttled the follower mostly holds itself back first)

    # the configs the tool wrote were in force on the brokers; --verify removes them once the move is done
    assert json.loads(raw_zk.get("/config/brokers/3")[0])["config"]["follower.replication.throttled.rate"] == str(RATE)
    topic_config = json.loads(raw_zk.get("/config/topics/slow")[0])["config"]
    assert topic_config["leader.replication.throttled.replicas"] == "0:1"
    assert topic_config["follower.replication.throttled.replicas"] == "0:3"
    verify = kbus("reassign-partitions", "--bootstrap-server", b, "--verify", "--reassignment-json-file",
                  str(tmp_path / "slow.json"))  # fmt: skip
    assert "Reassignment of partition slow-0 is completed." in verify.stdout, verify.stdout + verify.stderr
    assert "Clearing topic-level throttles on topic slow" in verify.stdout
    for broker in (1, 3):
        config = json.loads(raw_zk.get(f"/config/brokers/{broker}")[0])["config"]
        assert not {"leader.replication.throttled.rate", "follower.replication.throttled.rate"} & set(config)
    assert not {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"} & set(
        json.loads(raw_zk.get("/config/topics/slow")[0])["config"]
    )

    # the leader side alone (Kafka's shouldLeaderThrottle): only broker 2's leader rate and the topic's leader
    # replicas, set by hand as an operator may; the new replica fetches unthrottled and gets empty answers
    for args in (("--entity-type", "brokers", "--entity-name", "2", "--add-config",
                  f"leader.replication.throttled.rate={RATE}"),
                 ("--entity-type", "topics", "--entity-name", "leader-only", "--add-config",
                  "leader.replication.throttled.replicas=0:2")):  # fmt: skip
        configured = kbus("configs", "--bootstrap-server", b, "--alter", *args)
        assert configured.returncode == 0, configured.stderr
    leader_throttled = move(cluster, tmp_path, "leader-only", 1)
    print(f"4 MB moved in {leader_throttled:.2f} s with the leader's throttle only")
    assert leader_throttled >= 0.5 * MESSAGES * VALUE_BYTES / RATE
    assert held_back(cluster, 2, "LeaderReplication") > 0 and held_back(cluster, 1, "FollowerReplication") == 0
    for topic in topics:
        assert_nothing_lost(b, topic, acked[topic])

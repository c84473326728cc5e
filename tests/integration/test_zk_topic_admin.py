"""`kbus topics --zookeeper`: ZkTopicAdmin straight against ZooKeeper, with a ZooKeeper-mode controller acting on it."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from kbus.admin.base import TopicAdmin
from kbus.admin.errors import AdminError
from kbus.admin.zookeeper import ZkTopicAdmin
from kbus.zk import codec
from tests.kbus_processes import wait_for
from tests.zk_server import KBUS, free_port

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration]


def leaders(store, topic: str) -> list[int]:
    found = store.topics().get(topic)
    return [] if found is None else [s.leader for _, s in sorted(found.partitions.items())]


@pytest.fixture
def admin(zk_connect):
    a = ZkTopicAdmin(zk_connect)
    yield a
    a.close()


def test_implements_topic_admin_protocol(admin):
    assert isinstance(admin, TopicAdmin)


def test_create_describe_delete_through_zookeeper(stores, admin, raw_zk):
    broker = stores(1)
    admin.create_topic("seed-topic", 3, 1, {"retention.ms": "3600000"})
    # written the Kafka 2.x way: assignment + config znodes; the controller then adds partition states
    body = json.loads(raw_zk.get("/brokers/topics/seed-topic")[0])
    assert body["partitions"] == {"0": [1], "1": [1], "2": [1]}
    wait_for(lambda: leaders(broker, "seed-topic") == [1, 1, 1], what="controller elects leaders")
    assert admin.list_topics() == ["seed-topic"]
    [desc] = admin.describe_topics(["seed-topic"])
    assert desc.name == "seed-topic" and desc.replication_factor == 1 and not desc.marked_for_deletion
    assert desc.topic_id == codec.uuid_to_kafka(broker.topics()["seed-topic"].topic_id)
    assert desc.configs == {"retention.ms": "3600000"}
    assert [(p.partition, p.leader, p.replicas, p.isr) for p in desc.partitions] == [
        (0, 1, [1], [1]),
        (1, 1, [1], [1]),
        (2, 1, [1], [1]),
    ]

    with pytest.raises(AdminError) as exists:
        admin.create_topic("seed-topic", 1, 1)
    assert exists.value.name == "TOPIC_ALREADY_EXISTS"
    admin.create_partitions("seed-topic", 5)
    wait_for(lambda: leaders(broker, "seed-topic") == [1] * 5, what="new partitions get leaders")

    admin.delete_topic("seed-topic")
    wait_for(lambda: "seed-topic" not in broker.topics(), what="controller deletes the topic")
    wait_for(lambda: admin.list_topics() == [])
    with pytest.raises(AdminError) as missing:
        admin.describe_topics(["seed-topic"])
    assert missing.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
    with pytest.raises(AdminError) as missing_delete:
        admin.delete_topic("seed-topic")
    assert missing_delete.value.name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_errors_carry_kafka_names(admin):
    # no broker registered: Kafka 2.x assigned replicas over live brokers only
    with pytest.raises(AdminError, match=r"Replication factor: 1 larger than available brokers: 0.") as rf:
        admin.create_topic("nobody-home", 1, 1)
    assert rf.value.name == "INVALID_REPLICATION_FACTOR"
    with pytest.raises(AdminError) as no_partitions:
        admin.create_topic("x", None, 1)
    assert "partitions" in str(no_partitions.value)
    with pytest.raises(AdminError) as bad_config:
        admin.create_topic("x", 1, 1, {"retention.ms": "soon"})
    assert bad_config.value.name == "INVALID_CONFIG"


def test_deletion_request_is_dropped_when_delete_topic_enable_is_false(admin, raw_zk, stores):
    """Kafka's controller removes deletion markers it will not honour; the topic and its data stay."""
    broker = stores(1, delete_topic_enable=False)
    admin.create_topic("keep", 1, 1)
    wait_for(lambda: "keep" in broker.topics())
    admin.delete_topic("keep")
    wait_for(lambda: not raw_zk.exists("/admin/delete_topics/keep"), what="the controller drops the request")
    assert "keep" in broker.topics()
    [desc] = admin.describe_topics(["keep"])
    assert not desc.marked_for_deletion


def test_unreachable_zookeeper_is_one_clear_error():
    start = time.monotonic()
    with pytest.raises(AdminError, match=r"Timed out connecting to ZooKeeper at 127.0.0.1:"):
        ZkTopicAdmin(f"127.0.0.1:{free_port()}", timeout_s=1.0)
    assert time.monotonic() - start < 5


def kbus_topics(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KBUS, "topics", *args], capture_output=True, text=True, timeout=60)


def test_cli_topics_zookeeper_like_the_seeds(stores, zk_connect):
    broker = stores(1)
    created = kbus_topics("--create", "--topic", "topic-1", "--zookeeper", zk_connect,
                          "--partitions", "3", "--replication-factor", "1")  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert "Created topic topic-1." in created.stdout
    wait_for(lambda: leaders(broker, "topic-1") == [1, 1, 1], what="controller elects leaders")

    listed = kbus_topics("--list", "--zookeeper", zk_connect)
    assert listed.returncode == 0 and listed.stdout.split() == ["topic-1"]

    described = kbus_topics("--describe", "--topic", "topic-1", "--zookeeper", zk_connect)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0].startswith("Topic: topic-1\tTopicId: ")
    assert "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: " in lines[0]
    assert lines[1] == "\tTopic: topic-1\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1"
    assert len(lines) == 4

    too_wide = kbus_topics("--create", "--topic", "wide", "--zookeeper", zk_connect,
                           "--partitions", "1", "--replication-factor", "3")  # fmt: skip
    assert too_wide.returncode != 0 and "Traceback" not in too_wide.stderr
    assert "Replication factor: 3 larger than available brokers: 1." in too_wide.stderr

    deleted = kbus_topics("--delete", "--topic", "topic-1", "--zookeeper", zk_connect)
    assert deleted.returncode == 0, deleted.stderr
    assert "Topic topic-1 is marked for deletion." in deleted.stdout
    wait_for(lambda: "topic-1" not in broker.topics())

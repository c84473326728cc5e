"""kbus brokers in ZooKeeper mode (zookeeper.connect set), with real clients: both admin paths agree,
a duplicate broker.id is refused, and a killed leader is replaced (metadata failover, measured)."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from kbus.zk import codec
from tests.kbus_processes import BrokerProcess, wait_for
from tests.zk_server import KBUS

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration]


@pytest.fixture
def zk_brokers(tmp_path, zk_connect) -> Iterator:
    started: list[BrokerProcess] = []

    def start(broker_id: int, **overrides: str) -> BrokerProcess:
        props = {"zookeeper.connect": zk_connect, "broker.id": str(broker_id), **overrides}
        b = BrokerProcess(tmp_path / f"broker{broker_id}-{len(started)}", props).start()
        started.append(b)
        return b

    yield start
    for b in started:
        try:
            b.stop()
        except Exception:
            b.kill()


def topics_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KBUS, "topics", *args], capture_output=True, text=True, timeout=60)


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(topic, timeout=5)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return {}
    return {p.id: p.leader for p in t.partitions.values()}


def test_zookeeper_and_bootstrap_paths_agree(zk_brokers, zk_connect):
    broker = zk_brokers(1)
    made = topics_cli("--create", "--topic", "via-zk", "--zookeeper", zk_connect,
                      "--partitions", "3", "--replication-factor", "1")  # fmt: skip
    assert made.returncode == 0, made.stderr
    made = topics_cli("--create", "--topic", "via-wire", "--bootstrap-server", broker.bootstrap,
                      "--partitions", "2", "--replication-factor", "1")  # fmt: skip
    assert made.returncode == 0, made.stderr
    wait_for(lambda: leaders(broker.bootstrap, "via-zk") == {0: 1, 1: 1, 2: 1}, what="broker serves via-zk")

    def described(*where: str) -> str:
        out = topics_cli("--describe", "--exclude-internal", *where)
        assert out.returncode == 0, out.stderr
        return out.stdout

    assert same_topic_ids(described("--zookeeper", zk_connect)) == same_topic_ids(
        described("--bootstrap-server", broker.bootstrap)
    )

    # a topic created in ZooKeeper carries data through the broker
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        producer.produce("via-zk", str(i).encode(), partition=i % 3)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "zk-e2e", "auto.offset.reset": "earliest"})
    consumer.subscribe(["via-zk"])
    got: list[int] = []
    deadline = time.monotonic() + 30
    while len(got) < 30 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(int(msg.value()))
    consumer.close()
    assert sorted(got) == list(range(30))

    # deleted through either path: gone from both
    assert topics_cli("--delete", "--topic", "via-wire", "--zookeeper", zk_connect).returncode == 0
    assert topics_cli("--delete", "--topic", "via-zk", "--bootstrap-server", broker.bootstrap).returncode == 0

    def listed(*where: str) -> list[str]:
        return topics_cli("--list", "--exclude-internal", *where).stdout.split()

    wait_for(lambda: listed("--zookeeper", zk_connect) == [] and listed("--bootstrap-server", broker.bootstrap) == [],
             what="both deletions visible on both paths")  # fmt: skip
    assert not list((broker.log_dirs).glob("via-zk-*")), "the broker removed the deleted topic's logs"


def same_topic_ids(describe_output: str) -> str:
    """TopicIds compared as UUIDs: see test_topic_id_text_is_kafkas_on_both_paths for the text form."""

    def canonical(match: re.Match[str]) -> str:
        text = match.group(1).replace("+", "-").replace("/", "_")
        return f"TopicId: {codec.uuid_from_kafka(text)}"

    return re.sub(r"TopicId: (\S+)", canonical, describe_output)


def test_topic_id_text_is_kafkas_on_both_paths(zk_brokers, zk_connect):
    broker = zk_brokers(1)
    # enough topics that some id almost surely contains a character where the two alphabets differ
    for i in range(12):
        assert topics_cli("--create", "--topic", f"id{i}", "--zookeeper", zk_connect,
                          "--partitions", "1", "--replication-factor", "1").returncode == 0  # fmt: skip
    wait_for(lambda: all(leaders(broker.bootstrap, f"id{i}") == {0: 1} for i in range(12)))
    by_zk = topics_cli("--describe", "--exclude-internal", "--zookeeper", zk_connect).stdout
    by_wire = topics_cli("--describe", "--exclude-internal", "--bootstrap-server", broker.bootstrap).stdout
    assert by_zk == by_wire


def test_duplicate_broker_id_process_exits_with_clear_error(zk_brokers, tmp_path, zk_connect):
    zk_brokers(1)
    # the twin waits one session timeout for the registration to vanish (it could be its own crashed run)
    twin = BrokerProcess(
        tmp_path / "twin",
        {"zookeeper.connect": zk_connect, "broker.id": "1", "zookeeper.session.timeout.ms": "4000"},
    )
    with pytest.raises(RuntimeError):
        twin.start(timeout=30)
    log = twin.log_text()
    assert "broker.id 1 is already registered" in log, log[-2000:]


def test_killed_leader_is_replaced(zk_brokers):
    # short sessions so a crash is noticed quickly (Kafka's default is 18 s)
    one = zk_brokers(1, **{"zookeeper.session.timeout.ms": "4000"})
    two = zk_brokers(2, **{"zookeeper.session.timeout.ms": "4000"})
    made = topics_cli("--create", "--topic", "fo", "--bootstrap-server", one.bootstrap,
                      "--partitions", "4", "--replication-factor", "2")  # fmt: skip
    assert made.returncode == 0, made.stderr
    wait_for(lambda: sorted(set(leaders(two.bootstrap, "fo").values())) == [1, 2], what="leaders on both")

    t0 = time.monotonic()
    one.kill()
    took = wait_for(lambda: set(leaders(two.bootstrap, "fo").values()) == {2}, timeout=30,
                    what="broker 2 leads every partition")  # fmt: skip
    print(f"kill -9 of broker 1 -> broker 2 reports itself leader of all partitions after {took:.2f}s")
    # the session timeout, plus scheduling slack on a loaded machine
    assert took < 4.0 + 6.0
    assert time.monotonic() - t0 >= took

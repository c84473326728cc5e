"""Client quotas on a real broker in ZooKeeper mode with real clients (confluent-kafka/librdkafka): a
producer_byte_rate or consumer_byte_rate set for a client.id while the broker runs holds that client near the
quota, its responses carry throttle_time_ms (librdkafka's throttle_cb fires), and a client without a quota runs
freely beside it. The quota is written as Kafka writes it (/config/clients/<id> plus a /config/changes
notification), so the broker applies it without a restart.

The broker runs with quota.window.num=2 so a test needs seconds, not the ~10 s Kafka's 11 windows take to stop an
initial burst (the rate is measured over at least (quota.window.num - 1) windows)."""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import subprocess
import time
import urllib.request
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbus.protocol.client import KafkaConnection
from kbus.protocol.codec import build, nested, request_type, response_type
from kbus.protocol.record_batch import build_batch
from tests.kbus_processes import free_port, kbus

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]
QUOTA = 100 * 1024  # bytes per second
RUN_S = 3.0
PRODUCE, FETCH, METADATA = 0, 1, 3  # api keys
VALUE = b"x" * 1000


@pytest.fixture
def zk_broker(broker_factory, zk_connect):
    b = broker_factory({"zookeeper.connect": zk_connect, "quota.window.num": "2", "metrics.port": str(free_port())})
    return b


def quota_metrics(broker) -> dict[tuple[str, str, str], float]:
    """(metric, type, client_id) -> value of the kbus_client_quota_* series on the broker's /metrics."""
    port = int(broker.overrides["metrics.port"])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'(kbus_client_quota_\w+)\{(.*)\} (\S+)$', line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out[(m.group(1), labels["type"], labels["client_id"])] = float(m.group(3))
    return out


def produce_for(bootstrap: str, topic: str, client_id: str, seconds: float) -> tuple[float, list[float]]:
    """Produce as fast as the broker lets this client for `seconds`: (acknowledged bytes per second, throttle
    times librdkafka reported)."""
    throttles: list[float] = []
    acked = [0]

    def delivered(err, msg) -> None:
        if err is None:
            acked[0] += len(msg.value())

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "log_level": 0,
                  "throttle_cb": lambda e: throttles.append(e.throttle_time),
                  "queue.buffering.max.kbytes": 256})  # fmt: skip
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            p.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    elapsed = time.monotonic() - start
    done = acked[0]  # what was acknowledged within the run; the rest is flushed uncounted
    p.flush(30)
    return done / elapsed, throttles


def consume_for(bootstrap: str, topic: str, client_id: str, seconds: float) -> tuple[float, list[float]]:
    throttles: list[float] = []
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": f"g-{client_id}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0,
                  "throttle_cb": lambda e: throttles.append(e.throttle_time)})  # fmt: skip
    c.subscribe([topic])
    got = 0
    start: float | None = None
    try:
        while start is None or time.monotonic() - start < seconds:
            msg = c.poll(0.1)
            if msg is None or msg.error():
                continue
            if start is None:
                start = time.monotonic()  # from the first record: the group join is not the fetch rate
            got += len(msg.value())
        return got / (time.monotonic() - start), throttles
    finally:
        c.close()


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_producer_byte_rate_throttles_one_client_id(zk_broker, zk_connect, raw_zk) -> None:
    b = zk_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("quota-p", 1, 1)])["quota-p"].result(30)
    # kafka-configs --zookeeper's way: the entity's znode and a change notification the running broker follows
    out = ok(kbus("configs", "--zookeeper", zk_connect, "--alter", "--entity-type", "clients", "--entity-name",
                  "slow-producer", "--add-config", f"producer_byte_rate={QUOTA}"))  # fmt: skip
    assert out == "Completed updating config for entity: client-id 'slow-producer'.\n"
    data, _ = raw_zk.get("/config/clients/slow-producer")
    assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": str(QUOTA)}}
    changes = [json.loads(raw_zk.get(f"/config/changes/{c}")[0]) for c in raw_zk.get_children("/config/changes")]
    assert {"version": 2, "entity_path": "clients/slow-producer"} in changes

    free_rate, free_throttles = produce_for(b, "quota-p", "free-producer", RUN_S)
    slow_rate, slow_throttles = produce_for(b, "quota-p", "slow-producer", RUN_S)
    # Kafka's bound: one window's burst beyond the quota, then the quota: well under twice it over 3 s
    assert slow_rate < 2 * QUOTA, slow_rate
    assert slow_throttles and max(slow_throttles) > 0
    assert not free_throttles
    assert free_rate > 2 * QUOTA, free_rate
    # Kafka's per-entity metrics: the sensor is keyed by the client id the quota names
    metrics = quota_metrics(zk_broker)
    assert metrics[("kbus_client_quota_throttle_time_ms", "Produce", "slow-producer")] > 0
    assert metrics[("kbus_client_quota_byte_rate", "Produce", "slow-producer")] > 0
    assert metrics[("kbus_client_quota_throttle_time_ms", "Produce", "free-producer")] == 0

    # removed while the broker runs: the same client is free again
    ok(kbus("configs", "--bootstrap-server", b, "--alter", "--entity-type", "clients", "--entity-name",
            "slow-producer", "--delete-config", "producer_byte_rate"))  # fmt: skip
    assert ok(kbus("configs", "--bootstrap-server", b, "--describe", "--entity-type", "clients")) == ""
    time.sleep(1)  # the throttle the last response asked for
    _, throttles = produce_for(b, "quota-p", "slow-producer", 1.0)
    assert not throttles


def test_consumer_byte_rate_throttles_one_client_id(zk_broker) -> None:
    b = zk_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("quota-c", 1, 1)])["quota-c"].result(30)
    # small batches: a fetch returns at least one whole batch, and one bigger than the quota allows in a window
    # would be throttled (and taken back) on every fetch, in Kafka as here
    p = Producer({"bootstrap.servers": b, "linger.ms": 20, "batch.size": 16384, "log_level": 0})
    for _ in range(1500):  # 1.5 MB: more than the throttled consumer may read in its run
        p.produce("quota-c", VALUE)
    p.flush(30)
    # AlterClientQuotas, written by the broker, applied without a restart
    out = ok(kbus("configs", "--bootstrap-server", b, "--alter", "--entity-type", "clients", "--entity-name",
                  "slow-consumer", "--add-config", f"consumer_byte_rate={QUOTA}"))  # fmt: skip
    assert out == "Completed updating config for client slow-consumer.\n"
    slow_rate, slow_throttles = consume_for(b, "quota-c", "slow-consumer", RUN_S)
    assert slow_rate < 2.5 * QUOTA, slow_rate
    assert slow_throttles and max(slow_throttles) > 0
    free_rate, free_throttles = consume_for(b, "quota-c", "free-consumer", 1.0)
    assert not free_throttles
    assert free_rate > 2.5 * QUOTA, free_rate


def test_standalone_broker_keeps_quotas_in_its_metadata_file(broker_factory) -> None:
    b = broker_factory()
    bs = ("--bootstrap-server", b.bootstrap)
    entity = ("--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default")
    ok(kbus("configs", *bs, "--alter", *entity, "--add-config", "producer_byte_rate=1024,request_percentage=50"))
    expected = ("Quota configs for user-principal 'alice', the default client-id are producer_byte_rate=1024.0, "
                "request_percentage=50.0\n")  # fmt: skip
    assert ok(kbus("configs", *bs, "--describe", *entity)) == expected
    b.restart()
    assert ok(kbus("configs", *bs, "--describe", "--entity-type", "users", "--entity-type", "clients")) == expected
    bad = kbus("configs", *bs, "--alter", *entity, "--add-config", "bogus_rate=1")
    assert bad.returncode == 1 and "Unexpected config names: bogus_rate" in bad.stderr


def test_request_percentage_throttles_a_busy_client(zk_broker) -> None:
    b = zk_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("quota-r", 1, 1)])["quota-r"].result(30)
    # 0.1 % of one second per second: any stream of requests is over it
    ok(kbus("configs", "--bootstrap-server", b, "--alter", "--entity-type", "clients", "--entity-name", "busy",
            "--add-config", "request_percentage=0.1"))  # fmt: skip
    _, throttles = produce_for(b, "quota-r", "busy", 1.5)
    assert throttles and max(throttles) > 0
    assert max(throttles) <= 1.0  # seconds: Kafka bounds a request-quota throttle to one quota window
    metrics = quota_metrics(zk_broker)
    assert metrics[("kbus_client_quota_request_time", "Request", "busy")] > 0


def test_controller_mutation_rate_throttles_topic_creation(zk_broker) -> None:
    """librdkafka's CreateTopics (v4) meets the permissive quota (KIP-599): the topic is created, the response
    carries the time until the token bucket is back at zero."""
    b = zk_broker.bootstrap
    ok(kbus("configs", "--bootstrap-server", b, "--alter", "--entity-type", "clients", "--entity-name", "creator",
            "--add-config", "controller_mutation_rate=1"))  # fmt: skip
    throttles: list[float] = []
    admin = AdminClient({"bootstrap.servers": b, "client.id": "creator",
                         "throttle_cb": lambda e: throttles.append(e.throttle_time)})  # fmt: skip
    # a burst of 11 partitions (1/s over 11 windows); 20 leave the bucket 9 short: 9 s. The broker applies the quota
    # when it reads ZooKeeper's change notification, after `configs --alter` returns (Kafka's DynamicConfigManager
    # too): a creation that came first is not throttled, and the next topic is created once it is in force
    for attempt in range(10):
        topic = f"mutated-{attempt}"
        admin.create_topics([NewTopic(topic, 20, 1)])[topic].result(30)
        admin.poll(1)
        if throttles:
            break
    assert throttles and 8.0 <= max(throttles) <= 9.0, throttles


def test_request_percentage_throttle_time_reaches_hand_encoded_responses(zk_broker) -> None:
    """Produce, Fetch and Metadata are answered with bodies kbus encodes by hand, not kio objects; under a request
    quota each still carries the throttle time (Kafka's sendResponseMaybeThrottle / handleProduceRequest /
    handleFetchRequest), in flexible and older versions, read back from the real frames with kio."""
    b = zk_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("quota-h", 1, 1)])["quota-h"].result(30)
    ok(kbus("configs", "--bootstrap-server", b, "--alter", "--entity-type", "clients", "--entity-name", "tight",
            "--add-config", "request_percentage=0.01"))  # fmt: skip
    batch = build_batch([(None, b"v")])

    def metadata(version: int) -> Any:
        req = request_type(METADATA, version)
        return build(req, topics=[build(nested(req, "MetadataRequestTopic"), name="quota-h")],
                     allow_auto_topic_creation=False)  # fmt: skip

    def produce(version: int) -> Any:
        req = request_type(PRODUCE, version)
        part = build(nested(req, "PartitionProduceData"), index=0, records=batch)
        return build(req, acks=1, timeout=5000, topic_data=[build(nested(req, "TopicProduceData"), name="quota-h",
                                                                     partition_data=[part])])  # fmt: skip

    def fetch(version: int) -> Any:
        req = request_type(FETCH, version)
        part = build(nested(req, "FetchPartition"), partition=0, fetch_offset=0, current_leader_epoch=-1,
                     last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)  # fmt: skip
        return build(req, replica_id=-1, max_wait=10, min_bytes=1, max_bytes=1 << 20, session_epoch=-1,
                     topics=[build(nested(req, "FetchTopic"), topic="quota-h", partitions=[part])])  # fmt: skip

    wanted = {(METADATA, 12): metadata(12), (METADATA, 4): metadata(4), (PRODUCE, 9): produce(9),
              (PRODUCE, 3): produce(3), (FETCH, 12): fetch(12), (FETCH, 4): fetch(4)}  # fmt: skip
    host, port = b.split(":")

    async def run() -> dict[tuple[int, int], int]:
        conn = KafkaConnection(host, int(port), "tight")
        seen: dict[tuple[int, int], int] = {}
        deadline = time.monotonic() + 30
        try:
            while len(seen) < len(wanted) and time.monotonic() < deadline:
                for (key, version), req in wanted.items():
                    if (key, version) in seen:
                        continue
                    resp = await conn.request(req, response_type(key, version), timeout=30)
                    throttle_ms = resp.throttle_time // datetime.timedelta(milliseconds=1)
                    if key == METADATA:
                        assert [t.name for t in resp.topics] == ["quota-h"]  # the body around it is intact
                    if throttle_ms > 0:
                        seen[(key, version)] = throttle_ms
        finally:
            await conn.close()
        return seen

    seen = asyncio.run(run())
    assert set(seen) == set(wanted), seen
    assert max(seen.values()) <= 1000, seen  # bounded to one quota window, as Kafka bounds it

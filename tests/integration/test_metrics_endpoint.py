"""The /metrics and /health endpoint of a real broker, scraped after real clients produced and consumed."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
import uuid

import pytest

from tests.kbus_processes import TEST_DEFAULTS, free_port

pytestmark = pytest.mark.integration

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def scrape(port: int, path: str = "/metrics") -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        assert m, f"not Prometheus text format: {line!r}"
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(s: dict, name: str, **labels: str) -> float | None:
    return s.get((name, frozenset(labels.items())))


def produce(bootstrap: str, topic: str, n: int) -> int:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10})
    for i in range(n):
        p.produce(topic, b"m%d" % i, key=b"k")
    assert p.flush(30) == 0
    return n


def consume_and_commit(bootstrap: str, topic: str, group: str, n: int) -> int:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    while got < n and time.monotonic() < deadline:
        got += sum(1 for m in c.consume(1000, 0.5) if not m.error())
    c.commit(asynchronous=False)
    c.close()
    return got


def test_metrics_match_a_produce_consume_run(broker_factory) -> None:
    metrics_port = free_port()
    b = broker_factory({"metrics.port": str(metrics_port)})
    run = uuid.uuid4().hex[:6]
    sent = {f"ma-{run}": 1234, f"mb-{run}": 17}
    for topic, n in sent.items():
        produce(b.bootstrap, topic, n)
    group = f"mg-{run}"
    for topic, n in sent.items():
        assert consume_and_commit(b.bootstrap, topic, group, n) == n

    status, ctype, text = scrape(metrics_port)
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    s = samples(text)
    for topic, n in sent.items():
        assert value(s, "kbus_messages_in_total", topic=topic) == n
        assert value(s, "kbus_messages_out_total", topic=topic) == n
        assert value(s, "kbus_bytes_in_total", topic=topic) > n * 2
        assert value(s, "kbus_bytes_out_total", topic=topic) == value(s, "kbus_bytes_in_total", topic=topic)
        assert value(s, "kbus_partition_high_watermark", topic=topic, partition="0") == n
        assert value(s, "kbus_consumer_group_lag", group=group, topic=topic, partition="0") == 0
    # requests and their latency, per API
    produces = value(s, "kbus_requests_total", api="Produce")
    assert produces and produces >= 2
    assert value(s, "kbus_request_latency_seconds_count", api="Produce") == produces
    assert value(s, "kbus_request_latency_seconds_bucket", api="Produce", le="+Inf") == produces
    assert value(s, "kbus_requests_total", api="Fetch") >= 2
    # broker-level gauges: 2 one-partition topics + the offsets topic
    hosted = 2 + int(TEST_DEFAULTS["offsets.topic.num.partitions"])
    assert value(s, "kbus_partitions") == hosted
    assert value(s, "kbus_leader_partitions") == hosted
    assert value(s, "kbus_under_replicated_partitions") == 0
    assert value(s, "kbus_active_controller") == 1
    assert value(s, "kbus_consumer_groups") == 1
    assert value(s, "kbus_isr_shrinks_total") == 0 and value(s, "kbus_isr_expands_total") == 0

    # lag follows what is produced and not consumed
    topic = f"ma-{run}"
    produce(b.bootstrap, topic, 25)
    s = samples(scrape(metrics_port)[2])
    assert value(s, "kbus_messages_in_total", topic=topic) == 1234 + 25
    assert value(s, "kbus_consumer_group_lag", group=group, topic=topic, partition="0") == 25


def test_health_endpoint_and_http_edges(broker_factory) -> None:
    metrics_port = free_port()
    broker_factory({"metrics.port": str(metrics_port)})
    status, ctype, body = scrape(metrics_port, "/health")
    assert status == 200 and ctype == "application/json"
    health = json.loads(body)
    assert health["status"] == "ok" and health["broker_id"] == 0 and health["under_replicated_partitions"] == []
    assert scrape(metrics_port, "/nope")[0] == 404
    req = urllib.request.Request(f"http://127.0.0.1:{metrics_port}/metrics", method="POST", data=b"x")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 405


def test_metrics_port_in_use_is_one_clear_error(broker_factory, tmp_path) -> None:
    import socket

    from tests.kbus_processes import BrokerProcess

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        b = BrokerProcess(tmp_path, {"metrics.port": str(busy.getsockname()[1])})
        with pytest.raises(RuntimeError, match="broker failed to start"):
            b.start(timeout=20)
        assert "ERROR cannot listen on metrics.port" in b.log_text()
        assert "Traceback" not in b.log_text()


def test_a_deleted_topics_series_go_with_it(broker_factory) -> None:
    """Issue 28 (memory under hostile traffic): per-topic series outlived their topic, so topics created and
    deleted over a long run (garbage names auto-created, then deleted) grew the metrics for ever. Kafka removes a
    deleted topic's metrics (BrokerTopicStats.removeMetrics); so does kbus."""
    from confluent_kafka.admin import AdminClient

    metrics_port = free_port()
    b = broker_factory({"metrics.port": str(metrics_port)})
    topics = [f"gone-{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
    for topic in topics:
        produce(b.bootstrap, topic, 5)
    s = samples(scrape(metrics_port)[2])
    assert all(value(s, "kbus_messages_in_total", topic=t) == 5 for t in topics)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for fut in admin.delete_topics(topics[:2]).values():
        fut.result(30)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        text = scrape(metrics_port)[2]
        if not any(f'topic="{t}"' in text for t in topics[:2]):
            break
        time.sleep(0.2)
    assert not any(f'topic="{t}"' in text for t in topics[:2]), "a deleted topic's series are still exported"
    assert value(samples(text), "kbus_messages_in_total", topic=topics[2]) == 5


def test_group_counts_per_protocol_and_state(broker_factory) -> None:
    """Kafka's group-coordinator-metrics on a real broker: a classic group and a consumer-protocol (KIP-848) group,
    the latter Stable while its member polls and Empty once it has left."""
    from confluent_kafka import Consumer

    from tests.group_member import wait_until

    metrics_port = free_port()
    b = broker_factory({"metrics.port": str(metrics_port), "group.consumer.heartbeat.interval.ms": "500"})
    run = uuid.uuid4().hex[:6]
    topic = f"gc-{run}"
    produce(b.bootstrap, topic, 10)
    assert consume_and_commit(b.bootstrap, topic, f"classic-{run}", 10) == 10

    def counts() -> dict[str, float | None]:
        s = samples(scrape(metrics_port)[2])
        found: dict[str, float | None] = {p: value(s, "kbus_group_count", protocol=p)
                                          for p in ("classic", "consumer", "share")}
        for state in ("empty", "assigning", "reconciling", "stable", "dead"):
            found[state] = value(s, "kbus_consumer_group_count", state=state)
        return found

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"kip848-{run}", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        stable = {"classic": 1, "consumer": 1, "share": 0, "empty": 0, "assigning": 0, "reconciling": 0,
                  "stable": 1, "dead": 0}

        def polled_until_stable() -> bool:
            c.poll(0.2)
            return counts() == stable

        wait_until(polled_until_stable, 30, f"the consumer group to be counted Stable: {counts()}")
    finally:
        c.close()
    wait_until(lambda: counts()["empty"] == 1 and counts()["stable"] == 0 and counts()["consumer"] == 1, 15,
               "the left group to be counted Empty")

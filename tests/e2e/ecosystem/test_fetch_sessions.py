"""KIP-227 fetch sessions with the client that uses them: Kafka's Java consumer (kafka-consumer-perf-test) reads
a 30-partition topic, part of it written while it reads, through incremental fetches; every message arrives.
The same run with sessions turned off (max.incremental.fetch.session.cache.slots=0) reads sessionless."""

from __future__ import annotations

import subprocess

import pytest

from tests.e2e.ecosystem.kafka_jars import KafkaDistribution
from tests.integration.test_metrics_endpoint import samples, scrape, value
from tests.kbus_processes import free_port

pytestmark = pytest.mark.integration


def produce(kafka39: KafkaDistribution, bootstrap: str, topic: str, n: int, rate: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        kafka39.command("kafka-producer-perf-test", "--topic", topic, "--num-records", str(n), "--record-size",
                        "100", "--throughput", str(rate), "--producer-props", f"bootstrap.servers={bootstrap}",
                        "acks=all", "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


@pytest.mark.parametrize("slots", [1000, 0])
def test_java_consumer_reads_everything_through_fetch_sessions(
    kafka39: KafkaDistribution, broker_factory, tmp_path, slots: int
) -> None:
    metrics_port = free_port()
    broker = broker_factory({"metrics.port": str(metrics_port), "num.partitions": "30",
                             "max.incremental.fetch.session.cache.slots": str(slots)})  # fmt: skip
    topic = f"sessions-{slots}"
    first = produce(kafka39, broker.bootstrap, topic, 6000, -1)
    assert first.wait(120) == 0, first.stderr
    live = produce(kafka39, broker.bootstrap, topic, 6000, 1500)  # written while the consumer reads
    # Small fetches, so that the consumer needs many of them whatever the timing: on a loaded machine its JVM may
    # start after the live producer is done, and 12,000 waiting messages then fit in one full fetch and one
    # incremental one (a whole-suite run on workers saw 1 incremental fetch).
    config = tmp_path / "consumer.properties"
    config.write_text("fetch.max.bytes=4096\nmax.partition.fetch.bytes=2048\n")
    consumed = kafka39.run("kafka-consumer-perf-test", "--bootstrap-server", broker.bootstrap, "--topic", topic,
                           "--messages", "12000", "--timeout", "60000", "--consumer.config", str(config),
                           timeout=180)  # fmt: skip
    assert live.wait(120) == 0, live.stderr
    assert consumed.returncode == 0, consumed.stderr
    row = consumed.stdout.strip().splitlines()[-1].split(", ")
    assert int(row[4]) == 12000, consumed.stdout  # data.consumed.in.nMsg: every message, none twice
    s = samples(scrape(metrics_port)[2])
    assert value(s, "kbus_messages_out_total", topic=topic) >= 12000
    incremental = value(s, "kbus_incremental_fetches_total") or 0
    if slots:
        assert incremental >= 3, "the Java consumer should have fetched incrementally"
    else:
        assert incremental == 0

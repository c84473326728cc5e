"""kbus's CLI against Kafka's own tools for the same command on the same broker: the outputs whose format Kafka
defines must be the same bytes. The differences kept on purpose (and listed in the README) are asserted exactly,
so any new one fails here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.e2e.ecosystem.kafka_jars import KafkaDistribution, kbus
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration

ELR_39 = "\tElr: N/A\tLastKnownElr: N/A"  # Kafka 3.9's KRaft-era columns, printed N/A for every non-KRaft broker


def both(kafka: KafkaDistribution, script: str, args: tuple[str, ...]) -> tuple[subprocess.CompletedProcess[str], ...]:
    return kafka.run(script, *args), kbus(script.removeprefix("kafka-"), *args)


@pytest.fixture(scope="module")
def setup(broker: BrokerProcess) -> BrokerProcess:
    """Two topics with records and a consumer group with committed offsets on the shared broker."""
    bs = ("--bootstrap-server", broker.bootstrap)
    for topic, partitions in (("cmp-a", "3"), ("cmp-b", "1")):
        r = kbus("topics", *bs, "--create", "--topic", topic, "--partitions", partitions, "--config",
                 "retention.ms=3600000")  # fmt: skip
        assert r.returncode == 0, r.stderr
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        p.produce("cmp-a", key=f"k{i}", value=f"v{i}")
    p.produce("cmp-b", value="only")
    p.flush(30)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cmp-g", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})  # fmt: skip
    c.subscribe(["cmp-a"])
    got = 0
    while got < 20:
        got += sum(1 for m in c.consume(10, 1.0) if m.error() is None)
    c.commit(asynchronous=False)
    c.close()
    return broker


def test_topics_list_and_describe(kafka39: KafkaDistribution, kafka28: KafkaDistribution, setup: BrokerProcess) -> None:
    bs = ("--bootstrap-server", setup.bootstrap)
    k, b = both(kafka39, "kafka-topics", (*bs, "--list"))
    assert k.returncode == b.returncode == 0
    assert k.stdout == b.stdout
    for topic in ("cmp-a", "cmp-b"):
        args = (*bs, "--describe", "--topic", topic)
        k28, b = both(kafka28, "kafka-topics", args)
        assert k28.stdout == b.stdout  # Kafka 2.8's format, byte for byte
        k39 = kafka39.run("kafka-topics", *args)
        assert k39.stdout.replace(ELR_39, "") == b.stdout  # 3.9 only adds its ELR columns


def test_topics_error_lines(kafka39: KafkaDistribution, kafka28: KafkaDistribution, setup: BrokerProcess) -> None:
    bs = ("--bootstrap-server", setup.bootstrap)
    for args in (
        (*bs, "--create", "--topic", "cmp-a", "--partitions", "1"),
        (*bs, "--describe", "--topic", "cmp-missing"),
        (*bs, "--alter", "--topic", "cmp-a", "--partitions", "2"),
    ):
        k, b = both(kafka28, "kafka-topics", args)
        assert k.returncode == b.returncode == 1, args
        # the same line; Kafka prints it on stdout (and a log line on stderr), kbus on stderr
        assert k.stdout.strip().startswith("Error while executing topic command : ")
        assert k.stdout.strip() == b.stderr.strip(), args
        assert b.stdout == ""


def test_consumer_groups(kafka39: KafkaDistribution, kafka28: KafkaDistribution, setup: BrokerProcess) -> None:
    bs = ("--bootstrap-server", setup.bootstrap)
    k, b = both(kafka39, "kafka-consumer-groups", (*bs, "--list"))
    assert sorted(k.stdout.split()) == sorted(b.stdout.split()) and "cmp-g" in b.stdout.split()
    for kafka in (kafka28, kafka39):
        k, b = both(kafka, "kafka-consumer-groups", (*bs, "--describe", "--group", "cmp-g"))
        assert k.returncode == b.returncode == 0
        kl, bl = k.stdout.rstrip("\n").split("\n"), b.stdout.rstrip("\n").split("\n")
        # same blank line and header with the same column widths; Kafka prints the rows in hash order, kbus by
        # partition; Kafka 3.9 leaves the last line without its newline
        assert kl[:2] == bl[:2] == ["", bl[1]] and bl[1].startswith("GROUP           TOPIC           PARTITION  ")
        assert sorted(kl[2:]) == bl[2:] and len(bl) >= 3
    assert "Consumer group 'cmp-g' has no active members." in k.stderr


def test_configs(kafka39: KafkaDistribution, setup: BrokerProcess) -> None:
    bs = ("--bootstrap-server", setup.bootstrap)
    for args in (
        ("--entity-type", "topics", "--entity-name", "cmp-a", "--describe"),
        ("--entity-type", "topics", "--entity-name", "cmp-a", "--describe", "--all"),
        ("--entity-type", "brokers", "--entity-name", "0", "--describe"),
        ("--entity-type", "brokers", "--entity-name", "0", "--describe", "--all"),
    ):
        k, b = both(kafka39, "kafka-configs", (*bs, *args))
        assert k.returncode == b.returncode == 0, (args, k.stderr, b.stderr)
        assert k.stdout == b.stdout, args
    k, b = both(kafka39, "kafka-configs", (*bs, "--entity-type", "topics", "--entity-name", "cmp-b", "--alter",
                                           "--add-config", "retention.ms=1800000"))  # fmt: skip
    assert k.stdout == b.stdout == "Completed updating config for topic cmp-b.\n"
    # an invalid value: Kafka prints the args and the Java exception chain over three lines, kbus one line
    k, b = both(kafka39, "kafka-configs", (*bs, "--entity-type", "topics", "--entity-name", "cmp-b", "--alter",
                                           "--add-config", "retention.ms=soon"))  # fmt: skip
    assert k.returncode == b.returncode == 1
    assert b.stderr.startswith("Error while executing config command with args: ") and len(b.stderr.splitlines()) == 1
    assert b.stderr.split("args: ", 1)[1].strip() in k.stderr


def test_get_offsets_and_delete_records(kafka39: KafkaDistribution, setup: BrokerProcess, tmp_path: Path) -> None:
    bs = ("--bootstrap-server", setup.bootstrap)
    for args in ((*bs, "--topic", "cmp-a"), (*bs, "--topic", "cmp-a", "--time", "-2"), (*bs, "--topic", "cmp-.*")):
        k, b = both(kafka39, "kafka-get-offsets", args)
        assert k.returncode == b.returncode == 0
        assert k.stdout == b.stdout, args
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "cmp-b", "partition": 0, "offset": 1}], "version": 1}))
    k = kafka39.run("kafka-delete-records", *bs, "--offset-json-file", str(spec))
    b = kbus("delete-records", *bs, "--offset-json-file", str(spec))  # the same request again: the same answer
    assert k.returncode == b.returncode == 0
    done = "Executing records delete operation\nRecords delete operation completed:\n"
    assert k.stdout == b.stdout == done + "partition: cmp-b-0\tlow_watermark: 1\n"


def test_consumer_groups_members_state_and_reset(kafka28: KafkaDistribution, setup: BrokerProcess) -> None:
    """An active member's --members/--state views and a --reset-offsets plan: Kafka 2.8's bytes (rows sorted;
    Kafka 3.9 prints the reset plan without newlines between rows and `host:port  (id)` with two spaces)."""
    bs = ("--bootstrap-server", setup.bootstrap)
    member = Consumer({"bootstrap.servers": setup.bootstrap, "group.id": "cmp-live", "auto.offset.reset": "earliest",
                       "client.id": "cmp-client"})  # fmt: skip
    member.subscribe(["cmp-a"])
    try:
        got = 0
        while got < 30:
            got += sum(1 for m in member.consume(10, 1.0) if m.error() is None)
        member.commit(asynchronous=False)
        for extra in (("--members",), ("--members", "--verbose"), ("--state",), ()):
            k, b = both(kafka28, "kafka-consumer-groups", (*bs, "--describe", "--group", "cmp-live", *extra))
            assert k.returncode == b.returncode == 0, extra
            assert sorted(k.stdout.split("\n")) == sorted(b.stdout.split("\n")), extra
            assert "cmp-live" in b.stdout
    finally:
        member.close()
    for mode in ("--dry-run", "--execute"):
        args = (*bs, "--group", "cmp-live", "--topic", "cmp-a", "--reset-offsets", "--to-earliest", mode)
        k, b = both(kafka28, "kafka-consumer-groups", args)
        assert k.returncode == b.returncode == 0, mode
        assert sorted(k.stdout.split("\n")) == sorted(b.stdout.split("\n")), mode
        assert b.stdout.count("cmp-live ") == 3

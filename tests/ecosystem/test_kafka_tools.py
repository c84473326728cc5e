"""Apache Kafka 3.9's own tools (the main classes behind bin/kafka-*.sh, from Maven) against a real kbus broker."""

from __future__ import annotations

import pytest

from tests.ecosystem.kafka_jars import KafkaDistribution
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration


def ok(result) -> str:
    assert result.returncode == 0, f"rc={result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def test_topics_create_list_describe_delete(kafka39: KafkaDistribution, broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    out = ok(
        kafka39.run(
            "kafka-topics",
            *bs,
            "--create",
            "--topic",
            "kt-topics",
            "--partitions",
            "3",
            "--replication-factor",
            "1",
            "--config",
            "retention.ms=3600000",
        )
    )
    assert out.strip() == "Created topic kt-topics."
    assert "kt-topics" in ok(kafka39.run("kafka-topics", *bs, "--list")).split()
    lines = ok(kafka39.run("kafka-topics", *bs, "--describe", "--topic", "kt-topics")).splitlines()
    assert lines[0].startswith("Topic: kt-topics\tTopicId: ")
    assert "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=3600000" in lines[0]
    assert [ln.split("\t")[2] for ln in lines[1:]] == [f"Partition: {p}" for p in range(3)]
    assert all("\tLeader: 0\tReplicas: 0\tIsr: 0" in ln for ln in lines[1:])
    ok(kafka39.run("kafka-topics", *bs, "--alter", "--topic", "kt-topics", "--partitions", "5"))
    assert ok(kafka39.run("kafka-topics", *bs, "--describe", "--topic", "kt-topics")).count("Partition: ") == 5
    dup = kafka39.run("kafka-topics", *bs, "--create", "--topic", "kt-topics", "--partitions", "1")
    assert dup.returncode != 0 and "Topic 'kt-topics' already exists." in dup.stdout + dup.stderr
    ok(kafka39.run("kafka-topics", *bs, "--delete", "--topic", "kt-topics"))
    assert "kt-topics" not in ok(kafka39.run("kafka-topics", *bs, "--list")).split()


def test_console_producer_consumer_groups_offsets(kafka39: KafkaDistribution, broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    ok(kafka39.run("kafka-topics", *bs, "--create", "--topic", "kt-console", "--partitions", "2"))
    lines = [f"k{i}:value {i}" for i in range(20)]
    ok(
        kafka39.run(
            "kafka-console-producer",
            *bs,
            "--topic",
            "kt-console",
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
            "--producer-property",
            "acks=all",
            input="\n".join(lines) + "\n",
        )
    )
    out = ok(
        kafka39.run(
            "kafka-console-consumer",
            *bs,
            "--topic",
            "kt-console",
            "--from-beginning",
            "--max-messages",
            "20",
            "--group",
            "kt-g1",
            "--property",
            "print.key=true",
            "--property",
            "key.separator=:",
        )
    )
    assert sorted(out.splitlines()) == sorted(lines)
    offsets = ok(kafka39.run("kafka-get-offsets", *bs, "--topic", "kt-console")).split()
    assert sorted(offsets)[0].startswith("kt-console:0:")
    assert sum(int(o.rsplit(":", 1)[1]) for o in offsets) == 20
    described = ok(kafka39.run("kafka-consumer-groups", *bs, "--describe", "--group", "kt-g1")).splitlines()
    header = next(ln for ln in described if ln.startswith("GROUP")).split()
    assert header == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    rows = [ln.split() for ln in described if ln.startswith("kt-g1 ")]
    assert sorted(r[2] for r in rows) == ["0", "1"]
    assert all(r[3] == r[4] and r[5] == "0" for r in rows)
    assert "kt-g1" in ok(kafka39.run("kafka-consumer-groups", *bs, "--list")).split()

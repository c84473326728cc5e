"""Apache Kafka 3.9's own tools (the main classes behind bin/kafka-*.sh, from Maven) against a real kbus broker."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.e2e.ecosystem.kafka_jars import KafkaDistribution, kbus
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


def test_configs_delete_records_perf_tests(kafka39: KafkaDistribution, broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    topic = ("--entity-type", "topics", "--entity-name", "kt-perf")
    ok(kafka39.run("kafka-topics", *bs, "--create", "--topic", "kt-perf", "--partitions", "2"))
    out = ok(
        kafka39.run("kafka-configs", *bs, *topic, "--alter", "--add-config", "retention.ms=7200000,segment.ms=600000")
    )
    assert out.strip() == "Completed updating config for topic kt-perf."
    described = ok(kafka39.run("kafka-configs", *bs, *topic, "--describe")).splitlines()
    assert described[0] == "Dynamic configs for topic kt-perf are:"
    # (Kafka drops a synonym list that does not start with log.retention.ms: the hours default goes too)
    assert "  retention.ms=7200000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=7200000}" \
           in described  # fmt: skip
    ok(kafka39.run("kafka-configs", *bs, *topic, "--alter", "--delete-config", "segment.ms"))
    assert not any(
        "segment.ms" in ln for ln in ok(kafka39.run("kafka-configs", *bs, *topic, "--describe")).splitlines()
    )
    bad = kafka39.run("kafka-configs", *bs, *topic, "--alter", "--add-config", "retention.ms=soon")
    assert bad.returncode != 0 and "InvalidConfigurationException" in bad.stdout + bad.stderr

    perf = ok(kafka39.run("kafka-producer-perf-test", "--topic", "kt-perf", "--num-records", "50000", "--record-size",
                          "100", "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}",
                          "acks=all", "compression.type=lz4"))  # fmt: skip
    assert perf.splitlines()[-1].startswith("50000 records sent, ")
    consumed = ok(kafka39.run("kafka-consumer-perf-test", *bs, "--topic", "kt-perf", "--messages", "50000",
                              "--timeout", "30000"))  # fmt: skip
    row = consumed.strip().splitlines()[-1].split(", ")
    assert int(row[5 - 1]) >= 50000, consumed  # data.consumed.in.nMsg
    offsets = dict(
        line.rsplit(":", 1) for line in ok(kafka39.run("kafka-get-offsets", *bs, "--topic", "kt-perf")).split()
    )
    assert sum(int(v) for v in offsets.values()) == 50000

    spec = tmp_json('{"partitions":[{"topic":"kt-perf","partition":0,"offset":10}],"version":1}')
    out = ok(kafka39.run("kafka-delete-records", *bs, "--offset-json-file", str(spec)))
    assert out.splitlines() == ["Executing records delete operation", "Records delete operation completed:",
                                "partition: kt-perf-0\tlow_watermark: 10"]  # fmt: skip
    earliest = ok(kafka39.run("kafka-get-offsets", *bs, "--topic", "kt-perf", "--partitions", "0", "--time", "-2"))
    assert earliest.strip() == "kt-perf:0:10"


def tmp_json(text: str) -> Path:
    f = Path(tempfile.mkstemp(suffix=".json")[1])
    f.write_text(text)
    return f


def test_dump_log_reads_kbus_segments(kafka39: KafkaDistribution, broker_factory) -> None:
    """kafka-dump-log on the segment, offset index and time index files kbus wrote, with compressed batches;
    `kbus dump-log` prints the same bytes."""
    b: BrokerProcess = broker_factory({"log.index.interval.bytes": "1024"})
    bs = ("--bootstrap-server", b.bootstrap)
    ok(kafka39.run("kafka-topics", *bs, "--create", "--topic", "kt-dump", "--partitions", "1"))
    for codec in ("none", "gzip", "zstd"):
        ok(kafka39.run("kafka-producer-perf-test", "--topic", "kt-dump", "--num-records", "2000", "--record-size",
                       "50", "--throughput", "-1", "--producer-props", f"bootstrap.servers={b.bootstrap}",
                       f"compression.type={codec}", "batch.size=4096"))  # fmt: skip
    b.stop()  # a clean shutdown: the index files are trimmed to their entries, as Kafka leaves them
    seg = b.log_dirs / "kt-dump-0" / "00000000000000000000"
    files = [f"{seg}.log", f"{seg}.index", f"{seg}.timeindex"]
    for f, extra in ((files[0], "--print-data-log"), (files[0], "--deep-iteration"), (files[1], ""), (files[2], "")):
        args = ("--files", f, *([extra] if extra else []))
        kafka_out = ok(kafka39.run("kafka-dump-log", *args))
        assert kafka_out == ok(kbus("dump-log", *args)), args
        if extra == "--print-data-log":
            log_out = kafka_out
    assert "compresscodec: gzip" in log_out and "compresscodec: zstd" in log_out
    assert "isvalid: false" not in log_out
    assert log_out.count("| offset: ") == 6000
    verify = kafka39.run("kafka-dump-log", "--files", f"{files[1]},{files[2]}", "--verify-index-only")
    assert verify.returncode == 0 and "Mismatches" not in verify.stdout + verify.stderr, verify.stdout

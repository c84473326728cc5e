from __future__ import annotations

import pytest

from kbus.server.log.config import TOPIC_CONFIG_NAMES, LogConfig


def test_kafka_defaults() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.retention_ms == 604800000
    assert c.retention_bytes == -1
    assert c.index_interval_bytes == 4096
    assert c.segment_index_bytes == 10485760
    assert c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime"
    assert c.cleanup_policy == "delete"
    assert c.file_delete_delay_ms == 60000
    assert c.flush_messages == 2**63 - 1 and c.flush_ms == 2**63 - 1


def test_from_properties_uses_topic_level_names() -> None:
    c = LogConfig.from_properties({
        "segment.bytes": "1024", "retention.ms": "-1", "retention.bytes": "4096", "segment.ms": "60000",
        "message.timestamp.type": "LogAppendTime", "cleanup.policy": "compact,delete", "max.message.bytes": "2000",
        "index.interval.bytes": "10", "flush.messages": "1", "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true", "compression.type": "ZSTD",
    })
    assert (c.segment_bytes, c.retention_ms, c.retention_bytes, c.segment_ms) == (1024, -1, 4096, 60000)
    assert c.log_append_time and c.delete_enabled and c.compact_enabled
    assert c.max_message_bytes == 2000 and c.index_interval_bytes == 10 and c.flush_messages == 1
    assert c.min_insync_replicas == 2 and c.unclean_leader_election_enable and c.compression_type == "zstd"


def test_with_overrides_keeps_base() -> None:
    base = LogConfig.from_properties({"segment.bytes": "1024"})
    c = base.with_overrides({"retention.ms": "5"})
    assert (c.segment_bytes, c.retention_ms) == (1024, 5)
    assert base.retention_ms == 604800000


@pytest.mark.parametrize(("key", "value"), [
    ("segment.bytes", "abc"), ("segment.bytes", "10"), ("segment.ms", "0"), ("retention.ms", "-2"),
    ("message.timestamp.type", "WallClock"), ("cleanup.policy", "shred"), ("unclean.leader.election.enable", "yes"),
    ("min.cleanable.dirty.ratio", "1.5"), ("compression.type", "brotli"), ("no.such.config", "1"),
])
def test_bad_values_raise_value_error_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        LogConfig.from_properties({key: value})


def test_from_server_properties_maps_broker_keys() -> None:
    c = LogConfig.from_server_properties({
        "log.segment.bytes": "2048", "log.retention.hours": "1", "log.retention.bytes": "99",
        "message.max.bytes": "5000", "log.index.interval.bytes": "128", "log.roll.hours": "2",
        "log.message.timestamp.type": "LogAppendTime", "broker.id": "0", "listeners": "PLAINTEXT://:9092",
    })
    assert c.segment_bytes == 2048 and c.retention_ms == 3_600_000 and c.retention_bytes == 99
    assert c.max_message_bytes == 5000 and c.index_interval_bytes == 128 and c.segment_ms == 7_200_000
    assert c.log_append_time
    # the finest unit wins, as in Kafka
    c2 = LogConfig.from_server_properties({"log.retention.hours": "1", "log.retention.ms": "10"})
    assert c2.retention_ms == 10
    assert LogConfig.from_server_properties({"log.retention.hours": "-1"}).retention_ms == -1


def test_to_properties_round_trip_and_diff() -> None:
    c = LogConfig.from_properties({"retention.ms": "123", "cleanup.policy": "compact"})
    props = c.to_properties()
    assert set(props) == set(TOPIC_CONFIG_NAMES)
    assert props["retention.ms"] == "123" and props["preallocate"] == "false"
    assert LogConfig.from_properties(props) == c
    assert c.diff(LogConfig()) == {"retention.ms": "123", "cleanup.policy": "compact"}

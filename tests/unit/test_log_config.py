from __future__ import annotations

import pytest

from kbus.common.broker_config import ConfigError, KafkaConfig
from kbus.common.errors import InvalidConfigError
from kbus.common.topic_config import TOPIC_CONFIG_NAMES, LogConfig, validate_topic_configs


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
def test_bad_values_raise_invalid_config_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        LogConfig.from_properties({key: value})
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        validate_topic_configs({key: value})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
        ("segment.bytes", "abc", "Invalid value abc for configuration segment.bytes: Not a number of type INT"),
        ("segment.bytes", str(2**31), "Not a number of type INT"),
        ("retention.ms", "x", "Not a number of type LONG"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("message.timestamp.type", "x", "String must be one of: CreateTime, LogAppendTime"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1.0"),
        ("no.such.config", "1", "Unknown topic config name: no.such.config"),
    ],
)
def test_kafkas_messages(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message.replace(".", r"\.")):
        validate_topic_configs({key: value})


def test_deletions_only_need_a_known_name() -> None:
    validate_topic_configs({"retention.ms": None})
    with pytest.raises(InvalidConfigError, match="Unknown topic config name"):
        validate_topic_configs({"retention.msx": None})


def broker_log_defaults(props: dict[str, str]) -> LogConfig:
    return KafkaConfig.from_properties(props).log_defaults


def test_broker_log_keys_are_the_topic_defaults() -> None:
    c = broker_log_defaults({
        "log.segment.bytes": "2048", "log.retention.hours": "1", "log.retention.bytes": "99",
        "message.max.bytes": "5000", "log.index.interval.bytes": "128", "log.roll.hours": "2",
        "log.message.timestamp.type": "LogAppendTime", "broker.id": "0", "listeners": "PLAINTEXT://:9092",
        "log.cleaner.min.cleanable.ratio": "0.25", "log.preallocate": "true", "min.insync.replicas": "2",
    })
    assert c.segment_bytes == 2048 and c.retention_ms == 3_600_000 and c.retention_bytes == 99
    assert c.max_message_bytes == 5000 and c.index_interval_bytes == 128 and c.segment_ms == 7_200_000
    assert c.log_append_time and c.min_cleanable_dirty_ratio == 0.25 and c.preallocate
    assert c.min_insync_replicas == 2
    # the finest unit wins, as in Kafka
    assert broker_log_defaults({"log.retention.hours": "1", "log.retention.ms": "10"}).retention_ms == 10
    assert broker_log_defaults({"log.retention.hours": "1", "log.retention.minutes": "2"}).retention_ms == 120_000
    assert broker_log_defaults({"log.retention.hours": "-1"}).retention_ms == -1
    assert broker_log_defaults({}) == LogConfig()


@pytest.mark.parametrize(
    ("key", "value"),
    [("log.segment.bytes", "10"), ("min.insync.replicas", "0"), ("log.retention.hours", "-2"),
     ("log.cleanup.policy", "shred"), ("log.message.timestamp.type", "Other")],
)
def test_broker_log_keys_have_the_topic_limits(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"configuration {key}:"):
        KafkaConfig.from_properties({key: value})


def test_to_properties_round_trip_and_diff() -> None:
    c = LogConfig.from_properties({"retention.ms": "123", "cleanup.policy": "compact"})
    props = c.to_properties()
    assert set(props) == set(TOPIC_CONFIG_NAMES)
    assert props["retention.ms"] == "123" and props["preallocate"] == "false"
    assert LogConfig.from_properties(props) == c
    assert c.diff(LogConfig()) == {"retention.ms": "123", "cleanup.policy": "compact"}

"""Per-log configuration under Kafka's topic-level names (TopicConfig) and defaults (Kafka 3.x)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CLEANUP_POLICIES = ("compact", "delete")


def _parse_int(lo: int, hi: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(str(raw).strip())
        if not lo <= value <= hi:
            raise ValueError(f"{value} is out of range [{lo}, {hi}]")
        return value

    return parse


def _parse_float(lo: float, hi: float) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        value = float(str(raw).strip())
        if not lo <= value <= hi:
            raise ValueError(f"{value} is out of range [{lo}, {hi}]")
        return value

    return parse


def _parse_bool(raw: str) -> bool:
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{raw!r} is not a boolean (true/false)")
    return text == "true"


def _parse_choice(choices: tuple[str, ...], *, case_insensitive: bool = False) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        text = str(raw).strip()
        for choice in choices:
            if text == choice or (case_insensitive and text.lower() == choice.lower()):
                return choice
        raise ValueError(f"{raw!r} is not one of {', '.join(choices)}")

    return parse


def _parse_cleanup_policy(raw: str) -> str:
    parts = [p.strip().lower() for p in str(raw).strip().strip("[]").split(",") if p.strip()]
    if not parts or any(p not in CLEANUP_POLICIES for p in parts):
        raise ValueError(f"{raw!r} is not a list of {', '.join(CLEANUP_POLICIES)}")
    return ",".join(dict.fromkeys(parts))


def _parse_str(raw: str) -> str:
    return str(raw).strip()


# topic-level key -> (field name, parser). Every TopicConfig name is known so CreateTopics/AlterConfigs can
# accept and echo them, even the ones whose behaviour kbus does not implement (compaction, tiered storage).
_SPECS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "segment.bytes": ("segment_bytes", _parse_int(14, INT_MAX)),
    "segment.ms": ("segment_ms", _parse_int(1, LONG_MAX)),
    "segment.jitter.ms": ("segment_jitter_ms", _parse_int(0, LONG_MAX)),
    "segment.index.bytes": ("segment_index_bytes", _parse_int(4, INT_MAX)),
    "retention.ms": ("retention_ms", _parse_int(-1, LONG_MAX)),
    "retention.bytes": ("retention_bytes", _parse_int(-(2**63), LONG_MAX)),
    "index.interval.bytes": ("index_interval_bytes", _parse_int(0, INT_MAX)),
    "max.message.bytes": ("max_message_bytes", _parse_int(0, INT_MAX)),
    "message.timestamp.type": ("message_timestamp_type", _parse_choice(TIMESTAMP_TYPES)),
    "message.timestamp.difference.max.ms": ("message_timestamp_difference_max_ms", _parse_int(0, LONG_MAX)),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", _parse_int(0, LONG_MAX)),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", _parse_int(0, LONG_MAX)),
    "cleanup.policy": ("cleanup_policy", _parse_cleanup_policy),
    "file.delete.delay.ms": ("file_delete_delay_ms", _parse_int(0, LONG_MAX)),
    "flush.messages": ("flush_messages", _parse_int(1, LONG_MAX)),
    "flush.ms": ("flush_ms", _parse_int(0, LONG_MAX)),
    "compression.type": ("compression_type", _parse_choice(COMPRESSION_TYPES, case_insensitive=True)),
    "min.insync.replicas": ("min_insync_replicas", _parse_int(1, INT_MAX)),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _parse_bool),
    "delete.retention.ms": ("delete_retention_ms", _parse_int(0, LONG_MAX)),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _parse_int(0, LONG_MAX)),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _parse_int(1, LONG_MAX)),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _parse_float(0.0, 1.0)),
    "preallocate": ("preallocate", _parse_bool),
    "message.downconversion.enable": ("message_downconversion_enable", _parse_bool),
    "message.format.version": ("message_format_version", _parse_str),
    "remote.storage.enable": ("remote_storage_enable", _parse_bool),
    "local.retention.ms": ("local_retention_ms", _parse_int(-2, LONG_MAX)),
    "local.retention.bytes": ("local_retention_bytes", _parse_int(-2, LONG_MAX)),
    "leader.replication.throttled.replicas": ("leader_replication_throttled_replicas", _parse_str),
    "follower.replication.throttled.replicas": ("follower_replication_throttled_replicas", _parse_str),
}

# Broker-level (server.properties) key -> topic-level key, for keys whose value carries over unchanged.
SERVER_TO_TOPIC: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.difference.max.ms": "message.timestamp.difference.max.ms",
    "log.cleanup.policy": "cleanup.policy",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "compression.type": "compression.type",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.preallocate": "preallocate",
}

# Broker keys in coarser units; the finer one wins when several are set, as in Kafka.
_SERVER_UNITS: dict[str, list[tuple[str, int]]] = {
    "retention.ms": [("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)],
    "segment.ms": [("log.roll.ms", 1), ("log.roll.hours", 3_600_000)],
    "segment.jitter.ms": [("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)],
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    retention_ms: int = 604800000
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    cleanup_policy: str = "delete"
    file_delete_delay_ms: int = 60000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    preallocate: bool = False
    message_downconversion_enable: bool = True
    message_format_version: str = "3.0-IV1"
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""

    # --- construction ---------------------------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Topic-level keys (``segment.bytes``...) over ``base`` (or Kafka's defaults).

        Unknown keys and bad values raise ValueError with a message naming the key, as Kafka's INVALID_CONFIG.
        """
        changes: dict[str, Any] = {}
        for key, raw in props.items():
            spec = _SPECS.get(key)
            if spec is None:
                raise ValueError(f"Unknown topic config name: {key}")
            name, parse = spec
            if raw is None:
                raise ValueError(f"Invalid value None for configuration {key}")
            try:
                changes[name] = parse(raw)
            except ValueError as e:
                raise ValueError(f"Invalid value {raw} for configuration {key}: {e}") from None
        return dataclasses.replace(base or cls(), **changes)

    def with_overrides(self, props: Mapping[str, Any]) -> LogConfig:
        return LogConfig.from_properties(props, base=self)

    @classmethod
    def from_server_properties(cls, props: Mapping[str, Any]) -> LogConfig:
        """Broker defaults from server.properties keys (log.segment.bytes, log.retention.hours, ...)."""
        topic: dict[str, Any] = {}
        for server_key, topic_key in SERVER_TO_TOPIC.items():
            if server_key in props and props[server_key] is not None and str(props[server_key]).strip():
                topic[topic_key] = props[server_key]
        for topic_key, candidates in _SERVER_UNITS.items():
            for server_key, factor in candidates:
                raw = props.get(server_key)
                if raw is None or not str(raw).strip():
                    continue
                try:
                    value = int(str(raw).strip())
                except ValueError:
                    raise ValueError(f"Invalid value {raw} for configuration {server_key}") from None
                topic[topic_key] = value if value < 0 else value * factor
                break
        return cls.from_properties(topic)

    # --- views ----------------------------------------------------------------------------------------

    def to_properties(self) -> dict[str, str]:
        """Kafka's topic-level names and string values (DescribeConfigs)."""
        out: dict[str, str] = {}
        for key, (name, _parse) in _SPECS.items():
            value = getattr(self, name)
            out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out

    def diff(self, other: LogConfig) -> dict[str, str]:
        """Topic-level keys whose value in self differs from other (the topic's overrides)."""
        mine, theirs = self.to_properties(), other.to_properties()
        return {k: v for k, v in mine.items() if theirs.get(k) != v}

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def max_index_entries(self) -> int:
        return max(1, self.segment_index_bytes // 8)

    @property
    def max_time_index_entries(self) -> int:
        return max(1, self.segment_index_bytes // 12)


TOPIC_CONFIG_NAMES: tuple[str, ...] = tuple(_SPECS)

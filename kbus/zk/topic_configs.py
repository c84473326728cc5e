"""Topic-level config names Kafka accepts (org.apache.kafka.common.config.TopicConfig, 3.7)."""

from __future__ import annotations

from collections.abc import Mapping

from kbus.server.metadata.errors import InvalidConfigError

TOPIC_CONFIG_NAMES = frozenset(
    {
        "segment.bytes", "segment.ms", "segment.jitter.ms", "segment.index.bytes",
        "flush.messages", "flush.ms",
        "retention.bytes", "retention.ms",
        "remote.storage.enable", "local.retention.ms", "local.retention.bytes",
        "max.message.bytes", "index.interval.bytes", "file.delete.delay.ms", "delete.retention.ms",
        "min.compaction.lag.ms", "max.compaction.lag.ms", "min.cleanable.dirty.ratio", "cleanup.policy",
        "unclean.leader.election.enable", "min.insync.replicas", "compression.type", "preallocate",
        "message.format.version", "message.timestamp.type", "message.timestamp.difference.max.ms",
        "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
        "message.downconversion.enable", "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
    }
)  # fmt: skip

_INTEGER = frozenset(
    {
        "segment.bytes", "segment.ms", "segment.jitter.ms", "segment.index.bytes", "flush.messages", "flush.ms",
        "retention.bytes", "retention.ms", "local.retention.ms", "local.retention.bytes", "max.message.bytes",
        "index.interval.bytes", "file.delete.delay.ms", "delete.retention.ms", "min.compaction.lag.ms",
        "max.compaction.lag.ms", "min.insync.replicas", "message.timestamp.difference.max.ms",
        "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
    }
)  # fmt: skip
_BOOLEAN = frozenset(
    {"unclean.leader.election.enable", "preallocate", "remote.storage.enable", "message.downconversion.enable"}
)
_CHOICES = {
    "cleanup.policy": {"delete", "compact"},
    "compression.type": {"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"},
    "message.timestamp.type": {"CreateTime", "LogAppendTime"},
}


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    for name, value in configs.items():
        if name not in TOPIC_CONFIG_NAMES:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        if value is None:
            continue
        if name in _INTEGER:
            try:
                int(value)
            except ValueError:
                raise InvalidConfigError(
                    f"Invalid value {value} for configuration {name}: Not a number of type LONG"
                ) from None
        elif name in _BOOLEAN and value.lower() not in ("true", "false"):
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {name}: Expected value to be either true or false"
            )
        elif name in _CHOICES:
            allowed = _CHOICES[name]
            parts = [v.strip() for v in value.split(",")] if name == "cleanup.policy" else [value]
            if not all(p in allowed for p in parts):
                raise InvalidConfigError(
                    f"Invalid value {value} for configuration {name}: String must be one of: "
                    + ", ".join(sorted(allowed))
                )

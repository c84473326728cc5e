"""The topic-config table: every topic-level key Kafka knows (TopicConfig), its type, limits and default, as
Kafka 3.9's LogConfig defines them. One table for every path that accepts topic configs: CreateTopics and
AlterConfigs over the wire, `kbus topics/configs --zookeeper`, the broker's log.* defaults
(kbus.common.broker_config) and the log layer, which reads the parsed values from `LogConfig`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from kbus.common.errors import InvalidConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
INT_MAX = 2**31 - 1
INT_MIN = -(2**31)

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CLEANUP_POLICIES = ("compact", "delete")

ConfigValue = int | float | bool | str
T = TypeVar("T", int, float, bool, str)
D = TypeVar("D", bound="DataclassInstance")


def with_values(table: D, values: Mapping[str, ConfigValue | None]) -> D:
    """A copy of a config table with parsed values set by attribute name (each parsed by its own key's parser,
    so its type fits the field; the type checker cannot follow that per key)."""
    return dataclasses.replace(table, **values)


# ---- parsers: raw text -> value, or ValueError with the reason Kafka's ConfigDef gives ----------------------
def parse_int(at_least: int | None = None, at_most: int | None = None, *, long: bool = False) -> Callable[[str], int]:
    kind, lo, hi = ("LONG", LONG_MIN, LONG_MAX) if long else ("INT", INT_MIN, INT_MAX)

    def parse(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(f"Not a number of type {kind}") from None
        if not lo <= value <= hi:
            raise ValueError(f"Not a number of type {kind}")
        if at_least is not None and value < at_least:
            raise ValueError(f"Value must be at least {at_least}")
        if at_most is not None and value > at_most:
            raise ValueError(f"Value must be no more than {at_most}")
        return value

    return parse


def parse_long(at_least: int | None = None) -> Callable[[str], int]:
    return parse_int(at_least, long=True)


def parse_double(at_least: float, at_most: float) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ValueError("Not a number of type DOUBLE") from None
        if value < at_least:
            raise ValueError(f"Value must be at least {at_least}")
        if value > at_most:
            raise ValueError(f"Value must be no more than {at_most}")
        return value

    return parse


def parse_bool(raw: str) -> bool:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise ValueError("Expected value to be either true or false")
    return text == "true"


def parse_choice(choices: tuple[str, ...], *, case_insensitive: bool = False) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        text = raw.strip()
        for choice in choices:
            if text == choice or (case_insensitive and text.lower() == choice.lower()):
                return choice
        raise ValueError(f"String must be one of: {', '.join(choices)}")

    return parse


def parse_cleanup_policy(raw: str) -> str:
    parts = [p.strip().lower() for p in raw.strip().strip("[]").split(",") if p.strip()]
    if not parts or any(p not in CLEANUP_POLICIES for p in parts):
        raise ValueError(f"String must be one of: {', '.join(CLEANUP_POLICIES)}")
    return ",".join(dict.fromkeys(parts))


def parse_str(raw: str) -> str:
    return raw.strip()


def parse_gzip_level(raw: str) -> int:
    """compression.gzip.level: Kafka's GzipCompression.LEVEL_VALIDATOR (Deflater's levels, or -1 for its
    default)."""
    value = parse_int()(raw)
    if value != -1 and not 1 <= value <= 9:
        raise ValueError("Value must be between 1 and 9 or equal to -1")
    return value


def _key(name: str, default: T, parse: Callable[[str], T]) -> T:
    """A LogConfig field: its Kafka key, Kafka's default and the parser that holds its type and limits."""
    return field(default=default, metadata={"key": name, "parse": parse})


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Parsed topic configs: Kafka's defaults, overridden by the broker's log.* keys and then a topic's own."""

    segment_bytes: int = _key("segment.bytes", 1073741824, parse_int(14))
    segment_ms: int = _key("segment.ms", 604800000, parse_long(1))
    segment_jitter_ms: int = _key("segment.jitter.ms", 0, parse_long(0))
    segment_index_bytes: int = _key("segment.index.bytes", 10485760, parse_int(4))
    retention_ms: int = _key("retention.ms", 604800000, parse_long(-1))
    retention_bytes: int = _key("retention.bytes", -1, parse_long())
    index_interval_bytes: int = _key("index.interval.bytes", 4096, parse_int(0))
    max_message_bytes: int = _key("max.message.bytes", 1048588, parse_int(0))
    message_timestamp_type: str = _key("message.timestamp.type", "CreateTime", parse_choice(TIMESTAMP_TYPES))
    message_timestamp_difference_max_ms: int = _key("message.timestamp.difference.max.ms", LONG_MAX, parse_long(0))
    message_timestamp_before_max_ms: int = _key("message.timestamp.before.max.ms", LONG_MAX, parse_long(0))
    message_timestamp_after_max_ms: int = _key("message.timestamp.after.max.ms", LONG_MAX, parse_long(0))
    cleanup_policy: str = _key("cleanup.policy", "delete", parse_cleanup_policy)
    file_delete_delay_ms: int = _key("file.delete.delay.ms", 60000, parse_long(0))
    flush_messages: int = _key("flush.messages", LONG_MAX, parse_long(1))
    flush_ms: int = _key("flush.ms", LONG_MAX, parse_long(0))
    compression_type: str = _key("compression.type", "producer", parse_choice(COMPRESSION_TYPES, case_insensitive=True))
    # KIP-390 (Kafka 3.8): the level a topic's compression.type uses. Accepted, validated and reported; kbus keeps
    # the producer's batches as they come (see docs/broker-configs.md)
    compression_gzip_level: int = _key("compression.gzip.level", -1, parse_gzip_level)
    compression_lz4_level: int = _key("compression.lz4.level", 9, parse_int(1, 17))
    compression_zstd_level: int = _key("compression.zstd.level", 3, parse_int(-131072, 22))
    min_insync_replicas: int = _key("min.insync.replicas", 1, parse_int(1))
    unclean_leader_election_enable: bool = _key("unclean.leader.election.enable", False, parse_bool)
    delete_retention_ms: int = _key("delete.retention.ms", 86400000, parse_long(0))
    min_compaction_lag_ms: int = _key("min.compaction.lag.ms", 0, parse_long(0))
    max_compaction_lag_ms: int = _key("max.compaction.lag.ms", LONG_MAX, parse_long(1))
    min_cleanable_dirty_ratio: float = _key("min.cleanable.dirty.ratio", 0.5, parse_double(0.0, 1.0))
    preallocate: bool = _key("preallocate", False, parse_bool)
    message_downconversion_enable: bool = _key("message.downconversion.enable", True, parse_bool)
    message_format_version: str = _key("message.format.version", "3.0-IV1", parse_str)
    remote_storage_enable: bool = _key("remote.storage.enable", False, parse_bool)
    local_retention_ms: int = _key("local.retention.ms", -2, parse_long(-2))
    local_retention_bytes: int = _key("local.retention.bytes", -2, parse_long(-2))
    # KIP-950 (Kafka 3.9): turning tiered storage off; ZooKeeper mode refuses them true (validate_topic_configs)
    remote_log_copy_disable: bool = _key("remote.log.copy.disable", False, parse_bool)
    remote_log_delete_on_disable: bool = _key("remote.log.delete.on.disable", False, parse_bool)
    # accepted and echoed; kbus does not throttle replication
    leader_replication_throttled_replicas: str = _key("leader.replication.throttled.replicas", "", parse_str)
    follower_replication_throttled_replicas: str = _key("follower.replication.throttled.replicas", "", parse_str)

    # --- construction ---------------------------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, str | None], base: LogConfig | None = None) -> LogConfig:
        """Topic-level keys (``segment.bytes``...) over ``base`` (or Kafka's defaults). Unknown keys and bad
        values raise InvalidConfigError with Kafka's message, which names the key."""
        changes: dict[str, ConfigValue] = {}
        for key, raw in props.items():
            spec = TOPIC_CONFIGS.get(key)
            if spec is None:
                raise InvalidConfigError(f"Unknown topic config name: {key}")
            if raw is None:
                raise InvalidConfigError(f"Invalid value null for configuration {key}")
            changes[spec.attr] = spec.parse_value(key, raw)
        return with_values(base or cls(), changes)

    def with_overrides(self, props: Mapping[str, str | None]) -> LogConfig:
        return LogConfig.from_properties(props, base=self)

    # --- views ----------------------------------------------------------------------------------------

    def to_properties(self) -> dict[str, str]:
        """Kafka's topic-level names and string values (DescribeConfigs)."""
        return {key: format_value(getattr(self, spec.attr)) for key, spec in TOPIC_CONFIGS.items()}

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


@dataclass(frozen=True)
class TopicConfigDef:
    """One row of the table: the LogConfig attribute a key fills and its parser (type and limits)."""

    attr: str
    parse: Callable[[str], ConfigValue]
    default: ConfigValue

    def parse_value(self, key: str, raw: str) -> ConfigValue:
        try:
            return self.parse(str(raw))
        except ValueError as exc:
            raise InvalidConfigError(f"Invalid value {raw} for configuration {key}: {exc}") from None


def format_value(value: ConfigValue) -> str:
    """A value as Kafka prints it in DescribeConfigs."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    f.metadata["key"]: TopicConfigDef(f.name, f.metadata["parse"], f.default)  # type: ignore[arg-type]
    for f in dataclasses.fields(LogConfig)
}
TOPIC_CONFIG_NAMES: tuple[str, ...] = tuple(TOPIC_CONFIGS)


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """What CreateTopics/AlterConfigs and the --zookeeper tools check before writing anything: known names and
    values within Kafka's limits, as Kafka's LogConfig.validate checks the configs that result. A None value (a
    deletion) removes the key whatever it is, so it is not checked: Kafka accepts an IncrementalAlterConfigs
    DELETE of a key it does not know (MirrorMaker 2 deletes each key the source cluster has at its default, which
    includes keys of newer Kafka versions)."""
    parsed = LogConfig.from_properties({k: v for k, v in configs.items() if v is not None})
    # LogConfig.validateNoInvalidRemoteStorageConfigsInZK: kbus runs in ZooKeeper mode only
    if parsed.remote_log_copy_disable or parsed.remote_log_delete_on_disable:
        raise InvalidConfigError(
            "It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` under Zookeeper's mode."
        )

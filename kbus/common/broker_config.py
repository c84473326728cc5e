"""The broker config table: server.properties -> one typed, validated KafkaConfig, with Kafka's key names and
defaults (KafkaConfig, 3.x). Each key is defined once, as a field below carrying its Kafka name, parser and
default; a broker key that is the default of a topic key (log.segment.bytes -> segment.bytes) takes its parser,
limits and default from the topic-config table, and `log_defaults` turns them into the LogConfig every new log
starts from. What kbus cannot honour is refused here at start (`refuse_unsupported`); keys Kafka does not know get
Kafka's warning (`unknown_keys`).

Beside it: kbus.common.other_broker_configs (Kafka's keys kbus accepts but does not act on),
kbus.common.dynamic_broker_config (what AlterConfigs may change at runtime) and kbus.common.broker_config_describe
(defaults, types, synonyms and sources as DescribeConfigs shows them, the start banner). Why ~600 lines: the table
itself, one field for each of the 130-odd broker keys kbus acts on, with their checks."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TypeVar

from kbus.common.connection_limits import ConnectionLimitError, ConnectionLimits
from kbus.common.other_broker_configs import OTHER_BROKER_CONFIGS
from kbus.common.properties import PropertiesError, load_properties
from kbus.common.security import SecurityProtocol
from kbus.common.topic_config import (
    TOPIC_CONFIGS,
    ConfigValue,
    LogConfig,
    parse_bool,
    parse_int,
    parse_long,
    parse_str,
    with_values,
)

T = TypeVar("T", int, float, bool, str)
_LOG = LogConfig()  # Kafka's topic defaults, which the broker's log.* keys default to


class ConfigError(ValueError):
    """A bad server.properties key/value, or one kbus cannot honour; the message names the key."""


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    out = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--override expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    @classmethod
    def parse_all(cls, value: str, key: str) -> list[Listener]:
        out = []
        for part in filter(None, (p.strip() for p in value.split(","))):
            m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:]*):(\d+)$", part)
            if not m:
                raise ConfigError(f"{key}: cannot parse listener {part!r} (expected NAME://host:port)")
            host = m.group(2).strip("[]")
            out.append(cls(m.group(1).upper(), host, int(m.group(3))))
        if not out:
            raise ConfigError(f"{key}: no listener given")
        return out

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


# group.consumer.assignors: Kafka takes class names; 4.0 also takes the short names (kbus.server.coordinator.assignors)
CONSUMER_GROUP_ASSIGNORS = {
    "uniform": "uniform",
    "range": "range",
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def parse_assignors(value: str) -> tuple[str, ...]:
    """A comma-separated list of assignors, the first the default; an unknown one is a ValueError naming it."""
    names = []
    for item in filter(None, (s.strip() for s in value.split(","))):
        if item not in CONSUMER_GROUP_ASSIGNORS:
            raise ValueError(f"unknown assignor {item!r} (known: uniform, range)")
        names.append(CONSUMER_GROUP_ASSIGNORS[item])
    if not names:
        raise ValueError("at least one assignor is required")
    return tuple(names)


@lru_cache(maxsize=8)  # ApiVersions asks on every connection
def parse_rebalance_protocols(value: str) -> frozenset[str]:
    """group.coordinator.rebalance.protocols: Kafka requires `classic`; kbus has `consumer` (KIP-848) and `share`
    (KIP-932; Kafka 4.1+ turns share groups on with the share.version feature, kbus always has them), and not Kafka
    4's `streams` groups, refused rather than accepted and ignored."""
    protocols = frozenset(p.strip().lower() for p in value.split(",") if p.strip())
    if "classic" not in protocols:
        raise ValueError("the classic protocol is required")
    unknown = protocols - {"classic", "consumer", "share", "streams"}
    if unknown:
        raise ValueError(f"unknown protocol(s) {', '.join(sorted(unknown))}")
    missing = protocols & {"streams"}
    if missing:
        raise ValueError(f"kbus does not implement {' and '.join(sorted(missing))} groups")
    return protocols


def _checked_protocols(value: str) -> str:
    parse_rebalance_protocols(value)
    return value


MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


def parse_migration_policy(value: str) -> str:
    """group.consumer.migration.policy, case-insensitive as Kafka's CaseInsensitiveValidString."""
    policy = value.strip().lower()
    if policy not in MIGRATION_POLICIES:
        raise ValueError(f"must be one of {', '.join(MIGRATION_POLICIES)}")
    return policy


def _checked_migration_policy(value: str) -> str:
    parse_migration_policy(value)  # refused at start, as Kafka refuses it
    return value


def _checked_assignors(value: str) -> str:
    parse_assignors(value)  # refused at start when it names an unknown assignor
    return value


# ---- the table -------------------------------------------------------------------------------------------------
# Each helper records Kafka's ConfigDef type of the key (DescribeConfigs' config_type), given where Kafka's differs
# from what the helper's name says (a SHORT or LIST kbus parses as an int or a string).
def _key(name: str, default: T, parse: Callable[[str], T], kind: int) -> T:
    return field(default=default, metadata={"key": name, "parse": parse, "type": kind})


def _int(name: str, default: int, at_least: int | None = None, kind: int = 3) -> int:
    return _key(name, default, parse_int(at_least), kind)  # INT


def _long(name: str, default: int, at_least: int | None = None) -> int:
    return _key(name, default, parse_long(at_least), 5)  # LONG


def _bool(name: str, default: bool) -> bool:
    return _key(name, default, parse_bool, 1)  # BOOLEAN


def _str(name: str, default: str, kind: int = 2) -> str:
    return _key(name, default, parse_str, kind)  # STRING


def _synonym(name: str, topic: str, default: T, kind: int) -> T:
    """A broker key that is the broker-wide default of topic key `topic`: same parser and limits; `default` is
    the LogConfig default (pass `_LOG.<attr>`)."""
    meta = {"key": name, "parse": TOPIC_CONFIGS[topic].parse, "topic": topic, "type": kind}
    return field(default=default, metadata=meta)


def _unit(name: str, topic: str, unit_ms: int, default: int | None = None) -> int | None:
    """A broker key in a coarser unit than its topic key (log.retention.hours -> retention.ms); None = not set.
    Of several keys for one topic key, the finest one that is set wins, as in Kafka."""
    meta = {"key": name, "parse": parse_long(), "topic": topic, "unit_ms": unit_ms, "type": 5 if unit_ms == 1 else 3}
    return field(default=default, metadata=meta)


_S, _I, _L, _B, _D, _LIST = 2, 3, 5, 1, 6, 7  # the ConfigType values _synonym's callers give


@dataclass(frozen=True)
class KafkaConfig:
    broker_id: int = _int("broker.id", -1, at_least=-1)
    listeners_raw: str = _str("listeners", "PLAINTEXT://:9092")
    advertised_listeners_raw: str = _str("advertised.listeners", "")
    listener_security_protocol_map_raw: str = _str(
        "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
    )
    security_inter_broker_protocol: str = _str("security.inter.broker.protocol", "PLAINTEXT")
    inter_broker_listener_name: str = _str("inter.broker.listener.name", "")
    authorizer_class_name: str = _str("authorizer.class.name", "")
    process_roles: str = _str("process.roles", "", kind=7)
    broker_rack: str = _str("broker.rack", "")
    log_dirs_raw: str = _str("log.dirs", "")
    log_dir: str = _str("log.dir", "/tmp/kafka-logs")
    num_partitions: int = _int("num.partitions", 1, at_least=1)
    default_replication_factor: int = _int("default.replication.factor", 1, at_least=1)
    auto_create_topics_enable: bool = _bool("auto.create.topics.enable", True)
    delete_topic_enable: bool = _bool("delete.topic.enable", True)
    # broker-wide defaults of topic configs
    log_segment_bytes: int = _synonym("log.segment.bytes", "segment.bytes", _LOG.segment_bytes, _I)
    log_roll_ms: int | None = _unit("log.roll.ms", "segment.ms", 1)
    log_roll_hours: int | None = _unit("log.roll.hours", "segment.ms", 3_600_000, 168)
    log_roll_jitter_ms: int | None = _unit("log.roll.jitter.ms", "segment.jitter.ms", 1)
    log_roll_jitter_hours: int | None = _unit("log.roll.jitter.hours", "segment.jitter.ms", 3_600_000, 0)
    log_retention_ms: int | None = _unit("log.retention.ms", "retention.ms", 1)
    log_retention_minutes: int | None = _unit("log.retention.minutes", "retention.ms", 60_000)
    log_retention_hours: int | None = _unit("log.retention.hours", "retention.ms", 3_600_000, 168)
    log_retention_bytes: int = _synonym("log.retention.bytes", "retention.bytes", _LOG.retention_bytes, _L)
    log_index_interval_bytes: int = _synonym(
        "log.index.interval.bytes", "index.interval.bytes", _LOG.index_interval_bytes, _I)
    log_index_size_max_bytes: int = _synonym(
        "log.index.size.max.bytes", "segment.index.bytes", _LOG.segment_index_bytes, _I)
    log_flush_interval_messages: int = _synonym(
        "log.flush.interval.messages", "flush.messages", _LOG.flush_messages, _L
    )
    log_flush_interval_ms: int | None = _unit("log.flush.interval.ms", "flush.ms", 1)
    # Kafka's fallback for flush.ms when log.flush.interval.ms is not set (and the flusher's period there)
    log_flush_scheduler_interval_ms: int | None = _unit("log.flush.scheduler.interval.ms", "flush.ms", 1, 2**63 - 1)
    log_message_timestamp_type: str = _synonym(
        "log.message.timestamp.type", "message.timestamp.type", _LOG.message_timestamp_type, _S)
    log_message_timestamp_difference_max_ms: int = _synonym(
        "log.message.timestamp.difference.max.ms",
        "message.timestamp.difference.max.ms",
        _LOG.message_timestamp_difference_max_ms, _L)
    log_message_timestamp_before_max_ms: int = _synonym(
        "log.message.timestamp.before.max.ms", "message.timestamp.before.max.ms",
        _LOG.message_timestamp_before_max_ms, _L)
    log_message_timestamp_after_max_ms: int = _synonym(
        "log.message.timestamp.after.max.ms", "message.timestamp.after.max.ms",
        _LOG.message_timestamp_after_max_ms, _L)
    log_cleanup_policy: str = _synonym("log.cleanup.policy", "cleanup.policy", _LOG.cleanup_policy, _LIST)
    log_segment_delete_delay_ms: int = _synonym(
        "log.segment.delete.delay.ms", "file.delete.delay.ms", _LOG.file_delete_delay_ms, _L)
    log_preallocate: bool = _synonym("log.preallocate", "preallocate", _LOG.preallocate, _B)
    # ignored from inter.broker.protocol.version 3.0 on, as in Kafka; listed for DescribeConfigs' synonyms
    log_message_format_version: str = _synonym(
        "log.message.format.version", "message.format.version", _LOG.message_format_version, _S)
    log_message_downconversion_enable: bool = _synonym(
        "log.message.downconversion.enable", "message.downconversion.enable",
        _LOG.message_downconversion_enable, _B)
    log_local_retention_ms: int = _synonym("log.local.retention.ms", "local.retention.ms", _LOG.local_retention_ms, _L)
    log_local_retention_bytes: int = _synonym(
        "log.local.retention.bytes", "local.retention.bytes", _LOG.local_retention_bytes, _L)
    log_cleaner_delete_retention_ms: int = _synonym(
        "log.cleaner.delete.retention.ms", "delete.retention.ms", _LOG.delete_retention_ms, _L)
    log_cleaner_min_compaction_lag_ms: int = _synonym(
        "log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms", _LOG.min_compaction_lag_ms, _L)
    log_cleaner_max_compaction_lag_ms: int = _synonym(
        "log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms", _LOG.max_compaction_lag_ms, _L)
    log_cleaner_min_cleanable_ratio: float = _synonym(
        "log.cleaner.min.cleanable.ratio", "min.cleanable.dirty.ratio", _LOG.min_cleanable_dirty_ratio, _D)
    message_max_bytes: int = _synonym("message.max.bytes", "max.message.bytes", _LOG.max_message_bytes, _I)
    compression_type: str = _synonym("compression.type", "compression.type", _LOG.compression_type, _S)
    compression_gzip_level: int = _synonym(
        "compression.gzip.level", "compression.gzip.level", _LOG.compression_gzip_level, _I)
    compression_lz4_level: int = _synonym(
        "compression.lz4.level", "compression.lz4.level", _LOG.compression_lz4_level, _I)
    compression_zstd_level: int = _synonym(
        "compression.zstd.level", "compression.zstd.level", _LOG.compression_zstd_level, _I)
    min_insync_replicas: int = _synonym("min.insync.replicas", "min.insync.replicas", _LOG.min_insync_replicas, _I)
    unclean_leader_election_enable: bool = _synonym(
        "unclean.leader.election.enable", "unclean.leader.election.enable", _LOG.unclean_leader_election_enable, _B)
    # the log manager
    log_retention_check_interval_ms: int = _long("log.retention.check.interval.ms", 300000, at_least=1)
    log_flush_offset_checkpoint_interval_ms: int = _int("log.flush.offset.checkpoint.interval.ms", 60000, at_least=0)
    log_cleaner_enable: bool = _bool("log.cleaner.enable", True)
    log_cleaner_backoff_ms: int = _long("log.cleaner.backoff.ms", 15000, at_least=0)
    num_recovery_threads_per_data_dir: int = _int("num.recovery.threads.per.data.dir", 1, at_least=1)
    log_cleaner_threads: int = _int("log.cleaner.threads", 1, at_least=0)  # accepted: kbus cleans one log at a time
    background_threads: int = _int("background.threads", 10, at_least=1)  # accepted: kbus's jobs share the loop
    # the network
    socket_request_max_bytes: int = _int("socket.request.max.bytes", 104857600, at_least=1)
    socket_send_buffer_bytes: int = _int("socket.send.buffer.bytes", 102400)
    socket_receive_buffer_bytes: int = _int("socket.receive.buffer.bytes", 102400)
    num_network_threads: int = _int("num.network.threads", 3, at_least=1)
    num_io_threads: int = _int("num.io.threads", 8, at_least=1)
    fetch_max_bytes: int = _int("fetch.max.bytes", 57671680, at_least=1024)
    connections_max_idle_ms: int = _long("connections.max.idle.ms", 600000)  # negative: never (Kafka's Selector)
    # connection limits (kbus.common.connection_limits; per listener: listener.name.<l>.max.connections, ...)
    max_connections: int = _int("max.connections", 2**31 - 1, at_least=0)
    max_connections_per_ip: int = _int("max.connections.per.ip", 2**31 - 1, at_least=0)
    max_connections_per_ip_overrides: str = _str("max.connections.per.ip.overrides", "")
    max_connection_creation_rate: int = _int("max.connection.creation.rate", 2**31 - 1, at_least=0)
    request_timeout_ms: int = _int("request.timeout.ms", 30000, at_least=0)
    # client quotas (QuotaConfig): the rate windows of every quota sensor
    quota_window_num: int = _int("quota.window.num", 11, at_least=1)
    quota_window_size_seconds: int = _int("quota.window.size.seconds", 1, at_least=1)
    controller_quota_window_num: int = _int("controller.quota.window.num", 11, at_least=1)
    controller_quota_window_size_seconds: int = _int("controller.quota.window.size.seconds", 1, at_least=1)
    # ZooKeeper and the controller
    zookeeper_connect: str = _str("zookeeper.connect", "")
    zookeeper_session_timeout_ms: int = _int("zookeeper.session.timeout.ms", 18000)
    zookeeper_connection_timeout_ms: int = _int("zookeeper.connection.timeout.ms", 18000)
    controlled_shutdown_enable: bool = _bool("controlled.shutdown.enable", True)
    auto_leader_rebalance_enable: bool = _bool("auto.leader.rebalance.enable", True)
    leader_imbalance_check_interval_seconds: int = _long("leader.imbalance.check.interval.seconds", 300, at_least=1)
    leader_imbalance_per_broker_percentage: int = _int("leader.imbalance.per.broker.percentage", 10)
    # replication
    replica_lag_time_max_ms: int = _long("replica.lag.time.max.ms", 30000)
    replica_fetch_max_bytes: int = _int("replica.fetch.max.bytes", 1048576, at_least=0)
    num_replica_fetchers: int = _int("num.replica.fetchers", 1, at_least=1)
    replica_fetch_wait_max_ms: int = _int("replica.fetch.wait.max.ms", 500)
    replica_high_watermark_checkpoint_interval_ms: int = _long("replica.high.watermark.checkpoint.interval.ms", 5000)
    # the windows replication throttles are measured over (Kafka's ReplicationQuotaManagerConfig)
    replication_quota_window_num: int = _int("replication.quota.window.num", 11, at_least=1)
    replication_quota_window_size_seconds: int = _int("replication.quota.window.size.seconds", 1, at_least=1)
    # incremental fetch sessions (KIP-227)
    max_incremental_fetch_session_cache_slots: int = _int("max.incremental.fetch.session.cache.slots", 1000, at_least=0)
    min_incremental_fetch_session_eviction_ms: int = _int(
        "min.incremental.fetch.session.eviction.ms", 120000, at_least=0
    )
    # the group coordinator
    offsets_topic_num_partitions: int = _int("offsets.topic.num.partitions", 50, at_least=1)
    offsets_topic_replication_factor: int = _int("offsets.topic.replication.factor", 3, at_least=1, kind=4)
    offsets_topic_segment_bytes: int = _int("offsets.topic.segment.bytes", 104857600, at_least=1)
    offsets_retention_minutes: int = _int("offsets.retention.minutes", 10080, at_least=1)
    offsets_retention_check_interval_ms: int = _long("offsets.retention.check.interval.ms", 600000, at_least=1)
    offsets_commit_timeout_ms: int = _int("offsets.commit.timeout.ms", 5000, at_least=1)
    offset_metadata_max_bytes: int = _int("offset.metadata.max.bytes", 4096)
    group_initial_rebalance_delay_ms: int = _int("group.initial.rebalance.delay.ms", 3000)
    group_min_session_timeout_ms: int = _int("group.min.session.timeout.ms", 6000)
    group_max_session_timeout_ms: int = _int("group.max.session.timeout.ms", 1800000)
    group_max_size: int = _int("group.max.size", 2**31 - 1, at_least=1)
    # the consumer group protocol (KIP-848)
    group_consumer_session_timeout_ms: int = _int("group.consumer.session.timeout.ms", 45000, at_least=1)
    group_consumer_heartbeat_interval_ms: int = _int("group.consumer.heartbeat.interval.ms", 5000, at_least=1)
    group_consumer_max_size: int = _int("group.consumer.max.size", 2**31 - 1, at_least=1)
    # Kafka 4's default (3.9's is "classic": the consumer protocol was early access there)
    group_coordinator_rebalance_protocols: str = _key(
        "group.coordinator.rebalance.protocols", "classic,consumer", _checked_protocols, _LIST
    )
    group_consumer_assignors: str = _key(
        "group.consumer.assignors",
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor,"
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
        _checked_assignors,
        _LIST,
    )
    # Kafka 4's online upgrade/downgrade between classic and consumer groups
    group_consumer_migration_policy: str = _key(
        "group.consumer.migration.policy", "bidirectional", _checked_migration_policy, _S
    )
    # share groups (KIP-932); Kafka 4.4's defaults
    group_share_session_timeout_ms: int = _int("group.share.session.timeout.ms", 45000, at_least=1)
    group_share_heartbeat_interval_ms: int = _int("group.share.heartbeat.interval.ms", 5000, at_least=1)
    group_share_max_size: int = _int("group.share.max.size", 200, at_least=1, kind=4)
    group_share_max_groups: int = _int("group.share.max.groups", 10, at_least=1, kind=4)
    group_share_record_lock_duration_ms: int = _int("group.share.record.lock.duration.ms", 30000, at_least=1000)
    group_share_delivery_count_limit: int = _int("group.share.delivery.count.limit", 5, at_least=2)
    group_share_partition_max_record_locks: int = _int("group.share.partition.max.record.locks", 2000, at_least=100)
    # the share coordinator (__share_group_state); Kafka 4.4's defaults
    share_coordinator_state_topic_num_partitions: int = _int(
        "share.coordinator.state.topic.num.partitions", 50, at_least=1)
    share_coordinator_state_topic_replication_factor: int = _int(
        "share.coordinator.state.topic.replication.factor", 3, at_least=1, kind=4)
    share_coordinator_state_topic_min_isr: int = _int("share.coordinator.state.topic.min.isr", 2, at_least=1, kind=4)
    share_coordinator_state_topic_segment_bytes: int = _int(
        "share.coordinator.state.topic.segment.bytes", 104857600, at_least=1)
    # the transaction coordinator
    transaction_state_log_replication_factor: int = _int(
        "transaction.state.log.replication.factor", 3, at_least=1, kind=4
    )
    transaction_state_log_min_isr: int = _int("transaction.state.log.min.isr", 2, at_least=1)
    transaction_state_log_num_partitions: int = _int("transaction.state.log.num.partitions", 50, at_least=1)
    transaction_state_log_segment_bytes: int = _int("transaction.state.log.segment.bytes", 104857600, at_least=1)
    transaction_max_timeout_ms: int = _int("transaction.max.timeout.ms", 900000, at_least=1)
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _int(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000, at_least=1
    )
    transactional_id_expiration_ms: int = _int("transactional.id.expiration.ms", 604800000, at_least=1)
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _int(
        "transaction.remove.expired.transaction.cleanup.interval.ms", 3600000, at_least=1
    )
    # KIP-890 part 1: a partition leader asks the coordinator before the first transactional write of a transaction
    transaction_partition_verification_enable: bool = _bool("transaction.partition.verification.enable", True)
    # kbus's own
    cluster_id: str = _str("cluster.id", "")
    metrics_port: int = _int("metrics.port", -1)
    metrics_host: str = _str("metrics.host", "127.0.0.1")
    # N broker processes from this one file, one per core (kbus.common.broker_processes, docs/cores.md)
    num_broker_processes: int = _int("num.broker.processes", 1, at_least=1)
    # every key as given (file, then --override), for DescribeConfigs' config source and the unknown-key warning
    raw: Mapping[str, str] = field(default_factory=dict)

    # ---- derived values ----
    @property
    def listeners(self) -> list[Listener]:
        return Listener.parse_all(self.listeners_raw, "listeners")

    @property
    def advertised_listeners(self) -> list[Listener]:
        if not self.advertised_listeners_raw:
            return [Listener(lst.name, lst.host or "localhost", lst.port) for lst in self.listeners]
        return Listener.parse_all(self.advertised_listeners_raw, "advertised.listeners")

    @property
    def listener_security_protocol_map(self) -> dict[str, SecurityProtocol]:
        out: dict[str, SecurityProtocol] = {}
        key = "listener.security.protocol.map"
        for part in filter(None, (p.strip() for p in self.listener_security_protocol_map_raw.split(","))):
            name, sep, proto = part.partition(":")
            if not sep:
                raise ConfigError(f"{key}: cannot parse {part!r} (expected LISTENER:PROTOCOL)")
            try:
                out[name.strip().upper()] = SecurityProtocol(proto.strip().upper())
            except ValueError:
                raise ConfigError(f"{key}: unknown security protocol {proto.strip()!r} for listener {name}") from None
        return out

    def security_protocol(self, listener: str) -> SecurityProtocol:
        """The security protocol of a named listener (Kafka: listener.security.protocol.map)."""
        proto = self.listener_security_protocol_map.get(listener.upper())
        if proto is None:
            raise ConfigError(
                f"listeners: no security protocol defined for listener {listener} in listener.security.protocol.map"
            )
        return proto

    @property
    def inter_broker_listener(self) -> str:
        """The listener other brokers reach this one on (replication, controller traffic): Kafka's
        inter.broker.listener.name, else the listener named after security.inter.broker.protocol."""
        return (self.inter_broker_listener_name or self.security_inter_broker_protocol).upper()

    @property
    def log_dirs(self) -> list[Path]:
        raw = self.log_dirs_raw or self.log_dir
        return [Path(p.strip()) for p in raw.split(",") if p.strip()]

    @cached_property
    def log_defaults(self) -> LogConfig:
        """The broker's log.* keys as topic configs: what a topic without its own overrides gets."""
        chosen: dict[str, tuple[int, str, ConfigValue]] = {}  # topic key -> (unit, broker key, value)
        for key, spec in BROKER_CONFIGS.items():
            value = getattr(self, spec.attr)
            if spec.topic is None or value is None:
                continue
            prior = chosen.get(spec.topic)
            if prior is None or spec.unit_ms < prior[0]:
                chosen[spec.topic] = (spec.unit_ms, key, value)
        changes: dict[str, ConfigValue] = {}
        for topic, (unit_ms, key, value) in chosen.items():
            target = TOPIC_CONFIGS[topic]
            if unit_ms == 1:
                changes[target.attr] = value  # parsed by the topic key's own parser already
                continue
            assert isinstance(value, int)
            scaled = value if value < 0 else value * unit_ms
            try:
                changes[target.attr] = target.parse(str(scaled))  # the topic key's limits hold for it too
            except ValueError as exc:
                raise ConfigError(f"Invalid value {value} for configuration {key}: {exc}") from None
        return with_values(_LOG, changes)

    def unknown_keys(self) -> list[str]:
        """Keys given that no broker config has (Kafka warns: supplied but isn't a known config)."""
        return [k for k in self.raw if k not in BROKER_CONFIGS and k not in OTHER_BROKER_CONFIGS
                and not is_security_key(k)]  # fmt: skip

    def ignored_keys(self) -> list[str]:
        """Kafka broker keys given that kbus does not act on (OTHER_BROKER_CONFIGS, security keys aside)."""
        return [k for k in self.raw if k in OTHER_BROKER_CONFIGS and not is_security_key(k)]

    # ---- construction ----
    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> KafkaConfig:
        values: dict[str, ConfigValue] = {}
        for key, raw in props.items():
            spec = BROKER_CONFIGS.get(key)
            if spec is None:
                continue  # Kafka ignores unknown keys too, with a warning (unknown_keys)
            try:
                values[spec.attr] = spec.parse(raw)
            except ValueError as exc:
                raise ConfigError(f"Invalid value {raw} for configuration {key}: {exc}") from None
        cfg = dataclasses.replace(with_values(cls(), values), raw=dict(props))
        cfg.validate()
        return cfg

    @classmethod
    def load(cls, path: str | Path | None, overrides: Iterable[str] = ()) -> KafkaConfig:
        props: dict[str, str] = {}
        if path is not None:
            try:
                props = load_properties(path)
            except OSError as exc:
                raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
            except PropertiesError as exc:
                raise ConfigError(f"cannot read {path}: {exc}") from None
        props.update(parse_overrides(overrides))
        return cls.from_properties(props)

    def validate(self) -> None:
        listeners = self.listeners
        advertised = self.advertised_listeners
        for lst in (*listeners, *advertised):
            self.security_protocol(lst.name)
        refuse_unsupported(self)
        names = [lst.name for lst in listeners]
        if len(set(names)) != len(names):
            raise ConfigError(f"listeners: each listener must have a different name, got {self.listeners_raw}")
        ports = [lst.port for lst in listeners if lst.port != 0]
        if len(set(ports)) != len(ports):
            raise ConfigError(f"listeners: each listener must have a different port, got {self.listeners_raw}")
        if unknown := {a.name for a in advertised} - set(names):
            raise ConfigError(f"advertised.listeners: listener(s) {sorted(unknown)} not in listeners")
        if self.inter_broker_listener_name and "security.inter.broker.protocol" in self.raw:
            raise ConfigError(
                "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."
            )
        if self.inter_broker_listener not in {a.name for a in advertised}:
            key = "inter.broker.listener.name" if self.inter_broker_listener_name else "security.inter.broker.protocol"
            raise ConfigError(
                f"{key}: the inter-broker listener {self.inter_broker_listener} must be a listener name defined in "
                f"advertised.listeners ({self.advertised_listeners_raw or self.listeners_raw})"
            )
        self.log_defaults  # noqa: B018 - the log.*.hours/minutes keys against the topic limits
        try:
            ConnectionLimits.from_layers([self.raw])
        except ConnectionLimitError as exc:
            raise ConfigError(str(exc)) from None
        # KafkaConfig: a failed login's answer waits this long, so the idle timeout must not close it first
        delay_key = "connection.failed.authentication.delay.ms"
        try:
            delay = int(self.raw.get(delay_key, "100").strip())
        except ValueError:
            delay = 100  # the SASL settings report the bad value themselves
        if 0 <= self.connections_max_idle_ms <= delay:
            raise ConfigError(f"{delay_key}={delay} should always be less than connections.max.idle.ms="
                              f"{self.connections_max_idle_ms} to prevent failed authentication responses from "
                              "timing out")  # fmt: skip
        if not self.log_dirs:
            raise ConfigError("log.dirs is empty")


@dataclass(frozen=True)
class BrokerConfigDef:
    """One row of the broker table: the KafkaConfig attribute, parser, default and, for a topic config's broker
    default, the topic key and the unit (ms per unit) its value is in."""

    attr: str
    parse: Callable[[str], ConfigValue]
    default: ConfigValue | None
    topic: str | None = None
    unit_ms: int = 1
    type: int = 2  # Kafka's ConfigDef type (ConfigType below)


BROKER_CONFIGS: dict[str, BrokerConfigDef] = {
    f.metadata["key"]: BrokerConfigDef(
        f.name,
        f.metadata["parse"],
        f.default,  # type: ignore[arg-type]
        f.metadata.get("topic"),
        f.metadata.get("unit_ms", 1),
        f.metadata["type"],
    )
    for f in dataclasses.fields(KafkaConfig)
    if "key" in f.metadata
}

assert not OTHER_BROKER_CONFIGS.keys() & BROKER_CONFIGS.keys()  # one definition per key


# ---- what kbus does not do ---------------------------------------------------------------------------------------
# A config asking for any of these is refused at start with one line naming the key, never half-honoured (a
# broker that serves plaintext on a port configured as SSL is worse than none). This is the one place to lift a
# refusal when the feature lands: add the protocol to SUPPORTED_SECURITY_PROTOCOLS, drop the key prefix.
SUPPORTED_SECURITY_PROTOCOLS = frozenset(SecurityProtocol)
_UNSUPPORTED_PREFIXES: dict[str, str] = {}
# TLS and SASL keys kbus reads (kbus.server.security), plain or per listener (`listener.name.<l>.<key>`)
SECURITY_KEYS = frozenset(
    {
        "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
        "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type", "ssl.truststore.location",
        "ssl.truststore.password", "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols",
        "ssl.cipher.suites", "ssl.endpoint.identification.algorithm", "ssl.principal.mapping.rules",
        "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.mechanism.inter.broker.protocol",
        "connection.failed.authentication.delay.ms", "connections.max.reauth.ms",
        "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
    }
)


# secure ZooKeeper: read by kbus.zk.security from the raw properties (never per listener)
ZOOKEEPER_SECURITY_KEYS = frozenset(
    {
        "zookeeper.set.acl", "zookeeper.ssl.client.enable", "zookeeper.clientCnxnSocket",
        "zookeeper.ssl.keystore.location", "zookeeper.ssl.keystore.password", "zookeeper.ssl.keystore.type",
        "zookeeper.ssl.truststore.location", "zookeeper.ssl.truststore.password", "zookeeper.ssl.truststore.type",
        "zookeeper.ssl.protocol", "zookeeper.ssl.enabled.protocols", "zookeeper.ssl.cipher.suites",
        "zookeeper.ssl.endpoint.identification.algorithm", "zookeeper.ssl.crl.enable", "zookeeper.ssl.ocsp.enable",
    }
)  # fmt: skip


def is_security_key(key: str) -> bool:
    if key.startswith("listener.name."):
        rest = key[len("listener.name.") :].partition(".")[2]
        return rest in SECURITY_KEYS or rest.endswith(".sasl.jaas.config")
    return key in SECURITY_KEYS or key in ZOOKEEPER_SECURITY_KEYS
_UNSUPPORTED_SET = {
    "process.roles": "KRaft mode (kbus runs with ZooKeeper)",
    "client.quota.callback.class": "custom quota callbacks (the users/clients quotas in ZooKeeper apply)",
}


def refuse_unsupported(cfg: KafkaConfig) -> None:
    for key, listeners in (("listeners", cfg.listeners), ("advertised.listeners", cfg.advertised_listeners)):
        for lst in listeners:
            protocol = cfg.security_protocol(lst.name)
            if protocol not in SUPPORTED_SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"{key}: listener {lst} uses security protocol {protocol}, which kbus does not support "
                    f"(supported: {', '.join(sorted(SUPPORTED_SECURITY_PROTOCOLS))})"
                )
    if cfg.security_inter_broker_protocol.upper() not in SUPPORTED_SECURITY_PROTOCOLS:
        raise ConfigError(
            f"security.inter.broker.protocol: {cfg.security_inter_broker_protocol} is not supported by kbus"
        )
    for key, value in cfg.raw.items():
        for prefix, what in _UNSUPPORTED_PREFIXES.items():
            if key.startswith(prefix):
                raise ConfigError(f"{key}: kbus does not support {what}; remove the key")
        if key in _UNSUPPORTED_SET and value.strip():
            raise ConfigError(f"{key}: kbus does not support {_UNSUPPORTED_SET[key]}; remove the key")



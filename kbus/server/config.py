"""server.properties -> one typed, validated KafkaConfig (Kafka's key names and defaults)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kbus.protocol.connection import SecurityProtocol


class ConfigError(ValueError):
    """A bad server.properties key/value; the message names the key."""


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties subset: `key=value` or `key: value`, `#`/`!` comments, backslash line continuation."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if m:
            props[m.group(1)] = m.group(2).strip()
        else:
            props[line] = ""
    return props


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


# key -> (attribute, type, default). Defaults are Kafka's (KafkaConfig, 3.x).
BROKER_CONFIGS: dict[str, tuple[str, type, object]] = {
    "broker.id": ("broker_id", int, -1),
    "listeners": ("listeners_raw", str, "PLAINTEXT://:9092"),
    "advertised.listeners": ("advertised_listeners_raw", str, ""),
    "listener.security.protocol.map": (
        "listener_security_protocol_map_raw",
        str,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    ),
    "inter.broker.listener.name": ("inter_broker_listener_name", str, ""),
    "security.inter.broker.protocol": ("security_inter_broker_protocol", str, "PLAINTEXT"),
    "log.dirs": ("log_dirs_raw", str, ""),
    "log.dir": ("log_dir", str, "/tmp/kafka-logs"),
    "num.partitions": ("num_partitions", int, 1),
    "default.replication.factor": ("default_replication_factor", int, 1),
    "auto.create.topics.enable": ("auto_create_topics_enable", bool, True),
    "delete.topic.enable": ("delete_topic_enable", bool, True),
    "log.segment.bytes": ("log_segment_bytes", int, 1073741824),
    "log.roll.hours": ("log_roll_hours", int, 168),
    "log.roll.ms": ("log_roll_ms", int, -1),
    "log.retention.hours": ("log_retention_hours", int, 168),
    "log.retention.minutes": ("log_retention_minutes", int, -1),
    "log.retention.ms": ("log_retention_ms", int, 0),
    "log.retention.bytes": ("log_retention_bytes", int, -1),
    "log.retention.check.interval.ms": ("log_retention_check_interval_ms", int, 300000),
    "log.index.interval.bytes": ("log_index_interval_bytes", int, 4096),
    "log.index.size.max.bytes": ("log_index_size_max_bytes", int, 10485760),
    "log.flush.interval.messages": ("log_flush_interval_messages", int, 2**63 - 1),
    "log.flush.interval.ms": ("log_flush_interval_ms", int, -1),
    "log.flush.offset.checkpoint.interval.ms": ("log_flush_offset_checkpoint_interval_ms", int, 60000),
    "log.message.timestamp.type": ("log_message_timestamp_type", str, "CreateTime"),
    "log.cleanup.policy": ("log_cleanup_policy", str, "delete"),
    "log.cleaner.enable": ("log_cleaner_enable", bool, True),
    "log.cleaner.backoff.ms": ("log_cleaner_backoff_ms", int, 15000),
    "message.max.bytes": ("message_max_bytes", int, 1048588),
    "socket.request.max.bytes": ("socket_request_max_bytes", int, 104857600),
    "socket.send.buffer.bytes": ("socket_send_buffer_bytes", int, 102400),
    "socket.receive.buffer.bytes": ("socket_receive_buffer_bytes", int, 102400),
    "num.network.threads": ("num_network_threads", int, 3),
    "num.io.threads": ("num_io_threads", int, 8),
    "num.recovery.threads.per.data.dir": ("num_recovery_threads_per_data_dir", int, 1),
    "zookeeper.connect": ("zookeeper_connect", str, ""),
    "zookeeper.session.timeout.ms": ("zookeeper_session_timeout_ms", int, 18000),
    "zookeeper.connection.timeout.ms": ("zookeeper_connection_timeout_ms", int, 18000),
    "min.insync.replicas": ("min_insync_replicas", int, 1),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", bool, False),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", int, 30000),
    "replica.fetch.max.bytes": ("replica_fetch_max_bytes", int, 1048576),
    "replica.fetch.wait.max.ms": ("replica_fetch_wait_max_ms", int, 500),
    "replica.high.watermark.checkpoint.interval.ms": ("replica_high_watermark_checkpoint_interval_ms", int, 5000),
    "controlled.shutdown.enable": ("controlled_shutdown_enable", bool, True),
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", int, 50),
    "offsets.topic.replication.factor": ("offsets_topic_replication_factor", int, 3),
    "offsets.topic.segment.bytes": ("offsets_topic_segment_bytes", int, 104857600),
    "offsets.retention.minutes": ("offsets_retention_minutes", int, 10080),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", int, 600000),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", int, 3000),
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", int, 6000),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", int, 1800000),
    "group.max.size": ("group_max_size", int, 2**31 - 1),
    "transaction.state.log.replication.factor": ("transaction_state_log_replication_factor", int, 3),
    "transaction.state.log.min.isr": ("transaction_state_log_min_isr", int, 2),
    "transaction.state.log.num.partitions": ("transaction_state_log_num_partitions", int, 50),
    "transaction.state.log.segment.bytes": ("transaction_state_log_segment_bytes", int, 104857600),
    "transaction.max.timeout.ms": ("transaction_max_timeout_ms", int, 900000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        "transaction_abort_timed_out_transaction_cleanup_interval_ms", int, 10000),
    "transactional.id.expiration.ms": ("transactional_id_expiration_ms", int, 604800000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (
        "transaction_remove_expired_transaction_cleanup_interval_ms", int, 3600000),
    "compression.type": ("compression_type", str, "producer"),
    "fetch.max.bytes": ("fetch_max_bytes", int, 57671680),
    "connections.max.idle.ms": ("connections_max_idle_ms", int, 600000),
    "cluster.id": ("cluster_id", str, ""),
    "metrics.port": ("metrics_port", int, -1),
    "metrics.host": ("metrics_host", str, "127.0.0.1"),
}
_BOOL = {"true": True, "false": False}


@dataclass(frozen=True)
class KafkaConfig:
    broker_id: int = -1
    listeners_raw: str = "PLAINTEXT://:9092"
    advertised_listeners_raw: str = ""
    listener_security_protocol_map_raw: str = (
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
    )
    inter_broker_listener_name: str = ""
    security_inter_broker_protocol: str = "PLAINTEXT"
    log_dirs_raw: str = ""
    log_dir: str = "/tmp/kafka-logs"
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    log_segment_bytes: int = 1073741824
    log_roll_hours: int = 168
    log_roll_ms: int = -1
    log_retention_hours: int = 168
    log_retention_minutes: int = -1
    log_retention_ms: int = 0
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 300000
    log_index_interval_bytes: int = 4096
    log_index_size_max_bytes: int = 10485760
    log_flush_interval_messages: int = 2**63 - 1
    log_flush_interval_ms: int = -1
    log_flush_offset_checkpoint_interval_ms: int = 60000
    log_message_timestamp_type: str = "CreateTime"
    log_cleanup_policy: str = "delete"
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15000
    message_max_bytes: int = 1048588
    socket_request_max_bytes: int = 104857600
    socket_send_buffer_bytes: int = 102400
    socket_receive_buffer_bytes: int = 102400
    num_network_threads: int = 3
    num_io_threads: int = 8
    num_recovery_threads_per_data_dir: int = 1
    zookeeper_connect: str = ""
    zookeeper_session_timeout_ms: int = 18000
    zookeeper_connection_timeout_ms: int = 18000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    replica_lag_time_max_ms: int = 30000
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_wait_max_ms: int = 500
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    controlled_shutdown_enable: bool = True
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104857600
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 2**31 - 1
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_segment_bytes: int = 104857600
    transaction_max_timeout_ms: int = 900000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    transactional_id_expiration_ms: int = 604800000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3600000
    compression_type: str = "producer"
    fetch_max_bytes: int = 57671680
    connections_max_idle_ms: int = 600000
    cluster_id: str = ""
    metrics_port: int = -1
    metrics_host: str = "127.0.0.1"
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

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> KafkaConfig:
        values: dict[str, object] = {}
        for key, raw in props.items():
            spec = BROKER_CONFIGS.get(key)
            if spec is None:
                continue  # Kafka ignores unknown keys too (with a warning); we keep them in `raw`
            attr, typ, _ = spec
            try:
                if typ is bool:
                    values[attr] = _BOOL[raw.strip().lower()]
                elif typ is int:
                    values[attr] = int(raw.strip())
                else:
                    values[attr] = raw.strip()
            except (KeyError, ValueError):
                raise ConfigError(f"Invalid value {raw!r} for configuration {key}: expected {typ.__name__}") from None
        cfg = cls(**values, raw=dict(props))  # type: ignore[arg-type]
        cfg.validate()
        return cfg

    @classmethod
    def load(cls, path: str | Path | None, overrides: Iterable[str] = ()) -> KafkaConfig:
        props: dict[str, str] = {}
        if path is not None:
            p = Path(path)
            try:
                props = parse_properties(p.read_text())
            except OSError as exc:
                raise ConfigError(f"cannot read {p}: {exc.strerror}") from None
        props.update(parse_overrides(overrides))
        return cls.from_properties(props)

    def validate(self) -> None:
        listeners = self.listeners
        advertised = self.advertised_listeners
        for lst in (*listeners, *advertised):
            self.security_protocol(lst.name)
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
            raise ConfigError(
                "inter.broker.listener.name must be a listener name defined in advertised.listeners "
                f"(inter-broker listener {self.inter_broker_listener}; listeners {self.listeners_raw})"
            )
        if self.num_partitions < 1:
            raise ConfigError("num.partitions must be at least 1")
        if self.default_replication_factor < 1:
            raise ConfigError("default.replication.factor must be at least 1")
        if self.log_segment_bytes < 14:
            raise ConfigError("log.segment.bytes must be at least 14")
        if self.log_message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ConfigError("log.message.timestamp.type must be CreateTime or LogAppendTime")
        if self.broker_id < -1:
            raise ConfigError("broker.id must be >= 0 (or -1 to generate one)")
        if not self.log_dirs:
            raise ConfigError("log.dirs is empty")


def _shown(key: str, value: object) -> str:
    if "password" in key or key.endswith(".jaas.config"):
        return "[hidden]"  # Kafka prints PASSWORD-typed values this way
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value in ("", None) else str(value)


def config_banner(config: KafkaConfig) -> str:
    """Kafka's start banner (AbstractConfig.logAll): "KafkaConfig values:" then one tab-indented `key = value`
    line per known key, sorted, with the value in effect (the file's, an override's, or the default)."""
    values = vars(config)
    lines = ["KafkaConfig values: "]
    for key in sorted(BROKER_CONFIGS):
        lines.append(f"\t{key} = {_shown(key, values[BROKER_CONFIGS[key][0]])}")
    return "\n".join(lines)

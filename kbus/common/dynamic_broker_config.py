"""Kafka's DynamicBrokerConfig: which broker keys AlterConfigs may change at runtime (per broker or cluster-wide,
`/config/brokers/<id>` and `/config/brokers/<default>`), the checks on a change, the config in effect once the
dynamic layers apply over server.properties, and the replication throttles (dynamic-only keys). Kept apart from
the static table (kbus.common.broker_config) it reads."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from kbus.common.broker_config import BROKER_CONFIGS, SECURITY_KEYS, ConfigError, KafkaConfig
from kbus.common.broker_config_describe import broker_synonyms
from kbus.common.connection_limits import BROKER_KEYS as CONNECTION_LIMIT_KEYS
from kbus.common.connection_limits import ConnectionLimitError, ConnectionLimits, listener_key
from kbus.common.other_broker_configs import BOOLEAN, DOUBLE, INT, LONG, OTHER_BROKER_CONFIGS, SHORT, ConfigType
from kbus.common.topic_config import (
    ConfigValue,
    parse_bool,
    parse_int,
    parse_long,
    parse_str,
)

# ---- dynamic broker configs ----------------------------------------------------------------------------------
# Kafka's DynamicBrokerConfig.AllDynamicConfigs: among KafkaConfig's fields every broker default of a topic config
# (DynamicLogConfig: log.retention.ms, log.segment.bytes, min.insync.replicas, unclean.leader.election.enable,
# message.max.bytes, compression.type, ...; not log.message.format.version, read-only since Kafka 3.0), the thread
# pools (DynamicThreadPool, num.network.threads and the cleaner's threads: num.replica.fetchers applies at once,
# the others are accepted and shown, see the README), the cleaner's backoff and the listeners (DynamicListenerConfig);
# the OTHER_BROKER_CONFIGS Kafka marks dynamic (SSL, SASL, connection limits, the cleaner's buffers, ...); and the
# dynamic-only replication throttles. Everything else needs a restart, as in Kafka.
# Kafka's DynamicThreadPool.ReconfigurableConfigs: a new count must lie within half and double the current one
THREAD_POOL_KEYS = frozenset(
    {"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads"}
)
DYNAMIC_ONLY_KEYS = frozenset(
    {"leader.replication.throttled.rate", "follower.replication.throttled.rate",
     "replica.alter.log.dirs.io.max.bytes.per.second"}
)  # fmt: skip
DYNAMIC_BROKER_KEYS = frozenset(
    {key for key, spec in BROKER_CONFIGS.items()
     if spec.topic is not None and broker_synonyms(key)[0] == key and key != "log.message.format.version"}
    | THREAD_POOL_KEYS
    | {"num.network.threads", "log.cleaner.threads", "log.cleaner.backoff.ms"}
    | {"listeners", "advertised.listeners", "listener.security.protocol.map"}
    | {key for key, other in OTHER_BROKER_CONFIGS.items() if other.dynamic}
    | {"transaction.partition.verification.enable"}  # Kafka's DynamicProducerStateManagerConfig
    | set(CONNECTION_LIMIT_KEYS)  # SocketServer.ReconfigurableConfigs (also per listener: is_dynamic_broker_key)
    | DYNAMIC_ONLY_KEYS
)  # fmt: skip
# Dynamic in Kafka, read once at start by kbus (its listeners and their TLS/SASL settings): AlterConfigs refuses
# them, saying so, rather than store a change that would not apply. Every other dynamic key kbus acts on applies
# at once (the connection limits too), and the ones it does not act on are stored and shown, as Kafka's would be.
START_ONLY_KEYS = frozenset(
    {"listeners", "advertised.listeners", "listener.security.protocol.map"}
    | (SECURITY_KEYS & DYNAMIC_BROKER_KEYS)
)
_PARSERS: dict[ConfigType, Callable[[str], ConfigValue]] = {
    INT: parse_int(), SHORT: parse_int(), LONG: parse_long(), BOOLEAN: parse_bool, DOUBLE: float,
}
BROKER_DEFAULT_ENTITY = "<default>"


def is_dynamic_broker_key(key: str) -> bool:
    """A key AlterConfigs may set on a broker: DYNAMIC_BROKER_KEYS and the per-listener connection limits
    (`listener.name.<l>.max.connections`, `....max.connection.creation.rate`)."""
    return key in DYNAMIC_BROKER_KEYS or listener_key(key) is not None


def check_dynamic_broker_configs(changes: Mapping[str, str | None], current: KafkaConfig | None = None) -> None:
    """What AlterConfigs on a BROKER resource may set: dynamic keys with values their parser accepts, thread
    counts within half and double of `current`'s. Raises ConfigError naming the keys (Kafka: "Cannot update these
    configs dynamically: Set(...)")."""
    static = sorted(k for k in changes if not is_dynamic_broker_key(k))
    if static:
        raise ConfigError(f"Cannot update these configs dynamically: Set({', '.join(static)})")
    start_only = sorted(k for k in changes if k in START_ONLY_KEYS)
    if start_only:
        raise ConfigError(f"kbus applies these configs only at start (Kafka reconfigures them at runtime): "
                          f"Set({', '.join(start_only)}); change server.properties and restart the broker")
    for key, value in changes.items():
        if value is None:
            continue
        if key not in BROKER_CONFIGS and listener_key(key) is not None:
            continue  # validated with the other connection limits below
        if key in BROKER_CONFIGS:
            parse = BROKER_CONFIGS[key].parse
        elif key in OTHER_BROKER_CONFIGS:
            parse = _PARSERS.get(OTHER_BROKER_CONFIGS[key].type, parse_str)
        else:
            parse = parse_long(0)  # the replication throttles, bytes/s
        try:
            parsed = parse(value)
        except ValueError as exc:
            raise ConfigError(f"Invalid value {value} for configuration {key}: {exc}") from None
        if current is not None and key in THREAD_POOL_KEYS:
            _check_thread_count(key, value, int(parsed), getattr(current, BROKER_CONFIGS[key].attr))
    try:
        ConnectionLimits.from_layers([current.raw if current is not None else {},
                                      {k: v for k, v in changes.items() if v is not None}])  # fmt: skip
    except ConnectionLimitError as exc:
        raise ConfigError(str(exc)) from None


def _check_thread_count(key: str, raw: str, new: int, old: int) -> None:
    """DynamicThreadPool.validateReconfiguration."""
    if new == old:
        return
    error = f"Dynamic thread count update validation failed for {key}={raw}"
    if new <= 0:
        raise ConfigError(f"{error}, value should be at least 1")
    if new < old // 2:
        raise ConfigError(f"{error}, value should be at least half the current value {old}")
    if new > old * 2:
        raise ConfigError(f"{error}, value should not be greater than double the current value {old}")


def with_dynamic_configs(
    static: KafkaConfig, cluster_default: Mapping[str, str], per_broker: Mapping[str, str]
) -> tuple[KafkaConfig, list[str]]:
    """The config in effect: per-broker dynamic > cluster-wide dynamic > server.properties > Kafka's default.
    `raw` stays the static one (DescribeConfigs tells the sources apart). Invalid or non-dynamic stored values
    (written by some other tool) are skipped and returned, as Kafka logs and ignores them."""
    skipped: list[str] = []
    values: dict[str, ConfigValue] = {}
    for layer in (cluster_default, per_broker):
        for key, raw in layer.items():
            spec = BROKER_CONFIGS.get(key)
            if listener_key(key) is not None:
                continue  # per-listener connection limits are read where they are used (kbus.server.network)
            if key not in DYNAMIC_BROKER_KEYS or key in START_ONLY_KEYS:
                skipped.append(key)
                continue
            if spec is None:
                continue  # dynamic-only keys (throttles) are read where they are used
            try:
                values[spec.attr] = spec.parse(raw)
            except ValueError:
                skipped.append(key)
    if not values:
        return static, skipped
    effective = dataclasses.replace(static, **values)  # type: ignore[arg-type]
    try:
        effective.validate()
    except ConfigError:
        return static, sorted({*skipped, *cluster_default, *per_broker})
    return effective, skipped


LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
REPLICA_ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


def replication_throttled_rate(
    key: str, cluster_default: Mapping[str, str], per_broker: Mapping[str, str]
) -> int | None:
    """A replication throttle in effect, bytes/s (Kafka's BrokerConfigHandler): /config/brokers/<id>, else
    /config/brokers/<default>, else unlimited (None). A value that is not a non-negative long is skipped, as
    Kafka's validation would have refused it."""
    for layer in (per_broker, cluster_default):
        raw = layer.get(key)
        if raw is None:
            continue
        try:
            return parse_long(0)(raw)
        except ValueError:
            continue
    return None

"""How each broker key is shown (Kafka's ConfigHelper and AbstractConfig.logAll): its default and ConfigDef type
as DescribeConfigs reports them, its synonyms and their sources (per-broker dynamic, cluster-wide dynamic,
server.properties, default), and the start banner. Reads both key tables: kbus's own (kbus.common.broker_config)
and the ones it only accepts (kbus.common.other_broker_configs)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from kbus.common.broker_config import BROKER_CONFIGS, KafkaConfig
from kbus.common.other_broker_configs import OTHER_BROKER_CONFIGS, PASSWORD, ConfigType
from kbus.common.topic_config import (
    ConfigValue,
    format_value,
)

# topic key -> the broker keys that default it, the winning one first (the table keeps that order)
_TOPIC_SYNONYMS: dict[str, list[str]] = {}
for _name, _spec in BROKER_CONFIGS.items():
    if _spec.topic is not None:
        _TOPIC_SYNONYMS.setdefault(_spec.topic, []).append(_name)

def _shown(key: str, value: ConfigValue | None) -> str:
    if value not in ("", None) and ("password" in key or key.endswith(".jaas.config")):
        return "[hidden]"  # Kafka prints PASSWORD-typed values this way (and null as null)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value in ("", None) else str(value)


def config_banner(config: KafkaConfig) -> str:
    """Kafka's start banner (AbstractConfig.logAll): "KafkaConfig values:" then one tab-indented `key = value`
    line per known key, sorted, with the value in effect (the file's, an override's, or the default)."""
    lines = ["KafkaConfig values: "]
    for key in sorted({*BROKER_CONFIGS, *OTHER_BROKER_CONFIGS}):
        spec = BROKER_CONFIGS.get(key)
        value = getattr(config, spec.attr) if spec is not None else config.raw.get(key, default_value(key))
        if config_type(key) == PASSWORD and value is not None:
            value = "[hidden]"
        lines.append(f"\t{key} = {_shown(key, value)}")
    return "\n".join(lines)


# KafkaConfig fields whose Kafka default is the empty string rather than null ("" means null for the others)
_EMPTY_STRING_DEFAULTS = frozenset({"max.connections.per.ip.overrides"})


def default_value(key: str) -> str | None:
    """Kafka's default of a broker key as DescribeConfigs shows it; None for null (or an unknown key)."""
    spec = BROKER_CONFIGS.get(key)
    if spec is not None:
        if key in _EMPTY_STRING_DEFAULTS:
            return ""
        return None if spec.default in (None, "") else format_value(spec.default)
    other = OTHER_BROKER_CONFIGS.get(key)
    return None if other is None else other.default


def config_type(key: str) -> ConfigType | None:
    """Kafka's ConfigDef type of a broker key (kbus's own keys: their parser's); None for a key outside both
    tables (the dynamic-only throttles: the caller guesses from the value)."""
    other = OTHER_BROKER_CONFIGS.get(key)
    if other is not None:
        return other.type
    spec = BROKER_CONFIGS.get(key)
    return None if spec is None else ConfigType(spec.type)


# ---- synonyms and config sources (DescribeConfigs) -------------------------------------------------------------
class ConfigSource(enum.IntEnum):
    """DescribeConfigs' config_source and synonym source ids (Kafka's DescribeConfigsResponse.ConfigSource)."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


def broker_synonyms(key: str) -> list[str]:
    """The broker keys that set the same thing as `key`, the one that wins first (DynamicBrokerConfig's
    brokerConfigSynonyms: log.retention.ms, .minutes, .hours; log.roll.ms, .hours; log.flush.interval.ms,
    log.flush.scheduler.interval.ms; any other key alone). The first is the topic key's synonym (Kafka's
    ServerTopicConfigSynonyms), and the only one of them Kafka updates dynamically."""
    spec = BROKER_CONFIGS.get(key)
    if spec is None or spec.topic is None:
        return [key]
    return _TOPIC_SYNONYMS[spec.topic]


def topic_broker_synonym(topic_key: str) -> str | None:
    """The broker key whose value a topic key defaults to (ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS)."""
    keys = _TOPIC_SYNONYMS.get(topic_key)
    return keys[0] if keys else None


def config_synonyms(
    key: str,
    per_broker: Mapping[str, str],
    cluster_default: Mapping[str, str],
    static: Mapping[str, str],
) -> list[ConfigSynonym]:
    """Where broker key `key` (and its synonyms) is set, in Kafka's order (ConfigHelper.configSynonyms): every
    synonym's per-broker dynamic value, then the cluster-wide dynamic ones, then server.properties, then Kafka's
    defaults, dropping what comes before the first entry for `key` itself. The first entry is the source of the
    value in effect; none means DEFAULT_CONFIG."""
    names = broker_synonyms(key)
    out: list[ConfigSynonym] = []
    for layer, source in (
        (per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (static, ConfigSource.STATIC_BROKER_CONFIG),
    ):
        out.extend(ConfigSynonym(n, layer[n], source) for n in names if n in layer)
    for n in names:
        default = default_value(n)
        if default is not None:  # Kafka lists no default for a null one
            out.append(ConfigSynonym(n, default, ConfigSource.DEFAULT_CONFIG))
    first = next((i for i, syn in enumerate(out) if syn.name == key), len(out))
    return out[first:]



"""Spark Kafka source/sink options -> typed settings.

The option names, defaults and precedence are those of Spark's own Kafka integration (spark-sql-kafka-0-10), so a
job moves from `format("kafka")` to `format("kbus")` unchanged. Spark hands us a case-insensitive dict whose keys
are already lower-cased; everything here lower-cases again so a plain dict behaves the same in tests.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from kbus.common.client_security import translate_security
from kbus.common.topics import is_internal

EARLIEST = -2  # Spark's JSON sentinels for "earliest" / "latest" inside per-partition offsets
LATEST = -1
# Streaming's default minRecordsPerTask: one Arrow batch of the reader (kbus.spark.fetch.MAX_BATCH_ROWS).
MIN_RECORDS_PER_TASK = 20_000

# Kafka client settings Spark refuses because the source/sink manages them itself.
_FORBIDDEN_CLIENT_KEYS = {
    "auto.offset.reset": "set startingOffsets instead",
    "enable.auto.commit": "the source never commits offsets; Spark's checkpoint holds them",
    "key.deserializer": "keys are always read as binary; cast or decode them in the query",
    "value.deserializer": "values are always read as binary; cast or decode them in the query",
    "key.serializer": "keys are written as binary or string columns",
    "value.serializer": "values are written as binary or string columns",
    "interceptor.classes": "interceptors are not supported",
}


class KbusOptionError(ValueError):
    """A data source option is missing, contradictory or malformed."""


@dataclass(frozen=True)
class Subscription:
    """Which topic partitions a query reads: exactly one of subscribe, subscribePattern, assign."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assignment: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "assign":
            return topic in self.assignment
        # Java's Pattern.matcher(name).matches() is a full match; internal topics are never subscribed.
        return not is_internal(topic) and re.fullmatch(self.pattern or "", topic) is not None


@dataclass(frozen=True)
class OffsetSpec:
    """A starting or ending position: earliest, latest, per-partition offsets, or by timestamp."""

    kind: Literal["earliest", "latest", "specific", "timestamp", "timestamps"]
    # specific: {topic: {partition: offset}} with EARLIEST/LATEST sentinels allowed
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    timestamp: int | None = None  # one timestamp (ms) for every partition
    # timestamps: {topic: {partition: timestamp_ms}}
    timestamps: dict[str, dict[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceOptions:
    client_config: dict[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None  # None for streaming (Spark refuses endingOffsets there)
    fail_on_data_loss: bool
    include_headers: bool
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    # kbus only: small offset ranges of a micro-batch are read together, this many records per task at least
    min_records_per_task: int
    poll_timeout_ms: int
    timestamp_strategy: Literal["error", "latest"]


@dataclass(frozen=True)
class SinkOptions:
    client_config: dict[str, str]
    topic: str | None
    # Exactly once (kafka.transactional.id set): "task", each task's rows in its own transaction (the default), or
    # "batch", a micro-batch's rows in one transaction written by the driver. None: at least once.
    transaction_scope: Literal["task", "batch"] | None = None

    @property
    def sink_id(self) -> str:
        return self.client_config["transactional.id"]


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def client_config(options: Mapping[str, str], *, group_id_prefix: str | None = None) -> dict[str, str]:
    """`kafka.*` options become librdkafka settings; plain `bootstrap.servers` is accepted as a convenience."""
    opts = _lower(options)
    config: dict[str, str] = {}
    for key, value in opts.items():
        if key.startswith("kafka."):
            name = key[len("kafka.") :]
            if name in _FORBIDDEN_CLIENT_KEYS:
                raise KbusOptionError(f"Kafka option '{name}' is not supported: {_FORBIDDEN_CLIENT_KEYS[name]}")
            config[name] = value
    if "bootstrap.servers" not in config and opts.get("bootstrap.servers"):
        config["bootstrap.servers"] = opts["bootstrap.servers"]
    if not config.get("bootstrap.servers"):
        raise KbusOptionError("option 'kafka.bootstrap.servers' must be set (e.g. 127.0.0.1:9092)")
    config = translate_security(config)  # kafka.sasl.jaas.config, kafka.ssl.truststore.location, ...
    if group_id_prefix is not None and "group.id" not in config:
        # librdkafka insists on a group id even for assign(); it is never joined or committed.
        config["group.id"] = f"{group_id_prefix}-{uuid.uuid4()}"
    return config


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise KbusOptionError(f"option '{name}' must be true or false, got '{raw}'")


def _non_negative_int(opts: dict[str, str], name: str, default: int) -> int:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise KbusOptionError(f"option '{name}' must be 0 or a positive integer, got '{raw}'")
    return value


def _positive_int(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise KbusOptionError(f"option '{name}' must be a positive integer, got '{raw}'") from None
    if value <= 0:
        raise KbusOptionError(f"option '{name}' must be a positive integer, got '{raw}'")
    return value


def _json_object(name: str, raw: str) -> dict[str, object]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise KbusOptionError(f"option '{name}' is not valid JSON ({e.msg}): {raw}") from None
    if not isinstance(value, dict):
        raise KbusOptionError(f"option '{name}' must be a JSON object, got: {raw}")
    return value


def _partition_map(name: str, raw: str) -> dict[str, dict[int, int]]:
    """'{"topicA": {"0": 23, "1": -1}}' -> {"topicA": {0: 23, 1: -1}}."""
    out: dict[str, dict[int, int]] = {}
    for topic, parts in _json_object(name, raw).items():
        if not isinstance(parts, dict):
            raise KbusOptionError(f"option '{name}': partitions of '{topic}' must be an object, got {parts!r}")
        try:
            out[topic] = {int(p): int(v) for p, v in parts.items()}
        except (TypeError, ValueError):
            raise KbusOptionError(f"option '{name}': partitions and values must be integers: {raw}") from None
    return out


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    opts = _lower(options)
    given = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k, "").strip()]
    if len(given) != 1:
        raise KbusOptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be set"
            + (f" (got {', '.join(given)})" if given else "")
        )
    kind = given[0]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        pattern = opts["subscribepattern"].strip()
        try:
            re.compile(pattern)
        except re.error as e:
            raise KbusOptionError(f"option 'subscribePattern' is not a valid regex: {e}") from None
        return Subscription("subscribePattern", pattern=pattern)
    assignment: dict[str, tuple[int, ...]] = {}
    for topic, parts in _json_object("assign", opts["assign"]).items():
        if not isinstance(parts, list) or not all(isinstance(p, int) for p in parts):
            raise KbusOptionError(f"option 'assign' must look like {{\"topicA\":[0,1]}}, got: {opts['assign']}")
        assignment[topic] = tuple(sorted(set(parts)))
    return Subscription("assign", assignment=assignment)


def _timestamp(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise KbusOptionError(f"option '{name}' must be a timestamp in milliseconds, got '{raw}'") from None


def parse_offset_spec(options: Mapping[str, str], which: Literal["starting", "ending"], default: str) -> OffsetSpec:
    """Spark's precedence: <which>Timestamp, then <which>OffsetsByTimestamp, then <which>Offsets."""
    opts = _lower(options)
    if f"{which}timestamp" in opts:
        return OffsetSpec("timestamp", timestamp=_timestamp(f"{which}Timestamp", opts[f"{which}timestamp"]))
    if f"{which}offsetsbytimestamp" in opts:
        name = f"{which}OffsetsByTimestamp"
        return OffsetSpec("timestamps", timestamps=_partition_map(name, opts[name.lower()]))
    raw = opts.get(f"{which}offsets", default).strip()
    if raw.lower() in ("earliest", "latest"):
        return OffsetSpec(raw.lower())  # type: ignore[arg-type]
    return OffsetSpec("specific", offsets=_partition_map(f"{which}Offsets", raw))


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = _lower(options)
    starting = parse_offset_spec(opts, "starting", "latest" if streaming else "earliest")
    ending: OffsetSpec | None = None
    if streaming:
        for key in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if key in opts:
                raise KbusOptionError(f"option '{key}' is for batch queries only")
    else:
        ending = parse_offset_spec(opts, "ending", "latest")
        if starting.kind == "latest":
            raise KbusOptionError("startingOffsets='latest' is for streaming queries only")
        if ending.kind == "earliest":
            raise KbusOptionError("endingOffsets='earliest' is not allowed for batch queries")
        if starting.kind == "specific" and any(v == LATEST for p in starting.offsets.values() for v in p.values()):
            raise KbusOptionError("startingOffsets for batch queries cannot use -1 (latest)")
        if ending.kind == "specific" and any(v == EARLIEST for p in ending.offsets.values() for v in p.values()):
            raise KbusOptionError("endingOffsets for batch queries cannot use -2 (earliest)")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise KbusOptionError(f"option 'startingOffsetsByTimestampStrategy' must be error or latest, got '{strategy}'")
    poll_timeout = _positive_int(opts, "kafkaConsumer.pollTimeoutMs") or 120_000
    prefix = opts.get("groupidprefix", "spark-kafka-source")
    return SourceOptions(
        client_config=client_config(opts, group_id_prefix=prefix),
        subscription=parse_subscription(opts),
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger") if streaming else None,
        min_partitions=_positive_int(opts, "minPartitions"),
        min_records_per_task=_non_negative_int(opts, "minRecordsPerTask", MIN_RECORDS_PER_TASK if streaming else 0),
        poll_timeout_ms=poll_timeout,
        timestamp_strategy=strategy,  # type: ignore[arg-type]
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    topic = opts.get("topic", "").strip() or None
    config = client_config(opts)
    scope = opts.get("transactionscope", "task").strip().lower()
    if scope not in ("task", "batch"):
        raise KbusOptionError(f"option 'transactionScope' must be task or batch, got '{scope}'")
    if "transactional.id" not in config:
        if "transactionscope" in opts:
            raise KbusOptionError("option 'transactionScope' needs 'kafka.transactional.id' (the sink's id)")
        return SinkOptions(client_config=config, topic=topic)
    if not config["transactional.id"].strip():
        raise KbusOptionError("option 'kafka.transactional.id' must not be empty")
    return SinkOptions(client_config=config, topic=topic, transaction_scope=scope)  # type: ignore[arg-type]

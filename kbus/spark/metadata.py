"""Driver-side questions to the broker: which partitions a subscription covers, and where they start and end.

Talks the Kafka protocol through confluent-kafka (Metadata and ListOffsets requests), like Spark's KafkaOffsetReader.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kbus.common.bootstrap import check_reachable
from kbus.common.errors import UsageError
from kbus.spark.offsets import PartitionOffsets, TopicPartition
from kbus.spark.options import EARLIEST, LATEST, KbusOptionError, OffsetSpec, Subscription

_TIMEOUT_S = 30.0
# The start of the message a KbusConnectionError carries; kbus spark-submit's driver looks for it in Spark's
# wrapped errors (kbus/spark/driver.py).
CONNECTION_FAILURE = "kbus: Could not connect to any broker"


class KbusConnectionError(ConnectionError):
    """No bootstrap server accepts a TCP connection: said in one line, at once, instead of librdkafka
    retrying (and logging) for the whole metadata timeout."""


def check_brokers(bootstrap: str) -> None:

    try:
        check_reachable(bootstrap, option="kafka.bootstrap.servers")
    except UsageError as exc:
        raise KbusOptionError(str(exc)) from None
    except ConnectionError as exc:
        reason = str(exc).removeprefix("Could not connect to any broker")
        raise KbusConnectionError(f"{CONNECTION_FAILURE}{reason}") from None


class KbusDataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, deleted topic, truncation) and failOnDataLoss is true."""


class OffsetReader:
    """One confluent-kafka consumer used only for metadata; never subscribes, never joins a group."""

    def __init__(self, client_config: dict[str, str]) -> None:
        config = {**client_config, "enable.auto.commit": False, "allow.auto.create.topics": False}
        config.setdefault("isolation.level", "read_uncommitted")  # Spark's (Java client's) default
        self._consumer = Consumer(config)

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> OffsetReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def topic_partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The partitions that exist now. A subscribed topic that does not exist yet simply has none."""
        if subscription.kind == "subscribe":
            topics: Iterable[str] = subscription.topics
            metadata = {t: self._consumer.list_topics(t, timeout=_TIMEOUT_S).topics.get(t) for t in topics}
        else:
            metadata = dict(self._consumer.list_topics(timeout=_TIMEOUT_S).topics)
        out: list[TopicPartition] = []
        for topic, meta in sorted(metadata.items()):
            if meta is None or not subscription.matches(topic):
                continue
            if meta.error is not None and meta.error.code() != KafkaError.NO_ERROR:
                if meta.error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
                    continue
                raise KafkaException(meta.error)
            partitions = sorted(meta.partitions)
            if subscription.kind == "assign":
                partitions = [p for p in subscription.assignment[topic] if p in meta.partitions]
            out.extend((topic, p) for p in partitions)
        return out

    def watermarks(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """(earliest, latest) per partition: the log start offset and the high watermark."""
        out = {}
        for topic, partition in tps:
            low, high = self._consumer.get_watermark_offsets(
                KafkaTopicPartition(topic, partition), timeout=_TIMEOUT_S, cached=False
            )
            out[(topic, partition)] = (low, high)
        return out

    def offsets_for_times(self, stamps: dict[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """First offset whose timestamp is >= the given one; None when there is no such record."""
        if not stamps:
            return {}
        query = [KafkaTopicPartition(t, p, ts) for (t, p), ts in stamps.items()]
        found = self._consumer.offsets_for_times(query, timeout=_TIMEOUT_S)
        out: dict[TopicPartition, int | None] = {}
        for tp in found:
            if tp.error is not None:
                raise KafkaException(tp.error)
            out[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
        return out

    def resolve(
        self,
        spec: OffsetSpec,
        tps: list[TopicPartition],
        *,
        default: int,
        timestamp_strategy: str = "error",
    ) -> PartitionOffsets:
        """Concrete offsets for `tps`. Partitions a JSON spec leaves out get `default` (EARLIEST or LATEST)."""
        marks = self.watermarks(tps)

        def concrete(tp: TopicPartition, offset: int) -> int:
            if offset == EARLIEST:
                return marks[tp][0]
            if offset == LATEST:
                return marks[tp][1]
            return offset

        if spec.kind == "earliest":
            return {tp: marks[tp][0] for tp in tps}
        if spec.kind == "latest":
            return {tp: marks[tp][1] for tp in tps}
        if spec.kind == "specific":
            known = set(tps)
            unknown = [(t, p) for t, parts in spec.offsets.items() for p in parts if (t, p) not in known]
            if unknown:
                names = ", ".join(f"{t}-{p}" for t, p in unknown)
                raise KbusOptionError(f"offsets given for partitions the query does not read: {names}")
            return {tp: concrete(tp, spec.offsets.get(tp[0], {}).get(tp[1], default)) for tp in tps}
        if spec.kind == "timestamp":
            stamps = {tp: spec.timestamp for tp in tps if spec.timestamp is not None}
        else:
            stamps = {tp: spec.timestamps[tp[0]][tp[1]] for tp in tps if tp[1] in spec.timestamps.get(tp[0], {})}
        found = self.offsets_for_times(stamps)
        out: PartitionOffsets = {}
        for tp in tps:
            if tp not in stamps:
                out[tp] = concrete(tp, default)
            elif found.get(tp) is not None:
                out[tp] = found[tp]  # type: ignore[assignment]
            elif timestamp_strategy == "latest" or default == LATEST:
                # No record at or after the timestamp: the position is the end of the partition.
                out[tp] = marks[tp][1]
            else:
                raise KbusOptionError(
                    f"no record at or after timestamp {stamps[tp]} in {tp[0]}-{tp[1]} "
                    "(set startingOffsetsByTimestampStrategy=latest to start at the end instead)"
                )
        return out

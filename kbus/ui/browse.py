"""The message browser and the produce form: a short-lived consumer assigned to the partitions (never a group
member, never committing) and one shared producer, built from the same client config as the admin client."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

SEEK_MODES = ("newest", "oldest", "offset", "timestamp")
FORMATS = ("text", "json", "hex")
MAX_SCAN = 10_000  # records read per search at most: a filter over a big topic stops and says so
SCAN_TIMEOUT_S = 8.0


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    timestamp: int  # ms since the epoch, -1 if none
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]

    @property
    def time_text(self) -> str:
        if self.timestamp < 0:
            return "-"
        return datetime.fromtimestamp(self.timestamp / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True)
class Gap:
    """Offsets the client was not given between two records: transaction markers (control records, which the
    Java and librdkafka consumers never hand to applications) or records compacted or deleted away."""

    partition: int
    first: int
    last: int


@dataclass
class BrowseResult:
    rows: list[Record | Gap] = field(default_factory=list)
    scanned: int = 0
    truncated: bool = False  # stopped at MAX_SCAN or the timeout before the end of the partitions
    error: str | None = None


def parse_time(text: str) -> int:
    """ms since the epoch, or an ISO date-time (UTC unless it names its zone): what the seek form accepts."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"timestamp {text!r}: give milliseconds since the epoch or YYYY-MM-DDTHH:MM:SS") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def decode(data: bytes | None, fmt: str) -> str:
    if data is None:
        return "null"
    if fmt == "hex":
        return data.hex(" ")
    text = data.decode("utf-8", errors="replace")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def _contains(data: bytes | None, needle: str) -> bool:
    return not needle or (data is not None and needle in data.decode("utf-8", errors="replace"))


def browse(
    conf: dict[str, Any],
    topic: str,
    partitions: list[int],
    seek: str,
    position: str = "",
    limit: int = 50,
    key_filter: str = "",
    value_filter: str = "",
) -> BrowseResult:
    """Up to `limit` records per search from `partitions`, starting where `seek` says: the newest `limit` of each
    partition, the oldest, at an offset, or at the first record at or after a timestamp."""
    consumer = Consumer(
        {
            **conf,
            "group.id": "kbus-ui-browser",  # never joins nor commits: partitions are assigned, not subscribed
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "isolation.level": "read_uncommitted",
            "log_level": 0,
        }
    )
    result = BrowseResult()
    try:
        starts: dict[int, int] = {}
        ends: dict[int, int] = {}
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
            ends[p] = high
            if seek == "oldest":
                starts[p] = low
            elif seek == "offset":
                starts[p] = min(max(int(position or 0), low), high)
            elif seek == "newest":
                starts[p] = max(low, high - limit)
        if seek == "timestamp":
            ts = parse_time(position)
            found = consumer.offsets_for_times([TopicPartition(topic, p, ts) for p in partitions], timeout=5)
            for tp in found:
                starts[tp.partition] = ends[tp.partition] if tp.offset < 0 or tp.offset == OFFSET_END else tp.offset
        todo = {p for p in partitions if starts[p] < ends[p]}
        if not todo:
            return result
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in sorted(todo)])
        _scan(consumer, todo, starts, ends, limit, key_filter, value_filter, result)
    except KafkaException as exc:
        err = exc.args[0]
        result.error = err.str() if isinstance(err, KafkaError) else str(err)
    finally:
        consumer.close()
    return result


def _scan(
    consumer: Consumer,
    todo: set[int],
    starts: dict[int, int],
    ends: dict[int, int],
    limit: int,
    key_filter: str,
    value_filter: str,
    result: BrowseResult,
) -> None:
    expected = dict(starts)  # the next offset each partition should deliver: a jump is a Gap
    matched: list[Record | Gap] = []
    deadline = time.monotonic() + SCAN_TIMEOUT_S
    found = 0
    while todo and time.monotonic() < deadline:
        if result.scanned >= MAX_SCAN or found >= limit:
            result.truncated = bool(todo)
            break
        for msg in consumer.consume(500, timeout=0.5):
            if found >= limit:
                break
            p = msg.partition() or 0
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if p in todo and expected[p] < ends[p]:  # the partition ends with offsets never handed out
                        matched.append(Gap(p, expected[p], ends[p] - 1))
                    todo.discard(p)
                    continue
                raise KafkaException(err)
            offset = msg.offset() or 0
            if p not in todo:
                continue
            result.scanned += 1
            if offset > expected[p]:
                matched.append(Gap(p, expected[p], offset - 1))
            expected[p] = offset + 1
            if offset + 1 >= ends[p]:
                todo.discard(p)
            if _contains(msg.key(), key_filter) and _contains(msg.value(), value_filter):
                matched.append(_record(msg))
                found += 1
    else:
        result.truncated = bool(todo)
    # a filter shows only the matches; gaps are kept when every record is listed
    keep: Callable[[Record | Gap], bool] = (
        (lambda r: isinstance(r, Record)) if key_filter or value_filter else (lambda r: True)
    )
    result.rows = sorted(
        (r for r in matched if keep(r)), key=lambda r: (r.partition, r.offset if isinstance(r, Record) else r.first)
    )


def _record(msg: Message) -> Record:
    ts_type, ts = msg.timestamp()
    headers: list[tuple[str, bytes | None]] = []
    for h in msg.headers() or []:  # librdkafka hands out (name, bytes | None) pairs
        v = h[1]
        headers.append((str(h[0]), v.encode() if isinstance(v, str) else v))
    return Record(msg.partition() or 0, msg.offset() or 0, ts if ts_type else -1, msg.key(), msg.value(), headers)


def produce(
    producer: Producer, topic: str, key: bytes | None, value: bytes | None, partition: int | None,
    headers: list[tuple[str, bytes]],
) -> tuple[int, int]:
    """One record, waited for: (partition, offset), or KafkaException with the broker's error."""
    outcome: list[tuple[KafkaError | None, Message]] = []
    kwargs: dict[str, Any] = {"key": key, "value": value, "headers": headers,
                              "on_delivery": lambda e, m: outcome.append((e, m))}
    if partition is not None:
        kwargs["partition"] = partition
    producer.produce(topic, **kwargs)
    producer.flush(15)
    if not outcome:
        raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT))
    err, msg = outcome[0]
    if err is not None:
        raise KafkaException(err)
    return msg.partition() or 0, msg.offset() or 0

"""Offset bookkeeping for the source: Spark's offset JSON, trigger rate limits and input-partition splitting.

Pure functions over {(topic, partition): offset} maps; no clients here. The algorithms follow Spark's Kafka source
(KafkaMicroBatchStream.rateLimit, KafkaOffsetRangeCalculator) so batch sizes and splits match what users expect.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]
SparkOffset = dict[str, dict[str, int]]  # Spark's JSON offset: {topic: {partition: offset}}


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [start, end) of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def to_spark_offset(offsets: Mapping[TopicPartition, int]) -> SparkOffset:
    """Spark round-trips offsets through JSON, so partition keys must be strings: {"t": {"0": 42}}."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_spark_offset(offset: Mapping[str, Mapping[str, int]] | None) -> PartitionOffsets:
    if not offset:
        return {}
    return {(topic, int(p)): int(o) for topic, parts in offset.items() for p, o in parts.items()}


def rate_limit(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], limit: int) -> PartitionOffsets:
    """Cap the total records of one trigger at `limit`, shared out in proportion to each partition's backlog.

    `start` must hold a start for every partition of `end`. A partition with a backlog always advances by at
    least one record, so small partitions are never starved (Spark's rule).
    """
    sizes = {tp: e - start[tp] for tp, e in end.items() if e - start[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1 or total <= limit:
        return dict(end)
    out: PartitionOffsets = {}
    for tp, e in end.items():
        if tp not in sizes:
            out[tp] = e
            continue
        prorate = limit * (sizes[tp] / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(e, start[tp] + step)
    return out


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """One input partition per topic partition; with minPartitions above that, big ranges are cut into pieces
    whose count is proportional to their share of the records. Empty ranges are dropped."""
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, round(r.size / total * min_partitions))
        bounds = [r.start + (r.size * i) // parts for i in range(parts + 1)]
        out.extend(OffsetRange(r.topic, r.partition, lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo)
    return out


def pack_ranges(ranges: Iterable[OffsetRange], min_records: int, min_tasks: int = 8) -> list[list[OffsetRange]]:
    """Ranges smaller than `min_records` gathered, in order, into groups of at least that many records, each group
    one task. A task of a Python data source has a fixed cost (a Python worker round trip; ~40 ms of executor CPU
    on the benchmark's machine) that a micro-batch of 100 partitions x 2,000 records paid 100 times.
    Ranges of `min_records` or more stay alone; empty ranges are dropped. `min_tasks` keeps a micro-batch spread
    over a cluster: with that many ranges or fewer nothing is gathered, and groups hold at most about 1/min_tasks
    of the records."""
    ranges = [r for r in ranges if r.size > 0]
    if len(ranges) <= min_tasks:
        return [[r] for r in ranges]
    target = max(1, min(min_records, sum(r.size for r in ranges) // min_tasks))
    groups: list[list[OffsetRange]] = []
    pending: list[OffsetRange] = []
    pending_size = 0
    for r in ranges:
        if r.size >= target:
            groups.append([r])
            continue
        pending.append(r)
        pending_size += r.size
        if pending_size >= target:
            groups.append(pending)
            pending, pending_size = [], 0
    if pending:
        groups.append(pending)
    return groups

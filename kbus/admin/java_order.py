"""The iteration order of a java.util.HashMap/HashSet, for tools whose output Kafka builds from one
(kafka-log-dirs.sh prints its JSON from HashMaps): bucket order in the final table, insertion order within a
bucket. Treeified buckets (8+ colliding keys) are not modelled."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

K = TypeVar("K")


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def string_hash(s: str) -> int:
    """String.hashCode (over UTF-16 code units)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return _int32(h)


def topic_partition_hash(topic: str, partition: int) -> int:
    """org.apache.kafka.common.TopicPartition.hashCode."""
    return _int32(31 * (31 + partition) + string_hash(topic))


def _capacity(size: int, initial: int) -> int:
    capacity = 1
    while capacity < initial:  # HashMap.tableSizeFor
        capacity *= 2
    while size > capacity * 3 // 4:  # load factor 0.75: the table doubles past the threshold
        capacity *= 2
    return capacity


def hashmap_order(keys: Iterable[K], hash_code: Callable[[K], int], initial_capacity: int = 16) -> list[K]:
    """`new HashMap<>(initial_capacity)` filled with `keys` in this order, iterated."""
    items = list(keys)
    mask = _capacity(len(items), initial_capacity) - 1

    def bucket(key: K) -> int:
        h = hash_code(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & mask

    return [k for _, _, k in sorted((bucket(k), i, k) for i, k in enumerate(items))]

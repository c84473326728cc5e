"""The iteration order of a java.util.HashMap/HashSet, for tools whose output Kafka builds from one
(kafka-log-dirs.sh prints its JSON from HashMaps): bucket order in the final table, insertion order within a
bucket. Treeified buckets (8+ colliding keys) are not modelled."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import Decimal
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


def hashtable_order(keys: Iterable[K], hash_code: Callable[[K], int], initial_capacity: int = 11) -> list[K]:
    """A java.util.Hashtable (a Properties) filled with `keys` in this order, iterated: buckets from the last to
    the first, the newest entry of a bucket first; the table grows to 2n+1 when it reaches 3/4 full (rehashing
    from the last bucket down, which reverses each bucket's chain)."""
    capacity = initial_capacity
    table: list[list[K]] = [[] for _ in range(capacity)]
    for count, key in enumerate(keys):
        if count >= int(capacity * 0.75):
            old = table
            capacity = capacity * 2 + 1
            table = [[] for _ in range(capacity)]
            for chain in reversed(old):
                for k in chain:
                    table[(hash_code(k) & 0x7FFFFFFF) % capacity].insert(0, k)
        table[(hash_code(key) & 0x7FFFFFFF) % capacity].insert(0, key)
    return [k for chain in reversed(table) for k in chain]


def java_double(value: float) -> str:
    """Double.toString for finite values: plain decimals from 10^-3 to 10^7, computerized scientific notation
    outside (1.048576E7), always with a fraction digit (1024.0)."""
    if value == 0:
        return "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if "." in text else text + ".0"
    t = Decimal(repr(abs(value))).normalize().as_tuple()  # the shortest digits that read back as this double
    digits = "".join(str(x) for x in t.digits)
    exponent = len(t.digits) + int(t.exponent) - 1
    return f"{'-' if value < 0 else ''}{digits[0]}.{digits[1:] or '0'}E{exponent}"

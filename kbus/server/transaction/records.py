"""The record formats of `__transaction_state`, byte-compatible with Kafka's TransactionLog.

Key: version (int16, 0) + transactional id (string). Value: version (int16) + TransactionLogValue: producer id
(int64), producer epoch (int16), transaction timeout ms (int32), status (int8), partitions (array of topic +
int32 array; null when none), last update timestamp ms (int64), start timestamp ms (int64). kbus writes v0, as
Kafka 3.x does; it reads v1 (the flexible encoding) too. A null value is a tombstone (the id expired).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kbus.common.topics import TRANSACTION_STATE_TOPIC
from kbus.server.coordinator.records import RecordFormatError, _Reader, _Writer, partition_for

KEY_VERSION = 0
VALUE_VERSION = 0

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "RecordFormatError",
    "TransactionLogValue",
    "TransactionState",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "partition_for",
]


class TransactionState(enum.IntEnum):
    """Kafka's TransactionState ids, as stored in the log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's DescribeTransactions/ListTransactions and kafka-transactions.sh print."""
        return "".join(w.capitalize() for w in self.name.split("_"))


@dataclass(slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: dict[str, set[int]] = field(default_factory=dict)
    last_update_ms: int = -1
    start_ms: int = -1


def encode_key(transactional_id: str) -> bytes:
    return bytes(_Writer().i16(KEY_VERSION).string(transactional_id).buf)


def decode_key(key: bytes) -> str:
    r = _Reader(key)
    version = r.i16()
    if version != 0:
        raise RecordFormatError(f"unknown __transaction_state key version {version}")
    return r.string() or ""


def encode_value(v: TransactionLogValue) -> bytes:
    w = _Writer().i16(VALUE_VERSION).i64(v.producer_id).i16(v.producer_epoch).i32(v.timeout_ms)
    w.buf.append(int(v.state) & 0xFF)
    if v.state == TransactionState.EMPTY and not v.partitions:
        w.i32(-1)
    else:
        w.i32(len(v.partitions))
        for topic in sorted(v.partitions):
            w.string(topic)
            ids = sorted(v.partitions[topic])
            w.i32(len(ids))
            for p in ids:
                w.i32(p)
    w.i64(v.last_update_ms).i64(v.start_ms)
    return bytes(w.buf)


def decode_value(value: bytes) -> TransactionLogValue:
    version = _Reader(value).i16()
    if version not in (0, 1):
        raise RecordFormatError(f"unknown __transaction_state value version {version}")
    r = _Reader(value, flexible=version >= 1)
    r.i16()
    pid, epoch, timeout = r.i64(), r.i16(), r.i32()
    status = r._take(1)[0]
    try:
        state = TransactionState(status)
    except ValueError as e:
        raise RecordFormatError(f"unknown transaction status {status}") from e
    partitions: dict[str, set[int]] = {}
    n = r.array_len()
    for _ in range(max(n, 0)):
        topic = r.string() or ""
        ids = {r.i32() for _ in range(max(r.array_len(), 0))}
        r.tagged_fields()
        partitions.setdefault(topic, set()).update(ids)
    last_update, start = r.i64(), r.i64()
    return TransactionLogValue(pid, epoch, timeout, state, partitions, last_update, start)

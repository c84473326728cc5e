"""The record formats of `__transaction_state`, byte-compatible with Kafka's TransactionLog.

Key: version (int16, 0) + transactional id (string). Value: version (int16) + TransactionLogValue: producer id
(int64), producer epoch (int16), transaction timeout ms (int32), status (int8), partitions (array of topic +
int32 array; null when none), last update timestamp ms (int64), start timestamp ms (int64). v1 is the flexible
encoding with three tagged fields (KIP-890 part 2): PreviousProducerId (tag 0), NextProducerId (1) and
ClientTransactionVersion (2). kbus writes v0, as Kafka 3.x does, for a transactions-v1 client's transaction, and
v1 with the tags for a transactions-v2 one (a coordinator taking over must know its epoch is bumped per
transaction). A null value is a tombstone (the id expired).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

from kbus.common.topics import TRANSACTION_STATE_TOPIC
from kbus.protocol.record_batch import encode_unsigned_varint
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
    previous_producer_id: int = -1  # v1 tag 0
    next_producer_id: int = -1  # v1 tag 1
    client_transaction_version: int = 0  # v1 tag 2


_TAG_PREVIOUS_PRODUCER_ID, _TAG_NEXT_PRODUCER_ID, _TAG_CLIENT_TRANSACTION_VERSION = 0, 1, 2


def encode_key(transactional_id: str) -> bytes:
    return bytes(_Writer().i16(KEY_VERSION).string(transactional_id).buf)


def decode_key(key: bytes) -> str:
    r = _Reader(key)
    version = r.i16()
    if version != 0:
        raise RecordFormatError(f"unknown __transaction_state key version {version}")
    return r.string() or ""


def encode_value(v: TransactionLogValue) -> bytes:
    flexible = v.client_transaction_version >= 2
    w = _Writer().i16(1 if flexible else VALUE_VERSION).i64(v.producer_id).i16(v.producer_epoch).i32(v.timeout_ms)
    w.buf.append(int(v.state) & 0xFF)
    empty = v.state == TransactionState.EMPTY and not v.partitions
    if flexible:
        encode_unsigned_varint(0 if empty else len(v.partitions) + 1, w.buf)
    else:
        w.i32(-1 if empty else len(v.partitions))
    if not empty:
        for topic in sorted(v.partitions):
            ids = sorted(v.partitions[topic])
            if flexible:
                raw = topic.encode()
                encode_unsigned_varint(len(raw) + 1, w.buf)
                w.buf += raw
                encode_unsigned_varint(len(ids) + 1, w.buf)
            else:
                w.string(topic).i32(len(ids))
            for p in ids:
                w.i32(p)
            if flexible:
                w.buf.append(0)  # the entry's tagged fields
    w.i64(v.last_update_ms).i64(v.start_ms)
    if flexible:
        # tagged fields in tag order, each only when it differs from its default (Kafka's generated writer)
        tags = [(tag, struct.pack(fmt, value)) for tag, fmt, value, default in (
            (_TAG_PREVIOUS_PRODUCER_ID, ">q", v.previous_producer_id, -1),
            (_TAG_NEXT_PRODUCER_ID, ">q", v.next_producer_id, -1),
            (_TAG_CLIENT_TRANSACTION_VERSION, ">h", v.client_transaction_version, 0),
        ) if value != default]  # fmt: skip
        encode_unsigned_varint(len(tags), w.buf)
        for tag, raw in tags:
            encode_unsigned_varint(tag, w.buf)
            encode_unsigned_varint(len(raw), w.buf)
            w.buf += raw
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
    out = TransactionLogValue(pid, epoch, timeout, state, partitions, last_update, start)
    if version >= 1:
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            raw = r._take(size)
            if tag == _TAG_PREVIOUS_PRODUCER_ID and size == 8:
                out.previous_producer_id = struct.unpack(">q", raw)[0]
            elif tag == _TAG_NEXT_PRODUCER_ID and size == 8:
                out.next_producer_id = struct.unpack(">q", raw)[0]
            elif tag == _TAG_CLIENT_TRANSACTION_VERSION and size == 2:
                out.client_transaction_version = struct.unpack(">h", raw)[0]
    return out

"""The per-partition work of an OffsetCommit, compiled (setup.py COMPILED): which offsets may be stored, and the
`__consumer_offsets` batch that stores them, in Kafka's OffsetCommitKey v1 / OffsetCommitValue v3 (v1 with an
explicit expire timestamp) format; and the partition of a coordinator's state topic a key maps to (every group and
transaction request maps its key). records.py re-exports what is defined here and documents the formats.

A consumer commits after every poll: the group coordinator (four interpreted mixins) hands this module its
offsets, and each partition's checks, key, value and the batch around them run compiled.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final, final

import crc32c
from kio.schema.errors import ErrorCode as E

from kbus.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    CRC_OFFSET,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    encode_record,
    encode_varint,
)
from kbus.server.metadata.types import TopicMetadata

OFFSET_COMMIT_KEY_VERSION: Final = 1
OFFSET_COMMIT_VALUE_VERSION: Final = 3
_OFFSET_COMMIT_VALUE_V1: Final = 1  # the only version with an expire timestamp (OffsetCommit v2-v4 retention_time)
# Final: compiled code reads them from C statics, not from the module's dict on every use
_HEADER: Final = HEADER_STRUCT
_UINT32: Final = struct.Struct(">I")
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_TWO_INT64: Final = struct.Struct(">qq")
_KEY_HEAD: Final = struct.Struct(">hh")  # key version, group length
_VALUE_V3_HEAD: Final = struct.Struct(">hqih")  # value version, offset, leader epoch, metadata length
_VALUE_V3_NO_METADATA: Final = struct.Struct(">hqihq")  # ... metadata length 0, commit timestamp: a consumer's
_VALUE_V1_HEAD: Final = struct.Struct(">hqh")  # value version, offset, metadata length
_UNKNOWN_TOPIC_OR_PARTITION: Final = int(E.unknown_topic_or_partition)
_OFFSET_METADATA_TOO_LARGE: Final = int(E.offset_metadata_too_large)
# A consumer commits the same few partitions again and again: their keys are kept (bounded: a client making up
# group ids or topics only empties it), and for a commit of one partition (a consumer's, most often) the whole batch
# but its value, timestamps and CRC, under the value's length (the same for every commit without metadata)
_KEYS: Final[dict[tuple[str, str, int], bytes]] = {}
_ONE_RECORD: Final[dict[tuple[str, str, int], tuple[int, bytes]]] = {}
_MAX_KEYS: Final = 4096


# A coordinator's clients use few keys (group ids, transactional ids): their hash codes are kept (bounded, so made-up
# keys cannot grow it)
_HASHES: Final[dict[str, int]] = {}
_MAX_HASHES: Final = 4096


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode: UTF-16 code units, h = 31*h + c, wrapped to a signed 32-bit int."""
    h = _HASHES.get(s)
    if h is not None:
        return h
    code = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        code = (31 * code + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    h = code - (1 << 32) if code & 0x80000000 else code
    if len(_HASHES) >= _MAX_HASHES:
        _HASHES.clear()
    _HASHES[s] = h
    return h


def partition_for(key: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions` (Utils.abs maps MIN_VALUE to 0): the
    partition of a coordinator's state topic that holds `key`."""
    h = java_string_hashcode(key)
    return (0 if h == -(2**31) else abs(h)) % num_partitions


@final
class OffsetAndMetadata:
    """One committed offset, never changed once made (a new commit stores a new one). A native class: every
    OffsetCommit makes one per partition, and every load of `__consumer_offsets` one per record; a NamedTuple's
    __new__ is generated Python, interpreted even when compiled code calls it (a frozen dataclass's __init__, with
    object.__setattr__ per field, cost three times that). Equal when every field is, hashable, and its repr names
    the fields, as the NamedTuple's did."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None

    def __init__(self, offset: int, leader_epoch: int = -1, metadata: str = "", commit_timestamp: int = -1,
                 expire_timestamp: int | None = None) -> None:  # fmt: skip
        self.offset = offset
        self.leader_epoch = leader_epoch
        self.metadata = metadata
        self.commit_timestamp = commit_timestamp
        self.expire_timestamp = expire_timestamp

    def _fields(self) -> tuple[int, int, str, int, int | None]:
        return self.offset, self.leader_epoch, self.metadata, self.commit_timestamp, self.expire_timestamp

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OffsetAndMetadata) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (f"OffsetAndMetadata(offset={self.offset!r}, leader_epoch={self.leader_epoch!r}, "
                f"metadata={self.metadata!r}, commit_timestamp={self.commit_timestamp!r}, "
                f"expire_timestamp={self.expire_timestamp!r})")  # fmt: skip


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _key(group.encode("utf-8"), topic.encode("utf-8"), partition)


# Fixed structs around the strings: a format string built per call (f">hh{len(g)}s...") and looked up in struct's
# cache was most of what packing a key and a value cost.
def _key(group: bytes, topic: bytes, partition: int) -> bytes:
    return b"".join((_KEY_HEAD.pack(OFFSET_COMMIT_KEY_VERSION, len(group)), group, _INT16.pack(len(topic)), topic,
                     _INT32.pack(partition)))  # fmt: skip


def offset_commit_value(value: OffsetAndMetadata) -> bytes:
    metadata = value.metadata
    md = metadata.encode("utf-8") if metadata else b""
    expire = value.expire_timestamp
    if expire is not None:
        return b"".join((_VALUE_V1_HEAD.pack(_OFFSET_COMMIT_VALUE_V1, value.offset, len(md)), md,
                         _TWO_INT64.pack(value.commit_timestamp, expire)))  # fmt: skip
    if not md:
        return _VALUE_V3_NO_METADATA.pack(OFFSET_COMMIT_VALUE_VERSION, value.offset, value.leader_epoch, 0,
                                          value.commit_timestamp)  # fmt: skip
    return b"".join((_VALUE_V3_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, value.offset, value.leader_epoch, len(md)), md,
                     _INT64.pack(value.commit_timestamp)))  # fmt: skip


def check_offsets(
    offsets: dict[tuple[str, int], OffsetAndMetadata],
    exists: Callable[[str, int], bool] | None,
    max_metadata_bytes: int,
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], OffsetAndMetadata]]:
    """(errors of the partitions refused, the offsets that may be stored): unknown partitions and metadata longer
    than offset.metadata.max.bytes are refused, for plain and transactional commits alike. When none is refused the
    offsets given are the ones to store (the same dict: callers only read it)."""
    result: dict[tuple[str, int], int] = {}
    for tp, om in offsets.items():
        if exists is not None and not exists(tp[0], tp[1]):
            result[tp] = _UNKNOWN_TOPIC_OR_PARTITION
        # a str of n characters is at most 4n UTF-8 bytes: only a long one needs encoding to be measured
        elif len(om.metadata) * 4 > max_metadata_bytes and len(om.metadata.encode("utf-8")) > max_metadata_bytes:
            result[tp] = _OFFSET_METADATA_TOO_LARGE
    if not result:
        return result, offsets
    return result, {tp: om for tp, om in offsets.items() if tp not in result}


@final
class PartitionExists:
    """Does the cluster have `topic`-`partition` (Kafka's metadata cache check before a commit is stored)? Asked for
    each partition of every OffsetCommit: compiled, where an interpreted closure around the metadata store's
    topic() was a Python frame per partition. `topic`: the store's topic(name) (a lookup, not a copy of every
    topic)."""

    def __init__(self, topic: Callable[[str], TopicMetadata | None]) -> None:
        self._topic = topic

    def __call__(self, topic: str, partition: int) -> bool:
        t = self._topic(topic)
        return t is not None and partition in t.partitions


def offset_commit_records(
    group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata]
) -> list[tuple[bytes, bytes]]:
    return [(offset_commit_key(group_id, tp[0], tp[1]), offset_commit_value(om)) for tp, om in offsets.items()]


def offset_commit_batch(group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata], timestamp_ms: int) -> bytes:
    """The batch of a plain (non-transactional) commit, one record per partition: what
    `build_batch(offset_commit_records(...), timestamp_ms=...)` writes, byte for byte, without its general case
    (normalizing each record, headers, per-record timestamps, compression): a third of a one-partition commit's
    coordinator work was that."""
    return bytes(offset_commit_buffer(group_id, offsets, timestamp_ms))


def offset_commit_buffer(
    group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata], timestamp_ms: int
) -> bytearray:
    """offset_commit_batch's bytes in the bytearray they were written into: the commit path hands it to the log as a
    writable memoryview, which the log stamps the offsets into and writes from (as bytes it was copied twice
    more: into bytes here, then into a bytearray of the log's own)."""
    if len(offsets) == 1:
        for tp, om in offsets.items():
            return _one_record_batch(group_id, tp[0], tp[1], offset_commit_value(om), timestamp_ms)
    out = bytearray(RECORD_BATCH_OVERHEAD)
    count = 0
    for tp, om in offsets.items():
        topic, partition = tp
        key = _kept_key(group_id, topic, partition)
        # every record has the batch's timestamp (delta 0) and no headers
        encode_record(out, count, 0, key, offset_commit_value(om), ())
        count += 1
    if count == 0:
        raise ValueError("a record batch needs at least one record")
    _HEADER.pack_into(
        out, 0, 0, len(out) - LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH, MAGIC_V2, 0, 0, count - 1, timestamp_ms,
        timestamp_ms, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, count,
    )  # fmt: skip
    _UINT32.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out


def _kept_key(group_id: str, topic: str, partition: int) -> bytes:
    cache_key = (group_id, topic, partition)
    key = _KEYS.get(cache_key)
    if key is None:
        if len(_KEYS) >= _MAX_KEYS:
            _KEYS.clear()
        key = _KEYS[cache_key] = _key(group_id.encode("utf-8"), topic.encode("utf-8"), partition)
    return key


def _one_record_batch(group_id: str, topic: str, partition: int, value: bytes, timestamp_ms: int) -> bytearray:
    """offset_commit_batch of one partition: the kept head (for this value length), the value, the record's empty
    headers, then the timestamps and the CRC: a third of what encoding the record and the header cost each time
    (a one-partition commit's batch was a tenth of its broker CPU)."""
    cache_key = (group_id, topic, partition)
    kept = _ONE_RECORD.get(cache_key)
    if kept is None or kept[0] != len(value):
        key = _kept_key(group_id, topic, partition)
        head = bytearray(RECORD_BATCH_OVERHEAD)
        # the record: its length, attributes (unused), timestamp delta 0, offset delta 0, key, value length; its value
        # and headers count (0) follow
        key_length = bytearray()
        encode_varint(len(key), key_length)
        value_length = bytearray()
        encode_varint(len(value), value_length)
        encode_varint(3 + len(key_length) + len(key) + len(value_length) + len(value) + 1, head)
        head += b"\0\0\0"
        head += key_length
        head += key
        head += value_length
        # timestamps and CRC are written per batch
        _HEADER.pack_into(
            head, 0, 0, len(head) + len(value) + 1 - LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH, MAGIC_V2, 0, 0, 0, 0, 0,
            NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, 1,
        )  # fmt: skip
        if len(_ONE_RECORD) >= _MAX_KEYS:
            _ONE_RECORD.clear()
        kept = _ONE_RECORD[cache_key] = (len(value), bytes(head))
    out = bytearray(kept[1])
    out += value
    out.append(0)  # no headers
    _TWO_INT64.pack_into(out, BASE_TIMESTAMP_OFFSET, timestamp_ms, timestamp_ms)  # first and max timestamp
    _UINT32.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out

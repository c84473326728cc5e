"""A producer's Produce request (v3-v12) decoded by hand, sans I/O.

Nearly every Produce request carries one topic with one partition (librdkafka and the Java client send a request
per broker as soon as a batch is ready; with linger.ms=0 that is one batch). For such a request kio's generic
reader, the bounds pre-pass before it (kbus.protocol.bounds) and its frozen dataclasses cost more than the rest of
the decode: this reads the few fields with struct and slices the records out, into slotted classes named as kio
names them (`timeout` in milliseconds, as Fetch's decoder gives `max_wait`). The record batches stay opaque bytes:
what they hold is checked by kbus.protocol.validation, as before. `tests/unit/test_produce_request_decode.py`
checks the result against kio's for every version.

Malformed input raises ProtocolError, as kio's decode does through the codec: the connection closes, the broker
serves the rest. A count is checked against the bytes left before anything is allocated for it. Unknown tagged
fields are skipped, as Kafka does (kio refused them).
"""

from __future__ import annotations

import struct
from typing import Final

from kbus.protocol.codec import ProtocolError, read_uvarint, skip_tagged_fields

PRODUCE_KEY: Final = 0
# Final (as the constants below): compiled code reads them as constants, not from the module's dict per request
MIN_VERSION: Final = 3
MAX_VERSION: Final = 12
FLEXIBLE_VERSION: Final = 9
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_ACKS_TIMEOUT: Final = struct.Struct(">hi")


# Plain classes, not dataclasses: mypyc compiles their __init__, where a dataclass's generated one stays interpreted
# (~0.3 µs an object). Equality and repr as a dataclass's, for tests and logs.
class PartitionProduceData:
    __slots__ = ("index", "records")

    def __init__(self, index: int, records: bytes | memoryview | None) -> None:
        self.index = index
        self.records = records

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PartitionProduceData) and self.index == other.index
                and self.records == other.records)  # fmt: skip

    def __repr__(self) -> str:
        size = None if self.records is None else len(self.records)
        return f"PartitionProduceData(index={self.index}, records=<{size} bytes>)"


class TopicProduceData:
    __slots__ = ("name", "partition_data")

    def __init__(self, name: str, partition_data: list[PartitionProduceData]) -> None:
        self.name = name
        self.partition_data = partition_data

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TopicProduceData) and self.name == other.name
                and self.partition_data == other.partition_data)  # fmt: skip

    def __repr__(self) -> str:
        return f"TopicProduceData(name={self.name!r}, partition_data={self.partition_data!r})"


class ProduceRequest:
    """The fields the Produce handler reads, named as kio names them (timeout in milliseconds)."""

    __slots__ = ("acks", "timeout", "topic_data", "transactional_id")

    def __init__(self, transactional_id: str | None, acks: int, timeout: int,
                 topic_data: list[TopicProduceData]) -> None:  # fmt: skip
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout = timeout
        self.topic_data = topic_data

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ProduceRequest) and self.transactional_id == other.transactional_id
                and self.acks == other.acks and self.timeout == other.timeout
                and self.topic_data == other.topic_data)  # fmt: skip

    def __repr__(self) -> str:
        return (f"ProduceRequest(transactional_id={self.transactional_id!r}, acks={self.acks}, "
                f"timeout={self.timeout}, topic_data={self.topic_data!r})")


def decode_produce_request(frame: bytes | bytearray, version: int, body_offset: int) -> ProduceRequest:
    """The Produce request body at `body_offset` of `frame`; ProtocolError when it is malformed. From a bytearray
    frame (a large request read into its own buffer, kbus.protocol.connection) each partition's records are a
    writable memoryview into it, not a copy: the frame is the request's alone, and the log stamps offsets into the
    batch in place and writes it from there."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ProtocolError(f"Produce v{version} has no hand-written decoder")
    try:
        if version >= FLEXIBLE_VERSION:
            return _decode_flexible(frame, body_offset)
        return _decode_classic(frame, body_offset)
    except (struct.error, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed ProduceRequest v{version}: {exc}") from None


def _malformed(what: str) -> ProtocolError:
    return ProtocolError(f"malformed ProduceRequest: {what}")


def _decode_classic(buf: bytes | bytearray, pos: int) -> ProduceRequest:
    """v3-v8: int16-length strings and bytes, int32 array counts, no tagged fields."""
    end = len(buf)
    # A producer's request: no transactional id, one topic, one partition with records. Its fixed fields are read
    # with two unpacks instead of six (each a Python-level call, a tuple and its ints); anything else, or anything
    # that does not fit in the frame, is read by the general walk below, which alone says what is malformed.
    n: int  # declared (as the fields below): native int operations, not generic ones on struct's objects
    acks: int
    timeout: int
    topic_count: int
    if pos + 26 <= end:
        name_size: int
        part_count: int
        index: int
        size: int
        n, acks, timeout, topic_count, name_size = _ONE_TOPIC_HEAD.unpack_from(buf, pos)
        name_at = pos + 14
        part_at = name_at + name_size
        if n == -1 and topic_count == 1 and name_size >= 0 and part_at + 12 <= end:
            part_count, index, size = _ONE_PARTITION_HEAD.unpack_from(buf, part_at)
            records_at = part_at + 12
            if part_count == 1 and size >= 0 and records_at + size <= end:
                name = buf[name_at:part_at].decode()
                part = PartitionProduceData(index, _records(buf, records_at, size))
                return ProduceRequest(None, acks, timeout, [TopicProduceData(name, [part])])
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    transactional_id: str | None = None
    if n >= 0:
        if pos + n > end:
            raise _malformed("truncated transactional_id")
        transactional_id = buf[pos : pos + n].decode()
        pos += n
    elif n != -1:
        raise _malformed(f"bad transactional_id length {n}")
    acks, timeout = _ACKS_TIMEOUT.unpack_from(buf, pos)
    pos += 6
    topics: list[TopicProduceData] = []
    (topic_count,) = _I32.unpack_from(buf, pos)
    pos += 4
    if topic_count < 0 or topic_count * 6 > end - pos:
        raise _malformed(f"{topic_count} topics claimed, {end - pos} bytes left")
    for _ in range(topic_count):
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
        if n < 0 or pos + n > end:
            raise _malformed(f"bad topic name length {n}")
        name = buf[pos : pos + n].decode()
        pos += n
        (part_count,) = _I32.unpack_from(buf, pos)
        pos += 4
        if part_count < 0 or part_count * 8 > end - pos:
            raise _malformed(f"{part_count} partitions claimed, {end - pos} bytes left")
        parts: list[PartitionProduceData] = []
        for _ in range(part_count):
            index, size = _PARTITION_CLASSIC.unpack_from(buf, pos)
            pos += 8
            records: bytes | memoryview | None = None
            if size >= 0:
                if pos + size > end:
                    raise _malformed(f"records of {size} bytes, {end - pos} bytes left")
                records = _records(buf, pos, size)
                pos += size
            elif size != -1:
                raise _malformed(f"bad records length {size}")
            parts.append(PartitionProduceData(index, records))
        topics.append(TopicProduceData(name, parts))
    return ProduceRequest(transactional_id, acks, timeout, topics)


_PARTITION_CLASSIC: Final = struct.Struct(">ii")  # index, records length (-1: null)
# v3-v8's fields before a topic's name (transactional id length, acks, timeout, topic count, name length), and
# those before one partition's records (partition count, index, records length): _decode_classic's one-topic case
_ONE_TOPIC_HEAD: Final = struct.Struct(">hhiih")
_ONE_PARTITION_HEAD: Final = struct.Struct(">iii")


# v9-v12's fields before a topic's name (null transactional id, acks, timeout, topic count, name length: the
# varints of a one-topic request with a name under 127 bytes are one byte each), and those before one partition's
# records (partition count, index, the records length's first two varint bytes): _decode_flexible's one-topic case
_ONE_TOPIC_HEAD_FLEXIBLE: Final = struct.Struct(">BhiBB")
_ONE_PARTITION_HEAD_FLEXIBLE: Final = struct.Struct(">BiBB")
_NO_TAGGED_FIELDS_3: Final = b"\0\0\0"  # the partition's, the topic's and the request's tagged-field counts, 0


def _decode_flexible(buf: bytes | bytearray, pos: int) -> ProduceRequest:
    """v9-v12: compact (length + 1 varint) strings, bytes and arrays, tagged fields after each entity."""
    end = len(buf)
    # A producer's request (librdkafka and the Java client send v9+): no transactional id, one topic and one
    # partition with records, no tagged fields. Read with two unpacks instead of five varint reads, two unpacks
    # and three tagged-field skips; anything else (a longer varint where one byte is taken here, tagged fields, a
    # null or missing part) is read by the general walk below, which alone says what is malformed.
    n: int  # declared (as the fields below): native int operations, not generic ones on struct's objects
    acks: int
    timeout: int
    topic_count: int
    if pos + 9 <= end:
        txn: int
        name_byte: int
        part_count: int
        index: int
        size0: int
        size1: int
        txn, acks, timeout, topic_count, name_byte = _ONE_TOPIC_HEAD_FLEXIBLE.unpack_from(buf, pos)
        name_at = pos + 9
        part_at = name_at + name_byte - 1
        # txn 0: null; topic_count 2: one; name_byte 1-127: a one-byte length, 0-126 bytes (0 would be null)
        if txn == 0 and topic_count == 2 and 1 <= name_byte < 0x80 and part_at + 7 <= end:
            part_count, index, size0, size1 = _ONE_PARTITION_HEAD_FLEXIBLE.unpack_from(buf, part_at)
            if size0 < 0x80:  # records under 127 bytes: a one-byte length
                size = size0 - 1
                records_at = part_at + 6
            elif size1 < 0x80:  # under 16 KB: two bytes
                size = ((size0 & 0x7F) | (size1 << 7)) - 1
                records_at = part_at + 7
            else:  # never null here, -1: the general walk
                size = -1
                records_at = end
            records_end = records_at + size
            if part_count == 2 and size >= 0 and records_end + 3 <= end \
                    and buf.startswith(_NO_TAGGED_FIELDS_3, records_end):
                name = buf[name_at:part_at].decode()
                part = PartitionProduceData(index, _records(buf, records_at, size))
                return ProduceRequest(None, acks, timeout, [TopicProduceData(name, [part])])
    n, pos = read_uvarint(buf, pos)
    transactional_id: str | None = None
    if n > 0:
        n -= 1
        if pos + n > end:
            raise _malformed("truncated transactional_id")
        transactional_id = buf[pos : pos + n].decode()
        pos += n
    acks, timeout = _ACKS_TIMEOUT.unpack_from(buf, pos)
    pos += 6
    topics: list[TopicProduceData] = []
    topic_count, pos = read_uvarint(buf, pos)
    topic_count -= 1
    if topic_count < 0 or topic_count * 3 > end - pos:
        raise _malformed(f"{topic_count} topics claimed, {end - pos} bytes left")
    for _ in range(topic_count):
        n, pos = read_uvarint(buf, pos)
        n -= 1
        if n < 0 or pos + n > end:
            raise _malformed(f"bad topic name length {n}")
        name = buf[pos : pos + n].decode()
        pos += n
        part_count, pos = read_uvarint(buf, pos)
        part_count -= 1
        if part_count < 0 or part_count * 6 > end - pos:
            raise _malformed(f"{part_count} partitions claimed, {end - pos} bytes left")
        parts: list[PartitionProduceData] = []
        for _ in range(part_count):
            (index,) = _I32.unpack_from(buf, pos)
            size, pos = read_uvarint(buf, pos + 4)
            records: bytes | memoryview | None = None
            if size > 0:
                size -= 1
                if pos + size > end:
                    raise _malformed(f"records of {size} bytes, {end - pos} bytes left")
                records = _records(buf, pos, size)
                pos += size
            pos = _skip_tagged(buf, pos)
            parts.append(PartitionProduceData(index, records))
        pos = _skip_tagged(buf, pos)
        topics.append(TopicProduceData(name, parts))
    _skip_tagged(buf, pos)
    return ProduceRequest(transactional_id, acks, timeout, topics)


def _records(buf: bytes | bytearray, pos: int, size: int) -> bytes | memoryview:
    if type(buf) is bytes:
        return buf[pos : pos + size]  # a small frame's copy: the frame itself is let go
    return memoryview(buf)[pos : pos + size]


def _skip_tagged(buf: bytes | bytearray, pos: int) -> int:
    """Past an entity's tagged fields (Produce defines none up to v12: Kafka skips unknown ones, and so does this)."""
    return skip_tagged_fields(buf, pos, "ProduceRequest")

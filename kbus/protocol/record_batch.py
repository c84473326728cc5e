"""Kafka RecordBatch v2 (``DefaultRecordBatch``): header view, validation, patches, and an off-hot-path codec.

The broker treats batches as opaque bytes: it reads the 61-byte header, checks length, magic and CRC32C, and
patches the base offset / leader epoch (and LogAppendTime) in place. ``build_batch`` and ``decode_records``
exist for tools (dump-log, the group coordinator's ``__consumer_offsets`` records, tests), never per produce.

Layout (all big-endian)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 | producerId int64 |
    producerEpoch int16 | baseSequence int32 | recordsCount int32 | records...

The CRC (Castagnoli) covers everything from ``attributes`` to the end of the batch, so the base offset, length
and partition leader epoch can be rewritten without recomputing it.

Why one file of ~660 lines: it is the one home of the RecordBatch v2 format (constants, header view, patches,
records codec, compression). build_batch needs the compressors and they need the format's codec ids and errors,
so splitting them apart would leave two modules importing each other; the per-produce path reads only the header
part (and kbus.protocol._recordscan, the C scan).
"""

from __future__ import annotations

import mmap
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import crc32c as _crc32c

from kbus.protocol.errors import CorruptRecordError, InvalidRecordError  # re-exported: rb.CorruptRecordError

Buffer = bytes | bytearray | memoryview | mmap.mmap  # segment files are read through mmap (dump-log)

# Field offsets inside a batch.
BASE_OFFSET_OFFSET: Final = 0
LENGTH_OFFSET: Final = 8
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
LAST_OFFSET_DELTA_OFFSET: Final = 23
BASE_TIMESTAMP_OFFSET: Final = 27
MAX_TIMESTAMP_OFFSET: Final = 35
PRODUCER_ID_OFFSET: Final = 43
PRODUCER_EPOCH_OFFSET: Final = 51
BASE_SEQUENCE_OFFSET: Final = 53
RECORDS_COUNT_OFFSET: Final = 57
RECORDS_OFFSET: Final = 61

RECORD_BATCH_OVERHEAD: Final = 61
LOG_OVERHEAD: Final = 12  # baseOffset + batchLength: the part of a batch its length field does not count
# Smallest legal batchLength: the header minus the 12-byte prefix (a batch with zero records).
MIN_BATCH_LENGTH: Final = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD

MAGIC_V2: Final = 2

COMPRESSION_CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_FLAG_MASK: Final = 0x10
CONTROL_FLAG_MASK: Final = 0x20
DELETE_HORIZON_FLAG_MASK: Final = 0x40

COMPRESSION_NONE: Final = 0
COMPRESSION_GZIP: Final = 1
COMPRESSION_SNAPPY: Final = 2
COMPRESSION_LZ4: Final = 3
COMPRESSION_ZSTD: Final = 4
COMPRESSION_NAMES: Final = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

TIMESTAMP_TYPE_CREATE: Final = 0
TIMESTAMP_TYPE_LOG_APPEND: Final = 1

NO_TIMESTAMP: Final = -1
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

_INT32_MAX: Final = 2**31 - 1
LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_PREFIX: Final = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")
assert _HEADER.size == RECORD_BATCH_OVERHEAD
# Public so storage code can unpack headers straight out of its own read windows.
HEADER_STRUCT = _HEADER
# the CRC-32C function held in a C static: `_crc32c.crc32c` in compiled code is an attribute lookup on the module
# per batch checked
_CRC32C: Final = _crc32c.crc32c




def crc32c(data: Buffer) -> int:
    return _crc32c.crc32c(data)


class BatchHeader:
    """A v2 batch header at `position` of its buffer. A plain class, not a dataclass: one is made per batch on every
    append, read and recovery, and mypyc compiles a plain class's __init__ (a dataclass's generated one stays
    interpreted). Compared by value and shown as a dataclass would be."""

    __slots__ = ("attributes", "base_offset", "base_sequence", "base_timestamp", "batch_length", "crc",
                 "last_offset_delta", "magic", "max_timestamp", "partition_leader_epoch", "position", "producer_epoch",
                 "producer_id", "records_count")  # fmt: skip

    def __init__(
        self, position: int, base_offset: int, batch_length: int, partition_leader_epoch: int, magic: int, crc: int,
        attributes: int, last_offset_delta: int, base_timestamp: int, max_timestamp: int, producer_id: int,
        producer_epoch: int, base_sequence: int, records_count: int,
    ) -> None:
        self.position = position
        self.base_offset = base_offset
        self.batch_length = batch_length
        self.partition_leader_epoch = partition_leader_epoch
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.records_count = records_count

    def _fields(self) -> tuple[int, ...]:
        return (self.position, self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic, self.crc,
                self.attributes, self.last_offset_delta, self.base_timestamp, self.max_timestamp, self.producer_id,
                self.producer_epoch, self.base_sequence, self.records_count)  # fmt: skip

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BatchHeader) and self._fields() == other._fields()

    def __repr__(self) -> str:
        return "BatchHeader(" + ", ".join(f"{n}={v}" for n, v in zip(_HEADER_FIELDS, self._fields(), strict=True)) + ")"

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def end_position(self) -> int:
        return self.position + self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return TIMESTAMP_TYPE_LOG_APPEND if self.attributes & TIMESTAMP_TYPE_MASK else TIMESTAMP_TYPE_CREATE

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    def compute_crc(self, buf: Buffer) -> int:
        view = memoryview(buf)
        return _CRC32C(view[self.position + ATTRIBUTES_OFFSET : self.end_position])

    def is_valid(self, buf: Buffer) -> bool:
        return self.compute_crc(buf) == self.crc


_HEADER_FIELDS = ("position", "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
                  "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                  "base_sequence", "records_count")  # fmt: skip


def java_long(n: int) -> int:
    """``n`` as Java's long arithmetic leaves it: wrapped around to 64-bit two's complement. Kafka adds a record's
    timestampDelta to its batch's baseTimestamp this way (DefaultRecord.readFrom) and compares timestamps with
    ``now - timestamp`` (LogValidator), neither with an overflow check, so a sum past int64 wraps rather than fails."""
    return ((n - LONG_MIN) & 0xFFFF_FFFF_FFFF_FFFF) + LONG_MIN


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence numbers wrap from int32 max back to 0 (Kafka's DefaultRecordBatch.incrementSequence)."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``; CorruptRecordError if it is short or its length impossible."""
    if len(buf) - pos < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"record batch at position {pos} is truncated: {len(buf) - pos} bytes, header needs "
            f"{RECORD_BATCH_OVERHEAD}"
        )
    h = BatchHeader(pos, *_HEADER.unpack_from(buf, pos))
    if h.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"record batch at position {pos} has length {h.batch_length}, less than the minimum "
            f"{MIN_BATCH_LENGTH}"
        )
    return h


def peek_magic(buf: Buffer, pos: int = 0) -> int:
    """The magic byte sits at the same place in every message format, so it can be read before the header."""
    return buf[pos + MAGIC_OFFSET]


def iter_batches(buf: Buffer, *, verify_crc: bool = True) -> Iterator[BatchHeader]:
    """Walk a buffer that must hold whole v2 batches back to back; any defect raises."""
    end = len(buf)
    pos = 0
    view = memoryview(buf) if verify_crc else None
    while pos < end:
        h = _checked_header(buf, pos, end, view)
        yield h
        pos += h.batch_length + LOG_OVERHEAD


def batch_headers(buf: Buffer, *, verify_crc: bool = True) -> list[BatchHeader]:
    """`iter_batches` as a list, in a plain loop: every Produce request walks its records twice (validation, then
    the log's append) and the generator plus list() around it cost more than the walk of a one-batch request."""
    end = len(buf)
    pos = 0
    view = memoryview(buf) if verify_crc else None
    out: list[BatchHeader] = []
    while pos < end:
        h = _checked_header(buf, pos, end, view)
        out.append(h)
        pos += h.batch_length + LOG_OVERHEAD
    return out


def _checked_header(buf: Buffer, pos: int, end: int, view: memoryview | None) -> BatchHeader:
    """The header of the batch at `pos`, which must be whole within `end` (and match its CRC when `view` is given)."""
    remaining = end - pos
    if remaining < LOG_OVERHEAD + 5:  # need the length and magic at least
        raise CorruptRecordError(f"record batch at position {pos} is truncated ({remaining} bytes)")
    magic = buf[pos + MAGIC_OFFSET]
    if magic != MAGIC_V2:
        raise InvalidRecordError(f"record batch at position {pos} has unsupported magic {magic}")
    if remaining < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(f"record batch at position {pos} is truncated ({remaining} bytes)")
    # declared: struct gives objects, and undeclared the length and CRC checks below were generic additions and
    # comparisons of them (a new int object each); declared, compiled code unboxes each field once
    base_offset: int
    batch_length: int
    leader_epoch: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    (base_offset, batch_length, leader_epoch, magic, crc, attributes, last_offset_delta, base_timestamp, max_timestamp,
     producer_id, producer_epoch, base_sequence, records_count) = _HEADER.unpack_from(buf, pos)  # fmt: skip
    # arguments by position, not *unpack(...): compiled code then calls the native constructor directly
    h = BatchHeader(pos, base_offset, batch_length, leader_epoch, magic, crc, attributes, last_offset_delta,
                    base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
                    records_count)  # fmt: skip
    size = batch_length + LOG_OVERHEAD
    if batch_length < MIN_BATCH_LENGTH or size > remaining:
        raise CorruptRecordError(
            f"record batch at position {pos} claims {size} bytes but {remaining} remain (minimum "
            f"{RECORD_BATCH_OVERHEAD})"
        )
    if view is not None:
        actual = _CRC32C(view[pos + ATTRIBUTES_OFFSET : pos + size])
        if actual != crc:
            raise _crc_mismatch(h, actual)
    return h


def check_crc(buf: Buffer, h: BatchHeader) -> None:
    """What batch_headers(verify_crc=True) checks of one batch whose header was parsed already (the log's append
    of a batch Produce validation parsed): CorruptRecordError unless its CRC matches."""
    actual = h.compute_crc(buf)
    if actual != h.crc:
        raise _crc_mismatch(h, actual)


def _crc_mismatch(h: BatchHeader, actual: int) -> CorruptRecordError:
    return CorruptRecordError(f"record batch at position {h.position} (base offset {h.base_offset}) is corrupt: "
                              f"stored crc {h.crc}, computed {actual}")


def iter_complete_batches(
    buf: Buffer, *, start: int = 0, verify_crc: bool = False
) -> Iterator[BatchHeader]:
    """Walk whole batches from ``start``, stopping silently at a torn, corrupt or foreign tail.

    Used for recovery and reads, where the tail of a segment may be half written.
    """
    end = len(buf)
    pos = start
    view = memoryview(buf) if verify_crc else None
    while end - pos >= RECORD_BATCH_OVERHEAD:
        if buf[pos + MAGIC_OFFSET] != MAGIC_V2:
            return
        h = BatchHeader(pos, *_HEADER.unpack_from(buf, pos))
        if h.batch_length < MIN_BATCH_LENGTH or h.batch_length + LOG_OVERHEAD > end - pos:
            return
        if view is not None and (
            _crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + LOG_OVERHEAD + h.batch_length]) != h.crc
        ):
            return
        yield h
        pos += h.batch_length + LOG_OVERHEAD


# --- in-place patches -------------------------------------------------------------------------------------


def set_base_offset(buf: bytearray | memoryview, pos: int, offset: int) -> None:
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


_PREFIX_AND_EPOCH: Final = struct.Struct(">qii")


def set_base_offset_and_epoch(buf: bytearray | memoryview, pos: int, offset: int, length: int, epoch: int) -> None:
    """Both patches the leader makes on every batch, in one call; ``length`` is rewritten unchanged."""
    _PREFIX_AND_EPOCH.pack_into(buf, pos, offset, length, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, ts_ms: int) -> None:
    """Mark the batch LogAppendTime with max_timestamp = ts_ms, as Kafka does; the CRC is recomputed."""
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, ts_ms)
    (length,) = _INT32.unpack_from(buf, pos + LENGTH_OFFSET)
    view = memoryview(buf)
    crc = _crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + LOG_OVERHEAD + length])
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)


# --- varints ----------------------------------------------------------------------------------------------


def zigzag_encode(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def zigzag_decode(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def encode_unsigned_varint(n: int, out: bytearray) -> None:
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def encode_varint(n: int, out: bytearray) -> None:
    """Signed (zigzag) varint, as used by the record fields; works for int32 and int64 alike."""
    encode_unsigned_varint(zigzag_encode(n) & 0xFFFFFFFFFFFFFFFF, out)


def decode_unsigned_varint(buf: Buffer, pos: int, end: int | None = None) -> tuple[int, int]:
    """An unsigned varint at `pos` that must end before `end` (default: the buffer's end)."""
    limit = len(buf) if end is None else end
    result = 0
    shift = 0
    while True:
        if pos >= limit:
            raise CorruptRecordError("varint runs past the end of the buffer")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint is too long")


def decode_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    raw, pos = decode_unsigned_varint(buf, pos)
    return zigzag_decode(raw), pos


def size_of_varint(n: int) -> int:
    v = zigzag_encode(n) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while v & ~0x7F:
        size += 1
        v >>= 7
    return size


# --- records (off the hot path) ---------------------------------------------------------------------------


@dataclass
class Record:
    offset: int = 0
    timestamp: int = NO_TIMESTAMP
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    offset_delta: int = 0
    timestamp_delta: int = 0
    sequence: int = NO_SEQUENCE
    attributes: int = 0
    size: int = 0  # bytes of the record including its length varint


def encode_record(
    out: bytearray, offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> None:
    body = bytearray()
    body.append(0)  # record attributes: unused
    encode_varint(timestamp_delta, body)
    encode_varint(offset_delta, body)
    if key is None:
        encode_varint(-1, body)
    else:
        encode_varint(len(key), body)
        body += key
    if value is None:
        encode_varint(-1, body)
    else:
        encode_varint(len(value), body)
        body += value
    encode_varint(len(headers), body)
    for hkey, hvalue in headers:
        kb = hkey.encode("utf-8")
        encode_varint(len(kb), body)
        body += kb
        if hvalue is None:
            encode_varint(-1, body)
        else:
            encode_varint(len(hvalue), body)
            body += hvalue
    encode_varint(len(body), out)
    out += body


_Headers = list[tuple[str, bytes | None]]


def _normalize(rec: Any, now_ms: int) -> tuple[bytes | None, bytes | None, int, _Headers]:
    """Accept (key, value[, timestamp[, headers]]) or a Record-like object."""
    if isinstance(rec, tuple | list):
        key, value = rec[0], rec[1]
        ts = rec[2] if len(rec) > 2 and rec[2] is not None else now_ms
        headers = list(rec[3]) if len(rec) > 3 and rec[3] else []
        return key, value, ts, headers
    ts = getattr(rec, "timestamp", None)
    if ts is None or ts < 0:
        ts = now_ms
    return rec.key, rec.value, ts, list(getattr(rec, "headers", None) or [])


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def compress(codec: int, data: bytes) -> bytes:
    import cramjam

    if codec == COMPRESSION_NONE:
        return data
    if codec == COMPRESSION_GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == COMPRESSION_SNAPPY:
        # Java clients write (and every client reads) xerial's framed snappy, so produce that.
        out = bytearray(_XERIAL_HEADER)
        for i in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
            out += _INT32.pack(len(block))
            out += block
        return bytes(out)
    if codec == COMPRESSION_LZ4:
        # Kafka's Java LZ4 reader decodes each block on its own, so blocks must be independent.
        c = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        c.compress(data)
        return bytes(c.finish())
    if codec == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise InvalidRecordError(f"unknown compression codec {codec}")


_SCRATCH = threading.local()
_SCRATCH_KEEP = 16 * 1024 * 1024  # a scratch buffer up to this size is kept per thread for the next batch


def _decompress_bounded(module: Any, data: bytes, max_size: int) -> memoryview:
    """Stream into a buffer of at most ``max_size`` bytes (cramjam fails rather than grow it). The buffer is a
    per-thread scratch area reused batch after batch (allocating and zeroing a fresh one per batch cost more than
    the decompression itself): the view returned is only valid until this thread's next call."""
    import cramjam

    size = min(max_size, 8 * len(data) + 65536)
    while True:
        out: bytearray | None = getattr(_SCRATCH, "buf", None)
        if out is None or len(out) < size:
            out = bytearray(size)
            if size <= _SCRATCH_KEEP:
                _SCRATCH.buf = out
        try:
            n = module.decompress_into(data, memoryview(out)[:size])
        except cramjam.DecompressionError as e:
            if "whole buffer" not in str(e):
                raise
            if size >= max_size:
                raise CorruptRecordError(f"records decompress to more than {max_size} bytes") from None
            size = max_size
            continue
        return memoryview(out)[:n]


def _snappy_checked_len(cramjam: Any, block: bytes, budget: int) -> int:
    n: int = cramjam.snappy.decompress_raw_len(block)
    if n > budget:
        raise CorruptRecordError("snappy records decompress to more than the bound")
    return n


def decompress(codec: int, data: Buffer, max_size: int | None = None) -> Buffer:
    """The records of a compressed batch. With ``max_size`` (validation of client data) the output is bounded, so
    a decompression bomb fails as corrupt instead of exhausting memory."""
    import cramjam

    try:
        if codec == COMPRESSION_NONE:
            return bytes(data)
        if codec == COMPRESSION_SNAPPY:
            raw = bytes(data)
            budget = max_size if max_size is not None else 2**62
            if raw.startswith(_XERIAL_MAGIC):
                out = bytearray()
                pos = len(_XERIAL_HEADER)
                while pos < len(raw):
                    (n,) = _INT32.unpack_from(raw, pos)
                    pos += 4
                    if n < 0 or n > len(raw) - pos:
                        raise CorruptRecordError("snappy block runs past the end of the batch")
                    block = raw[pos : pos + n]
                    budget -= _snappy_checked_len(cramjam, block, budget)
                    out += bytes(cramjam.snappy.decompress_raw(block))
                    pos += n
                return bytes(out)
            _snappy_checked_len(cramjam, raw, budget)
            return bytes(cramjam.snappy.decompress_raw(raw))  # librdkafka writes unframed snappy
        module = {COMPRESSION_GZIP: cramjam.gzip, COMPRESSION_LZ4: cramjam.lz4, COMPRESSION_ZSTD: cramjam.zstd}.get(
            codec
        )
        if module is not None:
            if max_size is not None:
                return _decompress_bounded(module, bytes(data), max_size)
            return bytes(module.decompress(bytes(data)))
    except (cramjam.DecompressionError, struct.error, ValueError) as e:
        if isinstance(e, CorruptRecordError):
            raise
        raise CorruptRecordError(f"cannot decompress {COMPRESSION_NAMES.get(codec)} records: {e}") from e
    raise InvalidRecordError(f"unknown compression codec {codec}")


def build_batch(
    records: Sequence[Any],
    *,
    base_offset: int = 0,
    timestamp_ms: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    compression: int = COMPRESSION_NONE,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = TIMESTAMP_TYPE_CREATE,
) -> bytes:
    """Encode one v2 batch. Records are (key, value[, timestamp[, headers]]) tuples or Record-like objects;
    ``timestamp_ms`` is the default timestamp for records without one (now, if None)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    now_ms = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    normalized = [_normalize(r, now_ms) for r in records]
    # one pass for both bounds (a coordinator's commit is a batch of one record: generators cost more than it)
    base_ts = max_ts = normalized[0][2]
    for n in normalized:
        ts = n[2]
        if ts < base_ts:
            base_ts = ts
        elif ts > max_ts:
            max_ts = ts
    body = bytearray()
    for i, (key, value, ts, headers) in enumerate(normalized):
        encode_record(body, i, ts - base_ts, key, value, headers)
    payload = compress(compression, bytes(body))
    attributes = compression & COMPRESSION_CODEC_MASK
    if timestamp_type == TIMESTAMP_TYPE_LOG_APPEND:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    out = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    _HEADER.pack_into(
        out, 0, base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload), partition_leader_epoch,
        MAGIC_V2, 0, attributes, len(normalized) - 1, base_ts, max_ts, producer_id, producer_epoch,
        base_sequence, len(normalized),
    )
    out[RECORDS_OFFSET:] = payload
    _UINT32.pack_into(out, CRC_OFFSET, _crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def rebuild_batch(header: BatchHeader, records: Sequence[Record]) -> bytes:
    """Re-encode a batch keeping only ``records`` (as decoded from it): base offset, last offset delta,
    timestamps, producer fields, leader epoch and codec stay, so offsets and sequences keep their meaning.
    Used by log compaction."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    body = bytearray()
    for r in records:
        encode_record(body, r.offset_delta, r.timestamp_delta, r.key, r.value, r.headers)
    payload = compress(header.compression, bytes(body))
    out = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    _HEADER.pack_into(
        out, 0, header.base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
        header.partition_leader_epoch, MAGIC_V2, 0, header.attributes, header.last_offset_delta,
        header.base_timestamp, header.max_timestamp, header.producer_id, header.producer_epoch,
        header.base_sequence, len(records),
    )
    out[RECORDS_OFFSET:] = payload
    _UINT32.pack_into(out, CRC_OFFSET, _crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def decode_records(buf: Buffer, header: BatchHeader | None = None) -> list[Record]:
    """Decode every record of one batch (decompressing if needed)."""
    if header is None:
        header = read_header(buf, 0)
    start = header.position + RECORDS_OFFSET
    end = header.end_position
    if end > len(buf):
        raise CorruptRecordError("record batch is truncated")
    payload: Buffer = memoryview(buf)[start:end]
    if header.compression != COMPRESSION_NONE:
        payload = decompress(header.compression, payload)
    return decode_records_payload(payload, header)


def decode_records_payload(payload: Buffer, header: BatchHeader) -> list[Record]:
    """Decode the records of one batch from its (already decompressed) records section."""
    log_append = header.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND
    records: list[Record] = []
    pos = 0
    for _ in range(header.records_count):
        rec_start = pos
        length, pos = decode_varint(payload, pos)
        rec_end = pos + length
        if length < 0 or rec_end > len(payload):
            raise CorruptRecordError("record length runs past the end of the batch")
        attributes = payload[pos]
        pos += 1
        ts_delta, pos = decode_varint(payload, pos)
        off_delta, pos = decode_varint(payload, pos)
        klen, pos = decode_varint(payload, pos)
        key = None
        if klen >= 0:
            key = bytes(payload[pos : pos + klen])
            pos += klen
        vlen, pos = decode_varint(payload, pos)
        value = None
        if vlen >= 0:
            value = bytes(payload[pos : pos + vlen])
            pos += vlen
        nheaders, pos = decode_varint(payload, pos)
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(nheaders):
            hklen, pos = decode_varint(payload, pos)
            hkey = bytes(payload[pos : pos + hklen]).decode("utf-8", errors="replace")
            pos += hklen
            hvlen, pos = decode_varint(payload, pos)
            hval = None
            if hvlen >= 0:
                hval = bytes(payload[pos : pos + hvlen])
                pos += hvlen
            headers.append((hkey, hval))
        if pos != rec_end:
            raise CorruptRecordError("record fields do not match its length")
        seq = (
            NO_SEQUENCE if header.base_sequence == NO_SEQUENCE
            else increment_sequence(header.base_sequence, off_delta)
        )
        records.append(
            Record(
                offset=header.base_offset + off_delta,
                timestamp=header.max_timestamp if log_append else java_long(header.base_timestamp + ts_delta),
                key=key, value=value, headers=headers, offset_delta=off_delta, timestamp_delta=ts_delta,
                sequence=seq, attributes=attributes, size=rec_end - rec_start,
            )
        )
    return records

"""Produce-side validation of a client's records: Kafka's LogValidator (and ProduceRequest.validateRecords /
UnifiedLog.analyzeAndValidateRecords) rules, sans I/O, in one place.

Per partition of a Produce request, in Kafka's order:
1. the bytes are exactly one v2 batch (CORRUPT_MESSAGE for a bad length or CRC — the CRC itself is computed once,
   by the log's append, unless validation must report or rewrite first —, INVALID_RECORD for another magic, more
   than one batch, or an unknown compression codec);
2. the batch header, as Kafka's validateBatch: base offset 0, lastOffsetDelta + 1 == record count > 0, no control
   bit from clients, a producer id needs a sequence (INVALID_RECORD);
3. every record parses and agrees with the batch, after decompression for gzip/snappy/lz4/zstd (record_scan; the
   compiled scan keeps this per batch, not per record, in Python);
4. per record, as validateRecord: a key on compacted topics (INVALID_RECORD), timestamps within
   message.timestamp.before/after.max.ms for CreateTime topics, no LogAppendTime from the producer
   (INVALID_TIMESTAMP); these carry KIP-467 record errors (batch index + message) and Kafka's summary message.
Nothing of a refused batch is written: the caller appends only what passes. For CreateTime topics the batch's
maxTimestamp is set to its records' real maximum (at least -1), as Kafka's setMaxTimestamp does (the CRC is
recomputed only when it changes).
Timestamps are Java longs: a record's baseTimestamp + timestampDelta and ``now - timestamp`` wrap around 64 bits
as they do in Kafka (which neither refuses nor fails on the overflow: with the default unbounded
message.timestamp.before/after.max.ms it appends the batch, with a bound the wrapped timestamp is INVALID_TIMESTAMP).
The transactional bit is left to the producer state (transactions exist; a transactional batch is
checked against its producer's open transaction there).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

import crc32c as _crc32c

from kbus.common.errors import ErrorCode, KafkaError
from kbus.protocol import record_batch as rb
from kbus.protocol.record_scan import scan_tuple

Buffer = rb.Buffer

# A decompressed batch may not grow beyond this: a few KB of zstd can claim gigabytes (Kafka streams records and
# never holds them; kbus checks a whole batch at once, so it bounds the batch instead).
MAX_UNCOMPRESSED_BATCH_BYTES = 64 * 1024 * 1024

CORRUPT_MESSAGE: Final = ErrorCode.corrupt_message
INVALID_TIMESTAMP: Final = ErrorCode.invalid_timestamp
INVALID_RECORD: Final = ErrorCode.invalid_record
_MAX_TS: Final = struct.Struct(">q")
_LONG_MAX: Final = rb.LONG_MAX
# Java's long bounds are past what compiled code holds as a native int (63 bits): each comparison with one boxes the
# other operand and goes through CPython's comparison. A timestamp (or a difference of two) within +-2^61 of zero is
# inside both bounds, so that is asked first, in native ints; only a value past it is compared with the long bound.
_NATIVE_BOUND: Final = 2**61
# the record scan (kbus/protocol/_recordscan.c) held in a C static: a name imported from an interpreted module is
# looked up in this module's dict at every use
_SCAN: Final = scan_tuple


@dataclass(frozen=True, slots=True)
class ValidationPolicy:
    """The topic configs LogValidator reads."""

    topic_partition: str  # "topic-0", for Kafka's messages
    compacted: bool = False
    log_append_time: bool = False
    timestamp_before_max_ms: int = _LONG_MAX
    timestamp_after_max_ms: int = _LONG_MAX

    @staticmethod
    def timestamp_bounds(difference_max_ms: int, before_max_ms: int, after_max_ms: int) -> tuple[int, int]:
        """Kafka's LogConfig: message.timestamp.before/after.max.ms when set, else the deprecated
        message.timestamp.difference.max.ms (KIP-937)."""
        before = before_max_ms if before_max_ms != _LONG_MAX else difference_max_ms
        after = after_max_ms if after_max_ms != _LONG_MAX else difference_max_ms
        return before, after


@dataclass(frozen=True, slots=True)
class RecordError:
    batch_index: int
    message: str

    def __str__(self) -> str:
        return f"RecordError(batchIndex={self.batch_index}, message='{self.message}')"


class RecordValidationError(KafkaError, ValueError):
    """A produced batch Kafka refuses. ``error_code`` is Kafka's; ``record_errors`` the KIP-467 per-record list
    (empty for batch-level errors)."""

    def __init__(self, error_code: ErrorCode, message: str, record_errors: list[RecordError] | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.record_errors: list[RecordError] = record_errors or []


def _invalid(message: str) -> RecordValidationError:
    return RecordValidationError(INVALID_RECORD, message)


def _single_batch(buf: Buffer, tp: str) -> rb.BatchHeader:
    try:
        headers = rb.batch_headers(buf, verify_crc=False)
    except rb.CorruptRecordError as exc:
        raise RecordValidationError(CORRUPT_MESSAGE, f"{exc} in topic partition {tp}") from None
    except rb.InvalidRecordError as invalid:  # its own name: mypyc types a name once per function
        raise _invalid(f"{invalid} in topic partition {tp}") from None
    if not headers:
        raise _invalid(f"Produce requests must have at least one record batch per partition ({tp})")
    if len(headers) > 1:
        raise _invalid(f"Produce requests are only allowed to contain exactly one record batch per partition ({tp})")
    return headers[0]


def _check_header(h: rb.BatchHeader, tp: str) -> None:
    """Kafka's LogValidator.validateBatch for AppendOrigin.CLIENT, plus UnifiedLog's base offset rule."""
    if h.base_offset != 0:
        raise _invalid(f"The baseOffset of the record batch in the append to {tp} should be 0, but it is "
                       f"{h.base_offset}")
    count_from_offsets = h.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise _invalid(f"Batch has an invalid offset range: [{h.base_offset}, {h.last_offset}] in topic partition {tp}")
    if h.records_count <= 0:
        raise _invalid(f"Invalid reported count for record batch: {h.records_count} in topic partition {tp}")
    if count_from_offsets != h.records_count:
        raise _invalid(f"Inconsistent batch offset range [{h.base_offset}, {h.last_offset}] and count of records "
                       f"{h.records_count} in topic partition {tp}")
    if h.is_control:
        raise _invalid(f"Clients are not allowed to write control records in topic partition {tp}")
    if h.has_producer_id and h.base_sequence < 0:
        raise _invalid(f"Invalid sequence number {h.base_sequence} in record batch with producerId {h.producer_id} "
                       f"in topic partition {tp}")
    if h.compression not in rb.COMPRESSION_NAMES:
        raise _invalid(f"Unknown compression type id {h.compression} in topic partition {tp}")


def _records_payload(buf: Buffer, h: rb.BatchHeader, tp: str) -> Buffer:
    payload = memoryview(buf)[h.position + rb.RECORDS_OFFSET : h.end_position]
    if h.compression == rb.COMPRESSION_NONE:
        return payload
    try:
        return rb.decompress(h.compression, payload, max_size=MAX_UNCOMPRESSED_BATCH_BYTES)
    except (rb.CorruptRecordError, rb.InvalidRecordError) as exc:
        raise RecordValidationError(CORRUPT_MESSAGE, f"{exc} in topic partition {tp}") from None


def _record_errors(records: Buffer, h: rb.BatchHeader, policy: ValidationPolicy, now_ms: int) -> list[RecordError]:
    """The slow path, only once the scan saw a refused record: Kafka lists every offending record."""
    errors: list[RecordError] = []
    decoded = rb.decode_records_payload(records, h)
    before, after = policy.timestamp_before_max_ms, policy.timestamp_after_max_ms
    for i, rec in enumerate(decoded):
        if policy.compacted and rec.key is None:
            errors.append(RecordError(i, f"Compacted topic cannot accept message without key in topic partition "
                                         f"{policy.topic_partition}."))
        elif not policy.log_append_time and rec.timestamp != rb.NO_TIMESTAMP:
            if _timestamp_refused(rec.timestamp, now_ms, before, after):
                errors.append(RecordError(i, f"Timestamp {rec.timestamp} of message with offset {rec.offset} is out "
                                             f"of range. The timestamp should be within "
                                             f"[{rb.java_long(now_ms - before)}, {rb.java_long(now_ms + after)}]"))
        elif h.timestamp_type == rb.TIMESTAMP_TYPE_LOG_APPEND:
            errors.append(RecordError(i, "Invalid timestamp type in message. Producer should not set timestamp type "
                                         "to LogAppendTime."))
    return errors


def _timestamp_refused(timestamp: int, now_ms: int, before_max_ms: int, after_max_ms: int) -> bool:
    """Kafka's LogValidator.recordHasInvalidTimestamp, in its long arithmetic (``now - timestamp`` and its negation
    wrap, so a timestamp near Long.MIN_VALUE passes unbounded configs exactly as in Kafka)."""
    diff = rb.java_long(now_ms - timestamp)
    return diff > before_max_ms or rb.java_long(-diff) > after_max_ms


def _raise_record_errors(errors: list[RecordError]) -> None:
    # Kafka's LogValidator.processRecordErrors
    if any(e.message.startswith(("Timestamp", "Invalid timestamp type")) for e in errors):
        raise RecordValidationError(INVALID_TIMESTAMP, "One or more records have been rejected due to invalid "
                                    "timestamp", errors)
    shown = ", ".join(str(e) for e in errors[:3])
    raise RecordValidationError(
        INVALID_RECORD,
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only showing the "
        f"first three errors at most: [{shown}]",
        errors,
    )


def _require_crc(buf: Buffer, h: rb.BatchHeader, tp: str) -> None:
    if not h.is_valid(buf):
        raise RecordValidationError(CORRUPT_MESSAGE, f"Record batch in topic partition {tp} is corrupt (stored crc = "
                                    f"{h.crc}, computed crc = {h.compute_crc(buf)})")


def validate_produce(buf: bytes | bytearray | memoryview, policy: ValidationPolicy, now_ms: int,
                     produce_version: int = 9) -> bytes | memoryview:
    """`validate_produce_batch`'s records alone."""
    return validate_produce_batch(buf, policy, now_ms, produce_version)[0]


def validate_produce_batch(buf: bytes | bytearray | memoryview, policy: ValidationPolicy, now_ms: int,
                           produce_version: int = 9) -> tuple[bytes | memoryview, rb.BatchHeader]:
    """Validate one partition's records from a Produce request; RecordValidationError if Kafka would refuse them.
    Returns the records to append: ``buf`` itself (a bytearray as bytes; a memoryview, the records of a large
    request read into its own buffer, as it is: no copy), or a copy whose maxTimestamp Kafka would have corrected.

    The CRC is computed once per batch, by the log's append (CORRUPT_MESSAGE), except where validation must know
    first: before it reports any other error (Kafka checks the CRC before LogValidator runs, so a corrupt batch is
    CORRUPT_MESSAGE whatever else is wrong) and before it rewrites the batch.
    With the records, their one batch's header, as it describes them (the log's append takes it instead of parsing
    the batch again; its CRC is still checked there)."""
    tp = policy.topic_partition
    h = _single_batch(buf, tp)
    if produce_version < 7 and h.compression == rb.COMPRESSION_ZSTD:  # Kafka's ProduceRequest.validateRecords
        raise RecordValidationError(ErrorCode.unsupported_compression_type, f"Produce requests with version "
                                    f"{produce_version} are not allowed to use ZStandard compression")
    try:
        _check_header(h, tp)
        if h.compression == rb.COMPRESSION_NONE:  # scanned where they are in the batch: no slice of it per request
            scanned: Buffer = buf
            first, last = h.position + rb.RECORDS_OFFSET, h.end_position
        else:
            scanned = _records_payload(buf, h, tp)
            first, last = 0, len(scanned)
        # declared: the scan's tuple holds objects, and undeclared the timestamps below were generic additions
        min_delta: int
        max_delta: int
        keyless: int  # how many records have no key
        try:  # the bare tuple: no interpreted wrapper or frozen dataclass per batch
            min_delta, max_delta, keyless, _first_keyless = _SCAN(scanned, h.records_count, first, last)
        except ValueError as exc:  # a malformed record (record_scan's MalformedRecordsError message)
            raise _invalid(f"{exc} in topic partition {tp}") from None
        log_append_batch = h.timestamp_type == rb.TIMESTAMP_TYPE_LOG_APPEND
        if log_append_batch:
            lowest = highest = h.max_timestamp  # a LogAppendTime batch's records all carry its maxTimestamp
        else:
            lowest = h.base_timestamp + min_delta
            highest = h.base_timestamp + max_delta
            if (lowest < -_NATIVE_BOUND or highest > _NATIVE_BOUND) and (lowest < rb.LONG_MIN or highest > _LONG_MAX):
                # some record's base + delta wraps (Java's long sum): only the records themselves say the range
                stamps = [r.timestamp for r in rb.decode_records_payload(memoryview(scanned)[first:last], h)]
                lowest, highest = min(stamps), max(stamps)
        # The scan's range bounds every record: only a batch that may hold a refused record takes the slow path.
        # While now - lowest fits a long, Kafka's wrapping comparison is the plain one and monotonic in the
        # timestamp; a timestamp below that (near Long.MIN_VALUE) is judged record by record, as Kafka would.
        maybe_bad_timestamps = log_append_batch or (
            not policy.log_append_time
            and ((now_ms - lowest > _NATIVE_BOUND and now_ms - lowest > _LONG_MAX)
                 or now_ms - lowest > policy.timestamp_before_max_ms
                 or highest - now_ms > policy.timestamp_after_max_ms)
        )
        if (policy.compacted and keyless) or maybe_bad_timestamps:
            errors = _record_errors(memoryview(scanned)[first:last], h, policy, now_ms)
            if errors:
                _raise_record_errors(errors)
    except RecordValidationError:
        _require_crc(buf, h, tp)
        raise
    highest = max(highest, rb.NO_TIMESTAMP)  # Kafka's maximum starts from NO_TIMESTAMP
    if not policy.log_append_time and not log_append_batch and highest != h.max_timestamp:
        _require_crc(buf, h, tp)  # never re-sign a corrupt batch
        out = bytearray(buf)
        _MAX_TS.pack_into(out, h.position + rb.MAX_TIMESTAMP_OFFSET, highest)  # Kafka's batch.setMaxTimestamp
        crc = _crc32c.crc32c(memoryview(out)[h.position + rb.ATTRIBUTES_OFFSET : h.end_position])
        struct.pack_into(">I", out, h.position + rb.CRC_OFFSET, crc)
        h.max_timestamp, h.crc = highest, crc  # the header of the copy
        return bytes(out), h
    if isinstance(buf, bytearray):
        return bytes(buf), h
    return buf, h  # bytes (small requests, kio's) or a memoryview into a large request's frame: no copy

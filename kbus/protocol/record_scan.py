"""The per-record check of produce validation: every record of a (decompressed) v2 batch is well formed.

What Kafka's DefaultRecord.readFrom and DefaultRecordBatch's iterator refuse, refused here: a length varint that
is negative or runs past the batch, fields that do not fill the length exactly, int32 varints over 5 bytes and
int64 over 10, key/value lengths below -1, a negative header count or header key length, bytes left over after
the batch's record count. kbus also requires offset delta == the record's index (Kafka rewrites a compressed batch
whose inner offsets are not consecutive; no client writes one, and kbus does not re-encode batches).

``scan`` answers the timestamp-delta range (so the timestamp rules bound every record) and the keyless records
(for compacted topics). The compiled ``_recordscan`` (built by setuptools at pip install) does the work on the hot
path; ``scan_py`` below is the same walk in Python: the reference the property tests hold the C code to, and the
fallback when the extension is not built (an old editable install).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kbus.protocol.record_batch import Buffer


@dataclass(frozen=True, slots=True)
class RecordsSummary:
    min_timestamp_delta: int
    max_timestamp_delta: int
    keyless: int
    first_keyless: int  # index of the first record without a key, -1 if none


class MalformedRecordsError(ValueError):
    """A record does not parse, or does not agree with its batch (Kafka: InvalidRecordException)."""


def _uvarint(buf: Buffer, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    value = 0
    for i in range(max_bytes):
        if pos >= end:
            raise ValueError
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return value, pos
    raise ValueError


def _varint32(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    raw, pos = _uvarint(buf, pos, end, 5)
    if raw > 0xFFFFFFFF:
        raise ValueError
    return (raw >> 1) ^ -(raw & 1), pos


def _varint64(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    raw, pos = _uvarint(buf, pos, end, 10)
    raw &= 0xFFFFFFFFFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def _skip_nullable(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    n, pos = _varint32(buf, pos, end)
    if n < -1 or n > end - pos:
        raise ValueError
    return n, pos + max(n, 0)


def scan_py(records: Buffer, count: int, first: int = 0, last: int = -1) -> tuple[int, int, int, int]:
    """Same contract as the compiled ``_recordscan.scan``: the records are ``records[first:last]`` (``last`` -1:
    to the end), so a caller need not slice a larger buffer first."""
    size = len(records)
    if last < 0:
        last = size
    if first < 0 or first > last or last > size:
        raise ValueError(f"records [{first}, {last}) out of a buffer of {size} bytes")
    if count < 0:
        raise ValueError(f"record count {count} is negative")
    end_all = last
    pos = first
    min_ts = max_ts = 0
    keyless, first_keyless = 0, -1
    for i in range(count):
        try:
            length, pos = _varint32(records, pos, end_all)
        except ValueError:
            raise ValueError(f"record {i}: invalid length varint") from None
        if length < 0 or length > end_all - pos:
            raise ValueError(f"record {i}: length {length} runs past the end of the batch ({end_all - pos} bytes left)")
        start, end = pos, pos + length
        what = "attributes"
        try:
            if pos >= end:
                raise ValueError
            pos += 1
            what = "timestamp delta"
            ts_delta, pos = _varint64(records, pos, end)
            what = "offset delta"
            offset_delta, pos = _varint32(records, pos, end)
            if offset_delta != i:
                raise ValueError(f"record {i}: offset delta {offset_delta}, expected {i}")
            what = "key length"
            klen, pos = _skip_nullable(records, pos, end)
            if klen < 0:
                if keyless == 0:
                    first_keyless = i
                keyless += 1
            what = "value length"
            _, pos = _skip_nullable(records, pos, end)
            what = "header count"
            nheaders, pos = _varint32(records, pos, end)
            if nheaders < 0:
                raise ValueError
            for _ in range(nheaders):
                what = "header key length"
                hklen, pos = _skip_nullable(records, pos, end)
                if hklen < 0:
                    raise ValueError
                what = "header value length"
                _, pos = _skip_nullable(records, pos, end)
        except ValueError as exc:
            raise ValueError(str(exc) or f"record {i}: invalid {what}") from None
        if pos != end:
            raise ValueError(f"record {i}: fields take {pos - start} bytes, its length says {length}")
        if i == 0 or ts_delta < min_ts:
            min_ts = ts_delta
        if i == 0 or ts_delta > max_ts:
            max_ts = ts_delta
        pos = end
    if pos != end_all:
        raise ValueError(f"{end_all - pos} bytes left after the batch's {count} records")
    return min_ts, max_ts, keyless, first_keyless


try:
    from kbus.protocol._recordscan import scan as _scan_compiled
except ImportError:  # not built: an editable install from before the extension existed; pip install -e . builds it
    _scan_compiled = None
    logging.getLogger("kbus.protocol").warning(
        "kbus.protocol._recordscan is not built (pip install -e . builds it): produce validation walks records in "
        "Python, about 1 µs per record"
    )

COMPILED = _scan_compiled is not None
_scan = _scan_compiled if _scan_compiled is not None else scan_py
# The scan itself, for compiled callers (kbus.protocol.validation, once per produced batch): the bare
# (min_timestamp_delta, max_timestamp_delta, keyless, first_keyless) tuple, ValueError for a malformed record;
# `scan` wraps it in an interpreted frame and a frozen dataclass (~1 us a call).
scan_tuple = _scan


def scan(records: Buffer, count: int) -> RecordsSummary:
    """Check ``count`` records filling ``records`` exactly; MalformedRecordsError names the first bad one."""
    try:
        return RecordsSummary(*_scan(records, count))
    except ValueError as exc:
        raise MalformedRecordsError(str(exc)) from None

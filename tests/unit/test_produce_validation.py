"""Produce validation (Kafka's LogValidator rules), sans broker: every garbage-batch kind is refused with Kafka's
error, good batches of every codec pass, and the compiled record scan agrees with its Python reference."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbus.common.errors import ErrorCode
from kbus.protocol import record_batch as rb
from kbus.protocol import record_scan
from kbus.protocol.validation import (
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    INVALID_TIMESTAMP,
    RecordValidationError,
    ValidationPolicy,
    validate_produce,
    validate_produce_batch,
)

NOW = 1_700_000_000_000
POLICY = ValidationPolicy("t-0")


def recrc(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, rb.CRC_OFFSET, rb.crc32c(memoryview(buf)[rb.ATTRIBUTES_OFFSET :]))
    return buf


def with_records(records: bytes, count: int, attributes: int = 0) -> bytearray:
    """A CRC-valid batch header around arbitrary record bytes."""
    buf = bytearray(rb.build_batch([(b"k", b"v")] * count, timestamp_ms=NOW))[: rb.RECORDS_OFFSET] + records
    struct.pack_into(">i", buf, rb.LENGTH_OFFSET, len(buf) - rb.LOG_OVERHEAD)
    struct.pack_into(">h", buf, rb.ATTRIBUTES_OFFSET, attributes)
    return recrc(buf)


def refused(buf: bytes | bytearray, policy: ValidationPolicy = POLICY) -> RecordValidationError:
    before = bytes(buf)
    with pytest.raises(RecordValidationError) as info:
        validate_produce(buf, policy, NOW)
    assert bytes(buf) == before  # nothing patched in a refused batch
    return info.value


def test_scan_is_compiled() -> None:
    assert record_scan.COMPILED, "kbus/protocol/_recordscan.c was not built: pip install -e . builds it"


@pytest.mark.parametrize("codec", sorted(rb.COMPRESSION_NAMES))
def test_good_batches_of_every_codec_pass(codec: int) -> None:
    records = [(f"k{i}".encode(), b"v" * i, NOW - i, [("h", b"x"), ("n", None)]) for i in range(50)]
    buf = rb.build_batch(records, compression=codec)  # bytes, as kio decodes a Produce request's records
    assert validate_produce(buf, POLICY, NOW) is buf  # nothing to correct: no copy


@pytest.mark.parametrize("codec", [rb.COMPRESSION_GZIP, rb.COMPRESSION_SNAPPY, rb.COMPRESSION_LZ4, rb.COMPRESSION_ZSTD])
def test_garbage_compressed_payload_is_corrupt_message(codec: int) -> None:
    err = refused(with_records(b"\x00garbage, not a compressed stream" * 3, 1, attributes=codec))
    assert err.error_code == CORRUPT_MESSAGE


def test_compressed_records_that_do_not_parse_are_invalid_record() -> None:
    err = refused(with_records(rb.compress(rb.COMPRESSION_ZSTD, b"\x01\x02\x03 random bytes"), 1,
                               attributes=rb.COMPRESSION_ZSTD))
    assert err.error_code == INVALID_RECORD


def test_decompression_bomb_is_corrupt_message(monkeypatch: pytest.MonkeyPatch) -> None:
    import kbus.protocol.validation as validation

    monkeypatch.setattr(validation, "MAX_UNCOMPRESSED_BATCH_BYTES", 1 << 20)
    bomb = rb.compress(rb.COMPRESSION_ZSTD, b"\0" * (4 << 20))
    err = refused(with_records(bomb, 1, attributes=rb.COMPRESSION_ZSTD))
    assert err.error_code == CORRUPT_MESSAGE and "more than" in str(err)


def test_random_bytes_as_records_are_invalid_record() -> None:
    assert refused(with_records(b"\xff" * 40, 3)).error_code == INVALID_RECORD


def test_negative_key_length_is_invalid_record() -> None:
    good = bytearray(rb.build_batch([(b"key", b"value")], timestamp_ms=NOW))
    # record: length, attributes, ts delta, offset delta, key length (zigzag 3 -> 6) ...
    key_len_at = rb.RECORDS_OFFSET + 4
    assert good[key_len_at] == 6
    good[key_len_at] = 5  # zigzag 5 = -3
    assert refused(recrc(good)).error_code == INVALID_RECORD


def test_record_length_past_the_batch_and_trailing_bytes() -> None:
    good = bytes(rb.build_batch([(b"k", b"v")], timestamp_ms=NOW))
    records = good[rb.RECORDS_OFFSET :]
    assert refused(with_records(records + b"\x00", 1)).error_code == INVALID_RECORD
    assert refused(with_records(records[:-1], 1)).error_code == INVALID_RECORD


def test_offset_delta_must_match_the_record_index() -> None:
    good = bytearray(rb.build_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=NOW))
    first_len = good[rb.RECORDS_OFFSET] >> 1
    second = rb.RECORDS_OFFSET + 1 + first_len
    assert good[second + 3] == 2  # zigzag(1)
    good[second + 3] = 4  # offset delta 2 for record 1
    err = refused(recrc(good))
    assert err.error_code == INVALID_RECORD and "offset delta" in str(err)


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (lambda b: struct.pack_into(">h", b, rb.ATTRIBUTES_OFFSET, rb.CONTROL_FLAG_MASK), "control records"),
        (lambda b: struct.pack_into(">i", b, rb.LAST_OFFSET_DELTA_OFFSET, 5), "Inconsistent batch offset range"),
        (lambda b: struct.pack_into(">i", b, rb.LAST_OFFSET_DELTA_OFFSET, -1), "invalid offset range"),
        (lambda b: struct.pack_into(">h", b, rb.ATTRIBUTES_OFFSET, 6), "Unknown compression type"),
        (lambda b: struct.pack_into(">qhi", b, rb.PRODUCER_ID_OFFSET, 7, 0, -1), "Invalid sequence number"),
    ],
)
def test_batch_header_rules(patch, message: str) -> None:
    buf = bytearray(rb.build_batch([(b"k", b"v")] * 2, timestamp_ms=NOW))
    patch(buf)
    err = refused(recrc(buf))
    assert err.error_code == INVALID_RECORD and message in str(err)


def test_base_offset_must_be_zero_and_crc_and_magic() -> None:
    buf = bytearray(rb.build_batch([(b"k", b"v")], timestamp_ms=NOW))
    moved = bytearray(buf)
    struct.pack_into(">q", moved, 0, 5)
    assert "should be 0" in str(refused(moved))
    bad_crc = bytearray(buf)
    bad_crc[-1] ^= 1
    assert refused(bad_crc).error_code == CORRUPT_MESSAGE
    old_magic = bytearray(buf)
    old_magic[rb.MAGIC_OFFSET] = 1
    assert refused(old_magic).error_code == INVALID_RECORD
    assert refused(bytearray(buf + buf)).error_code == INVALID_RECORD  # one batch per partition
    assert refused(bytearray(buf[:-2])).error_code == CORRUPT_MESSAGE


def test_keyless_records_on_a_compacted_topic_carry_record_errors() -> None:
    buf = bytearray(rb.build_batch([(b"k", b"v"), (None, b"v"), (b"k", b"v"), (None, b"v")], timestamp_ms=NOW))
    compacted = ValidationPolicy("t-0", compacted=True)
    err = refused(buf, compacted)
    assert err.error_code == INVALID_RECORD
    assert [e.batch_index for e in err.record_errors] == [1, 3]
    assert err.record_errors[0].message == "Compacted topic cannot accept message without key in topic partition t-0."
    assert str(err).startswith("One or more records have been rejected due to 2 record errors in total")
    validate_produce(buf, POLICY, NOW)  # fine when not compacted


def test_timestamps_per_record_against_before_and_after() -> None:
    policy = ValidationPolicy("t-0", timestamp_before_max_ms=60_000, timestamp_after_max_ms=1_000)
    ok = bytearray(rb.build_batch([(b"k", b"v", NOW - 59_000), (b"k", b"v", NOW + 900)]))
    validate_produce(ok, policy, NOW)
    late = bytearray(rb.build_batch([(b"k", b"v", NOW), (b"k", b"v", NOW - 61_000), (b"k", b"v", NOW + 2_000)]))
    err = refused(late, policy)
    assert err.error_code == INVALID_TIMESTAMP
    assert str(err) == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in err.record_errors] == [1, 2]
    assert "is out of range" in err.record_errors[0].message


def test_timestamp_bounds_follow_kafka_precedence() -> None:
    long_max = 2**63 - 1
    assert ValidationPolicy.timestamp_bounds(5000, long_max, long_max) == (5000, 5000)
    assert ValidationPolicy.timestamp_bounds(5000, 100, long_max) == (100, 5000)


def test_log_append_time_from_a_producer_is_invalid_timestamp() -> None:
    buf = bytearray(rb.build_batch([(b"k", b"v")], timestamp_ms=NOW, timestamp_type=rb.TIMESTAMP_TYPE_LOG_APPEND))
    err = refused(buf, ValidationPolicy("t-0", log_append_time=True))
    assert err.error_code == INVALID_TIMESTAMP


def test_lying_max_timestamp_is_corrected_like_kafka() -> None:
    buf = bytearray(rb.build_batch([(b"k", b"v", NOW - 10), (b"k", b"v", NOW)]))
    struct.pack_into(">q", buf, rb.MAX_TIMESTAMP_OFFSET, NOW + 10**9)
    recrc(buf)
    fixed = validate_produce(buf, POLICY, NOW)
    h = rb.read_header(fixed)
    assert h.max_timestamp == NOW and h.is_valid(fixed)
    corrupt = bytearray(buf)
    struct.pack_into(">q", corrupt, rb.MAX_TIMESTAMP_OFFSET, NOW + 10**9 + 1)  # lying and not signed
    assert refused(corrupt).error_code == CORRUPT_MESSAGE


def test_the_header_validation_hands_on_is_the_one_of_the_records_it_returns() -> None:
    """The log's append takes validation's header instead of parsing the batch again: it must describe the
    records returned, the client's as they are or the copy whose maxTimestamp was corrected (new CRC)."""
    good = rb.build_batch([(b"k", b"v", NOW - 10), (b"k", b"v", NOW)])
    records, h = validate_produce_batch(good, POLICY, NOW)
    assert records is good and rb.batch_headers(records) == [h]
    lying = bytearray(good)
    struct.pack_into(">q", lying, rb.MAX_TIMESTAMP_OFFSET, NOW + 10**9)
    recrc(lying)
    records, h = validate_produce_batch(lying, POLICY, NOW)
    assert rb.batch_headers(records) == [h] and h.max_timestamp == NOW and h.is_valid(records)


# ---- the compiled scan agrees with the Python reference on every input ----

record_tuples = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=40),
        st.integers(NOW - 10**6, NOW + 10**6),
        st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3),
    ),
    min_size=1,
    max_size=20,
)


from kbus.protocol._recordscan import scan as compiled_scan  # noqa: E402  (built by pip install)


def _outcome(fn, data: bytes, count: int) -> object:
    try:
        return fn(data, count)
    except ValueError as exc:
        return ("error", str(exc))


@settings(max_examples=500, deadline=None, derandomize=True)
@given(record_tuples, st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
       st.integers(-1, 2))
def test_compiled_scan_matches_the_reference(records, flips, count_skew) -> None:
    data = bytearray(rb.build_batch(records)[rb.RECORDS_OFFSET :])
    for at, value in flips:
        if data:
            data[at % len(data)] = value
    count = len(records) + count_skew
    assert _outcome(compiled_scan, bytes(data), count) == _outcome(record_scan.scan_py, bytes(data), count)
    if not flips and count_skew == 0:
        min_d, max_d, keyless, first = record_scan.scan_py(bytes(data), count)
        assert keyless == sum(1 for r in records if r[0] is None)
        assert first == next((i for i, r in enumerate(records) if r[0] is None), -1)
        assert max_d - min_d == max(r[2] for r in records) - min(r[2] for r in records)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(record_tuples, st.binary(max_size=70), st.binary(max_size=9), st.integers(-1, 1))
def test_a_scan_of_a_window_is_the_scan_of_its_slice(records, before, after, count_skew) -> None:
    """scan(buf, count, first, last) reads buf[first:last] only (validation passes the whole batch and where its
    records are), in the compiled scan and its reference alike; a window outside the buffer is a ValueError."""
    data = rb.build_batch(records)[rb.RECORDS_OFFSET :]
    buf = before + data + after
    first, last = len(before), len(before) + len(data)
    count = len(records) + count_skew
    for fn in (compiled_scan, record_scan.scan_py):
        assert _outcome(lambda b, c, fn=fn: fn(b, c, first, last), buf, count) == _outcome(fn, data, count)
        if not after:
            assert _outcome(lambda b, c, fn=fn: fn(b, c, first), buf, count) == _outcome(fn, data, count)
    for bad in ((-1, last), (last, first - 1) if first else (1, 0), (first, len(buf) + 1)):
        errors = [_outcome(lambda b, c, fn=fn, bad=bad: fn(b, c, *bad), buf, count)
                  for fn in (compiled_scan, record_scan.scan_py)]
        message = f"records [{bad[0]}, {bad[1]}) out of a buffer of {len(buf)} bytes"
        assert errors[0] == errors[1] == ("error", message)


def test_zstd_needs_produce_v7() -> None:
    buf = rb.build_batch([(b"k", b"v")], timestamp_ms=NOW, compression=rb.COMPRESSION_ZSTD)
    with pytest.raises(RecordValidationError) as info:
        validate_produce(buf, POLICY, NOW, produce_version=6)
    assert info.value.error_code == 76  # UNSUPPORTED_COMPRESSION_TYPE
    assert validate_produce(buf, POLICY, NOW, produce_version=7) is buf


# ---- timestamps are Java longs: base + delta and now - timestamp wrap as in Kafka, never raise ----

LONG = st.integers(-(2**63), 2**63 - 1)


def raw_batch(base_ts: int, deltas: list[int], max_ts: int, attributes: int = 0) -> bytearray:
    """A CRC-valid batch with any baseTimestamp, timestampDeltas and maxTimestamp (build_batch derives them)."""
    body = bytearray()
    for i, delta in enumerate(deltas):
        rb.encode_record(body, i, delta, b"k", b"v", [])
    out = bytearray(rb.RECORD_BATCH_OVERHEAD + len(body))
    rb.HEADER_STRUCT.pack_into(out, 0, 0, rb.RECORD_BATCH_OVERHEAD - rb.LOG_OVERHEAD + len(body), -1, 2, 0,
                               attributes, len(deltas) - 1, base_ts, max_ts, -1, -1, -1, len(deltas))
    out[rb.RECORDS_OFFSET :] = body
    return recrc(out)


def _jlong(n: int) -> int:  # Java's long, written out independently of rb.java_long
    n &= 2**64 - 1
    return n - 2**64 if n >= 2**63 else n


def kafka_outcome(base_ts: int, deltas: list[int], before: int, after: int) -> tuple[str, object]:
    """Kafka 3.9's LogValidator, transcribed: record timestamp = baseTimestamp + delta (long), refused when
    ``now - ts > before || -1 * (now - ts) > after`` (long), batch maxTimestamp = max(NO_TIMESTAMP, timestamps)."""
    stamps = [_jlong(base_ts + d) for d in deltas]
    bad = [i for i, ts in enumerate(stamps)
           if ts != -1 and (_jlong(NOW - ts) > before or _jlong(-_jlong(NOW - ts)) > after)]
    if bad:
        return "refused", bad
    return "appended", max([-1, *stamps])


@settings(max_examples=400, deadline=None, derandomize=True)
@given(LONG, st.lists(LONG | st.integers(-1000, 1000), min_size=1, max_size=6), LONG,
       st.sampled_from([2**63 - 1, 3_600_000, 0]), st.sampled_from([2**63 - 1, 3_600_000, 0]))
def test_any_timestamps_give_kafkas_answer_never_an_exception(base_ts, deltas, max_ts, before, after) -> None:
    """Issue 28: a batch whose base + delta left int64 raised struct.error inside the broker. Kafka wraps the sum,
    accepts it under unbounded timestamp configs and refuses it (INVALID_TIMESTAMP) under bounded ones."""
    buf = raw_batch(base_ts, deltas, max_ts)
    policy = ValidationPolicy("t-0", timestamp_before_max_ms=before, timestamp_after_max_ms=after)
    kind, expected = kafka_outcome(base_ts, deltas, before, after)
    try:
        out = validate_produce(bytes(buf), policy, NOW)
    except RecordValidationError as exc:
        assert kind == "refused" and exc.error_code == INVALID_TIMESTAMP
        assert [e.batch_index for e in exc.record_errors] == expected
        return
    assert kind == "appended", f"Kafka refuses records {expected}"
    h = rb.read_header(out)
    assert h.max_timestamp == expected and h.is_valid(out)
    stamps = [r.timestamp for r in rb.decode_records(out)]
    assert stamps == [_jlong(base_ts + d) for d in deltas]


def test_overflowing_timestamps_wrap_like_kafka() -> None:
    """The frames of issue 28's fuzz run, with what Kafka 3.9.2 answered to them (checked against a real broker)."""
    long_max = 2**63 - 1
    up = raw_batch(long_max - 10, [0, 100], long_max - 10)
    assert rb.read_header(validate_produce(bytes(up), POLICY, NOW)).max_timestamp == long_max - 10
    assert [r.timestamp for r in rb.decode_records(up)] == [long_max - 10, -(2**63) + 89]
    down = raw_batch(-(2**63) + 10, [0, -100], -(2**63) + 10)
    assert rb.read_header(validate_produce(bytes(down), POLICY, NOW)).max_timestamp == long_max - 89
    lowest = raw_batch(-(2**63), [0], -(2**63))  # now - Long.MIN_VALUE wraps: passes unbounded configs
    assert rb.read_header(validate_produce(bytes(lowest), POLICY, NOW)).max_timestamp == -1
    bounded = ValidationPolicy("t-0", timestamp_before_max_ms=3_600_000, timestamp_after_max_ms=3_600_000)
    err = refused(up, bounded)
    assert err.error_code == INVALID_TIMESTAMP
    assert err.record_errors[1].message.startswith(f"Timestamp {-(2**63) + 89} of message with offset 1 is out of "
                                                   f"range. The timestamp should be within [{NOW - 3_600_000}, ")
    unbounded_text = refused(lowest, ValidationPolicy("t-0", timestamp_before_max_ms=0, timestamp_after_max_ms=0))
    assert unbounded_text.error_code == INVALID_TIMESTAMP


def test_record_batch_errors_carry_their_kafka_codes() -> None:
    """Compiled by mypyc, a class-level error_code in an exception subclass was lost (UNKNOWN_SERVER_ERROR)."""
    assert rb.CorruptRecordError("x").error_code == ErrorCode.corrupt_message
    assert rb.InvalidRecordError("x").error_code == ErrorCode.invalid_record

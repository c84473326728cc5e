from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kbus.protocol import record_batch as rb


def kafka_python_batch(n: int = 3, *, compression: int = 0, producer_id: int = -1, epoch: int = -1,
                       base_sequence: int = -1, ts: int = 1_700_000_000_000) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False, producer_id=producer_id,
        producer_epoch=epoch, base_sequence=base_sequence, batch_size=1 << 20,
    )
    for i in range(n):
        builder.append(i, timestamp=ts + i, key=f"k{i}".encode(), value=f"value-{i}".encode(),
                       headers=[("h", b"x")] if i == 0 else [])
    return bytes(builder.build())


def test_header_layout_constants() -> None:
    assert rb.RECORD_BATCH_OVERHEAD == 61
    assert rb.LOG_OVERHEAD == 12
    assert rb.RECORDS_OFFSET == 61


def test_read_header_of_kafka_python_batch() -> None:
    buf = kafka_python_batch(3, producer_id=7, epoch=2, base_sequence=10)
    h = rb.read_header(buf)
    assert h.magic == 2
    assert h.size == len(buf)
    assert h.records_count == 3
    assert h.last_offset_delta == 2
    assert h.base_timestamp == 1_700_000_000_000
    assert h.max_timestamp == 1_700_000_000_002
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (7, 2, 10, 12)
    assert h.compression == 0 and h.timestamp_type == 0
    assert not h.is_transactional and not h.is_control
    assert h.is_valid(buf)
    assert h.next_offset == 3


def test_build_batch_matches_kafka_python_reader() -> None:
    buf = rb.build_batch([(b"k0", b"v0"), (None, b"v1"), (b"k2", None, 5, [("a", b"b"), ("n", None)])],
                         timestamp_ms=3, base_offset=100, producer_id=9, producer_epoch=1, base_sequence=4)
    batch = DefaultRecordBatch(buf)
    assert batch.validate_crc()
    recs = list(batch)
    assert [r.offset for r in recs] == [100, 101, 102]
    assert [r.key for r in recs] == [b"k0", None, b"k2"]
    assert [r.value for r in recs] == [b"v0", b"v1", None]
    assert [r.timestamp for r in recs] == [3, 3, 5]
    assert recs[2].headers == [("a", b"b"), ("n", None)]


# kafka-python here has only gzip built in (no python-snappy/lz4/zstandard), so it cross-checks codecs 0 and 1
@pytest.mark.parametrize("codec", [0, 1])
def test_decode_records_of_kafka_python_batch(codec: int) -> None:
    buf = kafka_python_batch(50, compression=codec)
    h = rb.read_header(buf)
    assert h.compression == codec
    recs = rb.decode_records(buf, h)
    assert len(recs) == 50
    assert recs[0].headers == [("h", b"x")]
    assert recs[49].key == b"k49" and recs[49].value == b"value-49"
    assert recs[49].timestamp == 1_700_000_000_049
    assert recs[49].offset == 49


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_build_compressed_roundtrip_and_kafka_python_reads_it(codec: int) -> None:
    records = [(f"k{i}".encode(), b"x" * 100) for i in range(500)]
    buf = rb.build_batch(records, compression=codec, timestamp_ms=1)
    h = rb.read_header(buf)
    assert h.compression == codec
    assert [(r.key, r.value) for r in rb.decode_records(buf, h)] == records
    if codec in (0, 1):
        assert [(r.key, r.value) for r in DefaultRecordBatch(buf)] == records


def test_lz4_frames_have_independent_blocks() -> None:
    framed = rb.compress(rb.COMPRESSION_LZ4, b"abc" * 100_000)
    assert framed[:4] == b"\x04\x22\x4d\x18"
    assert framed[4] & 0x20  # FLG block-independence bit: Kafka's Java reader needs it
    assert rb.decompress(rb.COMPRESSION_LZ4, framed) == b"abc" * 100_000


def test_snappy_accepts_raw_and_xerial() -> None:
    import cramjam

    data = b"hello snappy" * 1000
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert rb.decompress(rb.COMPRESSION_SNAPPY, raw) == data
    framed = rb.compress(rb.COMPRESSION_SNAPPY, data)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert rb.decompress(rb.COMPRESSION_SNAPPY, framed) == data


# the two walks of whole batches: the generator, and the list the Produce path builds (one set of rules)
Walk = Callable[[bytes | bytearray, bool], list[rb.BatchHeader]]
WALKS: list[Walk] = [
    lambda buf, crc: list(rb.iter_batches(buf, verify_crc=crc)),
    lambda buf, crc: rb.batch_headers(buf, verify_crc=crc),
]


@pytest.mark.parametrize("walk", WALKS, ids=["iter_batches", "batch_headers"])
def test_iter_batches_walks_concatenated_batches(walk: Walk) -> None:
    buf = kafka_python_batch(2) + rb.build_batch([(b"a", b"b")]) + kafka_python_batch(5)
    headers = walk(buf, True)
    assert [h.records_count for h in headers] == [2, 1, 5]
    assert headers[1].position == headers[0].size
    assert sum(h.size for h in headers) == len(buf)
    assert headers == [rb.read_header(buf, h.position) for h in headers]
    assert walk(b"", True) == []


@pytest.mark.parametrize("walk", WALKS, ids=["iter_batches", "batch_headers"])
def test_crc_failure_detected(walk: Walk) -> None:
    buf = bytearray(kafka_python_batch(3))
    buf[-1] ^= 0xFF
    with pytest.raises(rb.CorruptRecordError, match="crc"):
        walk(buf, True)
    # without verification the walk succeeds
    assert len(walk(buf, False)) == 1


@pytest.mark.parametrize("walk", WALKS, ids=["iter_batches", "batch_headers"])
def test_truncated_and_oversized_batches_are_corrupt(walk: Walk) -> None:
    buf = kafka_python_batch(3)
    with pytest.raises(rb.CorruptRecordError):
        walk(buf[:-1], False)
    with pytest.raises(rb.CorruptRecordError):
        walk(buf[:40], False)
    with pytest.raises(rb.CorruptRecordError):
        rb.read_header(buf[:60])
    bad_len = bytearray(buf)
    struct.pack_into(">i", bad_len, 8, 10)
    with pytest.raises(rb.CorruptRecordError):
        rb.read_header(bad_len)
    with pytest.raises(rb.CorruptRecordError):
        walk(bad_len, False)


@pytest.mark.parametrize("walk", WALKS, ids=["iter_batches", "batch_headers"])
def test_wrong_magic_is_invalid(walk: Walk) -> None:
    buf = bytearray(kafka_python_batch(1))
    buf[16] = 1
    with pytest.raises(rb.InvalidRecordError):
        walk(buf, True)


def test_iter_complete_batches_stops_at_torn_tail() -> None:
    one = kafka_python_batch(2)
    two = kafka_python_batch(3)
    buf = one + two
    for cut in (len(one), len(one) + 5, len(one) + 61, len(buf) - 1):
        assert [h.records_count for h in rb.iter_complete_batches(buf[:cut])] == [2]
    assert len(list(rb.iter_complete_batches(buf))) == 2
    corrupt = bytearray(buf)
    corrupt[-3] ^= 1
    assert len(list(rb.iter_complete_batches(corrupt, verify_crc=True))) == 1
    assert len(list(rb.iter_complete_batches(corrupt, verify_crc=False))) == 2


def test_patch_base_offset_and_epoch_keep_crc_valid() -> None:
    buf = bytearray(kafka_python_batch(4))
    rb.set_base_offset(buf, 0, 12345)
    rb.set_partition_leader_epoch(buf, 0, 7)
    h = rb.read_header(buf)
    assert h.base_offset == 12345 and h.last_offset == 12348
    assert h.partition_leader_epoch == 7
    assert h.is_valid(buf)
    assert [r.offset for r in DefaultRecordBatch(bytes(buf))] == [12345, 12346, 12347, 12348]


def test_patch_in_the_middle_of_a_buffer() -> None:
    first = kafka_python_batch(1)
    buf = bytearray(first + kafka_python_batch(2))
    rb.set_base_offset(buf, len(first), 50)
    hs = list(rb.iter_batches(buf, verify_crc=True))
    assert hs[1].base_offset == 50 and hs[0].base_offset == 0


def test_set_log_append_time_recomputes_crc() -> None:
    buf = bytearray(kafka_python_batch(3))
    rb.set_log_append_time(buf, 0, 42_000)
    h = rb.read_header(buf)
    assert h.timestamp_type == rb.TIMESTAMP_TYPE_LOG_APPEND
    assert h.max_timestamp == 42_000
    assert h.is_valid(buf)
    assert all(r.timestamp == 42_000 for r in rb.decode_records(buf, h))
    assert all(r.timestamp == 42_000 for r in DefaultRecordBatch(bytes(buf)))


def test_last_sequence_wraps() -> None:
    buf = kafka_python_batch(5, producer_id=1, epoch=0, base_sequence=2**31 - 2)
    h = rb.read_header(buf)
    assert h.last_sequence == 2
    assert rb.increment_sequence(2**31 - 1, 1) == 0
    assert rb.read_header(kafka_python_batch(2)).last_sequence == -1


def test_transactional_and_control_flags() -> None:
    buf = rb.build_batch([(b"k", b"v")], is_transactional=True, is_control=True, producer_id=3,
                         producer_epoch=0)
    h = rb.read_header(buf)
    assert h.is_transactional and h.is_control


@pytest.mark.parametrize("n", [0, 1, -1, 63, -64, 64, 300, -300, 2**31 - 1, -(2**31), 2**62, -(2**63)])
def test_varint_roundtrip(n: int) -> None:
    out = bytearray()
    rb.encode_varint(n, out)
    assert len(out) == rb.size_of_varint(n)
    assert rb.decode_varint(out, 0) == (n, len(out))


def test_decode_rejects_garbage_records() -> None:
    buf = bytearray(rb.build_batch([(b"k", b"v")]))
    struct.pack_into(">i", buf, rb.RECORDS_COUNT_OFFSET, 2)  # claims one more record than it holds
    with pytest.raises(rb.CorruptRecordError):
        rb.decode_records(buf)


@pytest.mark.parametrize("codec", [0, 1, 4])
def test_rebuild_batch_keeps_offsets_and_header_fields(codec: int) -> None:
    buf = rb.build_batch([(f"k{i}".encode(), f"v{i}".encode(), 100 + i) for i in range(5)], base_offset=40,
                         producer_id=3, producer_epoch=1, base_sequence=7, partition_leader_epoch=2,
                         compression=codec)
    h = rb.read_header(buf)
    recs = rb.decode_records(buf, h)
    out = rb.rebuild_batch(h, [recs[1], recs[4]])
    h2 = rb.read_header(out)
    assert h2.is_valid(out)
    assert (h2.base_offset, h2.last_offset, h2.records_count) == (40, 44, 2)
    assert (h2.producer_id, h2.producer_epoch, h2.base_sequence, h2.partition_leader_epoch) == (3, 1, 7, 2)
    assert h2.compression == codec and h2.max_timestamp == 104
    kept = rb.decode_records(out, h2)
    assert [(r.offset, r.key, r.timestamp) for r in kept] == [(41, b"k1", 101), (44, b"k4", 104)]

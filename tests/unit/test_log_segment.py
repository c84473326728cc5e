"""Segments and their indexes: file formats, lookups, sanity checks, truncation."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from kbus.common.topic_config import LogConfig
from kbus.protocol import record_batch as rb
from kbus.server.log.index import OffsetIndex, TimeIndex
from kbus.server.log.segment import LogSegment, filename_prefix, write_all


def test_filename_prefix_is_20_digits() -> None:
    assert filename_prefix(0) == "00000000000000000000"
    assert filename_prefix(1234) == "00000000000000001234"


def test_write_all_writes_every_kind_of_buffer_whole(tmp_path: Path) -> None:
    """One write(2) when the file takes it all (the append's case), for every buffer an append writes from."""
    path = tmp_path / "out.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        write_all(fd, b"abc")
        write_all(fd, bytearray(b"def"))
        write_all(fd, memoryview(bytearray(b"..ghi"))[2:])  # a slice of a frame, as a large request's records
        write_all(fd, b"")
        write_all(fd, bytes(range(256)) * 300)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"abcdefghi" + bytes(range(256)) * 300


def test_offset_index_file_format_and_lookup(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, max_entries=3)
    idx.append(110, 4096)
    idx.append(105, 9000)  # not increasing: ignored
    idx.append(130, 8192)
    idx.flush_pending()
    assert idx.path.read_bytes() == struct.pack(">iiii", 10, 4096, 30, 8192)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(110) == (110, 4096)
    assert idx.lookup(129) == (110, 4096)
    assert idx.lookup(10**9) == (130, 8192)
    idx.append(140, 10000)
    idx.append(150, 20000)  # full at 3 entries
    assert idx.is_full and len(idx) == 3
    idx.truncate_to_position(8192)
    assert idx.entries() == [(110, 4096)]
    assert idx.path.stat().st_size == 8
    idx.close()
    again = OffsetIndex(idx.path, 100, max_entries=10)
    assert again.load(log_size=5000)
    assert again.entries() == [(110, 4096)]
    assert not again.load(log_size=4096)  # points past the end of the log: rebuild


def test_offset_index_rejects_garbage(tmp_path: Path) -> None:
    p = tmp_path / "x.index"
    p.write_bytes(b"\x00" * 7)
    assert not OffsetIndex(p, 0, 10).load(1000)
    p.write_bytes(struct.pack(">iiii", 5, 100, 5, 200))  # offsets not increasing
    assert not OffsetIndex(p, 0, 10).load(1000)
    p.write_bytes(b"\x00" * 32)  # a preallocated, never-trimmed Kafka index after a crash
    assert not OffsetIndex(p, 0, 10).load(1000)


def test_time_index_format_and_lookup(tmp_path: Path) -> None:
    ti = TimeIndex(tmp_path / "00000000000000000050.timeindex", 50, max_entries=10)
    ti.maybe_append(1000, 55)
    ti.maybe_append(1000, 60)  # same timestamp: only a new maximum is recorded
    ti.maybe_append(900, 61)
    ti.maybe_append(2000, 70)
    ti.flush_pending()
    assert ti.path.read_bytes() == struct.pack(">qiqi", 1000, 5, 2000, 20)
    assert ti.lookup(999) == (-1, 50)
    assert ti.lookup(1500) == (1000, 55)
    assert ti.lookup(2000) == (2000, 70)
    ti.truncate_to_offset(70)
    assert ti.entries() == [(1000, 55)]
    ti.close()
    again = TimeIndex(ti.path, 50, 10)
    assert again.load() and again.entries() == [(1000, 55)]


def _batch(n: int, ts: int) -> bytes:
    return rb.build_batch([(b"k", b"v" * 30)] * n, timestamp_ms=ts)


def _append(seg: LogSegment, base_offset: int, data: bytes) -> None:
    buf = bytearray(data)
    h = rb.read_header(buf)
    rb.set_base_offset(buf, 0, base_offset)
    h.base_offset = base_offset
    seg.append(buf, [h], now_ms=0)


def test_segment_append_find_read_truncate(tmp_path: Path) -> None:
    cfg = LogConfig(index_interval_bytes=1)
    seg = LogSegment.create(tmp_path, 1000, cfg)
    size = len(_batch(2, 0))
    for i in range(10):
        _append(seg, 1000 + 2 * i, _batch(2, 10 * i))
    assert seg.log_path.name == "00000000000000001000.log"
    assert seg.size == 10 * size and seg.next_offset == 1020
    assert (seg.max_timestamp, seg.offset_of_max_timestamp) == (90, 1019)
    assert len(seg.index) == 9  # every batch but the first (Kafka indexes once bytes since the last entry > 1)
    h = seg.find_batch(1007)
    assert h is not None and (h.base_offset, h.position) == (1006, 3 * size)
    assert seg.find_batch(1020) is None
    # (position, size, first base offset, offset after the last batch)
    assert seg.read(1007, 2 * size, None, True) == (3 * size, 2 * size, 1006, 1010)
    assert seg.read(1007, 1, None, False) == (3 * size, 0, 1006, 1006)
    assert seg.read(1007, 1, None, True) == (3 * size, size, 1006, 1008)  # KIP-74: the first batch whatever its size
    assert seg.read(1007, 10**6, 1010, True) == (3 * size, 2 * size, 1006, 1010)  # up to the high watermark
    assert seg.read(1007, 10**6, None, True) == (3 * size, 7 * size, 1006, 1020)  # to the segment's end
    assert seg.read(1007, 3 * size - 1, None, True) == (3 * size, 2 * size, 1006, 1010)  # ends mid-batch: whole ones
    removed = seg.truncate_to(1011)  # drops the batch holding 1011 (1010-1011) and everything after
    assert removed == 5 * size and seg.size == 5 * size and seg.next_offset == 1010
    assert seg.max_timestamp == 40
    assert seg.index.entries()[-1] == (1009, 4 * size)
    assert seg.time_index.entries()[-1] == (40, 1009)
    seg.close()


def test_segment_walk_handles_large_and_torn_batches(tmp_path: Path) -> None:
    seg = LogSegment.create(tmp_path, 0, LogConfig())
    _append(seg, 0, rb.build_batch([(None, b"x" * 100_000)]))
    _append(seg, 1, _batch(3, 5))
    _append(seg, 4, rb.build_batch([(None, b"y" * 200_000)]))
    with open(seg.log_path, "ab") as f:
        f.write(_batch(1, 0)[:40])  # torn tail
    seg.size += 40
    assert [(h.base_offset, h.records_count) for h in seg.walk()] == [(0, 1), (1, 3), (4, 1)]
    assert [h.base_offset for h in seg.iter_batches(verify_crc=True)] == [0, 1, 4]
    seg.close()
    reopened = LogSegment.open(tmp_path, 0, LogConfig())
    assert reopened.recover() == 40
    assert reopened.next_offset == 5 and reopened.size == seg.size - 40
    reopened.close()

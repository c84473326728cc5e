"""The partition Log: offsets, reads, roll, retention, truncation, recovery, idempotence, timestamps."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from kbus.protocol import record_batch as rb
from kbus.server.log import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    Log,
    LogConfig,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
)
from kbus.server.log.errors import UnexpectedAppendOffsetError
from kbus.server.log.index import PENDING_WRITE_BYTES


class Clock:
    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def batch(n: int = 1, *, ts: int = 1_700_000_000_000, value: bytes = b"v" * 20, pid: int = -1, epoch: int = -1,
          seq: int = -1, key_prefix: str = "k") -> bytes:
    return rb.build_batch([(f"{key_prefix}{i}".encode(), value, ts + i) for i in range(n)], producer_id=pid,
                          producer_epoch=epoch, base_sequence=seq)


def open_log(tmp_path: Path, clock: Clock | None = None, **cfg: object) -> Log:
    cfg.setdefault("file_delete_delay_ms", 0)
    return Log.open(tmp_path / "topic-0", LogConfig(**cfg), time_ms=clock or Clock())  # type: ignore[arg-type]


def offsets_of(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for h in rb.iter_batches(data, verify_crc=True)]


def all_records(lg: Log, start: int = 0) -> list[rb.Record]:
    out: list[rb.Record] = []
    offset = max(start, lg.log_start_offset)
    while offset < lg.log_end_offset:
        data = lg.read(offset, 1 << 20).to_bytes()
        assert data, f"nothing read at {offset}"
        for h in rb.iter_batches(data, verify_crc=True):
            out += [r for r in rb.decode_records(data, h) if r.offset >= offset]
            offset = h.next_offset
    return out


def test_offset_assignment_and_files(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    r1 = lg.append_as_leader(batch(3))
    r2 = lg.append_as_leader(batch(2) + batch(4), leader_epoch=5)
    assert (r1.first_offset, r1.last_offset, r1.num_batches) == (0, 2, 1)
    assert (r2.first_offset, r2.last_offset, r2.num_batches, r2.num_records) == (3, 8, 2, 6)
    assert r1.log_append_time_ms == -1 and not r1.duplicate
    assert lg.log_end_offset == 9
    data = lg.read(0, 1 << 20).to_bytes()
    assert offsets_of(data) == [(0, 2), (3, 4), (5, 8)]
    headers = list(rb.iter_batches(data, verify_crc=True))
    assert [h.partition_leader_epoch for h in headers] == [0, 5, 5]
    assert [r.offset for r in all_records(lg)] == list(range(9))
    names = sorted(p.name for p in (tmp_path / "topic-0").iterdir())
    assert "00000000000000000000.log" in names
    assert "00000000000000000000.index" in names
    assert "00000000000000000000.timeindex" in names
    assert (lg.topic, lg.partition) == ("topic", 0)


def test_topic_names_with_dashes(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "my-topic-name-12", LogConfig())
    assert (lg.topic, lg.partition) == ("my-topic-name-12"[:-3], 12)


def test_invalid_input_is_rejected_without_writing(tmp_path: Path) -> None:
    lg = open_log(tmp_path, max_message_bytes=500)
    good = bytearray(batch(2))
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0x55
    with pytest.raises(CorruptRecordError):
        lg.append_as_leader(bytes(good) + bytes(bad_crc))
    with pytest.raises(CorruptRecordError):
        lg.append_as_leader(bytes(good)[:-3])
    old_magic = bytearray(good)
    old_magic[rb.MAGIC_OFFSET] = 1
    with pytest.raises(InvalidRecordError):
        lg.append_as_leader(bytes(old_magic))
    with pytest.raises(RecordTooLargeError):
        lg.append_as_leader(batch(1, value=b"x" * 600))
    with pytest.raises(InvalidRecordError):
        lg.append_as_leader(b"")
    assert lg.log_end_offset == 0 and lg.size_bytes == 0
    assert lg.append_as_leader(bytes(good)).first_offset == 0


def test_crc_is_checked_on_client_appends_not_on_the_coordinators_own(tmp_path: Path) -> None:
    """A client's batch (the default origin) has its CRC checked; one a coordinator of this broker built (Kafka's
    AppendOrigin.COORDINATOR) is not checked again, and a reader (a follower) still finds a bad one."""
    lg = open_log(tmp_path)
    bad = bytearray(batch(2))
    bad[-1] ^= 0x55
    with pytest.raises(CorruptRecordError):
        lg.append_as_leader(bytes(bad))
    assert lg.log_end_offset == 0
    assert lg.append_as_leader(bytes(bad), from_coordinator=True).last_offset == 1
    with pytest.raises(CorruptRecordError):
        rb.batch_headers(lg.read(0, 1 << 20).to_bytes(), verify_crc=True)
    with pytest.raises(RecordTooLargeError):  # sizes are still checked for the coordinator's batches
        open_log(tmp_path / "small", max_message_bytes=100).append_as_leader(batch(1, value=b"x" * 200),
                                                                             from_coordinator=True)  # fmt: skip


def test_a_validated_header_is_taken_as_parsed_and_everything_else_still_checked(tmp_path: Path) -> None:
    """Produce hands the log the header its validation parsed (`validated`): the log does not parse the batch
    again, but still checks its CRC and max.message.bytes, stamps offsets into it, and ignores a header that does
    not describe the whole buffer (it parses the buffer itself then)."""
    lg = open_log(tmp_path, max_message_bytes=500)
    good = batch(2)
    [h] = rb.batch_headers(good)
    r = lg.append_as_leader(good, leader_epoch=3, validated=h)
    assert (r.first_offset, r.last_offset, r.num_records) == (0, 1, 2)
    assert (h.base_offset, h.partition_leader_epoch) == (0, 3)  # the append's offsets went into the header given
    bad = bytearray(good)
    bad[-1] ^= 0x55
    with pytest.raises(CorruptRecordError, match="is corrupt: stored crc"):
        lg.append_as_leader(bytes(bad), validated=rb.batch_headers(bytes(bad), verify_crc=False)[0])
    big = batch(1, value=b"x" * 600)
    with pytest.raises(RecordTooLargeError):
        lg.append_as_leader(big, validated=rb.batch_headers(big)[0])
    # a header of only the first of two batches is not the buffer's: both batches are parsed and appended
    two = batch(1) + batch(3)
    r = lg.append_as_leader(two, validated=rb.batch_headers(two)[0])
    assert (r.first_offset, r.last_offset, r.num_batches) == (2, 5, 2)
    assert offsets_of(lg.read(0, 1 << 20).to_bytes()) == [(0, 1), (2, 2), (3, 5)]



def test_read_max_bytes_min_one_and_max_offset(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    sizes = []
    for i in range(10):
        sizes.append(len(batch(2, key_prefix=f"b{i}-")))
        lg.append_as_leader(batch(2, key_prefix=f"b{i}-"))
    size = sizes[0]
    # starts at the batch holding the offset, whole batches only
    f = lg.read(3, 1 << 20)
    assert offsets_of(f.to_bytes())[0] == (2, 3)
    assert f.first_offset == 2
    # max_bytes cuts at whole batches
    assert offsets_of(lg.read(0, size * 3 + 10).to_bytes()) == [(0, 1), (2, 3), (4, 5)]
    # min one batch even when it is bigger than max_bytes
    assert offsets_of(lg.read(4, 10).to_bytes()) == [(4, 5)]
    assert lg.read(4, 10, min_one_batch=False).size == 0
    # never past max_offset (the high watermark)
    assert offsets_of(lg.read(0, 1 << 20, max_offset=6).to_bytes()) == [(0, 1), (2, 3), (4, 5)]
    assert lg.read(6, 1 << 20, max_offset=6).size == 0
    assert lg.read(6, 1 << 20, max_offset=7).size == 0  # batch 6-7 straddles the limit
    # log end: empty; past it or before start: out of range
    assert lg.read(20, 100).size == 0
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(21, 100)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(-1, 100)


def test_read_uses_fd_and_position_for_sendfile(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    lg.append_as_leader(batch(1))
    lg.append_as_leader(batch(1))
    f = lg.read(1, 1000)
    assert f.position == len(batch(1))
    assert os.pread(f.fd, f.size, f.position) == f.to_bytes()


def test_a_small_read_hands_on_the_bytes_its_walk_read(tmp_path: Path) -> None:
    """The walk that finds a small range near the log end has already read its bytes: to_bytes() slices them (no
    second pread), and they are the file's. A range past what the walk read is read from the file."""
    lg = open_log(tmp_path, index_interval_bytes=256)
    for _ in range(300):
        lg.append_as_leader(batch(3))
    small = lg.read(885, 1 << 20)  # the last 5 batches: from an index entry at most 256 bytes before, one window
    assert small.window is not None
    assert small.to_bytes() == os.pread(small.fd, small.size, small.position)
    assert offsets_of(small.to_bytes())[0] == (885, 887) and small.offset_count == 15
    large = lg.read(0, 1 << 20)  # the whole segment (44 KB), more than the walk's 4 KB window
    assert large.size > 8192 and large.window is None
    assert large.to_bytes() == os.pread(large.fd, large.size, large.position)
    lg.close()


def test_index_lookups_with_many_small_batches(tmp_path: Path) -> None:
    lg = open_log(tmp_path, index_interval_bytes=256)
    for _ in range(500):
        lg.append_as_leader(batch(3))
    seg = lg.active_segment
    assert len(seg.index) > 50
    index_file = tmp_path / "topic-0" / "00000000000000000000.index"
    time_index_file = tmp_path / "topic-0" / "00000000000000000000.timeindex"
    # the active segment's entries reach the files in blocks (index.PENDING_WRITE_BYTES), whole once flushed
    assert index_file.stat().st_size % 8 == 0 and len(seg.index) * 8 - index_file.stat().st_size < PENDING_WRITE_BYTES
    assert len(seg.time_index) * 12 - time_index_file.stat().st_size < PENDING_WRITE_BYTES
    seg.flush()
    assert index_file.stat().st_size == len(seg.index) * 8
    assert time_index_file.stat().st_size == len(seg.time_index) * 12
    for offset in (0, 1, 2, 3, 299, 300, 301, 1000, 1497, 1499):
        f = lg.read(offset, 1)
        first = offsets_of(f.to_bytes())[0]
        assert first[0] <= offset <= first[1]
    entries = seg.index.entries()
    assert all(o1 < o2 and p1 < p2 for (o1, p1), (o2, p2) in itertools.pairwise(entries))


def test_the_active_segments_index_entries_are_written_in_blocks(tmp_path: Path) -> None:
    """Each indexed append wrote its offset and time entries at once (two write(2) per ~4 KB of log); the entries
    now reach the files once PENDING_WRITE_BYTES of them are pending, or when the segment is flushed, rolled or
    closed. Lookups use the entries in memory meanwhile."""
    lg = open_log(tmp_path, index_interval_bytes=1)  # every append after the first is indexed
    index_file = tmp_path / "topic-0" / "00000000000000000000.index"
    for _ in range(101):
        lg.append_as_leader(batch(1))
    seg = lg.active_segment
    assert len(seg.index) == 100
    assert index_file.stat().st_size == 0  # 800 bytes pending: not written yet
    assert offsets_of(lg.read(57, 1).to_bytes())[0] == (57, 57)
    for _ in range(PENDING_WRITE_BYTES // 8):
        lg.append_as_leader(batch(1))
    assert index_file.stat().st_size == PENDING_WRITE_BYTES  # a block of 512 entries, in one write
    lg.roll()  # the rolled segment's remaining entries are written
    assert index_file.stat().st_size == len(seg.index) * 8
    lg.append_as_leader(batch(1))
    lg.close()
    reopened = Log.open(tmp_path / "topic-0", LogConfig(index_interval_bytes=1), recovery_point=lg.log_end_offset,
                        clean_shutdown=True)
    assert reopened.segments[0].index.entries() == seg.index.entries()
    reopened.close()


def test_roll_by_size(tmp_path: Path) -> None:
    one = len(batch(5))
    lg = open_log(tmp_path, segment_bytes=one * 3)
    for _ in range(10):
        lg.append_as_leader(batch(5))
    assert [s.base_offset for s in lg.segments] == [0, 15, 30, 45]
    assert all(s.size <= one * 3 for s in lg.segments)
    assert [r.offset for r in all_records(lg)] == list(range(50))
    # a read starting in one segment stops at its end
    assert offsets_of(lg.read(10, 1 << 20).to_bytes()) == [(10, 14)]


def test_roll_by_age(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock, segment_ms=1000)
    lg.append_as_leader(batch(1))
    clock.ms += 500
    lg.append_as_leader(batch(1))
    assert lg.num_segments == 1
    clock.ms += 600  # 1100 ms after the segment's first append
    lg.append_as_leader(batch(1))
    assert [s.base_offset for s in lg.segments] == [0, 2]


def test_explicit_roll_and_empty_roll(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    lg.roll()
    assert lg.num_segments == 1
    lg.append_as_leader(batch(2))
    lg.roll()
    lg.roll()
    assert [s.base_offset for s in lg.segments] == [0, 2]
    assert (tmp_path / "topic-0" / "00000000000000000002.snapshot").exists()


def test_retention_by_time(tmp_path: Path) -> None:
    clock = Clock(10_000_000)
    lg = open_log(tmp_path, clock, retention_ms=3000, segment_bytes=len(batch(1)) * 2)
    for i in range(6):
        lg.append_as_leader(batch(1, ts=clock.ms - 5000 + i * 1000))  # timestamps t-5000 .. t
    assert lg.num_segments == 3
    # segments' max timestamps: t-4000, t-2000, t (active): only the first is older than 3000 ms
    assert lg.enforce_retention(clock.ms) == 1
    assert lg.log_start_offset == 2
    assert [s.base_offset for s in lg.segments] == [2, 4]
    assert not (tmp_path / "topic-0" / "00000000000000000000.log").exists()
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 100)
    # never the active segment
    assert lg.enforce_retention(clock.ms + 10**9) == 1
    assert [s.base_offset for s in lg.segments] == [4]


def test_retention_by_size(tmp_path: Path) -> None:
    one = len(batch(1))
    lg = open_log(tmp_path, retention_bytes=one * 3, segment_bytes=one * 2, retention_ms=-1)
    for _ in range(9):
        lg.append_as_leader(batch(1))
    assert lg.num_segments == 5 and lg.size_bytes == one * 9
    assert lg.enforce_retention() == 3  # 9 -> 3 batches: deletes whole segments while over the limit
    assert lg.size_bytes == one * 3
    assert lg.log_start_offset == 6


def test_retention_disabled_for_compact_policy(tmp_path: Path) -> None:
    lg = open_log(tmp_path, retention_bytes=1, segment_bytes=200, cleanup_policy="compact")
    for _ in range(5):
        lg.append_as_leader(batch(1))
    assert lg.enforce_retention() == 0


def test_delayed_file_deletion_keeps_reads_working(tmp_path: Path) -> None:
    clock = Clock()
    one = len(batch(1))
    lg = open_log(tmp_path, clock, retention_bytes=0, segment_bytes=one, file_delete_delay_ms=60_000)
    lg.append_as_leader(batch(1))
    lg.append_as_leader(batch(1))
    f = lg.read(0, 1000)
    assert lg.enforce_retention(clock.ms) == 1
    d = tmp_path / "topic-0"
    assert (d / "00000000000000000000.log.deleted").exists()
    assert offsets_of(f.to_bytes()) == [(0, 0)]  # the fd handed out is still readable
    clock.ms += 60_001
    lg.enforce_retention(clock.ms)
    assert not (d / "00000000000000000000.log.deleted").exists()


def test_delete_records(tmp_path: Path) -> None:
    one = len(batch(2))
    lg = open_log(tmp_path, segment_bytes=one * 2)
    for _ in range(6):
        lg.append_as_leader(batch(2))
    assert [s.base_offset for s in lg.segments] == [0, 4, 8]
    assert lg.delete_records(5) == 5
    assert [s.base_offset for s in lg.segments] == [4, 8]
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(4, 100)
    assert offsets_of(lg.read(5, 1 << 20).to_bytes())[0] == (4, 5)  # the batch holding offset 5
    assert lg.delete_records(3) == 5  # never moves back
    with pytest.raises(OffsetOutOfRangeError):
        lg.delete_records(13)
    assert lg.delete_records(12) == 12
    assert [s.base_offset for s in lg.segments] == [8]
    assert lg.read(12, 100).size == 0


def test_truncate_to(tmp_path: Path) -> None:
    one = len(batch(2))
    lg = open_log(tmp_path, segment_bytes=one * 2)
    for _ in range(6):
        lg.append_as_leader(batch(2))
    lg.truncate_to(6)
    assert lg.log_end_offset == 6
    assert [s.base_offset for s in lg.segments] == [0, 4]
    assert [r.offset for r in all_records(lg)] == list(range(6))
    assert lg.append_as_leader(batch(1)).first_offset == 6
    lg.truncate_to(4)
    assert lg.log_end_offset == 4
    assert [s.base_offset for s in lg.segments] == [0, 4]
    lg.truncate_to(0)
    assert lg.log_end_offset == 0 and lg.size_bytes == 0
    assert lg.append_as_leader(batch(1)).first_offset == 0


def test_follower_append_keeps_offsets(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "l")
    for _ in range(3):
        leader.append_as_leader(batch(2), leader_epoch=3)
    follower = open_log(tmp_path / "f")
    result = follower.append_as_follower(leader.read(0, 1 << 20).to_bytes())
    assert (result.first_offset, result.last_offset) == (0, 5)
    assert follower.log_end_offset == 6
    assert follower.read(0, 1 << 20).to_bytes() == leader.read(0, 1 << 20).to_bytes()
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(leader.read(2, 1 << 20).to_bytes())


def test_log_append_time(tmp_path: Path) -> None:
    clock = Clock(1_800_000_000_000)
    lg = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    r = lg.append_as_leader(batch(3, ts=5))
    assert r.log_append_time_ms == clock.ms
    data = lg.read(0, 1000).to_bytes()
    h = rb.read_header(data)
    assert h.timestamp_type == rb.TIMESTAMP_TYPE_LOG_APPEND and h.is_valid(data)
    assert [rec.timestamp for rec in rb.decode_records(data, h)] == [clock.ms] * 3


def test_offset_for_timestamp(tmp_path: Path) -> None:
    lg = open_log(tmp_path, index_interval_bytes=100, segment_bytes=len(batch(3)) * 4)
    for i in range(20):
        lg.append_as_leader(batch(3, ts=1000 + i * 10))  # batch i: offsets 3i..3i+2, ts 1000+10i .. +2
    assert lg.num_segments == 5
    assert lg.offset_for_timestamp(0) == (0, 1000)
    assert lg.offset_for_timestamp(1000) == (0, 1000)
    assert lg.offset_for_timestamp(1001) == (1, 1001)
    assert lg.offset_for_timestamp(1003) == (3, 1010)
    assert lg.offset_for_timestamp(1125) == (39, 1130)
    assert lg.offset_for_timestamp(1192) == (59, 1192)
    assert lg.offset_for_timestamp(1193) is None
    assert lg.max_timestamp_and_offset() == (1192, 59)


def test_offset_for_timestamp_after_reopen(tmp_path: Path) -> None:
    lg = open_log(tmp_path, index_interval_bytes=100, segment_bytes=len(batch(3)) * 4)
    for i in range(20):
        lg.append_as_leader(batch(3, ts=1000 + i * 10))
    lg.close()
    lg = open_log(tmp_path, index_interval_bytes=100, segment_bytes=len(batch(3)) * 4)
    assert lg.offset_for_timestamp(1125) == (39, 1130)
    assert [s.max_timestamp for s in lg.segments][:2] == [1032, 1072]


# --- idempotent producers -----------------------------------------------------------------------------


def test_idempotent_duplicate_returns_original_offsets(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    lg.append_as_leader(batch(1))  # some other data first
    b0 = batch(3, pid=42, epoch=0, seq=0)
    b1 = batch(2, pid=42, epoch=0, seq=3)
    r0 = lg.append_as_leader(b0)
    r1 = lg.append_as_leader(b1)
    size = lg.size_bytes
    again = lg.append_as_leader(b0)
    assert again.duplicate and (again.first_offset, again.last_offset) == (r0.first_offset, r0.last_offset)
    again1 = lg.append_as_leader(b1)
    assert again1.duplicate and (again1.first_offset, again1.last_offset) == (1 + 3, 1 + 4)
    assert r1.first_offset == 4
    assert lg.size_bytes == size and lg.log_end_offset == 6


def test_out_of_order_sequence_and_epochs(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    lg.append_as_leader(batch(2, pid=7, epoch=1, seq=0))
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(batch(1, pid=7, epoch=1, seq=5))  # gap: expected 2
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(batch(1, pid=7, epoch=1, seq=1))  # overlaps but is no exact retry
    with pytest.raises(InvalidProducerEpochError):
        lg.append_as_leader(batch(1, pid=7, epoch=0, seq=2))  # fenced epoch
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(batch(1, pid=7, epoch=2, seq=3))  # a new epoch must start at 0
    assert lg.append_as_leader(batch(1, pid=7, epoch=1, seq=2)).first_offset == 2
    assert lg.append_as_leader(batch(1, pid=7, epoch=2, seq=0)).first_offset == 3
    # a producer id never seen (e.g. its data was deleted) may start at any sequence (Kafka >= 2.5)
    assert lg.append_as_leader(batch(1, pid=8, epoch=0, seq=17)).first_offset == 4
    assert lg.log_end_offset == 5


def test_only_last_five_batches_are_deduplicated(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    batches = [batch(1, pid=1, epoch=0, seq=i) for i in range(7)]
    for b in batches:
        lg.append_as_leader(b)
    assert lg.append_as_leader(batches[2]).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(batches[1])  # aged out of the 5 cached batches: treated as out of order


def test_sequence_wraps_at_int32_max(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    lg.append_as_leader(batch(2, pid=3, epoch=0, seq=2**31 - 2))
    assert lg.append_as_leader(batch(1, pid=3, epoch=0, seq=0)).first_offset == 2


def test_producer_state_survives_clean_and_unclean_restart(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    b0 = batch(2, pid=9, epoch=0, seq=0)
    lg.append_as_leader(b0)
    lg.close()
    assert (tmp_path / "topic-0" / "00000000000000000002.snapshot").exists()
    lg = open_log(tmp_path)
    assert lg.append_as_leader(b0).duplicate
    b1 = batch(2, pid=9, epoch=0, seq=2)
    lg.append_as_leader(b1)
    # simulate a crash: no close, so no snapshot at offset 4; state rebuilt from the log after snapshot 2
    lg2 = Log.open(tmp_path / "topic-0", LogConfig(), recovery_point=2)
    assert lg2.append_as_leader(b1).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        lg2.append_as_leader(batch(1, pid=9, epoch=0, seq=9))
    assert lg2.append_as_leader(batch(1, pid=9, epoch=0, seq=4)).first_offset == 4


# --- recovery -----------------------------------------------------------------------------------------


def _fill(lg: Log, n: int) -> list[bytes]:
    out = []
    for i in range(n):
        b = batch(3, key_prefix=f"r{i}-")
        lg.append_as_leader(b)
        out.append(b)
    return out


@pytest.mark.parametrize("cut", [1, 30, 61, 70])
def test_recovery_from_torn_tail(tmp_path: Path, cut: int) -> None:
    lg = open_log(tmp_path, index_interval_bytes=200)
    one = len(_fill(lg, 40)[-1])
    # crash: no close; then the last batch is torn `cut` bytes into it
    seg_path = tmp_path / "topic-0" / "00000000000000000000.log"
    full = seg_path.stat().st_size
    os.truncate(seg_path, full - one + cut)
    lg2 = Log.open(tmp_path / "topic-0", LogConfig(index_interval_bytes=200), recovery_point=0)
    assert lg2.log_end_offset == 39 * 3
    assert seg_path.stat().st_size == full - one
    recs = all_records(lg2)
    assert [r.offset for r in recs] == list(range(117))
    assert recs[-1].key == b"r38-2"
    r = lg2.append_as_leader(batch(1))
    assert r.first_offset == 117
    assert [rec.offset for rec in all_records(lg2, 110)] == list(range(110, 118))
    lg2.close()


def test_recovery_truncates_at_corrupt_batch_and_drops_later_segments(tmp_path: Path) -> None:
    one = len(batch(3, key_prefix="r0-"))
    cfg = {"segment_bytes": one * 5}
    lg = open_log(tmp_path, **cfg)
    _fill(lg, 12)
    assert [s.base_offset for s in lg.segments] == [0, 15, 30]
    seg1 = tmp_path / "topic-0" / "00000000000000000015.log"
    with open(seg1, "r+b") as f:  # flip a byte inside the records of the 3rd batch of segment 15
        f.seek(one * 2 + 70)
        byte = f.read(1)
        f.seek(one * 2 + 70)
        f.write(bytes([byte[0] ^ 0xFF]))
    lg2 = Log.open(tmp_path / "topic-0", LogConfig(segment_bytes=one * 5), recovery_point=0)
    assert lg2.log_end_offset == 21
    assert [s.base_offset for s in lg2.segments] == [0, 15]
    assert not (tmp_path / "topic-0" / "00000000000000000030.log").exists()
    assert [r.offset for r in all_records(lg2)] == list(range(21))


def test_clean_restart_trusts_indexes_and_unclean_rebuilds(tmp_path: Path) -> None:
    lg = open_log(tmp_path, index_interval_bytes=100)
    _fill(lg, 50)
    lg.close()
    idx = tmp_path / "topic-0" / "00000000000000000000.index"
    entries = idx.read_bytes()
    assert entries
    lg = Log.open(tmp_path / "topic-0", LogConfig(index_interval_bytes=100), recovery_point=150,
                  clean_shutdown=True)
    assert lg.log_end_offset == 150
    assert idx.read_bytes() == entries
    lg.close()
    # a garbage index is detected and rebuilt even after a clean shutdown
    idx.write_bytes(b"\x00" * 16 + b"\x7f" * 8)
    lg = Log.open(tmp_path / "topic-0", LogConfig(index_interval_bytes=100), clean_shutdown=True,
                  recovery_point=150)
    assert idx.read_bytes() == entries
    assert lg.log_end_offset == 150
    assert len(all_records(lg)) == 150
    lg.close()
    # unclean: rebuilt from the log, same result
    idx.unlink()
    lg = Log.open(tmp_path / "topic-0", LogConfig(index_interval_bytes=100), recovery_point=0)
    assert idx.read_bytes() == entries
    lg.close()


def test_reopen_continues_offsets_and_keeps_log_start(tmp_path: Path) -> None:
    lg = open_log(tmp_path, segment_bytes=300)
    _fill(lg, 10)
    start = lg.delete_records(7)
    lg.close()
    lg = Log.open(tmp_path / "topic-0", LogConfig(segment_bytes=300), log_start_offset=start, clean_shutdown=True)
    assert lg.log_start_offset == 7
    assert lg.append_as_leader(batch(1)).first_offset == 30
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(6, 100)


def test_leftover_deleted_files_are_removed_on_open(tmp_path: Path) -> None:
    d = tmp_path / "topic-0"
    d.mkdir()
    (d / "00000000000000000000.log.deleted").write_bytes(b"junk")
    lg = Log.open(d, LogConfig())
    assert not (d / "00000000000000000000.log.deleted").exists()
    assert lg.log_end_offset == 0


def test_flush_messages_moves_recovery_point(tmp_path: Path) -> None:
    lg = open_log(tmp_path, flush_messages=5)
    lg.append_as_leader(batch(3))
    assert lg.recovery_point == 0
    lg.append_as_leader(batch(3))
    assert lg.recovery_point == 6
    lg.append_as_leader(batch(1))
    lg.flush()
    assert lg.recovery_point == 7


def test_a_replaced_config_is_what_the_next_append_obeys(tmp_path: Path) -> None:
    """The log and its segments keep the config values an append reads per config object (AppendLimits): a
    config replaced by update_config, or assigned to the log, is obeyed from the next append on (max.message.bytes,
    segment.bytes, flush.messages, message.timestamp.type, index.interval.bytes, segment.ms)."""
    clock = Clock(1_800_000_000_000)
    one = len(batch(2))
    lg = open_log(tmp_path, clock)
    lg.append_as_leader(batch(2))
    assert lg.num_segments == 1 and lg.recovery_point == 0
    lg.update_config(LogConfig(max_message_bytes=one - 1, file_delete_delay_ms=0))
    with pytest.raises(RecordTooLargeError):
        lg.append_as_leader(batch(2))
    # a segment holds one batch, every append flushes
    lg.update_config(LogConfig(segment_bytes=one, flush_messages=1, file_delete_delay_ms=0))
    lg.append_as_leader(batch(2))
    assert lg.num_segments == 2 and lg.recovery_point == 4
    lg.append_as_leader(batch(2))
    assert lg.num_segments == 3 and lg.recovery_point == 6
    # assigned to the log, not updated: the log's own reads follow it (LogAppendTime, no flush per append), the
    # segments keep theirs until update_config (the active one still holds one batch: this append rolls)
    lg.config = LogConfig(message_timestamp_type="LogAppendTime", file_delete_delay_ms=0)
    assert lg.append_as_leader(batch(2)).log_append_time_ms == clock.ms
    assert lg.num_segments == 4 and lg.recovery_point == 6
    assert len(lg.segments[-1].index) == 0  # index.interval.bytes 4,096: no entry yet
    lg.update_config(LogConfig(index_interval_bytes=0, segment_ms=1_000, file_delete_delay_ms=0))
    lg.append_as_leader(batch(1))
    assert lg.num_segments == 4 and len(lg.segments[-1].index) == 1
    clock.ms += 1_001  # older than segment.ms now: the next append rolls
    lg.append_as_leader(batch(1))
    assert lg.num_segments == 5
    assert lg.log_end_offset == 10


def test_read_limits_match_a_brute_force_walk(tmp_path: Path) -> None:
    import random

    rng = random.Random(1)
    lg = open_log(tmp_path, index_interval_bytes=300)
    for i in range(400):
        lg.append_as_leader(batch(rng.randint(1, 4), value=b"z" * rng.randint(1, 300), key_prefix=f"{i}-"))
    everything = lg.read(0, 1 << 30).to_bytes()
    headers = list(rb.iter_batches(everything, verify_crc=True))
    assert headers[-1].next_offset == lg.log_end_offset
    for _ in range(300):
        offset = rng.randrange(lg.log_end_offset)
        max_bytes = rng.randint(1, 20_000)
        max_offset = rng.choice([None, rng.randrange(lg.log_end_offset + 1)])
        if max_offset is not None and offset >= max_offset:
            continue
        min_one = rng.random() < 0.8
        expected, total = [], 0
        for h in headers:
            if h.last_offset < offset:
                continue
            if max_offset is not None and h.last_offset >= max_offset:
                break
            if total + h.size > max_bytes and not (total == 0 and min_one):
                break
            expected.append((h.base_offset, h.last_offset))
            total += h.size
        got = offsets_of(lg.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one).to_bytes())
        assert got == expected, (offset, max_bytes, max_offset, min_one)


def test_read_offset_count_matches_the_records_returned(tmp_path: Path) -> None:
    # one-record batches (producers with linger.ms=0) among bigger ones, over several segments: the count a Fetch
    # reports (kbus_messages_out_total) comes from the range's two ends, not from a header read per batch
    import random

    rng = random.Random(7)
    lg = open_log(tmp_path, index_interval_bytes=256, segment_bytes=6_000)
    for i in range(600):
        lg.append_as_leader(batch(1 if rng.random() < 0.7 else rng.randint(2, 5), value=b"q" * rng.randint(1, 120),
                                  key_prefix=f"{i}-"))
    assert len(lg.segments) > 5
    for _ in range(400):
        offset = rng.randrange(lg.log_end_offset)
        max_bytes = rng.randint(1, 8_000)
        max_offset = rng.choice([None, rng.randrange(offset + 1, lg.log_end_offset + 1)])
        read = lg.read(offset, max_bytes, max_offset=max_offset, min_one_batch=rng.random() < 0.8)
        headers = list(rb.iter_batches(read.to_bytes(), verify_crc=True))
        assert read.offset_count == sum(h.records_count for h in headers), (offset, max_bytes, max_offset)
        if headers:
            assert (read.first_offset, read.next_offset) == (headers[0].base_offset, headers[-1].next_offset)
            assert headers[0].last_offset >= offset and (max_offset is None or headers[-1].last_offset < max_offset)


def test_follower_accepts_batches_with_offset_gaps(tmp_path: Path) -> None:
    # a compacted batch: 2 records left of 5 offsets (last offset delta 4)
    data = bytearray(batch(2))
    import struct

    struct.pack_into(">i", data, rb.LAST_OFFSET_DELTA_OFFSET, 4)
    struct.pack_into(">I", data, rb.CRC_OFFSET, rb.crc32c(memoryview(data)[rb.ATTRIBUTES_OFFSET:]))
    lg = open_log(tmp_path)  # (a client may not send one: kbus.protocol.validation refuses it)
    r = lg.append_as_follower(bytes(data))
    assert (r.first_offset, r.last_offset) == (0, 4) and lg.log_end_offset == 5


def test_reads_while_appends_continue_see_only_whole_batches(tmp_path: Path) -> None:
    import threading

    lg = open_log(tmp_path, segment_bytes=20_000, index_interval_bytes=500)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(2000):
                lg.append_as_leader(batch(1 + i % 5, key_prefix=f"w{i}-"))
        except BaseException as e:  # surfaced by the assertion below
            errors.append(e)
        finally:
            stop.set()

    t = threading.Thread(target=writer)
    t.start()
    reads = 0
    while not stop.is_set() or reads < 10:
        end = lg.log_end_offset
        offset = reads * 7 % (end + 1)
        data = lg.read(offset, 3000).to_bytes()
        headers = list(rb.iter_batches(data, verify_crc=True))  # never a torn batch
        if offset < end:
            assert headers and headers[0].base_offset <= offset <= headers[0].last_offset
        reads += 1
    t.join()
    assert not errors
    assert [r.offset for r in all_records(lg)] == list(range(lg.log_end_offset))


@pytest.mark.parametrize("start", [None, 0, 42])
def test_a_new_directory_opens_like_an_existing_empty_one(tmp_path: Path, start: int | None) -> None:
    """Log.open skips listing a directory it has just created: the log it gives is the one an existing empty
    directory gives, and it takes appends and reopens the same way."""
    (tmp_path / "old-0").mkdir()
    logs = [Log.open(tmp_path / n, LogConfig(), log_start_offset=start, time_ms=Clock()) for n in ("new-0", "old-0")]
    fresh, existing = logs
    assert sorted(p.name for p in fresh.dir.iterdir()) == sorted(p.name for p in existing.dir.iterdir())
    for lg in logs:
        assert (lg.log_start_offset, lg.log_end_offset, lg.recovery_point) == (start or 0, start or 0, start or 0)
        lg.append_as_leader(batch(3), leader_epoch=0)
        lg.close()
    reopened = [Log.open(tmp_path / name, LogConfig(), time_ms=Clock()) for name in ("new-0", "old-0")]
    assert [(lg.log_start_offset, lg.log_end_offset) for lg in reopened] == [((start or 0), (start or 0) + 3)] * 2
    assert offsets_of(reopened[0].read(start or 0, 1 << 20).to_bytes()) == [((start or 0), (start or 0) + 2)]

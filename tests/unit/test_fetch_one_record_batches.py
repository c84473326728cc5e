"""A log of one-record batches (what producers with linger.ms=0 leave behind) costs a Fetch per request and per byte
range, not per batch: reading it and counting its messages (kbus_messages_out_total) reads no header per batch."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbus.common.topic_config import LogConfig
from kbus.protocol import record_batch as rb
from kbus.protocol.codec import RequestHeader
from kbus.protocol.splice import RecordSplicer
from kbus.server.apis.fetch import ZERO_COPY_MIN_BYTES, _records
from kbus.server.apis.registry import RequestContext
from kbus.server.log.log import Log

N = 3000


@pytest.fixture
def one_record_log(tmp_path: Path) -> Iterator[Log]:
    lg = Log.open(tmp_path / "t-0", LogConfig(file_delete_delay_ms=0), time_ms=lambda: 1_700_000_000_000)
    for i in range(N):
        lg.append_as_leader(rb.build_batch([(None, b"%06d" % i + b"x" * 94)]))
    yield lg
    lg.close()


@pytest.fixture
def preads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of every os.pread from here on (the compiled modules look os.pread up at each call)."""
    calls: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, pos: int) -> bytes:
        calls.append(n)
        return real(fd, n, pos)

    monkeypatch.setattr(os, "pread", counting)
    return calls


def ctx(*, splicer: bool) -> RequestContext:
    header = RequestHeader(1, 12, 7, "c", True)
    return RequestContext(header, "127.0.0.1", 1, "c", splicer=RecordSplicer(True) if splicer else None)


def test_zero_copy_fetch_counts_its_messages_without_reading_batch_headers(one_record_log: Log,
                                                                           preads: list[int]) -> None:
    read = one_record_log.read(0, 1 << 20, max_offset=N)
    assert read.size > ZERO_COPY_MIN_BYTES
    reads_to_find_the_range = len(preads)
    assert reads_to_find_the_range <= 6, preads  # the index plus a walk of about one index interval at each end
    preads.clear()
    _, size, count = _records(ctx(splicer=True), read)
    assert (size, count) == (read.size, N)
    assert preads == []  # main read a 61-byte header per batch here: 3,000 preads for this one fetch


def test_a_read_to_a_high_watermark_at_the_log_end_walks_once(one_record_log: Log, preads: list[int]) -> None:
    # the stop batch at max_offset is looked for only when max_offset falls inside the segment: a consumer reading
    # a backlog to HW = log end pays for the walk at the fetch offset alone (Kafka: the HW's position is cached)
    one_record_log.read(100, 1 << 20, max_offset=N)
    at_end = len(preads)
    preads.clear()
    one_record_log.read(100, 1 << 20, max_offset=N - 1)
    assert at_end < len(preads)


def test_copied_fetch_counts_its_messages_without_walking_batches(one_record_log: Log, preads: list[int]) -> None:
    # TLS connections and small reads copy the range: one read of it, its count again from the range's ends
    read = one_record_log.read(10, 1 << 20, max_offset=N)
    preads.clear()
    data, size, count = _records(ctx(splicer=False), read)
    assert (len(data), size, count) == (read.size, read.size, N - 10)
    assert len(preads) == 1
    assert [h.records_count for h in rb.iter_batches(data, verify_crc=True)] == [1] * (N - 10)


def test_a_fetch_ending_mid_batch_returns_whole_batches_and_their_count(one_record_log: Log) -> None:
    whole = one_record_log.read(0, 1 << 20).to_bytes()
    batch_size = len(whole) // N
    for max_bytes in (batch_size * 100 - 1, batch_size * 100, batch_size * 100 + 1):
        read = one_record_log.read(5, max_bytes, max_offset=N)
        headers = list(rb.iter_batches(read.to_bytes(), verify_crc=True))
        assert len(headers) == (100 if max_bytes >= batch_size * 100 else 99)
        assert read.offset_count == len(headers) and read.next_offset == 5 + len(headers)

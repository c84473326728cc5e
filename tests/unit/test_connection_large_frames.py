"""Large frames read into a buffer of their own (Connection.get_buffer / buffer_updated): a Produce request's records
are slices of the buffer its bytes were read into, never copied, never in a buffer that is reused; everything else
(small frames, what follows a large frame, hostile sizes) is framed exactly as before. The transport is simulated:
each read copies at most what the connection's buffer holds, as a BufferedProtocol transport does."""

from __future__ import annotations

import datetime
import itertools
import os
import random
from pathlib import Path

from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from kbus.protocol import connection as connection_mod
from kbus.protocol.codec import encode_request
from kbus.protocol.connection import NEED_DATA, Closed, Connection, ListenerName, Request, SecurityProtocol
from kbus.protocol.record_batch import batch_headers, build_batch
from kbus.server.log import Log, LogConfig
from tests.unit.test_connection import FakeCatalog, connection, metadata

LARGE = connection_mod.LARGE_FRAME_MIN


def produce(corr: int, value: bytes) -> tuple[bytes, bytes]:
    """A Produce frame and the batch it carries."""
    batch = build_batch([(b"k", value)])
    body = ProduceRequest(
        transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
        topic_data=(TopicProduceData(name="t", partition_data=(PartitionProduceData(index=0, records=batch),)),),
    )
    return encode_request(body, corr, "test"), batch


def read_all(conn: Connection, stream: bytes, sizes: itertools.cycle[int], *, eof: bool = False,
             answer: bool = True) -> list[object]:
    """Feed `stream` as a BufferedProtocol transport would (reads of at most len(get_buffer()) bytes, each at most
    the next of `sizes`), taking the events after each read as KafkaProtocol does (answering each request at once
    unless `answer` is false)."""
    events: list[object] = []
    pos = 0
    while pos < len(stream):
        buf = conn.get_buffer()
        assert len(buf) > 0
        n = min(len(buf), next(sizes), len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        conn.buffer_updated(n)
        pos += n
        while isinstance(ev := conn.next_event(), Request):
            events.append(ev)
            if answer:
                conn.send_response(ev.seq, b"r")
    if eof:
        conn.receive_data(b"")
        events.append(conn.next_event())
    return events


def records_of(ev: object) -> memoryview | bytes:
    assert isinstance(ev, Request)
    records = ev.body.topic_data[0].partition_data[0].records
    assert records is not None
    return records  # type: ignore[no-any-return]


def test_large_produce_records_are_a_slice_of_the_frame_read() -> None:
    conn = connection()
    frame, batch = produce(1, os.urandom(3 * LARGE))
    [req] = read_all(conn, frame, itertools.cycle([1000, 65536, 7]))
    records = records_of(req)
    assert isinstance(records, memoryview) and not records.readonly  # the log stamps offsets in place
    assert bytes(records) == batch
    frame_buffer = records.obj
    assert isinstance(frame_buffer, bytearray) and len(frame_buffer) == len(frame) - 4  # the frame's own buffer
    assert frame_buffer is not conn.get_buffer().obj  # not the shared read buffer


def test_small_frames_are_bytes_and_large_ones_in_between_keep_their_order() -> None:
    rng = random.Random(7)
    conn = connection()
    frames, batches = [], []
    for corr in range(12):
        size = rng.choice([10, 200, LARGE // 2, LARGE + 1, 5 * LARGE])
        frame, batch = produce(corr, os.urandom(size))
        frames.append(frame)
        batches.append(batch)
    frames.append(metadata(99))
    events = read_all(conn, b"".join(frames), itertools.cycle([3, 40000, 1, 250000, 4096, 17]))
    assert [ev.header.correlation_id for ev in events] == [*range(12), 99]  # type: ignore[attr-defined]
    for ev, batch in zip(events, batches, strict=False):
        records = records_of(ev)
        assert bytes(records) == batch
        assert isinstance(records, memoryview) == (len(batch) >= LARGE)


def test_a_frame_buffer_is_never_reused_while_its_records_are_pending() -> None:
    """An acks=all Produce waits for its followers holding its records: the frames read after it go elsewhere."""
    conn = connection()
    first, first_batch = produce(1, b"a" * (2 * LARGE))
    second, second_batch = produce(2, b"b" * (2 * LARGE))
    [req1] = read_all(conn, first, itertools.cycle([65536]))
    pending = records_of(req1)  # not answered: still in flight
    [req2] = read_all(conn, second, itertools.cycle([65536]))
    assert bytes(pending) == first_batch
    assert bytes(records_of(req2)) == second_batch
    assert records_of(req2).obj is not pending.obj  # type: ignore[union-attr]


def test_after_a_large_frame_the_next_header_is_read_alone() -> None:
    """So little of a following large frame lands in the shared buffer (and is copied out of it)."""
    conn = connection()
    large, _ = produce(1, os.urandom(2 * LARGE))
    small, _ = produce(2, b"x")
    read_all(conn, large, itertools.cycle([1 << 20]))
    assert len(conn.get_buffer()) == connection_mod.HEADER_READ
    read_all(conn, small, itertools.cycle([1 << 20]))
    assert len(conn.get_buffer()) == connection_mod.READ_CHUNK  # small frames again: whole reads


def test_a_truncated_large_frame_closes_the_connection_at_eof() -> None:
    conn = connection()
    frame, _ = produce(1, os.urandom(2 * LARGE))
    events = read_all(conn, frame[: len(frame) // 2], itertools.cycle([8192]), eof=True)
    assert len(events) == 1 and isinstance(events[0], Closed) and "truncated frame" in str(events[0].reason)


def test_a_claimed_size_over_the_cap_allocates_nothing() -> None:
    """A frame claiming more than LARGE_FRAME_MAX (up to socket.request.max.bytes) gets no buffer of that size
    before its bytes come: it is gathered as they arrive, as before."""
    conn = Connection(ListenerName("PLAINTEXT", SecurityProtocol.PLAINTEXT), FakeCatalog(), max_frame_bytes=1 << 30)
    claimed = connection_mod.LARGE_FRAME_MAX + 1
    conn.receive_data(claimed.to_bytes(4, "big") + b"\x00\x00\x00\x09")
    assert conn.next_event() is NEED_DATA
    assert len(conn.get_buffer()) == connection_mod.READ_CHUNK


def test_a_malformed_large_frame_closes_after_the_requests_before_it() -> None:
    conn = connection()
    good, _ = produce(1, b"v")
    bad, _ = produce(2, os.urandom(2 * LARGE))
    bad = bad[:4] + b"\x00\x00\x00\x63" + bad[8:]  # Produce v99: not a version the catalog has
    events = read_all(conn, good + bad, itertools.cycle([5000]), answer=False)
    assert [type(e) for e in events] == [Request]
    conn.send_response(events[0].seq, b"r")  # type: ignore[attr-defined]
    closed = conn.next_event()
    assert isinstance(closed, Closed) and closed.violation


def test_log_append_stamps_a_writable_view_in_place_and_copies_the_rest(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), time_ms=lambda: 1_700_000_000_000)
    try:
        log.append_as_leader(build_batch([(None, b"first")]))
        frame = bytearray(b"head" + build_batch([(None, b"x" * 1000)]))
        view = memoryview(frame)[4:]
        result = log.append_as_leader(view, leader_epoch=3)
        assert result.first_offset == 1
        [h] = batch_headers(view)
        assert (h.base_offset, h.partition_leader_epoch) == (1, 3)  # stamped in the caller's buffer
        assert log.read_bytes(1, 1 << 20) == bytes(view)
        original = build_batch([(None, b"y")])
        log.append_as_leader(original)
        assert batch_headers(original)[0].base_offset == 0  # bytes: copied, left as they were
    finally:
        log.close()

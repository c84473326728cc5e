"""The sans-I/O connection: framing, pipelining, response order, the authentication gate, closing on bad frames.
Bytes in, events out; no sockets, no event loop."""

from __future__ import annotations

import datetime
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from kbus.protocol import codec
from kbus.protocol.codec import encode_request
from kbus.protocol.connection import (
    NEED_DATA,
    PAUSED,
    ApiFlags,
    Closed,
    Connection,
    KafkaPrincipal,
    ListenerName,
    Request,
    SaslToken,
    SecurityProtocol,
)
from kbus.protocol.record_batch import build_batch

FLAGS = {0: ApiFlags(pipelined=True), 3: ApiFlags(), 18: ApiFlags(before_auth=True), 17: ApiFlags(before_auth=True)}
VERSIONS = {0: range(3, 10), 3: range(0, 13), 18: range(0, 4), 17: range(0, 2)}


class FakeCatalog:
    def flags(self, api_key: int) -> ApiFlags | None:
        return FLAGS.get(api_key)

    def supports(self, api_key: int, api_version: int) -> bool:
        return api_version in VERSIONS.get(api_key, ())


def connection(protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT, **kw: int) -> Connection:
    return Connection(ListenerName(protocol.value, protocol), FakeCatalog(), max_frame_bytes=1 << 20, **kw)


def produce(corr: int) -> bytes:
    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            TopicProduceData(
                name="t", partition_data=(PartitionProduceData(index=0, records=build_batch([(b"k", b"v")])),)
            ),
        ),
    )
    return encode_request(body, corr, "test")


def metadata(corr: int) -> bytes:
    body = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return encode_request(body, corr, "test")


def api_versions(corr: int) -> bytes:
    return encode_request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), corr, "test")


def response(corr: int) -> bytes:
    return struct.pack(">ii", 4, corr)


def drain(conn: Connection) -> list[object]:
    """Every event up to the first NEED_DATA / PAUSED / Closed, that one included."""
    out: list[object] = []
    while True:
        ev = conn.next_event()
        out.append(ev)
        if not isinstance(ev, Request | SaslToken):
            return out


def corr_ids(events: list[object]) -> list[int]:
    return [e.header.correlation_id for e in events if isinstance(e, Request)]


def test_bytes_arrive_in_pieces() -> None:
    conn = connection()
    frame = metadata(1)
    for i in range(len(frame) - 1):
        conn.receive_data(frame[i : i + 1])
        assert conn.next_event() is NEED_DATA
    conn.receive_data(frame[-1:])
    ev = conn.next_event()
    assert isinstance(ev, Request) and ev.header.correlation_id == 1 and ev.body.topics is None


def test_pipelined_produces_are_dispatched_together_and_answered_in_order() -> None:
    conn = connection()
    conn.receive_data(produce(1) + produce(2) + produce(3) + metadata(4))
    events = drain(conn)
    assert corr_ids(events) == [1, 2, 3] and events[-1] is PAUSED  # Metadata waits for the produces
    seqs = [e.seq for e in events if isinstance(e, Request)]
    conn.send_response(seqs[2], response(3))
    conn.send_response(seqs[1], response(2))
    assert conn.data_to_send() == []  # the first is not answered yet: nothing may overtake it
    assert conn.next_event() is PAUSED
    conn.send_response(seqs[0], response(1))
    assert conn.data_to_send() == [response(1), response(2), response(3)]
    events = drain(conn)
    assert corr_ids(events) == [4] and events[-1] is NEED_DATA


def test_a_request_that_runs_alone_blocks_everything_behind_it() -> None:
    conn = connection()
    conn.receive_data(metadata(1) + produce(2))
    events = drain(conn)
    assert corr_ids(events) == [1] and events[-1] is PAUSED
    conn.send_response(events[0].seq, response(1))  # type: ignore[union-attr]
    assert corr_ids(drain(conn)) == [2]


def test_pipelining_is_bounded() -> None:
    conn = connection(max_pipelined=2)
    conn.receive_data(produce(1) + produce(2) + produce(3))
    events = drain(conn)
    assert corr_ids(events) == [1, 2] and events[-1] is PAUSED
    conn.send_response(events[0].seq, response(1))  # type: ignore[union-attr]
    assert corr_ids(drain(conn)) == [3]


def test_acks0_requests_leave_no_gap() -> None:
    conn = connection()
    conn.receive_data(produce(1) + produce(2))
    a, b, _ = drain(conn)
    conn.send_response(a.seq, None)  # type: ignore[union-attr]
    conn.send_response(b.seq, response(2))  # type: ignore[union-attr]
    assert conn.data_to_send() == [response(2)]


def test_malformed_frame_behind_valid_requests_answers_them_and_reads_nothing_after_it() -> None:
    """Issue 10: a valid Produce pipelined behind a malformed frame must never be applied unanswered."""
    conn = connection()
    bad = struct.pack(">i", 12) + struct.pack(">hhi", 0, 9, 2) + b"\x00\x01"  # Produce v9 header, truncated
    conn.receive_data(produce(1) + bad + produce(3))
    events = drain(conn)
    assert corr_ids(events) == [1]  # the produce behind the bad frame is never handed out
    assert events[-1] is PAUSED  # the first is still being answered
    conn.receive_data(produce(4))  # ignored: nothing more is read
    conn.send_response(events[0].seq, response(1))  # type: ignore[union-attr]
    assert conn.data_to_send() == [response(1)]
    ev = conn.next_event()
    assert isinstance(ev, Closed) and ev.reason is not None
    assert isinstance(conn.next_event(), Closed)


def test_malformed_body_closes_with_nothing_in_flight() -> None:
    conn = connection()
    conn.receive_data(struct.pack(">i", 14) + struct.pack(">hhih", 3, 1, 7, -1) + b"\x00\x00\x00\x05")
    ev = conn.next_event()
    assert isinstance(ev, Closed) and "Metadata" in (ev.reason or "")


@pytest.mark.parametrize("size", [-1, (1 << 20) + 1])
def test_bad_frame_size_closes(size: int) -> None:
    conn = connection()
    conn.receive_data(struct.pack(">i", size))
    assert isinstance(conn.next_event(), Closed)


def test_unknown_api_and_unsupported_version_close_but_api_versions_gets_kip511_fallback() -> None:
    conn = connection()
    conn.receive_data(struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1))
    assert isinstance(conn.next_event(), Closed)
    conn = connection()
    conn.receive_data(struct.pack(">i", 10) + struct.pack(">hhih", 18, 99, 5, -1))
    ev = conn.next_event()
    assert isinstance(ev, Request) and ev.unsupported_version and ev.header.correlation_id == 5


def test_garbage_version_pairs_do_not_grow_the_schema_cache() -> None:
    before = codec.request_type.cache_info().currsize
    for version in range(100, 400):
        conn = connection()
        conn.receive_data(struct.pack(">i", 10) + struct.pack(">hhih", 3, version, 1, -1))
        assert isinstance(conn.next_event(), Closed)
    assert codec.request_type.cache_info().currsize <= before + 1


def test_handler_failure_answers_the_others_in_flight_then_closes() -> None:
    conn = connection()
    conn.receive_data(produce(1) + produce(2) + produce(3))
    a, b, c, _ = drain(conn)
    conn.send_response(c.seq, response(3))  # type: ignore[union-attr]
    conn.fail(b.seq, "boom")  # type: ignore[union-attr]
    conn.send_response(a.seq, response(1))  # type: ignore[union-attr]
    assert conn.data_to_send() == [response(1), response(3)]  # 3 was applied: it is answered
    ev = conn.next_event()
    assert isinstance(ev, Closed) and ev.reason == "boom"


def test_eof_serves_complete_frames_then_closes_quietly() -> None:
    conn = connection()
    conn.receive_data(metadata(1))
    conn.receive_data(b"")
    (ev, paused) = drain(conn)
    assert paused is PAUSED
    conn.send_response(ev.seq, response(1))  # type: ignore[union-attr]
    assert conn.data_to_send() == [response(1)]
    assert conn.next_event() == Closed(None)


def test_eof_inside_a_frame_is_reported() -> None:
    conn = connection()
    conn.receive_data(metadata(1)[:-3])
    conn.receive_data(b"")
    ev = conn.next_event()
    assert isinstance(ev, Closed) and "truncated" in (ev.reason or "")


def test_abort_reports_what_was_in_flight() -> None:
    conn = connection()
    conn.receive_data(produce(1) + produce(2))
    drain(conn)
    assert conn.abort() == [0, 1]
    assert isinstance(conn.next_event(), Closed)


def test_sasl_listener_serves_only_api_versions_and_sasl_before_authentication() -> None:
    conn = connection(SecurityProtocol.SASL_SSL)
    assert not conn.authenticated
    conn.receive_data(api_versions(1))
    (ev, _) = drain(conn)
    assert isinstance(ev, Request)
    conn.send_response(ev.seq, response(1))
    conn.receive_data(metadata(2))
    ev2 = conn.next_event()
    assert isinstance(ev2, Closed) and "before authentication" in (ev2.reason or "")
    assert conn.data_to_send() == [response(1)]


def test_authenticated_sasl_connection_serves_everything_as_the_principal() -> None:
    conn = connection(SecurityProtocol.SASL_PLAINTEXT)
    conn.authenticate(KafkaPrincipal("User", "alice"))
    conn.receive_data(metadata(1))
    ev = conn.next_event()
    assert isinstance(ev, Request) and str(conn.principal) == "User:alice"


def test_frames_before_authentication_are_limited_to_sasl_max_receive_size() -> None:
    conn = connection(SecurityProtocol.SASL_PLAINTEXT)
    conn.receive_data(struct.pack(">i", 524289))
    assert isinstance(conn.next_event(), Closed)
    conn = connection(SecurityProtocol.PLAINTEXT)
    conn.receive_data(struct.pack(">i", 524289))
    assert conn.next_event() is NEED_DATA


def test_raw_sasl_token_after_handshake_v0() -> None:
    conn = connection(SecurityProtocol.SASL_PLAINTEXT)
    handshake = struct.pack(">hhih", 17, 0, 1, -1) + struct.pack(">h", 5) + b"PLAIN"
    token = b"\x00alice\x00secret"
    conn.receive_data(struct.pack(">i", len(handshake)) + handshake + struct.pack(">i", len(token)) + token)
    (hs, paused) = drain(conn)
    assert isinstance(hs, Request) and hs.body.mechanism == "PLAIN" and paused is PAUSED
    conn.expect_raw_sasl_token()  # what the SaslHandshake v0 handler does
    conn.send_response(hs.seq, response(1))
    ev = conn.next_event()
    assert isinstance(ev, SaslToken) and ev.token == token


# ---- the input buffer: a read kept as it came, frames split across reads gathered, nothing kept past a violation
def requests_of(conn: Connection, answer: bool = True) -> list[Request]:
    """Every request the connection hands out for what it was given so far (answered, so none blocks the next)."""
    out: list[Request] = []
    while True:
        ev = conn.next_event()
        if isinstance(ev, Request):
            out.append(ev)
            if answer:
                conn.send_response(ev.seq, response(ev.header.correlation_id))
            continue
        assert ev is NEED_DATA, ev
        return out


def stream() -> bytes:
    """Three requests of three APIs back to back: a Produce, a Metadata (runs alone) and an ApiVersions."""
    return produce(1) + metadata(2) + api_versions(3)


def test_a_stream_split_into_two_reads_at_every_byte_boundary() -> None:
    data = stream()
    whole = connection()
    whole.receive_data(data)
    expected = [(r.header, r.body, r.size) for r in requests_of(whole)]
    assert [h.correlation_id for h, _, _ in expected] == [1, 2, 3]
    for cut in range(len(data) + 1):
        conn = connection()
        got = []
        for piece in (data[:cut], data[cut:]):
            if piece:  # b"" would be the end of the stream
                conn.receive_data(piece)
            got += requests_of(conn)
        assert [(r.header, r.body, r.size) for r in got] == expected, f"cut at byte {cut}"
        assert conn.buffered == 0


def test_a_stream_fed_one_byte_per_read_and_in_three_pieces() -> None:
    data = stream()
    conn = connection()
    got: list[Request] = []
    for i in range(len(data)):
        conn.receive_data(data[i : i + 1])
        got += requests_of(conn)
    assert corr_ids(got) == [1, 2, 3] and conn.buffered == 0  # type: ignore[arg-type]
    first = len(produce(1))
    for a in range(first - 6, first + 6):  # around the first frame's end: inside it, on it, in the next prefix
        for b in range(a, a + 12):
            conn = connection()
            got = []
            for piece in (data[:a], data[a:b], data[b:]):
                if piece:
                    conn.receive_data(piece)
                got += requests_of(conn)
            assert corr_ids(got) == [1, 2, 3], (a, b)  # type: ignore[arg-type]


def test_several_requests_in_one_read_with_the_next_one_cut_short() -> None:
    conn = connection()
    tail = produce(4)
    conn.receive_data(produce(1) + produce(2) + produce(3) + tail[:7])
    assert corr_ids(requests_of(conn, answer=False)) == [1, 2, 3]  # type: ignore[arg-type]
    assert conn.buffered == 7
    conn.receive_data(tail[7:] + produce(5))
    assert corr_ids(requests_of(conn, answer=False)) == [4, 5]  # type: ignore[arg-type]
    assert conn.buffered == 0


def test_a_paused_connection_keeps_the_unread_requests_of_a_read() -> None:
    conn = connection()
    conn.receive_data(metadata(1) + produce(2) + produce(3)[:5])
    (ev, paused) = drain(conn)
    assert corr_ids([ev]) == [1] and paused is PAUSED
    conn.receive_data(produce(3)[5:])  # the rest of the third arrives while the first is in flight
    conn.send_response(ev.seq, response(1))  # type: ignore[union-attr]
    assert corr_ids(requests_of(conn)) == [2, 3]  # type: ignore[arg-type]


@pytest.mark.parametrize("split", [False, True])
def test_a_huge_frame_is_refused_from_its_size_alone(split: bool) -> None:
    """socket.request.max.bytes: the size prefix closes the connection; no byte of the frame is buffered."""
    conn = connection()
    prefix = struct.pack(">i", (1 << 20) + 1)
    if split:
        conn.receive_data(prefix[:2])
        assert conn.next_event() is NEED_DATA
        conn.receive_data(prefix[2:] + b"\x00" * 1000)
    else:
        conn.receive_data(prefix + b"\x00" * 1000)
    ev = conn.next_event()
    assert isinstance(ev, Closed) and ev.violation and "socket.request.max.bytes" in (ev.reason or "")
    assert conn.buffered == 0
    conn.receive_data(b"\x00" * 4096)  # whatever the client goes on sending is dropped, not buffered
    assert conn.buffered == 0 and isinstance(conn.next_event(), Closed)


def test_a_frame_of_exactly_the_maximum_size_is_read() -> None:
    listener = ListenerName("PLAINTEXT", SecurityProtocol.PLAINTEXT)
    conn = Connection(listener, FakeCatalog(), max_frame_bytes=len(metadata(1)) - 4)
    conn.receive_data(metadata(1))
    ev = conn.next_event()
    assert isinstance(ev, Request) and ev.header.correlation_id == 1

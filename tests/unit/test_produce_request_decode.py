"""The hand-written Produce request decoder reads what kio's reader reads, for every version kbus serves (3-12), and
refuses what kio refuses: random requests encoded by kio, decoded both ways; truncated and lying frames."""

from __future__ import annotations

import datetime
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbus.protocol.codec import ProtocolError, build, decode_request, encode_request, nested, parse_request_header
from kbus.protocol.codec import request_type as kio_request
from kbus.protocol.produce_request_decode import ProduceRequest, decode_produce_request

VERSIONS = range(3, 13)
i32 = st.integers(-(2**31), 2**31 - 1)
names = st.text(min_size=1, max_size=20)
Topics = list[tuple[str, list[tuple[int, bytes | None]]]]


def kio_frame(version: int, transactional_id: str | None, acks: int, timeout_ms: int, topics: Topics) -> bytes:
    R = kio_request(0, version)
    body = build(R, transactional_id=transactional_id, acks=acks,
                 timeout=datetime.timedelta(milliseconds=timeout_ms), topic_data=[
                     build(nested(R, "TopicProduceData"), name=name, partition_data=[
                         build(nested(R, "PartitionProduceData"), index=i, records=r) for i, r in parts])
                     for name, parts in topics])  # fmt: skip
    return encode_request(body, 1, "c")[4:]


def both(frame: bytes) -> tuple[object, object]:
    header, at = parse_request_header(frame, supported=lambda k, v: True)
    return decode_request(frame, header, at), decode_produce_request(frame, header.api_version, at)


def same(kio: object, ours: object) -> None:
    k, o = kio, ours
    assert o.transactional_id == k.transactional_id and o.acks == k.acks  # type: ignore[attr-defined]
    assert o.timeout == k.timeout // datetime.timedelta(milliseconds=1)  # type: ignore[attr-defined]
    assert len(o.topic_data) == len(k.topic_data)  # type: ignore[attr-defined]
    for ot, kt in zip(o.topic_data, k.topic_data, strict=True):  # type: ignore[attr-defined]
        assert ot.name == kt.name
        assert [(p.index, p.records) for p in ot.partition_data] == [
            (p.index, None if p.records is None else bytes(p.records)) for p in kt.partition_data]
        assert all(p.records is None or type(p.records) is bytes for p in ot.partition_data)


requests = st.tuples(
    st.none() | st.text(max_size=12),
    st.sampled_from([0, 1, -1, 2, -32768]),
    st.integers(0, 2**31 - 1),
    st.lists(st.tuples(names, st.lists(st.tuples(i32, st.none() | st.binary(max_size=200)), max_size=4)),
             max_size=3),
)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=50, deadline=None)
@given(req=requests)
def test_the_same_request_as_kio(version: int, req: tuple) -> None:  # type: ignore[type-arg]
    kio, ours = both(kio_frame(version, *req))
    same(kio, ours)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_large_batch_and_a_non_ascii_name(version: int) -> None:
    records = bytes(range(256)) * 400  # 100 KB: a flexible length of several varint bytes
    kio, ours = both(kio_frame(version, "tx-é", -1, 30_000, [("tōpic", [(0, records), (7, None)]), ("b", [])]))
    same(kio, ours)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_is_a_protocol_error(version: int) -> None:
    frame = kio_frame(version, "tx", 1, 500, [("t", [(0, b"abc"), (1, None)]), ("u", [(2, b"")])])
    header, at = parse_request_header(frame, supported=lambda k, v: True)
    for cut in range(at, len(frame)):
        with pytest.raises(ProtocolError):
            decode_request(frame[:cut], header, at)  # kio refuses it too
        with pytest.raises(ProtocolError):
            decode_produce_request(frame[:cut], version, at)


@pytest.mark.parametrize("version", [3, 8, 9, 12])
def test_counts_beyond_the_frame_allocate_nothing(version: int) -> None:
    frame = kio_frame(version, None, 1, 500, [("t", [(0, b"abc")])])
    _, at = parse_request_header(frame, supported=lambda k, v: True)
    flexible = version >= 9
    topics_at = at + (1 if flexible else 2) + 6  # past the null transactional id, acks and timeout
    lying = bytearray(frame)
    if flexible:
        lying[topics_at : topics_at + 1] = b"\xff\xff\xff\xff\x07"  # 2**31 topics
    else:
        struct.pack_into(">i", lying, topics_at, 2**31 - 1)
    with pytest.raises(ProtocolError, match="topics claimed"):
        decode_produce_request(bytes(lying), version, at)
    parts_at = topics_at + (1 + 1 + 1 if flexible else 4 + 2 + 1)  # past the topic count and the name "t"
    lying = bytearray(frame)
    if flexible:
        lying[parts_at : parts_at + 1] = b"\xff\xff\xff\xff\x07"
    else:
        struct.pack_into(">i", lying, parts_at, 2**31 - 1)
    with pytest.raises(ProtocolError, match="partitions claimed"):
        decode_produce_request(bytes(lying), version, at)


def test_unknown_tagged_fields_are_skipped() -> None:
    frame = kio_frame(12, None, -1, 500, [("t", [(0, b"abc"), (1, b"de")])])
    _, at = parse_request_header(frame, supported=lambda k, v: True)
    first = frame.index(b"abc", at) + 3  # the first partition's tagged-field count
    assert frame[first] == 0
    tagged = frame[:first] + b"\x01\x05\x02xy" + frame[first + 1 :]  # one unknown tagged field (tag 5, 2 bytes)
    ours = decode_produce_request(tagged, 12, at)
    assert [(p.index, p.records) for p in ours.topic_data[0].partition_data] == [(0, b"abc"), (1, b"de")]
    with pytest.raises(ProtocolError):
        decode_produce_request(frame[:first] + b"\x01\x05\x09xy" + frame[first + 1 :], 12, at)  # runs past the end


def test_bad_utf8_in_a_topic_name_is_a_protocol_error() -> None:
    frame = kio_frame(9, None, 1, 500, [("tt", [(0, b"abc")])])
    _, at = parse_request_header(frame, supported=lambda k, v: True)
    bad = frame.replace(b"tt", b"\xff\xfe", 1)
    with pytest.raises(ProtocolError):
        decode_produce_request(bad, 9, at)


# the records' flexible length (size + 1) in one varint byte up to 126 bytes, two up to 16,382, three beyond
RECORD_SIZES = [b"abc", b"", None, bytes(125), bytes(126), bytes(127), bytes(300), bytes(16_382), bytes(16_383)]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("records", RECORD_SIZES)
def test_a_producers_one_partition_request_as_kio_reads_it(version: int, records: bytes | None) -> None:
    """A request with no transactional id, one topic and one partition is read with two unpacks (the first case
    of _decode_classic, v3-v8, and of _decode_flexible, v9-v12); anything else takes the general walk: both give
    what kio gives, from bytes (a copy of the records) and from a large frame's bytearray (a view into it). The
    names: v9+'s one-byte length holds up to 126 bytes (127 takes two)."""
    shapes: list[Topics] = [[("t", [(5, records)])], [("tōpic", [(5, records), (6, b"x")])],
                            [("t", [(5, records)]), ("u", [])], [("n" * 126, [(-7, records)])],
                            [("n" * 127, [(2**31 - 1, records)])], [("", [(5, records)])]]
    for topics in shapes:
        frame = kio_frame(version, None, -1, 500, topics)
        kio, ours = both(frame)
        same(kio, ours)
        _, at = parse_request_header(frame, supported=lambda k, v: True)
        assert isinstance(ours, ProduceRequest)
        viewed = decode_produce_request(bytearray(frame), version, at)
        assert [(t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
                for t in viewed.topic_data] == [(t.name, [(p.index, p.records) for p in t.partition_data])
                                                for t in ours.topic_data]  # fmt: skip


@pytest.mark.parametrize("version", [3, 8, 9, 12])
@pytest.mark.parametrize("records", [b"abcdef", bytes(range(200))])
def test_every_truncation_of_a_producers_request_is_a_protocol_error(version: int, records: bytes) -> None:
    frame = kio_frame(version, None, 1, 500, [("topic", [(0, records)])])
    _, at = parse_request_header(frame, supported=lambda k, v: True)
    assert decode_produce_request(frame, version, at).topic_data[0].partition_data[0].records == records
    for cut in range(at, len(frame)):
        with pytest.raises(ProtocolError):
            decode_produce_request(frame[:cut], version, at)
    with pytest.raises(ProtocolError):  # a name that is not UTF-8, in the one-partition case too
        decode_produce_request(frame.replace(b"topic", b"\xff\xfeopi", 1), version, at)


@pytest.mark.parametrize("version", [9, 12])
def test_a_producers_flexible_request_with_tagged_fields_or_a_long_varint(version: int) -> None:
    """What v9+'s one-partition case does not read itself goes to the general walk, which reads it as before: a
    tagged field after the partition, the topic or the request; a transactional id; a topic count or a records
    length written in more varint bytes than it needs (Kafka reads any unsigned varint)."""
    frame = kio_frame(version, None, -1, 500, [("t", [(5, b"abc")])])
    _, at = parse_request_header(frame, supported=lambda k, v: True)
    records_end = frame.index(b"abc", at) + 3
    assert frame[records_end:] == b"\0\0\0"
    for tagged_at in range(records_end, records_end + 3):  # one unknown tagged field (tag 5, 2 bytes) at each
        tagged = frame[:tagged_at] + b"\x01\x05\x02xy" + frame[tagged_at + 1 :]
        assert decode_produce_request(tagged, version, at) == decode_produce_request(frame, version, at)
        with pytest.raises(ProtocolError):  # one that runs past the end
            decode_produce_request(frame[:tagged_at] + b"\x01\x05\x09xy" + frame[tagged_at + 1 :], version, at)
    expected = decode_produce_request(frame, version, at)
    assert expected.topic_data[0].partition_data[0].records == b"abc" and expected.acks == -1
    topics_at = at + 1 + 6
    assert frame[topics_at : topics_at + 3] == b"\x02\x02t"
    long_count = frame[:topics_at] + b"\x82\x00" + frame[topics_at + 1 :]  # 2 in two varint bytes
    assert decode_produce_request(long_count, version, at) == expected
    size_at = records_end - 4
    assert frame[size_at] == 4
    long_size = frame[:size_at] + b"\x84\x80\x00" + frame[size_at + 1 :]  # 4 in three varint bytes
    assert decode_produce_request(long_size, version, at) == expected
    txn = kio_frame(version, "tx", -1, 500, [("t", [(5, b"abc")])])
    _, at = parse_request_header(txn, supported=lambda k, v: True)
    assert decode_produce_request(txn, version, at).transactional_id == "tx"

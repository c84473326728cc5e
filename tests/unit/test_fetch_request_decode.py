"""The hand-written Fetch request decoder reads what kio's reader reads, for every version kbus serves (4-12), and
refuses what kio refuses: random requests encoded by kio, decoded both ways; truncated and lying frames."""

from __future__ import annotations

import datetime
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbus.protocol.codec import ProtocolError, build, decode_request, encode_request, nested, parse_request_header
from kbus.protocol.codec import request_type as kio_request
from kbus.protocol.fetch_request_decode import decode_fetch_request

VERSIONS = range(4, 13)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(min_size=1, max_size=20)


def kio_frame(version: int, topics: list[tuple[str, list[tuple[int, int, int, int, int, int]]]],
              forgotten: list[tuple[str, list[int]]], head: tuple[int, int, int, int, int, int, int],
              rack: str) -> bytes:  # fmt: skip
    R = kio_request(1, version)
    fields = {f for f in R.__dataclass_fields__}  # type: ignore[attr-defined]
    pfields = set(nested(R, "FetchPartition").__dataclass_fields__)

    def part(p: tuple[int, int, int, int, int, int]) -> object:
        values = dict(zip(("partition", "current_leader_epoch", "fetch_offset", "last_fetched_epoch",
                           "log_start_offset", "partition_max_bytes"), p, strict=True))  # fmt: skip
        return build(nested(R, "FetchPartition"), **{k: v for k, v in values.items() if k in pfields})

    replica, wait, min_b, max_b, iso, sid, sep = head
    body = {"replica_id": replica, "max_wait": datetime.timedelta(milliseconds=wait), "min_bytes": min_b,
            "max_bytes": max_b, "isolation_level": iso, "session_id": sid, "session_epoch": sep,
            "topics": [build(nested(R, "FetchTopic"), topic=t, partitions=[part(p) for p in ps]) for t, ps in topics],
            "forgotten_topics_data": [build(nested(R, "ForgottenTopic"), topic=t, partitions=ps)
                                      for t, ps in forgotten] if version >= 7 else [],
            "rack_id": rack}  # fmt: skip
    return encode_request(build(R, **{k: v for k, v in body.items() if k in fields}), 1, "c")[4:]


def both(frame: bytes) -> tuple[object, object]:
    header, at = parse_request_header(frame, supported=lambda k, v: True)
    return decode_request(frame, header, at), decode_fetch_request(frame, header.api_version, at)


def same(kio: object, ours: object, version: int) -> None:
    k, o = kio, ours
    assert o.replica_id == k.replica_id and o.min_bytes == k.min_bytes  # type: ignore[attr-defined]
    assert o.max_wait == k.max_wait // datetime.timedelta(milliseconds=1)  # type: ignore[attr-defined]
    assert (o.max_bytes, o.isolation_level) == (k.max_bytes, k.isolation_level)  # type: ignore[attr-defined]
    assert (o.session_id, o.session_epoch) == (getattr(k, "session_id", 0), getattr(k, "session_epoch", -1))  # type: ignore[attr-defined]
    assert o.rack_id == getattr(k, "rack_id", "")  # type: ignore[attr-defined]
    assert len(o.topics) == len(k.topics)  # type: ignore[attr-defined]
    for ot, kt in zip(o.topics, k.topics, strict=True):  # type: ignore[attr-defined]
        assert ot.topic == kt.topic and len(ot.partitions) == len(kt.partitions)
        for op, kp in zip(ot.partitions, kt.partitions, strict=True):
            for f in ("partition", "current_leader_epoch", "fetch_offset", "last_fetched_epoch", "log_start_offset",
                      "partition_max_bytes"):  # fmt: skip
                unset = -1 if f == "current_leader_epoch" else None  # ours says -1 (unset) before v9, as kio's default
                assert getattr(op, f, None) == getattr(kp, f, unset), f
    kf = getattr(k, "forgotten_topics_data", ())
    assert [(f.topic, list(f.partitions)) for f in o.forgotten_topics_data] == [  # type: ignore[attr-defined]
        (f.topic, list(f.partitions)) for f in kf]


requests = st.tuples(
    st.lists(st.tuples(names, st.lists(st.tuples(i32, i32, i64, i32, i64, i32), max_size=6)), max_size=4),
    st.lists(st.tuples(names, st.lists(i32, max_size=4)), max_size=3),
    st.tuples(i32, st.integers(0, 2**31 - 1), i32, i32, st.integers(0, 1), i32, i32),
    st.text(max_size=10),
)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(req=requests)
def test_the_same_request_as_kio(version: int, req: tuple) -> None:  # type: ignore[type-arg]
    kio, ours = both(kio_frame(version, *req))
    same(kio, ours, version)


@pytest.mark.parametrize("partitions", [1, 2])  # one partition takes a path of its own
@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_is_a_protocol_error(version: int, partitions: int) -> None:
    frame = kio_frame(version, [("t", [(0, 1, 2, 3, 4, 5), (1, 1, 2, 3, 4, 5)][:partitions])], [("f", [1])],
                      (-1, 500, 1, 10, 0, 0, -1), "r")  # fmt: skip
    header, at = parse_request_header(frame, supported=lambda k, v: True)
    for cut in range(at, len(frame)):
        try:
            decode_fetch_request(frame[:cut], version, at)
        except ProtocolError:
            continue
        # kio may read a shorter frame too only when what was cut is optional; it must then agree
        same(decode_request(frame[:cut], header, at), decode_fetch_request(frame[:cut], version, at), version)


@pytest.mark.parametrize("version", [4, 11, 12])
def test_a_partition_count_beyond_the_frame_allocates_nothing(version: int) -> None:
    frame = bytearray(kio_frame(version, [("t", [(0, 1, 2, 3, 4, 5)])], [], (-1, 500, 1, 10, 0, 0, -1), ""))
    _, at = parse_request_header(bytes(frame), supported=lambda k, v: True)
    # the partitions' count sits right after the topic name
    pos = frame.index(b"t", at) + 1
    if version >= 12:
        frame[pos] = 0xFF  # a varint that goes on: 2**31-ish partitions
        frame[pos + 1 : pos + 1] = b"\xff\xff\xff\x07"
    else:
        struct.pack_into(">i", frame, pos, 2**31 - 1)
    with pytest.raises(ProtocolError):
        decode_fetch_request(bytes(frame), version, at)


@pytest.mark.parametrize("partitions", [1, 2])
def test_flexible_partitions_with_tagged_fields_take_the_slow_path(partitions: int) -> None:
    frame = bytearray(kio_frame(12, [("t", [(0, 1, 2, 3, 4, 5), (1, 1, 2, 3, 4, 5)][:partitions])], [],
                                (-1, 500, 1, 10, 0, 0, -1), ""))  # fmt: skip
    header, at = parse_request_header(bytes(frame), supported=lambda k, v: True)
    first = frame.index(b"t", at) + 2  # past the name and the partitions' count
    tag_at = first + 32  # partition, epochs, offsets, max bytes: 32 bytes, then the tagged-field count
    assert frame[tag_at] == 0
    frame[tag_at : tag_at + 1] = b"\x01\x05\x02ab"  # one unknown tagged field (tag 5, 2 bytes)
    ours = decode_fetch_request(bytes(frame), 12, at)
    assert [(p.partition, p.fetch_offset) for p in ours.topics[0].partitions] == [(0, 2), (1, 2)][:partitions]
    # (kio refuses a tag it does not know; Kafka, and this decoder, skip it: that is what tagged fields are for)
    assert header.api_version == 12

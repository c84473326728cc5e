"""The hand-written OffsetCommit and Heartbeat request decoders read what kio's reader reads, for every version kbus
serves (OffsetCommit 2-10, Heartbeat 0-4), and refuse what kio refuses: random requests encoded by kio, decoded
both ways; truncated and lying frames; the connection uses them."""

from __future__ import annotations

import datetime
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbus.protocol.codec import (
    ProtocolError,
    build,
    decode_request,
    encode_request,
    ms,
    nested,
    parse_request_header,
)
from kbus.protocol.codec import request_type as kio_request
from kbus.protocol.connection import Connection, Request
from kbus.protocol.group_requests import (
    HeartbeatRequest,
    OffsetCommitRequest,
    decode_heartbeat_request,
    decode_offset_commit_request,
)

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=12)
partition = st.tuples(i32, i64, i32, st.none() | text)
topic = st.tuples(text, st.uuids(), st.lists(partition, max_size=3))


Topic = tuple[str, uuid.UUID, list[tuple[int, int, int, str | None]]]


def offset_commit_frame(version: int, head: tuple[str, int, str, str | None, int], topics: list[Topic]) -> bytes:
    R = kio_request(8, version)
    assert R is not None
    fields = set(R.__dataclass_fields__)  # type: ignore[attr-defined]
    tfields = set(nested(R, "OffsetCommitRequestTopic").__dataclass_fields__)
    pfields = set(nested(R, "OffsetCommitRequestPartition").__dataclass_fields__)

    def part(p: tuple[int, int, int, str | None]) -> object:
        values = dict(zip(("partition_index", "committed_offset", "committed_leader_epoch", "committed_metadata"), p,
                          strict=True))  # fmt: skip
        return build(nested(R, "OffsetCommitRequestPartition"), **{k: v for k, v in values.items() if k in pfields})

    def top(t: Topic) -> object:
        values = {"name": t[0], "topic_id": t[1], "partitions": [part(p) for p in t[2]]}
        return build(nested(R, "OffsetCommitRequestTopic"), **{k: v for k, v in values.items() if k in tfields})

    group, generation, member, instance, retention = head
    body = {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
            "group_instance_id": instance, "retention_time": datetime.timedelta(milliseconds=retention),
            "topics": [top(t) for t in topics]}  # fmt: skip
    return encode_request(build(R, **{k: v for k, v in body.items() if k in fields}), 1, "c")[4:]


def decode_both(frame: bytes) -> tuple[object, object]:
    header, at = parse_request_header(frame, supported=lambda k, v: True)
    decoder = decode_offset_commit_request if header.api_key == 8 else decode_heartbeat_request
    return decode_request(frame, header, at), decoder(frame, header.api_version, at)


@settings(max_examples=40, deadline=None)
@given(version=st.integers(2, 10), group=text, generation=i32, member=text, instance=st.none() | text,
       retention=st.integers(-(10**15), 10**15), topics=st.lists(topic, max_size=3))  # fmt: skip
def test_offset_commit_reads_what_kio_reads(version: int, group: str, generation: int, member: str,
                                            instance: str | None, retention: int,
                                            topics: list[Topic]) -> None:  # fmt: skip
    kio, ours = decode_both(offset_commit_frame(version, (group, generation, member, instance, retention), topics))
    assert isinstance(ours, OffsetCommitRequest)
    k: object = kio
    assert (ours.group_id, ours.generation_id_or_member_epoch, ours.member_id) == (
        k.group_id, k.generation_id_or_member_epoch, k.member_id)  # type: ignore[attr-defined]  # fmt: skip
    assert ours.group_instance_id == getattr(k, "group_instance_id", None)
    assert ours.retention_time == (ms(k.retention_time) if version <= 4 else -1)  # type: ignore[attr-defined]
    assert len(ours.topics) == len(k.topics)  # type: ignore[attr-defined]
    for ot, kt in zip(ours.topics, k.topics, strict=True):  # type: ignore[attr-defined]
        if version >= 10:
            assert ot.topic_id == kt.topic_id
        else:
            assert ot.name == kt.name
        assert len(ot.partitions) == len(kt.partitions)
        for op, kp in zip(ot.partitions, kt.partitions, strict=True):
            assert (op.partition_index, op.committed_offset, op.committed_metadata) == (
                kp.partition_index, kp.committed_offset, kp.committed_metadata)  # fmt: skip
            assert op.committed_leader_epoch == getattr(kp, "committed_leader_epoch", -1)


@settings(max_examples=25, deadline=None)
@given(version=st.integers(0, 4), group=text, generation=i32, member=text, instance=st.none() | text)
def test_heartbeat_reads_what_kio_reads(version: int, group: str, generation: int, member: str,
                                        instance: str | None) -> None:  # fmt: skip
    R = kio_request(12, version)
    assert R is not None
    fields = set(R.__dataclass_fields__)  # type: ignore[attr-defined]
    body = {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance}
    frame = encode_request(build(R, **{k: v for k, v in body.items() if k in fields}), 1, "c")[4:]
    kio, ours = decode_both(frame)
    assert isinstance(ours, HeartbeatRequest)
    assert (ours.group_id, ours.generation_id, ours.member_id) == (kio.group_id, kio.generation_id, kio.member_id)  # type: ignore[attr-defined]
    assert ours.group_instance_id == getattr(kio, "group_instance_id", None)


def test_retention_beyond_a_timedelta_is_clamped_as_kio_reads_it() -> None:
    frame = bytearray(offset_commit_frame(2, ("g", 1, "m", None, 0), []))
    _header, at = parse_request_header(bytes(frame), supported=lambda k, v: True)
    pos = at + 2 + 1 + 4 + 2 + 1  # group "g", generation, member "m"
    frame[pos : pos + 8] = (2**63 - 1).to_bytes(8, "big")
    kio, ours = decode_both(bytes(frame))
    assert isinstance(ours, OffsetCommitRequest)
    assert ours.retention_time == ms(kio.retention_time) == (2**63 - 1) // 1000  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", range(2, 11))
def test_truncated_and_lying_offset_commits_are_protocol_errors(version: int) -> None:
    frame = offset_commit_frame(version, ("group", 3, "member", "i", 1000),
                                [("orders", uuid.UUID(int=5), [(0, 10, 2, "md"), (1, 11, 2, None)])])  # fmt: skip
    _header, at = parse_request_header(frame, supported=lambda k, v: True)
    decode_offset_commit_request(frame, version, at)  # the whole frame decodes
    for cut in range(at, len(frame)):
        with pytest.raises(ProtocolError):
            decode_offset_commit_request(frame[:cut], version, at)
    # a partition count far beyond the bytes left is refused before anything is allocated for it
    lying = bytearray(frame)
    count_at = len(frame) - (2 * (12 + (4 if version >= 6 else 0)) + (2 + 2 + 2 if version < 8 else 3 + 1 + 2 + 1))
    count_at -= 1 if version >= 8 else 4
    if version < 8:
        lying[count_at : count_at + 4] = (2**30).to_bytes(4, "big")
    else:
        lying[count_at] = 0x7F
        lying[count_at + 1 :] = b"\xff\xff\xff\x07" + lying[count_at + 1 :]
    with pytest.raises(ProtocolError):
        decode_offset_commit_request(bytes(lying), version, at)


def test_a_null_group_id_is_refused() -> None:
    frame = bytearray(encode_request(build(kio_request(12, 2), group_id="g", generation_id=1, member_id="m"), 1,
                                     "c")[4:])  # fmt: skip
    _header, at = parse_request_header(bytes(frame), supported=lambda k, v: True)
    frame[at : at + 3] = b"\xff\xff"  # null instead of "g" (2 bytes of length + 1 byte)
    with pytest.raises(ProtocolError):
        decode_heartbeat_request(bytes(frame[: at + 2]) + bytes(frame[at + 3 :]), 2, at)


@pytest.mark.parametrize(("key", "version", "expected"), [(8, 8, OffsetCommitRequest), (12, 4, HeartbeatRequest)])
def test_the_connection_decodes_them_by_hand(key: int, version: int, expected: type) -> None:
    import kbus.server.apis  # noqa: F401  # registers the handlers
    from kbus.server.apis.registry import CATALOG, PLAINTEXT_LISTENER

    if key == 8:
        frame = offset_commit_frame(version, ("g", 1, "m", None, 0), [("t", uuid.UUID(int=1), [(0, 1, -1, "")])])
    else:
        frame = encode_request(build(kio_request(12, version), group_id="g", generation_id=1, member_id="m"), 1,
                               "c")[4:]  # fmt: skip
    conn = Connection(PLAINTEXT_LISTENER, CATALOG, max_frame_bytes=1 << 20)
    conn.receive_data(len(frame).to_bytes(4, "big") + frame)
    event = conn.next_event()
    assert isinstance(event, Request)
    assert isinstance(event.body, expected)

"""__consumer_offsets record formats and the group -> partition mapping (byte-compatible with Kafka)."""

from __future__ import annotations

import struct
import uuid

import pytest

from kbus.protocol.record_batch import build_batch, decode_records
from kbus.server.coordinator.commit_batch import (
    PartitionExists,
    check_offsets,
    offset_commit_batch,
    offset_commit_buffer,
)
from kbus.server.coordinator.records import (
    GroupKey,
    GroupMetadataRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetKey,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_metadata_key,
    group_metadata_value,
    java_string_hashcode,
    offset_commit_key,
    offset_commit_value,
    partition_for,
    subscribed_topics,
)


def test_java_string_hashcode_matches_java() -> None:
    # Values printed by jshell (OpenJDK 17) for the same strings.
    assert java_string_hashcode("abc-dashboard") == -1735675159
    assert java_string_hashcode("console-consumer-12345") == 158455506
    assert java_string_hashcode("h\u00e9llo\U0001f600") == 291564465  # surrogate pair counts as two chars
    assert java_string_hashcode("") == 0


def test_partition_for_uses_kafka_utils_abs() -> None:
    # Utils.abs(hashCode) % 50, i.e. Math.abs, not the producer's `& 0x7fffffff`.
    assert partition_for("abc-dashboard", 50) == 9
    assert 0 <= partition_for("x" * 100, 50) < 50


def test_offset_commit_key_layout() -> None:
    key = offset_commit_key("g", "t", 3)
    assert key == struct.pack(">h", 1) + b"\x00\x01g" + b"\x00\x01t" + struct.pack(">i", 3)
    assert decode_key(key) == OffsetKey("g", "t", 3)


def test_group_metadata_key_layout() -> None:
    key = group_metadata_key("abc-dashboard")
    assert key[:2] == b"\x00\x02"
    assert decode_key(key) == GroupKey("abc-dashboard")


def test_offset_value_v3_round_trip() -> None:
    value = OffsetAndMetadata(42, leader_epoch=7, metadata="my metadata", commit_timestamp=1700000000000)
    raw = offset_commit_value(value)
    assert raw[:2] == b"\x00\x03"
    assert len(raw) == 2 + 8 + 4 + 2 + len("my metadata") + 8
    assert decode_offset_value(raw) == value


def test_offset_value_with_expire_timestamp_is_v1() -> None:
    value = OffsetAndMetadata(5, metadata="", commit_timestamp=1000, expire_timestamp=61000)
    raw = offset_commit_value(value)
    assert raw[:2] == b"\x00\x01"
    assert decode_offset_value(raw) == OffsetAndMetadata(5, -1, "", 1000, 61000)


def test_offset_values_byte_for_byte() -> None:
    """Kafka's OffsetCommitValue v3 (offset, leader epoch, metadata, commit timestamp) and v1 (offset, metadata,
    commit and expire timestamps), metadata as an int16-length UTF-8 string."""
    md = "é/meta"
    raw_md = md.encode("utf-8")
    v3 = offset_commit_value(OffsetAndMetadata(42, 7, md, 1700000000000))
    assert v3 == struct.pack(">hqih", 3, 42, 7, len(raw_md)) + raw_md + struct.pack(">q", 1700000000000)
    v1 = offset_commit_value(OffsetAndMetadata(42, 7, md, 1000, 61000))
    assert v1 == struct.pack(">hqh", 1, 42, len(raw_md)) + raw_md + struct.pack(">qq", 1000, 61000)


def test_offset_commit_batch_is_one_record_per_partition() -> None:
    offsets = {("t", 0): OffsetAndMetadata(5, 1, "", 10), ("u", 2): OffsetAndMetadata(9, -1, "m", 10, 20)}
    batch = offset_commit_batch("g", offsets, 1234)
    assert batch == build_batch([(offset_commit_key("g", t, p), offset_commit_value(om))
                                 for (t, p), om in offsets.items()], timestamp_ms=1234)  # fmt: skip
    records = decode_records(batch)
    assert [decode_key(r.key) for r in records] == [OffsetKey("g", "t", 0), OffsetKey("g", "u", 2)]
    assert [r.timestamp for r in records] == [1234, 1234]


def _key_as_before(group: str, topic: str, partition: int) -> bytes:
    """The key and value as commit_batch packed them before its fixed structs (one format string per call)."""
    g, t = group.encode("utf-8"), topic.encode("utf-8")
    return struct.pack(f">hh{len(g)}sh{len(t)}si", 1, len(g), g, len(t), t, partition)


def _value_as_before(om: OffsetAndMetadata) -> bytes:
    md = om.metadata.encode("utf-8")
    if om.expire_timestamp is not None:
        return struct.pack(f">hqh{len(md)}sqq", 1, om.offset, len(md), md, om.commit_timestamp, om.expire_timestamp)
    return struct.pack(f">hqih{len(md)}sq", 3, om.offset, om.leader_epoch, len(md), md, om.commit_timestamp)


@pytest.mark.parametrize(
    ("group", "topic", "metadata", "expire", "partitions"),
    [
        ("g", "t", "", None, 1),  # the consumer's one-record commit
        ("grüppe-" * 20, "tópic" * 30, "m" * 300, None, 1),  # one record, 2-byte varints
        ("g", "t", "é/meta", 61000, 1),  # one record, a v1 value
        ("grüppe-" * 20, "tópic" * 30, "m" * 300, None, 3),  # varints of 2 bytes: key, value and record lengths
        ("g", "t", "é/meta", 61000, 2),  # v1 value (OffsetCommit v2-v4 retention_time)
        ("", "t", "x", None, 130),  # an empty group id; offset deltas past one varint byte
    ],
)
def test_offset_commit_batch_bytes_as_before(
    group: str, topic: str, metadata: str, expire: int | None, partitions: int
) -> None:
    offsets = {(topic, p): OffsetAndMetadata(2**40 + p, p % 7 - 1, metadata, 1700000000000, expire)
               for p in range(partitions)}  # fmt: skip
    for (t, p), om in offsets.items():
        assert offset_commit_key(group, t, p) == _key_as_before(group, t, p)
        assert offset_commit_value(om) == _value_as_before(om)
    batch = offset_commit_batch(group, offsets, 1700000000123)
    assert batch == build_batch([(_key_as_before(group, t, p), _value_as_before(om)) for (t, p), om in offsets.items()],
                                timestamp_ms=1700000000123)  # fmt: skip
    values = [r.value for r in decode_records(batch)]
    # a v1 value has no leader epoch
    expected = [om if expire is None else OffsetAndMetadata(om.offset, -1, om.metadata, om.commit_timestamp, expire)
                for om in offsets.values()]  # fmt: skip
    assert [decode_offset_value(v) for v in values if v is not None] == expected


def test_offset_commit_keys_kept_are_bounded() -> None:
    """The batch keeps the keys it packed (a consumer commits the same partitions again and again), up to a bound:
    group ids or topics made up by a client do not grow it."""
    from kbus.server.coordinator import commit_batch

    for i in range(commit_batch._MAX_KEYS + 10):
        batch = offset_commit_batch(f"g{i}", {("t", i): OffsetAndMetadata(i, -1, "", 1)}, 1)
        assert decode_key(decode_records(batch)[0].key or b"") == OffsetKey(f"g{i}", "t", i)
        assert len(commit_batch._KEYS) <= commit_batch._MAX_KEYS
        assert len(commit_batch._ONE_RECORD) <= commit_batch._MAX_KEYS


def test_one_record_batch_follows_its_value_length() -> None:
    """A one-partition commit's batch is written from a head kept per (group, topic, partition) and value length: the
    same partition committed with and without metadata, and a v1 value, each give build_batch's bytes."""
    for metadata, expire in (("", None), ("abc", None), ("", None), ("x" * 200, None), ("", 5), ("", None)):
        om = OffsetAndMetadata(7, 2, metadata, 1700000000000, expire)
        batch = offset_commit_batch("g1", {("t", 4): om}, 1700000000999)
        assert batch == build_batch([(offset_commit_key("g1", "t", 4), offset_commit_value(om))],
                                    timestamp_ms=1700000000999)  # fmt: skip
        assert decode_offset_value(decode_records(batch)[0].value or b"") == (
            om if expire is None else OffsetAndMetadata(7, -1, metadata, 1700000000000, expire))


def test_offset_and_metadata_equality_hash_and_repr() -> None:
    """Equal when every field is (and only to another OffsetAndMetadata), hashable alike, its repr naming the fields,
    keyword arguments and defaults as the NamedTuple it replaced."""
    a = OffsetAndMetadata(5, metadata="m", commit_timestamp=3)
    assert a == OffsetAndMetadata(5, -1, "m", 3, None) and hash(a) == hash(OffsetAndMetadata(5, -1, "m", 3))
    assert a != OffsetAndMetadata(5, -1, "m", 3, 9) and a != OffsetAndMetadata(6, -1, "m", 3)
    assert a != (5, -1, "m", 3, None)
    assert repr(a) == ("OffsetAndMetadata(offset=5, leader_epoch=-1, metadata='m', commit_timestamp=3, "
                       "expire_timestamp=None)")  # fmt: skip


def test_check_offsets_refuses_unknown_partitions_and_long_metadata() -> None:
    offsets = {("t", 0): OffsetAndMetadata(1, metadata="x" * 10), ("t", 1): OffsetAndMetadata(1, metadata="é" * 6),
               ("gone", 0): OffsetAndMetadata(1)}  # fmt: skip
    errors, valid = check_offsets(offsets, lambda topic, partition: topic == "t", 11)
    assert errors == {("t", 1): 12, ("gone", 0): 3}  # OFFSET_METADATA_TOO_LARGE (12 bytes), UNKNOWN_TOPIC_OR_PARTITION
    assert valid == {("t", 0): offsets[("t", 0)]}
    assert check_offsets(offsets, None, 4096) == ({}, offsets)
    _, same = check_offsets(offsets, None, 4096)
    assert same is offsets  # none refused: the offsets given, not a copy


def test_partition_exists_asks_the_metadata_for_the_one_topic() -> None:
    """OffsetCommit's unknown-partition check (compiled): the topic looked up by name, the partition among its
    partitions; an unknown topic or partition does not exist."""
    from kbus.server.metadata.types import PartitionState, TopicMetadata

    asked: list[str] = []
    topics = {"t": TopicMetadata("t", uuid.uuid4(), {p: PartitionState(1, 0, [1], [1]) for p in (0, 1)})}

    def topic(name: str) -> TopicMetadata | None:
        asked.append(name)
        return topics.get(name)

    exists = PartitionExists(topic)
    assert exists("t", 1) and not exists("t", 2) and not exists("gone", 0)
    assert asked == ["t", "t", "gone"]
    offsets = {("t", 0): OffsetAndMetadata(1), ("t", 5): OffsetAndMetadata(2)}
    assert check_offsets(offsets, exists, 4096) == ({("t", 5): 3}, {("t", 0): offsets[("t", 0)]})


@pytest.mark.parametrize("partitions", [1, 3])
def test_offset_commit_buffer_is_the_batch_in_a_bytearray(partitions: int) -> None:
    """The commit path hands the log the batch as the bytearray it was written into (a writable memoryview of it):
    the same bytes as offset_commit_batch, a new buffer each time (the log stamps offsets into it)."""
    offsets = {("t", p): OffsetAndMetadata(10 + p, 1, "", 1700000000000) for p in range(partitions)}
    first = offset_commit_buffer("g", offsets, 1700000000001)
    second = offset_commit_buffer("g", offsets, 1700000000001)
    assert type(first) is bytearray and first == offset_commit_batch("g", offsets, 1700000000001)
    assert first == second and first is not second


def test_offset_value_v4_flexible_decodes() -> None:
    # v4: compact string (length+1 varint) and an empty tagged-field section.
    raw = struct.pack(">hqi", 4, 9, 2) + bytes([3]) + b"md" + struct.pack(">q", 123) + b"\x00"
    assert decode_offset_value(raw) == OffsetAndMetadata(9, 2, "md", 123)


def test_group_value_v3_round_trip() -> None:
    rec = GroupMetadataRecord(
        protocol_type="consumer",
        generation=4,
        protocol="range",
        leader="c-1",
        current_state_timestamp=99,
        members=[
            MemberRecord("c-1", "instance-a", "c", "/127.0.0.1", 300000, 10000, b"sub", b"assign"),
            MemberRecord("c-2", None, "c", "/127.0.0.1", 300000, 10000, b"", b""),
        ],
    )
    raw = group_metadata_value(rec)
    assert raw[:2] == b"\x00\x03"
    assert decode_group_value(raw) == rec


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    rec = GroupMetadataRecord("consumer", 5, None, None, 1, [])
    assert decode_group_value(group_metadata_value(rec)) == rec


def test_unknown_versions_are_rejected() -> None:
    with pytest.raises(RecordFormatError):
        decode_key(struct.pack(">h", 99) + b"\x00\x01g")
    with pytest.raises(RecordFormatError):
        decode_offset_value(struct.pack(">h", 17) + b"\x00" * 30)


def test_subscribed_topics_from_consumer_subscription() -> None:
    sub = struct.pack(">hi", 1, 2) + b"\x00\x01a" + b"\x00\x03bcd" + struct.pack(">i", -1) + struct.pack(">i", 0)
    assert subscribed_topics(sub) == {"a", "bcd"}
    assert subscribed_topics(b"\x00") is None


def test_share_group_records_round_trip_as_kafka_4_writes_them() -> None:
    """Kafka 4's share group records (keys 10-14 of __consumer_offsets), replayed into the group they describe."""
    import uuid

    from kbus.server.coordinator import records as r
    from kbus.server.coordinator.consumer_group import TopicImage
    from kbus.server.coordinator.share_group import (
        ShareGroup,
        ShareGroupMember,
        ShareGroupReplay,
        assignment_epoch_record,
        current_assignment_record,
        group_epoch_record,
        member_metadata_record,
        member_tombstones,
        target_member_record,
    )

    tid = uuid.uuid4()
    image = TopicImage(version=1, counts={"t": 2}, ids={"t": tid}, names_by_id={tid: "t"})
    group = ShareGroup("g", 0, group_epoch=3, assignment_epoch=3)
    a = ShareGroupMember("a", None, "cid", "/1.2.3.4", ("t",), 3, 2, {"t": frozenset({0, 1})})
    b = ShareGroupMember("b", "rack", "cid", "/1.2.3.4", ("t",), 3, 0, {"t": frozenset({0, 1})})
    recs = [group_epoch_record(group), assignment_epoch_record(group)]
    for m in (a, b):
        recs += [member_metadata_record("g", m), target_member_record(image, "g", m.member_id, m.assigned),
                 current_assignment_record(image, "g", m)]
    recs += member_tombstones("g", "b")
    # the keys are Kafka's: version 11 ShareGroupMetadataKey(group), 10 ShareGroupMemberMetadataKey(group, member)
    assert recs[0][0] == struct.pack(">hh", 11, 1) + b"g"
    assert recs[2][0] == struct.pack(">hh", 10, 1) + b"g" + struct.pack(">h", 1) + b"a"
    # ShareGroupCurrentMemberAssignmentValue v0: epochs, state 0, [(topic id, [0, 1])], no tagged fields
    assert recs[4][1] == (struct.pack(">hiib", 0, 3, 2, 0) + b"\x02" + tid.bytes + b"\x03"
                          + struct.pack(">ii", 0, 1) + b"\x00\x00")
    replay = ShareGroupReplay(image)
    for key, value in recs:
        k = decode_key(key)
        assert isinstance(k, r.ShareGroupKey)
        replay.replay(k, value)
    [loaded] = replay.groups(0)
    assert (loaded.group_epoch, loaded.assignment_epoch) == (3, 3)
    assert loaded.members == {"a": a} and loaded.target == {"a": {"t": frozenset({0, 1})}}

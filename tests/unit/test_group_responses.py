"""The hand-encoded Heartbeat and OffsetCommit responses are byte for byte what kio writes, for every version."""

from __future__ import annotations

import uuid

import pytest

from kbus.protocol.codec import build, encode_entity, nested, response_type
from kbus.protocol.group_responses import encode_heartbeat_response, encode_offset_commit_response, errors_by_topic
from kbus.server.apis.registry import API_TABLE

TID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def versions(key: int) -> range:
    import kbus.server.apis.groups  # noqa: F401  # registers the handlers

    spec = API_TABLE[key]
    return range(spec.min_version, spec.max_version + 1)


@pytest.mark.parametrize("version", versions(12))
@pytest.mark.parametrize(("error", "throttle"), [(0, 0), (27, 0), (25, 1234)])
def test_heartbeat_same_bytes_as_kio(version: int, error: int, throttle: int) -> None:
    kio = build(response_type(12, version), throttle_time=throttle, error_code=error)
    if version == 0:
        throttle = 0  # v0 has no throttle time
    assert encode_heartbeat_response(version, error, throttle).data == encode_entity(kio)


@pytest.mark.parametrize("version", versions(8))
@pytest.mark.parametrize("throttle", [0, 77])
def test_offset_commit_same_bytes_as_kio(version: int, throttle: int) -> None:
    cls = response_type(8, version)
    topics = [("orders", TID, [(0, 0), (3, 22), (7, 0)]), ("ü-topic", None, [(1, 29)]), ("empty", TID, [])]
    kio = build(cls, throttle_time=throttle, topics=[
        build(nested(cls, "OffsetCommitResponseTopic"), name=name, topic_id=tid or uuid.UUID(int=0), partitions=[
            build(nested(cls, "OffsetCommitResponsePartition"), partition_index=p, error_code=e) for p, e in parts])
        for name, tid, parts in topics])  # fmt: skip
    mine = encode_offset_commit_response(version, topics, throttle if version >= 3 else 0)
    assert mine.data == encode_entity(kio)
    assert encode_offset_commit_response(version, []).data == encode_entity(build(cls, throttle_time=0, topics=()))


@pytest.mark.parametrize("version", versions(8))
@pytest.mark.parametrize("name", ["t", "x" * 126, "x" * 127, "é" * 63, "é" * 64, ""])
@pytest.mark.parametrize(("partition", "error", "throttle"), [(0, 0, 0), (2**31 - 1, 22, 77), (5, -1, 2**31 - 1)])
def test_offset_commit_of_one_partition_same_bytes_as_kio(
    version: int, name: str, partition: int, error: int, throttle: int
) -> None:
    """A consumer's commit of one partition (encoded in two packs from v8) around the one-byte limit of a compact
    name's length: 126 bytes (ASCII or two-byte UTF-8) in one byte, 127 in two."""
    cls = response_type(8, version)
    kio = build(cls, throttle_time=throttle, topics=[
        build(nested(cls, "OffsetCommitResponseTopic"), name=name, topic_id=TID, partitions=[
            build(nested(cls, "OffsetCommitResponsePartition"), partition_index=partition, error_code=error)])])
    mine = encode_offset_commit_response(version, [(name, TID, [(partition, error)])], throttle if version >= 3 else 0)
    assert mine.data == encode_entity(kio)


def test_errors_by_topic_keeps_the_order_partitions_were_seen_in() -> None:
    errors = {("b", 1): 0, ("a", 0): 3, ("b", 0): 29}
    assert errors_by_topic(errors) == {"b": [(1, 0), (0, 29)], "a": [(0, 3)]}
    assert list(errors_by_topic(errors)) == ["b", "a"]


@pytest.mark.parametrize("version", [v for v in versions(8) if v < 10])
@pytest.mark.parametrize("name", ["t", "x" * 126, "x" * 127, "é" * 64])
@pytest.mark.parametrize(("partition", "error"), [(0, 0), (2**31 - 1, 22), (5, -1)])
def test_offset_commit_one_is_kios_bytes_and_kept(version: int, name: str, partition: int, error: int) -> None:
    """The handler's answer to a commit of one partition by topic name (v2-v9, no request quota: throttle time 0) is
    kio's bytes; v8-v9's is kept and answered again for the same partition and error, and a different error or
    partition gets its own."""
    from kbus.protocol import group_responses

    cls = response_type(8, version)
    kio = build(cls, throttle_time=0, topics=[
        build(nested(cls, "OffsetCommitResponseTopic"), name=name, topic_id=TID, partitions=[
            build(nested(cls, "OffsetCommitResponsePartition"), partition_index=partition, error_code=error)])])
    first = group_responses.encode_offset_commit_one(version, name, partition, error)
    assert first.data == encode_entity(kio)
    again = group_responses.encode_offset_commit_one(version, name, partition, error)
    assert again.data == first.data
    if version >= 8 and len(name.encode()) <= 126:
        assert again is first
        other = group_responses.encode_offset_commit_one(version, name, partition, 25)
        assert other is not first and other.data != first.data
    assert len(group_responses._ONE_ANSWERS) <= group_responses._MAX_ONE_ANSWERS


def test_offset_commit_answers_kept_are_bounded() -> None:
    """Made-up topic names only empty the kept answers: they never hold more than their bound."""
    from kbus.protocol import group_responses

    for i in range(group_responses._MAX_ONE_ANSWERS + 10):
        body = group_responses.encode_offset_commit_one(8, f"t{i}", 0, 0)
        assert body.data == encode_offset_commit_response(8, [(f"t{i}", None, [(0, 0)])]).data
        assert len(group_responses._ONE_ANSWERS) <= group_responses._MAX_ONE_ANSWERS

"""OffsetCommit (v2-v10) and Heartbeat (v0-v4) requests decoded by hand, sans I/O.

A consumer heartbeats every heartbeat.interval.ms and commits after every poll: both requests are a group id, a
generation, a member id and (OffsetCommit) a few partitions. kio's generic reader, with the bounds pre-pass before
it, was about a third of what the broker spends on a Heartbeat outside the socket; this reads the same fields into
slotted objects named as kio names them, so the handlers read either. `tests/unit/test_group_requests.py` checks the
result against kio's for every version.

Malformed input raises ProtocolError, as kio's decode does through the codec: the connection closes, the broker
serves the rest. A count is checked against the bytes left before anything is allocated for it. Tagged fields are
skipped (the broker reads none of them; Kafka skips unknown ones too).
"""

from __future__ import annotations

import struct
import uuid
from typing import Final

from kbus.protocol.codec import ProtocolError, clamp_retention_ms
from kbus.protocol.request_reader import RequestReader

OFFSET_COMMIT_KEY, HEARTBEAT_KEY = 8, 12
OFFSET_COMMIT_VERSIONS = (2, 10)
HEARTBEAT_VERSIONS = (0, 4)
_I32_I64: Final = struct.Struct(">iq")  # partition index, committed offset (Final: a C static when compiled)
# what a malformed request is called in its error, made once (an f-string per request was ~1% of a commit's CPU)
_OFFSET_COMMIT_NAMES: Final = tuple(f"OffsetCommitRequest v{v}" for v in range(OFFSET_COMMIT_VERSIONS[1] + 1))
_HEARTBEAT_NAMES: Final = tuple(f"HeartbeatRequest v{v}" for v in range(HEARTBEAT_VERSIONS[1] + 1))


class OffsetCommitPartition:
    __slots__ = ("committed_leader_epoch", "committed_metadata", "committed_offset", "partition_index")

    def __init__(self, partition_index: int, committed_offset: int, committed_leader_epoch: int,
                 committed_metadata: str | None) -> None:  # fmt: skip
        self.partition_index = partition_index
        self.committed_offset = committed_offset
        self.committed_leader_epoch = committed_leader_epoch
        self.committed_metadata = committed_metadata


class OffsetCommitTopic:
    """`name` (v2-v9) or `topic_id` (v10); the other is "" / the zero UUID, as kio's defaults."""

    __slots__ = ("name", "partitions", "topic_id")

    def __init__(self, name: str, topic_id: uuid.UUID, partitions: list[OffsetCommitPartition]) -> None:
        self.name = name
        self.topic_id = topic_id
        self.partitions = partitions


class OffsetCommitRequest:
    """`retention_time`: milliseconds (v2-v4; -1 otherwise), clamped as kio's timedelta would be (codec)."""

    __slots__ = ("generation_id_or_member_epoch", "group_id", "group_instance_id", "member_id", "retention_time",
                 "topics")  # fmt: skip

    def __init__(
        self,
        group_id: str,
        generation_id_or_member_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        retention_time: int,
        topics: list[OffsetCommitTopic],
    ) -> None:
        self.group_id = group_id
        self.generation_id_or_member_epoch = generation_id_or_member_epoch
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.retention_time = retention_time
        self.topics = topics


class HeartbeatRequest:
    __slots__ = ("generation_id", "group_id", "group_instance_id", "member_id")

    def __init__(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> None:
        self.group_id = group_id
        self.generation_id = generation_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id


def decode_offset_commit_request(frame: bytes, version: int, body_offset: int) -> OffsetCommitRequest:
    """The OffsetCommit request body at `body_offset` of `frame`; ProtocolError when it is malformed."""
    if not OFFSET_COMMIT_VERSIONS[0] <= version <= OFFSET_COMMIT_VERSIONS[1]:
        raise ProtocolError(f"OffsetCommit v{version} has no hand-written decoder")
    r = RequestReader(frame, body_offset, version >= 8, _OFFSET_COMMIT_NAMES[version])
    group_id = r.string()
    generation = r.i32()
    member_id = r.string()
    instance_id = r.nullable_string() if version >= 7 else None
    retention = clamp_retention_ms(r.i64()) if version <= 4 else -1
    by_id = version >= 10
    with_epoch = version >= 6
    # the least a partition takes: index, offset, [epoch], a metadata length (1 byte compact, 2 otherwise)
    partition_size = 12 + (4 if with_epoch else 0) + (1 if r.flexible else 2)
    topics: list[OffsetCommitTopic] = []
    for _ in range(r.count(16 if by_id else 1 if r.flexible else 2)):
        if by_id:
            if r.pos + 16 > r.end:
                raise r.error("truncated")
            topic_id = uuid.UUID(bytes=frame[r.pos : r.pos + 16])
            r.pos += 16
            name = ""
        else:
            name = r.string()
            topic_id = _ZERO_UUID
        partitions: list[OffsetCommitPartition] = []
        for _ in range(r.count(partition_size)):
            if r.pos + 12 > r.end:
                raise r.error("truncated")
            index, offset = _I32_I64.unpack_from(frame, r.pos)
            r.pos += 12
            epoch = r.i32() if with_epoch else -1
            partitions.append(OffsetCommitPartition(index, offset, epoch, r.nullable_string()))
            r.skip_tagged()
        topics.append(OffsetCommitTopic(name, topic_id, partitions))
        r.skip_tagged()
    r.skip_tagged()
    return OffsetCommitRequest(group_id, generation, member_id, instance_id, retention, topics)


def decode_heartbeat_request(frame: bytes, version: int, body_offset: int) -> HeartbeatRequest:
    """The Heartbeat request body at `body_offset` of `frame`; ProtocolError when it is malformed."""
    if not HEARTBEAT_VERSIONS[0] <= version <= HEARTBEAT_VERSIONS[1]:
        raise ProtocolError(f"Heartbeat v{version} has no hand-written decoder")
    r = RequestReader(frame, body_offset, version >= 4, _HEARTBEAT_NAMES[version])
    group_id = r.string()
    generation = r.i32()
    member_id = r.string()
    instance_id = r.nullable_string() if version >= 3 else None
    r.skip_tagged()
    return HeartbeatRequest(group_id, generation, member_id, instance_id)


_ZERO_UUID = uuid.UUID(int=0)

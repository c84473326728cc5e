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

from kbus.protocol.codec import ProtocolError, clamp_retention_ms, read_uvarint, skip_tagged_fields

OFFSET_COMMIT_KEY, HEARTBEAT_KEY = 8, 12
OFFSET_COMMIT_VERSIONS = (2, 10)
HEARTBEAT_VERSIONS = (0, 4)
_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_I32_I64 = struct.Struct(">iq")  # partition index, committed offset


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


class _Reader:
    __slots__ = ("buf", "end", "flexible", "name", "pos")

    def __init__(self, buf: bytes, pos: int, flexible: bool, name: str) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.flexible = flexible
        self.name = name

    def error(self, what: str) -> ProtocolError:
        return ProtocolError(f"malformed {self.name}: {what}")

    def i32(self) -> int:
        if self.pos + 4 > self.end:
            raise self.error("truncated")
        (value,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(value)

    def i64(self) -> int:
        if self.pos + 8 > self.end:
            raise self.error("truncated")
        (value,) = _I64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(value)

    def _length(self) -> int:
        """A string's or an array's length; -1 for null."""
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos)
            return n - 1
        if self.pos + 2 > self.end:
            raise self.error("truncated")
        (n,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(n)

    def nullable_string(self) -> str | None:
        n = self._length()
        if n < 0:
            return None
        if self.pos + n > self.end:
            raise self.error("a string runs past the frame")
        try:
            value = self.buf[self.pos : self.pos + n].decode()
        except UnicodeDecodeError as exc:
            raise self.error(str(exc)) from None
        self.pos += n
        return value

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise self.error("a null string where one is required")
        return value

    def count(self, min_item_size: int) -> int:
        """An array's length (a compact one in flexible versions); never more items than bytes left allow."""
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos)
            n -= 1
        else:
            n = self.i32()
        if n < 0:
            raise self.error("a null array where one is required")
        if n * min_item_size > self.end - self.pos:
            raise self.error(f"{n} items claimed, {self.end - self.pos} bytes left")
        return n

    def skip_tagged(self) -> None:
        if self.flexible:
            self.pos = skip_tagged_fields(self.buf, self.pos, self.name)


def decode_offset_commit_request(frame: bytes, version: int, body_offset: int) -> OffsetCommitRequest:
    """The OffsetCommit request body at `body_offset` of `frame`; ProtocolError when it is malformed."""
    if not OFFSET_COMMIT_VERSIONS[0] <= version <= OFFSET_COMMIT_VERSIONS[1]:
        raise ProtocolError(f"OffsetCommit v{version} has no hand-written decoder")
    r = _Reader(frame, body_offset, version >= 8, f"OffsetCommitRequest v{version}")
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
    r = _Reader(frame, body_offset, version >= 4, f"HeartbeatRequest v{version}")
    group_id = r.string()
    generation = r.i32()
    member_id = r.string()
    instance_id = r.nullable_string() if version >= 3 else None
    r.skip_tagged()
    return HeartbeatRequest(group_id, generation, member_id, instance_id)


_ZERO_UUID = uuid.UUID(int=0)

"""The record formats of `__consumer_offsets`, byte-compatible with Kafka's GroupMetadataManager.

Keys start with an int16 version: 0/1 = OffsetCommitKey(group, topic, partition), 2 = GroupMetadataKey(group).
Values start with their own int16 version. kbus writes OffsetCommitValue v3 (v1 when the commit carries an explicit
retention time, as Kafka does) and GroupMetadataValue v3; it reads every version Kafka has written (v0-v4, v4 being
the flexible encoding), so a log produced by either broker loads. A null value is a tombstone.

The consumer group protocol (KIP-848) adds Kafka 4's records: keys 3 ConsumerGroupMetadata(group), 5
ConsumerGroupMemberMetadata(group, member), 6 ConsumerGroupTargetAssignmentMetadata(group), 7
ConsumerGroupTargetAssignmentMember(group, member), 8 ConsumerGroupCurrentMemberAssignment(group, member), each
value version 0 in the flexible encoding (compact strings and arrays, tagged fields). Key 4
(ConsumerGroupPartitionMetadata) is read past, not written: the subscription metadata is recomputed on load.

Share groups (KIP-932) have Kafka 4's keys 10 ShareGroupMemberMetadata(group, member), 11 ShareGroupMetadata(group),
12 ShareGroupTargetAssignmentMetadata(group), 13 ShareGroupTargetAssignmentMember(group, member), 14
ShareGroupCurrentMemberAssignment(group, member) and 15 ShareGroupStatePartitionMetadata(group), values version 0
flexible. Key 9 (ShareGroupPartitionMetadata, Kafka 4.0 only) and 15 are read past.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

# OffsetCommitKey v1 / OffsetCommitValue v3 (and v1) are written by the compiled commit_batch (every OffsetCommit
# writes one of each per partition); they are re-exported here, the home of the formats. So is the mapping of a
# group id (or transactional id, share coordinator key) to its state topic's partition: every request to a
# coordinator maps its key.
from kbus.server.coordinator.commit_batch import OFFSET_COMMIT_KEY_VERSION as OFFSET_COMMIT_KEY_VERSION
from kbus.server.coordinator.commit_batch import OFFSET_COMMIT_VALUE_VERSION as OFFSET_COMMIT_VALUE_VERSION
from kbus.server.coordinator.commit_batch import OffsetAndMetadata as OffsetAndMetadata
from kbus.server.coordinator.commit_batch import java_string_hashcode as java_string_hashcode
from kbus.server.coordinator.commit_batch import offset_commit_key as offset_commit_key
from kbus.server.coordinator.commit_batch import offset_commit_value as offset_commit_value
from kbus.server.coordinator.commit_batch import partition_for as partition_for

GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A `__consumer_offsets` record kbus cannot decode (unknown version or truncated)."""


# ---------------------------------------------------------------- the values


@dataclass(slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberRecord] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


# consumer group (KIP-848) record kinds: their key versions
CG_METADATA, CG_PARTITION_METADATA, CG_MEMBER_METADATA = 3, 4, 5
CG_TARGET_ASSIGNMENT_METADATA, CG_TARGET_ASSIGNMENT_MEMBER, CG_CURRENT_MEMBER_ASSIGNMENT = 6, 7, 8
_CG_MEMBER_KEYS = frozenset({CG_MEMBER_METADATA, CG_TARGET_ASSIGNMENT_MEMBER, CG_CURRENT_MEMBER_ASSIGNMENT})
# share group (KIP-932) record kinds: their key versions
SG_PARTITION_METADATA, SG_MEMBER_METADATA, SG_METADATA = 9, 10, 11
SG_TARGET_ASSIGNMENT_METADATA, SG_TARGET_ASSIGNMENT_MEMBER, SG_CURRENT_MEMBER_ASSIGNMENT = 12, 13, 14
SG_STATE_PARTITION_METADATA = 15
_SG_MEMBER_KEYS = frozenset({SG_MEMBER_METADATA, SG_TARGET_ASSIGNMENT_MEMBER, SG_CURRENT_MEMBER_ASSIGNMENT})
# topic id -> partitions, as the consumer group records carry assignments
TopicIdPartitions = Sequence[tuple[uuid.UUID, Sequence[int]]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    kind: int  # the key version: CG_*
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class ShareGroupKey:
    kind: int  # the key version: SG_*
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class ShareMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareCurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # ClassicMemberMetadata (tag 0): a member using the classic protocol in a consumer group (Kafka 4's online
    # migration): its session timeout and its JoinGroup protocols as (name, metadata)
    classic_session_timeout_ms: int | None = None
    classic_protocols: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerCurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: tuple[tuple[uuid.UUID, tuple[int, ...]], ...]
    pending_revocation: tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


# ---------------------------------------------------------------- writing


class _Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v: int) -> _Writer:
        self.buf += _I16.pack(v)
        return self

    def i32(self, v: int) -> _Writer:
        self.buf += _I32.pack(v)
        return self

    def i64(self, v: int) -> _Writer:
        self.buf += _I64.pack(v)
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.i16(-1)
        raw = v.encode("utf-8")
        self.i16(len(raw))
        self.buf += raw
        return self

    def bytes_(self, v: bytes | None) -> _Writer:
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.buf += v
        return self


class _CompactWriter:
    """The flexible encoding of Kafka 4's consumer group values."""

    def __init__(self, version: int = 0) -> None:
        self.buf = bytearray(_I16.pack(version))

    def uvarint(self, v: int) -> _CompactWriter:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)
        return self

    def i8(self, v: int) -> _CompactWriter:
        self.buf += struct.pack(">b", v)
        return self

    def i32(self, v: int) -> _CompactWriter:
        self.buf += _I32.pack(v)
        return self

    def i64(self, v: int) -> _CompactWriter:
        self.buf += _I64.pack(v)
        return self

    def string(self, v: str | None) -> _CompactWriter:
        if v is None:
            return self.uvarint(0)
        raw = v.encode("utf-8")
        self.uvarint(len(raw) + 1)
        self.buf += raw
        return self

    def compact_bytes(self, v: bytes) -> _CompactWriter:
        self.uvarint(len(v) + 1)
        self.buf += v
        return self

    def topic_partitions(self, tps: TopicIdPartitions) -> _CompactWriter:
        self.uvarint(len(tps) + 1)
        for topic_id, partitions in tps:
            self.buf += topic_id.bytes
            self.uvarint(len(partitions) + 1)
            for p in partitions:
                self.i32(p)
            self.uvarint(0)  # the struct's tagged fields
        return self

    def done(self) -> bytes:
        self.uvarint(0)  # the value's tagged fields
        return bytes(self.buf)


def consumer_group_key(kind: int, group: str, member_id: str | None = None) -> bytes:
    w = _Writer().i16(kind).string(group)
    if kind in _CG_MEMBER_KEYS:
        w.string(member_id or "")
    return bytes(w.buf)


def consumer_group_epoch_value(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue (the group epoch) and ConsumerGroupTargetAssignmentMetadataValue (the
    assignment epoch) have the same layout: one int32."""
    return _CompactWriter().i32(epoch).done()


def consumer_member_metadata_value(m: ConsumerMemberMetadataValue) -> bytes:
    w = _CompactWriter().string(m.instance_id).string(m.rack_id).string(m.client_id).string(m.client_host)
    w.uvarint(len(m.subscribed_topic_names) + 1)
    for name in m.subscribed_topic_names:
        w.string(name)
    w.string(m.subscribed_topic_regex).i32(m.rebalance_timeout_ms).string(m.server_assignor)
    if m.classic_session_timeout_ms is None:
        return w.done()  # ClassicMemberMetadata (tag 0) is absent: a consumer-protocol member
    tag = _CompactWriter()
    tag.buf.clear()  # a struct inside the value: no version prefix
    tag.i32(m.classic_session_timeout_ms)
    tag.uvarint(len(m.classic_protocols) + 1)
    for name, metadata in m.classic_protocols:
        tag.string(name).compact_bytes(metadata).uvarint(0)
    tag.uvarint(0)  # ClassicMemberMetadata's own tagged fields
    w.uvarint(1).uvarint(0).uvarint(len(tag.buf))  # one tagged field: tag 0, its size
    w.buf += tag.buf
    return bytes(w.buf)


def consumer_target_assignment_value(tps: TopicIdPartitions) -> bytes:
    return _CompactWriter().topic_partitions(tps).done()


def consumer_current_assignment_value(v: ConsumerCurrentAssignmentValue) -> bytes:
    w = _CompactWriter().i32(v.member_epoch).i32(v.previous_member_epoch).i8(v.state)
    return w.topic_partitions(v.assigned).topic_partitions(v.pending_revocation).done()


def share_group_key(kind: int, group: str, member_id: str | None = None) -> bytes:
    w = _Writer().i16(kind).string(group)
    if kind in _SG_MEMBER_KEYS:
        w.string(member_id or "")
    return bytes(w.buf)


def share_group_metadata_value(epoch: int, metadata_hash: int = 0) -> bytes:
    return _CompactWriter().i32(epoch).i64(metadata_hash).done()


def share_target_assignment_metadata_value(assignment_epoch: int) -> bytes:
    return _CompactWriter().i32(assignment_epoch).done()


def share_member_metadata_value(m: ShareMemberMetadataValue) -> bytes:
    w = _CompactWriter().string(m.rack_id).string(m.client_id).string(m.client_host)
    w.uvarint(len(m.subscribed_topic_names) + 1)
    for name in m.subscribed_topic_names:
        w.string(name)
    return w.done()


def share_current_assignment_value(v: ShareCurrentAssignmentValue) -> bytes:
    w = _CompactWriter().i32(v.member_epoch).i32(v.previous_member_epoch).i8(v.state)
    return w.topic_partitions(v.assigned).done()


def share_state_partition_metadata_value(initialized: Sequence[tuple[uuid.UUID, str, Sequence[int]]]) -> bytes:
    """ShareGroupStatePartitionMetadataValue v0: no topics initializing, `initialized` (id, name, partitions), no
    topics deleting (kbus initializes a share-partition's state on its first fetch, not from the coordinator)."""
    w = _CompactWriter().uvarint(1)  # InitializingTopics: []
    w.uvarint(len(initialized) + 1)
    for topic_id, name, partitions in initialized:
        w.buf += topic_id.bytes
        w.string(name)
        w.uvarint(len(partitions) + 1)
        for p in partitions:
            w.i32(p)
        w.uvarint(0)
    return w.uvarint(1).done()  # DeletingTopics: []


def decode_share_state_partition_metadata_value(value: bytes) -> list[tuple[uuid.UUID, str, tuple[int, ...]]]:
    """The initialized and initializing topics (both have state to describe)."""
    r = _flexible_v0(value, "share group state partition metadata")
    out = []
    for _ in range(2):
        for _ in range(max(r.array_len(), 0)):
            topic_id = uuid.UUID(bytes=r._take(16))
            name = r.string() or ""
            partitions = tuple(r.i32() for _ in range(max(r.array_len(), 0)))
            r.tagged_fields()
            out.append((topic_id, name, partitions))
    return out


def group_metadata_key(group: str) -> bytes:
    return bytes(_Writer().i16(GROUP_METADATA_KEY_VERSION).string(group).buf)


def group_metadata_value(value: GroupMetadataRecord) -> bytes:
    w = _Writer().i16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type).i32(value.generation).string(value.protocol).string(value.leader)
    w.i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.buf)


# ---------------------------------------------------------------- reading


class _Reader:
    def __init__(self, buf: bytes, flexible: bool = False) -> None:
        self.buf = buf
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise RecordFormatError("truncated __consumer_offsets record")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def i64(self) -> int:
        value: int = _I64.unpack(self._take(8))[0]
        return value

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise RecordFormatError("varint too long")

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.i32() if wide else self.i16()

    def string(self) -> str | None:
        n = self._length(wide=False)
        return None if n < 0 else self._take(n).decode("utf-8")

    def bytes_(self) -> bytes | None:
        n = self._length(wide=True)
        return None if n < 0 else bytes(self._take(n))

    def array_len(self) -> int:
        return self._length(wide=True)

    def tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


def decode_key(key: bytes) -> OffsetKey | GroupKey | ConsumerGroupKey | ShareGroupKey:
    r = _Reader(key)
    version = r.i16()
    if version in (0, 1):
        group, topic, partition = r.string(), r.string(), r.i32()
        return OffsetKey(group or "", topic or "", partition)
    if version == 2:
        return GroupKey(r.string() or "")
    if CG_METADATA <= version <= CG_CURRENT_MEMBER_ASSIGNMENT:
        group = r.string() or ""
        return ConsumerGroupKey(version, group, r.string() or "" if version in _CG_MEMBER_KEYS else None)
    if SG_PARTITION_METADATA <= version <= SG_STATE_PARTITION_METADATA:
        group = r.string() or ""
        return ShareGroupKey(version, group, r.string() or "" if version in _SG_MEMBER_KEYS else None)
    raise RecordFormatError(f"unknown __consumer_offsets key version {version}")


def _flexible_v0(value: bytes, what: str) -> _Reader:
    version = _I16.unpack_from(value, 0)[0]
    if version != 0:
        raise RecordFormatError(f"unknown {what} value version {version}")
    r = _Reader(value, flexible=True)
    r.pos = 2
    return r


def _read_topic_partitions(r: _Reader) -> tuple[tuple[uuid.UUID, tuple[int, ...]], ...]:
    out = []
    for _ in range(max(r.array_len(), 0)):
        topic_id = uuid.UUID(bytes=r._take(16))
        partitions = tuple(r.i32() for _ in range(max(r.array_len(), 0)))
        r.tagged_fields()
        out.append((topic_id, partitions))
    return tuple(out)


def decode_consumer_epoch_value(value: bytes) -> int:
    r = _flexible_v0(value, "consumer group epoch")
    epoch = r.i32()
    r.tagged_fields()
    return epoch


def decode_consumer_member_metadata_value(value: bytes) -> ConsumerMemberMetadataValue:
    r = _flexible_v0(value, "consumer group member metadata")
    instance_id, rack_id, client_id, client_host = r.string(), r.string(), r.string() or "", r.string() or ""
    names = tuple(r.string() or "" for _ in range(max(r.array_len(), 0)))
    regex, rebalance_timeout, assignor = r.string(), r.i32(), r.string()
    session_timeout: int | None = None
    protocols: list[tuple[str, bytes]] = []
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        if tag != 0:
            r._take(size)
            continue
        session_timeout = r.i32()  # ClassicMemberMetadata
        for _ in range(max(r.array_len(), 0)):
            name = r.string() or ""
            protocols.append((name, r.bytes_() or b""))
            r.tagged_fields()
        r.tagged_fields()
    return ConsumerMemberMetadataValue(
        instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout, assignor,
        session_timeout, tuple(protocols),
    )


def decode_consumer_target_assignment_value(value: bytes) -> tuple[tuple[uuid.UUID, tuple[int, ...]], ...]:
    r = _flexible_v0(value, "consumer group target assignment")
    tps = _read_topic_partitions(r)
    r.tagged_fields()
    return tps


def decode_consumer_current_assignment_value(value: bytes) -> ConsumerCurrentAssignmentValue:
    r = _flexible_v0(value, "consumer group current assignment")
    epoch, previous = r.i32(), r.i32()
    state = struct.unpack(">b", r._take(1))[0]
    assigned, pending = _read_topic_partitions(r), _read_topic_partitions(r)
    r.tagged_fields()
    return ConsumerCurrentAssignmentValue(epoch, previous, state, assigned, pending)


def decode_share_epoch_value(value: bytes) -> int:
    """ShareGroupMetadataValue's Epoch or ShareGroupTargetAssignmentMetadataValue's AssignmentEpoch (what follows
    the first int32 is not needed: the metadata hash is recomputed on load)."""
    return _flexible_v0(value, "share group epoch").i32()


def decode_share_member_metadata_value(value: bytes) -> ShareMemberMetadataValue:
    r = _flexible_v0(value, "share group member metadata")
    rack_id, client_id, client_host = r.string(), r.string() or "", r.string() or ""
    names = tuple(r.string() or "" for _ in range(max(r.array_len(), 0)))
    r.tagged_fields()
    return ShareMemberMetadataValue(rack_id, client_id, client_host, names)


def decode_share_current_assignment_value(value: bytes) -> ShareCurrentAssignmentValue:
    r = _flexible_v0(value, "share group current assignment")
    epoch, previous = r.i32(), r.i32()
    state = struct.unpack(">b", r._take(1))[0]
    assigned = _read_topic_partitions(r)
    r.tagged_fields()
    return ShareCurrentAssignmentValue(epoch, previous, state, assigned)


def decode_offset_value(value: bytes) -> OffsetAndMetadata:
    version = _I16.unpack_from(value, 0)[0]
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown offset commit value version {version}")
    r = _Reader(value, flexible=version >= 4)
    r.pos = 2
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else None
    r.tagged_fields()
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_ts, expire_ts)


def decode_group_value(value: bytes) -> GroupMetadataRecord:
    version = _I16.unpack_from(value, 0)[0]
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    r = _Reader(value, flexible=version >= 4)
    r.pos = 2
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(max(r.array_len(), 0)):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        subscription = r.bytes_() or b""
        assignment = r.bytes_() or b""
        r.tagged_fields()
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    r.tagged_fields()
    return GroupMetadataRecord(protocol_type, generation, protocol, leader, state_ts, members)


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (every version starts int16 version + array of strings);
    None when the bytes are not a consumer subscription."""
    try:
        r = _Reader(subscription)
        if r.i16() < 0:
            return None
        n = r.i32()
        if n < 0 or n > 1_000_000:
            return None
        return {r.string() or "" for _ in range(n)}
    except (RecordFormatError, UnicodeDecodeError, struct.error):
        return None

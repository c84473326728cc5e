"""The durable state of a share-partition (Kafka's ShareGroupOffset) and its records in `__share_group_state`,
byte-compatible with Kafka 4's share coordinator: key version 0 ShareSnapshotKey(GroupId, TopicId, Partition),
value ShareSnapshotValue v0 (flexible: SnapshotEpoch, StateEpoch, LeaderEpoch, StartOffset, CreateTimestamp,
WriteTimestamp, StateBatches[FirstOffset, LastOffset, DeliveryState, DeliveryCount]). Key version 1
(ShareUpdateKey, Kafka's deltas between snapshots) is read as a snapshot of its batches over the last state; kbus
writes a whole snapshot each time (its writes carry the share-partition's whole in-flight state).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from kbus.server.coordinator.records import java_string_hashcode

SNAPSHOT_KEY, UPDATE_KEY = 0, 1
_HEAD = struct.Struct(">iiiq")  # snapshot epoch, state epoch, leader epoch, start offset
_TIMES = struct.Struct(">qq")
_BATCH = struct.Struct(">qqbh")

StateBatch = tuple[int, int, int, int]  # first offset, last offset, delivery state (0/2/4), delivery count


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's SharePartitionKey.asCoordinatorKey: what FindCoordinator (key type 2) and the partition of
        __share_group_state hash."""
        return f"{self.group_id}:{self.topic_id_str()}:{self.partition}"

    def topic_id_str(self) -> str:
        """Kafka's Uuid.toString: URL-safe base64 without padding."""
        import base64

        return base64.urlsafe_b64encode(self.topic_id.bytes).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class ShareState:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    snapshot_epoch: int = 0
    create_timestamp: int = 0
    write_timestamp: int = 0


def partition_for(coordinator_key: str, num_partitions: int) -> int:
    h = java_string_hashcode(coordinator_key)
    return (0 if h == -(2**31) else abs(h)) % num_partitions


def _uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def encode_key(key: ShareStateKey) -> bytes:
    group = key.group_id.encode()
    return struct.pack(">hh", SNAPSHOT_KEY, len(group)) + group + key.topic_id.bytes + struct.pack(">i", key.partition)


def encode_value(state: ShareState) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    out += _HEAD.pack(state.snapshot_epoch, state.state_epoch, state.leader_epoch, state.start_offset)
    out += _TIMES.pack(state.create_timestamp, state.write_timestamp)
    out += _uvarint(len(state.batches) + 1)
    for first, last, delivery_state, count in state.batches:
        out += _BATCH.pack(first, last, delivery_state, count) + b"\x00"
    out += b"\x00"
    return bytes(out)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise ValueError("truncated __share_group_state record")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def tagged(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def decode_key(raw: bytes) -> tuple[int, ShareStateKey]:
    r = _Reader(raw)
    version, n = struct.unpack(">hh", r.take(4))
    if version not in (SNAPSHOT_KEY, UPDATE_KEY):
        raise ValueError(f"unknown __share_group_state key version {version}")
    group = r.take(n).decode()
    topic_id = uuid.UUID(bytes=r.take(16))
    (partition,) = struct.unpack(">i", r.take(4))
    return version, ShareStateKey(group, topic_id, partition)


def decode_snapshot(raw: bytes) -> ShareState:
    r = _Reader(raw)
    (version,) = struct.unpack(">h", r.take(2))
    if version != 0:
        raise ValueError(f"unknown ShareSnapshotValue version {version}")
    snapshot_epoch, state_epoch, leader_epoch, start = _HEAD.unpack(r.take(_HEAD.size))
    created, written = _TIMES.unpack(r.take(_TIMES.size))
    batches = []
    for _ in range(r.uvarint() - 1):
        batches.append(_BATCH.unpack(r.take(_BATCH.size)))
        r.tagged()
    return ShareState(state_epoch, leader_epoch, start, tuple(batches), snapshot_epoch, created, written)


def decode_update(raw: bytes, base: ShareState | None) -> ShareState | None:
    """ShareUpdateValue v0: SnapshotEpoch, LeaderEpoch, StartOffset, StateBatches; its batches override the base's
    over their offsets (Kafka's PersisterStateBatchCombiner), its start offset prunes below."""
    r = _Reader(raw)
    (version,) = struct.unpack(">h", r.take(2))
    if version != 0 or base is None:
        return base
    snapshot_epoch, leader_epoch, start = struct.unpack(">iiq", r.take(16))
    batches = []
    for _ in range(r.uvarint() - 1):
        batches.append(_BATCH.unpack(r.take(_BATCH.size)))
        r.tagged()
    start = base.start_offset if start < 0 else start
    return ShareState(base.state_epoch, leader_epoch, start, combine(base.batches, tuple(batches), start),
                      snapshot_epoch, base.create_timestamp, base.write_timestamp)


def combine(old: tuple[StateBatch, ...], new: tuple[StateBatch, ...], start: int) -> tuple[StateBatch, ...]:
    """New batches override old ones where they overlap; nothing below `start` is kept."""
    out: list[StateBatch] = []
    for first, last, st, count in old:
        pieces = [(first, last)]
        for nf, nl, _, _ in new:
            nxt = []
            for f, la in pieces:
                if nl < f or nf > la:
                    nxt.append((f, la))
                    continue
                if f < nf:
                    nxt.append((f, nf - 1))
                if la > nl:
                    nxt.append((nl + 1, la))
            pieces = nxt
        out += [(f, la, st, count) for f, la in pieces]
    out += list(new)
    return tuple(sorted(((max(f, start), la, st, c) for f, la, st, c in out if la >= start), key=lambda b: b[0]))

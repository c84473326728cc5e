"""One share group (KIP-932; Kafka's modern/share ShareGroup and ShareGroupMember): the group epoch, the target
assignment and its epoch, the members with their member epochs and assigned partitions.

A share group has no revocation step: partitions are shared by the members, so a member takes its target
assignment (and the assignment epoch) on its next heartbeat. The assignor is Kafka's `simple` share assignor
(share_assignor.py): partitions are spread over the members when there are more partitions than members and
shared by several members when there are fewer; records of a shared partition are spread by the share-partition
leader's acquisition locks.

Pure state: no clocks, timers or I/O (the coordinator's `share_membership.py` drives it).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from kbus.server.coordinator import records
from kbus.server.coordinator.assignors import Assignment
from kbus.server.coordinator.consumer_group import TopicImage, from_topic_ids, to_topic_ids

SHARE_ASSIGNOR = "simple"
STABLE_MEMBER_STATE = 0  # MemberState.STABLE's code, the only state a share group member has


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    partition: int  # of __consumer_offsets
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # the partition counts of the subscribed topics the target was computed from; a change bumps the epoch
    subscription_metadata: dict[str, int] = field(default_factory=dict)
    # the partitions ever assigned, whose share-partition state may exist (Kafka's ShareGroupStatePartitionMetadata)
    initialized: dict[str, frozenset[int]] = field(default_factory=dict)
    dead: bool = False

    @property
    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def compute_subscription_metadata(self, image: TopicImage) -> dict[str, int]:
        return {t: image.counts[t] for t in sorted(self.subscribed_topics()) if t in image.counts}


def metadata_hash(subscription_metadata: Mapping[str, int]) -> int:
    """A stable 64-bit digest of the subscribed topics' partition counts (Kafka writes its own hash here; kbus
    recomputes the subscription on load, so only 'changed or not' matters)."""
    h = 0xCBF29CE484222325
    for topic, count in sorted(subscription_metadata.items()):
        for b in f"{topic}:{count};".encode():
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h - (1 << 64) if h & (1 << 63) else h


Record = tuple[bytes, bytes | None]


def group_epoch_record(group: ShareGroup) -> Record:
    return (records.share_group_key(records.SG_METADATA, group.group_id),
            records.share_group_metadata_value(group.group_epoch, metadata_hash(group.subscription_metadata)))


def assignment_epoch_record(group: ShareGroup) -> Record:
    return (records.share_group_key(records.SG_TARGET_ASSIGNMENT_METADATA, group.group_id),
            records.share_target_assignment_metadata_value(group.assignment_epoch))


def member_metadata_record(group_id: str, m: ShareGroupMember) -> Record:
    value = records.ShareMemberMetadataValue(m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names)
    return (records.share_group_key(records.SG_MEMBER_METADATA, group_id, m.member_id),
            records.share_member_metadata_value(value))


def target_member_record(image: TopicImage, group_id: str, member_id: str, target: Assignment) -> Record:
    return (records.share_group_key(records.SG_TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
            records.consumer_target_assignment_value(to_topic_ids(image, target)))


def current_assignment_record(image: TopicImage, group_id: str, m: ShareGroupMember) -> Record:
    tps = tuple((tid, tuple(ps)) for tid, ps in to_topic_ids(image, m.assigned))
    value = records.ShareCurrentAssignmentValue(m.member_epoch, m.previous_member_epoch, STABLE_MEMBER_STATE, tps)
    return (records.share_group_key(records.SG_CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id),
            records.share_current_assignment_value(value))


def state_partition_metadata_record(image: TopicImage, group: ShareGroup) -> Record:
    topics = [(image.ids[t], t, sorted(ps)) for t, ps in sorted(group.initialized.items()) if t in image.ids]
    return (records.share_group_key(records.SG_STATE_PARTITION_METADATA, group.group_id),
            records.share_state_partition_metadata_value(topics))


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    # Kafka's order: current assignment, target assignment, then the member's metadata
    return [(records.share_group_key(k, group_id, member_id), None) for k in
            (records.SG_CURRENT_MEMBER_ASSIGNMENT, records.SG_TARGET_ASSIGNMENT_MEMBER, records.SG_MEMBER_METADATA)]


def group_tombstones(group_id: str) -> list[Record]:
    return [(records.share_group_key(k, group_id), None) for k in
            (records.SG_TARGET_ASSIGNMENT_METADATA, records.SG_STATE_PARTITION_METADATA, records.SG_METADATA)]


class ShareGroupReplay:
    """Share groups rebuilt from their records as a partition of __consumer_offsets is loaded (off the event
    loop): the last value of each key wins, a tombstone removes it."""

    def __init__(self, image: TopicImage) -> None:
        self.image = image
        self.epochs: dict[str, int] = {}
        self.assignment_epochs: dict[str, int] = {}
        self.metadata: dict[str, dict[str, records.ShareMemberMetadataValue]] = {}
        self.targets: dict[str, dict[str, Assignment]] = {}
        self.current: dict[str, dict[str, records.ShareCurrentAssignmentValue]] = {}
        self.initialized: dict[str, dict[str, frozenset[int]]] = {}

    def replay(self, key: records.ShareGroupKey, value: bytes | None) -> None:
        g, mid = key.group, key.member_id or ""
        if key.kind == records.SG_METADATA:
            if value is None:
                self.epochs.pop(g, None)
            else:
                self.epochs[g] = records.decode_share_epoch_value(value)
        elif key.kind == records.SG_TARGET_ASSIGNMENT_METADATA:
            if value is None:
                self.assignment_epochs.pop(g, None)
            else:
                self.assignment_epochs[g] = records.decode_share_epoch_value(value)
        elif key.kind == records.SG_MEMBER_METADATA:
            if value is None:
                self.metadata.get(g, {}).pop(mid, None)
            else:
                self.metadata.setdefault(g, {})[mid] = records.decode_share_member_metadata_value(value)
        elif key.kind == records.SG_TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.targets.get(g, {}).pop(mid, None)
            else:
                tps = records.decode_consumer_target_assignment_value(value)
                self.targets.setdefault(g, {})[mid] = from_topic_ids(self.image, tps)
        elif key.kind == records.SG_CURRENT_MEMBER_ASSIGNMENT:
            if value is None:
                self.current.get(g, {}).pop(mid, None)
            else:
                self.current.setdefault(g, {})[mid] = records.decode_share_current_assignment_value(value)
        elif key.kind == records.SG_STATE_PARTITION_METADATA:
            if value is None:
                self.initialized.pop(g, None)
            else:
                topics = records.decode_share_state_partition_metadata_value(value)
                names = self.image.names_by_id
                self.initialized[g] = {names.get(tid, name): frozenset(ps) for tid, name, ps in topics}
        # SG_PARTITION_METADATA (Kafka 4.0's): recomputed, not needed on load

    def groups(self, partition: int) -> list[ShareGroup]:
        out = []
        for group_id, epoch in self.epochs.items():
            group = ShareGroup(group_id, partition, group_epoch=epoch,
                               assignment_epoch=self.assignment_epochs.get(group_id, 0))
            current = self.current.get(group_id, {})
            for member_id, meta in self.metadata.get(group_id, {}).items():
                cur = current.get(member_id)
                member = ShareGroupMember(member_id, meta.rack_id, meta.client_id, meta.client_host,
                                          meta.subscribed_topic_names)
                if cur is not None:
                    member = ShareGroupMember(
                        member_id, meta.rack_id, meta.client_id, meta.client_host, meta.subscribed_topic_names,
                        cur.member_epoch, cur.previous_member_epoch, from_topic_ids(self.image, cur.assigned))
                group.members[member_id] = member
            group.target = {mid: t for mid, t in self.targets.get(group_id, {}).items() if mid in group.members}
            group.subscription_metadata = group.compute_subscription_metadata(self.image)
            group.initialized = self.initialized.get(group_id, {})
            out.append(group)
        return out

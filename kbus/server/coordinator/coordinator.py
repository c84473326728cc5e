"""The group coordinator (Kafka's GroupCoordinator + GroupMetadataManager), in parts: `group_store.py` (the
groups kept in `__consumer_offsets`, loaded on leadership), `membership.py` (the classic protocol: JoinGroup,
SyncGroup, Heartbeat, LeaveGroup), `group_admin.py` (ListGroups, DescribeGroups, DeleteGroups),
`consumer_membership.py` (the consumer protocol of KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe),
`share_membership.py` (the share groups of KIP-932: ShareGroupHeartbeat, ShareGroupDescribe) and `offsets.py`
(OffsetCommit/Fetch/Delete, transactional commits, retention). Persistence goes through an `OffsetsLog` (one
append per state change, Kafka's record formats).
"""

from __future__ import annotations

from kbus.server.coordinator.group_admin import (
    DEAD_GROUP,
    EMPTY_SUMMARY,
    GroupAdmin,
    GroupOverview,
    GroupSummary,
    MemberSummary,
)
from kbus.server.coordinator.group_store import GroupConfig, GroupStore, OffsetsLog, TopicPartition
from kbus.server.coordinator.membership import GroupMembership
from kbus.server.coordinator.offsets import GroupOffsets
from kbus.server.coordinator.share_membership import ShareGroupMembership

__all__ = [
    "DEAD_GROUP",
    "EMPTY_SUMMARY",
    "GroupConfig",
    "GroupCoordinator",
    "GroupOverview",
    "GroupStore",
    "GroupSummary",
    "MemberSummary",
    "OffsetsLog",
    "TopicPartition",
]


class GroupCoordinator(GroupMembership, ShareGroupMembership, GroupOffsets, GroupAdmin):
    """Membership (classic, consumer and share protocols) and offsets over one store of groups."""

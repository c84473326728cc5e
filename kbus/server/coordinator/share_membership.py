"""The share group (KIP-932) half of the group coordinator: ShareGroupHeartbeat (join with epoch 0, heartbeat,
leave with -1), session timeouts and the admin views (ShareGroupDescribe, ListGroups' share groups). Kafka's
GroupMetadataManager.shareGroupHeartbeat, step for step, without the revocation of the consumer protocol: a share
group's partitions are shared, so a member takes its target assignment on its next heartbeat.

Every change is written to `__consumer_offsets` as Kafka 4's share group records (`share_group.py`) before the
heartbeat is answered; a new coordinator loads the groups from them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode as E

from kbus.server.coordinator.consumer_group import GroupError
from kbus.server.coordinator.consumer_membership import ConsumerGroupMembership
from kbus.server.coordinator.group import GroupState
from kbus.server.coordinator.share_assignor import simple_share_assignment
from kbus.server.coordinator.share_group import (
    SHARE_ASSIGNOR,
    ShareGroup,
    ShareGroupMember,
    assignment_epoch_record,
    current_assignment_record,
    group_epoch_record,
    group_tombstones,
    member_metadata_record,
    member_tombstones,
    state_partition_metadata_record,
    target_member_record,
)

Record = tuple[bytes, bytes | None]
LEAVE_GROUP_MEMBER_EPOCH = -1

log = logging.getLogger("kbus.coordinator")


def _timer_key(group_id: str, member_id: str) -> tuple[str, tuple[str, str], str]:
    return ("session", ("share", group_id), member_id)


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResponse:
    error: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[str, frozenset[int]] | None = None


@dataclass(frozen=True, slots=True)
class ShareGroupSummary:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[ShareGroupMember, ...]


class ShareGroupMembership(ConsumerGroupMembership):
    # ================================================================ ShareGroupHeartbeat

    async def share_group_heartbeat(self, req: ShareHeartbeatRequest) -> ShareHeartbeatResponse:
        out: list[Record] = []
        try:
            self._validate_share_heartbeat(req)
            error = self.validate_group_status(req.group_id, "heartbeat")
            if error is not None:
                raise GroupError(error)
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                response = self._share_group_leave(req, out)
            else:
                response = self._share_group_heartbeat(req, out)
        except GroupError as exc:
            return ShareHeartbeatResponse(exc.code, exc.message)
        if out:
            group = self.share_groups.get(req.group_id)
            partition = group.partition if group is not None else self.partition_for(req.group_id)
            error = await self._write_consumer_records(partition, out)
            if error != E.none:
                return ShareHeartbeatResponse(error)
        return response

    def _validate_share_heartbeat(self, req: ShareHeartbeatRequest) -> None:
        """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid."""

        def invalid(message: str) -> GroupError:
            return GroupError(E.invalid_request, message)

        if not req.group_id:
            raise invalid("GroupId can't be empty.")
        if req.rack_id == "":
            raise invalid("RackId can't be empty.")
        if not req.member_id:
            raise invalid("MemberId can't be empty.")
        if req.member_epoch == 0:
            if not req.subscribed_topic_names:
                raise invalid("SubscribedTopicNames must be set in first request.")
        elif req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise invalid(f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -1.")

    def _get_or_maybe_create_share_group(self, group_id: str, create: bool) -> ShareGroup:
        group = self.share_groups.get(group_id)
        if group is not None:
            return group
        classic = self.groups.get(group_id)
        in_use = self.consumer_groups.get(group_id) is not None or (
            classic is not None and not classic.is_(GroupState.DEAD)
            and (classic.members or classic.has_offsets()))
        if in_use:
            raise GroupError(E.group_id_not_found, f"Group {group_id} is not a share group.")
        if not create:
            # as for consumer groups: UNKNOWN_MEMBER_ID makes the member of a group this coordinator lost re-join
            raise GroupError(E.unknown_member_id, f"Share group {group_id} not found.")
        if len(self.share_groups) >= self.config.share_max_groups:
            raise GroupError(E.group_max_size_reached,
                             f"The maximum number of share groups ({self.config.share_max_groups}) is reached.")
        group = ShareGroup(group_id, self.partition_for(group_id))
        self.share_groups[group_id] = group
        return group

    def _share_group_heartbeat(self, req: ShareHeartbeatRequest, out: list[Record]) -> ShareHeartbeatResponse:
        joining = req.member_epoch == 0
        group = self._get_or_maybe_create_share_group(req.group_id, joining)
        member = group.members.get(req.member_id)
        if member is None:
            if not joining:
                raise GroupError(E.unknown_member_id,
                                 f"Member {req.member_id} is not a member of group {group.group_id}.")
            if len(group.members) >= self.config.share_max_size:
                raise GroupError(E.group_max_size_reached,
                                 f"The share group has reached its maximum capacity of {self.config.share_max_size} "
                                 "members.")
            member = ShareGroupMember(req.member_id)
        elif req.member_epoch != member.member_epoch and not joining:
            raise GroupError(
                E.fenced_member_epoch,
                f"The share group member has a {'greater' if req.member_epoch > member.member_epoch else 'smaller'} "
                f"member epoch ({req.member_epoch}) than the one known by the group coordinator "
                f"({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        updated = replace(
            member,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            client_id=req.client_id,
            client_host=req.client_host,
            subscribed_topic_names=(tuple(sorted(req.subscribed_topic_names))
                                    if req.subscribed_topic_names is not None else member.subscribed_topic_names),
        )
        bump = False
        if updated != member or req.member_id not in group.members:
            out.append(member_metadata_record(group.group_id, updated))
            bump = (req.member_id not in group.members
                    or updated.subscribed_topic_names != member.subscribed_topic_names)
        group.members[req.member_id] = updated
        # a subscribed topic created, deleted or grown changes every target
        metadata = group.compute_subscription_metadata(self.topic_image)
        if bump or metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            group.group_epoch += 1
            out.append(group_epoch_record(group))
        if group.group_epoch > group.assignment_epoch:
            self._compute_share_target(group, out)
        # no revocation in a share group: the member takes its target assignment and the assignment epoch now
        member = group.members[req.member_id]
        target = group.target.get(req.member_id, {})
        reconciled = member
        if member.member_epoch != group.assignment_epoch or member.assigned != target:
            reconciled = replace(member, previous_member_epoch=member.member_epoch,
                                 member_epoch=group.assignment_epoch, assigned=target)
            group.members[req.member_id] = reconciled
            out.append(current_assignment_record(self.topic_image, group.group_id, reconciled))
        self._schedule_share_session_timeout(group, req.member_id)
        send_assignment = joining or reconciled is not member
        return ShareHeartbeatResponse(
            E.none,
            member_id=req.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.config.share_heartbeat_interval_ms,
            assignment=dict(reconciled.assigned) if send_assignment else None,
        )

    def _compute_share_target(self, group: ShareGroup, out: list[Record]) -> None:
        targets = simple_share_assignment(
            {mid: m.subscribed_topic_names for mid, m in group.members.items()}, self.topic_image.counts,
            group.target)
        for member_id, target in targets.items():
            if group.target.get(member_id) != target:
                group.target[member_id] = target
                out.append(target_member_record(self.topic_image, group.group_id, member_id, target))
        group.assignment_epoch = group.group_epoch
        out.append(assignment_epoch_record(group))
        initialized = dict(group.initialized)
        for target in group.target.values():
            for t, ps in target.items():
                initialized[t] = initialized.get(t, frozenset()) | ps
        if initialized != group.initialized:
            group.initialized = initialized
            out.append(state_partition_metadata_record(self.topic_image, group))

    # ================================================================ leaving and timeouts

    def _share_group_leave(self, req: ShareHeartbeatRequest, out: list[Record]) -> ShareHeartbeatResponse:
        group = self.share_groups.get(req.group_id)
        if group is None:
            raise GroupError(E.group_id_not_found, f"Share group {req.group_id} not found.")
        if req.member_id not in group.members:
            raise GroupError(E.unknown_member_id,
                             f"Member {req.member_id} is not a member of group {group.group_id}.")
        log.info("[GroupId %s] Member %s left the share group.", group.group_id, req.member_id)
        out.extend(self._fence_share_member(group, req.member_id))
        return ShareHeartbeatResponse(E.none, member_id=req.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)

    def _fence_share_member(self, group: ShareGroup, member_id: str) -> list[Record]:
        group.members.pop(member_id, None)
        group.target.pop(member_id, None)
        self.timers.cancel(_timer_key(group.group_id, member_id))
        group.subscription_metadata = group.compute_subscription_metadata(self.topic_image)
        group.group_epoch += 1
        return [*member_tombstones(group.group_id, member_id), group_epoch_record(group)]

    def _schedule_share_session_timeout(self, group: ShareGroup, member_id: str) -> None:
        self.timers.schedule(
            _timer_key(group.group_id, member_id),
            self.clock() + self.config.share_session_timeout_ms,
            lambda: self._on_share_session_timeout(group, member_id),
        )

    def _on_share_session_timeout(self, group: ShareGroup, member_id: str) -> None:
        if self.share_groups.get(group.group_id) is group and member_id in group.members:
            log.info("[GroupId %s] Member %s fenced from the share group because the member session expired.",
                     group.group_id, member_id)
            self._write_in_background(group.partition, self._fence_share_member(group, member_id))

    def _install_share_groups(self, groups: list[ShareGroup]) -> None:
        for group in groups:
            self.share_groups[group.group_id] = group
            for member_id in group.members:
                self._schedule_share_session_timeout(group, member_id)

    # ================================================================ admin views

    def is_share_group(self, group_id: str) -> bool:
        group = self.share_groups.get(group_id)
        return group is not None and not group.dead

    def describe_share_groups(
        self, group_ids: Iterable[str]
    ) -> list[tuple[str, int, str | None, ShareGroupSummary | None]]:
        out: list[tuple[str, int, str | None, ShareGroupSummary | None]] = []
        for group_id in group_ids:
            error = self.validate_group_status(group_id, "describe")
            if error is not None:
                out.append((group_id, error, None, None))
                continue
            group = self.share_groups.get(group_id)
            if group is None or group.dead:
                message = (f"Group {group_id} is not a share group."
                           if group_id in self.groups or group_id in self.consumer_groups
                           else f"Group {group_id} not found.")
                out.append((group_id, E.group_id_not_found, message, None))
                continue
            out.append((group_id, E.none, None, ShareGroupSummary(
                group_id, group.state.value, group.group_epoch, group.assignment_epoch, SHARE_ASSIGNOR,
                tuple(m for _, m in sorted(group.members.items())))))
        return out

    async def ensure_share_group(self, group_id: str) -> tuple[int, str | None, ShareGroup | None]:
        """AlterShareGroupOffsets on a group id nobody uses creates the (empty) share group, as Kafka does."""
        error = self.validate_group_status(group_id, "describe")
        if error is not None:
            return int(error), None, None
        existed = group_id in self.share_groups
        try:
            group = self._get_or_maybe_create_share_group(group_id, create=True)
        except GroupError as exc:
            return exc.code, exc.message, None
        if not existed:
            code = await self._write_consumer_records(group.partition, [group_epoch_record(group)])
            if code != E.none:
                return code, None, None
        return int(E.none), None, group

    async def mark_initialized(self, group: ShareGroup, partitions: dict[str, frozenset[int]]) -> int:
        """Share-partitions given a state outside the heartbeat (AlterShareGroupOffsets): the group's
        ShareGroupStatePartitionMetadata names them too."""
        initialized = dict(group.initialized)
        for t, ps in partitions.items():
            initialized[t] = initialized.get(t, frozenset()) | ps
        if initialized == group.initialized:
            return int(E.none)
        group.initialized = initialized
        return await self._write_consumer_records(
            group.partition, [state_partition_metadata_record(self.topic_image, group)])

    async def delete_share_group(self, group_id: str) -> int:
        """DeleteGroups of a share group: only an empty one (its state in __share_group_state goes with it)."""
        group = self.share_groups.get(group_id)
        if group is None or group.dead:
            return E.group_id_not_found
        if group.members:
            return E.non_empty_group
        group.dead = True
        del self.share_groups[group_id]
        return await self._write_consumer_records(group.partition, group_tombstones(group_id))

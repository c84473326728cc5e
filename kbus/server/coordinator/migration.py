"""Classic and consumer-protocol members in one group: Kafka 4's online upgrade and downgrade
(`group.consumer.migration.policy`; GroupMetadataManager's convertToConsumerGroup, classicGroupJoinToConsumerGroup,
classicGroupSync/Heartbeat/LeaveToConsumerGroup, convertToClassicGroup).

A classic member of a consumer group is a ConsumerGroupMember carrying its ClassicMemberMetadata (session timeout,
JoinGroup protocols): the consumer group's state machine assigns it (server-side assignor, member epochs,
revocation before assignment) and the classic requests are its heartbeats. JoinGroup reconciles it with the owned
partitions of its ConsumerProtocol subscription and answers with its member epoch as the generation and no leader;
SyncGroup hands back its assigned partitions as a ConsumerProtocol assignment; Heartbeat answers
REBALANCE_IN_PROGRESS whenever it must join again to move (a newer group epoch, partitions to revoke, partitions
released to it). When the last consumer-protocol member leaves or is fenced and only classic members remain, the
group becomes a classic group again (the downgrade), Stable with their target assignments, and rebalances.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace

from kio.schema.errors import ErrorCode as E

from kbus.server.coordinator.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    GroupError,
    MemberState,
    epoch_record,
    group_tombstones,
    member_records,
    member_tombstones,
    target_record,
)
from kbus.server.coordinator.consumer_membership import ConsumerGroupMembership, Record, _timer_key
from kbus.server.coordinator.consumer_protocol import (
    ConsumerProtocolError,
    parse_assignment,
    parse_subscription,
    serialize_assignment,
    version_of,
)
from kbus.server.coordinator.group import CONSUMER_PROTOCOL_TYPE, Group, JoinResult, Member, SyncResult
from kbus.server.coordinator.records import (
    CG_METADATA,
    CG_TARGET_ASSIGNMENT_METADATA,
    group_metadata_key,
    group_metadata_value,
)

log = logging.getLogger("kbus.coordinator")

class GroupMigration(ConsumerGroupMembership):
    def _upgrade_enabled(self) -> bool:
        return self.config.consumer_migration_policy in ("upgrade", "bidirectional")

    def _downgrade_enabled(self) -> bool:
        return self.config.consumer_migration_policy in ("downgrade", "bidirectional")

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        """The classic protocol's rebalance (membership.py's GroupMembership)."""
        raise NotImplementedError

    # ================================================================ upgrade: classic group -> consumer group

    def _convert_to_consumer_group(self, classic: Group, out: list[Record]) -> ConsumerGroup | None:
        """Kafka's validateOnlineUpgrade + convertToConsumerGroup, when a consumer-protocol member joins a classic
        group with members. None when the upgrade is not allowed (the caller refuses the member)."""
        group_id = classic.group_id
        if not self._upgrade_enabled():
            log.info("Cannot upgrade classic group %s to consumer group because the online upgrade is disabled.",
                     group_id)
            return None
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            log.info("Cannot upgrade classic group %s to consumer group because the group does not use the "
                     "consumer embedded protocol.", group_id)
            return None
        if len(classic.members) > self.config.consumer_max_size:
            log.info("Cannot upgrade classic group %s to consumer group because the group size exceeds the "
                     "consumer group maximum size.", group_id)
            return None
        image = self.topic_image
        generation = classic.generation_id
        members: list[ConsumerGroupMember] = []
        for m in classic.members.values():
            metadata = m.metadata(classic.protocol_name) or (m.protocols[0][1] if m.protocols else b"")
            try:
                subscription = parse_subscription(metadata)
                assigned = parse_assignment(m.assignment)
            except ConsumerProtocolError as exc:
                log.warning("Cannot upgrade the classic group %s to consumer group because the embedded consumer "
                            "protocol is malformed: %s.", group_id, exc)
                raise GroupError(E.group_id_not_found, f"Cannot upgrade the classic group {group_id} to consumer "
                                 "group because the embedded consumer protocol is malformed.") from exc
            # Every member keeps the partitions of the classic group's last assignment, Stable at its generation;
            # members that were rebalancing are told to join again.
            members.append(ConsumerGroupMember(
                m.member_id, m.group_instance_id, subscription.rack_id, m.client_id, m.client_host,
                m.rebalance_timeout_ms, subscription.topics,
                member_epoch=generation, previous_member_epoch=generation,
                assigned={t: ps for t, ps in assigned.items() if t in image.counts and ps},
                classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
            ))
        for m in list(classic.members.values()):
            m.complete_join(JoinResult(E.rebalance_in_progress, m.member_id))
            m.complete_sync(SyncResult(E.rebalance_in_progress))
            self.timers.cancel(("hb", group_id, m.member_id))
        for member_id in classic.pending_members:
            self.timers.cancel(("pending", group_id, member_id))
        self.timers.cancel(("join", group_id))
        self.timers.cancel(("sync", group_id))
        classic.clear_members(self.clock())  # stays, Empty, holding the group's offsets
        out.append((group_metadata_key(group_id), None))  # Kafka's createGroupTombstoneRecords
        group = ConsumerGroup(group_id, classic.partition, group_epoch=generation, assignment_epoch=generation)
        for member in members:
            group.update_member(member)
            group.target[member.member_id] = member.assigned
        # Kafka's createConsumerGroupRecords: members, group epoch, target assignment, its epoch, current ones
        for member in members:
            out.extend(member_records(image, group_id, member, current=False))
        out.append(epoch_record(CG_METADATA, group_id, generation))
        for member in members:
            out.append(target_record(image, group_id, member.member_id, member.assigned))
        out.append(epoch_record(CG_TARGET_ASSIGNMENT_METADATA, group_id, generation))
        for member in members:
            out.extend(member_records(image, group_id, member, metadata=False))
        group.subscription_metadata = self._subscription_metadata(group)
        group.metadata_version = image.version
        self.consumer_groups[group_id] = group
        for member in members:
            self._schedule_consumer_session_timeout(group, member.member_id)
        log.info("[GroupId %s] Converted the classic group (generation %d, %d members) to a consumer group.",
                 group_id, generation, len(members))
        return group

    # ================================================================ downgrade: consumer group -> classic group

    def _fence_consumer_member(self, group: ConsumerGroup, member_id: str) -> list[Record]:
        """Kafka's consumerGroupFenceMember: a member leaving (or timed out) that leaves only classic members
        converts the group back to a classic group, when the policy allows."""
        if self._downgrade_allowed(group, member_id):
            return self._convert_to_classic_group(group, member_id)
        return super()._fence_consumer_member(group, member_id)

    def _downgrade_allowed(self, group: ConsumerGroup, leaving: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember."""
        if any(m.classic is None for mid, m in group.members.items() if mid != leaving):
            return False
        if len(group.members) <= 1:
            return False  # empty after: an empty group becomes classic on the next JoinGroup anyway
        if not self._downgrade_enabled():
            log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is "
                     "disabled.", group.group_id)
            return False
        if len(group.members) - 1 > self.config.max_size:
            log.info("Cannot downgrade consumer group %s to classic group because its group size is greater than "
                     "classic group max size.", group.group_id)
            return False
        return True

    def _convert_to_classic_group(self, cgroup: ConsumerGroup, leaving: str) -> list[Record]:
        """Kafka's convertToClassicGroup: the consumer group's records go (tombstones), the classic group is written
        with every remaining member and its target assignment, and a rebalance starts so they all join again."""
        group_id = cgroup.group_id
        out: list[Record] = []
        for member_id in cgroup.members:
            out.extend(member_tombstones(group_id, member_id))
        out.extend(group_tombstones(group_id))
        now = self.clock()
        members: list[Member] = []
        targets = dict(cgroup.target)
        for member_id, m in list(cgroup.members.items()):
            self._remove_consumer_member(cgroup, member_id)
            if member_id == leaving or m.classic is None:
                continue
            members.append(Member(member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                  m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(m.classic.protocols)))
        cgroup.dead = True
        del self.consumer_groups[group_id]
        group = self.groups.get(group_id)
        if group is None:
            group = Group(group_id, cgroup.partition, current_state_timestamp=now)
            self.groups[group_id] = group
        group.adopt_members(cgroup.group_epoch, members, now)
        for member in members:
            try:
                version = version_of(member.metadata(group.protocol_name))
            except ConsumerProtocolError:
                version = 0
            member.assignment = serialize_assignment(targets.get(member.member_id, {}), version)
        out.append((group_metadata_key(group_id), group_metadata_value(group.to_record())))
        for member in members:
            self._schedule_heartbeat(group, member)
        log.info("[GroupId %s] Converted the consumer group (epoch %d) to a classic group with %d members.",
                 group_id, cgroup.group_epoch, len(members))
        self._prepare_rebalance(group, f"Downgrade group {group_id} from consumer to classic.")
        return out

    # ================================================================ classic requests to a consumer group

    async def classic_join_to_consumer_group(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        *,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult:
        """Kafka's classicGroupJoinToConsumerGroup: answered once the member's records are written."""
        out: list[Record] = []
        try:
            result = self._classic_join(group, member_id, instance_id, require_known_member_id, client_id,
                                        client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                        protocols, out)
        except GroupError as exc:
            return JoinResult(exc.code, member_id)
        if out:
            error = await self._write_consumer_records(group.partition, out)
            if error != E.none:
                return JoinResult(error, result.member_id)
        if result.error == E.none and self.consumer_groups.get(group.group_id) is group:
            # Kafka's join and sync timeouts: it joined, now it must sync within its rebalance timeout
            self.timers.cancel(_timer_key("join", group.group_id, result.member_id))
            self._schedule_classic_timeout(group, result.member_id, "sync", rebalance_timeout_ms)
        return result

    def _schedule_classic_timeout(self, group: ConsumerGroup, member_id: str, kind: str, timeout_ms: int) -> None:
        """A classic member that does not sync after its join, or join after being told to, within its rebalance
        timeout is fenced (Kafka's scheduleConsumerGroupSyncTimeout / JoinTimeoutIfAbsent)."""

        def expire() -> None:
            if self.consumer_groups.get(group.group_id) is group and member_id in group.members:
                log.info("[GroupId %s] Member %s fenced from the group because its %s timed out.", group.group_id,
                         member_id, "SyncGroup" if kind == "sync" else "JoinGroup")
                self._write_in_background(group.partition, self._fence_consumer_member(group, member_id))

        self.timers.schedule(_timer_key(kind, group.group_id, member_id), self.clock() + max(timeout_ms, 0), expire)

    def _schedule_join_timeout_if_absent(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if self.timers.deadline(_timer_key("join", group.group_id, member.member_id)) is None:
            self._schedule_classic_timeout(group, member.member_id, "join", member.rebalance_timeout_ms)

    def _remove_consumer_member(self, group: ConsumerGroup, member_id: str) -> None:
        super()._remove_consumer_member(group, member_id)
        self.timers.cancel(_timer_key("join", group.group_id, member_id))
        self.timers.cancel(_timer_key("sync", group.group_id, member_id))

    def _classic_join(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, require_known: bool, client_id: str,
        client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], out: list[Record],
    ) -> JoinResult:
        unknown = member_id == ""
        if unknown:
            member_id = str(uuid.uuid4())
        if len(group.members) >= self.config.consumer_max_size and member_id not in group.members:
            raise GroupError(E.group_max_size_reached)
        if not _supports_classic_protocols(group, protocol_type, [n for n, _ in protocols]):
            raise GroupError(E.inconsistent_group_protocol, f"Member {member_id}'s protocols are not supported.")
        if unknown and require_known:
            log.info("[GroupId %s] Dynamic member with unknown member id joins the consumer group. Created a new "
                     "member id %s and requesting the member to rejoin with this id.", group.group_id, member_id)
            return JoinResult(E.member_id_required, member_id)
        try:
            subscription = parse_subscription(protocols[0][1])
        except ConsumerProtocolError as exc:
            raise GroupError(E.inconsistent_group_protocol, f"Malformed embedded consumer protocol: {exc}.") from exc
        member, known = self._classic_member_to_update(group, member_id, instance_id, unknown, out)
        counts = self.topic_image.counts
        owned = {t: ps for t, ps in subscription.owned.items() if t in counts}
        updated = replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            server_assignor=None,
            subscribed_topic_names=subscription.topics,
            subscribed_topic_regex=None,
            client_id=client_id,
            client_host=client_host,
            classic=ClassicMemberMetadata(session_timeout_ms, tuple(protocols)),
        )
        reconciled = self._update_member_and_reconcile(group, member, updated, known, owned, out)
        self._schedule_consumer_session_timeout(group, member_id)
        return JoinResult(
            E.none,
            member_id,
            generation_id=reconciled.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocols[0][0],
            leader_id="",  # nobody leads: the coordinator assigns, every member syncs as a follower
        )

    def _classic_member_to_update(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, unknown: bool, out: list[Record]
    ) -> tuple[ConsumerGroupMember, bool]:
        if instance_id is None:
            existing = group.members.get(member_id)
            if existing is None:
                log.info("[GroupId %s] Member %s joins the consumer group with the classic protocol.",
                         group.group_id, member_id)
                return ConsumerGroupMember(member_id), False
            return existing, True
        static = group.static_member(instance_id)
        if static is None:
            existing = group.members.get(member_id)
            return (existing, True) if existing is not None else (ConsumerGroupMember(member_id), False)
        if static.member_id == member_id:
            return static, True
        if not unknown:
            raise GroupError(E.fenced_instance_id, f"Static member {member_id} with instance id {instance_id} "
                                                   f"was fenced by member {static.member_id}.")
        # A returning static member takes over its predecessor's partitions under its new member id.
        target = group.target.get(static.member_id, {})
        self._remove_consumer_member(group, static.member_id)
        group.target[member_id] = target
        out.extend(member_tombstones(group.group_id, static.member_id))
        out.append(target_record(self.topic_image, group.group_id, member_id, target))
        log.info("[GroupId %s] Static member with instance id %s re-joins as %s, replacing %s.",
                 group.group_id, instance_id, member_id, static.member_id)
        return replace(static, member_id=member_id, member_epoch=0, previous_member_epoch=0), False

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise GroupError(E.unknown_member_id)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise GroupError(E.unknown_member_id)
            if member.member_id != member_id:
                raise GroupError(E.fenced_instance_id)
        if member.classic is None:
            raise GroupError(E.unknown_member_id, f"Member {member.member_id} does not use the classic protocol.")
        return member

    def classic_sync_to_consumer_group(
        self, group: ConsumerGroup, generation_id: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None,
    ) -> SyncResult:
        try:
            member = self._classic_member(group, member_id, instance_id)
        except GroupError as exc:
            return SyncResult(exc.code)
        assert member.classic is not None
        if generation_id != member.member_epoch:
            return SyncResult(E.illegal_generation)
        first_name, first_metadata = member.classic.protocols[0]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != first_name
        ):
            return SyncResult(E.inconsistent_group_protocol)
        # A newer group epoch: join again first, unless the member is still revoking (its next join follows)
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout_if_absent(group, member)
            return SyncResult(E.rebalance_in_progress)
        self.timers.cancel(_timer_key("sync", group.group_id, member.member_id))
        self._schedule_consumer_session_timeout(group, member.member_id)
        try:
            version = version_of(first_metadata)
        except ConsumerProtocolError:
            version = 0
        return SyncResult(E.none, protocol_type, protocol_name, serialize_assignment(member.assigned, version))

    def classic_heartbeat_to_consumer_group(
        self, group: ConsumerGroup, generation_id: int, member_id: str, instance_id: str | None
    ) -> int:
        try:
            member = self._classic_member(group, member_id, instance_id)
        except GroupError as exc:
            return exc.code
        if generation_id != member.member_epoch:
            return E.illegal_generation
        self._schedule_consumer_session_timeout(group, member.member_id)
        # Join again when the group moved on, when partitions must be revoked, or when the partitions it waits
        # for are free
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not _waiting_on_unreleased(group, member))
        ):
            self._schedule_join_timeout_if_absent(group, member)
            return E.rebalance_in_progress
        return E.none

    def classic_leave_to_consumer_group(
        self, group: ConsumerGroup, members: list[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        out: list[Record] = []
        errors: list[int] = []
        for member_id, instance_id in members:
            if instance_id is None:
                member = group.members.get(member_id)
            else:
                member = group.static_member(instance_id)
                if member is not None and member_id and member.member_id != member_id:
                    errors.append(E.fenced_instance_id)
                    continue
            if member is None or member.classic is None:
                errors.append(E.unknown_member_id)
                continue
            log.info("[GroupId %s] Member %s has left group through explicit `LeaveGroup` request.",
                     group.group_id, member.member_id)
            # Kafka's classicGroupLeaveToConsumerGroup removes the member without the downgrade check
            self._remove_consumer_member(group, member.member_id)
            out.extend(member_tombstones(group.group_id, member.member_id))
            errors.append(E.none)
        if out:
            # one new group epoch for all the members that left
            group.subscription_metadata = self._subscription_metadata(group)
            group.metadata_version = self.topic_image.version
            group.group_epoch += 1
            out.append(epoch_record(CG_METADATA, group.group_id, group.group_epoch))
            self._write_in_background(group.partition, out)
        return E.none, errors


def _supports_classic_protocols(group: ConsumerGroup, protocol_type: str, names: list[str]) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: the consumer embedded protocol, and a protocol name in
    common with every classic member."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
        return False
    return all(
        any(name in names for name, _ in m.classic.protocols)
        for m in group.members.values()
        if m.classic is not None
    )


def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's waitingOnUnreleasedPartition: a partition of its target another member still owns."""
    for topic, partitions in group.target.get(member.member_id, {}).items():
        assigned = member.assigned.get(topic, frozenset())
        for p in partitions - assigned:
            owner = group.owner_of(topic, p)
            if owner is not None and owner != member.member_id:
                return True
    return False

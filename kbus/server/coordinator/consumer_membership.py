"""The consumer group protocol (KIP-848) half of the group coordinator: ConsumerGroupHeartbeat (join, heartbeat,
leave with epoch -1, a static member's temporary leave with -2), session and rebalance timeouts, the member-epoch
checks of OffsetCommit/OffsetFetch, and the admin views (ConsumerGroupDescribe, ListGroups' consumer groups).
Kafka's GroupMetadataManager.consumerGroupHeartbeat and friends, step for step.

Every change is written to `__consumer_offsets` as Kafka 4's records (group epoch, member metadata, target
assignment, current assignment; `records.py`) before the heartbeat is answered, and a new coordinator loads the
groups from them (`consumer_group.ConsumerGroupReplay`): members keep their epochs and partitions across a
coordinator move.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode as E

from kbus.protocol.record_batch import build_batch
from kbus.server.coordinator.assignors import ASSIGNORS, Assignment, MemberSpec
from kbus.server.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    GroupError,
    MemberState,
    compile_regex,
    epoch_record,
    member_records,
    member_tombstones,
    reconcile,
    target_record,
    validate_member_epoch,
)
from kbus.server.coordinator.group import Group, GroupState
from kbus.server.coordinator.group_store import GroupStore
from kbus.server.coordinator.records import CG_METADATA, CG_TARGET_ASSIGNMENT_METADATA
from kbus.server.util import eager

Record = tuple[bytes, bytes | None]

log = logging.getLogger("kbus.coordinator")


def _metadata(m: ConsumerGroupMember) -> tuple[object, ...]:
    """What ConsumerGroupMemberMetadataValue holds: a change of any of it is written."""
    return (m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names,
            m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor, m.classic)


def _nonempty(a: Assignment) -> dict[str, frozenset[int]]:
    return {t: ps for t, ps in a.items() if ps}


def _timer_key(kind: str, group_id: str, member_id: str) -> tuple[str, tuple[str, str], str]:
    # not (kind, group_id, ...): the classic group of the same id (holding the offsets) cancels those when it goes
    return (kind, ("consumer", group_id), member_id)


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    # the partitions the member owns, by topic name (None: unchanged since the last heartbeat)
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(frozen=True, slots=True)
class ConsumerMemberSummary:
    member: ConsumerGroupMember
    target: Assignment


@dataclass(frozen=True, slots=True)
class ConsumerGroupSummary:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[ConsumerMemberSummary, ...]


class ConsumerGroupMembership(GroupStore):
    # ================================================================ ConsumerGroupHeartbeat

    async def consumer_group_heartbeat(self, req: HeartbeatRequest) -> HeartbeatResponse:
        """The state changes at once (a concurrent heartbeat sees them); the answer waits for their records."""
        out: list[Record] = []
        try:
            self._validate_heartbeat(req)
            error = self.validate_group_status(req.group_id, "heartbeat")
            if error is not None:
                raise GroupError(error)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                response = self._consumer_group_leave(req, out)
            else:
                response = self._consumer_group_heartbeat(req, out)
        except GroupError as exc:
            return HeartbeatResponse(exc.code, exc.message)
        if out:
            error = await self._write_consumer_records(self.partition_for(req.group_id), out)
            if error != E.none:
                return HeartbeatResponse(error)
        return response

    async def _write_consumer_records(self, partition: int, out: list[Record]) -> int:
        try:
            await self.log.append(partition, build_batch(out, timestamp_ms=self.clock()))
            return E.none
        except Exception as exc:
            return self._append_error(partition, exc, for_offsets=False)

    def _write_in_background(self, partition: int, out: list[Record]) -> None:
        """For changes no request waits on (timeouts): the append starts now, so it keeps its place in the log
        before any later heartbeat's records."""
        task = eager.start(self._write_discarding(partition, out))
        if task is not None:
            self.run_in_background(task)

    async def _write_discarding(self, partition: int, out: list[Record]) -> None:
        error = await self._write_consumer_records(partition, out)
        if error != E.none:
            log.warning("Could not write %d consumer group record(s) to __consumer_offsets-%d (error %d)",
                        len(out), partition, error)

    def _install_consumer_groups(self, groups: list[ConsumerGroup]) -> None:
        image = self.topic_image
        for group in groups:
            self.consumer_groups[group.group_id] = group
            # the subscriptions resolved against today's topics: no new epoch unless they changed since
            group.subscription_metadata = self._subscription_metadata(group)
            group.metadata_version = image.version
            for member_id, member in group.members.items():
                self._schedule_consumer_session_timeout(group, member_id)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(group, member)

    def _validate_heartbeat(self, req: HeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (4.0: regex subscriptions, member ids generated by
        the client from version 1)."""

        def invalid(message: str) -> GroupError:
            return GroupError(E.invalid_request, message)

        if not req.group_id:
            raise invalid("GroupId can't be empty.")
        if req.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if req.rack_id == "":
            raise invalid("RackId can't be empty.")
        epoch = req.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not req.member_id:
                raise invalid("MemberId can't be empty.")
        elif epoch == 0:
            if req.api_version >= 1 and not req.member_id:
                raise invalid("MemberId can't be empty.")
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not req.member_id:
                raise invalid("MemberId can't be empty.")
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.config.consumer_assignors:
            raise GroupError(
                E.unsupported_assignor,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.consumer_assignors)}.",
            )
        if req.subscribed_topic_regex:
            compile_regex(req.subscribed_topic_regex)

    def _convert_to_consumer_group(self, classic: Group, out: list[Record]) -> ConsumerGroup | None:
        """The online upgrade of a classic group with members (migration.py's GroupMigration); here: refused."""
        return None

    def _get_or_maybe_create_consumer_group(self, group_id: str, create: bool, out: list[Record]) -> ConsumerGroup:
        group = self.consumer_groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.share_groups:
            raise GroupError(E.group_id_not_found, f"Group {group_id} is not a consumer group.")
        classic = self.groups.get(group_id)
        if classic is not None and not classic.is_(GroupState.EMPTY) and not classic.is_(GroupState.DEAD):
            # A classic group with members becomes a consumer group when a consumer-protocol member joins it, if
            # group.consumer.migration.policy allows (Kafka's online upgrade); otherwise it stays classic.
            converted = self._convert_to_consumer_group(classic, out) if create else None
            if converted is not None:
                return converted
            raise GroupError(E.group_id_not_found, f"Group {group_id} is not a consumer group.")
        if not create:
            # Kafka answers GROUP_ID_NOT_FOUND here; its groups survive a coordinator move, kbus's do not, and
            # UNKNOWN_MEMBER_ID is what makes a member of a lost group re-join with epoch 0.
            raise GroupError(E.unknown_member_id, f"Consumer group {group_id} not found.")
        group = ConsumerGroup(group_id, self.partition_for(group_id))
        self.consumer_groups[group_id] = group
        return group

    def _consumer_group_heartbeat(self, req: HeartbeatRequest, out: list[Record]) -> HeartbeatResponse:
        create = req.member_epoch == 0
        group = self._get_or_maybe_create_consumer_group(req.group_id, create, out)
        member_id = req.member_id or str(uuid.uuid4())
        if len(group.members) >= self.config.consumer_max_size and member_id not in group.members:
            raise GroupError(
                E.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of {self.config.consumer_max_size} members.",
            )
        known = member_id in group.members
        member = self._get_or_subscribe_member(group, member_id, req, create, out)
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
            ),
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=(
                tuple(req.subscribed_topic_names)
                if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                req.subscribed_topic_regex if req.subscribed_topic_regex is not None else member.subscribed_topic_regex
            ),
            client_id=req.client_id,
            client_host=req.client_host,
        )
        reconciled = self._update_member_and_reconcile(group, member, updated, known, req.owned, out)
        self._schedule_consumer_session_timeout(group, member_id)
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.owned is not None
        )
        changed = reconciled.assigned != member.assigned
        return HeartbeatResponse(
            E.none,
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.config.consumer_heartbeat_interval_ms,
            assignment=reconciled.assigned if full or changed else None,
        )

    def _update_member_and_reconcile(
        self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember, known: bool,
        owned: Assignment | None, out: list[Record],
    ) -> ConsumerGroupMember:
        """Steps 1-3 of a heartbeat (and of a classic member's JoinGroup): store the member, bump the group epoch
        when the subscriptions changed, compute the target assignment if behind, move the member towards it."""
        bump = (
            set(updated.subscribed_topic_names) != set(member.subscribed_topic_names)
            or (updated.subscribed_topic_regex or None) != (member.subscribed_topic_regex or None)
        )
        group.update_member(updated)
        if not known or _metadata(updated) != _metadata(member):
            out.extend(member_records(self.topic_image, group.group_id, updated, current=False))
        image = self.topic_image
        if bump or group.metadata_version != image.version:
            metadata = self._subscription_metadata(group)
            if metadata != group.subscription_metadata:
                bump = True
                group.subscription_metadata = metadata
            group.metadata_version = image.version
        if bump:
            group.group_epoch += 1
            out.append(epoch_record(CG_METADATA, group.group_id, group.group_epoch))
            log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group, out)
        return self._maybe_reconcile(group, updated, owned, out)

    def _get_or_subscribe_member(
        self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest, create: bool, out: list[Record]
    ) -> ConsumerGroupMember:
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not create:
                    raise GroupError(E.unknown_member_id, f"Member {member_id} is not a member of group "
                                                          f"{group.group_id}.")
                log.info("[GroupId %s] Member %s joins the consumer group.", group.group_id, member_id)
                member = ConsumerGroupMember(member_id)
            validate_member_epoch(member, req.member_epoch, req.owned)
            return member
        existing = group.static_member(req.instance_id)
        if create:
            if existing is None:
                return group.members.get(member_id) or ConsumerGroupMember(member_id)
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(
                    E.unreleased_instance_id,
                    f"Static member {member_id} with instance id {req.instance_id} cannot join the group because "
                    f"the instance id is owned by {existing.member_id} member.",
                )
            # The returning static member takes over its predecessor's assignment under its new member id.
            target = group.target.get(existing.member_id, {})
            self._remove_consumer_member(group, existing.member_id)
            group.target[member_id] = target
            log.info("[GroupId %s] Static member with instance id %s re-joins as %s, replacing %s.",
                     group.group_id, req.instance_id, member_id, existing.member_id)
            replacement = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            # Kafka's replaceMember: the old member's records go, the new one's come with its target and epoch 0
            out.extend(member_tombstones(group.group_id, existing.member_id))
            out.extend(member_records(self.topic_image, group.group_id, replacement))
            out.append(target_record(self.topic_image, group.group_id, member_id, target))
            group.update_member(replacement)
            return replacement
        if existing is None:
            raise GroupError(E.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise GroupError(
                E.fenced_instance_id,
                f"Static member {member_id} with instance id {req.instance_id} was fenced by member "
                f"{existing.member_id}.",
            )
        validate_member_epoch(existing, req.member_epoch, req.owned)
        return existing

    def _resolved_subscription(self, group: ConsumerGroup, member: ConsumerGroupMember) -> set[str]:
        image = self.topic_image
        try:
            return group.subscribed_topics(member, image.counts, set(image.internal))
        except GroupError:
            # a regex loaded from the log that Python's re cannot compile (RE2-only syntax written by Kafka):
            # it matches nothing, as Kafka treats an unresolved regex
            return {t for t in member.subscribed_topic_names if t in image.counts}

    def _subscription_metadata(self, group: ConsumerGroup) -> dict[str, int]:
        counts = self.topic_image.counts
        topics: set[str] = set()
        for m in group.members.values():
            topics |= self._resolved_subscription(group, m)
        return {t: counts[t] for t in sorted(topics)}

    def _update_target_assignment(self, group: ConsumerGroup, out: list[Record]) -> None:
        assignor = group.preferred_assignor(self.config.consumer_assignors[0])
        specs = {
            mid: MemberSpec(
                frozenset(self._resolved_subscription(group, m)),
                group.target.get(mid, {}),
                m.rack_id,
                m.instance_id,
            )
            for mid, m in group.members.items()
        }
        previous = group.target
        group.target = ASSIGNORS[assignor](specs, group.subscription_metadata)
        group.assignment_epoch = group.group_epoch
        for member_id, target in sorted(group.target.items()):
            if _nonempty(previous.get(member_id, {})) != _nonempty(target) or member_id not in previous:
                out.append(target_record(self.topic_image, group.group_id, member_id, target))
        out.append(epoch_record(CG_TARGET_ASSIGNMENT_METADATA, group.group_id, group.assignment_epoch))
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with the %s assignor.",
                 group.group_id, group.group_epoch, assignor)

    def _maybe_reconcile(
        self, group: ConsumerGroup, member: ConsumerGroupMember, owned: Assignment | None, out: list[Record]
    ) -> ConsumerGroupMember:
        if member.is_reconciled_to(group.assignment_epoch):
            return member
        updated = reconcile(
            member,
            group.assignment_epoch,
            group.target.get(member.member_id, {}),
            self._resolved_subscription(group, member),
            group.owner_of,
            owned,
        )
        if updated != member:
            group.update_member(updated)
            out.extend(member_records(self.topic_image, group.group_id, updated, metadata=False))
            if updated.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group, updated)
            else:
                self.timers.cancel(_timer_key("rebalance", group.group_id, member.member_id))
        return updated

    def _schedule_rebalance_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        member_id, epoch = member.member_id, member.member_epoch
        self.timers.schedule(
            _timer_key("rebalance", group.group_id, member_id),
            self.clock() + max(member.rebalance_timeout_ms, 0),
            lambda: self._on_consumer_rebalance_timeout(group, member_id, epoch),
        )

    # ================================================================ leaving, fencing, timeouts

    def _consumer_group_leave(self, req: HeartbeatRequest, out: list[Record]) -> HeartbeatResponse:
        group = self.consumer_groups.get(req.group_id)
        if group is None:
            raise GroupError(E.group_id_not_found, f"Consumer group {req.group_id} not found.")
        if req.instance_id is None:
            if req.member_id not in group.members:
                raise GroupError(E.unknown_member_id, f"Member {req.member_id} is not a member of group "
                                                      f"{group.group_id}.")
            log.info("[GroupId %s] Member %s left the consumer group.", group.group_id, req.member_id)
            out.extend(self._fence_consumer_member(group, req.member_id))
            return HeartbeatResponse(E.none, member_id=req.member_id, member_epoch=req.member_epoch)
        member = group.static_member(req.instance_id)
        if member is None:
            raise GroupError(E.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
        if member.member_id != req.member_id:
            raise GroupError(
                E.fenced_instance_id,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
                f"{member.member_id}.",
            )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # Not removed: it keeps its partitions until it returns or its session times out.
            leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
            group.update_member(leaving)
            out.extend(member_records(self.topic_image, group.group_id, leaving, metadata=False))
            return HeartbeatResponse(E.none, member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        out.extend(self._fence_consumer_member(group, member.member_id))
        return HeartbeatResponse(E.none, member_id=req.member_id, member_epoch=req.member_epoch)

    def _remove_consumer_member(self, group: ConsumerGroup, member_id: str) -> None:
        group.remove_member(member_id)
        self.timers.cancel(_timer_key("session", group.group_id, member_id))
        self.timers.cancel(_timer_key("rebalance", group.group_id, member_id))

    def _fence_consumer_member(self, group: ConsumerGroup, member_id: str) -> list[Record]:
        """Kafka's consumerGroupFenceMember: the member and its target assignment go, its partitions are free, and
        the group epoch is bumped so the others' target assignment is computed again. Returns the records."""
        self._remove_consumer_member(group, member_id)
        group.subscription_metadata = self._subscription_metadata(group)
        group.metadata_version = self.topic_image.version
        group.group_epoch += 1
        return [*member_tombstones(group.group_id, member_id),
                epoch_record(CG_METADATA, group.group_id, group.group_epoch)]

    def _schedule_consumer_session_timeout(self, group: ConsumerGroup, member_id: str) -> None:
        # a classic member keeps the session timeout of its JoinGroup, as Kafka's does
        member = group.members.get(member_id)
        timeout = self.config.consumer_session_timeout_ms
        if member is not None and member.classic is not None:
            timeout = member.classic.session_timeout_ms
        self.timers.schedule(
            _timer_key("session", group.group_id, member_id),
            self.clock() + timeout,
            lambda: self._on_consumer_session_timeout(group, member_id),
        )

    def _on_consumer_session_timeout(self, group: ConsumerGroup, member_id: str) -> None:
        if self.consumer_groups.get(group.group_id) is group and member_id in group.members:
            log.info("[GroupId %s] Member %s fenced from the group because the member session expired.",
                     group.group_id, member_id)
            self._write_in_background(group.partition, self._fence_consumer_member(group, member_id))

    def _on_consumer_rebalance_timeout(self, group: ConsumerGroup, member_id: str, epoch: int) -> None:
        member = group.members.get(member_id) if self.consumer_groups.get(group.group_id) is group else None
        if member is not None and member.member_epoch == epoch:
            log.info("[GroupId %s] Member %s fenced from the group because it failed to transition from epoch %d "
                     "within %dms.", group.group_id, member_id, epoch, member.rebalance_timeout_ms)
            self._write_in_background(group.partition, self._fence_consumer_member(group, member_id))

    # ================================================================ admin views

    def is_consumer_group(self, group_id: str) -> bool:
        group = self.consumer_groups.get(group_id)
        return group is not None and not group.dead

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[tuple[str, int, str | None,
                                                                                 ConsumerGroupSummary | None]]:
        out: list[tuple[str, int, str | None, ConsumerGroupSummary | None]] = []
        for group_id in group_ids:
            error = self.validate_group_status(group_id, "describe")
            if error is not None:
                out.append((group_id, error, None, None))
                continue
            group = self.consumer_groups.get(group_id)
            if group is None or group.dead:
                message = (f"Group {group_id} is not a consumer group." if group_id in self.groups
                           else f"Group {group_id} not found.")
                out.append((group_id, E.group_id_not_found, message, None))
                continue
            members = tuple(
                ConsumerMemberSummary(m, group.target.get(mid, {})) for mid, m in sorted(group.members.items())
            )
            out.append((group_id, E.none, None, ConsumerGroupSummary(
                group_id,
                group.state.value,
                group.group_epoch,
                group.assignment_epoch,
                group.preferred_assignor(self.config.consumer_assignors[0]),
                members,
            )))
        return out

    def consumer_group_states(self) -> list[tuple[str, str]]:
        """(group id, state) of the consumer groups of the partitions owned here."""
        return [
            (g.group_id, g.state.value)
            for g in self.consumer_groups.values()
            if g.partition in self.owned and not g.dead
        ]

"""The per-request path of OffsetCommit, compiled (setup.py COMPILED): which commits a group accepts (its member and
generation, or a consumer group's member epoch), the heartbeat deadline a member's request moves on, the
pending-commit bookkeeping around the `__consumer_offsets` append and the per-partition result.

The group coordinator is four interpreted mixins over one store (coordinator.py), which mypyc cannot compile (a
native class has one native base); a consumer commits after every poll, so this part of it is a plain class of its
own that the mixins delegate to (offsets.py: OffsetCommit, TxnOffsetCommit's member check; group_store.py: every
heartbeat deadline and member check of the classic protocol).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol, final

from kio.schema.errors import ErrorCode as E

from kbus.server.coordinator.commit_batch import (
    OffsetAndMetadata,
    check_offsets,
    offset_commit_buffer,
    partition_for,
)
from kbus.server.coordinator.consumer_group import ConsumerGroup, validate_offset_commit
from kbus.server.coordinator.group import Group, GroupState, Member
from kbus.server.coordinator.state_path import (
    COORDINATOR_LOAD_IN_PROGRESS,
    NOT_COORDINATOR,
    StateReplicas,
    acks_committed,
    append_leader,
    ownership_error,
    wait_acked,
)
from kbus.server.coordinator.state_topic import InternalTopicLog, StateLog
from kbus.server.coordinator.timers import Timers

TopicPartition = tuple[str, int]

# plain ints (the kio enum's members are looked up through its class on each use)
_NONE: Final = int(E.none)
_UNKNOWN_MEMBER_ID: Final = int(E.unknown_member_id)
_FENCED_INSTANCE_ID: Final = int(E.fenced_instance_id)
_ILLEGAL_GENERATION: Final = int(E.illegal_generation)
_REBALANCE_IN_PROGRESS: Final = int(E.rebalance_in_progress)
_COORDINATOR_NOT_AVAILABLE: Final = int(E.coordinator_not_available)
_INVALID_GROUP_ID: Final = int(E.invalid_group_id)
_EMPTY: Final = GroupState.EMPTY
_DEAD: Final = GroupState.DEAD
_STABLE: Final = GroupState.STABLE
_PREPARING_REBALANCE: Final = GroupState.PREPARING_REBALANCE
_COMPLETING_REBALANCE: Final = GroupState.COMPLETING_REBALANCE


class CommitLimits(Protocol):
    """The part of GroupConfig the commit path reads."""

    @property
    def offset_metadata_max_bytes(self) -> int: ...
    @property
    def offsets_topic_num_partitions(self) -> int: ...


class CommitOwner(Protocol):
    """What the commit path asks of the coordinator it belongs to (GroupStore)."""

    @property
    def active(self) -> bool: ...
    def on_election(self, partition: int) -> None: ...
    def _append_error(self, partition: int, exc: Exception, *, for_offsets: bool) -> int: ...
    def _on_expire_heartbeat(self, group: Group, member_id: str) -> None: ...
    def classic_heartbeat_to_consumer_group(
        self, group: ConsumerGroup, generation_id: int, member_id: str, instance_id: str | None
    ) -> int: ...


class Ownership(Protocol):
    """Which partitions of `__consumer_offsets` the coordinator owns or is loading (StatePartitions)."""

    @property
    def owned(self) -> set[int]: ...
    @property
    def loading(self) -> dict[int, object]: ...


def validate_current_member(group: Group, member_id: str, instance_id: str | None) -> int | None:
    """Kafka's ClassicGroup.validateMember: a static member must be the instance's current member id
    (FENCED_INSTANCE_ID otherwise), a dynamic one must be a member (UNKNOWN_MEMBER_ID)."""
    if instance_id is not None:
        current = group.static_members.get(instance_id)
        if current is None:
            return _UNKNOWN_MEMBER_ID
        if current != member_id:
            return _FENCED_INSTANCE_ID
        return None
    return None if member_id in group.members else _UNKNOWN_MEMBER_ID


def validate_classic_offset_commit(
    group: Group, generation_id: int, member_id: str, instance_id: str | None
) -> int | None:
    """Kafka's ClassicGroup.validateOffsetCommit (the non-transactional part): a commit from outside group
    management (generation < 0, no member) only on an Empty group, else the member of the current generation."""
    state = group.state
    if state is _DEAD:
        return _COORDINATOR_NOT_AVAILABLE
    if generation_id < 0 and state is _EMPTY:
        return None
    if generation_id >= 0 or member_id != "" or instance_id is not None:
        error = validate_current_member(group, member_id, instance_id)
        if error is None and generation_id != group.generation_id:
            error = _ILLEGAL_GENERATION
        return error
    if state is not _EMPTY:
        return _UNKNOWN_MEMBER_ID
    return None


def serving_consumer_group(consumer_groups: dict[str, ConsumerGroup], group_id: str) -> ConsumerGroup | None:
    """The consumer group serving this group id's classic requests (Kafka 4's online migration: one with members)."""
    cgroup = consumer_groups.get(group_id)
    return cgroup if cgroup is not None and cgroup.members and not cgroup.dead else None


@final
class HeartbeatTimer:
    """A classic member's session timer: its key and what runs when it expires, made once per member (and group
    object), then moved on by each of its requests (Timers.schedule changes the live timer in place). A key tuple
    and a closure were made on every Heartbeat and OffsetCommit."""

    def __init__(self, owner: CommitOwner, group: Group, member_id: str) -> None:
        self.owner = owner
        self.group = group
        self.member_id = member_id
        self.key = ("hb", group.group_id, member_id)

    def __call__(self) -> None:
        self.owner._on_expire_heartbeat(self.group, self.member_id)


class CommitPath:
    """OffsetCommit from validation to result, the group id's partition and its coordinator's status (every group
    request's first check), and the heartbeat deadlines of classic members. Shares the coordinator's groups, timers,
    clock, log and partitions (the same objects, never replaced)."""

    def __init__(
        self,
        owner: CommitOwner,
        groups: dict[str, Group],
        consumer_groups: dict[str, ConsumerGroup],
        timers: Timers,
        clock: Callable[[], int],
        log: StateLog,
        partition_exists: Callable[[str, int], bool] | None,
        limits: CommitLimits,
        partitions: Ownership,
        offsets_partitions: Callable[[], int | None] | None = None,
        leads_partition: Callable[[int], bool] | None = None,
    ) -> None:
        self._owner = owner
        self._groups = groups
        self._consumer_groups = consumer_groups
        self._timers = timers
        self._clock = clock
        self._log = log
        self._partition_exists = partition_exists
        self._limits = limits
        self._partitions = partitions
        self._offsets_partitions = offsets_partitions
        self._offsets_count: int | None = None  # __consumer_offsets' partition count, once the topic exists
        self._leads_partition = leads_partition
        # the broker's log (an InternalTopicLog, not a subclass or a test's): its compiled append is called from here,
        # without the interpreted coroutine around it
        self._replicas: StateReplicas | None = None
        self._topic = ""
        self._timeout_ms = 0
        if type(log) is InternalTopicLog:
            self._replicas, self._topic, self._timeout_ms = log.replicas, log.topic, log.timeout_ms

    # ---- the group's coordinator
    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition of `group_id`."""
        count = self._offsets_count
        if count is None and self._offsets_partitions is not None:
            # read once the topic exists, as Kafka's GroupMetadataManager reads it once (a lazy val): every request
            # to the coordinator maps its group here, and the metadata lookup was half of that
            count = self._offsets_count = self._offsets_partitions()
        return partition_for(group_id, count or self._limits.offsets_topic_num_partitions)

    def group_status(self, group_id: str | None, management: bool) -> int | None:
        """Kafka's GroupCoordinator.validateGroupStatus: the error a request for `group_id` gets before the group is
        looked at (None: none). `management`: a group-management API (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
        OffsetDelete, ListGroups), which an empty group id is invalid for."""
        if group_id is None or (management and not group_id):
            return _INVALID_GROUP_ID
        owner = self._owner
        if not owner.active:
            return _COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        partitions = self._partitions
        error = ownership_error(partitions.loading, partitions.owned, partition)
        if error == NOT_COORDINATOR and self._leads_partition is not None and self._leads_partition(partition):
            # Leadership may have arrived before our listener heard of it (a freshly created offsets topic).
            owner.on_election(partition)
            return COORDINATOR_LOAD_IN_PROGRESS if partition in partitions.loading else None
        return None if error == _NONE else error

    # ---- heartbeats
    def schedule_heartbeat(
        self, group: Group, member: Member, timeout_ms: int | None = None, now: int | None = None
    ) -> None:
        """The member's session deadline moves on (every request a classic member sends counts as a heartbeat).
        `now`: the clock as the request read it (default: read here)."""
        member.heartbeat_satisfied = False
        member_id = member.member_id
        deadline = (self._clock() if now is None else now) + (
            member.session_timeout_ms if timeout_ms is None else timeout_ms
        )
        timer = member.heartbeat_timer
        # made again for a member of another group object (its partition unloaded and loaded again) or another id:
        # what expires is this group's member
        if timer is None or timer.group is not group or timer.member_id != member_id:
            timer = member.heartbeat_timer = HeartbeatTimer(self._owner, group, member_id)
        self._timers.schedule(timer.key, deadline, timer)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        """Kafka's GroupCoordinator.handleHeartbeat: the error of a classic member's Heartbeat (NONE: its session
        deadline moved on; REBALANCE_IN_PROGRESS: it did, and the member must join again). A group id served by a
        consumer group with members (Kafka 4's online migration) is the owner's (migration.py)."""
        error = self.group_status(group_id, True)
        if error == COORDINATOR_LOAD_IN_PROGRESS:
            return _NONE  # the member's session is not expired meanwhile: it heartbeats again
        if error is not None:
            return error
        cgroup = serving_consumer_group(self._consumer_groups, group_id)
        if cgroup is not None:
            return self._owner.classic_heartbeat_to_consumer_group(cgroup, generation_id, member_id,
                                                                   group_instance_id)  # fmt: skip
        group = self._groups.get(group_id)
        if group is None:
            return _UNKNOWN_MEMBER_ID
        state = group.state
        if state is _DEAD:
            return _COORDINATOR_NOT_AVAILABLE
        error = validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return _ILLEGAL_GENERATION
        if state is _EMPTY:
            return _UNKNOWN_MEMBER_ID
        self.schedule_heartbeat(group, group.members[member_id])
        if state is _PREPARING_REBALANCE:
            return _REBALANCE_IN_PROGRESS
        return _NONE

    # ---- groups that only hold offsets
    def new_group(self, group_id: str) -> Group:
        """A classic group that holds offsets only: a "simple" group (no group management), or the offsets of a
        consumer-protocol group of the same id."""
        group = Group(group_id, self.partition_for(group_id), current_state_timestamp=self._clock())
        self._groups[group_id] = group
        return group

    def offsets_holder(self, group_id: str) -> Group:
        group = self._groups.get(group_id)
        if group is None or group.state is _DEAD:
            group = self.new_group(group_id)
        return group

    # ---- OffsetCommit
    def check_offsets(
        self, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, OffsetAndMetadata]]:
        """(errors of the partitions refused, the offsets that may be stored): unknown partitions and metadata
        longer than offset.metadata.max.bytes are refused, for plain and transactional commits alike."""
        return check_offsets(offsets, self._partition_exists, self._limits.offset_metadata_max_bytes)

    async def commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        api_version: int,
        now: int | None = None,
    ) -> dict[TopicPartition, int]:
        """Kafka's GroupCoordinator.handleCommitOffsets: the error of each partition (NONE once stored). `now`: the
        clock as the request read it (its commit timestamps'; default: read here), read once per commit.

        One append of the valid offsets to the group's `__consumer_offsets` partition; they are the group's committed
        offsets once the in-sync replicas have it (and the group was not unloaded meanwhile). While it is in flight
        each partition counts as a pending commit (Kafka's pendingOffsetCommits: retention and OffsetDelete leave it
        alone). One coroutine: the checks and the append are synchronous, and it waits only when the replicas have
        not committed the append yet (never on a one-broker cluster), not through a coroutine per step."""
        if now is None:
            now = self._clock()
        group, error = self.commit_target(group_id, member_id, group_instance_id, generation_id, api_version, now)
        if group is None:
            return dict.fromkeys(offsets, error)
        result, valid = self.check_offsets(offsets)
        if not valid:
            return result
        batch = offset_commit_buffer(group.group_id, valid, now)
        pending = group.pending_offset_commits
        for tp in valid:
            pending[tp] = pending.get(tp, 0) + 1
        error = _NONE
        try:
            replicas = self._replicas
            if replicas is not None:
                # a writable memoryview: the log stamps the offsets into the batch and writes it from there
                part, appended = append_leader(replicas, self._topic, group.partition, memoryview(batch))
                if not acks_committed(replicas, part, appended):
                    await wait_acked(replicas, part, appended, self._timeout_ms)
            else:
                await self._log.append(group.partition, bytes(batch))
        except Exception as exc:
            error = self._owner._append_error(group.partition, exc, for_offsets=True)
        finally:
            for tp in valid:
                left = pending.get(tp, 0) - 1
                if left > 0:
                    pending[tp] = left
                else:
                    pending.pop(tp, None)
        if error == _NONE and self._groups.get(group.group_id) is group:
            group.offsets.update(valid)
        for tp in valid:
            result[tp] = error
        return result

    def commit_target(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        api_version: int,
        now: int,
    ) -> tuple[Group | None, int]:
        """(the group whose offsets an OffsetCommit stores, NONE) or (None, the error every partition gets): the
        coordinator's status, then a consumer group's member epoch or a classic group's member and generation (a
        commit from a classic member moves its session deadline on)."""
        error = self.group_status(group_id, False)
        if error is not None:
            return None, error
        cgroup = self._consumer_groups.get(group_id)
        if cgroup is not None and not cgroup.dead:
            # A consumer-protocol group: the member epoch is checked against it, the offsets are stored in the
            # classic group of the same id (Empty: it only holds offsets).
            error = validate_offset_commit(
                cgroup, member_id, generation_id, transactional=False, api_version=api_version
            )
            if error is not None:
                return None, error
            return self.offsets_holder(group_id), _NONE
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return None, _ILLEGAL_GENERATION
            # Not using Kafka's group management: a "simple" group that only stores offsets.
            group = self.new_group(group_id)
        error = validate_classic_offset_commit(group, generation_id, member_id, group_instance_id)
        state = group.state
        if error is None and state is _COMPLETING_REBALANCE:
            error = _REBALANCE_IN_PROGRESS
        if error is not None:
            return None, error
        if state is _STABLE or state is _PREPARING_REBALANCE:
            member = group.members.get(member_id)
            if member is not None:
                self.schedule_heartbeat(group, member, None, now)
        return group, _NONE

"""One classic-protocol consumer group: members, generation, state and committed offsets (Kafka's GroupMetadata).

Pure state: no clocks, timers or I/O. The coordinator drives transitions and owns the futures that park JoinGroup
and SyncGroup requests; a member only remembers which of its requests is parked.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from kbus.server.coordinator.records import (
    GroupMetadataRecord,
    MemberRecord,
    OffsetAndMetadata,
    subscribed_topics,
)

if TYPE_CHECKING:
    from kbus.server.coordinator.commit_path import HeartbeatTimer

CONSUMER_PROTOCOL_TYPE = "consumer"
UNKNOWN_MEMBER_ID = ""


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    # (member_id, group_instance_id, metadata): only the leader gets them
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    is_new: bool = False
    heartbeat_satisfied: bool = False
    # its session timer's key and callback (commit_path.HeartbeatTimer), made at its first heartbeat: every
    # Heartbeat and OffsetCommit of the member moves the timer on
    heartbeat_timer: HeartbeatTimer | None = field(default=None, repr=False)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        return next(name for name in self.protocol_names() if name in candidates)

    def has_satisfied_heartbeat(self) -> bool:
        # New members can expire while their JoinGroup is parked (they have no id to heartbeat with); members
        # with a parked request are otherwise alive by definition: the rebalance timers bound them.
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def complete_join(self, result: JoinResult) -> bool:
        fut, self.join_future = self.join_future, None
        if fut is None:
            return False
        if not fut.done():
            fut.set_result(result)
        return True

    def complete_sync(self, result: SyncResult) -> bool:
        fut, self.sync_future = self.sync_future, None
        if fut is None:
            return False
        if not fut.done():
            fut.set_result(result)
        return True


@dataclass(eq=False)
class Group:
    group_id: str
    partition: int = 0
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp: int = -1
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    pending_sync_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)
    new_member_added: bool = False
    # Which delayed join guards PreparingRebalance: "initial" waits out group.initial.rebalance.delay.ms,
    # "normal" completes as soon as every member has re-joined.
    join_kind: str = "normal"
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # the commits of each partition whose append is in flight (Kafka's pendingOffsetCommits; only counts above 0 are
    # kept): a plain dict, which the compiled commit path reads and writes directly (a Counter's methods are looked up
    # and called as Python methods there)
    pending_offset_commits: dict[tuple[str, int], int] = field(default_factory=dict)
    # offsets committed inside a transaction (TxnOffsetCommit), per producer id, until its marker decides them
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    subscribed: set[str] | None = None

    # ---- state
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalStateTransition(f"group {self.group_id}: {self.state.value} -> {state.value}")
        self.state = state
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # ---- membership
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> Member:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def add(self, member: Member, join_future: asyncio.Future[JoinResult] | None = None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.join_future = join_future
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        instance_id = None if member is None else member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def clear_members(self, now_ms: int) -> None:
        """The members moved to a consumer group (Kafka's online upgrade): this group stays, Empty, for the
        offsets; the caller completed the members' parked requests."""
        self.members.clear()
        self.static_members.clear()
        self.pending_members.clear()
        self.pending_sync_members.clear()
        self.leader_id = None
        self.protocol_name = None
        self.subscribed = None
        self.state = GroupState.EMPTY
        self.current_state_timestamp = now_ms

    def adopt_members(self, generation: int, members: list[Member], now_ms: int) -> None:
        """Kafka's ClassicGroup.fromConsumerGroup: the members of a consumer group downgraded to classic, Stable at
        the group epoch with their assignments (the caller starts the rebalance that makes them join again)."""
        self.generation_id = generation
        self.protocol_type = CONSUMER_PROTOCOL_TYPE
        self.leader_id = None
        for member in members:
            self.add(member)
        self.protocol_name = self.select_protocol()
        self.subscribed = self._compute_subscribed_topics()
        self.state = GroupState.STABLE
        self.current_state_timestamp = now_ms

    def replace_static_member(
        self, instance_id: str, old_member_id: str, new_member_id: str, fenced: JoinResult, fenced_sync: SyncResult
    ) -> Member:
        member = self.members.pop(old_member_id)
        # A duplicate instance with a parked request is fenced at once.
        member.complete_join(fenced)
        member.complete_sync(fenced_sync)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[instance_id] = new_member_id
        return member

    def update_member(
        self,
        member: Member,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_future: asyncio.Future[JoinResult] | None,
    ) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_future is not None and member.join_future is not None and member.join_future is not join_future:
            # The same member joined again on another connection: the old request is superseded.
            member.complete_join(JoinResult(error=ErrorCode.rebalance_in_progress, member_id=member.member_id))
        member.join_future = join_future

    @property
    def size(self) -> int:
        return len(self.members)

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join() and not self.pending_members

    def not_yet_rejoined_members(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        joined = next((m for m in self.members.values() if m.is_awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ---- protocols
    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.is_(GroupState.EMPTY) or not self.members:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(n in self.candidate_protocols() for n in names)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol all members support; ties go to the leader's
        preference order, then to the first member's."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalStateTransition(f"group {self.group_id}: no protocol supported by all members")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        tied = {name for name, n in votes.items() if n == best}
        order: list[str] = []
        leader = self.members.get(self.leader_id or "")
        if leader is not None:
            order += leader.protocol_names()
        for m in self.members.values():
            order += m.protocol_names()
        return next(name for name in order if name in tied)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed = self._compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def _compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        topics: set[str] = set()
        for m in self.members.values():
            t = subscribed_topics(m.metadata(self.protocol_name))
            if t is None:
                return None
            topics |= t
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed is not None and topic in self.subscribed

    def current_member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        return tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values())

    # ---- offsets
    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits) or bool(self.pending_txn_offsets)

    def complete_txn_offsets(self, producer_id: int, committed: bool) -> None:
        """A transaction's marker reached the offsets partition: its offsets become visible, or vanish."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if pending and committed:
            self.offsets.update(pending)

    def has_pending_txn_offset(self, tp: tuple[str, int]) -> bool:
        return any(tp in offsets for offsets in self.pending_txn_offsets.values())

    def remove_offsets(self, partitions: list[tuple[str, int]]) -> list[tuple[str, int]]:
        removed = []
        for tp in partitions:
            self.pending_offset_commits.pop(tp, None)
            if self.offsets.pop(tp, None) is not None:
                removed.append(tp)
        return removed

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """Kafka's KIP-211 rules: an Empty group's offsets expire `retention` after it became Empty; a Stable
        consumer group keeps the offsets of topics it subscribes to; a simple (memberless, typeless) group expires
        each offset `retention` after its commit."""

        def expired(base: Callable[[OffsetAndMetadata], int], keep: set[str]) -> list[tuple[str, int]]:
            out = []
            for tp, om in self.offsets.items():
                if tp[0] in keep or self.pending_offset_commits.get(tp):
                    continue
                if om.expire_timestamp is not None:
                    if now_ms >= om.expire_timestamp:
                        out.append(tp)
                elif now_ms - base(om) >= retention_ms:
                    out.append(tp)
            return out

        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            state_ts = self.current_state_timestamp
            return expired(lambda om: state_ts if state_ts >= 0 else om.commit_timestamp, set())
        if self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed is not None and self.is_(GroupState.STABLE):
            return expired(lambda om: om.commit_timestamp, self.subscribed)
        if self.protocol_type is None:
            return expired(lambda om: om.commit_timestamp, set())
        return []

    # ---- persistence
    def to_record(self, assignment: dict[str, bytes] | None = None) -> GroupMetadataRecord:
        members = [
            MemberRecord(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(self.protocol_name),
                m.assignment if assignment is None else assignment.get(m.member_id, b""),
            )
            for m in self.members.values()
        ]
        return GroupMetadataRecord(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id if members else None,
            current_state_timestamp=self.current_state_timestamp,
            members=members,
        )

    @classmethod
    def from_record(cls, group_id: str, partition: int, rec: GroupMetadataRecord) -> Group:
        group = cls(group_id, partition)
        group.protocol_type = rec.protocol_type or None
        group.generation_id = rec.generation
        group.protocol_name = rec.protocol
        group.current_state_timestamp = rec.current_state_timestamp
        for mr in rec.members:
            member = Member(
                mr.member_id,
                mr.group_instance_id,
                mr.client_id,
                mr.client_host,
                mr.rebalance_timeout_ms,
                mr.session_timeout_ms,
                rec.protocol_type,
                [(rec.protocol or "", mr.subscription)],
                assignment=mr.assignment,
            )
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.leader_id = rec.leader if rec.leader in group.members else next(iter(group.members), None)
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.subscribed = group._compute_subscribed_topics()
        return group

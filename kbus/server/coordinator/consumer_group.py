"""One consumer-protocol group (KIP-848; Kafka's modern/consumer ConsumerGroup, ConsumerGroupMember and
CurrentAssignmentBuilder): the group epoch, the target assignment and its epoch, the members with their member
epochs and reconciliation state, and which member owns each partition.

Pure state: no clocks, timers or I/O (the coordinator's `consumer_membership.py` drives it). Topics are named by
their names here; the request layer converts the protocol's topic ids at the edge.
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from kbus.server.coordinator import records
from kbus.server.coordinator.assignors import Assignment

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupError(Exception):
    """A request refused with a Kafka error code (and the message Kafka sends with it)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or str(code))
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A member speaking the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a consumer group, Kafka 4's
    online migration: its session timeout and its JoinGroup protocols (name, ConsumerProtocol subscription)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch


def _partitions(assignment: Mapping[str, frozenset[int]]) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def _by_topic(tps: set[tuple[str, int]]) -> Assignment:
    out: dict[str, set[int]] = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


def is_subset(owned: Mapping[str, frozenset[int]] | None, assigned: Mapping[str, frozenset[int]]) -> bool:
    if owned is None:
        return False
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def validate_member_epoch(
    member: ConsumerGroupMember, received: int, owned: Mapping[str, frozenset[int]] | None
) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: ahead or behind is fenced, except the previous epoch with
    a subset of the current assignment (the response bumping the epoch may have been lost)."""
    if received > member.member_epoch:
        raise GroupError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({received}) than the one known by the group "
            f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not is_subset(owned, member.assigned)
    ):
        raise GroupError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a smaller member epoch ({received}) than the one known by the group "
            f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Mapping[str, frozenset[int]],
    subscribed: set[str],
    owner_of: Callable[[str, int], str | None],
    owned: Mapping[str, frozenset[int]] | None,
) -> ConsumerGroupMember:
    """Kafka's CurrentAssignmentBuilder: move the member towards its target assignment. Partitions it must give up
    are revoked first (it stays at its epoch until its heartbeat no longer lists them); a partition it gains is
    handed over only once no other member owns it (assigned or pending revocation)."""
    if member.is_reconciled_to(target_epoch):
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS and _owns_any(owned, member.pending_revocation):
        return member
    current = _partitions(member.assigned)
    wanted = {tp for tp in _partitions(target) if tp[0] in subscribed}
    keep = current & wanted
    revoke = current - keep
    own_pending = _partitions(member.pending_revocation)
    pending_assignment = set()
    unreleased = False
    for tp in wanted - keep:
        owner = owner_of(*tp)
        if owner is not None and owner != member.member_id and tp not in own_pending:
            unreleased = True
        else:
            pending_assignment.add(tp)
    if revoke and _owns_any(owned, _by_topic(revoke)):
        return replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            previous_member_epoch=member.member_epoch,
            assigned=_by_topic(keep),
            pending_revocation=_by_topic(revoke),
        )
    new_assigned = keep | pending_assignment
    return replace(
        member,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        previous_member_epoch=member.member_epoch,
        member_epoch=target_epoch,
        assigned=_by_topic(new_assigned),
        pending_revocation={},
    )


def _owns_any(owned: Mapping[str, frozenset[int]] | None, revoking: Mapping[str, frozenset[int]]) -> bool:
    # no owned partitions in the request (a partial heartbeat) means "unchanged": assume it still owns them
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in revoking.items())


def validate_offset_commit(
    group: ConsumerGroup, member_id: str, member_epoch: int, *, transactional: bool, api_version: int
) -> int | None:
    """Kafka's ConsumerGroup.validateOffsetCommit: None when the commit may go ahead, else the error."""
    if member_epoch < 0 and not group.members:
        return None  # the admin client or a consumer outside group management, on an empty group
    if transactional and member_epoch < 0 and not member_id:
        return None  # a producer that does not send the group's metadata (before KIP-447)
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    if not transactional and api_version < 9 and member.classic is None:
        return ErrorCode.unsupported_version  # members of the consumer protocol commit with OffsetCommit v9+
    if member_epoch != member.member_epoch:
        # TxnOffsetCommit has no STALE_MEMBER_EPOCH, nor has a classic member (its generation is its member
        # epoch): Kafka answers ILLEGAL_GENERATION there
        if transactional or member.classic is not None:
            return ErrorCode.illegal_generation
        return ErrorCode.stale_member_epoch
    return None


def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> int | None:
    """OffsetFetch v9+ from a member of a consumer group (Kafka's ConsumerGroup.validateOffsetFetch)."""
    if member_epoch < 0 and member_id is None:
        return None
    member = group.members.get(member_id or "")
    if member is None:
        return ErrorCode.unknown_member_id
    if member_epoch != member.member_epoch:
        return ErrorCode.stale_member_epoch
    return None


def _from_re2(pattern: str) -> str:
    """RE2 syntax Python's `re` spells otherwise: `\\Q...\\E` quotes a literal (the Java client's
    `Pattern.quote`), `\\z` is the end of the text (`re`'s `\\Z`)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "Q":
                end = pattern.find("\\E", i + 2)
                literal = pattern[i + 2 :] if end < 0 else pattern[i + 2 : end]
                out.append(re.escape(literal))
                i = n if end < 0 else end + 2
                continue
            out.append("\\Z" if nxt == "z" else pattern[i : i + 2])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def compile_regex(pattern: str) -> re.Pattern[str]:
    """Kafka compiles SubscribedTopicRegex with RE2/J; Python's `re` agrees on ordinary patterns (literals, classes,
    `.*`, alternation, anchors), and RE2's `\\Q...\\E` and `\\z` are translated; they differ on syntax only one
    has (RE2's `\\pN` classes; `re`'s lookarounds and backreferences, which RE2 refuses). Raises GroupError
    INVALID_REGULAR_EXPRESSION (128) for a pattern `re` cannot compile."""
    try:
        return re.compile(_from_re2(pattern))
    except re.error as exc:
        raise GroupError(
            ErrorCode.invalid_regular_expression,
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {exc}.",
        ) from exc


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    partition: int = 0
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # (topic, partition) -> the member that owns it (assigned or pending revocation)
    owners: dict[tuple[str, int], str] = field(default_factory=dict)
    # topic -> partition count, for the topics the members subscribe to (a change bumps the group epoch)
    subscription_metadata: dict[str, int] = field(default_factory=dict)
    metadata_version: int = -1
    dead: bool = False

    # ---- members
    def update_member(self, member: ConsumerGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for tp in _partitions(member.assigned) | _partitions(member.pending_revocation):
            self.owners[tp] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def _release(self, member: ConsumerGroupMember) -> None:
        for tp in _partitions(member.assigned) | _partitions(member.pending_revocation):
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]

    def owner_of(self, topic: str, partition: int) -> str | None:
        return self.owners.get((topic, partition))

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    # ---- subscriptions
    def subscribed_topics(self, member: ConsumerGroupMember, topics: Mapping[str, int], internal: set[str]) -> set[str]:
        names = {t for t in member.subscribed_topic_names if t in topics}
        if member.subscribed_topic_regex:
            pattern = compile_regex(member.subscribed_topic_regex)
            # Internal topics are never matched (the Java consumer's exclude.internal.topics default).
            names.update(t for t in topics if t not in internal and pattern.fullmatch(t))
        return names

    def preferred_assignor(self, default: str) -> str:
        """Kafka's preferredServerAssignor: the assignor most members ask for, else the broker's default."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return default
        return max(sorted(votes), key=lambda name: votes[name])

    # ---- state
    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE


@dataclass(frozen=True, slots=True)
class TopicImage:
    """The cluster's topics as the consumer groups see them: names, ids and partition counts; `version` changes
    with every metadata change so a group re-resolves its subscriptions only then."""

    version: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)
    ids: Mapping[str, uuid.UUID] = field(default_factory=dict)
    names_by_id: Mapping[uuid.UUID, str] = field(default_factory=dict)
    internal: frozenset[str] = frozenset()


# ---------------------------------------------------------------- Kafka 4's records in __consumer_offsets

_STATE_CODES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATES_BY_CODE = {v: k for k, v in _STATE_CODES.items()}


def to_topic_ids(image: TopicImage, assignment: Mapping[str, frozenset[int]]) -> list[tuple[uuid.UUID, list[int]]]:
    """An assignment by topic id, as the records carry it (a topic no longer in the image is left out)."""
    return [(image.ids[t], sorted(ps)) for t, ps in sorted(assignment.items()) if t in image.ids and ps]


def from_topic_ids(image: TopicImage, tps: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> Assignment:
    out: dict[str, frozenset[int]] = {}
    for topic_id, partitions in tps:
        name = image.names_by_id.get(topic_id)
        if name is not None:  # a deleted topic's partitions are gone
            out[name] = out.get(name, frozenset()) | frozenset(partitions)
    return out


def member_records(image: TopicImage, group_id: str, member: ConsumerGroupMember, *, metadata: bool = True,
                   current: bool = True) -> list[tuple[bytes, bytes | None]]:
    out: list[tuple[bytes, bytes | None]] = []
    if metadata:
        value = records.ConsumerMemberMetadataValue(
            member.instance_id, member.rack_id, member.client_id, member.client_host,
            member.subscribed_topic_names, member.subscribed_topic_regex, member.rebalance_timeout_ms,
            member.server_assignor,
            None if member.classic is None else member.classic.session_timeout_ms,
            () if member.classic is None else member.classic.protocols,
        )
        out.append((records.consumer_group_key(records.CG_MEMBER_METADATA, group_id, member.member_id),
                    records.consumer_member_metadata_value(value)))
    if current:
        value2 = records.ConsumerCurrentAssignmentValue(
            member.member_epoch, member.previous_member_epoch, _STATE_CODES[member.state],
            tuple((i, tuple(ps)) for i, ps in to_topic_ids(image, member.assigned)),
            tuple((i, tuple(ps)) for i, ps in to_topic_ids(image, member.pending_revocation)),
        )
        out.append((records.consumer_group_key(records.CG_CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id),
                    records.consumer_current_assignment_value(value2)))
    return out


def target_record(image: TopicImage, group_id: str, member_id: str,
                  target: Mapping[str, frozenset[int]]) -> tuple[bytes, bytes | None]:
    return (records.consumer_group_key(records.CG_TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
            records.consumer_target_assignment_value(to_topic_ids(image, target)))


def epoch_record(kind: int, group_id: str, epoch: int) -> tuple[bytes, bytes | None]:
    """The group epoch (CG_METADATA) or the target assignment's (CG_TARGET_ASSIGNMENT_METADATA)."""
    return records.consumer_group_key(kind, group_id), records.consumer_group_epoch_value(epoch)


def member_tombstones(group_id: str, member_id: str) -> list[tuple[bytes, bytes | None]]:
    """Kafka's order: the current assignment, the target assignment, then the member."""
    return [(records.consumer_group_key(kind, group_id, member_id), None) for kind in (
        records.CG_CURRENT_MEMBER_ASSIGNMENT, records.CG_TARGET_ASSIGNMENT_MEMBER, records.CG_MEMBER_METADATA)]


def group_tombstones(group_id: str) -> list[tuple[bytes, bytes | None]]:
    return [(records.consumer_group_key(kind, group_id), None) for kind in (
        records.CG_TARGET_ASSIGNMENT_METADATA, records.CG_PARTITION_METADATA, records.CG_METADATA)]


class ConsumerGroupReplay:
    """Consumer groups rebuilt from their records as a partition of __consumer_offsets is loaded (off the event
    loop): the last value of each key wins, a tombstone removes it."""

    def __init__(self, image: TopicImage) -> None:
        self.image = image
        self.epochs: dict[str, int] = {}
        self.assignment_epochs: dict[str, int] = {}
        self.metadata: dict[str, dict[str, records.ConsumerMemberMetadataValue]] = {}
        self.targets: dict[str, dict[str, Assignment]] = {}
        self.current: dict[str, dict[str, records.ConsumerCurrentAssignmentValue]] = {}

    def replay(self, key: records.ConsumerGroupKey, value: bytes | None) -> None:
        g, mid = key.group, key.member_id or ""
        if key.kind == records.CG_METADATA:
            if value is None:
                self.epochs.pop(g, None)
            else:
                self.epochs[g] = records.decode_consumer_epoch_value(value)
        elif key.kind == records.CG_TARGET_ASSIGNMENT_METADATA:
            if value is None:
                self.assignment_epochs.pop(g, None)
            else:
                self.assignment_epochs[g] = records.decode_consumer_epoch_value(value)
        elif key.kind == records.CG_MEMBER_METADATA:
            if value is None:
                self.metadata.get(g, {}).pop(mid, None)
            else:
                self.metadata.setdefault(g, {})[mid] = records.decode_consumer_member_metadata_value(value)
        elif key.kind == records.CG_TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.targets.get(g, {}).pop(mid, None)
            else:
                tps = records.decode_consumer_target_assignment_value(value)
                self.targets.setdefault(g, {})[mid] = from_topic_ids(self.image, tps)
        elif key.kind == records.CG_CURRENT_MEMBER_ASSIGNMENT:
            if value is None:
                self.current.get(g, {}).pop(mid, None)
            else:
                self.current.setdefault(g, {})[mid] = records.decode_consumer_current_assignment_value(value)
        # CG_PARTITION_METADATA: recomputed from the cluster's topics on load

    def groups(self, partition: int) -> list[ConsumerGroup]:
        out = []
        for group_id, epoch in self.epochs.items():
            group = ConsumerGroup(group_id, partition, group_epoch=epoch,
                                  assignment_epoch=self.assignment_epochs.get(group_id, 0))
            current = self.current.get(group_id, {})
            for member_id, meta in self.metadata.get(group_id, {}).items():
                cur = current.get(member_id)
                member = ConsumerGroupMember(
                    member_id, meta.instance_id, meta.rack_id, meta.client_id, meta.client_host,
                    meta.rebalance_timeout_ms, meta.subscribed_topic_names, meta.subscribed_topic_regex,
                    meta.server_assignor,
                    classic=None if meta.classic_session_timeout_ms is None else ClassicMemberMetadata(
                        meta.classic_session_timeout_ms, meta.classic_protocols),
                )
                if cur is not None:
                    member = replace(
                        member, member_epoch=cur.member_epoch, previous_member_epoch=cur.previous_member_epoch,
                        state=_STATES_BY_CODE.get(cur.state, MemberState.STABLE),
                        assigned=from_topic_ids(self.image, cur.assigned),
                        pending_revocation=from_topic_ids(self.image, cur.pending_revocation),
                    )
                group.update_member(member)
            group.target = {m: a for m, a in self.targets.get(group_id, {}).items() if m in group.members}
            out.append(group)
        return out

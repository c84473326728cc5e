"""The classic-protocol group coordinator (Kafka's GroupCoordinator + GroupMetadataManager).

Owns the groups whose `__consumer_offsets` partition this broker leads. Requests that must wait (JoinGroup until
the rebalance completes, SyncGroup until the leader's assignment is stored) await futures the state machine
resolves; deadlines (session timeouts, rebalance timeouts, the initial rebalance delay, pending syncs, offset
retention) live in a `Timers` wheel on an injected clock, so every transition is testable without sockets or
sleeps. Persistence goes through `OffsetsLog` (one append per state change, Kafka's record formats).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode as E

from kbus.common.topics import OFFSETS_TOPIC
from kbus.protocol.control import COMMIT, parse_marker
from kbus.protocol.record_batch import (
    CorruptRecordError,
    InvalidRecordError,
    build_batch,
    decode_records,
    iter_complete_batches,
)
from kbus.server.coordinator.group import (
    Group,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from kbus.server.coordinator.records import (
    GroupKey,
    GroupMetadataRecord,
    OffsetAndMetadata,
    OffsetKey,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
    partition_for,
)
from kbus.server.coordinator.state_topic import StateLog, StateTopic
from kbus.server.coordinator.timers import TimerDriver, Timers

log = logging.getLogger("kbus.coordinator")

TopicPartition = tuple[str, int]
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
STATES_BY_LOWER = {s.value.lower(): s for s in GroupState}


# the coordinator's view of `__consumer_offsets`: append to / read back one partition
OffsetsLog = StateLog


@dataclass(frozen=True, slots=True)
class GroupConfig:
    offsets_topic_num_partitions: int = 50
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3_600_000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104857600


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


DEAD_GROUP = GroupSummary(GroupState.DEAD.value, "", "", ())
EMPTY_SUMMARY = GroupSummary("", "", "", ())

_GROUP_MANAGEMENT_APIS = {"join", "sync", "heartbeat", "leave", "offset_delete", "list"}


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        offsets_log: OffsetsLog,
        clock_ms: Callable[[], int],
        *,
        offsets_partitions: Callable[[], int | None] | None = None,
        partition_exists: Callable[[str, int], bool] | None = None,
        live_topics: Callable[[], set[str] | None] | None = None,
        leads_partition: Callable[[int], bool] | None = None,
    ) -> None:
        self.config = config
        self.log = offsets_log
        self._offsets_partitions = offsets_partitions
        self.clock = clock_ms
        self.timers = Timers()
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, object] = {}  # partition -> the token of the load in flight
        self.active = True
        self._partition_exists = partition_exists
        # The cluster's topic names, or None while the metadata cannot be trusted (e.g. not loaded yet).
        self._live_topics = live_topics
        self._leads_partition = leads_partition
        self._tasks: set[asyncio.Task[Any]] = set()
        self._cleanup_scheduled = False
        self.driver: TimerDriver | None = None  # runs `timers` on the event loop once started

    # ================================================================ ownership and loading

    def state_topic(self) -> StateTopic:
        """__consumer_offsets as Kafka creates it on first use."""
        return StateTopic(
            OFFSETS_TOPIC,
            self.config.offsets_topic_num_partitions,
            self.config.offsets_topic_replication_factor,
            {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(self.config.offsets_topic_segment_bytes),
            },
        )

    def partition_for(self, group_id: str) -> int:
        count = self._offsets_partitions() if self._offsets_partitions is not None else None
        return partition_for(group_id, count or self.config.offsets_topic_num_partitions)

    def on_election(self, partition: int) -> None:
        """This broker now leads `partition` of __consumer_offsets: load its groups and offsets."""
        if partition in self.owned or partition in self.loading:
            return
        token = object()  # this election's load; a resign + re-elect starts another whose result must win
        self.loading[partition] = token
        self.run_in_background(self._load(partition, token))
        self._schedule_cleanup()

    def on_resignation(self, partition: int) -> None:
        self.owned.discard(partition)
        self.loading.pop(partition, None)
        for group in [g for g in self.groups.values() if g.partition == partition]:
            self._unload(group)

    async def _load(self, partition: int, token: object) -> None:
        try:
            chunks = await self.log.read(partition)
            # decoding every record is CPU work proportional to the partition: keep it off the event loop
            groups = await asyncio.to_thread(self._replay, partition, chunks)
        except Exception:
            log.exception("Loading __consumer_offsets-%d failed", partition)
            if self.loading.get(partition) is token:
                del self.loading[partition]
            return
        if self.loading.get(partition) is not token:  # resigned (and maybe re-elected) while loading
            return
        for group in groups:
            self.groups[group.group_id] = group
            for member in group.members.values():
                self._schedule_heartbeat(group, member)
        del self.loading[partition]
        self.owned.add(partition)
        log.info("Loaded %d group(s) from __consumer_offsets-%d", len(groups), partition)

    def _replay(self, partition: int, chunks: Iterable[bytes]) -> list[Group]:
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        metadata: dict[str, GroupMetadataRecord | None] = {}
        # TxnOffsetCommit records wait for their transaction's marker: producer id -> group -> offsets
        pending_txn: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata | None]]] = {}
        for chunk in chunks:
            for header in iter_complete_batches(chunk):
                if header.is_control:
                    marker = parse_marker(memoryview(chunk)[header.position : header.position + header.size])
                    decided = pending_txn.pop(header.producer_id, {})
                    if marker is not None and marker.control_type == COMMIT:
                        for gid, txn_offsets in decided.items():
                            target = offsets.setdefault(gid, {})
                            for tp, om in txn_offsets.items():
                                if om is None:
                                    target.pop(tp, None)
                                else:
                                    target[tp] = om
                    continue
                txn_target = pending_txn.setdefault(header.producer_id, {}) if header.is_transactional else None
                try:
                    records = decode_records(chunk, header)
                except (CorruptRecordError, InvalidRecordError, ValueError) as exc:
                    log.warning("Skipping undecodable batch at offset %d: %s", header.base_offset, exc)
                    continue
                for rec in records:
                    if rec.key is None:
                        continue
                    try:
                        key = decode_key(rec.key)
                        if isinstance(key, OffsetKey):
                            tp = (key.topic, key.partition)
                            if txn_target is not None:
                                txn_target.setdefault(key.group, {})[tp] = (
                                    None if rec.value is None else decode_offset_value(rec.value))
                            elif rec.value is None:
                                offsets.get(key.group, {}).pop(tp, None)
                            else:
                                offsets.setdefault(key.group, {})[tp] = decode_offset_value(rec.value)
                        elif isinstance(key, GroupKey):
                            metadata[key.group] = None if rec.value is None else decode_group_value(rec.value)
                    except (RecordFormatError, UnicodeDecodeError, struct.error, ValueError) as exc:
                        log.warning("Skipping undecodable record at offset %d: %s", rec.offset, exc)
        open_txn_groups = {gid for by_group in pending_txn.values() for gid in by_group}
        out = []
        for group_id in set(offsets) | set(metadata) | open_txn_groups:
            stored = metadata.get(group_id)
            group_offsets = offsets.get(group_id, {})
            if stored is None and not group_offsets and group_id not in open_txn_groups:
                continue
            group = Group.from_record(group_id, partition, stored) if stored is not None else Group(group_id, partition)
            group.offsets.update(group_offsets)
            for pid, by_group in pending_txn.items():
                if group_id in by_group:
                    group.pending_txn_offsets[pid] = {tp: om for tp, om in by_group[group_id].items()
                                                      if om is not None}
            out.append(group)
        return out

    def _unload(self, group: Group) -> None:
        group.state = GroupState.DEAD
        for member in group.members.values():
            # any JoinGroup still waiting (a rebalance, or a static member's re-join being stored) gets an answer
            member.complete_join(JoinResult(E.not_coordinator, member.member_id))
            member.complete_sync(SyncResult(E.not_coordinator))
        self.timers.cancel_where(lambda k: isinstance(k, tuple) and len(k) > 1 and k[1] == group.group_id)
        self.groups.pop(group.group_id, None)

    def _live(self, group: Group) -> bool:
        return self.groups.get(group.group_id) is group and not group.is_(GroupState.DEAD)

    def validate_group_status(self, group_id: str | None, api: str) -> int | None:
        if group_id is None or (api in _GROUP_MANAGEMENT_APIS and not group_id):
            return E.invalid_group_id
        if not self.active:
            return E.coordinator_not_available
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return E.coordinator_load_in_progress
        if partition not in self.owned:
            # Leadership may have arrived before our listener heard of it (a freshly created offsets topic).
            if self._leads_partition is not None and self._leads_partition(partition):
                self.on_election(partition)
                return E.coordinator_load_in_progress if partition in self.loading else None
            return E.not_coordinator
        return None

    def is_loading(self) -> bool:
        return bool(self.loading)

    # ================================================================ JoinGroup

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        *,
        require_known_member_id: bool,
        supports_skip_assignment: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[JoinResult] = loop.create_future()

        def respond(result: JoinResult) -> None:
            if not fut.done():
                fut.set_result(result)

        error = self.validate_group_status(group_id, "join")
        if error is not None:
            return JoinResult(error, member_id)
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return JoinResult(E.invalid_session_timeout, member_id)
        if rebalance_timeout_ms < 0:  # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout
            rebalance_timeout_ms = session_timeout_ms
        is_unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                return JoinResult(E.unknown_member_id, member_id)
            group = Group(group_id, self.partition_for(group_id), current_state_timestamp=self.clock())
            self.groups[group_id] = group
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            return JoinResult(E.group_max_size_reached, "")
        args = (client_id, client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)
        if is_unknown:
            self._do_new_member_join(
                group, group_instance_id, require_known_member_id, supports_skip_assignment, args, fut, respond
            )
        else:
            self._do_current_member_join(group, member_id, group_instance_id, args, fut, respond)
        self._check_join(group)
        return await fut

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or (
                group.num_awaiting_join() < self.config.max_size
            )
        return group.has(member_id) or group.size < self.config.max_size

    def _do_new_member_join(
        self,
        group: Group,
        instance_id: str | None,
        require_known: bool,
        skip_ok: bool,
        args: tuple[Any, ...],
        fut: asyncio.Future[JoinResult],
        respond: Callable[[JoinResult], None],
    ) -> None:
        client_id, _host, rebalance_ms, session_ms, protocol_type, protocols = args
        if group.is_(GroupState.DEAD):
            return respond(JoinResult(E.coordinator_not_available, ""))
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return respond(JoinResult(E.inconsistent_group_protocol, ""))
        new_member_id = f"{instance_id or client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_member_id = group.static_member_id(instance_id)
            if old_member_id is not None:
                return self._update_static_member_and_rebalance(
                    group,
                    old_member_id,
                    new_member_id,
                    instance_id,
                    protocols,
                    rebalance_ms,
                    session_ms,
                    fut,
                    skip_ok,
                )
            return self._add_member_and_rebalance(group, new_member_id, instance_id, args, fut)
        if require_known:
            group.pending_members.add(new_member_id)
            self.timers.schedule(
                ("pending", group.group_id, new_member_id),
                self.clock() + session_ms,
                lambda: self._on_expire_pending(group, new_member_id),
            )
            return respond(JoinResult(E.member_id_required, new_member_id))
        return self._add_member_and_rebalance(group, new_member_id, None, args, fut)

    def _validate_current_member(self, group: Group, member_id: str, instance_id: str | None) -> int | None:
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return E.unknown_member_id
            if current != member_id:
                return E.fenced_instance_id
            return None
        return None if group.has(member_id) else E.unknown_member_id

    def _do_current_member_join(
        self,
        group: Group,
        member_id: str,
        instance_id: str | None,
        args: tuple[Any, ...],
        fut: asyncio.Future[JoinResult],
        respond: Callable[[JoinResult], None],
    ) -> None:
        _client_id, _host, rebalance_ms, session_ms, protocol_type, protocols = args
        if group.is_(GroupState.DEAD):
            return respond(JoinResult(E.coordinator_not_available, member_id))
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return respond(JoinResult(E.inconsistent_group_protocol, member_id))
        if member_id in group.pending_members:
            self.timers.cancel(("pending", group.group_id, member_id))
            return self._add_member_and_rebalance(group, member_id, None, args, fut)
        error = self._validate_current_member(group, member_id, instance_id)
        if error is not None:
            return respond(JoinResult(error, member_id))
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, protocols, rebalance_ms, session_ms, fut)
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # Same metadata: the member probably lost the JoinGroup response; answer with this generation.
                return respond(self._join_result(group, member, include_members=group.is_leader(member_id)))
            return self._update_member_and_rebalance(group, member, protocols, rebalance_ms, session_ms, fut)
        if state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader re-joining forces a rebalance (it may have seen metadata changes the members can't).
                return self._update_member_and_rebalance(group, member, protocols, rebalance_ms, session_ms, fut)
            return respond(self._join_result(group, member, include_members=False))
        return respond(JoinResult(E.unknown_member_id, member_id))

    def _join_result(
        self,
        group: Group,
        member: Member,
        *,
        include_members: bool,
        skip_assignment: bool = False,
        leader_id: str | None = None,
    ) -> JoinResult:
        return JoinResult(
            E.none,
            member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=(group.leader_id or "") if leader_id is None else leader_id,
            skip_assignment=skip_assignment,
            members=group.current_member_metadata() if include_members else (),
        )

    def _add_member_and_rebalance(
        self,
        group: Group,
        member_id: str,
        instance_id: str | None,
        args: tuple[Any, ...],
        fut: asyncio.Future[JoinResult],
    ) -> None:
        client_id, client_host, rebalance_ms, session_ms, protocol_type, protocols = args
        member = Member(
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance_ms,
            session_ms,
            protocol_type,
            list(protocols),
            is_new=True,
        )
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, fut)
        # A new member has no id to heartbeat with while its JoinGroup is parked; bound it generously instead.
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(
        self,
        group: Group,
        member: Member,
        protocols: list[tuple[str, bytes]],
        rebalance_ms: int,
        session_ms: int,
        fut: asyncio.Future[JoinResult],
    ) -> None:
        group.update_member(member, list(protocols), rebalance_ms, session_ms, fut)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} re-joined")

    def _update_static_member_and_rebalance(
        self,
        group: Group,
        old_member_id: str,
        new_member_id: str,
        instance_id: str,
        protocols: list[tuple[str, bytes]],
        rebalance_ms: int,
        session_ms: int,
        fut: asyncio.Future[JoinResult],
        skip_ok: bool,
    ) -> None:
        current_leader = group.leader_id or ""
        member = group.replace_static_member(
            instance_id,
            old_member_id,
            new_member_id,
            JoinResult(E.fenced_instance_id, old_member_id),
            SyncResult(E.fenced_instance_id),
        )
        self.timers.cancel(("hb", group.group_id, old_member_id))
        self._schedule_heartbeat(group, member)
        old = (list(member.protocols), member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, list(protocols), rebalance_ms, session_ms, fut)
        if group.is_(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                # The known instance came back with a compatible subscription: no rebalance, just persist the
                # new member id and hand back the current generation.
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                self.run_in_background(
                    self._finish_static_rejoin(
                        group,
                        member,
                        old_member_id,
                        new_member_id,
                        instance_id,
                        old,
                        assignment,
                        current_leader,
                        skip_ok,
                    )
                )
            else:
                self._maybe_prepare_rebalance(group, f"static member {instance_id} changed protocols")
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            # The leader may already hold the old member id; only a new generation can assign the new one.
            self._prepare_rebalance(group, f"static member {instance_id} re-joined during CompletingRebalance")

    async def _finish_static_rejoin(
        self,
        group: Group,
        member: Member,
        old_member_id: str,
        new_member_id: str,
        instance_id: str,
        old: tuple[list[tuple[str, bytes]], int, int],
        assignment: dict[str, bytes],
        current_leader: str,
        skip_ok: bool,
    ) -> None:
        error = await self._store_group(group, assignment)
        if member.join_future is None:
            return
        if not self._live(group) or not group.has(member.member_id):
            fut, member.join_future = member.join_future, None
            if not fut.done():  # unloaded or removed meanwhile: never leave the member waiting
                fut.set_result(JoinResult(E.not_coordinator if not self._live(group) else E.unknown_member_id, ""))
            return
        if error != E.none:
            # The new member id could not be persisted: restore the old one and fail this join.
            fut, member.join_future = member.join_future, None
            if group.static_member_id(instance_id) == new_member_id:
                group.update_member(member, old[0], old[1], old[2], None)
                restored = group.replace_static_member(
                    instance_id, new_member_id, old_member_id, JoinResult(error, ""), SyncResult(error)
                )
                self.timers.cancel(("hb", group.group_id, new_member_id))
                self._schedule_heartbeat(group, restored)
            if not fut.done():
                fut.set_result(JoinResult(error, ""))
            return
        if skip_ok:
            # JoinGroup v9+ (KIP-814): tell a returning static leader it leads, but skip the assignor.
            is_leader = group.is_leader(new_member_id)
            member.complete_join(self._join_result(group, member, include_members=is_leader, skip_assignment=is_leader))
        else:
            # Older clients: report the old leader id so the returning leader does not run a pointless
            # assignment a Stable group would ignore.
            member.complete_join(self._join_result(group, member, include_members=False, leader_id=current_leader))

    # ---------------------------------------------------------------- rebalancing

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.rebalance_in_progress)
        self._remove_sync_expiration(group)
        now = self.clock()
        key = ("join", group.group_id)
        if group.is_(GroupState.EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.timers.schedule(key, now + delay, lambda: self._on_initial_join_expire(group, delay, remaining))
            group.join_kind = "initial"
        else:
            self.timers.schedule(key, now + group.rebalance_timeout_ms(), lambda: self._on_join_expire(group))
            group.join_kind = "normal"
        group.transition_to(GroupState.PREPARING_REBALANCE, now)
        log.info(
            "Preparing to rebalance group %s with old generation %d (__consumer_offsets-%d) (reason: %s)",
            group.group_id,
            group.generation_id,
            group.partition,
            reason,
        )
        self._check_join(group)

    def _check_join(self, group: Group) -> None:
        """DelayedJoin.tryComplete: the rebalance completes as soon as every known member has re-joined."""
        if (
            group.is_(GroupState.PREPARING_REBALANCE)
            and group.join_kind == "normal"
            and group.has_all_members_joined()
            and self._live(group)
        ):
            self.timers.cancel(("join", group.group_id))
            self._on_complete_join(group)

    def _on_initial_join_expire(self, group: Group, delay: int, remaining: int) -> None:
        if not self._live(group) or not group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining != 0:
            # Members keep arriving: wait another delay, bounded by the rebalance timeout.
            group.new_member_added = False
            next_delay = min(delay, remaining)
            next_remaining = max(remaining - delay, 0)
            self.timers.schedule(
                ("join", group.group_id),
                self.clock() + next_delay,
                lambda: self._on_initial_join_expire(group, next_delay, next_remaining),
            )
        else:
            self._on_complete_join(group)

    def _on_join_expire(self, group: Group) -> None:
        if self._live(group) and group.is_(GroupState.PREPARING_REBALANCE):
            self._on_complete_join(group)

    def _on_complete_join(self, group: Group) -> None:
        for member in [m for m in group.not_yet_rejoined_members() if not m.is_static]:
            log.info("Group %s removed dynamic member %s who did not re-join in time", group.group_id, member.member_id)
            member.complete_sync(SyncResult(E.unknown_member_id))
            group.remove(member.member_id)
            self.timers.cancel(("hb", group.group_id, member.member_id))
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody re-joined: keep waiting until session timeouts clear out the silent members.
            log.error("Group %s could not complete rebalance because no members rejoined", group.group_id)
            group.join_kind = "normal"
            self.timers.schedule(
                ("join", group.group_id),
                self.clock() + group.rebalance_timeout_ms(),
                lambda: self._on_join_expire(group),
            )
            return
        group.init_next_generation(self.clock())
        if group.is_(GroupState.EMPTY):
            log.info("Group %s with generation %d is now empty", group.group_id, group.generation_id)
            self.run_in_background(self._store_group(group, {}))
            return
        log.info(
            "Stabilized group %s generation %d (__consumer_offsets-%d) with %d members",
            group.group_id,
            group.generation_id,
            group.partition,
            group.size,
        )
        for member in list(group.members.values()):
            result = self._join_result(group, member, include_members=group.is_leader(member.member_id))
            member.complete_join(result)
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.timers.schedule(
            ("sync", group.group_id),
            self.clock() + group.rebalance_timeout_ms(),
            lambda: self._on_expire_pending_sync(group, generation),
        )

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync_members.clear()
        self.timers.cancel(("sync", group.group_id))

    def _on_expire_pending_sync(self, group: Group, generation: int) -> None:
        if not self._live(group) or generation != group.generation_id:
            return
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        pending = list(group.pending_sync_members)
        if not pending:
            return
        for member_id in pending:
            member = group.remove(member_id)
            if member is not None:
                member.complete_sync(SyncResult(E.unknown_member_id))
            self.timers.cancel(("hb", group.group_id, member_id))
        self._prepare_rebalance(group, f"removing {pending} on pending sync request expiration")

    def _reset_and_propagate_assignment_error(self, group: Group, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: int) -> None:
        ok = error == E.none
        for member in list(group.members.values()):
            result = SyncResult(
                error,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
                member.assignment,
            )
            if member.complete_sync(result):
                self._schedule_heartbeat(group, member)

    # ---------------------------------------------------------------- liveness

    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        member.heartbeat_satisfied = False
        member_id = member.member_id
        deadline = self.clock() + (member.session_timeout_ms if timeout_ms is None else timeout_ms)
        self.timers.schedule(
            ("hb", group.group_id, member_id), deadline, lambda: self._on_expire_heartbeat(group, member_id)
        )

    def _on_expire_heartbeat(self, group: Group, member_id: str) -> None:
        if not self._live(group):
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("Member %s in group %s has failed, removing it from the group", member_id, group.group_id)
        self._remove_member_and_update_group(group, member, "heartbeat expiration")

    def _on_expire_pending(self, group: Group, member_id: str) -> None:
        if self._live(group) and member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._check_join(group)

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        # A member removed with a parked JoinGroup gets UNKNOWN_MEMBER_ID so a live client re-joins from scratch.
        member.complete_join(JoinResult(E.unknown_member_id, ""))
        member.complete_sync(SyncResult(E.unknown_member_id))
        group.remove(member.member_id)
        self.timers.cancel(("hb", group.group_id, member.member_id))
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id} on {reason}")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join(group)

    # ================================================================ SyncGroup

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        error = self.validate_group_status(group_id, "sync")
        if error == E.coordinator_load_in_progress:
            # The rebalance state was lost: make the member re-join without rediscovering the coordinator.
            return SyncResult(E.rebalance_in_progress)
        if error is not None:
            return SyncResult(error)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(E.unknown_member_id)
        if group.is_(GroupState.DEAD):
            return SyncResult(E.coordinator_not_available)
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = E.illegal_generation
        if error is None and protocol_type is not None and group.protocol_type != protocol_type:
            error = E.inconsistent_group_protocol
        if error is None and protocol_name is not None and group.protocol_name != protocol_name:
            error = E.inconsistent_group_protocol
        if error is not None:
            return SyncResult(error)
        if group.is_(GroupState.EMPTY):
            return SyncResult(E.unknown_member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(E.rebalance_in_progress)
        member = group.get(member_id)
        if group.is_(GroupState.STABLE):
            group.pending_sync_members.discard(member_id)
            self._schedule_heartbeat(group, member)
            return SyncResult(E.none, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: park until the leader's assignment is stored.
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        if member.sync_future is not None:
            member.complete_sync(SyncResult(E.rebalance_in_progress))
        member.sync_future = fut
        group.pending_sync_members.discard(member_id)
        if group.is_leader(member_id):
            full = {m: assignments.get(m, b"") for m in group.members}
            self.run_in_background(self._store_leader_assignment(group, generation_id, full))
        return await fut

    async def _store_leader_assignment(self, group: Group, generation: int, assignment: dict[str, bytes]) -> None:
        error = await self._store_group(group, assignment)
        if not self._live(group) or not group.is_(GroupState.COMPLETING_REBALANCE):
            return
        if generation != group.generation_id:
            return
        if error != E.none:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, f"error {error} storing the group assignment")
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, E.none)
        group.transition_to(GroupState.STABLE, self.clock())
        if not group.pending_sync_members:
            self.timers.cancel(("sync", group.group_id))

    # ================================================================ Heartbeat / LeaveGroup

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        error = self.validate_group_status(group_id, "heartbeat")
        if error == E.coordinator_load_in_progress:
            return E.none
        if error is not None:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return E.unknown_member_id
        if group.is_(GroupState.DEAD):
            return E.coordinator_not_available
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return E.illegal_generation
        if group.is_(GroupState.EMPTY):
            return E.unknown_member_id
        self._schedule_heartbeat(group, group.get(member_id))
        if group.is_(GroupState.PREPARING_REBALANCE):
            return E.rebalance_in_progress
        return E.none

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """Returns (top-level error, one error per leaving member)."""
        error = self.validate_group_status(group_id, "leave")
        if error is not None:
            return error, []
        group = self.groups.get(group_id)
        if group is None:
            return E.none, [E.unknown_member_id for _ in members]
        if group.is_(GroupState.DEAD):
            return E.coordinator_not_available, []
        out: list[int] = []
        for member_id, instance_id in members:
            if member_id == "":
                current = group.static_member_id(instance_id)
                if current is None:
                    out.append(E.unknown_member_id)
                    continue
                self._remove_member_and_update_group(group, group.get(current), "LeaveGroup")
                out.append(E.none)
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.timers.cancel(("pending", group.group_id, member_id))
                self._check_join(group)
                out.append(E.none)
            else:
                err = self._validate_current_member(group, member_id, instance_id)
                if err is None:
                    self._remove_member_and_update_group(group, group.get(member_id), "LeaveGroup")
                    out.append(E.none)
                else:
                    out.append(err)
        return E.none, out

    # ================================================================ offsets

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, int]:
        error = self.validate_group_status(group_id, "commit")
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return dict.fromkeys(offsets, E.illegal_generation)
            # Not using Kafka's group management: a "simple" group that only stores offsets.
            group = Group(group_id, self.partition_for(group_id), current_state_timestamp=self.clock())
            self.groups[group_id] = group
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is None and group.is_(GroupState.COMPLETING_REBALANCE):
            error = E.rebalance_in_progress
        if error is not None:
            return dict.fromkeys(offsets, error)
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE) and group.has(member_id):
            self._schedule_heartbeat(group, group.get(member_id))
        return await self._store_offsets(group, offsets)

    def _validate_offset_commit(
        self, group: Group, generation_id: int, member_id: str, instance_id: str | None
    ) -> int | None:
        if group.is_(GroupState.DEAD):
            return E.coordinator_not_available
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return None
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            error = self._validate_current_member(group, member_id, instance_id)
            if error is None and generation_id != group.generation_id:
                error = E.illegal_generation
            return error
        if not group.is_(GroupState.EMPTY):
            return E.unknown_member_id
        return None

    async def _store_offsets(
        self, group: Group, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, int]:
        result: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if self._partition_exists is not None and not self._partition_exists(*tp):
                result[tp] = E.unknown_topic_or_partition
            elif len(om.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                result[tp] = E.offset_metadata_too_large
            else:
                valid[tp] = om
        if not valid:
            return result
        now = self.clock()
        records = [(offset_commit_key(group.group_id, t, p), offset_commit_value(om)) for (t, p), om in valid.items()]
        for tp in valid:
            group.pending_offset_commits[tp] += 1
        try:
            await self.log.append(group.partition, build_batch(records, timestamp_ms=now))
            error: int = E.none
        except Exception as exc:
            error = self._append_error(group.partition, exc, for_offsets=True)
        finally:
            for tp in valid:
                group.pending_offset_commits[tp] -= 1
                if group.pending_offset_commits[tp] <= 0:
                    del group.pending_offset_commits[tp]
        if error == E.none and self.groups.get(group.group_id) is group:
            group.offsets.update(valid)
        result.update(dict.fromkeys(valid, error))
        return result

    async def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: written to the offsets partition inside the producer's transaction; visible only
        once its COMMIT marker lands there (`complete_txn`)."""
        error = self.validate_group_status(group_id, "commit")
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.groups.get(group_id)
        if group is None:
            group = Group(group_id, self.partition_for(group_id), current_state_timestamp=self.clock())
            self.groups[group_id] = group
        elif generation_id >= 0 or member_id:
            # KIP-447: a producer fenced by a rebalance cannot commit for the group's new generation
            error = self._validate_current_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = E.illegal_generation
            if error is not None:
                return dict.fromkeys(offsets, error)
        result: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if self._partition_exists is not None and not self._partition_exists(*tp):
                result[tp] = E.unknown_topic_or_partition
            elif len(om.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                result[tp] = E.offset_metadata_too_large
            else:
                valid[tp] = om
        if not valid:
            return result
        records = [(offset_commit_key(group_id, t, p), offset_commit_value(om)) for (t, p), om in valid.items()]
        batch = build_batch(records, timestamp_ms=self.clock(), producer_id=producer_id,
                            producer_epoch=producer_epoch, is_transactional=True)
        try:
            await self.log.append(group.partition, batch)
            error = E.none
        except Exception as exc:
            error = self._append_error(group.partition, exc, for_offsets=True)
        if error == E.none and self.groups.get(group_id) is group:
            group.pending_txn_offsets.setdefault(producer_id, {}).update(valid)
        result.update(dict.fromkeys(valid, error))
        return result

    def complete_txn(self, partition: int, producer_id: int, committed: bool) -> None:
        """A transaction marker was written on __consumer_offsets-`partition` (Kafka's handleTxnCompletion)."""
        for group in self.groups.values():
            if group.partition == partition:
                group.complete_txn_offsets(producer_id, committed)

    def unstable_offsets(self, group_id: str, partitions: list[TopicPartition]) -> set[TopicPartition]:
        """Partitions with a transactional commit still undecided (OffsetFetch require_stable, KIP-447)."""
        group = self.groups.get(group_id)
        if group is None or not group.pending_txn_offsets:
            return set()
        return {tp for tp in partitions if group.has_pending_txn_offset(tp)}

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[int, dict[TopicPartition, OffsetAndMetadata | None]]:
        """(group error, committed offset or None per partition; every committed partition when None asked)."""
        error = self.validate_group_status(group_id, "fetch")
        if error is not None:
            return error, {}
        group = self.groups.get(group_id)
        committed = {} if group is None else group.offsets
        if partitions is None:
            return E.none, dict(committed)
        return E.none, {tp: committed.get(tp) for tp in partitions}

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        error = self.validate_group_status(group_id, "offset_delete")
        if error is not None:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return E.group_id_not_found, {}
        errors: dict[TopicPartition, int] = {}
        if group.is_(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == "consumer":
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            errors.update({tp: E.group_subscribed_to_topic for tp in partitions if tp not in eligible})
        else:
            return E.non_empty_group, {}
        if eligible:
            await self._cleanup_group_metadata([group], lambda g: list(eligible))
            errors.update(dict.fromkeys(eligible, E.none))
        return E.none, errors

    # ================================================================ admin views

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> tuple[int, list[GroupOverview]]:
        if not self.active:
            return E.coordinator_not_available, []
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and "classic" not in wanted_types:
            return (E.coordinator_load_in_progress if self.loading else E.none), []
        out = [
            GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if g.partition in self.owned and (not wanted_states or g.state.value.lower() in wanted_states)
        ]
        return (E.coordinator_load_in_progress if self.loading else E.none), out

    def describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        error = self.validate_group_status(group_id, "describe")
        if error is not None:
            return error, EMPTY_SUMMARY
        group = self.groups.get(group_id)
        if group is None:
            return E.none, DEAD_GROUP
        stable = group.is_(GroupState.STABLE)
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return E.none, GroupSummary(
            group.state.value, group.protocol_type or "", (group.protocol_name or "") if stable else "", members
        )

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        errors: dict[str, int] = {}
        eligible: list[Group] = []
        for group_id in group_ids:
            error = self.validate_group_status(group_id, "delete")
            if error is not None:
                errors[group_id] = error
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_(GroupState.DEAD):
                errors[group_id] = E.group_id_not_found
            elif group.is_(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, self.clock())
                eligible.append(group)
            else:
                errors[group_id] = E.non_empty_group
        if eligible:
            await self._cleanup_group_metadata(eligible, lambda g: list(g.offsets))
            errors.update({g.group_id: E.none for g in eligible})
        return errors

    # ================================================================ cleanup and persistence

    async def _cleanup_group_metadata(
        self, groups: list[Group], select: Callable[[Group], list[TopicPartition]]
    ) -> int:
        """Remove the selected offsets of each group and, when a group ends up Empty with no offsets (or Dead),
        the group itself; tombstones go to the log so compaction and reloads agree."""
        removed_total = 0
        now = self.clock()
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for group in groups:
            removed = group.remove_offsets(select(group))
            removed_total += len(removed)
            tombstones: list[tuple[bytes, bytes | None]] = [
                (offset_commit_key(group.group_id, t, p), None) for t, p in removed
            ]
            if group.is_(GroupState.EMPTY) and not group.has_offsets() and not group.pending_members:
                group.transition_to(GroupState.DEAD, now)
            if group.is_(GroupState.DEAD):
                if self.groups.get(group.group_id) is group:
                    del self.groups[group.group_id]
                self.timers.cancel_where(_keyed_by(group.group_id))
                tombstones.append((group_metadata_key(group.group_id), None))
            if tombstones:
                by_partition.setdefault(group.partition, []).extend(tombstones)
        for partition, records in by_partition.items():
            try:
                await self.log.append(partition, build_batch(records, timestamp_ms=now))
            except Exception as exc:
                log.warning(
                    "Failed to write %d tombstone(s) to __consumer_offsets-%d: %s", len(records), partition, exc
                )
        return removed_total

    async def _store_group(self, group: Group, assignment: dict[str, bytes]) -> int:
        record = group_metadata_value(group.to_record(assignment))
        batch = build_batch([(group_metadata_key(group.group_id), record)], timestamp_ms=self.clock())
        try:
            await self.log.append(group.partition, batch)
            return E.none
        except Exception as exc:
            return self._append_error(group.partition, exc, for_offsets=False)

    def _append_error(self, partition: int, exc: Exception, *, for_offsets: bool) -> int:
        if partition not in self.owned:
            return E.not_coordinator
        name = type(exc).__name__.lower()
        if for_offsets and ("toolarge" in name or "too_large" in name):
            return E.invalid_commit_offset_size
        log.warning("Append to __consumer_offsets-%d failed: %r", partition, exc)
        return E.coordinator_not_available

    async def expire_offsets(self) -> int:
        """offsets.retention.minutes, and offsets of topics that no longer exist (Kafka removes those when the
        topic is deleted; a periodic sweep also catches deletions made while this broker was not leading)."""
        now = self.clock()
        retention = self.config.offsets_retention_ms
        live = self._live_topics() if self._live_topics is not None else None

        def select(group: Group) -> list[TopicPartition]:
            gone = [] if live is None else [tp for tp in group.offsets if tp[0] not in live]
            return sorted(set(group.expired_offsets(now, retention)) | set(gone))

        groups = [g for g in self.groups.values() if g.partition in self.owned and not g.is_(GroupState.DEAD)]
        removed = await self._cleanup_group_metadata(groups, select)
        if removed:
            log.info("Removed %d expired offset(s)", removed)
        return removed

    async def on_topics_deleted(self, topics: Iterable[str]) -> int:
        gone = set(topics)
        groups = [g for g in self.groups.values() if g.partition in self.owned and not g.is_(GroupState.DEAD)]
        return await self._cleanup_group_metadata(groups, lambda g: [tp for tp in g.offsets if tp[0] in gone])

    def _schedule_cleanup(self) -> None:
        if self._cleanup_scheduled:
            return
        self._cleanup_scheduled = True
        interval = max(self.config.offsets_retention_check_interval_ms, 100)

        def fire() -> None:
            self._cleanup_scheduled = False
            self.run_in_background(self.expire_offsets())
            self._schedule_cleanup()

        self.timers.schedule(("cleanup",), self.clock() + interval, fire)

    # ================================================================ lifecycle

    def run_in_background(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("coordinator task failed", exc_info=task.exception())

    async def settle(self) -> None:
        """Wait for background appends/loads (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def shutdown(self) -> None:
        self.active = False
        if self.driver is not None:
            await self.driver.stop()
        await self.settle()
        for group in list(self.groups.values()):
            self._unload(group)
        self.owned.clear()
        self.loading.clear()


def _keyed_by(group_id: str) -> Callable[[Hashable], bool]:
    """Matches the timer keys of one group: (kind, group_id, ...)."""
    return lambda key: isinstance(key, tuple) and key[1:2] == (group_id,)

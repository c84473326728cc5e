"""The state the group coordinator keeps in `__consumer_offsets` (Kafka's GroupMetadataManager): the groups of
the partitions this broker leads, loaded when it becomes their leader and dropped when it resigns (through the
shared `StatePartitions`), decoded from and written as Kafka's record formats, plus what both halves of the
coordinator use: request validation against ownership, member identity checks, heartbeat deadlines, group and
tombstone writes, background tasks. Membership (`membership.py`) and offsets (`offsets.py`) build on it.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

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
from kbus.server.coordinator.commit_path import CommitPath, validate_current_member
from kbus.server.coordinator.consumer_group import ConsumerGroup, ConsumerGroupReplay, TopicImage
from kbus.server.coordinator.group import Group, GroupState, JoinResult, Member, SyncResult
from kbus.server.coordinator.records import (
    ConsumerGroupKey,
    GroupKey,
    GroupMetadataRecord,
    OffsetAndMetadata,
    OffsetKey,
    RecordFormatError,
    ShareGroupKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
)
from kbus.server.coordinator.share_group import ShareGroup, ShareGroupReplay
from kbus.server.coordinator.state_topic import (
    BackgroundTasks,
    StateCoordinator,
    StateLog,
    StatePartitions,
    StateTopic,
)
from kbus.server.coordinator.timers import TimerDriver, Timers

log = logging.getLogger("kbus.coordinator")

TopicPartition = tuple[str, int]
# the coordinator's view of `__consumer_offsets`: append to / read back one partition
OffsetsLog = StateLog
_GROUP_MANAGEMENT_APIS = {"join", "sync", "heartbeat", "leave", "offset_delete", "list"}


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
    # the consumer group protocol (KIP-848)
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # group.consumer.migration.policy: disabled, upgrade, downgrade or bidirectional (Kafka's default)
    consumer_migration_policy: str = "bidirectional"
    # share groups (KIP-932)
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    share_max_size: int = 200
    share_max_groups: int = 10


class GroupStore(StateCoordinator[tuple[list[Group], list[ConsumerGroup], list[ShareGroup]]]):
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
        self.clock = clock_ms
        self.timers = Timers()
        self.groups: dict[str, Group] = {}
        # consumer-protocol groups (KIP-848), in memory only; their committed offsets live in `groups` (an Empty
        # classic group of the same id holds them, as a simple group's)
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        # share groups (KIP-932): their records are in __consumer_offsets, their partitions' state elsewhere
        self.share_groups: dict[str, ShareGroup] = {}
        self.topic_image = TopicImage()
        # which __consumer_offsets partitions are loaded here (or loading): decoding runs off the event loop
        self.partitions = StatePartitions(
            OFFSETS_TOPIC, offsets_log, self._replay, self._install, self._uninstall, self.run_in_background
        )
        self.active = True
        self._partition_exists = partition_exists
        # The cluster's topic names, or None while the metadata cannot be trusted (e.g. not loaded yet).
        self._live_topics = live_topics
        self._tasks = BackgroundTasks("group coordinator")
        self._cleanup_scheduled = False
        self.driver: TimerDriver | None = None  # runs `timers` on the event loop once started
        # OffsetCommit's path, the group's partition and status, the heartbeat deadlines: compiled (a plain class:
        # the mixins cannot be)
        self.commit_path = CommitPath(self, self.groups, self.consumer_groups, self.timers, clock_ms, offsets_log,
                                      partition_exists, config, self.partitions, offsets_partitions,
                                      leads_partition)  # fmt: skip

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
        return self.commit_path.partition_for(group_id)  # compiled

    def on_election(self, partition: int) -> None:
        """This broker now leads `partition` of __consumer_offsets: load its groups and offsets."""
        if self.partitions.elect(partition):
            self._schedule_cleanup()

    def _install(self, partition: int, loaded: tuple[list[Group], list[ConsumerGroup], list[ShareGroup]]) -> None:
        groups, consumer_groups, share_groups = loaded
        for group in groups:
            self.groups[group.group_id] = group
            for member in group.members.values():
                self._schedule_heartbeat(group, member)
        self._install_consumer_groups(consumer_groups)
        self._install_share_groups(share_groups)
        log.info("Loaded %d group(s) from __consumer_offsets-%d",
                 len(groups) + len(consumer_groups) + len(share_groups), partition)

    def _install_consumer_groups(self, groups: list[ConsumerGroup]) -> None:
        """Consumer-protocol groups loaded from the log (their members' sessions start now)."""
        raise NotImplementedError

    async def delete_share_group(self, group_id: str) -> int:
        """DeleteGroups of a share group (share_membership.py)."""
        raise NotImplementedError

    def _install_share_groups(self, groups: list[ShareGroup]) -> None:
        """Share groups loaded from the log (their members' sessions start now)."""
        raise NotImplementedError

    def _uninstall(self, partition: int) -> None:
        for group in [g for g in self.groups.values() if g.partition == partition]:
            self._unload(group)
        for cgroup in [g for g in self.consumer_groups.values() if g.partition == partition]:
            cgroup.dead = True
            self.timers.cancel_where(_keyed_by(("consumer", cgroup.group_id)))
            del self.consumer_groups[cgroup.group_id]
        for sgroup in [g for g in self.share_groups.values() if g.partition == partition]:
            sgroup.dead = True
            self.timers.cancel_where(_keyed_by(("share", sgroup.group_id)))
            del self.share_groups[sgroup.group_id]

    def _replay(
        self, partition: int, chunks: list[bytes]
    ) -> tuple[list[Group], list[ConsumerGroup], list[ShareGroup]]:
        consumer = ConsumerGroupReplay(self.topic_image)
        share = ShareGroupReplay(self.topic_image)
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
                        elif isinstance(key, ConsumerGroupKey):
                            consumer.replay(key, rec.value)
                        elif isinstance(key, ShareGroupKey):
                            share.replay(key, rec.value)
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
        return out, consumer.groups(partition), share.groups(partition)

    def _unload(self, group: Group) -> None:
        group.state = GroupState.DEAD
        for member in group.members.values():
            # any JoinGroup still waiting (a rebalance, or a static member's re-join being stored) gets an answer
            member.complete_join(JoinResult(E.not_coordinator, member.member_id))
            member.complete_sync(SyncResult(E.not_coordinator))
            # its session timer holds the group (group -> member -> timer -> group): dropped with the timer entries
            # below, so the unloaded group and its members go with their last reference, not at a cyclic GC
            member.heartbeat_timer = None
        self.timers.cancel_where(lambda k: isinstance(k, tuple) and len(k) > 1 and k[1] == group.group_id)
        self.groups.pop(group.group_id, None)

    def _live(self, group: Group) -> bool:
        return self.groups.get(group.group_id) is group and not group.is_(GroupState.DEAD)

    def validate_group_status(self, group_id: str | None, api: str) -> int | None:
        return self.commit_path.group_status(group_id, api in _GROUP_MANAGEMENT_APIS)  # compiled

    def is_loading(self) -> bool:
        return bool(self.loading)

    def _validate_current_member(self, group: Group, member_id: str, instance_id: str | None) -> int | None:
        return validate_current_member(group, member_id, instance_id)

    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        self.commit_path.schedule_heartbeat(group, member, timeout_ms)

    def _on_expire_heartbeat(self, group: Group, member_id: str) -> None:
        """A member's session ran out (membership decides what follows)."""
        raise NotImplementedError

    def classic_heartbeat_to_consumer_group(
        self, group: ConsumerGroup, generation_id: int, member_id: str, instance_id: str | None
    ) -> int:
        """A classic member's Heartbeat to the consumer group serving its group id (migration.py)."""
        raise NotImplementedError

    def _schedule_cleanup(self) -> None:
        """Arm the offsets retention sweep (offsets decide when)."""
        raise NotImplementedError

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

    # ================================================================ lifecycle

    def run_in_background(self, coro: Awaitable[object]) -> None:
        self._tasks.spawn(coro)

    async def settle(self) -> None:
        """Wait for background appends/loads (tests, shutdown)."""
        await self._tasks.settle()

    async def shutdown(self) -> None:
        self.active = False
        if self.driver is not None:
            await self.driver.stop()
        await self.settle()
        for group in list(self.groups.values()):
            self._unload(group)
        self.consumer_groups.clear()
        self.share_groups.clear()
        self.partitions.clear()


def _keyed_by(group_id: Hashable) -> Callable[[Hashable], bool]:
    """Matches the timer keys of one group: (kind, group_id, ...); a consumer group's are (kind, ("consumer",
    group_id), member_id)."""
    return lambda key: isinstance(key, tuple) and key[1:2] == (group_id,)

"""Committed offsets (the offsets half of Kafka's GroupCoordinator): OffsetCommit, TxnOffsetCommit and their
transaction markers, OffsetFetch, OffsetDelete, and retention (offsets.retention.minutes, deleted topics).
Each commit is one append to the group's `__consumer_offsets` partition in Kafka's record format.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kio.schema.errors import ErrorCode as E

from kbus.protocol.record_batch import build_batch
from kbus.server.coordinator.commit_batch import offset_commit_records
from kbus.server.coordinator.commit_path import validate_current_member
from kbus.server.coordinator.consumer_group import validate_offset_commit
from kbus.server.coordinator.group import Group, GroupState
from kbus.server.coordinator.group_store import GroupStore, TopicPartition
from kbus.server.coordinator.records import OffsetAndMetadata

log = logging.getLogger("kbus.coordinator")


class GroupOffsets(GroupStore):
    # ================================================================ offsets

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        api_version: int = 9,
    ) -> dict[TopicPartition, int]:
        """OffsetCommit: the error of each partition (compiled: commit_path.CommitPath.commit)."""
        return await self.commit_path.commit(group_id, member_id, group_instance_id, generation_id, offsets,
                                             api_version)  # fmt: skip

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
        cgroup = self.consumer_groups.get(group_id)
        group = self.groups.get(group_id)
        if cgroup is not None and not cgroup.dead:
            error = validate_offset_commit(cgroup, member_id, generation_id, transactional=True, api_version=9)
            if error is not None:
                return dict.fromkeys(offsets, error)
            group = self.commit_path.offsets_holder(group_id)
        elif group is None:
            group = self.commit_path.new_group(group_id)
        elif generation_id >= 0 or member_id:
            # KIP-447: a producer fenced by a rebalance cannot commit for the group's new generation
            error = validate_current_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = E.illegal_generation
            if error is not None:
                return dict.fromkeys(offsets, error)
        result, valid = self.commit_path.check_offsets(offsets)
        if not valid:
            return result
        batch = build_batch(
            offset_commit_records(group_id, valid),
            timestamp_ms=self.clock(),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            is_transactional=True,
        )
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

    async def expire_offsets(self) -> int:
        """offsets.retention.minutes, and offsets of topics that no longer exist (Kafka removes those when the
        topic is deleted; a periodic sweep also catches deletions made while this broker was not leading)."""
        now = self.clock()
        retention = self.config.offsets_retention_ms
        live = self._live_topics() if self._live_topics is not None else None

        def select(group: Group) -> list[TopicPartition]:
            gone = [] if live is None else [tp for tp in group.offsets if tp[0] not in live]
            expired = group.expired_offsets(now, retention)
            cgroup = self.consumer_groups.get(group.group_id)
            if cgroup is not None and cgroup.members:
                # A consumer-protocol group keeps the offsets of the topics its members subscribe to (Kafka's
                # ConsumerGroup.isSubscribedToTopic); the others expire `retention` after their commit.
                expired = [tp for tp in expired if tp[0] not in cgroup.subscription_metadata]
            return sorted(set(expired) | set(gone))

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

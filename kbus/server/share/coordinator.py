"""The share coordinator (KIP-932; Kafka's ShareCoordinatorService/Shard): the durable state of share-partitions,
kept in the compacted internal topic `__share_group_state` with the state-topic pieces the group and transaction
coordinators use (`InternalTopicLog`: appends with acks=all; `StatePartitions`/`follow_leadership`: a partition's
keys are loaded when this broker becomes its leader). A share-partition's key, "group:topicId:partition", maps onto
a partition of the topic as Kafka maps it; that partition's leader answers Initialize/Read/Write/Delete
ShareGroupState for it (`apis/share_state.py`), and the share-partition leaders reach it through
`persister.py`.

A write is fenced by the leader epoch: a write from an older leader of the share-partition than the last one
written is refused (FENCED_LEADER_EPOCH), so a deposed leader cannot overwrite its successor's state.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from kio.schema.errors import ErrorCode as E

from kbus.common.broker_config import KafkaConfig
from kbus.common.topics import SHARE_GROUP_STATE_TOPIC
from kbus.protocol.record_batch import build_batch, decode_records, iter_complete_batches
from kbus.server.coordinator.state_topic import (
    BackgroundTasks,
    InternalTopicLog,
    StateCoordinator,
    StatePartitions,
    StateReplicas,
    StateTopic,
    follow_leadership,
)
from kbus.server.metadata.types import MetadataStore
from kbus.server.share import state as st
from kbus.server.share.state import ShareState, ShareStateKey

log = logging.getLogger("kbus.share")

Loaded = dict[ShareStateKey, ShareState]


class ShareCoordinatorError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or str(code))
        self.code = code


class ShareCoordinator(StateCoordinator[Loaded]):
    def __init__(self, replicas: StateReplicas, num_partitions: int, replication_factor: int, min_isr: int,
                 segment_bytes: int, commit_timeout_ms: int,
                 partitions_count: Callable[[], int | None] | None = None) -> None:
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.min_isr = min_isr
        self.segment_bytes = segment_bytes
        self._partitions_count = partitions_count
        self.log = InternalTopicLog(SHARE_GROUP_STATE_TOPIC, replicas, commit_timeout_ms)
        self.states: dict[ShareStateKey, ShareState] = {}
        self._tasks = BackgroundTasks("share coordinator")
        self.partitions: StatePartitions[Loaded] = StatePartitions(
            SHARE_GROUP_STATE_TOPIC, self.log, self._replay, self._install, self._uninstall, self._tasks.spawn)
        follow_leadership(replicas, SHARE_GROUP_STATE_TOPIC, self)

    # ---------------------------------------------------------------- KeyedCoordinator

    def state_topic(self) -> StateTopic:
        return StateTopic(SHARE_GROUP_STATE_TOPIC, self.num_partitions, self.replication_factor, {
            "cleanup.policy": "compact", "min.insync.replicas": str(self.min_isr),
            "segment.bytes": str(self.segment_bytes)})

    def partition_for(self, key: str) -> int:
        count = self._partitions_count() if self._partitions_count is not None else None
        return st.partition_for(key, count or self.num_partitions)

    # ---------------------------------------------------------------- loading

    def _replay(self, partition: int, chunks: list[bytes]) -> Loaded:
        out: Loaded = {}
        for chunk in chunks:
            for header in iter_complete_batches(chunk):
                if header.is_control:
                    continue
                for rec in decode_records(chunk, header):
                    if rec.key is None:
                        continue
                    try:
                        version, key = st.decode_key(rec.key)
                        if rec.value is None:
                            out.pop(key, None)
                        elif version == st.SNAPSHOT_KEY:
                            out[key] = st.decode_snapshot(rec.value)
                        else:
                            updated = st.decode_update(rec.value, out.get(key))
                            if updated is not None:
                                out[key] = updated
                    except (ValueError, UnicodeDecodeError) as exc:
                        log.warning("Skipping undecodable __share_group_state record at %d: %s", rec.offset, exc)
        return out

    def _install(self, partition: int, loaded: Loaded) -> None:
        self.states.update(loaded)
        log.info("Loaded %d share-partition state(s) from %s-%d", len(loaded), SHARE_GROUP_STATE_TOPIC, partition)

    def _uninstall(self, partition: int) -> None:
        for key in [k for k in self.states if self.partition_for(k.coordinator_key()) == partition]:
            del self.states[key]

    # ---------------------------------------------------------------- the operations

    def _check(self, key: ShareStateKey) -> int:
        partition = self.partition_for(key.coordinator_key())
        error = self.ownership_error(partition)
        if error != E.none:
            raise ShareCoordinatorError(error)
        return partition

    def read(self, key: ShareStateKey, leader_epoch: int = -1) -> ShareState | None:
        self._check(key)
        return self.states.get(key)

    async def write(self, key: ShareStateKey, state: ShareState) -> None:
        partition = self._check(key)
        current = self.states.get(key)
        if current is not None and state.state_epoch < current.state_epoch:
            # the state was re-initialized since (AlterShareGroupOffsets, DeleteShareGroupOffsets): the leader
            # must read it again
            raise ShareCoordinatorError(E.fenced_state_epoch,
                                        f"State epoch {state.state_epoch} is older than {current.state_epoch}.")
        if (current is not None and state.state_epoch == current.state_epoch
                and state.leader_epoch < current.leader_epoch):
            raise ShareCoordinatorError(E.fenced_leader_epoch,
                                        f"Leader epoch {state.leader_epoch} is older than {current.leader_epoch}.")
        now = int(time.time() * 1000)
        written = ShareState(state.state_epoch, state.leader_epoch, state.start_offset, state.batches,
                             (current.snapshot_epoch + 1) if current is not None else 0,
                             current.create_timestamp if current is not None else now, now)
        await self._append(partition, [(st.encode_key(key), st.encode_value(written))])
        self.states[key] = written

    async def delete(self, key: ShareStateKey) -> None:
        partition = self._check(key)
        if key in self.states:
            await self._append(partition, [(st.encode_key(key), None)])
            self.states.pop(key, None)

    async def _append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        try:
            await self.log.append(partition, build_batch(records, timestamp_ms=int(time.time() * 1000)))
        except Exception as exc:
            if partition not in self.partitions.owned:
                raise ShareCoordinatorError(E.not_coordinator) from exc
            log.warning("Append to %s-%d failed: %r", SHARE_GROUP_STATE_TOPIC, partition, exc)
            raise ShareCoordinatorError(E.coordinator_not_available) from exc

    def run_in_background(self, coro: Awaitable[object]) -> None:
        self._tasks.spawn(coro)

    async def shutdown(self) -> None:
        await self._tasks.cancel()
        self.states.clear()
        self.partitions.clear()


def start_share_coordinator(config: KafkaConfig, replicas: StateReplicas, metadata: MetadataStore) -> ShareCoordinator:
    def partitions_count() -> int | None:
        # keys map onto the partitions the topic really has, whatever the config says now
        t = metadata.topics().get(SHARE_GROUP_STATE_TOPIC)
        return len(t.partitions) if t is not None else None

    return ShareCoordinator(
        replicas,
        config.share_coordinator_state_topic_num_partitions,
        config.share_coordinator_state_topic_replication_factor,
        config.share_coordinator_state_topic_min_isr,
        config.share_coordinator_state_topic_segment_bytes,
        config.offsets_commit_timeout_ms,
        partitions_count,
    )

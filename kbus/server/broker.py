"""The broker: owns the managers (metadata, logs, partitions, coordinator) and their lifecycles.

Data flows one way: network -> apis -> broker managers -> log. API handlers reach state only through this object;
the log never sees a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from kbus.server import coordinator
from kbus.server.apis.transactions import append_markers
from kbus.server.config import KafkaConfig
from kbus.server.coordinator.records import OFFSETS_TOPIC
from kbus.server.identity import (
    read_meta_properties,
    read_partition_topic_id,
    settle_broker_id,
    settle_cluster_id,
    write_meta_properties,
    write_partition_topic_id,
)
from kbus.server.log.config import LogConfig
from kbus.server.log.log import AppendResult
from kbus.server.log.manager import LogManager, read_checkpoint, write_checkpoint
from kbus.server.metadata.errors import InvalidReplicationFactorError
from kbus.server.metadata.local import LocalMetadataStore
from kbus.server.metadata.types import BrokerEndpoint, BrokerInfo, MetadataStore, PartitionState, TopicMetadata
from kbus.server.metrics import METRICS
from kbus.server.partition import Partition
from kbus.server.replication.errors import (
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderError,
    RequestTimedOutError,
)
from kbus.server.replication.fetcher import ReplicaFetcherManager
from kbus.server.transaction.service import TransactionService

log = logging.getLogger("kbus.server")

LeadershipListener = Callable[[str, int, bool], None]
HW_CHECKPOINT = "replication-offset-checkpoint"


class Broker:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.cluster_id = config.cluster_id
        first_dir = config.log_dirs[0]
        for d in config.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self._meta = read_meta_properties(first_dir)
        self.broker_id = settle_broker_id(self.broker_id, self._meta, first_dir)
        endpoints = tuple(
            BrokerEndpoint(lst.name, lst.host, lst.port, config.security_protocol(lst.name))
            for lst in config.advertised_listeners
        )
        # host/port are the inter-broker endpoint (what other brokers and Kafka 2.x tools use), else the first
        self.advertised = next((e for e in endpoints if e.listener == config.inter_broker_listener), endpoints[0])
        info = BrokerInfo(self.broker_id, self.advertised.host, self.advertised.port, None, endpoints)
        self.metadata: MetadataStore
        if config.zookeeper_connect:
            from kbus.server.metadata.zk_store import ZkMetadataStore  # kazoo only where ZooKeeper is used

            self.metadata = ZkMetadataStore.for_broker(config, self.broker_id, info)
        else:
            self.metadata = LocalMetadataStore(first_dir, info)
        self.log_manager: LogManager | None = None
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.group_coordinator: Any = None
        self.transactions: TransactionService | None = None
        self.started_at_ms = int(time.time() * 1000)
        self._leadership_listeners: list[LeadershipListener] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._reconcile_scheduled = False
        self.stopping = False
        self.shutting_down = False  # controlled shutdown under way: lead nothing new, follow nothing
        self.fetchers = ReplicaFetcherManager(self)
        self._isr_changes: set[tuple[str, int]] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._saved_high_watermarks: dict[tuple[str, int], int] = {}

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        meta = self._meta
        self.log_manager = LogManager(self.config.log_dirs, self.default_log_config())
        await asyncio.to_thread(self.log_manager.startup)
        for d in self.config.log_dirs:
            self._saved_high_watermarks.update(read_checkpoint(d / HW_CHECKPOINT))
        self.metadata.add_listener(self._schedule_reconcile)
        try:
            await asyncio.to_thread(self.metadata.start)
            try:
                self.cluster_id = settle_cluster_id(self.cluster_id, self.metadata.cluster_id, meta)
                write_meta_properties(self.config.log_dirs, meta, self.broker_id, self.cluster_id)
            except RuntimeError:
                self.metadata.stop()
                raise
        except BaseException:
            self.log_manager.shutdown()  # leave the logs clean: the next start needs no recovery
            raise
        self.reconcile()
        coordinator.start(self)
        self.transactions = TransactionService(self, append_markers)
        self.transactions.marker_listeners.append(self._on_txn_marker)
        self.transactions.start()
        cfg = self.config
        # File-heavy housekeeping runs on worker threads (the logs lock themselves); ISR checks stay on the loop.
        for interval, fn, in_thread in (
            (cfg.log_retention_check_interval_ms, self._run_retention, True),
            (cfg.log_flush_offset_checkpoint_interval_ms, self._checkpoint, True),
            (cfg.replica_high_watermark_checkpoint_interval_ms, self._checkpoint_high_watermarks, True),
            (cfg.log_cleaner_backoff_ms, self._run_cleaner, True),
            (max(cfg.replica_lag_time_max_ms // 2, 100), self._shrink_isr_all, False),
        ):
            self._tasks.append(asyncio.create_task(self._periodic(interval, fn, in_thread)))

    def _on_txn_marker(self, tp: tuple[str, int], producer_id: int, committed: bool) -> None:
        # a marker on __consumer_offsets decides the offsets committed in that transaction
        if tp[0] == OFFSETS_TOPIC and self.group_coordinator is not None:
            self.group_coordinator.complete_txn(tp[1], producer_id, committed)

    async def controlled_shutdown(self) -> None:
        """Before a clean stop, hand leadership to other in-sync replicas (Kafka's controlled shutdown), so
        clients move to the new leaders while this broker still answers them."""
        if not self.config.controlled_shutdown_enable:
            return
        move = self.metadata.controlled_shutdown
        led = [k for k, p in self.partitions.items() if p.is_leader and p.replicated]
        self.shutting_down = True
        try:
            stranded = await asyncio.wait_for(asyncio.to_thread(move), timeout=30)
        except Exception as exc:
            log.warning("Controlled shutdown failed (%s); proceeding with an uncontrolled one", exc)
            return
        self.reconcile()
        # `stranded` also names partitions this broker only followed (or led alone, RF=1): count what it led
        kept = set(stranded)
        log.info(
            "Controlled shutdown: moved leadership of %d partition(s); %d had no other in-sync replica",
            sum(1 for k in led if k not in kept),
            sum(1 for k in led if k in kept),
        )

    async def stop(self) -> None:
        self.stopping = True
        for part in self.partitions.values():
            part.wake_fetchers()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        await self.fetchers.stop()
        for task in list(self._background):
            task.cancel()
        await coordinator.stop(self)
        if self.transactions is not None:
            await self.transactions.stop()
        self.metadata.stop()
        if self.log_manager is not None:
            self._checkpoint_high_watermarks()
            self.log_manager.shutdown()

    async def _periodic(self, interval_ms: int, fn: Callable[[], None], in_thread: bool = False) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 100) / 1000)
            try:
                if in_thread:
                    await asyncio.to_thread(fn)
                else:
                    fn()
            except Exception:
                log.exception("periodic task %s failed", fn.__name__)

    def _run_retention(self) -> None:
        assert self.log_manager is not None
        # a leader keeps what its followers may still need: nothing at or above the high watermark goes
        high_watermarks = {key: part.high_watermark for key, part in list(self.partitions.items())}
        deleted = self.log_manager.run_retention(int(time.time() * 1000), high_watermarks)
        if deleted:
            log.info("Retention deleted %d segment(s)", deleted)

    def _run_cleaner(self) -> None:
        """Log compaction (cleanup.policy=compact, e.g. __consumer_offsets)."""
        assert self.log_manager is not None
        if not self.config.log_cleaner_enable:
            return
        rewritten = self.log_manager.run_cleaner()
        if rewritten:
            log.info("Log cleaner rewrote %d segment(s)", rewritten)

    def _checkpoint(self) -> None:
        assert self.log_manager is not None
        self.log_manager.checkpoint()

    def _checkpoint_high_watermarks(self) -> None:
        """Kafka's replication-offset-checkpoint: where each replica's high watermark was, so a restarted
        replica never shows consumers records that were not committed."""
        assert self.log_manager is not None
        by_dir: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.config.log_dirs}
        for key, part in list(self.partitions.items()):
            d = self.log_manager.log_dir_of(*key)
            if d is not None and d in by_dir:
                by_dir[d][key] = part.high_watermark
        for d, offsets in by_dir.items():
            write_checkpoint(d / HW_CHECKPOINT, offsets)

    # ---------------------------------------------------------------- partitions
    def default_log_config(self) -> LogConfig:
        return LogConfig.from_server_properties(self.config.raw)

    def log_config_for(self, topic: TopicMetadata) -> LogConfig:
        return self.default_log_config().with_overrides(topic.configs)

    def _schedule_reconcile(self) -> None:
        """Metadata listeners may fire on any thread (kazoo's): hop onto the loop, coalescing bursts."""
        loop = self._loop
        if loop is None:
            return
        if self._reconcile_scheduled:
            return
        self._reconcile_scheduled = True
        loop.call_soon_threadsafe(self._reconcile_soon)

    def _reconcile_soon(self) -> None:
        self._reconcile_scheduled = False
        self.reconcile()

    def reconcile(self) -> None:
        """Make the hosted partitions match the metadata: open logs for assigned replicas, delete logs of deleted
        (or deleted and re-created) topics, become leader or follower as the partition states say, apply config
        changes. One partition failing (e.g. its log dir) does not stop the others."""
        assert self.log_manager is not None
        topics = self.metadata.topics()
        wanted: set[tuple[str, int]] = set()
        for topic in topics.values():
            config = self.log_config_for(topic)
            for index, state in topic.partitions.items():
                if self.broker_id not in state.replicas:
                    continue
                wanted.add((topic.name, index))
                try:
                    self._reconcile_partition(topic, index, state, config)
                except Exception:
                    log.exception("Could not apply metadata to partition %s-%d", topic.name, index)
        for key in [k for k in self.partitions if k not in wanted]:
            self._drop_partition(key, delete_log=key[0] not in topics)

    def _reconcile_partition(self, topic: TopicMetadata, index: int, state: PartitionState, config: LogConfig) -> None:
        assert self.log_manager is not None
        key = (topic.name, index)
        part = self.partitions.get(key)
        if part is not None and part.topic_id != topic.topic_id:
            log.info("Topic %s was re-created (new topic id): dropping the old log of partition %d", *key)
            self._drop_partition(key, delete_log=True)
            part = None
        if part is None:
            part = self._open_partition(topic, index, state, config)
            became_leader, became_follower = part.is_leader, not part.is_leader
        else:
            was_leader = part.is_leader
            became_leader, became_follower = part.update_state(state)
            if part.log.config != config:
                self.log_manager.update_config(topic.name, config)
            if was_leader and not part.is_leader:
                self._notify_leadership(topic.name, index, False)
        if part.is_leader:
            self.fetchers.unfollow(key)
            if became_leader:
                log.info(
                    "Partition %s-%d: leader at epoch %d, isr %s", topic.name, index, state.leader_epoch, state.isr
                )
                self._notify_leadership(topic.name, index, True)
        elif state.leader >= 0 and not self.shutting_down:  # a broker on its way out does not rejoin ISRs
            if became_follower or self.fetchers.assigned.get(key) != state.leader:
                self.fetchers.follow(key, state.leader)
        else:
            self.fetchers.unfollow(key)

    def _open_partition(self, topic: TopicMetadata, index: int, state: PartitionState, config: LogConfig) -> Partition:
        """Open (or create) the local replica. A log left from an older topic of the same name (deleted and
        re-created while this broker was away) is recognised by its partition.metadata topic id and discarded."""
        assert self.log_manager is not None
        plog = self.log_manager.get_log(topic.name, index)
        if plog is not None and read_partition_topic_id(plog.dir) not in (None, topic.topic_id):
            log.info("Log of %s-%d belongs to an older topic of that name: deleting it", topic.name, index)
            self.log_manager.delete_log(topic.name, index)
            plog = None
        if plog is None:
            plog = self.log_manager.create_log(topic.name, index, config)
        elif plog.config != config:
            self.log_manager.update_config(topic.name, config)
        write_partition_topic_id(plog.dir, topic.topic_id)
        part = Partition(
            topic.name,
            index,
            plog,
            state,
            self.broker_id,
            topic_id=topic.topic_id,
            checkpointed_high_watermark=self._saved_high_watermarks.get((topic.name, index)),
        )
        self.partitions[(topic.name, index)] = part
        return part

    def _drop_partition(self, key: tuple[str, int], *, delete_log: bool) -> None:
        assert self.log_manager is not None
        part = self.partitions.pop(key)
        self.fetchers.unfollow(key)
        part.fail_waiters()
        if part.is_leader:
            self._notify_leadership(key[0], key[1], False)
        if delete_log:
            self.log_manager.delete_log(*key)
            self._saved_high_watermarks.pop(key, None)
            log.info("Deleted log for partition %s-%d", *key)

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def add_leadership_listener(self, callback: LeadershipListener) -> None:
        self._leadership_listeners.append(callback)
        for (topic, index), part in self.partitions.items():
            if part.is_leader:
                callback(topic, index, True)

    def _notify_leadership(self, topic: str, index: int, is_leader: bool) -> None:
        for cb in self._leadership_listeners:
            try:
                cb(topic, index, is_leader)
            except Exception:
                log.exception("leadership listener failed for %s-%d", topic, index)

    def append_records(self, part: Partition, records: bytes, acks: int, *, from_coordinator: bool = False
                       ) -> AppendResult:
        """Leader append, synchronous so that appends keep the order requests arrived in. acks=-1 is refused up
        front when the ISR is smaller than min.insync.replicas; wait_for_acks() then waits for the replicas."""
        min_isr = part.log.config.min_insync_replicas
        if acks == -1 and len(part.state.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {part.state.isr} is insufficient to satisfy the min.isr requirement of "
                f"{min_isr} for partition {part.topic}-{part.index}"
            )
        return part.append_as_leader(records, from_coordinator=from_coordinator)

    async def wait_for_acks(self, part: Partition, result: AppendResult, acks: int, timeout_ms: int) -> None:
        """acks=-1: until every in-sync replica has the batch (the high watermark passes it)."""
        if acks != -1:
            return
        # a duplicate (a retried batch) answers with the original offsets, and still only once they are committed
        if not await part.wait_for_high_watermark(result.last_offset + 1, timeout_ms / 1000):
            if not part.is_leader:
                raise NotLeaderError(f"Leadership of {part.topic}-{part.index} moved while waiting for replicas")
            raise RequestTimedOutError(f"Replicas of {part.topic}-{part.index} did not catch up in {timeout_ms} ms")
        min_isr = part.log.config.min_insync_replicas
        if len(part.state.isr) < min_isr:
            raise NotEnoughReplicasAfterAppendError(
                f"The ISR {part.state.isr} of {part.topic}-{part.index} shrank below min.insync.replicas={min_isr}"
            )

    def leader_partition(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]:
        """The partition if this broker leads it, else why not: UNKNOWN_TOPIC_OR_PARTITION when the cluster has no
        such partition, NOT_LEADER_OR_FOLLOWER when another broker (or nobody, for now) leads it."""
        part = self.partitions.get((topic, index))
        if part is not None and part.is_leader:
            return part, ErrorCode.none
        t = self.metadata.topics().get(topic)
        if t is None or index not in t.partitions:
            return None, ErrorCode.unknown_topic_or_partition
        return None, ErrorCode.not_leader_or_follower

    # ---------------------------------------------------------------- ISR maintenance (leader side)
    def follower_fetched(self, part: Partition, replica_id: int, fetch_offset: int) -> None:
        if part.update_follower(replica_id, fetch_offset, int(time.time() * 1000)):
            key = (part.topic, part.index)
            if key not in self._isr_changes:  # one ISR change per partition at a time
                self._isr_changes.add(key)
                self._spawn(self._expand_isr(part, replica_id, key))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Background work that must not be garbage-collected mid-flight; its failures are logged."""
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("Background task failed: %s", task.exception())

    async def _expand_isr(self, part: Partition, replica_id: int, key: tuple[str, int]) -> None:
        try:
            if replica_id in part.state.isr or not part.is_leader:
                return
            new_isr = sorted({*part.state.isr, replica_id})
            if await self._alter_isr(part, new_isr):
                METRICS.inc("kbus_isr_expands_total")
                log.info("Partition %s-%d: expanded ISR to %s", part.topic, part.index, new_isr)
        finally:
            self._isr_changes.discard(key)

    def _shrink_isr_all(self) -> None:
        now = int(time.time() * 1000)
        for part in list(self.partitions.values()):
            if not part.is_leader or len(part.state.isr) <= 1:
                continue
            lagging = part.lagging_replicas(now, self.config.replica_lag_time_max_ms)
            if lagging:
                key = (part.topic, part.index)
                if key not in self._isr_changes:
                    self._isr_changes.add(key)
                    self._spawn(self._shrink_isr(part, lagging, key))

    async def _shrink_isr(self, part: Partition, lagging: list[int], key: tuple[str, int]) -> None:
        try:
            new_isr = [r for r in part.state.isr if r not in lagging]
            if await self._alter_isr(part, new_isr):
                METRICS.inc("kbus_isr_shrinks_total")
                log.info(
                    "Partition %s-%d: shrank ISR to %s (out of sync: %s)", part.topic, part.index, new_isr, lagging
                )
        finally:
            self._isr_changes.discard(key)

    async def _alter_isr(self, part: Partition, new_isr: list[int]) -> bool:
        alter = self.metadata.alter_isr
        based_on = part.state
        epoch = based_on.leader_epoch
        state = await asyncio.to_thread(alter, part.topic, part.index, new_isr, based_on)
        if state is None or self.partitions.get((part.topic, part.index)) is not part:
            return False
        if not part.is_leader or state.leader_epoch != epoch or part.state.leader_epoch != epoch:
            return False  # leadership moved while we wrote: the store's listener brings the newer state
        part.update_state(state)
        return True

    def allocate_producer_id(self) -> int:
        return self.metadata.allocate_producer_id()

    # ---------------------------------------------------------------- cluster view
    def live_brokers(self) -> list[BrokerInfo]:
        return self.metadata.brokers()

    def controller_id(self) -> int:
        return self.metadata.controller_id()

    def partition_leader(self, topic: str, index: int) -> BrokerInfo | None:
        t = self.metadata.topics().get(topic)
        if t is None or index not in t.partitions:
            return None
        leader = t.partitions[index].leader
        return next((b for b in self.live_brokers() if b.broker_id == leader), None)

    # ---------------------------------------------------------------- internal topics (group coordinator)
    async def ensure_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicMetadata:
        """An internal topic, created on first use. A standalone broker is a cluster of one, so it lowers the
        replication factor; a cluster refuses until enough brokers are up (an internal topic created with too
        few replicas would stay under-replicated forever), as Kafka does."""
        existing = self.metadata.topics().get(name)
        if existing is not None:
            return existing
        live = len(self.live_brokers())
        if isinstance(self.metadata, LocalMetadataStore):
            replication_factor = max(1, min(replication_factor, live))
        elif replication_factor > live:
            raise InvalidReplicationFactorError(
                f"Number of alive brokers '{live}' does not meet the required replication factor "
                f"'{replication_factor}' for the internal topic {name}"
            )
        topic = await asyncio.to_thread(self.metadata.create_topic, name, num_partitions, replication_factor, configs)
        self.reconcile()
        return topic

"""The replica manager (Kafka's ReplicaManager): the partitions this broker hosts, kept in line with the metadata
(leader or follower, logs opened, deleted, re-created), leader appends and the acks=all wait, reads for fetches,
the follower fetchers, the leader-side ISR checks and the high-watermark checkpoint.

Handlers reach partitions only through here and through `Partition`'s read methods; nothing outside the log
layer touches a `Log`.

Why one file of ~610 lines: one class over the hosted partitions, all of it reading and writing the same table of
`Partition`s; what stands alone is elsewhere already (partition/, fetcher.py, alter_log_dirs.py, fetch_session.py,
controlled_shutdown.py, quota.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Final

from kio.schema.errors import ErrorCode

from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.common.topic_config import LogConfig
from kbus.protocol.client import PLAINTEXT
from kbus.protocol.record_batch import BatchHeader
from kbus.server.log import background_sync
from kbus.server.log.background_sync import sync_filesystems
from kbus.server.log.errors import KafkaStorageError
from kbus.server.log.log import EMPTY_FETCH, AppendResult, FetchData, Log
from kbus.server.log.manager import LogDirUsage, LogManager, read_checkpoint
from kbus.server.log.producer_state import VerificationGuard
from kbus.server.log.txn_index import AbortedTxn
from kbus.server.metadata.identity import read_partition_topic_id, write_partition_topic_id
from kbus.server.metadata.types import MetadataStore, PartitionState, TopicMetadata
from kbus.server.partition.errors import (
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderError,
    RequestTimedOutError,
)
from kbus.server.partition.partition import Partition
from kbus.server.quotas.rate import RateConfig
from kbus.server.replication.alter_log_dirs import ReplicaAlterLogDirsManager
from kbus.server.replication.fetcher import ReplicaFetcherManager
from kbus.server.replication.quota import (
    FOLLOWER,
    LEADER,
    ReplicationQuotaManager,
    ThrottledPartitions,
    parse_throttled_replicas,
    register_metrics,
)
from kbus.server.util.metrics import METRICS
from kbus.server.util.stall_watch import STALL_WATCH

log = logging.getLogger("kbus.server")

TopicPartition = tuple[str, int]
LeadershipListener = Callable[[str, int, bool], None]
HW_CHECKPOINT = "replication-offset-checkpoint"
OPEN_BATCH = 500  # replicas newly hosted per event-loop turn (apply_metadata)

PREPARE_SYNC_BATCH = 1000  # new logs whose partition.metadata one syncfs makes durable (prepare_logs)
_NONE: Final = ErrorCode.none  # leader_partition's answer for every Produce: a C static, not a module-dict lookup


def _retrieve_outcome(task: asyncio.Task[None]) -> None:
    """A failed apply pass is logged here, once, since every caller that waited for it may have been cancelled
    (callers still get the exception; asyncio would otherwise warn that it was never retrieved)."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("Metadata apply pass failed", exc_info=exc)


def halt_broker(status: int) -> None:
    """Kafka's Exit.halt: no shutdown hooks, no flush (the disks are gone)."""
    logging.shutdown()
    os._exit(status)


class PartitionRead:
    """What one partition contributes to a fetch response. A plain class: one is made per partition of every
    Fetch, and mypyc compiles a plain class's __init__ (a dataclass's is generated Python)."""

    __slots__ = ("aborted_transactions", "high_watermark", "last_stable_offset", "log_start_offset", "records")

    def __init__(
        self,
        high_watermark: int,
        last_stable_offset: int,
        log_start_offset: int,
        records: FetchData,  # a range of a segment file: sent with sendfile or read with to_bytes()
        aborted_transactions: list[AbortedTxn] | None = None,
    ) -> None:
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.records = records
        self.aborted_transactions = aborted_transactions

    def __repr__(self) -> str:
        return (f"PartitionRead({self.high_watermark}, {self.last_stable_offset}, {self.log_start_offset}, "
                f"{self.records!r}, {self.aborted_transactions!r})")


class ReplicaManager:
    def __init__(
        self,
        config: KafkaConfig,
        broker_id: int,
        metadata: MetadataStore,
        log_manager: LogManager,
        *,
        halt: Callable[[int], None] = halt_broker,
    ) -> None:
        self.config = config
        self.broker_id = broker_id
        self._metadata = metadata
        self._log_manager = log_manager
        self.partitions: dict[TopicPartition, Partition] = {}
        # Kafka's QuotaManagers.leader / .follower: replication throttles (rates set by the broker from its dynamic
        # configs, throttled partitions from the topic configs on each reconcile)
        window = RateConfig(config.replication_quota_window_num, config.replication_quota_window_size_seconds * 1000)
        self.leader_quota = ReplicationQuotaManager(LEADER, window)
        self.follower_quota = ReplicationQuotaManager(FOLLOWER, window)
        register_metrics((self.leader_quota, self.follower_quota))
        self.fetchers = ReplicaFetcherManager(self)
        self.log_dir_moves = ReplicaAlterLogDirsManager(self, log_manager, lambda: self.config.replica_fetch_max_bytes)
        self.client_security = PLAINTEXT  # how followers reach leaders; the broker sets the inter-broker listener's
        self.stopping = False
        self.shutting_down = False  # controlled shutdown under way: lead nothing new, follow nothing
        self._leadership_listeners: list[LeadershipListener] = []
        self._saved_high_watermarks: dict[TopicPartition, int] = {}
        self._apply_lock = asyncio.Lock()
        self._apply_queued: asyncio.Task[None] | None = None
        # logs prepare_logs() opened and stamped with this topic id, for reconcile() to take over
        self._prepared: dict[TopicPartition, uuid.UUID | None] = {}
        self._log_configs: dict[str, tuple[LogConfig, dict[str, str], LogConfig]] = {}
        # replicas whose log dir failed (Kafka's HostedPartition.Offline): never served or re-created here again
        # until the broker restarts; they answer KAFKA_STORAGE_ERROR
        self.offline_partitions: set[TopicPartition] = set()
        self._failures = log_manager.failure_channel
        # the replicas assigned here when the broker started: while a dir is offline, a missing log of one of
        # them may sit in that dir, so it is not re-created (Kafka's isNew=false)
        self._existing_at_start: set[TopicPartition] | None = None
        self._halt = halt

    def load_high_watermarks(self) -> None:
        for d in self._log_manager.live_log_dirs:
            try:
                self._saved_high_watermarks.update(read_checkpoint(d / HW_CHECKPOINT))
            except OSError as e:
                self._failures.maybe_add_offline_log_dir(d, f"Error while reading {HW_CHECKPOINT} in {d}", e)

    async def stop(self) -> None:
        self.stopping = True
        async with self._apply_lock:  # no prepare_logs() thread is left creating logs under a closing manager
            pass
        for part in self.partitions.values():
            part.wake_fetchers()
            part.cancel_isr_change()
        await self.fetchers.stop()
        await self.log_dir_moves.stop()

    # ---------------------------------------------------------------- what fetchers and handlers look up
    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leader_partition(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]:
        """The partition if this broker leads it, else why not: UNKNOWN_TOPIC_OR_PARTITION when the cluster has no
        such partition, NOT_LEADER_OR_FOLLOWER when another broker (or nobody, for now) leads it."""
        part = self.partitions.get((topic, index))
        if part is not None and part.is_leader:
            return part, _NONE
        if (topic, index) in self.offline_partitions:
            return None, ErrorCode.kafka_storage_error
        t = self._metadata.topics().get(topic)
        if t is None or index not in t.partitions:
            return None, ErrorCode.unknown_topic_or_partition
        return None, ErrorCode.not_leader_or_follower

    def broker_endpoint(self, broker_id: int) -> BrokerInfo | None:
        return next((b for b in self._metadata.brokers() if b.broker_id == broker_id), None)

    # ---------------------------------------------------------------- appends and acks=all
    def append_records(
        self, part: Partition, records: bytes | bytearray | memoryview, acks: int, *, from_coordinator: bool = False,
        verify_transactions: bool = False, verification_guard: VerificationGuard | None = None,
        transaction_version: int = 0, validated: BatchHeader | None = None,
    ) -> AppendResult:
        """Leader append, synchronous so that appends keep the order requests arrived in. acks=-1 is refused up
        front when the ISR is smaller than min.insync.replicas; wait_for_acks() then waits for the replicas.
        `validated`: the header Produce validation parsed (Log.append_as_leader)."""
        if acks == -1:  # min.insync.replicas as the log's AppendLimits keep it (no LogConfig lookup per append)
            min_isr = part.log.append_limits().min_insync_replicas
            if len(part.state.isr) < min_isr:
                raise NotEnoughReplicasError(
                    f"The size of the current ISR {part.state.isr} is insufficient to satisfy the min.isr requirement "
                    f"of {min_isr} for partition {part.topic}-{part.index}"
                )
        try:
            return part.append_as_leader(records, from_coordinator=from_coordinator,
                                         verify_transactions=verify_transactions,
                                         verification_guard=verification_guard,
                                         transaction_version=transaction_version, validated=validated)
        except OSError as e:
            raise self.storage_error(part, "appending to", e) from e

    def acks_satisfied(self, part: Partition, result: AppendResult, acks: int) -> bool:
        """Is the append acknowledged already, with nothing to wait for (acks 0 or 1; acks=-1 once the high
        watermark passes it, at once when the leader is the whole ISR)? False: wait_for_acks() waits. Raises what
        wait_for_acks() would for a committed batch. The Produce handler asks this first, so the common cases
        make no coroutine."""
        if acks != -1:
            return True
        # a duplicate (a retried batch) answers with the original offsets, and still only once they are committed
        if part.high_watermark < result.last_offset + 1:
            return False
        self._check_isr_after_append(part)
        return True

    async def wait_for_acks(self, part: Partition, result: AppendResult, acks: int, timeout_ms: int) -> None:
        """acks=-1: until every in-sync replica has the batch (the high watermark passes it)."""
        if self.acks_satisfied(part, result, acks):
            return
        if not await part.wait_for_high_watermark(result.last_offset + 1, timeout_ms / 1000):
            if (part.topic, part.index) in self.offline_partitions:
                raise KafkaStorageError(f"The log dir of {part.topic}-{part.index} went offline")
            if not part.is_leader:
                raise NotLeaderError(f"Leadership of {part.topic}-{part.index} moved while waiting for replicas")
            raise RequestTimedOutError(f"Replicas of {part.topic}-{part.index} did not catch up in {timeout_ms} ms")
        self._check_isr_after_append(part)

    @staticmethod
    def _check_isr_after_append(part: Partition) -> None:
        min_isr = part.log.append_limits().min_insync_replicas
        if len(part.state.isr) < min_isr:
            raise NotEnoughReplicasAfterAppendError(
                f"The ISR {part.state.isr} of {part.topic}-{part.index} shrank below min.insync.replicas={min_isr}"
            )

    # ---------------------------------------------------------------- reads
    def read(
        self,
        part: Partition,
        fetch_offset: int,
        max_bytes: int,
        *,
        replica_id: int = -1,
        read_committed: bool = False,
        min_one_batch: bool = True,
        report_progress: bool = True,
    ) -> PartitionRead:
        """One partition of a Fetch (Kafka's readFromLocalLog): consumers read to the high watermark (to the last
        stable offset with read_committed), followers to the log end, and a follower's fetch offset is its
        progress report for the ISR, once per request (`report_progress`: Kafka's updateFollowerFetchState
        follows the first read, not the re-read of a parked fetch that an append completes). Raises the log's
        errors (e.g. OffsetOutOfRange)."""
        if replica_id >= 0:
            if report_progress:
                self.follower_fetched(part, replica_id, fetch_offset)
            quota = self.leader_quota
            if quota.throttling and quota.should_throttle(part.topic, part.index, replica_id in part.state.isr):
                # Kafka's shouldLeaderThrottle: an out-of-sync follower of a throttled partition gets no data
                # while the leader's quota is exceeded (it still reported its progress above)
                return PartitionRead(part.high_watermark, part.last_stable_offset, part.log_start_offset, EMPTY_FETCH)
        hw = part.high_watermark
        lso = part.last_stable_offset
        leo = part.log_end_offset
        max_offset = leo if replica_id >= 0 else lso if read_committed else hw
        try:
            if max_offset <= fetch_offset <= leo:
                data = EMPTY_FETCH
            else:
                data = part.read(fetch_offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)
            aborted = part.aborted_transactions(fetch_offset, max_offset) if read_committed else None
        except OSError as e:
            raise self.storage_error(part, "reading", e) from e
        return PartitionRead(hw, lso, part.log_start_offset, data, aborted)

    def follower_fetched(self, part: Partition, replica_id: int, fetch_offset: int) -> None:
        """A follower's fetch offset for a partition led here: its progress report for the ISR (Kafka's
        updateFollowerFetchState), also for a partition its incremental fetch left out (nothing new for it)."""
        part.follower_fetched(replica_id, fetch_offset)

    @property
    def leader_throttling(self) -> bool:
        """Any partition leader-throttled here (one check per follower Fetch when none is)."""
        return self.leader_quota.throttling

    def leader_throttled(self, topic: str, index: int) -> bool:
        """A partition whose bytes sent to followers count against the leader's quota (Kafka's isThrottled)."""
        return self.leader_quota.is_throttled(topic, index)

    def record_leader_replication(self, nbytes: int) -> None:
        """The bytes of leader-throttled partitions a follower's Fetch response carries, counted once the
        response is complete (Kafka's quotas.leader.record(sizeOfThrottledPartitions))."""
        self.leader_quota.record(nbytes)

    def update_replication_rates(self, leader: float | None, follower: float | None) -> None:
        """leader/follower.replication.throttled.rate in effect (None: unlimited)."""
        self.leader_quota.update_quota(leader)
        self.follower_quota.update_quota(follower)

    # ---------------------------------------------------------------- moving replicas between log dirs
    def alter_replica_log_dirs(self, moves: dict[TopicPartition, str]) -> dict[TopicPartition, ErrorCode]:
        """AlterReplicaLogDirs (Kafka's ReplicaManager.alterReplicaLogDirs): per replica, start moving it to the
        named dir of this broker. A replica not hosted here yet is created in that dir when it comes
        (REPLICA_NOT_AVAILABLE meanwhile, which kafka-reassign-partitions retries)."""
        out: dict[TopicPartition, ErrorCode] = {}
        for tp, path in moves.items():
            dest = self._log_manager.configured_dir(path)
            if dest is None:
                out[tp] = ErrorCode.log_dir_not_found
                continue
            if dest in self._log_manager.offline_dirs or tp in self.offline_partitions:
                out[tp] = ErrorCode.kafka_storage_error
                continue
            part = self.partitions.get(tp)
            if part is None:
                self._log_manager.set_preferred_dir(tp, dest)
                out[tp] = ErrorCode.replica_not_available
                continue
            if self._log_manager.log_dir_of(*tp) == dest:
                self.log_dir_moves.cancel(tp)  # back where it is: a move elsewhere stops
                out[tp] = ErrorCode.none
                continue
            if self.log_dir_moves.moving(tp) == dest:
                out[tp] = ErrorCode.none
                continue
            if self._log_manager.offline_dirs:
                # no future log while a dir is offline: the replica may also live there (as Kafka)
                out[tp] = ErrorCode.kafka_storage_error
                continue
            try:
                self.log_dir_moves.start(part, dest)
            except KafkaStorageError:
                out[tp] = ErrorCode.kafka_storage_error
                continue
            out[tp] = ErrorCode.none
        return out

    # ---------------------------------------------------------------- log dir failures
    def storage_error(self, part: Partition, what: str, error: OSError) -> KafkaStorageError:
        """An I/O error on a replica's log: report its dir to the failure channel (which takes it offline, see
        handle_log_dir_failure) and give the error the caller answers with (KAFKA_STORAGE_ERROR)."""
        log_dir = self._log_manager.log_dir_of(part.topic, part.index) or part.log.dir.parent
        return self._failures.storage_error(log_dir, f"Error while {what} log of {part.topic}-{part.index}", error)

    def handle_log_dir_failure(self, log_dir: Path) -> None:
        """Kafka's ReplicaManager.handleLogDirFailure (on the event loop): stop every replica in the dir (no
        fetching, no serving; waiting produces and fetches are answered), tell the controller so it moves
        leadership and ISR membership to the other replicas, and halt the broker when no log dir is left."""
        gone = set(self._log_manager.handle_log_dir_failure(log_dir))
        gone |= {key for key, part in self.partitions.items() if part.log.dir.parent == log_dir}
        for key in sorted(gone):
            self.offline_partitions.add(key)
            if key in self.partitions:
                self._drop_partition(key, delete_log=False)
        log.error("Stopped serving replicas in dir %s: %s", log_dir, ",".join(f"{t}-{p}" for t, p in sorted(gone)))
        if not self._log_manager.live_log_dirs:
            log.critical("Shutdown broker because all log dirs in %s have failed",
                         ", ".join(map(str, self.config.log_dirs)))  # fmt: skip
            self._halt(1)
            return
        self.notify_controller_of_log_dir_event()

    def notify_controller_of_log_dir_event(self) -> None:
        """/log_dir_event_notification/log_dir_event_<seq>: the controller asks which replicas are offline here."""

        def propagate() -> None:
            try:
                self._metadata.propagate_log_dir_event()
            except Exception as e:  # ZooKeeper away: the controller learns it when this broker re-registers
                log.error("Could not tell the controller about the failed log dir: %s", e)

        threading.Thread(target=propagate, name="log-dir-event", daemon=True).start()

    # ---------------------------------------------------------------- leadership (for coordinators)
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

    # ---------------------------------------------------------------- following the metadata
    def default_log_config(self) -> LogConfig:
        return self.config.log_defaults

    def log_config_for(self, topic: TopicMetadata) -> LogConfig:
        """The topic's LogConfig: the same object while neither the broker defaults nor the topic's overrides
        change, so reconcile() can tell an unchanged partition by identity."""
        defaults = self.default_log_config()
        cached = self._log_configs.get(topic.name)
        if cached is not None and cached[0] is defaults and cached[1] == topic.configs:
            return cached[2]
        config = defaults.with_overrides(topic.configs)
        self._log_configs[topic.name] = (defaults, dict(topic.configs), config)
        return config

    async def apply_metadata(self) -> None:
        """reconcile(), after the file work of the replicas it will open (directories, segment and index files,
        partition.metadata, each fsynced: milliseconds per partition, seconds for a 1,000-partition topic) was
        done on a worker thread by prepare_logs(), so the event loop keeps serving requests meanwhile. Passes
        never overlap; callers arriving while one runs share the single pass queued behind it.

        The queued pass is a task of its own, which callers only wait for: a caller cancelled meanwhile (its
        client disconnected, so the request's task is cancelled) must not take the pass with it. When the pass
        ran in its first caller's task, that cancellation left a finished "queued pass" behind that every later
        caller took for one still to come: no pass ever ran again, and the broker, serving every other request,
        stopped hosting new partitions (tests/unit/test_replica_manager_apply.py)."""
        queued = self._apply_queued
        if queued is None:  # else a pass that has not started yet will see this caller's metadata too
            queued = self._apply_queued = asyncio.get_running_loop().create_task(self._apply_pass())
            queued.add_done_callback(_retrieve_outcome)
        await asyncio.shield(queued)

    async def _apply_pass(self) -> None:
        async with self._apply_lock:
            self._apply_queued = None  # metadata changed from here on may be missed by this pass: queue the next
            if self.stopping:
                return
            with STALL_WATCH.phase(f"Broker {self.broker_id}'s metadata apply pass, preparing logs"):
                await asyncio.to_thread(self.prepare_logs)
            # hosting a replica is ~50 µs of Python: 10,000 new ones in a row would stop the loop for
            # a second, so they are taken OPEN_BATCH at a time with requests served in between. The leader epoch
            # checkpoints the new leaders write (Partition._start_leader_epoch) are one background job, at the end
            with (STALL_WATCH.phase(f"Broker {self.broker_id}'s metadata apply pass, hosting replicas"),
                  background_sync.batch()):
                while not self.reconcile(max_new=OPEN_BATCH) and not self.stopping:
                    await asyncio.sleep(0)

    def _note_existing(self, topics: dict[str, TopicMetadata]) -> None:
        if self._existing_at_start is None:
            self._existing_at_start = {
                (t.name, i) for t in topics.values() for i, st in t.partitions.items() if self.broker_id in st.replicas
            }

    def prepare_logs(self) -> None:
        """On a worker thread: open or create the log of every replica the metadata assigns to this broker that
        it does not host yet, and write its partition.metadata, so reconcile() finds the log ready. A log left
        from an older topic of the same name is discarded here too. Failures are left for reconcile() to meet
        (and log) again."""
        topics = self._metadata.topics()
        self._note_existing(topics)
        # partition.metadata is written unsynced and made durable by one syncfs per PREPARE_SYNC_BATCH logs
        # (2 fsyncs per partition were most of a 10,000-partition topic's creation); a log counts as prepared only
        # once that sync ran, so reconcile() never hosts a replica whose stamp is not on disk yet
        stamped: dict[TopicPartition, uuid.UUID | None] = {}
        for topic in list(topics.values()):
            config: LogConfig | None = None
            for index, state in topic.partitions.items():
                key = (topic.name, index)
                if self.broker_id not in state.replicas or key in self.partitions or key in self._prepared:
                    continue
                if key in self.offline_partitions:
                    continue
                if self.stopping:
                    return
                config = config or self.log_config_for(topic)
                try:
                    self._prepare_log(topic, index, config, sync=False)
                except Exception:
                    continue
                stamped[key] = topic.topic_id
                if len(stamped) >= PREPARE_SYNC_BATCH:
                    self._prepared_durable(stamped)
        self._prepared_durable(stamped)

    def _prepared_durable(self, stamped: dict[TopicPartition, uuid.UUID | None]) -> None:
        if stamped:
            sync_filesystems(self._log_manager.log_dirs)
            self._prepared.update(stamped)
            stamped.clear()

    def _prepare_log(self, topic: TopicMetadata, index: int, config: LogConfig, *, sync: bool = True) -> Log:
        """The replica's log, opened or created, stamped with the topic's id. A log left from an older topic of
        the same name (deleted and re-created while this broker was away) is recognised by its partition.metadata
        topic id and discarded."""
        plog = self._log_manager.get_log(topic.name, index)
        key = (topic.name, index)
        if plog is None and self._log_manager.offline_dirs and key in (self._existing_at_start or ()):
            # Kafka creates no log for an existing replica while a dir is offline (LogManager.getOrCreateLog with
            # isNew=false): its data may sit in that dir. Kafka's controller says which replicas are new; kbus
            # counts those assigned after the broker started as new
            self.offline_partitions.add(key)
            raise KafkaStorageError(
                f"Can not create log for {topic.name}-{index} because log directories "
                f"{','.join(map(str, self._log_manager.offline_dirs))} are offline"
            )
        if plog is not None and read_partition_topic_id(plog.dir) not in (None, topic.topic_id):
            log.info("Log of %s-%d belongs to an older topic of that name: deleting it", topic.name, index)
            self._log_manager.delete_log(topic.name, index)
            plog = None
        if plog is None:
            plog = self._log_manager.create_log(topic.name, index, config)
        elif plog.config != config:
            self._log_manager.update_config(topic.name, config)
        write_partition_topic_id(plog.dir, topic.topic_id, sync=sync)
        return plog

    def reconcile(self, max_new: int | None = None) -> bool:
        """Make the hosted partitions match the metadata: open logs for assigned replicas, delete logs of deleted
        (or deleted and re-created) topics, become leader or follower as the partition states say, apply config
        changes. One partition failing (e.g. its log dir) does not stop the others. With `max_new`, at most that
        many replicas are newly hosted; returns False when some were left for another call."""
        budget = -1 if max_new is None else max_new
        skipped = False
        self.fetchers.resize(self.config.num_replica_fetchers)  # a dynamic num.replica.fetchers applies here
        topics = self._metadata.topics()
        self._note_existing(topics)
        wanted: set[TopicPartition] = set()
        leader_throttled: dict[str, ThrottledPartitions] = {}
        follower_throttled: dict[str, ThrottledPartitions] = {}
        for topic in topics.values():
            config = self.log_config_for(topic)
            if config.leader_replication_throttled_replicas:
                leader_throttled[topic.name] = parse_throttled_replicas(
                    config.leader_replication_throttled_replicas, self.broker_id
                )
            if config.follower_replication_throttled_replicas:
                follower_throttled[topic.name] = parse_throttled_replicas(
                    config.follower_replication_throttled_replicas, self.broker_id
                )
            for index, state in topic.partitions.items():
                if self.broker_id not in state.replicas:
                    continue
                wanted.add((topic.name, index))
                if (topic.name, index) in self.offline_partitions:
                    continue
                if (topic.name, index) not in self.partitions:
                    if budget == 0:
                        skipped = True
                        continue  # wanted (its log stays), hosted by the next call
                    budget -= 1
                try:
                    self._reconcile_partition(topic, index, state, config)
                except KafkaStorageError as e:
                    log.error("Replica %s-%d is offline: %s", topic.name, index, e)
                except Exception:
                    log.exception("Could not apply metadata to partition %s-%d", topic.name, index)
        self.leader_quota.set_throttled(leader_throttled)
        self.follower_quota.set_throttled(follower_throttled)
        # a deleted topic's replicas, and replicas a reassignment moved off this broker (Kafka's StopReplica with
        # deletePartition=true): their logs go
        gone = [k for k in self.partitions if k not in wanted]
        for key in gone:
            self._drop_partition(key, delete_log=False)  # the logs go below, all at once
        unhosted = [k for k in self._prepared if k not in wanted]  # its topic went before it was hosted
        for key in unhosted:
            del self._prepared[key]
        if gone or unhosted:
            self._delete_logs(gone + unhosted)
        if self.offline_partitions and not self.offline_partitions <= wanted:
            # an offline replica whose topic was deleted (or that moved off this broker) is forgotten: a topic
            # created later under the same name is new here
            self.offline_partitions &= wanted
            if self._existing_at_start is not None:
                self._existing_at_start &= wanted
        for name in [n for n in self._log_configs if n not in topics]:  # deleted topics
            del self._log_configs[name]
            METRICS.remove_series("topic", name)  # Kafka's BrokerTopicStats.removeMetrics
        return not skipped
    def _reconcile_partition(self, topic: TopicMetadata, index: int, state: PartitionState, config: LogConfig) -> None:
        key = (topic.name, index)
        part = self.partitions.get(key)
        if (
            part is not None
            and part.is_leader
            and part.state == state
            and part.topic_id == topic.topic_id
            and part.log.config is config
        ):
            # a leader nothing changed for: most of them when one partition of 10,000 moves, and every metadata
            # change walks them all
            return
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
                self._log_manager.update_config(topic.name, config)
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
        """Open (or create) the local replica, from the log prepare_logs() made ready when it did."""
        key = (topic.name, index)
        prepared = key in self._prepared and self._prepared.pop(key) == topic.topic_id
        plog = self._log_manager.get_log(topic.name, index) if prepared else None
        if plog is None or plog.config != config:
            plog = self._prepare_log(topic, index, config)
        part = Partition(
            topic.name,
            index,
            plog,
            state,
            self.broker_id,
            topic_id=topic.topic_id,
            checkpointed_high_watermark=self._saved_high_watermarks.get((topic.name, index)),
            alter_isr=self._alter_isr,
        )
        self.partitions[(topic.name, index)] = part
        self.log_dir_moves.resume(part)  # a move to another log dir under way when the broker stopped
        return part

    def _drop_partition(self, key: TopicPartition, *, delete_log: bool) -> None:
        self.log_dir_moves.cancel(key)
        part = self.partitions.pop(key)
        self.fetchers.unfollow(key)
        part.close()
        if part.is_leader:
            self._notify_leadership(key[0], key[1], False)
        if delete_log:
            self._delete_logs([key])

    def _delete_logs(self, keys: list[TopicPartition]) -> None:
        """The logs of replicas dropped for good (their topic deleted or re-created, or moved off this broker), in
        one LogManager.delete_logs: one fsync and one checkpoint of each log dir for them all, as Kafka's
        LogManager.asyncDelete (one each per partition made a 10,000-partition deletion quadratic, on the event
        loop)."""
        self._log_manager.delete_logs(keys)
        for key in keys:
            self._saved_high_watermarks.pop(key, None)
            log.info("Deleted log for partition %s-%d", *key)

    async def _alter_isr(
        self, topic: str, index: int, new_isr: list[int], based_on: PartitionState
    ) -> PartitionState | None:
        """The alter-ISR port every hosted Partition writes its ISR changes through."""
        return await asyncio.to_thread(self._metadata.alter_isr, topic, index, new_isr, based_on)

    # ---------------------------------------------------------------- periodic work
    def shrink_isrs(self) -> None:
        max_lag_ms = self.config.replica_lag_time_max_ms
        for part in list(self.partitions.values()):
            part.maybe_shrink_isr(max_lag_ms)

    def describe_log_dirs(self) -> list[tuple[LogDirUsage, dict[TopicPartition, int], dict[TopicPartition, int]]]:
        """Each log dir with its partitions' offset lag (DescribeLogDirs): how far the log end is below the high
        watermark, 0 for a replica that has everything committed; for a replica being moved into the dir (its
        future log), how far the copy is behind the current log (Kafka's ReplicaManager.getLogEndOffsetLag)."""
        out = []
        for usage in self._log_manager.describe_dirs():
            lags, future_lags = {}, {}
            for tp in usage.partition_sizes:
                part = self.partitions.get(tp)
                lags[tp] = max(part.high_watermark - part.log_end_offset, 0) if part is not None else 0
            for tp in usage.future_sizes:
                part, found = self.partitions.get(tp), self._log_manager.future_log(tp)
                behind = part.log_end_offset - found[0].log_end_offset if part is not None and found else 0
                future_lags[tp] = max(behind, 0)
            out.append((usage, lags, future_lags))
        return out

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {key: part.high_watermark for key, part in list(self.partitions.items())}

    def checkpoint_high_watermarks(self) -> None:
        """Kafka's replication-offset-checkpoint: where each replica's high watermark was, so a restarted
        replica never shows consumers records that were not committed."""
        partitions = self.partitions
        for d, keys in self._log_manager.partitions_by_dir():
            # the work per partition every interval: one lookup and one read (CheckpointFile compares the lists
            # with the last ones written and writes nothing when nothing moved). The keys stay in their lists: a
            # compiled loop variable of type tuple[str, int] would unbox each and box it again, a new tuple a use
            found = list(map(partitions.get, keys))
            values = [part.high_watermark for part in found if part is not None]
            if len(values) != len(keys):  # logs not hosted (yet): left out
                keys = [key for key, part in zip(keys, found, strict=True) if part is not None]
            try:
                self._log_manager.checkpoint_file(d, HW_CHECKPOINT).write_entries(keys, values)
            except OSError as e:
                self._failures.maybe_add_offline_log_dir(d, f"Error while writing {HW_CHECKPOINT} in {d}", e)

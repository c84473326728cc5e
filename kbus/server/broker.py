"""The broker: builds the managers, wires them together and runs their lifecycles (Kafka's KafkaServer).

Data flows one way: network -> apis (given `Managers`) -> replica manager / admin manager / coordinators ->
partitions -> log. Nothing here handles a request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from kio.schema.errors import ErrorCode

from kbus.common.broker_config import BROKER_CONFIGS, KafkaConfig
from kbus.common.cluster import BrokerEndpoint, BrokerInfo
from kbus.common.dynamic_broker_config import (
    BROKER_DEFAULT_ENTITY,
    FOLLOWER_THROTTLED_RATE,
    LEADER_THROTTLED_RATE,
    REPLICA_ALTER_LOG_DIRS_RATE,
    replication_throttled_rate,
    with_dynamic_configs,
)
from kbus.common.topic_config import LONG_MAX
from kbus.common.topics import OFFSETS_TOPIC
from kbus.server.apis.managers import Managers
from kbus.server.apis.transactions import append_markers
from kbus.server.coordinator import GroupCoordinator, start_group_coordinator
from kbus.server.log.dir_failure import LogDirFailureChannel
from kbus.server.log.log import AppendResult
from kbus.server.log.manager import LogManager
from kbus.server.metadata.admin_manager import AdminManager
from kbus.server.metadata.cache import MetadataCache
from kbus.server.metadata.identity import (
    read_meta_properties,
    settle_broker_id,
    settle_cluster_id,
    write_meta_properties,
)
from kbus.server.metadata.local import LocalMetadataStore
from kbus.server.metadata.offline_replicas import describe_log_dirs_probe
from kbus.server.metadata.types import MetadataStore, TopicMetadata
from kbus.server.partition.partition import Partition
from kbus.server.quotas.manager import QuotaManagers, register_metrics
from kbus.server.quotas.rate import RateConfig
from kbus.server.replication.controlled_shutdown import controlled_shutdown
from kbus.server.replication.replica_manager import LeadershipListener, ReplicaManager
from kbus.server.security.acl_cache import AclCache
from kbus.server.security.manager import SecurityManager
from kbus.server.share.coordinator import ShareCoordinator, start_share_coordinator
from kbus.server.share.persister import SharePersister
from kbus.server.transaction.service import TransactionService
from kbus.server.util.scheduler import Scheduler

log = logging.getLogger("kbus.server")


class Broker:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.started_at_ms = int(time.time() * 1000)
        # TLS contexts and SASL settings per listener, checked first so a bad one stops the start before anything
        # is created on disk; SCRAM logins read the credentials from the metadata store made below
        self.security = SecurityManager(config, lambda user: self.metadata.user_credentials(user))
        usable = []
        for d in config.log_dirs:
            try:  # a dir that cannot be made is offline from the start (the log manager says so); not fatal here
                d.mkdir(parents=True, exist_ok=True)
                usable.append(d)
            except OSError:
                continue
        first_dir = usable[0] if usable else config.log_dirs[0]
        try:
            self._meta = read_meta_properties(first_dir)
        except OSError:
            self._meta = {}
        # meta.properties pins broker.id to the data it describes
        self.broker_id = settle_broker_id(config.broker_id, self._meta, first_dir)
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
            self.metadata.set_offline_replica_probe(describe_log_dirs_probe(self.security.inter_broker))
        else:
            self.metadata = LocalMetadataStore(first_dir, info)
        self.cache = MetadataCache(self.metadata, config.cluster_id)
        self.log_dir_failures = LogDirFailureChannel()
        self.log_manager = LogManager(config.log_dirs, config.log_defaults, failure_channel=self.log_dir_failures,
                                      recovery_threads_per_dir=config.num_recovery_threads_per_data_dir)
        self.replicas = ReplicaManager(config, self.broker_id, self.metadata, self.log_manager)
        self.inter_broker_security = self.replicas.client_security = self.security.inter_broker
        self.admin = AdminManager(
            config, self.metadata, self.replicas.apply_metadata, self.replicas.default_log_config
        )
        self.group_coordinator: GroupCoordinator | None = None
        self.transactions: TransactionService | None = None
        self.share_coordinator: ShareCoordinator | None = None
        self.share_persister: SharePersister | None = None
        # the authorizer's ACLs, reloaded in order on every change notification (and at once for this broker's own)
        authorizer = self.security.authorizer
        self.acl_cache = None if authorizer is None else AclCache(self.metadata, authorizer)
        # what the API handlers are given; the coordinators join it in start()
        self.managers = Managers(
            config, self.broker_id, self.cache, self.replicas, self.admin, groups=None,
            security=self.security, users=self.metadata, acls=self.acl_cache, quota_store=self.metadata,
            group_configs=self.metadata,
            quotas=QuotaManagers(
                RateConfig(config.quota_window_num, config.quota_window_size_seconds * 1000),
                RateConfig(config.controller_quota_window_num, config.controller_quota_window_size_seconds * 1000),
            ),
        )
        self.scheduler = Scheduler()
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reconcile_scheduled = False
        self._reconcile_tasks: set[asyncio.Task[None]] = set()
        self._skipped_dynamic: list[str] = []
        # the network layer's connection limits: called with the config layers (server.properties, cluster-wide
        # dynamic, this broker's dynamic) whenever dynamic broker configs may have changed
        self.connection_config_listeners: list[Callable[[list[Mapping[str, str]]], None]] = []

    @property
    def cluster_id(self) -> str:
        return self.cache.cluster_id

    @property
    def partitions(self) -> dict[tuple[str, int], Partition]:
        return self.replicas.partitions

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.replicas.get_partition(topic, index)

    def controller_id(self) -> int:
        return self.metadata.controller_id()

    def offline_partitions(self) -> int:
        """Partitions of the cluster with no leader (the controller's OfflinePartitionsCount)."""
        return sum(1 for t in self.cache.topics().values() for s in t.partitions.values() if s.leader < 0)

    def offline_log_dirs(self) -> int:
        """This broker's log dirs taken offline by I/O errors (Kafka's OfflineLogDirectoryCount)."""
        return len(self.log_manager.offline_dirs)

    # ---------------------------------------------------------------- what the TransactionService uses
    def topics(self) -> dict[str, TopicMetadata]:
        return self.cache.topics()

    def live_brokers(self) -> list[BrokerInfo]:
        return self.cache.brokers()

    def partition_leader(self, topic: str, index: int) -> BrokerInfo | None:
        return self.cache.partition_leader(topic, index)

    def leader_partition(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]:
        return self.replicas.leader_partition(topic, index)

    def append_records(
        self, part: Partition, records: bytes | bytearray, acks: int, *, from_coordinator: bool = False,
        transaction_version: int = 0,
    ) -> AppendResult:
        return self.replicas.append_records(part, records, acks, from_coordinator=from_coordinator,
                                            transaction_version=transaction_version)

    def acks_satisfied(self, part: Partition, result: AppendResult, acks: int) -> bool:
        return self.replicas.acks_satisfied(part, result, acks)

    async def wait_for_acks(self, part: Partition, result: AppendResult, acks: int, timeout_ms: int) -> None:
        await self.replicas.wait_for_acks(part, result, acks, timeout_ms)

    def add_leadership_listener(self, callback: LeadershipListener) -> None:
        self.replicas.add_leadership_listener(callback)

    def allocate_producer_id(self) -> int:
        return self.admin.allocate_producer_id()

    async def ensure_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        await self.admin.ensure_topic(name, num_partitions, replication_factor, configs)

    def _follow_quotas(self) -> None:
        """Load every client quota, then apply each change announced through /config/changes (by any broker,
        kbus configs or Kafka's kafka-configs) without a restart, as Kafka's DynamicConfigManager does."""
        quotas = self.managers.quotas
        register_metrics(quotas)
        quotas.replace_all(self.metadata.quota_configs())
        self.metadata.watch_quotas(quotas.entity_changed)

    # ---------------------------------------------------------------- lifecycle
    async def start(self, listen: Callable[[], None] | None = None) -> None:
        """Load the logs, then `listen()` on the broker's ports, then register and read the cluster's metadata
        (Kafka's KafkaServer.startup order: a registered broker may be made leader at once, so it must already
        take connections), then start the coordinators. Requests are served once the caller starts the server."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.log_manager.startup)
        self.replicas.load_high_watermarks()
        self.metadata.add_listener(self._schedule_reconcile)
        try:
            if listen is not None:
                listen()
            await asyncio.to_thread(self.metadata.start)
            try:
                # in a cluster the id comes from ZooKeeper; data written for one cluster is never served in another
                self.cache.cluster_id = settle_cluster_id(self.cache.cluster_id, self.metadata.cluster_id, self._meta)
                write_meta_properties(self.log_manager.live_log_dirs, self._meta, self.broker_id,
                                      self.cache.cluster_id)  # fmt: skip
            except RuntimeError:
                self.metadata.stop()
                raise
        except BaseException:
            self.log_manager.shutdown()  # leave the logs clean: the next start needs no recovery
            raise
        try:
            await self._start_registered()
        except BaseException:
            # Registered, and maybe controller: close the ZooKeeper session now, as Kafka's failed startup closes
            # its zkClient, so the cluster forgets this broker at once instead of making it leader (or waiting for
            # a controller) for a whole session timeout while it refuses connections.
            if self.acl_cache is not None:
                self.acl_cache.stop()
            self.metadata.stop()
            self.log_manager.shutdown()
            raise

    async def _start_registered(self) -> None:
        """What start-up does once the broker is registered: configs, ACLs and quotas followed, replicas hosted,
        the coordinators started."""
        self._apply_dynamic_configs()
        if self.acl_cache is not None:
            await asyncio.to_thread(self.acl_cache.start)
        await asyncio.to_thread(self._follow_quotas)
        # an I/O error anywhere takes its dir offline on the loop (Kafka's LogDirFailureHandler thread)
        self.log_dir_failures.add_listener(self._on_log_dir_failure)
        await self.replicas.apply_metadata()
        if self.log_manager.offline_dirs:
            self.replicas.notify_controller_of_log_dir_event()  # dirs offline from the start
        self.group_coordinator = start_group_coordinator(self.config, self.replicas, self.metadata)
        self.transactions = TransactionService(self, append_markers)
        self.transactions.marker_listeners.append(self._on_txn_marker)
        self.transactions.start()
        self.managers.groups, self.managers.transactions = self.group_coordinator, self.transactions
        self.share_coordinator = start_share_coordinator(self.config, self.replicas, self.metadata)
        self.managers.share_coordinator = self.share_coordinator
        self.share_persister = SharePersister(self.managers, self.share_coordinator, self.inter_broker_security,
                                              self.config.request_timeout_ms)
        self.managers.share.persister = self.share_persister
        self.managers.share.group_config = self.metadata.group_config
        self._schedule_housekeeping()

    def _on_log_dir_failure(self, log_dir: Path) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.replicas.handle_log_dir_failure, log_dir)

    def _on_txn_marker(self, tp: tuple[str, int], producer_id: int, committed: bool) -> None:
        # a marker on __consumer_offsets decides the offsets committed in that transaction
        if tp[0] == OFFSETS_TOPIC and self.group_coordinator is not None:
            self.group_coordinator.complete_txn(tp[1], producer_id, committed)

    def _schedule_housekeeping(self) -> None:
        """File-heavy jobs run on worker threads (the logs lock themselves); ISR checks stay on the loop."""
        cfg = self.config
        jobs = self.scheduler
        jobs.schedule("log-retention", cfg.log_retention_check_interval_ms, self._run_retention, in_thread=True)
        jobs.schedule(
            "recovery-point-checkpoint", cfg.log_flush_offset_checkpoint_interval_ms, self.log_manager.checkpoint,
            in_thread=True,
        )  # fmt: skip
        jobs.schedule(
            "highwatermark-checkpoint", cfg.replica_high_watermark_checkpoint_interval_ms,
            self.replicas.checkpoint_high_watermarks, in_thread=True,
        )  # fmt: skip
        jobs.schedule("log-cleaner", cfg.log_cleaner_backoff_ms, self._run_cleaner, in_thread=True)
        flusher_ms = cfg.log_flush_scheduler_interval_ms
        if flusher_ms is not None and flusher_ms < LONG_MAX:
            # Kafka's kafka-log-flusher: a log whose flush.ms has passed since its last flush is flushed even when
            # nothing more is appended to it. Its default period, Long.MaxValue ms, never comes: not scheduled
            jobs.schedule("log-flusher", flusher_ms, self._run_flush, in_thread=True)
        jobs.schedule("isr-expiration", max(cfg.replica_lag_time_max_ms // 2, 100), self.replicas.shrink_isrs)

    async def controlled_shutdown(self) -> None:
        if self.config.controlled_shutdown_enable:
            await controlled_shutdown(self.metadata, self.replicas)

    async def stop(self) -> None:
        self.stopping = True
        await self.scheduler.stop()
        await self.replicas.stop()
        if self.group_coordinator is not None:
            await self.group_coordinator.shutdown()
        if self.transactions is not None:
            await self.transactions.stop()
        if self.share_persister is not None:
            await self.share_persister.close()
        if self.share_coordinator is not None:
            await self.share_coordinator.shutdown()
        if self.acl_cache is not None:
            self.acl_cache.stop()
        self.metadata.stop()
        self.replicas.checkpoint_high_watermarks()
        self.log_manager.shutdown()

    # ---------------------------------------------------------------- housekeeping
    def _run_retention(self) -> None:
        # a leader keeps what its followers may still need: nothing at or above the high watermark goes
        deleted = self.log_manager.run_retention(int(time.time() * 1000), self.replicas.high_watermarks())
        if deleted:
            log.info("Retention deleted %d segment(s)", deleted)

    def _run_flush(self) -> None:
        self.log_manager.run_flush()

    def _run_cleaner(self) -> None:
        """Log compaction (cleanup.policy=compact, e.g. __consumer_offsets)."""
        if not self.config.log_cleaner_enable:
            return
        rewritten = self.log_manager.run_cleaner()
        if rewritten:
            log.info("Log cleaner rewrote %d segment(s)", rewritten)

    # ---------------------------------------------------------------- metadata changes
    def _schedule_reconcile(self) -> None:
        """Metadata listeners may fire on any thread (kazoo's): hop onto the loop, coalescing bursts."""
        loop = self._loop
        if loop is None or self._reconcile_scheduled:
            return
        self._reconcile_scheduled = True
        loop.call_soon_threadsafe(self._reconcile_soon)

    def _reconcile_soon(self) -> None:
        self._reconcile_scheduled = False
        if self.stopping:
            return
        self._apply_dynamic_configs()
        task = asyncio.get_running_loop().create_task(self._apply_metadata())
        self._reconcile_tasks.add(task)
        task.add_done_callback(self._reconcile_tasks.discard)

    async def _apply_metadata(self) -> None:
        try:
            await self.replicas.apply_metadata()
        except Exception:
            log.exception("Could not apply a metadata change")

    def _apply_dynamic_configs(self) -> None:
        """kafka-configs --entity-type brokers without a restart: the dynamic keys (log.* defaults,
        min.insync.replicas, ...) from /config/brokers/<default> and /config/brokers/<id> over server.properties;
        the reconcile that follows gives every log without its own override the new defaults."""
        layers = self.metadata.broker_configs()
        cluster_default, own = layers.get(BROKER_DEFAULT_ENTITY, {}), layers.get(str(self.broker_id), {})
        for listener in self.connection_config_listeners:
            listener([self.admin.static_config.raw, cluster_default, own])
        self.replicas.update_replication_rates(
            replication_throttled_rate(LEADER_THROTTLED_RATE, cluster_default, own),
            replication_throttled_rate(FOLLOWER_THROTTLED_RATE, cluster_default, own),
        )
        self.replicas.log_dir_moves.set_rate(
            replication_throttled_rate(REPLICA_ALTER_LOG_DIRS_RATE, cluster_default, own)
        )
        effective, skipped = with_dynamic_configs(self.admin.static_config, cluster_default, own)
        if skipped and skipped != self._skipped_dynamic:
            log.warning("Ignoring dynamic broker config(s) that are invalid or not dynamic: %s", ", ".join(skipped))
        self._skipped_dynamic = skipped
        if effective == self.config:
            return
        old = vars(self.config)
        changed = [key for key, spec in sorted(BROKER_CONFIGS.items()) if vars(effective)[spec.attr] != old[spec.attr]]
        self.config = self.replicas.config = self.admin.config = self.managers.config = effective
        log.info("Dynamic broker config(s) now in effect: %s",
                 ", ".join(f"{k}={vars(effective)[BROKER_CONFIGS[k].attr]}" for k in changed))  # fmt: skip

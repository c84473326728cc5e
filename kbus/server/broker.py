"""The broker: owns the managers (metadata, logs, partitions, coordinator) and their lifecycles.

Data flows one way: network -> apis -> broker managers -> log. API handlers reach state only through this object;
the log never sees a request.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kbus.protocol.record_batch import iter_complete_batches
from kbus.server.config import KafkaConfig
from kbus.server.log.config import LogConfig
from kbus.server.log.log import AppendResult
from kbus.server.log.manager import LogManager
from kbus.server.metadata.errors import UnknownTopicError
from kbus.server.metadata.local import LocalMetadataStore, write_atomically
from kbus.server.metadata.types import BrokerInfo, TopicMetadata
from kbus.server.partition import Partition

log = logging.getLogger("kbus.server")

LeadershipListener = Callable[[str, int, bool], None]


def new_cluster_id() -> str:
    """Kafka's cluster id format: a URL-safe base64 UUID without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def read_meta_properties(log_dir: Path) -> dict[str, str]:
    path = log_dir / "meta.properties"
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


class Broker:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.cluster_id = config.cluster_id
        self.metadata: Any = None
        self.log_manager: LogManager | None = None
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.group_coordinator: Any = None
        self.started_at_ms = int(time.time() * 1000)
        self._leadership_listeners: list[LeadershipListener] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._reconcile_scheduled = False
        self.advertised = config.advertised_listeners[0]
        self.stopping = False

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        first_dir = self.config.log_dirs[0]
        for d in self.config.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self._load_identity(first_dir)
        info = BrokerInfo(self.broker_id, self.advertised.host, self.advertised.port)
        if self.config.zookeeper_connect:
            zk = importlib.import_module("kbus.server.metadata.zk_store")
            self.metadata = zk.ZkMetadataStore(self.config.zookeeper_connect, self.broker_id, info, self.config)
        else:
            self.metadata = LocalMetadataStore(first_dir, info)
        self.log_manager = LogManager(self.config.log_dirs, self.default_log_config())
        await asyncio.to_thread(self.log_manager.startup)
        self.metadata.add_listener(self._schedule_reconcile)
        await asyncio.to_thread(self.metadata.start)
        cluster_id = getattr(self.metadata, "cluster_id", None)
        if cluster_id:
            self.cluster_id = cluster_id
        self.reconcile()
        with contextlib.suppress(ModuleNotFoundError):
            coordinator = importlib.import_module("kbus.server.coordinator")
            if hasattr(coordinator, "start"):
                res = coordinator.start(self)
                if asyncio.iscoroutine(res):
                    await res
        self._tasks.append(
            asyncio.create_task(self._periodic(self.config.log_retention_check_interval_ms, self._run_retention))
        )
        self._tasks.append(
            asyncio.create_task(self._periodic(self.config.log_flush_offset_checkpoint_interval_ms, self._checkpoint))
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
        with contextlib.suppress(ModuleNotFoundError):
            coordinator = importlib.import_module("kbus.server.coordinator")
            if hasattr(coordinator, "stop"):
                res = coordinator.stop(self)
                if asyncio.iscoroutine(res):
                    await res
        if self.metadata is not None:
            self.metadata.stop()
        if self.log_manager is not None:
            self.log_manager.shutdown()

    def _load_identity(self, first_dir: Path) -> None:
        """meta.properties (Kafka's file) pins broker.id and cluster.id to the data they describe."""
        meta = read_meta_properties(first_dir)
        if self.broker_id < 0:
            self.broker_id = int(meta.get("broker.id", "0"))
        elif "broker.id" in meta and int(meta["broker.id"]) != self.broker_id:
            raise RuntimeError(
                f"Configured broker.id {self.broker_id} doesn't match stored broker.id {meta['broker.id']} "
                f"in meta.properties under {first_dir}. If you moved your data, make sure your configured broker.id "
                "matches."
            )
        if not self.cluster_id:
            self.cluster_id = meta.get("cluster.id") or new_cluster_id()
        if meta.get("cluster.id") != self.cluster_id or meta.get("broker.id") != str(self.broker_id):
            for d in self.config.log_dirs:
                write_atomically(
                    d / "meta.properties",
                    f"#\n#{time.ctime()}\nversion=0\nbroker.id={self.broker_id}\ncluster.id={self.cluster_id}\n",
                )

    async def _periodic(self, interval_ms: int, fn: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 100) / 1000)
            try:
                fn()
            except Exception:
                log.exception("periodic task %s failed", fn.__name__)

    def _run_retention(self) -> None:
        assert self.log_manager is not None
        deleted = self.log_manager.run_retention(int(time.time() * 1000))
        if deleted:
            log.info("Retention deleted %d segment(s)", deleted)

    def _checkpoint(self) -> None:
        assert self.log_manager is not None
        self.log_manager.checkpoint()

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
        topics, apply leadership and config changes."""
        assert self.log_manager is not None
        topics = self.metadata.topics()
        wanted: set[tuple[str, int]] = set()
        for topic in topics.values():
            config = self.log_config_for(topic)
            for index, state in topic.partitions.items():
                if self.broker_id not in state.replicas:
                    continue
                key = (topic.name, index)
                wanted.add(key)
                part = self.partitions.get(key)
                if part is None:
                    plog = self.log_manager.get_log(topic.name, index) or self.log_manager.create_log(
                        topic.name, index, config
                    )
                    part = Partition(topic.name, index, plog, state, self.broker_id)
                    self.partitions[key] = part
                    self._notify_leadership(topic.name, index, part.is_leader)
                else:
                    was_leader = part.is_leader
                    part.state = state
                    if part.log.config != config:
                        self.log_manager.update_config(topic.name, config)
                    if was_leader != part.is_leader:
                        self._notify_leadership(topic.name, index, part.is_leader)
        for key in [k for k in self.partitions if k not in wanted]:
            part = self.partitions.pop(key)
            part.wake_fetchers()
            if part.is_leader:
                self._notify_leadership(key[0], key[1], False)
            if key[0] not in topics:
                self.log_manager.delete_log(*key)
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

    async def append_records(self, part: Partition, records: bytes, acks: int) -> AppendResult:
        """Leader append. Standalone, the leader is the whole ISR, so acks=1 and acks=-1 complete together."""
        return part.append_as_leader(records)

    def allocate_producer_id(self) -> int:
        return self.metadata.allocate_producer_id()

    # ---------------------------------------------------------------- cluster view
    def advertised_endpoint(self) -> tuple[str, int]:
        return self.advertised.host, self.advertised.port

    def live_brokers(self) -> list[BrokerInfo]:
        return self.metadata.brokers()

    def controller_id(self) -> int:
        get = getattr(self.metadata, "controller_id", None)
        return get() if get else self.broker_id

    def partition_leader(self, topic: str, index: int) -> BrokerInfo | None:
        t = self.metadata.topics().get(topic)
        if t is None or index not in t.partitions:
            return None
        leader = t.partitions[index].leader
        return next((b for b in self.live_brokers() if b.broker_id == leader), None)

    # ---------------------------------------------------------------- internal topics (group coordinator)
    def ensure_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicMetadata:
        existing = self.metadata.topics().get(name)
        if existing is not None:
            return existing
        rf = max(1, min(replication_factor, len(self.live_brokers())))
        topic = self.metadata.create_topic(name, num_partitions, rf, configs)
        self.reconcile()
        return topic

    async def append_internal(self, topic: str, index: int, records: bytes) -> int:
        part = self.get_partition(topic, index)
        if part is None or not part.is_leader:
            raise UnknownTopicError(f"this broker does not lead {topic}-{index}")
        return part.append_as_leader(records).first_offset

    def read_log(self, topic: str, index: int, start_offset: int = 0) -> Iterator[bytes]:
        part = self.get_partition(topic, index)
        if part is None:
            return
        offset = max(start_offset, part.log.log_start_offset)
        while offset < part.high_watermark:
            data = part.log.read(offset, 1 << 20, max_offset=part.high_watermark)
            chunk = data.to_bytes()
            if not chunk:
                return
            yield chunk
            last = None
            for h in iter_complete_batches(chunk):
                last = h
            if last is None:
                return
            offset = last.next_offset

"""Consumer groups (classic protocol) and committed offsets, kept in `__consumer_offsets`.

The broker calls `start(broker)` at startup and `await stop(broker)` at shutdown; `start` attaches the
GroupCoordinator as `broker.group_coordinator` and follows leadership of the offsets topic's partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from kbus.protocol.record_batch import iter_complete_batches
from kbus.server.coordinator.coordinator import GroupConfig, GroupCoordinator
from kbus.server.coordinator.records import OFFSETS_TOPIC
from kbus.server.coordinator.timers import TimerDriver

if TYPE_CHECKING:
    from kbus.server.broker import Broker

__all__ = ["GroupConfig", "GroupCoordinator", "start", "stop"]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class OffsetsCommitTimeout(Exception):
    """The in-sync replicas did not acknowledge a coordinator append within offsets.commit.timeout.ms."""


class BrokerOffsetsLog:
    """`OffsetsLog` over the broker's partitions of `__consumer_offsets`.

    Appends wait for the in-sync replicas (Kafka's coordinator writes with acks=-1), so a commit that was
    acknowledged survives the coordinator's failover. Loads read to the log end, not the high watermark: a freshly
    elected leader's high watermark can trail records that were already acknowledged (Kafka loads the same way).
    """

    def __init__(self, broker: Broker, commit_timeout_ms: int = 5000, *, topic: str = OFFSETS_TOPIC) -> None:
        self._broker = broker
        self._timeout = commit_timeout_ms / 1000
        self._topic = topic  # the transaction coordinator uses the same for __transaction_state

    async def append(self, partition: int, records: bytes) -> int:
        """acks=-1 with min.insync.replicas, as Kafka's coordinator writes: NOT_ENOUGH_REPLICAS and a timeout
        both surface as exceptions (the coordinator answers COORDINATOR_NOT_AVAILABLE)."""
        part, error = self._broker.leader_partition(self._topic, partition)
        if part is None:
            raise OffsetsCommitTimeout(f"{self._topic}-{partition}: not the leader ({error.name})")
        result = self._broker.append_records(part, records, -1)
        await self._broker.wait_for_acks(part, result, -1, int(self._timeout * 1000))
        return result.first_offset

    async def read(self, partition: int) -> list[bytes]:
        # The partition is not served while it loads, so reading it off the loop cannot race our own appends.
        return await asyncio.to_thread(self._read_all, partition)

    def _read_all(self, partition: int) -> list[bytes]:
        part = self._broker.get_partition(self._topic, partition)
        if part is None:
            return []
        log = part.log
        offset, end = log.log_start_offset, log.log_end_offset
        chunks = []
        while offset < end:
            chunk = log.read_bytes(offset, 1 << 20, max_offset=end)
            last = None
            for header in iter_complete_batches(chunk):
                last = header
            if last is None:
                break
            chunks.append(chunk)
            offset = last.next_offset
        return chunks


def group_config(broker: Broker) -> GroupConfig:
    cfg = broker.config
    raw: Any = getattr(cfg, "raw", {}) or {}
    return GroupConfig(
        offsets_topic_num_partitions=cfg.offsets_topic_num_partitions,
        initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
        min_session_timeout_ms=cfg.group_min_session_timeout_ms,
        max_session_timeout_ms=cfg.group_max_session_timeout_ms,
        max_size=cfg.group_max_size,
        offsets_retention_ms=cfg.offsets_retention_minutes * 60_000,
        offsets_retention_check_interval_ms=cfg.offsets_retention_check_interval_ms,
        offset_metadata_max_bytes=int(raw.get("offset.metadata.max.bytes", 4096)),
    )


def start(broker: Broker) -> GroupCoordinator:
    def partition_exists(topic: str, partition: int) -> bool:
        t = broker.metadata.topics().get(topic)
        return t is not None and partition in t.partitions

    def live_topics() -> set[str] | None:
        names = set(broker.metadata.topics())
        # __consumer_offsets exists whenever there is anything to clean up; without it the view is not loaded.
        return names if OFFSETS_TOPIC in names else None

    def leads_partition(partition: int) -> bool:
        part = broker.get_partition(OFFSETS_TOPIC, partition)
        return part is not None and part.is_leader

    raw: Any = getattr(broker.config, "raw", {}) or {}
    offsets_log = BrokerOffsetsLog(broker, int(raw.get("offsets.commit.timeout.ms", 5000)))

    def offsets_partitions() -> int | None:
        # groups map onto the partitions the topic really has, whatever the config says now
        t = broker.metadata.topics().get(OFFSETS_TOPIC)
        return len(t.partitions) if t is not None else None

    coordinator = GroupCoordinator(
        group_config(broker),
        offsets_log,
        wall_clock_ms,
        offsets_partitions=offsets_partitions,
        partition_exists=partition_exists,
        live_topics=live_topics,
        leads_partition=leads_partition,
    )
    driver = TimerDriver(coordinator.timers, wall_clock_ms)
    driver.start()
    coordinator.driver = driver  # type: ignore[attr-defined]

    def on_leadership(topic: str, partition: int, is_leader: bool) -> None:
        if topic != OFFSETS_TOPIC:
            return
        if is_leader:
            coordinator.on_election(partition)
        else:
            coordinator.on_resignation(partition)

    loop = asyncio.get_running_loop()
    known_topics: set[str] = set(live_topics() or ())

    def on_metadata_change() -> None:
        # Runs on the loop. A deleted topic takes its committed offsets with it (Kafka's handleDeletedPartitions).
        current = live_topics()
        if current is None:
            return
        gone = known_topics - current
        known_topics.clear()
        known_topics.update(current)
        if gone:
            coordinator.run_in_background(coordinator.on_topics_deleted(gone))

    broker.group_coordinator = coordinator
    broker.add_leadership_listener(on_leadership)

    def metadata_changed() -> None:
        # Metadata listeners may fire on any thread (kazoo's); after shutdown the loop is gone.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(on_metadata_change)

    broker.metadata.add_listener(metadata_changed)
    coordinator._schedule_cleanup()
    return coordinator


async def stop(broker: Broker) -> None:
    coordinator: GroupCoordinator | None = getattr(broker, "group_coordinator", None)
    if coordinator is None:
        return
    driver = getattr(coordinator, "driver", None)
    if driver is not None:
        await driver.stop()
    await coordinator.shutdown()

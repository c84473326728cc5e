"""Consumer groups (classic protocol) and committed offsets, kept in `__consumer_offsets`.

The broker calls `start(broker)` at startup and `await stop(broker)` at shutdown; `start` attaches the
GroupCoordinator as `broker.group_coordinator` and follows leadership of the offsets topic's partitions.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from kbus.server.coordinator.coordinator import GroupConfig, GroupCoordinator
from kbus.server.coordinator.records import OFFSETS_TOPIC
from kbus.server.coordinator.timers import TimerDriver

if TYPE_CHECKING:
    from kbus.server.broker import Broker

__all__ = ["GroupConfig", "GroupCoordinator", "start", "stop"]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class BrokerOffsetsLog:
    """`OffsetsLog` over the broker's partition of `__consumer_offsets`."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def append(self, partition: int, records: bytes) -> int:
        return await self._broker.append_internal(OFFSETS_TOPIC, partition, records)

    async def read(self, partition: int) -> list[bytes]:
        # The partition is not served while it loads, so reading it off the loop cannot race our own appends.
        return await asyncio.to_thread(lambda: list(self._broker.read_log(OFFSETS_TOPIC, partition)))


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

    def topic_exists(topic: str) -> bool:
        return topic in broker.metadata.topics()

    def leads_partition(partition: int) -> bool:
        part = broker.get_partition(OFFSETS_TOPIC, partition)
        return part is not None and part.is_leader

    coordinator = GroupCoordinator(
        group_config(broker), BrokerOffsetsLog(broker), wall_clock_ms,
        partition_exists=partition_exists, topic_exists=topic_exists, leads_partition=leads_partition,
    )
    driver = TimerDriver(coordinator.timers, wall_clock_ms)
    driver.start()
    coordinator.driver = driver  # type: ignore[attr-defined]

    def on_leadership(topic: str, partition: int, is_leader: bool) -> None:
        if topic == OFFSETS_TOPIC:
            if is_leader:
                coordinator.on_election(partition)
            else:
                coordinator.on_resignation(partition)
        elif not is_leader and topic not in broker.metadata.topics():
            # The topic was deleted: its committed offsets go with it (Kafka's handleDeletedPartitions).
            coordinator._spawn(coordinator.on_topics_deleted([topic]))

    broker.group_coordinator = coordinator
    broker.add_leadership_listener(on_leadership)
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

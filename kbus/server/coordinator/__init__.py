"""Consumer groups (classic and consumer protocols) and committed offsets, kept in `__consumer_offsets`.

`start_group_coordinator()` builds the GroupCoordinator over the broker's replicas of `__consumer_offsets` (an
`InternalTopicLog`), loads and unloads its partitions as leadership moves (`follow_leadership`), and drops the
offsets of deleted topics; `await coordinator.shutdown()` stops it.
"""

from __future__ import annotations

import asyncio
import contextlib

from kbus.common.broker_config import KafkaConfig, parse_assignors, parse_migration_policy
from kbus.common.clock import now_ms
from kbus.common.topics import INTERNAL_TOPICS, OFFSETS_TOPIC
from kbus.server.coordinator.commit_batch import PartitionExists
from kbus.server.coordinator.consumer_group import TopicImage
from kbus.server.coordinator.coordinator import GroupConfig, GroupCoordinator
from kbus.server.coordinator.state_topic import InternalTopicLog, StateReplicas, follow_leadership
from kbus.server.coordinator.timers import TimerDriver
from kbus.server.metadata.types import MetadataStore

__all__ = ["GroupConfig", "GroupCoordinator", "group_config", "start_group_coordinator"]


# compiled (kbus/common/clock.py): an OffsetCommit reads the coordinator's clock three times
wall_clock_ms = now_ms


def group_config(cfg: KafkaConfig) -> GroupConfig:
    return GroupConfig(
        offsets_topic_num_partitions=cfg.offsets_topic_num_partitions,
        initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
        min_session_timeout_ms=cfg.group_min_session_timeout_ms,
        max_session_timeout_ms=cfg.group_max_session_timeout_ms,
        max_size=cfg.group_max_size,
        offsets_retention_ms=cfg.offsets_retention_minutes * 60_000,
        offsets_retention_check_interval_ms=cfg.offsets_retention_check_interval_ms,
        offset_metadata_max_bytes=cfg.offset_metadata_max_bytes,
        offsets_topic_replication_factor=cfg.offsets_topic_replication_factor,
        offsets_topic_segment_bytes=cfg.offsets_topic_segment_bytes,
        consumer_session_timeout_ms=cfg.group_consumer_session_timeout_ms,
        consumer_heartbeat_interval_ms=cfg.group_consumer_heartbeat_interval_ms,
        consumer_max_size=cfg.group_consumer_max_size,
        consumer_assignors=parse_assignors(cfg.group_consumer_assignors),
        consumer_migration_policy=parse_migration_policy(cfg.group_consumer_migration_policy),
        share_session_timeout_ms=cfg.group_share_session_timeout_ms,
        share_heartbeat_interval_ms=cfg.group_share_heartbeat_interval_ms,
        share_max_size=cfg.group_share_max_size,
        share_max_groups=cfg.group_share_max_groups,
    )


def start_group_coordinator(config: KafkaConfig, replicas: StateReplicas, metadata: MetadataStore) -> GroupCoordinator:
    """Runs on the event loop."""

    # compiled: every OffsetCommit asks, per partition (a lookup of the one topic, not a copy of every topic)
    partition_exists = PartitionExists(metadata.topic)

    def live_topics() -> set[str] | None:
        names = set(metadata.topics())
        # __consumer_offsets exists whenever there is anything to clean up; without it the view is not loaded.
        return names if OFFSETS_TOPIC in names else None

    def leads_partition(partition: int) -> bool:
        part = replicas.get_partition(OFFSETS_TOPIC, partition)
        return part is not None and part.is_leader

    def offsets_partitions() -> int | None:
        # groups map onto the partitions the topic really has, whatever the config says now
        t = metadata.topics().get(OFFSETS_TOPIC)
        return len(t.partitions) if t is not None else None

    offsets_log = InternalTopicLog(OFFSETS_TOPIC, replicas, config.offsets_commit_timeout_ms)
    coordinator = GroupCoordinator(
        group_config(config),
        offsets_log,
        wall_clock_ms,
        offsets_partitions=offsets_partitions,
        partition_exists=partition_exists,
        live_topics=live_topics,
        leads_partition=leads_partition,
    )
    coordinator.driver = TimerDriver(coordinator.timers, wall_clock_ms)
    coordinator.driver.start()
    follow_leadership(replicas, OFFSETS_TOPIC, coordinator)

    loop = asyncio.get_running_loop()
    known_topics: set[str] = set(live_topics() or ())

    def refresh_topic_image() -> None:
        topics = metadata.topics()
        coordinator.topic_image = TopicImage(
            version=coordinator.topic_image.version + 1,
            counts={name: len(t.partitions) for name, t in topics.items()},
            ids={name: t.topic_id for name, t in topics.items()},
            names_by_id={t.topic_id: name for name, t in topics.items()},
            internal=frozenset(INTERNAL_TOPICS),
        )

    refresh_topic_image()

    def on_metadata_change() -> None:
        # Runs on the loop. The consumer groups see the new topics (a regex subscription may match one); a deleted
        # topic takes its committed offsets with it (Kafka's handleDeletedPartitions).
        refresh_topic_image()
        current = live_topics()
        if current is None:
            return
        gone = known_topics - current
        known_topics.clear()
        known_topics.update(current)
        if gone:
            coordinator.run_in_background(coordinator.on_topics_deleted(gone))

    def metadata_changed() -> None:
        # Metadata listeners may fire on any thread (kazoo's); after shutdown the loop is gone.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(on_metadata_change)

    metadata.add_listener(metadata_changed)
    coordinator._schedule_cleanup()
    return coordinator

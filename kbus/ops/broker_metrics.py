"""Scrape-time gauges computed from the broker's own state (Kafka's ReplicaManager / GroupMetadataManager
metrics), registered on the process-wide METRICS registry.

Computed on scrape because keeping them current on every append or commit would put work on the hot path for
numbers nobody may ever read. Everything here runs on the broker's event loop, so it reads state without locks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol

from kbus.server.coordinator import GroupCoordinator
from kbus.server.partition.partition import Partition
from kbus.server.util.metrics import METRICS, Metrics

Sample = tuple[dict[str, str], float]


class BrokerView(Protocol):
    """What the metrics and the health check read of a running broker (kbus.server.broker.Broker)."""

    @property
    def broker_id(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...
    @property
    def stopping(self) -> bool: ...
    @property
    def partitions(self) -> Mapping[tuple[str, int], Partition]: ...
    @property
    def group_coordinator(self) -> GroupCoordinator | None: ...
    def controller_id(self) -> int: ...
    def offline_partitions(self) -> int: ...
    def offline_log_dirs(self) -> int: ...
    def get_partition(self, topic: str, index: int) -> Partition | None: ...

# Counters the replication code increments; rendered from startup so dashboards and alerts see 0, not "no data".
ZERO_COUNTERS = ("kbus_isr_shrinks_total", "kbus_isr_expands_total")


def _one(value: float) -> list[Sample]:
    return [({}, float(value))]


def under_replicated(partitions: Iterable[Partition]) -> list[Partition]:
    """Kafka counts a partition as under-replicated on its leader only: fewer in-sync replicas than replicas."""
    return [p for p in partitions if p.is_leader and len(p.state.isr) < len(p.state.replicas)]


def consumer_lag(broker: BrokerView) -> Iterator[Sample]:
    """Lag per group and partition, for partitions this broker leads: high watermark minus committed offset."""
    coordinator = broker.group_coordinator
    if coordinator is None:
        return
    for group in list(coordinator.groups.values()):
        for (topic, index), committed in list(group.offsets.items()):
            part = broker.get_partition(topic, index)
            if part is None or not part.is_leader:
                continue
            lag = max(0, part.high_watermark - committed.offset)
            yield {"group": group.group_id, "topic": topic, "partition": str(index)}, float(lag)


def group_states(broker: BrokerView) -> list[Sample]:
    coordinator = broker.group_coordinator
    if coordinator is None:
        return []
    counts: dict[str, int] = {}
    for group in list(coordinator.groups.values()):
        state = group.state.value
        counts[state] = counts.get(state, 0) + 1
    return [({"state": state}, float(n)) for state, n in sorted(counts.items())]


# Kafka's group-coordinator-metrics: group-count by protocol, consumer-group-count and share-group-count by state;
# every label value is rendered from startup (0 included), as Kafka registers them all up front
GROUP_PROTOCOLS = ("classic", "consumer", "share")
CONSUMER_GROUP_STATES = ("empty", "assigning", "reconciling", "stable", "dead")
SHARE_GROUP_STATES = ("empty", "stable", "dead")


def group_counts(broker: BrokerView) -> list[Sample]:
    """Kafka's `group-count{protocol}`. A consumer-protocol group keeps its committed offsets in an Empty classic
    group of the same id: that one is the consumer group's, not a classic group of its own."""
    coordinator = broker.group_coordinator
    counts = dict.fromkeys(GROUP_PROTOCOLS, 0)
    if coordinator is not None:
        consumer, share = coordinator.consumer_groups, coordinator.share_groups
        counts["classic"] = sum(1 for gid in list(coordinator.groups) if gid not in consumer and gid not in share)
        counts["consumer"] = len(consumer)
        counts["share"] = len(share)
    return [({"protocol": protocol}, float(n)) for protocol, n in counts.items()]


def consumer_group_counts(broker: BrokerView) -> list[Sample]:
    """Kafka's `consumer-group-count{state}`: the consumer-protocol (KIP-848) groups per state."""
    counts = dict.fromkeys(CONSUMER_GROUP_STATES, 0)
    if broker.group_coordinator is not None:
        for group in list(broker.group_coordinator.consumer_groups.values()):
            counts[group.state.value.lower()] += 1
    return [({"state": state}, float(n)) for state, n in counts.items()]


def share_group_counts(broker: BrokerView) -> list[Sample]:
    """Kafka's `share-group-count{state}`: the share groups (KIP-932) per state."""
    counts = dict.fromkeys(SHARE_GROUP_STATES, 0)
    if broker.group_coordinator is not None:
        for group in list(broker.group_coordinator.share_groups.values()):
            counts[group.state.value.lower()] += 1
    return [({"state": state}, float(n)) for state, n in counts.items()]


def register(broker: BrokerView, metrics: Metrics = METRICS) -> None:
    """Attach the broker's gauges (idempotent: a later call replaces the callbacks with the new broker's)."""
    for name in ZERO_COUNTERS:
        metrics.inc(name, 0)

    def partitions() -> list[Partition]:
        return list(broker.partitions.values())

    metrics.gauge(
        "kbus_broker_info",
        lambda: [({"broker_id": str(broker.broker_id), "cluster_id": str(broker.cluster_id or "")}, 1.0)],
        "Constant 1, labelled with this broker's id and cluster id",
    )
    metrics.gauge("kbus_partitions", lambda: _one(len(broker.partitions)), "Partitions hosted on this broker")
    metrics.gauge(
        "kbus_leader_partitions",
        lambda: _one(sum(1 for p in partitions() if p.is_leader)),
        "Partitions this broker leads",
    )
    metrics.gauge(
        "kbus_under_replicated_partitions",
        lambda: _one(len(under_replicated(partitions()))),
        "Led partitions whose ISR is smaller than the replica set",
    )
    metrics.gauge(
        "kbus_active_controller",
        lambda: _one(1 if broker.controller_id() == broker.broker_id else 0),
        "1 if this broker is the active controller",
    )
    metrics.gauge(
        "kbus_offline_partitions",
        # Kafka's OfflinePartitionsCount: reported by the active controller, 0 elsewhere (sum() over brokers)
        lambda: _one(broker.offline_partitions() if broker.controller_id() == broker.broker_id else 0),
        "Partitions without a leader (on the active controller)",
    )
    metrics.gauge(
        "kbus_offline_log_directories",
        lambda: _one(broker.offline_log_dirs()),
        "Log dirs of this broker taken offline by an I/O error (Kafka's OfflineLogDirectoryCount)",
    )
    metrics.gauge(
        "kbus_partition_high_watermark",
        lambda: [({"topic": p.topic, "partition": str(p.index)}, float(p.high_watermark)) for p in partitions()],
        "High watermark per hosted partition",
    )
    metrics.gauge(
        "kbus_partition_log_end_offset",
        lambda: [({"topic": p.topic, "partition": str(p.index)}, float(p.log.log_end_offset)) for p in partitions()],
        "Log end offset per hosted partition",
    )
    metrics.gauge(
        "kbus_partition_isr_size",
        lambda: [({"topic": p.topic, "partition": str(p.index)}, float(len(p.state.isr))) for p in partitions()],
        "In-sync replicas per hosted partition",
    )
    metrics.gauge(
        "kbus_consumer_groups",
        lambda: _one(0 if broker.group_coordinator is None else len(broker.group_coordinator.groups)),
        "Consumer groups this broker coordinates",
    )
    metrics.gauge("kbus_consumer_groups_by_state", lambda: group_states(broker), "Coordinated groups per state")
    metrics.gauge("kbus_group_count", lambda: group_counts(broker),
                  "Coordinated groups per protocol (Kafka's group-coordinator-metrics group-count)")
    metrics.gauge("kbus_consumer_group_count", lambda: consumer_group_counts(broker),
                  "Consumer-protocol (KIP-848) groups per state (Kafka's consumer-group-count)")
    metrics.gauge("kbus_share_group_count", lambda: share_group_counts(broker),
                  "Share groups (KIP-932) per state (Kafka's share-group-count)")
    metrics.gauge(
        "kbus_consumer_group_lag",
        lambda: list(consumer_lag(broker)),
        "High watermark minus committed offset, per group and led partition",
    )

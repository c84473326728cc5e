"""Plain results of admin operations, independent of the client library that produced them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BrokerNode:
    id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int | None  # None: no leader right now (Kafka prints "Leader: none")
    replicas: list[int]
    isr: list[int]


@dataclass(frozen=True)
class TopicDescription:
    name: str
    partitions: list[PartitionDescription]
    topic_id: str | None = None  # None when the broker reports the zero UUID
    is_internal: bool = False
    # Only the entries that differ from the broker's defaults, as kafka-topics prints them.
    configs: dict[str, str] = field(default_factory=dict)
    marked_for_deletion: bool = False

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int | None
    brokers: list[BrokerNode]


@dataclass(frozen=True)
class ConfigSynonym:
    source: str  # Kafka's ConfigSource names: DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, ...
    name: str
    value: str | None


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    is_default: bool = False
    is_sensitive: bool = False
    is_read_only: bool = False
    source: str = "UNKNOWN"
    synonyms: list[ConfigSynonym] = field(default_factory=list)


@dataclass(frozen=True)
class PartitionOffset:
    topic: str
    partition: int
    offset: int
    timestamp: int = -1


@dataclass(frozen=True)
class DeletedRecords:
    topic: str
    partition: int
    low_watermark: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    state: str  # Kafka's names: Empty, Stable, PreparingRebalance, CompletingRebalance, Dead, Unknown
    is_simple: bool = False


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    assignment: list[tuple[str, int]]
    group_instance_id: str | None = None
    # consumer-protocol groups (KIP-848) only
    target_assignment: list[tuple[str, int]] | None = None
    member_epoch: int | None = None


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    partition_assignor: str
    coordinator: BrokerNode | None
    members: list[GroupMember]
    is_simple: bool = False
    group_type: str = "classic"  # or "consumer" (KIP-848)
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None


@dataclass(frozen=True)
class GroupOffset:
    topic: str
    partition: int
    offset: int  # -1: nothing committed
    metadata: str | None = None

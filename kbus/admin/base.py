"""The topic operations every admin back end offers: over the wire (KafkaAdmin) or straight to ZooKeeper
(kbus.admin.zookeeper.ZkTopicAdmin, the way Kafka 2.x's `kafka-topics.sh --zookeeper` worked)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kbus.admin.models import TopicDescription


@runtime_checkable
class TopicAdmin(Protocol):
    """Every method raises `kbus.admin.errors.AdminError` on failure, with Kafka's error name."""

    def list_topics(self) -> list[str]:
        """All topic names, internal ones included, sorted."""
        ...

    def describe_topics(self, names: list[str]) -> list[TopicDescription]:
        """One description per name, in the order given; UNKNOWN_TOPIC_OR_PARTITION if one is missing."""
        ...

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: dict[str, str] | None = None,
        replica_assignment: list[list[int]] | None = None,
    ) -> None:
        """None for partitions / replication_factor means the broker's default."""
        ...

    def delete_topic(self, name: str) -> None: ...

    def create_partitions(self, name: str, total_count: int) -> None:
        """Grow `name` to `total_count` partitions."""
        ...

    def close(self) -> None: ...
